//! The command line and the settings resolved from it.

use std::path::PathBuf;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use clap::{Parser, ValueEnum};
use kappa_log::{FsyncPolicy, NewRecord, TopicConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub(super) enum Scenario {
    Append,
    Disk,
    Read,
    /// One compaction pass over a compacted topic, and produce latency
    /// during it (not in the default set).
    Compact,
}

/// `FsyncPolicy` as a command-line value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub(super) enum Policy {
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
pub(super) struct Args {
    /// Scenarios to run (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "append,disk,read"
    )]
    pub(super) scenarios: Vec<Scenario>,
    /// Directory under which each run creates, then removes, a fresh data
    /// directory [default: the system temp dir].
    #[arg(long)]
    pub(super) dir: Option<PathBuf>,
    /// MB (10^6 bytes) of record values each append run writes
    /// [default: 512; 32 with --quick].
    #[arg(long)]
    pub(super) append_mb: Option<u64>,
    /// GB (10^9 bytes) of record values each read run writes, then reads
    /// [default: 1; 0.064 with --quick].
    #[arg(long)]
    pub(super) read_gb: Option<f64>,
    /// Repetitions of each measurement; the median is reported
    /// [default: 3; 1 with --quick].
    #[arg(long)]
    pub(super) runs: Option<usize>,
    /// Small sizes and a single run, for a smoke test.
    #[arg(long)]
    pub(super) quick: bool,
    /// fsync policies to measure appends with.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "never,interval,always"
    )]
    pub(super) fsync: Vec<Policy>,
    /// Numbers of concurrent writer tasks to measure appends with.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    pub(super) writers: Vec<usize>,
    /// Bytes of each record value.
    #[arg(long, default_value_t = 100)]
    pub(super) value_bytes: usize,
    /// Records per append (one batch).
    #[arg(long, default_value_t = 1000)]
    pub(super) batch_records: usize,
    /// `segment_bytes` of the topic, in MiB.
    #[arg(long, default_value_t = 128)]
    pub(super) segment_mib: u64,
    /// Records the compaction scenario fills its topic with
    /// [default: 2000000; 100000 with --quick].
    #[arg(long)]
    pub(super) compact_records: Option<u64>,
    /// Distinct keys of those records [default: 100000; 10000 with --quick].
    #[arg(long)]
    pub(super) compact_keys: Option<u64>,
}

/// The arguments with defaults resolved.
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) scenarios: Vec<Scenario>,
    pub(super) policies: Vec<FsyncPolicy>,
    pub(super) dir: PathBuf,
    pub(super) append_bytes: u64,
    pub(super) read_bytes: u64,
    pub(super) runs: usize,
    pub(super) writers: Vec<usize>,
    pub(super) value_bytes: usize,
    pub(super) batch_records: usize,
    pub(super) segment_bytes: u64,
    /// Bytes one batch of `batch_records` values takes in a segment.
    pub(super) batch_disk_bytes: usize,
    pub(super) compact_records: u64,
    pub(super) compact_keys: u64,
}

impl Settings {
    pub(super) fn from_args(args: Args) -> Result<Settings> {
        let (append_mb, read_gb, runs) = if args.quick {
            (32, 0.064, 1)
        } else {
            (512, 1.0, 3)
        };
        let append_mb = args.append_mb.unwrap_or(append_mb);
        let read_gb = args.read_gb.unwrap_or(read_gb);
        let runs = args.runs.unwrap_or(runs);
        let (compact_records, compact_keys) = if args.quick {
            (100_000, 10_000)
        } else {
            (2_000_000, 100_000)
        };
        let compact_records = args.compact_records.unwrap_or(compact_records);
        let compact_keys = args.compact_keys.unwrap_or(compact_keys);
        ensure!(
            compact_records >= 1 && compact_keys >= 1,
            "--compact-records and --compact-keys must be at least 1"
        );
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
            compact_records,
            compact_keys,
        })
    }

    pub(super) fn batch_value_bytes(&self) -> u64 {
        (self.value_bytes * self.batch_records) as u64
    }

    /// Batches needed for at least `value_bytes` of values.
    pub(super) fn batches_for(&self, value_bytes: u64) -> u64 {
        value_bytes.div_ceil(self.batch_value_bytes()).max(1)
    }

    pub(super) fn topic_config(&self, fsync: FsyncPolicy) -> TopicConfig {
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
