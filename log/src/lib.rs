//! `kappa-log`: Kappa's storage engine — a partitioned, append-only segment
//! log with consumer offsets. No HTTP, no RocksDB.
//!
//! Layers, each knowing only the one below it:
//!
//! ```text
//! batch      record-batch codec + CRC (no I/O); zstd/lz4   batch.rs, compression.rs
//!            compressed batches (version 2)
//! index      sparse offset and time indexes               index.rs
//! segment    one .log + indexes; scan, read               segment.rs, cache.rs
//! partition  segments, writer thread, recovery, reads,    partition.rs, writer.rs,
//!            retention, compaction, tiering               recovery.rs, retention.rs,
//!                                                          cleaner.rs, tiered.rs,
//!                                                          idempotency.rs
//! topic      partitions + routing (murmur2)               topic.rs, partitioner.rs
//! log        data dir, topics, groups, retention task,    log.rs, offsets/,
//!            the log-wide append clock                    clock.rs
//! ```
//!
//! `FORMAT.md` documents every byte on disk.
//!
//! The public surface is the items re-exported here ([`Log`], [`Topic`],
//! [`Partition`], their configs, records and answers) plus the modules that
//! tools and tests need by name: the on-disk format ([`batch`], [`index`],
//! [`segment`], [`offsets`]) for the offline inspector, [`repair`] for its
//! repairs, [`io`] (atomic writes; crash and fault injection for tests) and
//! [`stats`] (process-wide counters). The rest is private.

#![warn(missing_docs)]

pub mod batch;
mod cache;
mod cleaner;
mod clock;
pub mod compression;
mod config;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod idempotency;
pub mod index;
pub mod io;
pub mod kafka_batch;
mod log;
mod metrics;
pub mod offsets;
mod partition;
mod partitioner;
mod recovery;
pub mod repair;
mod retention;
pub mod segment;
pub mod stats;
mod syncer;
pub mod tiered;
mod topic;
mod writer;

pub use batch::{EncodedRecords, Header, HeaderRef, HeadersRef, NewRecord, Record, RecordRef};
pub use cleaner::CompactionOutcome;
pub use clock::{AppendClock, ManualTime};
pub use compression::Compression;
pub use config::{
    CleanupPolicy, FsyncPolicy, LogConfig, TopicChanges, TopicConfig, DEFAULT_DELETE_RETENTION_MS,
    DERIVED_CACHED_TAIL_BYTES, MAX_PARTITIONS_PER_TOPIC,
};
pub use error::{LogError, Result};
pub use kafka_batch::KafkaRecords;
pub use log::{GroupPartitionOffset, Log, ResetTo};
pub use offsets::CommittedOffset;
pub use partition::{
    AppendChain, AppendOutcome, AppendRequest, Fetch, Partition, PartitionDescription,
    PendingAppend,
};
pub use partitioner::partition_for_key;
pub use tiered::SegmentStore;
pub use topic::validate_topic_name;
pub use topic::{
    PartialProduce, ProduceFailure, ProduceOutcome, ProduceRecord, Produced, Topic,
    TopicDescription, TopicMeta,
};

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
