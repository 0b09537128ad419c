//! The Markdown report of a suite, and the summary helpers it uses.

use std::path::Path;

use kappa_processor::runner::RunOptions;

use crate::bench::report::{compact_range, thousands};
use crate::bench::stats::Spread;
use crate::machine::{cpu_model, kernel, memory, shell_quote, today};

use super::args::*;
use super::generate::*;
use super::run::*;
use super::suite::*;
use super::*;

pub(super) struct Environment {
    pub(super) fs: Option<(String, String, String)>,
    pub(super) load_start: String,
    pub(super) load_end: String,
    pub(super) suite_secs: f64,
}

pub(super) fn report(
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

/// Median, min and max of the runs' values.
pub(super) type Summary = Spread;

pub(super) fn summarize(values: impl IntoIterator<Item = f64>) -> Summary {
    Spread::of_runs(values)
}

pub(super) fn median(values: impl IntoIterator<Item = f64>) -> f64 {
    summarize(values).median
}

/// Bytes as whole MB (10^6), with thousands separators.
pub(super) fn mb(bytes: u64) -> String {
    thousands(bytes as f64 / 1e6)
}
