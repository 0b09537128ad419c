//! `kappa-processor-bench`: end-to-end throughput of `kappa-processor`.
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
//!   run the processor; `log-read`, `json-value` and `json-fields` are
//!   baselines without it (read the log; plus decode every value into a
//!   `serde_json::Value`; plus decode only the three fields the plan uses).
//! * `suite --dir D [--events N]`: `generate` (unless `D` already holds the
//!   same data), then every case as a child process of this binary (so peak
//!   RSS is per case), `--runs` times each; Markdown on stdout.
//!
//! Progress goes to stderr.
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-processor-bench -- suite --dir /var/tmp/kpb
//! ```

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context, Result};
use bytes::Bytes;
use clap::{Args, Parser, Subcommand, ValueEnum};
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, NewRecord, TopicConfig};
use kappa_processor::dsl::{self, Hopping, Pipeline, Session, Tumbling};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::runner::{RunOptions, Runtime};
use kappa_processor::state::store::Store;
use kappa_tools::bench::report::{compact_range, thousands};
use kappa_tools::bench::stats::Spread;
use kappa_tools::machine::{
    cpu_model, filesystem, kernel, load_average, memory, shell_quote, today,
};
use serde::{Deserialize, Serialize};

/// The input topic.
const TOPIC: &str = "events";
/// Event time of the first event: 2023-11-14T22:13:20Z.
const FIRST_EVENT_MS: i64 = 1_700_000_000_000;
/// Records per append when generating (one log batch).
const GENERATE_BATCH: usize = 1000;
/// Records per `Partition::read` of the baselines (the runtime's default poll).
const BASELINE_POLL_RECORDS: u64 = 5000;
/// Bytes per `Partition::read` of the baselines (the runtime's).
const BASELINE_POLL_BYTES: u64 = 4 << 20;
/// Seconds between progress lines.
const PROGRESS_EVERY: Duration = Duration::from_secs(10);
/// File describing what `generate` wrote.
const GENERATED_META: &str = "generated.json";

#[derive(Debug, Parser)]
#[command(
    name = "kappa-processor-bench",
    about = "End-to-end throughput of kappa-processor: windowed COUNT/SUM by key over a log of \
             JSON events (read, decode, aggregate, commit). Progress on stderr."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Writes the input log (topic `events`) under DIR/log.
    Generate(GenerateArgs),
    /// One run of one scenario, on a fresh state store.
    Run(RunArgs),
    /// generate (unless DIR holds the same data) + every case, as child
    /// processes; Markdown on stdout.
    Suite(SuiteArgs),
}

#[derive(Debug, Clone, Args)]
struct DataArgs {
    /// Events to generate.
    #[arg(long, default_value_t = 10_000_000)]
    events: u64,
    /// Distinct users (group keys), uniformly distributed.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes of each JSON value (padded with a "pad" field).
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Most an event's time lags behind the newest one before it (ms); also
    /// the plans' max out-of-orderness, so no event is late.
    #[arg(long, default_value_t = 20)]
    disorder_ms: i64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

#[derive(Debug, Args)]
struct GenerateArgs {
    /// Benchmark directory; the log goes to DIR/log (which must not exist).
    #[arg(long)]
    dir: PathBuf,
    #[command(flatten)]
    data: DataArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum Scenario {
    /// Baseline: read every record of the log, nothing else.
    LogRead,
    /// Baseline: read + `serde_json::from_slice::<Value>` of every value
    /// (what the runtime's decode does) + look up the three used fields.
    JsonValue,
    /// Baseline: read + decode only `user`, `amount`, `ts` into a struct.
    JsonFields,
    /// Tumbling 5 min COUNT(*), SUM(amount) by user.
    Tumbling,
    /// Hopping 10 min every 1 min, COUNT(*), SUM(amount) by user.
    Hopping,
    /// Session windows (gap --session-gap-secs), COUNT(*), SUM(amount) by user.
    Session,
}

impl Scenario {
    fn name(self) -> &'static str {
        match self {
            Scenario::LogRead => "log-read",
            Scenario::JsonValue => "json-value",
            Scenario::JsonFields => "json-fields",
            Scenario::Tumbling => "tumbling",
            Scenario::Hopping => "hopping",
            Scenario::Session => "session",
        }
    }

    fn is_baseline(self) -> bool {
        matches!(
            self,
            Scenario::LogRead | Scenario::JsonValue | Scenario::JsonFields
        )
    }
}

#[derive(Debug, Clone, Args)]
struct RuntimeArgs {
    /// Gap of the session scenario, seconds.
    #[arg(long, default_value_t = 300)]
    session_gap_secs: u64,
    /// `RunOptions::commit_interval_ms` [default: the runtime's].
    #[arg(long)]
    commit_interval_ms: Option<u64>,
    /// `RunOptions::max_poll_records` [default: the runtime's].
    #[arg(long)]
    max_poll_records: Option<u64>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Benchmark directory holding DIR/log (from `generate`); the state
    /// store is created under it and removed after the run.
    #[arg(long)]
    dir: PathBuf,
    #[arg(long, value_enum)]
    scenario: Scenario,
    /// `RunOptions::state_cache_entries` [default: the runtime's].
    #[arg(long)]
    cache_entries: Option<usize>,
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Keep the state store directory after the run.
    #[arg(long)]
    keep_state: bool,
    /// Print the result as one JSON line (for `suite`).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SuiteArgs {
    /// Benchmark directory (created if missing).
    #[arg(long)]
    dir: PathBuf,
    #[command(flatten)]
    data: DataArgs,
    /// Cases to run: a scenario, or `scenario:cache_entries` for a state
    /// cache of that many entries.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "log-read,json-value,json-fields,tumbling,hopping,session,tumbling:10000"
    )]
    cases: Vec<String>,
    /// Runs per case; the median is reported with the min and max.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// A case whose first run takes longer than this gets no more runs.
    #[arg(long, default_value_t = 120)]
    max_run_secs: u64,
    #[command(flatten)]
    runtime: RuntimeArgs,
    /// Also write the Markdown to this file.
    #[arg(long)]
    output: Option<PathBuf>,
}

