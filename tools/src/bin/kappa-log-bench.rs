//! `kappa-log-bench`: throughput of the `kappa-log` storage engine.
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
//!
//! Every measurement is repeated `--runs` times; the median is reported with
//! the min and max. Results go to stdout as Markdown (for BENCHMARKS.md);
//! progress goes to stderr.
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-log-bench -- [--quick] [--dir DIR] ...
//! ```

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, NewRecord, Partition, TopicConfig};
use kappa_tools::bench::report::{compact, compact_range, thousands};
use kappa_tools::bench::stats::Spread;
use kappa_tools::machine::{
    cpu_model, filesystem, kernel, load_average, memory, shell_quote, today,
};
use tokio::runtime::Runtime;

/// Records per `Partition::read` call of the read scenario.
const READ_MAX_RECORDS: u64 = 10_000;
/// Bytes per `Partition::read` call of the read scenario.
const READ_MAX_BYTES: u64 = 4 << 20;
/// Write size of the dd-like reference run.
const DSYNC_WRITE_BYTES: usize = 1 << 20;
/// Name of the topic every scenario creates.
const TOPIC: &str = "bench";

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
enum Scenario {
    Append,
    Disk,
    Read,
}

/// `FsyncPolicy` as a command-line value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
enum Policy {
    Never,
    Interval,
    Always,
}

impl From<Policy> for FsyncPolicy {
    fn from(p: Policy) -> FsyncPolicy {
        match p {
            Policy::Never => FsyncPolicy::Never,
            Policy::Interval => FsyncPolicy::Interval,
            Policy::Always => FsyncPolicy::Always,
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "kappa-log-bench",
    about = "Throughput of the kappa-log storage engine: append (per fsync policy, 1 and 8 \
             writers), the raw disk baseline, sequential read. Markdown on stdout, progress on \
             stderr."
)]
struct Args {
    /// Scenarios to run (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,disk,read"
    )]
    scenarios: Vec<Scenario>,
    /// Directory under which each run creates, then removes, a fresh data
    /// directory [default: the system temp dir].
    #[arg(long)]
    dir: Option<PathBuf>,
    /// MB (10^6 bytes) of record values each append run writes
    /// [default: 512; 32 with --quick].
    #[arg(long)]
    append_mb: Option<u64>,
    /// GB (10^9 bytes) of record values each read run writes, then reads
    /// [default: 1; 0.064 with --quick].
    #[arg(long)]
    read_gb: Option<f64>,
    /// Repetitions of each measurement; the median is reported
    /// [default: 3; 1 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// Small sizes and a single run, for a smoke test.
    #[arg(long)]
    quick: bool,
    /// fsync policies to measure appends with.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "never,interval,always"
    )]
    fsync: Vec<Policy>,
    /// Numbers of concurrent writer tasks to measure appends with.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    writers: Vec<usize>,
    /// Bytes of each record value.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Records per append (one batch).
    #[arg(long, default_value_t = 1000)]
    batch_records: usize,
    /// `segment_bytes` of the topic, in MiB.
    #[arg(long, default_value_t = 128)]
    segment_mib: u64,
}

/// The arguments with defaults resolved.
#[derive(Debug)]
struct Settings {
    scenarios: Vec<Scenario>,
    policies: Vec<FsyncPolicy>,
    dir: PathBuf,
    append_bytes: u64,
    read_bytes: u64,
    runs: usize,
    writers: Vec<usize>,
    value_bytes: usize,
    batch_records: usize,
    segment_bytes: u64,
    /// Bytes one batch of `batch_records` values takes in a segment.
    batch_disk_bytes: usize,
}

