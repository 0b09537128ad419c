//! Client subcommands of the `kappa` binary: they call a running server's HTTP
//! API (docs/http-api.md) and print tables for humans, or JSON.
//!
//! Server errors come back as `error: <code>: <message>`; a server that cannot
//! be reached is named by its URL.

mod groups;
mod http;
mod produce;
mod table;
mod tail;
#[cfg(test)]
mod testserver;
mod topics;

use std::io;

pub use groups::GroupsCommand;
pub use produce::ProduceArgs;
pub use tail::TailArgs;
pub use topics::TopicsCommand;

/// Client subcommands: they talk to a running server over HTTP.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Manage topics.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Produce NDJSON records from stdin or a file.
    Produce(ProduceArgs),
    /// Print records as they arrive.
    Tail(TailArgs),
    /// Consumer groups.
    #[command(subcommand)]
    Groups(GroupsCommand),
}

/// Runs a client command against the server at `url` (e.g. "http://127.0.0.1:8080").
pub fn run(url: &str, command: ClientCommand) -> anyhow::Result<()> {
    let client = http::Client::new(url);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    match command {
        ClientCommand::Topics(command) => topics::run(&client, command, &mut out),
        ClientCommand::Produce(args) => produce::run(&client, args, &mut out),
        ClientCommand::Tail(args) => tail::run(&client, args, &mut out),
        ClientCommand::Groups(command) => groups::run(&client, command, &mut out),
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
    }

    #[test]
    fn run_names_an_unreachable_server() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        drop(listener);
        let list = ClientCommand::Topics(TopicsCommand::List { json: false });
        let error = run(&url, list).unwrap_err().to_string();
        assert!(
            error.contains(&url) && error.contains("kappa serve"),
            "{error}"
        );
    }
}