// ------------------------------------------------------------- generate

/// What `generate` wrote (DIR/generated.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Generated {
    events: u64,
    keys: u64,
    value_bytes: usize,
    disorder_ms: i64,
    seed: u64,
    /// Mean bytes of a value.
    mean_value_bytes: f64,
    first_event_ms: i64,
    last_event_ms: i64,
    /// Bytes of the partition's files.
    log_bytes: u64,
    secs: f64,
}

impl Generated {
    fn matches(&self, d: &DataArgs) -> bool {
        (
            self.events,
            self.keys,
            self.value_bytes,
            self.disorder_ms,
            self.seed,
        ) == (d.events, d.keys, d.value_bytes, d.disorder_ms, d.seed)
    }
}

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0; the modulo bias is negligible here).
    fn below(&mut self, n: u64) -> u64 {
        (self.next() >> 11) % n
    }
}

/// Event `i`: (user, amount, event time).
fn event_fields(rng: &mut Rng, i: u64, d: &DataArgs) -> (u64, u64, i64) {
    let user = rng.below(d.keys);
    let amount = 1 + rng.below(100);
    let lag = if d.disorder_ms > 0 {
        rng.below(d.disorder_ms as u64 + 1) as i64
    } else {
        0
    };
    (user, amount, FIRST_EVENT_MS + i as i64 - lag)
}

