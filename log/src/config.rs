//! Configuration: the log-wide [`LogConfig`] and the per-topic
//! [`TopicConfig`], each with documented defaults and `validate()`.
//!
//! Every resource the log holds has a limit here (TigerBeetle's "put a limit
//! on everything"); hitting one is an error, never unbounded growth.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::clock::AppendClock;
use crate::compression::Compression;
use crate::error::{LogError, Result};
use crate::io::FaultInjector;
use crate::tiered::SegmentStore;

/// When the writer makes appended bytes durable with `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// An append is acknowledged only after an fdatasync that covers it; one
    /// fdatasync covers every append of a group commit. Survives power loss.
    #[default]
    Always,
    /// Acknowledged once written to the page cache; fdatasync runs every
    /// `fsync_interval_ms`. Survives a process crash; a power loss may lose
    /// up to the last interval.
    Interval,
    /// Acknowledged once written to the page cache; the OS decides when to
    /// write back. Survives a process crash; a power loss may lose anything
    /// not yet written back (typically up to 30 s on Linux).
    Never,
}

/// Per-topic settings, persisted in the topic's `topic.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicConfig {
    /// Number of partitions (1..=[`MAX_PARTITIONS_PER_TOPIC`]).
    pub partitions: u32,
    /// Roll the active segment once it holds this many bytes (default 128 MiB).
    pub segment_bytes: u64,
    /// Roll the active segment once its first batch is this old (default 7 days).
    pub segment_ms: u64,
    /// Delete segments whose newest record is older than this; `None` keeps
    /// them forever (the default: the log is the system of record, and a
    /// view replayed next month needs this month's input).
    pub retention_ms: Option<u64>,
    /// Delete the oldest segments while a partition is larger than this;
    /// `None` = no size limit (the default).
    pub retention_bytes: Option<u64>,
    /// Durability policy (default `always`).
    pub fsync: FsyncPolicy,
    /// Interval of the `interval` policy (default 100 ms).
    pub fsync_interval_ms: u64,
    /// How batches are stored: as encoded (the default), or compressed
    /// with zstd or lz4 (FORMAT.md §2.8). Changing it changes the batches
    /// appended from then on. Written to `topic.json` only when set, so an
    /// uncompressed topic's file is as it was before compression existed.
    #[serde(skip_serializing_if = "Compression::is_none")]
    pub compression: Compression,
    /// What happens to old records: deleted by retention (`delete`, the
    /// default), compacted to the latest record of each key (`compact`), or
    /// both (`compact,delete`). Written to `topic.json` only when not
    /// `delete`.
    #[serde(skip_serializing_if = "CleanupPolicy::is_delete")]
    pub cleanup_policy: CleanupPolicy,
    /// How long a compacted topic keeps a tombstone (a record with an
    /// empty value, Kafka's null) after its append, so readers catching up
    /// see the deletion; `None` = [`DEFAULT_DELETE_RETENTION_MS`] (1 day).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_retention_ms: Option<u64>,
    /// How long a record stays uncompacted after its append; `None` = 0.
    /// The cleaner also leaves alone everything younger than the log's
    /// idempotency window (a retried append is recognized by keys the
    /// cleaner drops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_compaction_lag_ms: Option<u64>,
    /// Move sealed segments to tiered storage once their newest record is
    /// this old (`log/FORMAT.md` §8.4); needs the log's `remote_store`.
    /// `None` keeps them local. Written only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_retention_ms: Option<u64>,
    /// Move the oldest sealed segments to tiered storage while a
    /// partition's local bytes exceed this. Written only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_retention_bytes: Option<u64>,
    /// Keep only the newest this-many bytes of each partition in the
    /// operating system's page cache: after each fsync of the writer, the
    /// bytes of the active segment older than that are dropped from it
    /// (`posix_fadvise(DONTNEED)`), and a sealed segment's rest once the
    /// next segment holds the tail; a reader of them reads from disk. Only under `fsync = always`, where
    /// the writer's fsync leaves the pages clean. `None` (the default)
    /// leaves the page cache to the operating system. Derived streams'
    /// topics are created with [`DERIVED_CACHED_TAIL_BYTES`]: written
    /// once, read at the tail, their pages would otherwise pile up (and a
    /// host that prices new memory charges each new page; BENCHMARKS.md).
    /// Written only when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tail_bytes: Option<u64>,
}

