//! Metric names the log records through the `metrics` facade (the server
//! installs the Prometheus recorder; without one, recording is a no-op).

/// Histogram of fdatasync latency on segment data, in seconds.
pub const FSYNC_SECONDS: &str = "kappa_log_fsync_seconds";
/// Histogram of records per group commit.
pub const GROUP_COMMIT_RECORDS: &str = "kappa_log_group_commit_records";
/// Counter of segment bytes the writers asked the operating system to drop
/// from its page cache (`TopicConfig::cached_tail_bytes`).
pub const PAGE_CACHE_DROPPED_BYTES: &str = "kappa_log_page_cache_dropped_bytes_total";
