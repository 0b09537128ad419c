//! `kappa-processor-bench`: end-to-end throughput of `kappa-processor` (the
//! binary `src/bin/kappa-processor-bench.rs` calls [`main`]).
//!
//! From a log of JSON events (`{"user":"u123","amount":57,"ts":<ms>,"pad":"…"}`,
//! about 100 bytes each, uniformly spread over `--keys` users, event times
//! 1 ms apart with a little disorder), a `Runtime` runs a windowed
//! `COUNT(*)` / `SUM(amount)` by user into a view, from the first record to
//! the last: read the log, decode, aggregate, commit (state, view rows,
//! offsets and watermark in one RocksDB write every commit interval), plus
//! the final commit.
//!
//! Subcommands:
//!
//! * `generate --dir D --events N --keys K`: writes topic `events` (one
//!   partition, fsync never) under `D/log`, and `D/generated.json`.
//! * `run --dir D --scenario S [--cache-entries N]`: one run on a fresh
//!   state store under `D`; prints events/s, time, state size and peak RSS
//!   (or one JSON line with `--json`). Scenarios `tumbling` (5 min),
//!   `hopping` (10 min every 1 min) and `session` (gap `--session-gap-secs`)
//!   run the processor; `log-read`, `json-value`, `json-fields`,
//!   `decode-fields` and `decode-fields-serde` are baselines without it
//!   (read the log; plus decode every value into a `serde_json::Value`;
//!   plus decode only the three fields the plan uses, into a struct, or
//!   with the processor's decoder, or with that decoder's serde_json-only
//!   reference).
//! * `suite --dir D [--events N]`: `generate` (unless `D` already holds the
//!   same data), then every case as a child process of this binary (so peak
//!   RSS is per case), `--runs` times each; Markdown on stdout.
//!
//! Progress goes to stderr.
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-processor-bench -- suite --dir /var/tmp/kpb
//! ```
//!
//! Modules: `args` (the command line), `generate`, `run`, `suite` and
//! `report` (the Markdown).

mod args;
mod generate;
mod report;
mod run;
mod suite;
#[cfg(test)]
mod tests;

use std::time::Duration;

use anyhow::Result;
use clap::Parser;

use args::{Cli, Cmd};

/// The input topic.
pub(super) const TOPIC: &str = "events";
/// Event time of the first event: 2023-11-14T22:13:20Z.
pub(super) const FIRST_EVENT_MS: i64 = 1_700_000_000_000;
/// Records per append when generating (one log batch).
pub(super) const GENERATE_BATCH: usize = 1000;
/// Records per `Partition::read` of the baselines (the runtime's default poll).
pub(super) const BASELINE_POLL_RECORDS: u64 = 5000;
/// Bytes per `Partition::read` of the baselines (the runtime's).
pub(super) const BASELINE_POLL_BYTES: u64 = 4 << 20;
/// Seconds between progress lines.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// File describing what `generate` wrote.
pub(super) const GENERATED_META: &str = "generated.json";

/// Parses the command line and runs the subcommand.
pub fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match Cli::parse().command {
        Cmd::Generate(g) => {
            generate::generate(&g.dir, &g.data)?;
        }
        Cmd::Run(r) => {
            let result = run::run(&r)?;
            if r.json {
                println!("{}", serde_json::to_string(&result).expect("serializes"));
            } else {
                run::print_run(&result);
            }
        }
        Cmd::Suite(s) => suite::suite(&s, &argv)?,
    }
    Ok(())
}
