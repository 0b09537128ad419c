//! `run`: one scenario on a fresh state store — the processor through a
//! `Runtime`, or a baseline that only reads and decodes — with its time,
//! CPU, memory and state size.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context, Result};
use kappa_log::{Log, LogConfig};
use kappa_processor::dsl::{self, Hopping, Pipeline, Session, Tumbling};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::runner::{RunOptions, Runtime};
use kappa_processor::state::store::Store;
use serde::{Deserialize, Serialize};

use crate::bench::report::thousands;

use super::args::*;
use super::generate::*;
use super::report::*;
use super::*;

/// One run's measurements (the JSON line of `run --json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct RunResult {
    pub(super) scenario: Scenario,
    /// `state_cache_entries` (the runtime's default when not given).
    pub(super) cache_entries: usize,
    pub(super) events: u64,
    /// From the first poll to the end of the final commit.
    pub(super) secs: f64,
    /// User + system CPU of the whole process during `secs`.
    pub(super) cpu_secs: f64,
    /// CPU time of the processing thread during `secs` (schedstat).
    pub(super) thread_cpu_secs: f64,
    /// Time the processing thread was runnable but waiting for a CPU
    /// (schedstat): how much other load on the machine slowed the run.
    pub(super) thread_wait_secs: f64,
    /// Time inside `Runtime::commit`.
    pub(super) commit_secs: f64,
    pub(super) commits: u64,
    pub(super) polls: u64,
    /// `Log::open` + `Runtime::open`.
    pub(super) open_secs: f64,
    /// Bytes of every file of the state store directory after the final commit.
    pub(super) state_dir_bytes: u64,
    /// RocksDB's estimate of live data + memtables, operator state CF.
    pub(super) state_cf_bytes: u64,
    /// The same for the view CF (the rows).
    pub(super) view_cf_bytes: u64,
    /// VmHWM at the end: peak resident set, including mapped log segments.
    pub(super) peak_rss_bytes: u64,
    /// Peak of RssAnon, sampled before and after every commit and at the end.
    pub(super) peak_anon_bytes: u64,
    /// RssFile at the end (mapped log segments, RocksDB files).
    pub(super) file_rss_bytes: u64,
    /// Rows written to the view (puts and deletes).
    pub(super) output_rows: u64,
    pub(super) late: u64,
    pub(super) invalid: u64,
}

impl RunResult {
    pub(super) fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }

    /// Events per CPU-second of the whole process.
    pub(super) fn cpu_rate(&self) -> f64 {
        self.events as f64 / self.cpu_secs.max(1e-9)
    }

    /// Events per CPU-second of the processing thread: the per-core rate
    /// with the time spent waiting for a busy CPU taken out.
    pub(super) fn thread_rate(&self) -> f64 {
        self.events as f64 / self.thread_cpu_secs.max(1e-9)
    }
}

/// The plan of a processor scenario.
pub(super) fn plan(scenario: Scenario, disorder_ms: i64, session_gap: Duration) -> Plan {
    let window = match scenario {
        Scenario::Tumbling | Scenario::TumblingWhere => Tumbling::of(Duration::from_secs(300)),
        Scenario::Hopping => Hopping::of(Duration::from_secs(600), Duration::from_secs(60)),
        Scenario::Session => Session::with_gap(session_gap),
        _ => unreachable!("baselines have no plan"),
    };
    let pipeline = Pipeline::from_topic(TOPIC)
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_millis(disorder_ms.max(0) as u64));
    let pipeline = match scenario {
        Scenario::TumblingWhere => pipeline.filter(Expr::field("user").not_eq(Expr::lit(""))),
        _ => pipeline,
    };
    pipeline
        .key_by([("user", Expr::field("user"))])
        .window(window)
        .aggregate([dsl::count("n"), dsl::sum("total", Expr::field("amount"))])
        .to_view(scenario.name())
}

/// A plan's text for the report.
pub(super) fn plan_text(scenario: Scenario, session_gap_secs: u64) -> String {
    let agg = "COUNT(*), SUM(amount) GROUP BY user";
    match scenario {
        Scenario::LogRead => "read only".into(),
        Scenario::JsonValue => "read + decode to `serde_json::Value`".into(),
        Scenario::JsonFields => "read + decode `user`, `amount`, `ts` only".into(),
        Scenario::DecodeFields => "read + the processor's decoder, `user`, `amount`, `ts`".into(),
        Scenario::DecodeFieldsSerde => {
            "read + the processor's decoder through serde_json alone".into()
        }
        Scenario::Tumbling => format!("TUMBLING 5 min, {agg}"),
        Scenario::TumblingWhere => format!("TUMBLING 5 min, {agg} WHERE user <> ''"),
        Scenario::Hopping => format!("HOPPING 10 min / 1 min, {agg}"),
        Scenario::Session => format!("SESSION gap {}, {agg}", duration_text(session_gap_secs)),
    }
}

pub(super) fn duration_text(secs: u64) -> String {
    let (minutes, rest) = (secs / 60, secs % 60);
    if rest == 0 {
        format!("{minutes} min")
    } else {
        format!("{secs} s")
    }
}

/// Process and thread CPU (user + system) and memory, from /proc.
pub(super) mod procfs {
    /// CPU seconds of a `/proc` stat file (0 when unreadable).
    fn stat_cpu_secs(path: &str) -> f64 {
        crate::machine::stat_cpu_secs(path).unwrap_or(0.0)
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
pub(super) fn dir_bytes(path: &Path) -> u64 {
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
pub(super) fn state_dir(parent: &Path, scenario: Scenario) -> Result<PathBuf> {
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

pub(super) fn run(a: &RunArgs) -> Result<RunResult> {
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

pub(super) fn run_processor(
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
pub(super) struct UsedFields<'a> {
    #[serde(borrow)]
    pub(super) user: Cow<'a, str>,
    pub(super) amount: i64,
    pub(super) ts: i64,
}

/// Reads the whole log like the runtime polls it, doing `scenario`'s work
/// per record.
pub(super) fn run_baseline(
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
    let used: Vec<String> = ["user", "amount", "ts"].map(String::from).to_vec();
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
                    Scenario::DecodeFields | Scenario::DecodeFieldsSerde => {
                        let decoded = if scenario == Scenario::DecodeFields {
                            kappa_processor::event::decode_fields(&record.value, &used)
                        } else {
                            kappa_processor::event::decode_fields_serde(&record.value, &used)
                        };
                        match decoded.as_deref() {
                            Ok([user, amount, ts]) => {
                                checksum = checksum
                                    .wrapping_add(user.as_str().map_or(0, str::len) as u64)
                                    .wrapping_add(amount.as_i64().unwrap_or(0) as u64)
                                    .wrapping_add(ts.as_i64().unwrap_or(0) as u64);
                            }
                            _ => invalid += 1,
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

pub(super) fn print_run(r: &RunResult) {
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
