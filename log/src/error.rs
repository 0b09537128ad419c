//! The one error type of the log crate.
//!
//! Each variant says what the caller can do about it: a bad argument
//! (`InvalidTopicName`, `InvalidGroupName`, `OffsetOutOfRange`), a missing object
//! (`UnknownTopic`), a transient overload (`Backpressure`), or a storage
//! problem that needs an operator (`Io`, `Corrupt`, `Damaged`, `Metadata`,
//! `PartitionFailed`).

use std::path::PathBuf;

/// Result alias used throughout the crate.
pub type Result<T, E = LogError> = std::result::Result<T, E>;

/// Everything that can go wrong in the log.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A topic name broke the naming rule.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName {
        /// The name given.
        name: String,
        /// The rule it broke.
        reason: &'static str,
    },

    /// A consumer group name broke the naming rule (1..=255 bytes, no ASCII
    /// control character).
    #[error("consumer group name {name:?} {reason}")]
    InvalidGroupName {
        /// The name given.
        name: String,
        /// The rule it broke.
        reason: &'static str,
    },

    /// A configuration value was out of its allowed range.
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// An argument (record, key, request) was not acceptable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A record without a key was appended to a compacted topic (the
    /// cleaner keeps the latest record of each key; a keyless one has
    /// none).
    #[error("topic {topic:?} is compacted (cleanup_policy {policy}): every record needs a key")]
    KeyRequired {
        /// Topic.
        topic: String,
        /// Its cleanup policy.
        policy: String,
    },

    /// Tiered storage could not be reached: a read of a segment kept
    /// there, or a move there, failed (appends and local reads go on).
    #[error("unavailable: {0}")]
    Unavailable(String),

    /// The topic does not exist.
    #[error("topic {0:?} does not exist")]
    UnknownTopic(String),

    /// The topic already exists.
    #[error("topic {0:?} already exists")]
    TopicExists(String),

    /// The partition number is not one of the topic's partitions.
    #[error("topic {topic:?} has no partition {partition} (it has {partitions})")]
    UnknownPartition {
        /// Topic.
        topic: String,
        /// The partition asked for.
        partition: u32,
        /// How many partitions the topic has.
        partitions: u32,
    },

    /// The requested offset is outside `[start, end]` of the partition.
    #[error(
        "topic {topic:?} partition {partition}: offset {offset} is out of range [{start}, {end}]"
    )]
    OffsetOutOfRange {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// The offset asked for.
        offset: u64,
        /// The partition's first offset.
        start: u64,
        /// The partition's end offset (the next to be written).
        end: u64,
    },

    /// The append queue of a partition stayed full for longer than the
    /// configured wait: the caller should retry later.
    #[error("topic {topic:?} partition {partition}: append queue is full")]
    Backpressure {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
    },

    /// An idempotency key was reused for a different request.
    #[error("idempotency key {key:?} was already used for a different request: {reason}")]
    IdempotencyKeyReused {
        /// The key.
        key: String,
        /// How the request differs from the first one.
        reason: String,
    },

    /// Creating a topic would exceed the log's partition budget
    /// (`max_partitions`): a conflict with what exists, not a size problem.
    #[error(
        "creating {requested} partitions would exceed max_partitions ({max}; {in_use} in use)"
    )]
    PartitionBudget {
        /// Partitions the new topic asked for.
        requested: u32,
        /// The budget.
        max: u32,
        /// Partitions of existing topics.
        in_use: u32,
    },

    /// A resource limit (mapped bytes, batch size) was hit.
    #[error("limit reached: {0}")]
    LimitExceeded(String),

    /// The partition stopped accepting writes after a failed fsync or write
    /// it could not undo; it needs a restart (which runs recovery).
    #[error("topic {topic:?} partition {partition} stopped accepting writes: {reason}")]
    PartitionFailed {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// The failure that stopped it.
        reason: String,
    },

    /// Stored bytes failed validation (CRC, magic, structure). Never skipped.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte position of the problem in the file.
        position: u64,
        /// What is wrong.
        reason: String,
    },

    /// A read reached stored records that are damaged (a batch failed its
    /// CRC or structure check). The records in `[first_offset,
    /// next_offset)` cannot be read; reading from `next_offset` works. The
    /// offsets are never handed out again.
    #[error(
        "topic {topic:?} partition {partition}: offsets {first_offset}..{next_offset} are damaged ({path} at byte {position}: {reason}); the next readable offset is {next_offset}"
    )]
    Damaged {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
        /// The first damaged offset (where the read stopped).
        first_offset: u64,
        /// The first offset readable after the damage.
        next_offset: u64,
        /// The segment file.
        path: PathBuf,
        /// Byte position of the damage in the file.
        position: u64,
        /// What is wrong.
        reason: String,
    },

    /// Metadata the log needs in order to open (a `topic.json`, the
    /// consumer offsets file) is missing or damaged. The log refused to
    /// open and changed nothing; `recovery` says what the operator can do.
    #[error("{path}: {problem}. Nothing was changed or deleted. To recover: {recovery}")]
    Metadata {
        /// The missing or damaged file.
        path: PathBuf,
        /// What is wrong with it.
        problem: String,
        /// The command or step that recovers from it.
        recovery: String,
    },

    /// An operating-system I/O call failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file or directory concerned.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// An append of a chain ([`crate::AppendChain`]) was refused unwritten:
    /// one before it in the chain failed (or its sender stopped the chain),
    /// and a chain's appends land only as a prefix of their order.
    #[error("topic {topic:?} partition {partition}: not written, an append before it in its chain failed")]
    ChainBroken {
        /// Topic.
        topic: String,
        /// Partition.
        partition: u32,
    },

    /// The log is shutting down (or the partition was deleted).
    #[error("the log is closed")]
    Closed,
}

impl LogError {
    /// Wraps an `io::Error` with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LogError::Io {
            path: path.into(),
            source,
        }
    }

    /// Names the topic and partition of a [`LogError::Damaged`] raised below
    /// the partition (other errors pass through).
    pub fn in_partition(self, topic: &str, partition: u32) -> Self {
        match self {
            LogError::Damaged {
                first_offset,
                next_offset,
                path,
                position,
                reason,
                ..
            } => LogError::Damaged {
                topic: topic.to_string(),
                partition,
                first_offset,
                next_offset,
                path,
                position,
                reason,
            },
            other => other,
        }
    }

    /// Builds a `Corrupt` error.
    pub fn corrupt(path: impl Into<PathBuf>, position: u64, reason: impl Into<String>) -> Self {
        LogError::Corrupt {
            path: path.into(),
            position,
            reason: reason.into(),
        }
    }
}
