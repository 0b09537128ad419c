//! The Markdown report, and the summary helpers it uses.

use kappa_log::FsyncPolicy;

use crate::bench::report::{compact_range, thousands};
use crate::bench::stats::Spread;
use crate::machine::{cpu_model, kernel, memory, shell_quote, today};

use super::append::*;
use super::read::*;
use super::settings::*;
use super::*;

/// Median, min and max of the runs' values.
pub(super) type Summary = Spread;

pub(super) fn summarize(values: impl IntoIterator<Item = f64>) -> Summary {
    Spread::of_runs(values)
}

pub(super) fn range_1(s: Summary) -> String {
    format!("{:.1} – {:.1}", s.min, s.max)
}

pub(super) fn policy_name(p: FsyncPolicy) -> &'static str {
    match p {
        FsyncPolicy::Never => "never",
        FsyncPolicy::Interval => "interval (100 ms)",
        FsyncPolicy::Always => "always",
    }
}

/// Facts about where the benchmark ran.
pub(super) struct Environment {
    /// (device, filesystem type) of the data directory.
    pub(super) fs: Option<(String, String, String)>,
    pub(super) load_start: String,
    pub(super) load_end: String,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    s: &Settings,
    argv: &[String],
    env: Environment,
    append: &[(FsyncPolicy, usize, Vec<AppendSample>)],
    disk_sync: &[f64],
    disk_dsync: &[f64],
    dsync_writes: u64,
    reads: &[ReadSample],
) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let mut command = String::from("cargo run --release -p kappa-tools --bin kappa-log-bench --");
    for a in argv {
        command.push(' ');
        command.push_str(&shell_quote(a));
    }
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let (device, fstype, options) = env
        .fs
        .unwrap_or_else(|| ("?".into(), "?".into(), "?".into()));
    let per_record_disk = s.batch_disk_bytes as f64 / s.batch_records as f64;
    let append_batches = s.batches_for(s.append_bytes);
    let _ = writeln!(o, "## kappa-log benchmarks ({})\n", today());
    let _ = writeln!(o, "Command: `{command}`\n");
    let _ = writeln!(
        o,
        "Machine: {nproc} CPUs (nproc), {}, {}, {}; data directory under `{}` on {device} \
         ({fstype}, mounted `{options}`). Load average (1/5/15 min) {} at the start, {} at the end.\n",
        cpu_model(),
        kernel(),
        memory(),
        s.dir.display(),
        env.load_start,
        env.load_end
    );
    let _ = writeln!(
        o,
        "Workload: one topic with one partition; records of {} random value bytes, no key, no \
         headers; {} records per append (one batch = {} bytes on disk, {per_record_disk:.2} bytes \
         per record); segment_bytes {} MiB; each run on a fresh data directory. Every figure is \
         the median of {} run(s), with the min – max. **MB = 10^6 bytes of record values** \
         (keys are absent, so keys + values = values); on disk the log writes {:.2}x that.\n",
        s.value_bytes,
        thousands(s.batch_records as f64),
        thousands(s.batch_disk_bytes as f64),
        s.segment_bytes >> 20,
        s.runs,
        per_record_disk / s.value_bytes as f64
    );

    if !append.is_empty() {
        let _ = writeln!(
            o,
            "### Append\n\n{} MB of values per run ({} appends of {} records). `writers` = tokio \
             tasks appending to the same partition, each awaiting its append before the next. \
             Time runs from the first append until the last is acknowledged; `close` (not \
             included) is `Log::close`, i.e. the final fdatasync of what is not yet synced. \
             fsyncs include the one sealing each full segment, which every policy does.\n",
            s.append_bytes / 1_000_000,
            thousands(append_batches as f64),
            thousands(s.batch_records as f64)
        );
        let _ = writeln!(
            o,
            "| fsync | writers | records/s | (min – max) | MB/s | (min – max) | fsyncs | appends per fsync | close |"
        );
        let _ = writeln!(o, "|---|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (policy, writers, samples) in append {
            let rps = summarize(samples.iter().map(|a| a.records as f64 / a.secs));
            let mbps = summarize(samples.iter().map(|a| a.value_bytes as f64 / a.secs / 1e6));
            let fsyncs = summarize(samples.iter().map(|a| a.fsyncs as f64));
            // Over all runs: appends per fdatasync (the group commit factor).
            let total_fsyncs: u64 = samples.iter().map(|a| a.fsyncs).sum();
            let per_fsync = if total_fsyncs == 0 {
                "–".to_string()
            } else {
                let appends: u64 = samples.iter().map(|a| a.appends).sum();
                format!("{:.1}", appends as f64 / total_fsyncs as f64)
            };
            let close = summarize(samples.iter().map(|a| a.close_secs));
            let _ = writeln!(
                o,
                "| {} | {writers} | {} | ({}) | {:.1} | ({}) | {} | {per_fsync} | {:.2} s |",
                policy_name(*policy),
                thousands(rps.median),
                compact_range(rps),
                mbps.median,
                range_1(mbps),
                thousands(fsyncs.median),
                close.median
            );
        }
        let segments = append
            .first()
            .and_then(|(_, _, v)| v.first())
            .map_or(0, |a| a.segments);
        let _ = writeln!(o, "\nSegments per append run: {segments}.\n");
    }

    if !disk_sync.is_empty() {
        let disk_total = append_batches * s.batch_disk_bytes as u64;
        let sync_mbps = summarize(disk_sync.iter().map(|t| disk_total as f64 / t / 1e6));
        let sync_ps = summarize(disk_sync.iter().map(|t| append_batches as f64 / t));
        let _ = writeln!(
            o,
            "### Raw disk baseline\n\nSame directory, single writer, fresh file, {} MB written \
             per run (what the append runs write to segments). MB/s here counts bytes written; \
             divide by {:.2} for the value-MB/s of the same records.\n",
            thousands(disk_total as f64 / 1e6),
            per_record_disk / s.value_bytes as f64
        );
        let _ = writeln!(
            o,
            "| method | write size | MB/s written | (min – max) | syncs/s |"
        );
        let _ = writeln!(o, "|---|--:|--:|--:|--:|");
        let _ = writeln!(
            o,
            "| `write` + `fdatasync` after each write | {} B (one batch) | {:.1} | ({}) | {} |",
            thousands(s.batch_disk_bytes as f64),
            sync_mbps.median,
            range_1(sync_mbps),
            thousands(sync_ps.median)
        );
        if !disk_dsync.is_empty() {
            let bytes = (dsync_writes * DSYNC_WRITE_BYTES as u64) as f64;
            let m = summarize(disk_dsync.iter().map(|t| bytes / t / 1e6));
            let ps = summarize(disk_dsync.iter().map(|t| dsync_writes as f64 / t));
            let _ = writeln!(
                o,
                "| dd-like, `O_DSYNC` (`dd bs=1M oflag=dsync`) | 1 MiB | {:.1} | ({}) | {} |",
                m.median,
                range_1(m),
                thousands(ps.median)
            );
        }
        let always: Vec<_> = append
            .iter()
            .filter(|(p, _, _)| *p == FsyncPolicy::Always)
            .collect();
        if !always.is_empty() {
            let disk_rps = sync_ps.median * s.batch_records as f64;
            let _ = writeln!(
                o,
                "\n#### fsync=always vs the raw disk at the same sync granularity\n\nThe raw disk \
                 figure is one `write` + `fdatasync` per {}-byte batch, i.e. {} records/s \
                 equivalent. With several writers the log's group commit may cover several \
                 appends with one fdatasync, so it can exceed 100%.\n",
                thousands(s.batch_disk_bytes as f64),
                thousands(disk_rps)
            );
            let _ = writeln!(o, "| fsync=always | records/s | % of raw disk |");
            let _ = writeln!(o, "|---|--:|--:|");
            for (_, writers, samples) in always {
                let rps = summarize(samples.iter().map(|a| a.records as f64 / a.secs));
                let _ = writeln!(
                    o,
                    "| {writers} writer{} | {} | {:.0}% |",
                    if *writers == 1 { "" } else { "s" },
                    thousands(rps.median),
                    100.0 * rps.median / disk_rps
                );
            }
            let _ = writeln!(o);
        }
        let _ = writeln!(o);
    }

    if !reads.is_empty() {
        let r0 = reads[0];
        let evicted = reads.iter().all(|r| r.evicted);
        let _ = writeln!(
            o,
            "### Sequential read\n\n{} records ({} MB of values, {} segment(s)) written with \
             fsync=never by one writer, then read from offset 0 to the end with \
             `Partition::read(offset, {}, {})`, iterating `Fetch::records()` and touching every \
             value's length; only the read is timed. The first pass runs right after the \
             partition's files were written back and {}; the second pass reads the same data \
             again from a warm page cache (sealed segments already mapped).\n",
            thousands(r0.cold.records as f64),
            thousands(r0.cold.value_bytes as f64 / 1e6),
            r0.segments,
            thousands(READ_MAX_RECORDS as f64),
            thousands(READ_MAX_BYTES as f64),
            if evicted {
                "evicted from the page cache with `posix_fadvise(POSIX_FADV_DONTNEED)` (cold)"
            } else {
                "**not** evicted from the page cache (unsupported here, so it is warm too)"
            }
        );
        let _ = writeln!(o, "| pass | records/s | (min – max) | MB/s | (min – max) |");
        let _ = writeln!(o, "|---|--:|--:|--:|--:|");
        let first = if evicted {
            "first read (cold page cache)"
        } else {
            "first read"
        };
        let passes: Vec<(&str, Vec<ReadPass>)> = vec![
            (first, reads.iter().map(|r| r.cold).collect()),
            (
                "second read (warm page cache)",
                reads.iter().map(|r| r.warm).collect(),
            ),
        ];
        for (label, pass) in passes {
            let rps = summarize(pass.iter().map(|p| p.records as f64 / p.secs));
            let mbps = summarize(pass.iter().map(|p| p.value_bytes as f64 / p.secs / 1e6));
            let _ = writeln!(
                o,
                "| {label} | {} | ({}) | {:.1} | ({}) |",
                thousands(rps.median),
                compact_range(rps),
                mbps.median,
                range_1(mbps)
            );
        }
        let write = summarize(reads.iter().map(|r| r.cold.records as f64 / r.write_secs));
        let _ = writeln!(
            o,
            "\n(Writing the data, not part of the measurement: {} records/s median.)\n",
            thousands(write.median)
        );
    }
    o
}
