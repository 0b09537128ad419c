//! `kappa-log-bench`: throughput of the `kappa-log` storage engine (the
//! binary `src/bin/kappa-log-bench.rs` calls [`main`]).
//!
//! Scenarios, each run against a fresh data directory created under `--dir`
//! and removed afterwards:
//!
//! * `append`: one partition, 100-byte values, 1000 records per append, for
//!   every fsync policy, with 1 writer task and with 8 writer tasks appending
//!   to the same partition (so the writer thread's group commit shares one
//!   `write` + `fdatasync` among concurrent appends).
//! * `disk`: the raw disk at the same sync granularity: one `write` +
//!   `fdatasync` per chunk the size of one encoded batch, single writer; plus
//!   a dd-like run of 1 MiB `O_DSYNC` writes for reference.
//! * `read`: sequential read of a partition written with `fsync=never`, first
//!   with its files evicted from the page cache, then again warm.
//! * `compact` (only when asked for): one compaction pass over a compacted
//!   topic of `--compact-records` records over `--compact-keys` keys, and
//!   a producer's append latency (`fsync=always`) during it against with
//!   no pass running.
//!
//! Every measurement is repeated `--runs` times; the median is reported with
//! the min and max. Results go to stdout as Markdown (for BENCHMARKS.md);
//! progress goes to stderr.
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-log-bench -- [--quick] [--dir DIR] ...
//! ```
//!
//! Modules: `settings` (the command line), the scenarios `append`, `disk`
//! and `read`, and `report` (the Markdown). This module holds what they
//! share and the driver that runs them.

mod append;
mod compact;
mod disk;
mod read;
mod report;
mod settings;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use bytes::Bytes;
use clap::Parser;
use kappa_log::{FsyncPolicy, NewRecord};

use crate::bench::keys::Rng;
use crate::bench::report::{compact, thousands};
use crate::machine::{filesystem, load_average};

use append::*;
use compact::*;
use disk::*;
use read::*;
use report::*;
use settings::*;

/// Records per `Partition::read` call of the read scenario.
pub(super) const READ_MAX_RECORDS: u64 = 10_000;
/// Bytes per `Partition::read` call of the read scenario.
pub(super) const READ_MAX_BYTES: u64 = 4 << 20;
/// Write size of the dd-like reference run.
pub(super) const DSYNC_WRITE_BYTES: usize = 1 << 20;
/// Name of the topic every scenario creates.
pub(super) const TOPIC: &str = "bench";

/// A fresh directory under the benchmark directory, removed on drop.
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(parent: &Path, label: &str) -> Result<TempDir> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = parent.join(format!(
            "kappa-log-bench-{}-{nanos:09}-{n}-{label}",
            std::process::id()
        ));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(TempDir(path))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            eprintln!("warning: could not remove {}: {e}", self.0.display());
        }
    }
}

/// Deterministic pseudo-random bytes (the tools' seeded [`Rng`]), so values
/// are not all zeros without needing a `rand` dependency.
pub(super) fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}

/// One batch of records whose values are consecutive slices of `payload`
/// (static memory, so building a batch costs only the `Vec<NewRecord>`).
pub(super) fn make_batch(
    payload: &'static [u8],
    value_bytes: usize,
    records: usize,
) -> Vec<NewRecord> {
    payload
        .chunks_exact(value_bytes)
        .take(records)
        .map(|v| NewRecord::value(Bytes::from_static(v)))
        .collect()
}

/// Appends `batches` batches of `records` values of `value_bytes` each,
/// cut from `payload`, one append awaited after the other.
pub(super) async fn append_batches(
    partition: &kappa_log::Partition,
    batches: u64,
    payload: &'static [u8],
    value_bytes: usize,
    records: usize,
) -> Result<()> {
    for _ in 0..batches {
        let records = make_batch(payload, value_bytes, records);
        partition
            .append(kappa_log::AppendRequest {
                records,
                idempotency_key: None,
                as_sent: None,
            })
            .await?;
    }
    Ok(())
}

/// The log's process-wide count of segment fdatasyncs.
pub(super) fn fsync_count() -> u64 {
    kappa_log::stats::global().fsyncs.load(Ordering::Relaxed)
}