/// The JSON value of an event, padded to `value_bytes` when it is shorter.
fn event_json(user: u64, amount: u64, ts: i64, value_bytes: usize, rng: &mut Rng) -> String {
    let head = format!(r#"{{"user":"u{user}","amount":{amount},"ts":{ts},"pad":""#);
    let tail = "\"}";
    let pad = value_bytes.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(head.len() + pad + tail.len());
    s.push_str(&head);
    for _ in 0..pad {
        s.push(char::from(b'a' + rng.below(26) as u8));
    }
    s.push_str(tail);
    s
}

fn generate(dir: &Path, d: &DataArgs) -> Result<Generated> {
    ensure!(d.events >= 1, "--events must be at least 1");
    ensure!(d.keys >= 1, "--keys must be at least 1");
    ensure!(d.disorder_ms >= 0, "--disorder-ms must not be negative");
    let log_dir = dir.join("log");
    ensure!(
        !log_dir.exists(),
        "{} exists: remove it first (the suite does when its data differs)",
        log_dir.display()
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let log = Log::open(LogConfig::new(&log_dir))?;
    let topic = log.create_topic(
        TOPIC,
        TopicConfig {
            partitions: 1,
            fsync: FsyncPolicy::Never,
            retention_ms: None,
            ..Default::default()
        },
    )?;
    let partition = topic.partition(0)?;
    let mut rng = Rng::new(d.seed);
    let (mut value_total, mut first, mut last) = (0u64, i64::MAX, i64::MIN);
    let started = Instant::now();
    let mut reported = Instant::now();
    let mut i = 0u64;
    while i < d.events {
        let n = (d.events - i).min(GENERATE_BATCH as u64);
        let mut records = Vec::with_capacity(n as usize);
        for j in i..i + n {
            let (user, amount, ts) = event_fields(&mut rng, j, d);
            first = first.min(ts);
            last = last.max(ts);
            let value = event_json(user, amount, ts, d.value_bytes, &mut rng);
            value_total += value.len() as u64;
            records.push(NewRecord::value(Bytes::from(value)));
        }
        rt.block_on(partition.append(AppendRequest {
            records,
            idempotency_key: None,
        }))?;
        i += n;
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            eprintln!(
                "generate: {} / {} events ({:.0} events/s)",
                thousands(i as f64),
                thousands(d.events as f64),
                i as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    ensure!(
        partition.end_offset() == d.events,
        "the partition ends at {}",
        partition.end_offset()
    );
    log.close();
    let secs = started.elapsed().as_secs_f64();
    drop(topic);
    drop(log);
    let g = Generated {
        events: d.events,
        keys: d.keys,
        value_bytes: d.value_bytes,
        disorder_ms: d.disorder_ms,
        seed: d.seed,
        mean_value_bytes: value_total as f64 / d.events as f64,
        first_event_ms: first,
        last_event_ms: last,
        log_bytes: dir_bytes(&log_dir.join("topics").join(TOPIC)),
        secs,
    };
    std::fs::write(
        dir.join(GENERATED_META),
        serde_json::to_vec_pretty(&g).expect("serializes"),
    )
    .context("writing generated.json")?;
    eprintln!(
        "generate: {} events ({:.1} value bytes on average, {} MB of log) in {secs:.1}s",
        thousands(d.events as f64),
        g.mean_value_bytes,
        thousands(g.log_bytes as f64 / 1e6)
    );
    Ok(g)
}

fn read_generated(dir: &Path) -> Option<Generated> {
    let bytes = std::fs::read(dir.join(GENERATED_META)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

// ------------------------------------------------------------------ run

/// One run's measurements (the JSON line of `run --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RunResult {
    scenario: Scenario,
    /// `state_cache_entries` (the runtime's default when not given).
    cache_entries: usize,
    events: u64,
    /// From the first poll to the end of the final commit.
    secs: f64,
    /// User + system CPU of the whole process during `secs`.
    cpu_secs: f64,
    /// CPU time of the processing thread during `secs` (schedstat).
    thread_cpu_secs: f64,
    /// Time the processing thread was runnable but waiting for a CPU
    /// (schedstat): how much other load on the machine slowed the run.
    thread_wait_secs: f64,
    /// Time inside `Runtime::commit`.
    commit_secs: f64,
    commits: u64,
    polls: u64,
    /// `Log::open` + `Runtime::open`.
    open_secs: f64,
    /// Bytes of every file of the state store directory after the final commit.
    state_dir_bytes: u64,
    /// RocksDB's estimate of live data + memtables, operator state CF.
    state_cf_bytes: u64,
    /// The same for the view CF (the rows).
    view_cf_bytes: u64,
    /// VmHWM at the end: peak resident set, including mapped log segments.
    peak_rss_bytes: u64,
    /// Peak of RssAnon, sampled before and after every commit and at the end.
    peak_anon_bytes: u64,
    /// RssFile at the end (mapped log segments, RocksDB files).
    file_rss_bytes: u64,
    /// Rows written to the view (puts and deletes).
    output_rows: u64,
    late: u64,
    invalid: u64,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }

    /// Events per CPU-second of the whole process.
    fn cpu_rate(&self) -> f64 {
        self.events as f64 / self.cpu_secs.max(1e-9)
    }

    /// Events per CPU-second of the processing thread: the per-core rate
    /// with the time spent waiting for a busy CPU taken out.
    fn thread_rate(&self) -> f64 {
        self.events as f64 / self.thread_cpu_secs.max(1e-9)
    }
}

/// The plan of a processor scenario.
fn plan(scenario: Scenario, disorder_ms: i64, session_gap: Duration) -> Plan {
    let window = match scenario {
        Scenario::Tumbling => Tumbling::of(Duration::from_secs(300)),
        Scenario::Hopping => Hopping::of(Duration::from_secs(600), Duration::from_secs(60)),
        Scenario::Session => Session::with_gap(session_gap),
        _ => unreachable!("baselines have no plan"),
    };
    Pipeline::from_topic(TOPIC)
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_millis(disorder_ms.max(0) as u64))
        .key_by([("user", Expr::field("user"))])
        .window(window)
        .aggregate([dsl::count("n"), dsl::sum("total", Expr::field("amount"))])
        .to_view(scenario.name())
}

/// A plan's text for the report.
fn plan_text(scenario: Scenario, session_gap_secs: u64) -> String {
    let agg = "COUNT(*), SUM(amount) GROUP BY user";
    match scenario {
        Scenario::LogRead => "read only".into(),
        Scenario::JsonValue => "read + decode to `serde_json::Value`".into(),
        Scenario::JsonFields => "read + decode `user`, `amount`, `ts` only".into(),
        Scenario::Tumbling => format!("TUMBLING 5 min, {agg}"),
        Scenario::Hopping => format!("HOPPING 10 min / 1 min, {agg}"),
        Scenario::Session => format!("SESSION gap {}, {agg}", duration_text(session_gap_secs)),
    }
}

fn duration_text(secs: u64) -> String {
    let (minutes, rest) = (secs / 60, secs % 60);
    if rest == 0 {
        format!("{minutes} min")
    } else {
        format!("{secs} s")
    }
}

/// Process and thread CPU (user + system) and memory, from /proc.
mod procfs {
    /// Clock ticks per second of /proc/*/stat (USER_HZ; 100 on Linux).
    const TICKS_PER_SEC: f64 = 100.0;

    fn stat_cpu_secs(path: &str) -> f64 {
        let Ok(s) = std::fs::read_to_string(path) else {
            return 0.0;
        };
        // Fields after "(comm)": state is field 3, utime 14, stime 15.
        let Some((_, rest)) = s.rsplit_once(')') else {
            return 0.0;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
        (ticks(11) + ticks(12)) / TICKS_PER_SEC
    }

    /// CPU seconds of the whole process.
    pub fn process_cpu_secs() -> f64 {
        stat_cpu_secs("/proc/self/stat")
    }

    /// (on-CPU, waiting-for-a-CPU) seconds of the calling thread, from
    /// schedstat (nanoseconds); falls back to stat ticks without schedstat.
    pub fn thread_sched_secs() -> (f64, f64) {
        let parsed = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| {
                let mut f = s.split_whitespace().map(|v| v.parse::<f64>().ok());
                Some((f.next()?? / 1e9, f.next()?? / 1e9))
            });
        parsed.unwrap_or_else(|| (stat_cpu_secs("/proc/thread-self/stat"), 0.0))
    }

    /// A `/proc/self/status` field in bytes (its value is in kB).
    pub fn status_bytes(field: &str) -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with(field))?;
                let kb: u64 = line[field.len()..]
                    .trim_start_matches(':')
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()?;
                Some(kb * 1024)
            })
            .unwrap_or(0)
    }
}

/// Bytes of every file under `path`.
fn dir_bytes(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// A fresh directory for one run's state store.
fn state_dir(parent: &Path, scenario: Scenario) -> Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let path = parent.join(format!(
        "state-{}-{}-{nanos:09}",
        scenario.name(),
        std::process::id()
    ));
    std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(path)
}

