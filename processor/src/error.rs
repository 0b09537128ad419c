//! The one error type of the processor crate.

/// How a [`ProcessorError::WaitingForSource`] message starts, so a status
/// can tell a version waiting for its source from a broken one.
pub const WAITING_FOR_SOURCE: &str = "waiting for the source";

/// Result alias of the crate.
pub type Result<T, E = ProcessorError> = std::result::Result<T, E>;

/// What can go wrong while defining, running or reading a processor.
#[derive(Debug, thiserror::Error)]
pub enum ProcessorError {
    /// The plan cannot run as written.
    #[error("invalid plan: {0}")]
    InvalidPlan(String),
    /// The state store failed.
    #[error("state store: {0}")]
    Store(#[from] rocksdb::Error),
    /// Stored state could not be decoded.
    #[error("corrupt state in {cf}: {reason}")]
    CorruptState {
        /// Column family.
        cf: String,
        /// What was wrong.
        reason: String,
    },
    /// The log failed.
    #[error(transparent)]
    Log(#[from] kappa_log::LogError),
    /// No such processor version or view.
    #[error("{0} does not exist")]
    NotFound(String),
    /// A write to the state store failed (its reason, e.g. a full disk).
    #[error("state store write failed: {0}")]
    WriteFailed(String),
    /// The version's state outgrew its memory limit: it stops (failed)
    /// instead of exhausting the process.
    #[error("state limit: {0}")]
    StateLimit(String),
    /// An input's source cannot be reached now (a Kafka cluster down or
    /// unreachable): the version waits for it and retries, it is not
    /// broken.
    #[error("waiting for the source: {0}")]
    WaitingForSource(String),
    /// The processor stopped.
    #[error("processor stopped: {0}")]
    Stopped(String),
    /// A version's state store is damaged or missing (moved aside, never
    /// deleted); the version fails until it is rebuilt from the log.
    #[error("{0}")]
    StateDamaged(String),
}

impl ProcessorError {
    /// True if stored state failed RocksDB's or Kappa's own checks (damaged
    /// files), as opposed to an operating problem (a lock held by another
    /// process, permissions, a full disk) that moving the state aside would
    /// not cure.
    pub fn is_corruption(&self) -> bool {
        match self {
            ProcessorError::Store(e) => e.kind() == rocksdb::ErrorKind::Corruption,
            ProcessorError::CorruptState { .. } | ProcessorError::StateDamaged(_) => true,
            _ => false,
        }
    }
}
