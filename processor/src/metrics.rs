//! Metric names of the processor (recorded through the `metrics` facade).

use std::time::Duration;

use metrics::histogram;

use crate::state::store::Scope;

/// Input records processed.
pub const RECORDS_IN: &str = "kappa_processor_records_in_total";
/// Rows or records emitted.
pub const RECORDS_OUT: &str = "kappa_processor_records_out_total";
/// Late records dropped.
pub const LATE_DROPPED: &str = "kappa_processor_late_dropped_total";
/// Late records sent to the side output.
pub const LATE_SIDE_OUTPUT: &str = "kappa_processor_late_side_output_total";
/// Records dropped as duplicates.
pub const DUPLICATES: &str = "kappa_processor_duplicates_total";
/// Records skipped as undecodable or without event time.
pub const INVALID: &str = "kappa_processor_invalid_records_total";
/// Records (source workers) or events (key-shard workers) handled per
/// worker of a version running in parallel; label `worker`.
pub const WORKER_EVENTS: &str = "kappa_processor_worker_events_total";
/// Committed watermark (ms since the epoch).
pub const WATERMARK: &str = "kappa_processor_watermark_ms";
/// Wall clock minus the committed watermark, seconds.
pub const WATERMARK_LAG: &str = "kappa_processor_watermark_lag_seconds";
/// Approximate bytes of a version's state and view rows in RocksDB.
pub const STATE_BYTES: &str = "kappa_processor_state_bytes";
/// Commit duration, seconds, per processor version.
pub const COMMIT_SECONDS: &str = "kappa_processor_commit_seconds";
/// Bytes written per commit.
pub const COMMIT_BYTES: &str = "kappa_processor_commit_bytes";
/// End-to-end latency: newest input's append time to its commit, seconds.
pub const END_TO_END_SECONDS: &str = "kappa_processor_end_to_end_latency_seconds";

/// Records one commit.
pub fn record_commit(
    scope: &Scope,
    took: Duration,
    bytes: usize,
    latency_ms: Option<i64>,
    state_bytes: u64,
) {
    let labels = [
        ("processor", scope.name.clone()),
        ("version", scope.version.to_string()),
    ];
    metrics::gauge!(STATE_BYTES, &labels).set(state_bytes as f64);
    histogram!(COMMIT_SECONDS, &labels).record(took.as_secs_f64());
    histogram!(COMMIT_BYTES, &labels).record(bytes as f64);
    if let Some(ms) = latency_ms {
        histogram!(END_TO_END_SECONDS, &labels).record(ms.max(0) as f64 / 1000.0);
    }
}
