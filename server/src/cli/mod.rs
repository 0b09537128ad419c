//! Client subcommands of the `kappa` binary: they call a running server's HTTP
//! API (docs/http-api.md) and print tables for humans, or JSON.
//!
//! Server errors come back as `error: <code>: <message>`; a server that cannot
//! be reached is named by its URL. `demo` is the exception: it runs a server
//! in this process and drives it as a client would.

mod cluster;
pub mod demo;
mod groups;
pub mod http;
mod produce;
mod query;
mod replay;
mod review;
mod sql;
mod suggest;
mod table;
mod tail;
#[cfg(test)]
mod testserver;
mod token;
mod topics;
mod views;

use std::io;

pub use groups::GroupsCommand;
pub use produce::ProduceArgs;
pub use query::QueryArgs;
pub use replay::{ReplayArgs, ReplayFrom};
pub use sql::SqlArgs;
pub use tail::TailArgs;
pub use token::TokenCommand;
pub use topics::TopicsCommand;
pub use views::ViewsArgs;

/// An error whose message was already printed (e.g. a failed SQL statement):
/// the command exits non-zero without printing it again.
#[derive(Debug)]
pub struct Reported;

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a statement failed")
    }
}

impl std::error::Error for Reported {}

/// Client subcommands: they talk to a running server over HTTP.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Manage topics.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Produce NDJSON records, or bare JSON values (--raw), from stdin or a file.
    Produce(ProduceArgs),
    /// Print records as they arrive.
    Tail(TailArgs),
    /// Consumer groups.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// SQL shell: run statements typed, piped, given with -e or in a file (-f).
    Sql(SqlArgs),
    /// List views, or describe one: versions, build progress, lag, failure.
    Views(ViewsArgs),
    /// Read a view's rows: one key (and its windows), a prefix, or all.
    Query(QueryArgs),
    /// Rebuild a view from the start of its input (or a time) and follow the build.
    Replay(ReplayArgs),
    /// How a view's version being built (or --candidate) differs from the served one (or --base).
    Diff {
        /// The view.
        view: String,
        /// Base version [default: the served one].
        #[arg(long)]
        base: Option<u64>,
        /// Candidate version [default: the one being built].
        #[arg(long)]
        candidate: Option<u64>,
        /// Most differences to print.
        #[arg(long, default_value_t = 20)]
        limit: u64,
    },
    /// Serve the version being built now (a `SWAP='MANUAL'` build waiting in `ready`).
    Promote {
        /// The view.
        view: String,
    },
    /// Serve the previous version again while it is kept.
    Rollback {
        /// The view.
        view: String,
    },
    /// Bearer tokens: create, list, revoke (README, "Security").
    #[command(subcommand)]
    Token(TokenCommand),
    /// The Kappa cluster the server belongs to: its nodes and the partitions each owns.
    Cluster {
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs a client command against the server `options` names.
pub fn run(options: &http::ClientOptions, command: ClientCommand) -> anyhow::Result<()> {
    let client = http::Client::connect(options)?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let named = command.named();
    let result = match command {
        ClientCommand::Topics(command) => topics::run(&client, command, &mut out),
        ClientCommand::Produce(args) => produce::run(&client, args, &mut out),
        ClientCommand::Tail(args) => tail::run(&client, args, &mut out),
        ClientCommand::Groups(command) => groups::run(&client, command, &mut out),
        ClientCommand::Sql(args) => sql::run(&client, args, &mut out),
        ClientCommand::Views(args) => views::run(&client, args, &mut out),
        ClientCommand::Query(args) => query::run(&client, args, &mut out),
        ClientCommand::Replay(args) => replay::run(&client, args, &mut out),
        ClientCommand::Diff {
            view,
            base,
            candidate,
            limit,
        } => review::diff(&client, &view, base, candidate, limit, &mut out),
        ClientCommand::Promote { view } => review::run(&client, &view, "promote", &mut out),
        ClientCommand::Rollback { view } => review::run(&client, &view, "rollback", &mut out),
        ClientCommand::Token(command) => token::run(&client, command, &mut out),
        ClientCommand::Cluster { json } => cluster::run(&client, json, &mut out),
    };
    match named {
        Some(named) => result.map_err(|e| suggest::unknown(&client, &named, e)),
        None => result,
    }
}

impl ClientCommand {
    /// The view or topic this command names, if any: an error saying it
    /// does not exist gets the closest existing names.
    fn named(&self) -> Option<suggest::Named> {
        use suggest::Named;
        match self {
            ClientCommand::Views(args) => args.name.clone().map(Named::View),
            ClientCommand::Query(args) => Some(Named::View(args.view.clone())),
            ClientCommand::Replay(args) => Some(Named::View(args.view.clone())),
            ClientCommand::Diff { view, .. }
            | ClientCommand::Promote { view }
            | ClientCommand::Rollback { view } => Some(Named::View(view.clone())),
            ClientCommand::Produce(args) => Some(Named::Topic(args.topic.clone())),
            ClientCommand::Tail(args) => Some(Named::Topic(args.topic.clone())),
            ClientCommand::Topics(command) => command.topic().map(|t| Named::Topic(t.to_string())),
            ClientCommand::Groups(_)
            | ClientCommand::Sql(_)
            | ClientCommand::Token(_)
            | ClientCommand::Cluster { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        command: ClientCommand,
    }

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_each_subcommand() {
        let parse = |args: &str| Cli::try_parse_from(format!("kappa {args}").split(' '));
        assert!(parse("topics list --json").is_ok());
        assert!(parse("topics describe orders").is_ok());
        assert!(parse("produce orders --batch 0").is_err());
        assert!(parse("produce orders --file x.ndjson --idempotency-prefix p").is_ok());
        assert!(parse("tail orders --from earliest --max 10 --no-follow").is_ok());
        assert!(parse("groups offsets g --topic orders --json").is_ok());
        assert!(parse("groups reset g --topic orders --to offset:5").is_ok());
        assert!(parse("groups reset g --to latest").is_err());
        assert!(parse("sql").is_ok());
        assert!(parse("sql -e SHOW").is_ok());
        assert!(parse("sql -f x.sql").is_ok());
        assert!(parse("sql -e SHOW -f x.sql").is_err());
        assert!(parse("views").is_ok());
        assert!(parse("views purchase_stats --json").is_ok());
        assert!(
            parse("query v k --from 0 --to 2026-01-01T00:00:00Z --limit 5 --version 2").is_ok()
        );
        assert!(parse("query v --from 0").is_err());
        assert!(parse("query v k --prefix p").is_err());
        assert!(parse("query v --prefix p --json").is_ok());
        assert!(parse("query v k --after 0:17,2:5").is_ok());
        assert!(parse("query v k --after 0:17 --version 2").is_err());
        assert!(parse("replay v").is_ok());
        assert!(parse("replay v --from 2026-01-01T00:00:00Z --no-wait").is_ok());
        assert!(parse("replay v --from yesterday").is_err());
    }

    #[test]
    fn run_names_an_unreachable_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let list = ClientCommand::Topics(TopicsCommand::List { json: false });
        let options = http::ClientOptions {
            url: url.clone(),
            ..http::ClientOptions::default()
        };
        let error = run(&options, list).unwrap_err().to_string();
        assert!(
            error.contains(&url) && error.contains("kappa serve"),
            "{error}"
        );
    }
}
