//! `kappa token`: create, list and revoke bearer tokens — through a running
//! server's `/v1/tokens` (needs an admin token), or offline on a data
//! directory with `--data-dir` (how the first admin token is made).
//!
//! `create` prints the secret alone on stdout (so `TOKEN=$(kappa token
//! create ...)` works) and what it did on stderr; the secret is shown this
//! once and stored only as its SHA-256.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::json;

use super::http::{segment, Client};
use super::table::{Align, Table};
use crate::auth::store::{NewToken, TokenStore};

/// Token subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TokenCommand {
    /// Create a token and print its secret (shown once).
    Create {
        /// The token's name (letters, digits, '.', '_', '-'), shown in audit logs.
        #[arg(long)]
        name: String,
        /// A grant: admin, metrics, produce:PATTERN, read:PATTERN,
        /// read-view:PATTERN or group:PATTERN (`*` matches any run); repeatable.
        #[arg(long = "grant")]
        grants: Vec<String>,
        /// Shorthand for --grant admin.
        #[arg(long)]
        admin: bool,
        /// Most records per second it may produce (429 with Retry-After beyond).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        produce_rate: Option<u64>,
        /// Work on this data directory instead of a server (offline; the
        /// server picks the change up on its next request).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Print the whole answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List tokens (names and grants, never secrets).
    List {
        /// Work on this data directory instead of a server.
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a token: it stops working at once.
    Revoke {
        /// The token's name.
        name: String,
        /// Work on this data directory instead of a server.
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
}

fn offline(data_dir: &std::path::Path) -> anyhow::Result<TokenStore> {
    TokenStore::open(data_dir, None)
        .with_context(|| format!("opening the token store of {}", data_dir.display()))
}

/// Runs a token subcommand.
pub fn run(client: &Client, command: TokenCommand, out: &mut impl Write) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            name,
            mut grants,
            admin,
            produce_rate,
            data_dir,
            json,
        } => {
            if admin {
                grants.insert(0, "admin".into());
            }
            let created: NewToken = match data_dir {
                Some(dir) => offline(&dir)?.create(&name, &grants, produce_rate)?,
                None => {
                    let request = json!({
                        "name": name,
                        "grants": grants,
                        "produce_records_per_second": produce_rate,
                    });
                    let body = client.post_json("/v1/tokens", &request)?;
                    serde_json::from_str(&body).context("decoding the created token")?
                }
            };
            if json {
                writeln!(out, "{}", serde_json::to_string_pretty(&created)?)?;
            } else {
                writeln!(out, "{}", created.token)?;
                eprintln!(
                    "created token {:?} with grants {}; this is the only time its secret is shown",
                    created.name,
                    created.grants.join(", ")
                );
            }
        }
        TokenCommand::List { data_dir, json } => {
            let tokens: Vec<kappa_wire::admin::TokenInfo> = match data_dir {
                Some(dir) => offline(&dir)?.list(),
                None => {
                    client
                        .get_json::<kappa_wire::admin::TokensOut>("/v1/tokens", &[])?
                        .tokens
                }
            };
            if json {
                writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&json!({"tokens": tokens}))?
                )?;
                return Ok(());
            }
            let mut table = Table::new(&[
                ("NAME", Align::Left),
                ("GRANTS", Align::Left),
                ("SOURCE", Align::Left),
            ]);
            for t in tokens {
                table.row(vec![t.name, t.grants.join(" "), t.source]);
            }
            write!(out, "{}", table.render())?;
        }
        TokenCommand::Revoke { name, data_dir } => {
            match data_dir {
                Some(dir) => offline(&dir)?.revoke(&name)?,
                None => client.delete(&format!("/v1/tokens/{}", segment(&name)))?,
            }
            writeln!(out, "revoked token {name:?}")?;
        }
    }
    Ok(())
}