fn run(a: &RunArgs) -> Result<RunResult> {
    let generated = read_generated(&a.dir).with_context(|| {
        format!(
            "no {GENERATED_META} in {}: run `generate` first",
            a.dir.display()
        )
    })?;
    let mut options = RunOptions::default();
    if let Some(c) = a.cache_entries {
        options.state_cache_entries = c;
    }
    if let Some(c) = a.runtime.commit_interval_ms {
        options.commit_interval_ms = c;
    }
    if let Some(m) = a.runtime.max_poll_records {
        options.max_poll_records = m;
    }
    let opening = Instant::now();
    let log = Arc::new(Log::open(LogConfig::new(a.dir.join("log")))?);
    let source = log.topic(TOPIC)?;
    let ends: Vec<u64> = source.partitions().iter().map(|p| p.end_offset()).collect();
    let total: u64 = ends.iter().sum();
    ensure!(
        total == generated.events,
        "the log holds {total} events, {GENERATED_META} says {}",
        generated.events
    );
    let result = if a.scenario.is_baseline() {
        let open_secs = opening.elapsed().as_secs_f64();
        run_baseline(a.scenario, &log, open_secs, options.state_cache_entries)?
    } else {
        let dir = state_dir(&a.dir, a.scenario)?;
        let r = run_processor(a, &generated, &log, &dir, options, opening);
        if a.keep_state {
            eprintln!("state kept in {}", dir.display());
        } else if let Err(e) = std::fs::remove_dir_all(&dir) {
            eprintln!("warning: could not remove {}: {e}", dir.display());
        }
        r?
    };
    drop(source);
    log.close();
    Ok(result)
}

fn run_processor(
    a: &RunArgs,
    generated: &Generated,
    log: &Arc<Log>,
    dir: &Path,
    options: RunOptions,
    opening: Instant,
) -> Result<RunResult> {
    let cache_entries = options.state_cache_entries;
    let plan = plan(
        a.scenario,
        generated.disorder_ms,
        Duration::from_secs(a.runtime.session_gap_secs),
    );
    let store = Arc::new(Store::open(dir)?);
    let mut rt = Runtime::open(plan, 1, log.clone(), store.clone(), options)?;
    let open_secs = opening.elapsed().as_secs_f64();
    let ends: Vec<u64> = log
        .topic(TOPIC)?
        .partitions()
        .iter()
        .map(|p| p.end_offset())
        .collect();
    let total: u64 = ends.iter().sum();
    let label = match a.cache_entries {
        Some(c) => format!("{} cache={c}", a.scenario.name()),
        None => a.scenario.name().to_string(),
    };
    let (mut polls, mut commits, mut idle_polls) = (0u64, 0u64, 0u32);
    let mut commit_time = Duration::ZERO;
    let mut peak_anon = procfs::status_bytes("RssAnon");
    let cpu0 = procfs::process_cpu_secs();
    let (thread_cpu0, thread_wait0) = procfs::thread_sched_secs();
    let started = Instant::now();
    let mut reported = Instant::now();
    while rt.positions() != ends.as_slice() {
        let n = rt.poll_once()?;
        polls += 1;
        if n == 0 {
            idle_polls += 1;
            ensure!(
                idle_polls < 1000,
                "no progress at positions {:?} (ends {ends:?})",
                rt.positions()
            );
        } else {
            idle_polls = 0;
        }
        if rt.commit_due() {
            // Dirty state peaks just before a commit, clean cache after it.
            peak_anon = peak_anon.max(procfs::status_bytes("RssAnon"));
            let t = Instant::now();
            rt.commit()?;
            commit_time += t.elapsed();
            commits += 1;
            peak_anon = peak_anon.max(procfs::status_bytes("RssAnon"));
        }
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            let done: u64 = rt.positions().iter().sum();
            eprintln!(
                "  {label}: {} / {} events, {:.0} events/s, anon RSS {} MB",
                thousands(done as f64),
                thousands(total as f64),
                done as f64 / started.elapsed().as_secs_f64(),
                procfs::status_bytes("RssAnon") >> 20
            );
        }
    }
    let t = Instant::now();
    rt.commit()?;
    commit_time += t.elapsed();
    commits += 1;
    let secs = started.elapsed().as_secs_f64();
    let cpu_secs = procfs::process_cpu_secs() - cpu0;
    let (thread_cpu1, thread_wait1) = procfs::thread_sched_secs();
    let (thread_cpu_secs, thread_wait_secs) =
        (thread_cpu1 - thread_cpu0, thread_wait1 - thread_wait0);
    peak_anon = peak_anon.max(procfs::status_bytes("RssAnon"));
    let progress = rt.progress().snapshot();
    let scope = rt.scope().clone();
    let state_cf_bytes = store.size(&scope.state_cf())?;
    let view_cf_bytes = store.size(&scope.view_cf())?;
    let state_dir_bytes = dir_bytes(dir);
    let peak_rss_bytes = procfs::status_bytes("VmHWM");
    let file_rss_bytes = procfs::status_bytes("RssFile");
    drop(rt);
    drop(store);
    ensure!(
        progress.processed == total,
        "processed {} of {total} events",
        progress.processed
    );
    Ok(RunResult {
        scenario: a.scenario,
        cache_entries,
        events: progress.processed,
        secs,
        cpu_secs,
        thread_cpu_secs,
        thread_wait_secs,
        commit_secs: commit_time.as_secs_f64(),
        commits,
        polls,
        open_secs,
        state_dir_bytes,
        state_cf_bytes,
        view_cf_bytes,
        peak_rss_bytes,
        peak_anon_bytes: peak_anon,
        file_rss_bytes,
        output_rows: progress.output,
        late: progress.late_dropped + progress.late_side_output,
        invalid: progress.invalid,
    })
}

