//! `kappa-log`: Kappa's storage engine — a partitioned, append-only segment
//! log with consumer offsets. No HTTP, no RocksDB.
//!
//! Layers, each knowing only the one below it:
//!
//! ```text
//! batch      record-batch codec + CRC (no I/O)            batch.rs
//! index      sparse offset and time indexes               index.rs
//! segment    one .log + indexes; scan, read               segment.rs, cache.rs
//! partition  segments, writer thread, recovery, reads     partition.rs, writer.rs,
//!                                                          recovery.rs, retention.rs,
//!                                                          idempotency.rs
//! topic      partitions + routing (murmur2)               topic.rs, partitioner.rs
//! log        data dir, topics, groups, retention task,    log.rs, offsets/,
//!            the log-wide append clock                    clock.rs
//! ```
//!
//! `FORMAT.md` documents every byte on disk.

#![warn(missing_docs)]

pub mod batch;
pub mod cache;
pub mod clock;
pub mod config;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod idempotency;
pub mod index;
pub mod io;
pub mod log;
pub mod metrics;
pub mod offsets;
pub mod partition;
pub mod partitioner;
pub mod recovery;
pub mod repair;
pub mod retention;
pub mod segment;
pub mod stats;
pub mod syncer;
pub mod topic;
pub mod writer;

pub use batch::{Header, HeaderRef, HeadersRef, NewRecord, Record, RecordRef};
pub use clock::{AppendClock, ManualTime};
pub use config::{FsyncPolicy, LogConfig, TopicChanges, TopicConfig};
pub use error::{LogError, Result};
pub use log::{GroupPartitionOffset, Log, ResetTo};
pub use offsets::CommittedOffset;
pub use partition::{AppendOutcome, AppendRequest, Fetch, Partition, PartitionDescription};
pub use topic::{
    PartialProduce, ProduceFailure, ProduceOutcome, ProduceRecord, Produced, Topic,
    TopicDescription,
};

/// Milliseconds since the Unix epoch, from the system clock.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