/// The `cached_tail_bytes` of the topics derived streams create: one group
/// commit's most bytes (8 MiB), so readers at the tail read from memory.
pub const DERIVED_CACHED_TAIL_BYTES: u64 = 8 << 20;

/// How long a compacted topic keeps tombstones by default: 1 day, as Kafka.
pub const DEFAULT_DELETE_RETENTION_MS: u64 = 24 * 3600 * 1000;

/// A topic's `cleanup.policy`: what happens to old records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum CleanupPolicy {
    /// Retention deletes whole old segments (when `retention_ms` or
    /// `retention_bytes` is set).
    #[default]
    #[serde(rename = "delete")]
    Delete,
    /// The cleaner keeps the latest record of each key; retention settings
    /// are not applied.
    #[serde(rename = "compact")]
    Compact,
    /// Both: compacted, and retention deletes old segments.
    #[serde(rename = "compact,delete")]
    CompactDelete,
}

impl CleanupPolicy {
    /// Every policy, for messages.
    pub const ALL: [CleanupPolicy; 3] = [
        CleanupPolicy::Delete,
        CleanupPolicy::Compact,
        CleanupPolicy::CompactDelete,
    ];

    /// True for the default, `delete`.
    pub fn is_delete(&self) -> bool {
        *self == CleanupPolicy::Delete
    }

    /// True if the cleaner compacts the topic.
    pub fn compacts(self) -> bool {
        self != CleanupPolicy::Delete
    }

    /// True if retention deletes old segments.
    pub fn deletes(self) -> bool {
        self != CleanupPolicy::Compact
    }

    /// Its name, as Kafka writes it.
    pub fn name(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }
}

impl std::fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for CleanupPolicy {
    type Err = String;

    /// Kafka's spellings: `delete`, `compact`, and `compact,delete` in
    /// either order, any case, spaces around the comma allowed.
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        let mut parts: Vec<String> = s
            .split(',')
            .map(|p| p.trim().to_ascii_lowercase())
            .collect();
        parts.sort();
        parts.dedup();
        match parts.iter().map(String::as_str).collect::<Vec<_>>()[..] {
            ["delete"] => Ok(CleanupPolicy::Delete),
            ["compact"] => Ok(CleanupPolicy::Compact),
            ["compact", "delete"] => Ok(CleanupPolicy::CompactDelete),
            _ => Err(format!(
                "unknown cleanup policy {s:?}: expected delete, compact or compact,delete"
            )),
        }
    }
}

/// The settings of a topic that can change after it was created
/// ([`crate::Log::alter_topic`]): retention, compression, compaction and the page cache tail. Partitions
/// cannot change (keys would move to other partitions); segment and fsync
/// settings are held by each partition's writer thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TopicChanges {
    /// New retention by age (`Some(None)`: keep forever).
    pub retention_ms: Option<Option<u64>>,
    /// New retention by size (`Some(None)`: no limit).
    pub retention_bytes: Option<Option<u64>>,
    /// New compression of the batches appended from now on.
    pub compression: Option<Compression>,
    /// New cleanup policy.
    pub cleanup_policy: Option<CleanupPolicy>,
    /// New tombstone retention (`Some(None)`: the default).
    pub delete_retention_ms: Option<Option<u64>>,
    /// New compaction lag (`Some(None)`: none).
    pub min_compaction_lag_ms: Option<Option<u64>>,
    /// New local retention by age (`Some(None)`: segments stay local).
    pub local_retention_ms: Option<Option<u64>>,
    /// New local retention by size (`Some(None)`: no limit).
    pub local_retention_bytes: Option<Option<u64>>,
    /// New page cache tail (`Some(None)`: the page cache left to the
    /// operating system).
    pub cached_tail_bytes: Option<Option<u64>>,
}