/// The fields a plan uses, decoded alone (the `json-fields` baseline).
#[derive(Debug, Deserialize)]
struct UsedFields<'a> {
    #[serde(borrow)]
    user: Cow<'a, str>,
    amount: i64,
    ts: i64,
}

/// Reads the whole log like the runtime polls it, doing `scenario`'s work
/// per record.
fn run_baseline(
    scenario: Scenario,
    log: &Log,
    open_secs: f64,
    cache_entries: usize,
) -> Result<RunResult> {
    let topic = log.topic(TOPIC)?;
    let cpu0 = procfs::process_cpu_secs();
    let (thread_cpu0, thread_wait0) = procfs::thread_sched_secs();
    let started = Instant::now();
    let (mut events, mut polls, mut invalid) = (0u64, 0u64, 0u64);
    // Something depending on every decoded field, so nothing is optimized out.
    let mut checksum = 0u64;
    for partition in topic.partitions() {
        let end = partition.end_offset();
        let mut offset = partition.start_offset();
        while offset < end {
            let fetch = partition.read(offset, BASELINE_POLL_RECORDS, BASELINE_POLL_BYTES)?;
            polls += 1;
            for record in fetch.records() {
                events += 1;
                match scenario {
                    Scenario::LogRead => checksum += record.value.len() as u64,
                    Scenario::JsonValue => {
                        match serde_json::from_slice::<serde_json::Value>(&record.value) {
                            Ok(v) => {
                                let user =
                                    v.get("user").and_then(|u| u.as_str()).map_or(0, str::len);
                                let amount = v.get("amount").and_then(|a| a.as_i64()).unwrap_or(0);
                                let ts = v.get("ts").and_then(|t| t.as_i64()).unwrap_or(0);
                                checksum = checksum
                                    .wrapping_add(user as u64)
                                    .wrapping_add(amount as u64)
                                    .wrapping_add(ts as u64);
                            }
                            Err(_) => invalid += 1,
                        }
                    }
                    Scenario::JsonFields => {
                        match serde_json::from_slice::<UsedFields>(&record.value) {
                            Ok(f) => {
                                checksum = checksum
                                    .wrapping_add(f.user.len() as u64)
                                    .wrapping_add(f.amount as u64)
                                    .wrapping_add(f.ts as u64);
                            }
                            Err(_) => invalid += 1,
                        }
                    }
                    _ => unreachable!("not a baseline"),
                }
            }
            ensure!(
                fetch.next_offset > offset,
                "read made no progress at {offset}"
            );
            offset = fetch.next_offset;
        }
    }
    std::hint::black_box(checksum);
    let secs = started.elapsed().as_secs_f64();
    let (thread_cpu1, thread_wait1) = procfs::thread_sched_secs();
    Ok(RunResult {
        scenario,
        cache_entries,
        events,
        secs,
        cpu_secs: procfs::process_cpu_secs() - cpu0,
        thread_cpu_secs: thread_cpu1 - thread_cpu0,
        thread_wait_secs: thread_wait1 - thread_wait0,
        commit_secs: 0.0,
        commits: 0,
        polls,
        open_secs,
        state_dir_bytes: 0,
        state_cf_bytes: 0,
        view_cf_bytes: 0,
        peak_rss_bytes: procfs::status_bytes("VmHWM"),
        peak_anon_bytes: procfs::status_bytes("RssAnon"),
        file_rss_bytes: procfs::status_bytes("RssFile"),
        output_rows: 0,
        late: 0,
        invalid,
    })
}

fn print_run(r: &RunResult) {
    println!(
        "{}{}: {} events in {:.2} s = {} events/s; {} per processing-thread CPU-second, {} per \
         process CPU-second (processing thread CPU {:.2} s, waited for a CPU {:.2} s; process \
         CPU {:.2} s)",
        r.scenario.name(),
        if r.scenario.is_baseline() {
            String::new()
        } else {
            format!(" (cache {})", thousands(r.cache_entries as f64))
        },
        thousands(r.events as f64),
        r.secs,
        thousands(r.rate()),
        thousands(r.thread_rate()),
        thousands(r.cpu_rate()),
        r.thread_cpu_secs,
        r.thread_wait_secs,
        r.cpu_secs
    );
    if !r.scenario.is_baseline() {
        println!(
            "  commits: {} taking {:.2} s ({:.0}% of the time); polls: {}; open: {:.2} s",
            r.commits,
            r.commit_secs,
            100.0 * r.commit_secs / r.secs,
            r.polls,
            r.open_secs
        );
        println!(
            "  state dir: {} MB (state CF {} MB, view CF {} MB live estimate); view rows written: {}; late: {}; invalid: {}",
            mb(r.state_dir_bytes),
            mb(r.state_cf_bytes),
            mb(r.view_cf_bytes),
            thousands(r.output_rows as f64),
            r.late,
            r.invalid
        );
    }
    println!(
        "  peak RSS (VmHWM): {} MB; peak anonymous RSS: {} MB; file-backed RSS at the end: {} MB",
        mb(r.peak_rss_bytes),
        mb(r.peak_anon_bytes),
        mb(r.file_rss_bytes)
    );
}

// ---------------------------------------------------------------- suite

/// One line of the table: a scenario and cache size, with its runs.
#[derive(Debug)]
struct Case {
    scenario: Scenario,
    cache_entries: Option<usize>,
    runs: Vec<RunResult>,
    note: Option<String>,
}

