//! Process-wide counters of the log that operators alert on. The server
//! exports them as Prometheus metrics; the log itself only counts.

use std::sync::atomic::AtomicU64;
use std::sync::OnceLock;

/// Counters, all monotonic.
#[derive(Debug, Default)]
pub struct LogStats {
    /// Corrupt batches found in sealed segments or mid-segment.
    pub corruptions_detected: AtomicU64,
    /// Torn or corrupt tails truncated by recovery.
    pub torn_tails_truncated: AtomicU64,
    /// Bytes dropped by those truncations.
    pub truncated_bytes: AtomicU64,
    /// fdatasync calls on segment data.
    pub fsyncs: AtomicU64,
    /// Partitions that stopped accepting writes after an I/O failure.
    pub partitions_failed: AtomicU64,
    /// Segments deleted by retention.
    pub segments_deleted: AtomicU64,
    /// Sealed segments the cleaner rewrote (compaction).
    pub segments_compacted: AtomicU64,
    /// Records compaction removed (older values of a key, expired
    /// tombstones).
    pub records_compacted: AtomicU64,
    /// Segments moved to tiered storage.
    pub segments_tiered: AtomicU64,
}

/// The process-wide counters.
pub fn global() -> &'static LogStats {
    static STATS: OnceLock<LogStats> = OnceLock::new();
    STATS.get_or_init(LogStats::default)
}
