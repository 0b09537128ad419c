//! Metric names of the processor (recorded through the `metrics` facade).

use std::time::Duration;

use metrics::histogram;

use crate::state::store::Scope;

/// Commit duration, seconds, per processor version.
pub const COMMIT_SECONDS: &str = "kappa_processor_commit_seconds";
/// Bytes written per commit.
pub const COMMIT_BYTES: &str = "kappa_processor_commit_bytes";
/// End-to-end latency: newest input's append time to its commit, seconds.
pub const END_TO_END_SECONDS: &str = "kappa_processor_end_to_end_latency_seconds";

/// Records one commit.
pub fn record_commit(scope: &Scope, took: Duration, bytes: usize, latency_ms: Option<i64>) {
    let labels = [
        ("processor", scope.name.clone()),
        ("version", scope.version.to_string()),
    ];
    histogram!(COMMIT_SECONDS, &labels).record(took.as_secs_f64());
    histogram!(COMMIT_BYTES, &labels).record(bytes as f64);
    if let Some(ms) = latency_ms {
        histogram!(END_TO_END_SECONDS, &labels).record(ms.max(0) as f64 / 1000.0);
    }
}