impl Case {
    fn label(&self) -> String {
        match self.cache_entries {
            Some(c) => format!(
                "{} (cache {} entries)",
                self.scenario.name(),
                thousands(c as f64)
            ),
            None => self.scenario.name().to_string(),
        }
    }
}

fn parse_case(s: &str) -> Result<(Scenario, Option<usize>)> {
    let (name, cache) = match s.split_once(':') {
        Some((n, c)) => (
            n,
            Some(
                c.parse::<usize>()
                    .with_context(|| format!("bad cache size in case {s}"))?,
            ),
        ),
        None => (s, None),
    };
    let scenario = Scenario::from_str(name.trim(), true)
        .map_err(|e| anyhow::anyhow!("bad scenario in case {s}: {e}"))?;
    Ok((scenario, cache))
}

fn run_child(
    exe: &Path,
    dir: &Path,
    scenario: Scenario,
    cache: Option<usize>,
    r: &RuntimeArgs,
) -> Result<RunResult> {
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg("--dir")
        .arg(dir)
        .args(["--scenario", scenario.name(), "--json"])
        .args(["--session-gap-secs", &r.session_gap_secs.to_string()]);
    if let Some(c) = cache {
        cmd.args(["--cache-entries", &c.to_string()]);
    }
    if let Some(c) = r.commit_interval_ms {
        cmd.args(["--commit-interval-ms", &c.to_string()]);
    }
    if let Some(m) = r.max_poll_records {
        cmd.args(["--max-poll-records", &m.to_string()]);
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!("run {} failed: {}", scenario.name(), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("the run printed no result")?;
    serde_json::from_str(line).context("parsing the run's result")
}

fn suite(a: &SuiteArgs, argv: &[String]) -> Result<()> {
    ensure!(a.runs >= 1, "--runs must be at least 1");
    let cases: Vec<(Scenario, Option<usize>)> = a
        .cases
        .iter()
        .map(|c| parse_case(c))
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let dir = a
        .dir
        .canonicalize()
        .with_context(|| format!("resolving {}", a.dir.display()))?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let load_start = load_average();
    let suite_started = Instant::now();
    let progress = |msg: String| {
        eprintln!("[{:>7.1}s] {msg}", suite_started.elapsed().as_secs_f64());
    };

    let generated = match read_generated(&dir) {
        Some(g) if g.matches(&a.data) && dir.join("log").exists() => {
            progress(format!(
                "reusing the {} events already in {}",
                thousands(g.events as f64),
                dir.display()
            ));
            g
        }
        _ => {
            let log_dir = dir.join("log");
            if log_dir.exists() {
                std::fs::remove_dir_all(&log_dir)
                    .with_context(|| format!("removing {}", log_dir.display()))?;
            }
            progress(format!(
                "generating {} events over {} keys",
                thousands(a.data.events as f64),
                thousands(a.data.keys as f64)
            ));
            let d = &a.data;
            let status = Command::new(&exe)
                .arg("generate")
                .arg("--dir")
                .arg(&dir)
                .args(["--events", &d.events.to_string()])
                .args(["--keys", &d.keys.to_string()])
                .args(["--value-bytes", &d.value_bytes.to_string()])
                .args(["--disorder-ms", &d.disorder_ms.to_string()])
                .args(["--seed", &d.seed.to_string()])
                .status()
                .context("running generate")?;
            ensure!(status.success(), "generate failed: {status}");
            read_generated(&dir).context("generate wrote no generated.json")?
        }
    };

    let mut results: Vec<Case> = Vec::new();
    for (scenario, cache) in cases {
        let mut case = Case {
            scenario,
            cache_entries: cache,
            runs: Vec::new(),
            note: None,
        };
        let mut runs = a.runs;
        let mut run = 1;
        while run <= runs {
            let r = run_child(&exe, &dir, scenario, cache, &a.runtime)
                .with_context(|| format!("{} run {run}", case.label()))?;
            progress(format!(
                "{} run {run}/{runs}: {} events/s, {:.1} s, state dir {} MB, peak RSS {} MB (anon {} MB)",
                case.label(),
                thousands(r.rate()),
                r.secs,
                mb(r.state_dir_bytes),
                mb(r.peak_rss_bytes),
                mb(r.peak_anon_bytes)
            ));
            if run == 1 && runs > 1 && r.secs > a.max_run_secs as f64 {
                case.note = Some(format!(
                    "one run took {:.0} s (> {} s): 1 run instead of {runs}",
                    r.secs, a.max_run_secs
                ));
                progress(format!(
                    "{}: {}",
                    case.label(),
                    case.note.as_deref().unwrap_or("")
                ));
                runs = 1;
            }
            case.runs.push(r);
            run += 1;
        }
        results.push(case);
    }
    let env = Environment {
        fs: filesystem(&dir),
        load_start,
        load_end: load_average(),
        suite_secs: suite_started.elapsed().as_secs_f64(),
    };
    let md = report(a, argv, &dir, &generated, &env, &results);
    print!("{md}");
    if let Some(path) = &a.output {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// Facts about where the benchmark ran.
struct Environment {
    fs: Option<(String, String, String)>,
    load_start: String,
    load_end: String,
    suite_secs: f64,
}

fn report(
    a: &SuiteArgs,
    argv: &[String],
    dir: &Path,
    g: &Generated,
    env: &Environment,
    cases: &[Case],
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let mut command =
        String::from("cargo run --release -p kappa-tools --bin kappa-processor-bench --");
    for arg in argv {
        command.push(' ');
        command.push_str(&shell_quote(arg));
    }
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (device, fstype, _) = env
        .fs
        .clone()
        .unwrap_or_else(|| ("?".into(), "?".into(), "?".into()));
    let defaults = RunOptions::default();
    let span_secs = (g.last_event_ms - g.first_event_ms) as f64 / 1000.0;
    let _ = writeln!(o, "## kappa-processor benchmarks ({})\n", today());
    let _ = writeln!(o, "Command: `{command}`\n");
    let _ = writeln!(
        o,
        "Machine: {nproc} CPUs (nproc), {}, {}, {}; data under `{}` on {device} ({fstype}). \
         Load average (1/5/15 min) {} at the start, {} at the end; the suite took {:.0} s.\n",
        cpu_model(),
        kernel(),
        memory(),
        dir.display(),
        env.load_start,
        env.load_end,
        env.suite_secs
    );
    let _ = writeln!(
        o,
        "Input: topic `{TOPIC}`, 1 partition, written once with fsync=never in batches of \
         {GENERATE_BATCH} records ({} MB of log): {} JSON events of {:.1} bytes on average, \
         `{{\"user\":\"u<0..{}>\",\"amount\":<1..100>,\"ts\":<ms>,\"pad\":\"…\"}}`, users uniform; \
         event times 1 ms apart ({:.0} s of event time), each up to {} ms behind the newest \
         before it. The log is in the page cache (warm) for every run.\n",
        thousands(g.log_bytes as f64 / 1e6),
        thousands(g.events as f64),
        g.mean_value_bytes,
        thousands(g.keys as f64),
        span_secs,
        g.disorder_ms
    );
    let _ =
        writeln!(
        o,
        "Each run is its own process: `Log::open`, a fresh RocksDB state store, `Runtime::open` \
         (plan from the Rust DSL: `event_time_field(\"ts\")`, max out-of-orderness {} ms, so no \
         event is late; EMIT CHANGES; sink: a view), then `poll_once()` until every record is \
         processed, `commit()` whenever `commit_due()` (every {} ms), and a final commit. Time \
         runs from the first poll to the end of the final commit. RunOptions: {} records per \
         poll, state cache {} entries unless stated. Baselines read the log the same way \
         (`Partition::read` of {} records) without the processor.\n",
        g.disorder_ms,
        a.runtime
            .commit_interval_ms
            .unwrap_or(defaults.commit_interval_ms),
        thousands(a.runtime.max_poll_records.unwrap_or(defaults.max_poll_records) as f64),
        thousands(defaults.state_cache_entries as f64),
        thousands(BASELINE_POLL_RECORDS as f64),
    );
    let _ = writeln!(
        o,
        "| case | plan | events/s (wall) | (min – max) | events per thread CPU-s | events per process CPU-s | time | commits (time in commit) | state dir | peak RSS | peak anon RSS | runs |"
    );
    let _ = writeln!(o, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for c in cases {
        let rate = summarize(c.runs.iter().map(RunResult::rate));
        let cpu = summarize(c.runs.iter().map(RunResult::cpu_rate));
        let thread = summarize(c.runs.iter().map(RunResult::thread_rate));
        let secs = summarize(c.runs.iter().map(|r| r.secs));
        let commits = summarize(c.runs.iter().map(|r| r.commits as f64));
        let commit_share = summarize(c.runs.iter().map(|r| 100.0 * r.commit_secs / r.secs));
        let state = summarize(c.runs.iter().map(|r| r.state_dir_bytes as f64));
        let rss = summarize(c.runs.iter().map(|r| r.peak_rss_bytes as f64));
        let anon = summarize(c.runs.iter().map(|r| r.peak_anon_bytes as f64));
        let baseline = c.scenario.is_baseline();
        let _ = writeln!(
            o,
            "| {} | {} | {} | ({}) | {} | {} | {:.1} s | {} | {} | {} MB | {} MB | {} |",
            c.label(),
            plan_text(c.scenario, a.runtime.session_gap_secs),
            thousands(rate.median),
            compact_range(rate),
            thousands(thread.median),
            thousands(cpu.median),
            secs.median,
            if baseline {
                "–".to_string()
            } else {
                format!(
                    "{} ({:.0}%)",
                    thousands(commits.median),
                    commit_share.median
                )
            },
            if baseline {
                "–".to_string()
            } else {
                format!("{} MB", mb(state.median as u64))
            },
            mb(rss.median as u64),
            mb(anon.median as u64),
            c.runs.len()
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Notes:\n");
    let _ = writeln!(
        o,
        "- events/s (wall) = events / wall time of the run. The runtime processes on one \
         thread, so on an idle machine this is the per-core rate; on a loaded one the thread \
         also waits for a CPU. events per thread CPU-s divides by the processing thread's CPU \
         time (schedstat), i.e. the per-core rate with that waiting taken out; events per \
         process CPU-s divides by the CPU time (user + system) of the whole process, including \
         RocksDB's flush and compaction threads."
    );
    let _ = writeln!(
        o,
        "- state dir = bytes of every file of the RocksDB directory after the final commit \
         (SSTs, WAL, manifest; operator state and view rows). peak RSS = VmHWM, which includes \
         the pages of log segments the reader mapped (up to the whole log); peak anon RSS = \
         the largest RssAnon sampled before and after each commit (heap: caches, indexes, memtables)."
    );
    for c in cases.iter().filter(|c| !c.scenario.is_baseline()) {
        let r = &c.runs[0];
        let mut extras = vec![
            format!(
                "view rows written {}",
                thousands(median(c.runs.iter().map(|r| r.output_rows as f64)))
            ),
            format!(
                "state CF {} MB, view CF {} MB (RocksDB live estimates)",
                mb(r.state_cf_bytes),
                mb(r.view_cf_bytes)
            ),
            format!(
                "processing thread on a CPU {:.1} s and waiting for one {:.1} s of {:.1} s wall",
                r.thread_cpu_secs, r.thread_wait_secs, r.secs
            ),
        ];
        if r.late + r.invalid > 0 {
            extras.push(format!("late {} invalid {}", r.late, r.invalid));
        }
        if let Some(n) = &c.note {
            extras.push(n.clone());
        }
        let _ = writeln!(o, "- {} (first run): {}.", c.label(), extras.join("; "));
    }
    for c in cases
        .iter()
        .filter(|c| c.scenario.is_baseline() && c.note.is_some())
    {
        let _ = writeln!(o, "- {}: {}.", c.label(), c.note.as_deref().unwrap_or(""));
    }
    let targets = [
        (Scenario::Tumbling, 1_000_000.0, "tumbling COUNT/SUM"),
        (Scenario::Hopping, 300_000.0, "hopping COUNT/SUM"),
    ];
    for (scenario, target, what) in targets {
        if let Some(c) = cases
            .iter()
            .find(|c| c.scenario == scenario && c.cache_entries.is_none())
        {
            let rate = median(c.runs.iter().map(RunResult::rate));
            let thread = median(c.runs.iter().map(RunResult::thread_rate));
            let _ = writeln!(
                o,
                "- Target for {what}: {} events/s per core; measured {} per thread CPU-second \
                 ({:.1}% of it), {} per wall second.",
                thousands(target),
                thousands(thread),
                100.0 * thread / target,
                thousands(rate)
            );
        }
    }
    let _ = writeln!(o);
    o
}

// -------------------------------------------------------------- helpers

/// Median, min and max of the runs' values.
type Summary = Spread;

fn summarize(values: impl IntoIterator<Item = f64>) -> Summary {
    Spread::of_runs(values)
}

fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    summarize(values).median
}

/// Bytes as whole MB (10^6), with thousands separators.
fn mb(bytes: u64) -> String {
    thousands(bytes as f64 / 1e6)
}

// ----------------------------------------------------------------- main

fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match Cli::parse().command {
        Cmd::Generate(g) => {
            generate(&g.dir, &g.data)?;
        }
        Cmd::Run(r) => {
            let result = run(&r)?;
            if r.json {
                println!("{}", serde_json::to_string(&result).expect("serializes"));
            } else {
                print_run(&result);
            }
        }
        Cmd::Suite(s) => suite(&s, &argv)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(events: u64) -> DataArgs {
        DataArgs {
            events,
            keys: 1000,
            value_bytes: 100,
            disorder_ms: 20,
            seed: 7,
        }
    }

    #[test]
    fn events_are_valid_json_of_the_requested_size() {
        let d = data(100);
        let mut rng = Rng::new(d.seed);
        for i in 0..100 {
            let (user, amount, ts) = event_fields(&mut rng, i, &d);
            let s = event_json(user, amount, ts, d.value_bytes, &mut rng);
            assert_eq!(s.len(), 100, "{s}");
            let f: UsedFields = serde_json::from_str(&s).unwrap();
            assert_eq!(f.user, format!("u{user}"));
            assert!((1..=100).contains(&f.amount));
            assert!(ts <= FIRST_EVENT_MS + i as i64 && ts >= FIRST_EVENT_MS + i as i64 - 20);
            assert!(user < 1000);
        }
    }

    #[test]
    fn cases_parse() {
        assert_eq!(
            parse_case("tumbling:10000").unwrap(),
            (Scenario::Tumbling, Some(10_000))
        );
        assert_eq!(
            parse_case("json-fields").unwrap(),
            (Scenario::JsonFields, None)
        );
        assert!(parse_case("nope").is_err());
        assert!(parse_case("hopping:x").is_err());
    }

    #[test]
    fn formats() {
        use kappa_tools::bench::report::compact;
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(mb(12_345_678), "12");
        assert_eq!(compact(2_345_678.0), "2.35 M");
        let s = summarize([3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(duration_text(300), "5 min");
        assert_eq!(duration_text(90), "90 s");
    }

    #[test]
    fn plans_validate() {
        for s in [Scenario::Tumbling, Scenario::Hopping, Scenario::Session] {
            plan(s, 20, Duration::from_secs(300)).validate().unwrap();
        }
    }

    #[test]
    fn a_small_log_runs_to_the_end() {
        let dir = std::env::temp_dir().join(format!("kpb-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let g = generate(&dir, &data(3000)).unwrap();
        assert_eq!(g.events, 3000);
        for scenario in [
            Scenario::LogRead,
            Scenario::JsonValue,
            Scenario::JsonFields,
            Scenario::Tumbling,
            Scenario::Hopping,
            Scenario::Session,
        ] {
            let r = run(&RunArgs {
                dir: dir.clone(),
                scenario,
                cache_entries: Some(100),
                runtime: RuntimeArgs {
                    session_gap_secs: 1,
                    commit_interval_ms: None,
                    max_poll_records: Some(700),
                },
                keep_state: false,
                json: true,
            })
            .unwrap();
            assert_eq!(r.events, 3000, "{scenario:?}");
            assert_eq!((r.late, r.invalid), (0, 0), "{scenario:?}");
            if !scenario.is_baseline() {
                assert!(r.output_rows > 0 && r.state_dir_bytes > 0, "{scenario:?}");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