impl Settings {
    fn from_args(args: Args) -> Result<Settings> {
        let (append_mb, read_gb, runs) = if args.quick {
            (32, 0.064, 1)
        } else {
            (512, 1.0, 3)
        };
        let append_mb = args.append_mb.unwrap_or(append_mb);
        let read_gb = args.read_gb.unwrap_or(read_gb);
        let runs = args.runs.unwrap_or(runs);
        ensure!(runs >= 1, "--runs must be at least 1");
        ensure!(append_mb >= 1, "--append-mb must be at least 1");
        ensure!(
            read_gb > 0.0 && read_gb.is_finite(),
            "--read-gb must be positive"
        );
        ensure!(args.value_bytes >= 1, "--value-bytes must be at least 1");
        ensure!(
            (1..=100_000).contains(&args.batch_records),
            "--batch-records must be in 1..=100000 (the log's max_batch_records)"
        );
        ensure!(
            !args.writers.is_empty() && args.writers.iter().all(|&w| w >= 1),
            "--writers needs positive counts"
        );
        let mut scenarios = args.scenarios;
        scenarios.sort_unstable();
        scenarios.dedup();
        let mut policies = args.fsync;
        policies.sort_unstable();
        policies.dedup();
        ensure!(!policies.is_empty(), "--fsync needs at least one policy");
        let mut writers = args.writers;
        writers.sort_unstable();
        writers.dedup();
        let dir = args.dir.unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let dir = dir
            .canonicalize()
            .with_context(|| format!("resolving {}", dir.display()))?;
        let value = Bytes::from(vec![0u8; args.value_bytes]);
        let sample = vec![NewRecord::value(value); args.batch_records];
        let batch_disk_bytes = kappa_log::batch::encoded_len(&sample, None);
        Ok(Settings {
            scenarios,
            policies: policies.into_iter().map(FsyncPolicy::from).collect(),
            dir,
            append_bytes: append_mb * 1_000_000,
            read_bytes: (read_gb * 1e9) as u64,
            runs,
            writers,
            value_bytes: args.value_bytes,
            batch_records: args.batch_records,
            segment_bytes: args.segment_mib << 20,
            batch_disk_bytes,
        })
    }

    fn batch_value_bytes(&self) -> u64 {
        (self.value_bytes * self.batch_records) as u64
    }

    /// Batches needed for at least `value_bytes` of values.
    fn batches_for(&self, value_bytes: u64) -> u64 {
        value_bytes.div_ceil(self.batch_value_bytes()).max(1)
    }

    fn topic_config(&self, fsync: FsyncPolicy) -> TopicConfig {
        TopicConfig {
            partitions: 1,
            fsync,
            fsync_interval_ms: 100,
            segment_bytes: self.segment_bytes,
            retention_ms: None,
            ..Default::default()
        }
    }
}

