//! The command line: subcommands, the data set, the scenarios and the
//! runtime options.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::{Deserialize, Serialize};

#[derive(Debug, Parser)]
#[command(
    name = "kappa-processor-bench",
    about = "End-to-end throughput of kappa-processor: windowed COUNT/SUM by key over a log of \
             JSON events (read, decode, aggregate, commit). Progress on stderr."
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Cmd,
}

#[derive(Debug, Subcommand)]
pub(super) enum Cmd {
    /// Writes the input log (topic `events`) under DIR/log.
    Generate(GenerateArgs),
    /// One run of one scenario, on a fresh state store.
    Run(RunArgs),
    /// generate (unless DIR holds the same data) + every case, as child
    /// processes; Markdown on stdout.
    Suite(SuiteArgs),
}

#[derive(Debug, Clone, Args)]
pub(super) struct DataArgs {
    /// Events to generate.
    #[arg(long, default_value_t = 10_000_000)]
    pub(super) events: u64,
    /// Distinct users (group keys), uniformly distributed.
    #[arg(long, default_value_t = 100_000)]
    pub(super) keys: u64,
    /// Bytes of each JSON value (padded with a "pad" field).
    #[arg(long, default_value_t = 100)]
    pub(super) value_bytes: usize,
    /// Most an event's time lags behind the newest one before it (ms); also
    /// the plans' max out-of-orderness, so no event is late.
    #[arg(long, default_value_t = 20)]
    pub(super) disorder_ms: i64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    pub(super) seed: u64,
}

#[derive(Debug, Args)]
pub(super) struct GenerateArgs {
    /// Benchmark directory; the log goes to DIR/log (which must not exist).
    #[arg(long)]
    pub(super) dir: PathBuf,
    #[command(flatten)]
    pub(super) data: DataArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Scenario {
    /// Baseline: read every record of the log, nothing else.
    LogRead,
    /// Baseline: read + `serde_json::from_slice::<Value>` of every value
    /// (what the runtime's decode does) + look up the three used fields.
    JsonValue,
    /// Baseline: read + decode only `user`, `amount`, `ts` into a struct.
    JsonFields,
    /// Baseline: read + the processor's field decoder
    /// (`kappa_processor::event::decode_fields`) for `user`, `amount`, `ts`.
    DecodeFields,
    /// Baseline: `decode-fields` through serde_json alone (the decoder's
    /// reference, without its fast path).
    DecodeFieldsSerde,
    /// Tumbling 5 min COUNT(*), SUM(amount) by user.
    Tumbling,
    /// `tumbling` behind `WHERE user <> ''` (every event passes): the cost
    /// of a string comparison filter, as in the seed's `event_type = 'purchase'`.
    TumblingWhere,
    /// Hopping 10 min every 1 min, COUNT(*), SUM(amount) by user.
    Hopping,
    /// Session windows (gap --session-gap-secs), COUNT(*), SUM(amount) by user.
    Session,
}

impl Scenario {
    pub(super) fn name(self) -> &'static str {
        match self {
            Scenario::LogRead => "log-read",
            Scenario::JsonValue => "json-value",
            Scenario::JsonFields => "json-fields",
            Scenario::DecodeFields => "decode-fields",
            Scenario::DecodeFieldsSerde => "decode-fields-serde",
            Scenario::Tumbling => "tumbling",
            Scenario::TumblingWhere => "tumbling-where",
            Scenario::Hopping => "hopping",
            Scenario::Session => "session",
        }
    }

    pub(super) fn is_baseline(self) -> bool {
        matches!(
            self,
            Scenario::LogRead
                | Scenario::JsonValue
                | Scenario::JsonFields
                | Scenario::DecodeFields
                | Scenario::DecodeFieldsSerde
        )
    }
}

#[derive(Debug, Clone, Args)]
pub(super) struct RuntimeArgs {
    /// Gap of the session scenario, seconds.
    #[arg(long, default_value_t = 300)]
    pub(super) session_gap_secs: u64,
    /// `RunOptions::commit_interval_ms` [default: the runtime's].
    #[arg(long)]
    pub(super) commit_interval_ms: Option<u64>,
    /// `RunOptions::max_poll_records` [default: the runtime's].
    #[arg(long)]
    pub(super) max_poll_records: Option<u64>,
}

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// Benchmark directory holding DIR/log (from `generate`); the state
    /// store is created under it and removed after the run.
    #[arg(long)]
    pub(super) dir: PathBuf,
    #[arg(long, value_enum)]
    pub(super) scenario: Scenario,
    /// `RunOptions::state_cache_entries` [default: the runtime's].
    #[arg(long)]
    pub(super) cache_entries: Option<usize>,
    #[command(flatten)]
    pub(super) runtime: RuntimeArgs,
    /// Keep the state store directory after the run.
    #[arg(long)]
    pub(super) keep_state: bool,
    /// Print the result as one JSON line (for `suite`).
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Args)]
pub(super) struct SuiteArgs {
    /// Benchmark directory (created if missing).
    #[arg(long)]
    pub(super) dir: PathBuf,
    #[command(flatten)]
    pub(super) data: DataArgs,
    /// Cases to run: a scenario, or `scenario:cache_entries` for a state
    /// cache of that many entries.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "log-read,json-value,json-fields,decode-fields,tumbling,hopping,session,tumbling:10000"
    )]
    pub(super) cases: Vec<String>,
    /// Runs per case; the median is reported with the min and max.
    #[arg(long, default_value_t = 3)]
    pub(super) runs: usize,
    /// A case whose first run takes longer than this gets no more runs.
    #[arg(long, default_value_t = 120)]
    pub(super) max_run_secs: u64,
    #[command(flatten)]
    pub(super) runtime: RuntimeArgs,
    /// Also write the Markdown to this file.
    #[arg(long)]
    pub(super) output: Option<PathBuf>,
}
