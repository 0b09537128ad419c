//! Metric names the log records through the `metrics` facade (the server
//! installs the Prometheus recorder; without one, recording is a no-op).

/// Histogram of fdatasync latency on segment data, in seconds.
pub const FSYNC_SECONDS: &str = "kappa_log_fsync_seconds";
/// Histogram of records per group commit.
pub const GROUP_COMMIT_RECORDS: &str = "kappa_log_group_commit_records";