/// A fresh directory under the benchmark directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(parent: &Path, label: &str) -> Result<TempDir> {
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

    fn path(&self) -> &Path {
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

/// Deterministic pseudo-random bytes (xorshift64*), so values are not all
/// zeros without needing a `rand` dependency.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// One batch of records whose values are consecutive slices of `payload`
/// (static memory, so building a batch costs only the `Vec<NewRecord>`).
fn make_batch(payload: &'static [u8], value_bytes: usize, records: usize) -> Vec<NewRecord> {
    payload
        .chunks_exact(value_bytes)
        .take(records)
        .map(|v| NewRecord::value(Bytes::from_static(v)))
        .collect()
}

/// The log's process-wide count of segment fdatasyncs.
fn fsync_count() -> u64 {
    kappa_log::stats::global().fsyncs.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------- append

#[derive(Debug, Clone, Copy)]
struct AppendSample {
    secs: f64,
    records: u64,
    value_bytes: u64,
    appends: u64,
    fsyncs: u64,
    close_secs: f64,
    segments: usize,
}

fn append_run(
    rt: &Runtime,
    s: &Settings,
    fsync: FsyncPolicy,
    writers: usize,
    payloads: &[&'static [u8]],
) -> Result<AppendSample> {
    let data = TempDir::new(&s.dir, "append")?;
    let log = Log::open(LogConfig::new(data.path()))?;
    let topic = log.create_topic(TOPIC, s.topic_config(fsync))?;
    let batches = s.batches_for(s.append_bytes);
    let (value_bytes, batch_records) = (s.value_bytes, s.batch_records);
    let fsyncs0 = fsync_count();
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::with_capacity(writers);
        for (w, &payload) in payloads.iter().enumerate().take(writers) {
            let n = batches / writers as u64 + u64::from((w as u64) < batches % writers as u64);
            let topic = topic.clone();
            tasks.push(tokio::spawn(async move {
                let partition = topic.partition(0)?;
                for _ in 0..n {
                    let records = make_batch(payload, value_bytes, batch_records);
                    partition
                        .append(AppendRequest {
                            records,
                            idempotency_key: None,
                        })
                        .await?;
                }
                anyhow::Ok(())
            }));
        }
        for task in tasks {
            task.await.context("writer task panicked")??;
        }
        anyhow::Ok(())
    })?;
    let secs = started.elapsed().as_secs_f64();
    let fsyncs1 = fsync_count();
    let partition = topic.partition(0)?;
    let records = batches * s.batch_records as u64;
    ensure!(
        partition.end_offset() == records,
        "partition ends at {} after appending {records} records",
        partition.end_offset()
    );
    let segments = partition.describe().segment_count;
    let closing = Instant::now();
    log.close();
    let close_secs = closing.elapsed().as_secs_f64();
    drop(topic);
    drop(log);
    drop(data);
    Ok(AppendSample {
        secs,
        records,
        value_bytes: batches * s.batch_value_bytes(),
        appends: batches,
        fsyncs: fsyncs1 - fsyncs0,
        close_secs,
        segments,
    })
}

// ------------------------------------------------------------------ disk

/// `chunks` times: `write` of `chunk`, then `fdatasync`. Returns seconds.
fn disk_fdatasync_run(s: &Settings, chunk: &[u8], chunks: u64) -> Result<f64> {
    let data = TempDir::new(&s.dir, "disk")?;
    let path = data.path().join("fdatasync.dat");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let started = Instant::now();
    for _ in 0..chunks {
        file.write_all(chunk).context("write")?;
        file.sync_data().context("fdatasync")?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `O_DSYNC` on the Linux targets whose value is the generic 0o10000.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const O_DSYNC: Option<i32> = Some(0o10000);
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
const O_DSYNC: Option<i32> = None;

/// dd-like: `writes` writes of `chunk` to a file opened with `O_DSYNC`
/// (`dd bs=1M oflag=dsync`). Returns seconds, or `None` where unsupported.
fn disk_dsync_run(s: &Settings, chunk: &[u8], writes: u64) -> Result<Option<f64>> {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(flag) = O_DSYNC else { return Ok(None) };
    let data = TempDir::new(&s.dir, "dsync")?;
    let path = data.path().join("dsync.dat");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flag)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let started = Instant::now();
    for _ in 0..writes {
        file.write_all(chunk).context("write")?;
    }
    Ok(Some(started.elapsed().as_secs_f64()))
}

// ------------------------------------------------------------------ read

#[derive(Debug, Clone, Copy)]
struct ReadPass {
    secs: f64,
    records: u64,
    value_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
struct ReadSample {
    write_secs: f64,
    cold: ReadPass,
    warm: ReadPass,
    evicted: bool,
    segments: usize,
}

/// Reads the whole partition from its start, touching every value's length.
fn read_all(partition: &Partition) -> Result<ReadPass> {
    let end = partition.end_offset();
    let mut offset = partition.start_offset();
    let (mut records, mut value_bytes) = (0u64, 0u64);
    let started = Instant::now();
    while offset < end {
        let fetch = partition.read(offset, READ_MAX_RECORDS, READ_MAX_BYTES)?;
        for record in fetch.records() {
            records += 1;
            value_bytes += std::hint::black_box(record.value.len()) as u64;
        }
        ensure!(
            fetch.next_offset > offset,
            "read made no progress at offset {offset}"
        );
        offset = fetch.next_offset;
    }
    Ok(ReadPass {
        secs: started.elapsed().as_secs_f64(),
        records,
        value_bytes,
    })
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
mod fadvise {
    extern "C" {
        // glibc/musl: int posix_fadvise(int fd, off_t offset, off_t len, int advice);
        // off_t is 64-bit on these targets.
        fn posix_fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> i32;
    }
    const POSIX_FADV_DONTNEED: i32 = 4;

    /// Drops the file's clean pages from the page cache.
    pub fn dont_need(file: &std::fs::File) -> std::io::Result<bool> {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall wrapper on a descriptor we own; it reads no
        // memory of ours.
        let rc = unsafe { posix_fadvise(file.as_raw_fd(), 0, 0, POSIX_FADV_DONTNEED) };
        if rc == 0 {
            Ok(true)
        } else {
            Err(std::io::Error::from_raw_os_error(rc))
        }
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
mod fadvise {
    pub fn dont_need(_file: &std::fs::File) -> std::io::Result<bool> {
        Ok(false)
    }
}

/// Writes back and evicts every file of `dir` from the page cache (no root
/// needed, unlike `drop_caches`). Files mapped by the process keep their
/// pages, so call this before the first read maps sealed segments.
fn evict_dir(dir: &Path) -> Result<bool> {
    let mut evicted = true;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        file.sync_data()
            .with_context(|| format!("fdatasync {}", path.display()))?;
        evicted &=
            fadvise::dont_need(&file).with_context(|| format!("fadvise {}", path.display()))?;
    }
    Ok(evicted)
}

fn read_run(rt: &Runtime, s: &Settings, payload: &'static [u8]) -> Result<ReadSample> {
    let data = TempDir::new(&s.dir, "read")?;
    let log = Log::open(LogConfig::new(data.path()))?;
    let topic = log.create_topic(TOPIC, s.topic_config(FsyncPolicy::Never))?;
    let batches = s.batches_for(s.read_bytes);
    let records = batches * s.batch_records as u64;
    let value_bytes = batches * s.batch_value_bytes();
    let partition = topic.partition(0)?;
    let started = Instant::now();
    rt.block_on(async {
        for _ in 0..batches {
            let records = make_batch(payload, s.value_bytes, s.batch_records);
            partition
                .append(AppendRequest {
                    records,
                    idempotency_key: None,
                })
                .await?;
        }
        anyhow::Ok(())
    })?;
    let write_secs = started.elapsed().as_secs_f64();
    ensure!(
        partition.end_offset() == records,
        "partition ends at {}",
        partition.end_offset()
    );
    let evicted = evict_dir(&topic.dir().join("0"))?;
    let cold = read_all(partition)?;
    let warm = read_all(partition)?;
    for pass in [cold, warm] {
        ensure!(
            pass.records == records && pass.value_bytes == value_bytes,
            "read {} records / {} value bytes, wrote {records} / {value_bytes}",
            pass.records,
            pass.value_bytes
        );
    }
    let segments = partition.describe().segment_count;
    log.close();
    drop(topic);
    drop(log);
    drop(data);
    Ok(ReadSample {
        write_secs,
        cold,
        warm,
        evicted,
        segments,
    })
}

// --------------------------------------------------------------- summary

/// Median, min and max of the runs' values.
type Summary = Spread;

fn summarize(values: impl IntoIterator<Item = f64>) -> Summary {
    Spread::of_runs(values)
}

fn range_1(s: Summary) -> String {
    format!("{:.1} – {:.1}", s.min, s.max)
}

fn policy_name(p: FsyncPolicy) -> &'static str {
    match p {
        FsyncPolicy::Never => "never",
        FsyncPolicy::Interval => "interval (100 ms)",
        FsyncPolicy::Always => "always",
    }
}

/// Facts about where the benchmark ran.
struct Environment {
    /// (device, filesystem type) of the data directory.
    fs: Option<(String, String, String)>,
    load_start: String,
    load_end: String,
}

// ------------------------------------------------------------------ main

fn main() -> Result<()> {
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
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn report(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(1_234_567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(0.0), "0");
        assert_eq!(compact(2_345_678.0), "2.35 M");
        assert_eq!(shell_quote("--runs"), "--runs");
        assert_eq!(shell_quote("a b"), "'a b'");
        let s = summarize([3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        assert_eq!(summarize([1.0, 2.0]).median, 1.5);
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn batches_are_filled_from_the_payload() {
        let payload: &'static [u8] = Box::leak(random_bytes(1000, 1).into_boxed_slice());
        let batch = make_batch(payload, 100, 10);
        assert_eq!(batch.len(), 10);
        assert!(batch
            .iter()
            .all(|r| r.value.len() == 100 && r.key.is_none()));
        assert_ne!(batch[0].value, batch[1].value);
    }
}
