//! Client subcommands (placeholder until the CLI lands).