impl TopicChanges {
    /// `config` with these changes.
    pub fn apply(&self, config: &TopicConfig) -> TopicConfig {
        TopicConfig {
            retention_ms: self.retention_ms.unwrap_or(config.retention_ms),
            retention_bytes: self.retention_bytes.unwrap_or(config.retention_bytes),
            compression: self.compression.unwrap_or(config.compression),
            cleanup_policy: self.cleanup_policy.unwrap_or(config.cleanup_policy),
            delete_retention_ms: self
                .delete_retention_ms
                .unwrap_or(config.delete_retention_ms),
            min_compaction_lag_ms: self
                .min_compaction_lag_ms
                .unwrap_or(config.min_compaction_lag_ms),
            local_retention_ms: self.local_retention_ms.unwrap_or(config.local_retention_ms),
            local_retention_bytes: self
                .local_retention_bytes
                .unwrap_or(config.local_retention_bytes),
            cached_tail_bytes: self.cached_tail_bytes.unwrap_or(config.cached_tail_bytes),
            ..config.clone()
        }
    }
}

/// Most partitions one topic may have.
pub const MAX_PARTITIONS_PER_TOPIC: u32 = 1024;
/// Smallest allowed `segment_bytes` (small values are for tests).
pub const MIN_SEGMENT_BYTES: u64 = 1024;
/// Largest allowed `segment_bytes`: index positions are 32-bit.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 30;

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            partitions: 1,
            segment_bytes: 128 << 20,
            segment_ms: 7 * 24 * 3600 * 1000,
            retention_ms: None,
            retention_bytes: None,
            fsync: FsyncPolicy::Always,
            fsync_interval_ms: 100,
            compression: Compression::None,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: None,
            min_compaction_lag_ms: None,
            local_retention_ms: None,
            local_retention_bytes: None,
            cached_tail_bytes: None,
        }
    }
}

impl TopicConfig {
    /// How long tombstones stay in a compacted topic.
    pub fn delete_retention_ms(&self) -> u64 {
        self.delete_retention_ms
            .unwrap_or(DEFAULT_DELETE_RETENTION_MS)
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(LogError::InvalidConfig(m));
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS_PER_TOPIC {
            return bad(format!(
                "partitions must be in 1..={MAX_PARTITIONS_PER_TOPIC}, got {}",
                self.partitions
            ));
        }
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return bad(format!(
                "segment_bytes must be in {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}, got {}",
                self.segment_bytes
            ));
        }
        if self.segment_ms == 0 {
            return bad("segment_ms must be positive".into());
        }
        if self.retention_ms == Some(0) {
            return bad("retention_ms must be positive (omit it to keep data forever)".into());
        }
        if self.local_retention_ms == Some(0) {
            return bad(
                "local_retention_ms must be positive (omit it to keep segments local)".into(),
            );
        }
        if self.fsync_interval_ms == 0 || self.fsync_interval_ms > 3_600_000 {
            return bad(format!(
                "fsync_interval_ms must be in 1..=3600000, got {}",
                self.fsync_interval_ms
            ));
        }
        Ok(())
    }
}