/// Parses the command line, runs the scenarios and prints the report.
pub fn main() -> Result<()> {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let s = Settings::from_args(Args::parse())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let load_start = load_average();
    let fs = filesystem(&s.dir);
    if let Some((_, fstype, _)) = &fs {
        if fstype == "tmpfs" || fstype == "ramfs" {
            eprintln!(
                "warning: {} is on {fstype}: fdatasync is free there, pass --dir on a real disk",
                s.dir.display()
            );
        }
    }
    let max_writers = s.writers.iter().copied().max().unwrap_or(1);
    let payloads: Vec<&'static [u8]> = (0..max_writers.max(1))
        .map(|w| {
            &*Box::leak(
                random_bytes(s.value_bytes * s.batch_records, w as u64 + 1).into_boxed_slice(),
            )
        })
        .collect();
    let runs = s.runs;
    let append_batches = s.batches_for(s.append_bytes);
    let progress_start = Instant::now();
    let progress = |msg: String| {
        eprintln!("[{:>7.1}s] {msg}", progress_start.elapsed().as_secs_f64());
    };

    // append
    let mut append: Vec<(FsyncPolicy, usize, Vec<AppendSample>)> = Vec::new();
    if s.scenarios.contains(&Scenario::Append) {
        for &policy in &s.policies {
            for &writers in &s.writers {
                let mut samples = Vec::with_capacity(runs);
                for run in 1..=runs {
                    let a = append_run(&rt, &s, policy, writers, &payloads).with_context(|| {
                        format!("append fsync={} writers={writers}", policy_name(policy))
                    })?;
                    progress(format!(
                        "append fsync={} writers={writers} run {run}/{runs}: {} records/s, {:.1} MB/s, {} fsyncs, close {:.2}s",
                        policy_name(policy),
                        compact(a.records as f64 / a.secs),
                        a.value_bytes as f64 / a.secs / 1e6,
                        a.fsyncs,
                        a.close_secs
                    ));
                    samples.push(a);
                }
                append.push((policy, writers, samples));
            }
        }
    }

    // disk
    let mut disk_sync: Vec<f64> = Vec::new();
    let mut disk_dsync: Vec<f64> = Vec::new();
    let disk_total = append_batches * s.batch_disk_bytes as u64;
    let dsync_writes = disk_total.div_ceil(DSYNC_WRITE_BYTES as u64);
    if s.scenarios.contains(&Scenario::Disk) {
        let chunk = random_bytes(s.batch_disk_bytes, 0xD15C);
        for run in 1..=runs {
            let secs =
                disk_fdatasync_run(&s, &chunk, append_batches).context("disk write+fdatasync")?;
            progress(format!(
                "disk write+fdatasync {} B x {append_batches} run {run}/{runs}: {:.1} MB/s, {:.0} syncs/s",
                s.batch_disk_bytes,
                disk_total as f64 / secs / 1e6,
                append_batches as f64 / secs
            ));
            disk_sync.push(secs);
        }
        let big = random_bytes(DSYNC_WRITE_BYTES, 0xDD);
        for run in 1..=runs {
            match disk_dsync_run(&s, &big, dsync_writes).context("disk O_DSYNC")? {
                Some(secs) => {
                    progress(format!(
                        "disk O_DSYNC 1 MiB x {dsync_writes} run {run}/{runs}: {:.1} MB/s",
                        (dsync_writes * DSYNC_WRITE_BYTES as u64) as f64 / secs / 1e6
                    ));
                    disk_dsync.push(secs);
                }
                None => {
                    progress("disk O_DSYNC: not supported on this target, skipped".into());
                    break;
                }
            }
        }
    }

    // read
    let mut reads: Vec<ReadSample> = Vec::new();
    if s.scenarios.contains(&Scenario::Read) {
        for run in 1..=runs {
            let r = read_run(&rt, &s, payloads[0]).context("read")?;
            progress(format!(
                "read run {run}/{runs}: wrote {} records in {:.2}s; first pass {} records/s, second {} records/s",
                thousands(r.cold.records as f64),
                r.write_secs,
                compact(r.cold.records as f64 / r.cold.secs),
                compact(r.warm.records as f64 / r.warm.secs)
            ));
            reads.push(r);
        }
    }

    // compact
    let mut compactions: Vec<CompactSample> = Vec::new();
    if s.scenarios.contains(&Scenario::Compact) {
        for run in 1..=runs {
            let c = compact_run(&rt, &s).context("compact")?;
            progress(format!(
                "compact run {run}/{runs}: {} records, pass {:.2}s ({:.0} MB/s), {} removed; append p99 {:.0} µs idle, {:.0} µs during",
                thousands(c.records as f64),
                c.secs,
                c.bytes_before as f64 / c.secs / 1e6,
                thousands(c.removed as f64),
                quantile(&c.idle_us, 0.99),
                quantile(&c.during_us, 0.99)
            ));
            compactions.push(c);
        }
    }

    print!(
        "{}",
        report(
            &s,
            &argv,
            Environment {
                fs,
                load_start,
                load_end: load_average()
            },
            &append,
            &disk_sync,
            &disk_dsync,
            dsync_writes,
            &reads
        )
    );
    print!("{}", compact_report(&s, &compactions));
    Ok(())
}