/// Log-wide settings and limits.
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Root directory; topics live under `topics/`, offsets under `groups/`.
    pub data_dir: PathBuf,
    /// Most partitions across all topics (each has a writer thread and an
    /// open file). Default 1024.
    pub max_partitions: u32,
    /// Most sealed segments kept open and mapped at once (LRU). Default 256.
    pub max_open_segments: usize,
    /// Most bytes of sealed segments kept mapped at once (LRU). Default 16 GiB
    /// of address space (pages are loaded on demand).
    pub max_mapped_bytes: u64,
    /// Bytes of appends that may wait in one partition's queue. Default 64 MiB.
    pub append_queue_bytes: usize,
    /// How long an append waits for queue space before `Backpressure`.
    /// Default 1000 ms.
    pub append_queue_wait_ms: u64,
    /// Largest batch (one append) in bytes. Default 32 MiB.
    pub max_batch_bytes: usize,
    /// Most records in one append. Default 100,000.
    pub max_batch_records: usize,
    /// Bytes of log between two sparse index entries. Default 4096.
    pub index_interval_bytes: u64,
    /// Idempotency keys remembered per partition. Default 10,000.
    pub idempotency_window_keys: usize,
    /// How long an idempotency key is remembered. Default 15 minutes.
    pub idempotency_window_ms: u64,
    /// How often the background task applies retention and compaction.
    /// Default 60 s.
    pub retention_check_interval_ms: u64,
    /// Memory the cleaner's key map may take in one pass (the keys of the
    /// records it compacts, with their offsets). Default 128 MiB. A pass
    /// compacts as many whole segments as fit; a segment whose keys alone
    /// do not fit is not compacted (logged, counted).
    pub cleaner_buffer_bytes: usize,
    /// A partition is compacted when at least this share of its compactable
    /// bytes was never compacted (Kafka's `min.cleanable.dirty.ratio`).
    /// Default 0.5; 0 compacts at every pass that finds anything new.
    pub min_cleanable_dirty_ratio: f64,
    /// Bytes per second the cleaner reads and writes at most (a pause
    /// after each rewritten segment keeps it under); `None` = no limit
    /// (the default).
    pub cleaner_io_bytes_per_sec: Option<u64>,
    /// Tiered storage: where topics with a local retention move their
    /// old sealed segments (`log/FORMAT.md` §8.4). `None` (the default):
    /// every segment stays local, and a topic asking for a local
    /// retention is refused.
    pub remote_store: Option<Arc<dyn SegmentStore>>,
    /// Fault injection for tests; `None` in production.
    pub faults: Option<Arc<FaultInjector>>,
    /// The append clock every partition takes append times from (the
    /// system clock; tests give one with a [`crate::clock::ManualTime`]).
    pub clock: Arc<AppendClock>,
}

impl LogConfig {
    /// Defaults with the given data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        LogConfig {
            data_dir: data_dir.into(),
            max_partitions: 1024,
            max_open_segments: 256,
            max_mapped_bytes: 16 << 30,
            append_queue_bytes: 64 << 20,
            append_queue_wait_ms: 1000,
            max_batch_bytes: 32 << 20,
            max_batch_records: 100_000,
            index_interval_bytes: 4096,
            idempotency_window_keys: 10_000,
            idempotency_window_ms: 15 * 60 * 1000,
            retention_check_interval_ms: 60_000,
            cleaner_buffer_bytes: 128 << 20,
            min_cleanable_dirty_ratio: 0.5,
            cleaner_io_bytes_per_sec: None,
            remote_store: None,
            faults: None,
            clock: Arc::new(AppendClock::system()),
        }
    }

    /// Checks every field's range.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(LogError::InvalidConfig(m.to_string()));
        if self.max_partitions == 0 {
            return bad("max_partitions must be positive");
        }
        if self.max_open_segments == 0 {
            return bad("max_open_segments must be positive");
        }
        if self.max_batch_bytes < 1024 || self.max_batch_bytes > (1 << 30) {
            return bad("max_batch_bytes must be in 1024..=1073741824");
        }
        if self.append_queue_bytes < self.max_batch_bytes {
            return bad("append_queue_bytes must be at least max_batch_bytes");
        }
        if self.max_batch_records == 0 {
            return bad("max_batch_records must be positive");
        }
        if self.index_interval_bytes == 0 {
            return bad("index_interval_bytes must be positive");
        }
        if self.retention_check_interval_ms == 0 {
            return bad("retention_check_interval_ms must be positive");
        }
        if self.cleaner_buffer_bytes < 1024 {
            return bad("cleaner_buffer_bytes must be at least 1024");
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            return bad("min_cleanable_dirty_ratio must be in 0..=1");
        }
        if self.cleaner_io_bytes_per_sec == Some(0) {
            return bad("cleaner_io_bytes_per_sec must be positive (omit it for no limit)");
        }
        Ok(())
    }
}
