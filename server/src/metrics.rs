//! Prometheus metrics: every metric name the server exports lives here.
//!
//! Counters and histograms are recorded where things happen (through the
//! `metrics` facade); per-partition gauges (offsets, sizes, lag) and the
//! log's counters are read from the log at scrape time, so they are never
//! stale and cost nothing between scrapes.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kappa_log::Log;
use metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Produce requests, by topic.
pub const PRODUCE_REQUESTS: &str = "kappa_produce_requests_total";
/// Records produced, by topic.
pub const PRODUCE_RECORDS: &str = "kappa_produce_records_total";
/// Bytes of produced request bodies, by topic.
pub const PRODUCE_BYTES: &str = "kappa_produce_bytes_total";
/// Produce latency from request start to answer, seconds.
pub const PRODUCE_LATENCY: &str = "kappa_produce_latency_seconds";
/// Records read by consumers, by topic.
pub const READ_RECORDS: &str = "kappa_read_records_total";
/// Error answers, by status and code.
pub const ERRORS: &str = "kappa_http_errors_total";
/// Requests shed with 503 because an append queue was full.
pub const SHED: &str = "kappa_shed_requests_total";
/// End offset per partition.
pub const END_OFFSET: &str = "kappa_partition_end_offset";
/// Start offset per partition.
pub const START_OFFSET: &str = "kappa_partition_start_offset";
/// Bytes on disk per partition.
pub const PARTITION_BYTES: &str = "kappa_partition_bytes";
/// Segments per partition.
pub const SEGMENTS: &str = "kappa_partition_segments";
/// Consumer group lag per group, topic and partition.
pub const GROUP_LAG: &str = "kappa_group_lag";
/// fdatasync calls on segment data.
pub const FSYNCS: &str = "kappa_log_fsyncs_total";
/// Corruptions detected.
pub const CORRUPTIONS: &str = "kappa_log_corruptions_detected_total";
/// Torn tails truncated by recovery.
pub const TORN_TAILS: &str = "kappa_log_torn_tails_truncated_total";
/// Partitions stopped after an I/O failure.
pub const FAILED_PARTITIONS: &str = "kappa_log_partitions_failed_total";
/// Segments deleted by retention.
pub const SEGMENTS_DELETED: &str = "kappa_log_segments_deleted_total";
/// Views swapped to a new version, by view.
pub const VIEW_SWAPS: &str = "kappa_view_swaps_total";
/// Processor versions that ended with an error, by view.
pub const VIEW_FAILURES: &str = "kappa_view_failures_total";
/// Records a running build processed since it started, by view.
pub const VIEW_BUILD_DONE: &str = "kappa_view_build_done_records";
/// Records a running build has to process in all, by view.
pub const VIEW_BUILD_TOTAL: &str = "kappa_view_build_total_records";

/// Connections closed before their first request, by reason
/// (`per_ip_newcomer_limit`, `connection_limit`, `first_request_timeout`).
pub const CONNECTIONS_CLOSED: &str = "kappa_http_connections_closed_total";

/// Counts a connection closed before its first request.
pub fn count_connection_closed(reason: &'static str) {
    counter!(CONNECTIONS_CLOSED, "reason" => reason).increment(1);
}

/// Requests refused by authentication or authorization, by reason
/// (`missing_token`, `not_bearer`, `invalid_token`, `forbidden`, and
/// `revoked`: a long-poll answered 401 or a change feed ended because its
/// token was revoked while it ran).
pub const AUTH_DENIED: &str = "kappa_auth_denied_total";
/// Admin actions (requests and SQL statements that need `admin`), by action.
pub const ADMIN_ACTIONS: &str = "kappa_admin_actions_total";

/// Counts a request refused with 401 or 403.
pub fn count_auth_denied(reason: &'static str) {
    counter!(AUTH_DENIED, "reason" => reason).increment(1);
}

/// Counts an admin action (`action`: method and route template, or a SQL
/// statement kind — a bounded set).
pub fn count_admin_action(action: &str) {
    counter!(ADMIN_ACTIONS, "action" => action.to_string()).increment(1);
}

/// Kafka-protocol requests served, by API (`Produce`, `Fetch`, ...).
pub const KAFKA_REQUESTS: &str = "kappa_kafka_requests_total";
/// Kafka-protocol connections open now.
pub const KAFKA_CONNECTIONS: &str = "kappa_kafka_connections";
/// Kafka connections the server closed, by reason (`request_size`,
/// `body_timeout`, `unsupported`, `malformed`, `unauthenticated`,
/// `login_failed`, `revoked`, `connection_limit`, `encode`).
pub const KAFKA_CLOSED: &str = "kappa_kafka_connections_closed_total";
/// Group rebalances started, by group (the classic protocol coordinator).
pub const KAFKA_REBALANCES: &str = "kappa_kafka_group_rebalances_total";

/// Time a Kafka produce request was held by its token's rate limit
/// (`produce_records_per_second`), seconds; only requests that waited.
pub const KAFKA_PRODUCE_THROTTLE: &str = "kappa_kafka_produce_throttle_seconds";

/// Records how long a Kafka produce request waited for its rate limit.
pub fn record_kafka_produce_throttle(waited: Duration) {
    histogram!(KAFKA_PRODUCE_THROTTLE).record(waited.as_secs_f64());
}

/// Counts a Kafka request of `api` (a bounded set of names).
pub fn count_kafka_request(api: String) {
    counter!(KAFKA_REQUESTS, "api" => api).increment(1);
}

/// Counts a Kafka connection the server closed.
pub fn count_kafka_closed(reason: &'static str) {
    counter!(KAFKA_CLOSED, "reason" => reason).increment(1);
}

/// Moves the open Kafka connections gauge by `delta`.
pub fn kafka_connections(delta: f64) {
    gauge!(KAFKA_CONNECTIONS).increment(delta);
}

/// PostgreSQL-protocol connections open now.
pub const PG_CONNECTIONS: &str = "kappa_pg_connections";
/// PostgreSQL-protocol connections refused, by reason (`connection_limit`).
pub const PG_REFUSED: &str = "kappa_pg_connections_refused_total";
/// PostgreSQL statements answered, by outcome (`ok`, `error`, `cancelled`).
pub const PG_STATEMENTS: &str = "kappa_pg_statements_total";
/// PostgreSQL statements whose work runs now (a cancelled one counts until
/// its thread has stopped it).
pub const PG_STATEMENTS_RUNNING: &str = "kappa_pg_statements_running";

/// Moves the open PostgreSQL connections gauge by `delta`.
pub fn pg_connections(delta: f64) {
    gauge!(PG_CONNECTIONS).increment(delta);
}

/// Counts a PostgreSQL connection refused for `reason`.
pub fn count_pg_refused(reason: &'static str) {
    counter!(PG_REFUSED, "reason" => reason).increment(1);
}

/// Counts a PostgreSQL statement answered with `outcome`.
pub fn count_pg_statement(outcome: &'static str) {
    counter!(PG_STATEMENTS, "outcome" => outcome).increment(1);
}

/// Counts a PostgreSQL statement's work as running until the returned
/// guard is dropped.
pub fn pg_statement_running() -> RunningPgStatement {
    gauge!(PG_STATEMENTS_RUNNING).increment(1.0);
    RunningPgStatement(())
}

/// A PostgreSQL statement's work, counted while it lives (see
/// [`pg_statement_running`]).
#[derive(Debug)]
pub struct RunningPgStatement(());

impl Drop for RunningPgStatement {
    fn drop(&mut self) {
        gauge!(PG_STATEMENTS_RUNNING).decrement(1.0);
    }
}

/// Change-feed streams ended because their client fell behind by more
/// than its buffer (`routes/changes.rs`), by view.
pub const CHANGE_FEED_BEHIND: &str = "kappa_change_feed_clients_behind_total";

/// Counts a change-feed stream of `view` ended because its client fell
/// behind.
pub fn count_change_feed_behind(view: &str) {
    counter!(CHANGE_FEED_BEHIND, "view" => view.to_string()).increment(1);
}

/// Long-polling reads waiting for records right now.
pub const LONG_POLLS_WAITING: &str = "kappa_http_long_polls_waiting";

/// Counts a long-poll as waiting while it lives (see [`long_poll_waiting`]).
#[derive(Debug)]
pub struct WaitingLongPoll(());

/// Marks a long-poll as waiting until the returned guard is dropped (the
/// wait ended, or the request was cancelled).
pub fn long_poll_waiting() -> WaitingLongPoll {
    gauge!(LONG_POLLS_WAITING).increment(1.0);
    WaitingLongPoll(())
}

impl Drop for WaitingLongPoll {
    fn drop(&mut self) {
        gauge!(LONG_POLLS_WAITING).decrement(1.0);
    }
}

/// Installs the process-wide recorder (once) and returns the handle that
/// renders it. Every server in a process (tests start several) gets a
/// handle of the one recorder that is installed, so none serves an empty
/// `/metrics`; their metrics share one registry, as they share the
/// `metrics` facade.
pub fn install() -> PrometheusHandle {
    static HANDLE: std::sync::OnceLock<PrometheusHandle> = std::sync::OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5, 5.0,
            ];
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &buckets)
                .expect("valid buckets");
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if let Err(e) = metrics::set_global_recorder(recorder) {
                // Someone else (an embedding program) installed one: ours
                // would render nothing, and saying so beats a silent page.
                tracing::warn!(error = %e, "another metrics recorder is installed: /metrics will be empty");
            }
            handle
        })
        .clone()
}

/// Records one produce request.
pub fn record_produce(topic: &str, records: usize, body_bytes: usize, elapsed: Duration) {
    let t = topic.to_string();
    counter!(PRODUCE_REQUESTS, "topic" => t.clone()).increment(1);
    counter!(PRODUCE_RECORDS, "topic" => t.clone()).increment(records as u64);
    counter!(PRODUCE_BYTES, "topic" => t.clone()).increment(body_bytes as u64);
    histogram!(PRODUCE_LATENCY, "topic" => t).record(elapsed.as_secs_f64());
}

/// Records records handed to a consumer.
pub fn record_read(topic: &str, records: usize) {
    counter!(READ_RECORDS, "topic" => topic.to_string()).increment(records as u64);
}

/// Counts an error answer.
pub fn count_error(status: u16, code: &'static str) {
    counter!(ERRORS, "status" => status.to_string(), "code" => code).increment(1);
    if code == "overloaded" {
        counter!(SHED).increment(1);
    }
}

/// Counts a swap of `view` to a new version.
pub fn count_view_swap(view: &str) {
    counter!(VIEW_SWAPS, "view" => view.to_string()).increment(1);
}

/// Counts a processor version of `view` that ended with an error.
pub fn count_view_failure(view: &str) {
    counter!(VIEW_FAILURES, "view" => view.to_string()).increment(1);
}

/// Input records a view version has yet to process.
pub const VIEW_LAG: &str = "kappa_view_lag_records";
/// The same, per input partition (of the built-in log or a cluster).
pub const VIEW_PARTITION_LAG: &str = "kappa_view_partition_lag_records";

/// Sets the lag gauges of every running view version (served or
/// building): its total and each input partition's (the partitions'
/// lags, in partition order).
pub fn set_view_lags(lags: &[(String, u64, &'static str, Vec<u64>)]) {
    for (view, version, role, partitions) in lags {
        let labels = [
            ("view", view.clone()),
            ("version", version.to_string()),
            ("role", role.to_string()),
        ];
        gauge!(VIEW_LAG, &labels).set(partitions.iter().sum::<u64>() as f64);
        for (partition, lag) in partitions.iter().enumerate() {
            let labels = [
                ("view", view.clone()),
                ("version", version.to_string()),
                ("role", role.to_string()),
                ("partition", partition.to_string()),
            ];
            gauge!(VIEW_PARTITION_LAG, &labels).set(*lag as f64);
        }
    }
}

/// Whether each configured Kafka cluster answered its last metadata
/// request (1) or not (0), by cluster.
pub const CLUSTER_REACHABLE: &str = "kappa_cluster_reachable";
/// Brokers each cluster's last metadata named (0 when unreachable), by
/// cluster.
pub const CLUSTER_BROKERS: &str = "kappa_cluster_brokers";

/// Sets the gauges of `cluster` after a probe.
pub fn set_cluster(cluster: &str, reachable: bool, brokers: usize) {
    gauge!(CLUSTER_REACHABLE, "cluster" => cluster.to_string()).set(if reachable {
        1.0
    } else {
        0.0
    });
    gauge!(CLUSTER_BROKERS, "cluster" => cluster.to_string()).set(brokers as f64);
}

/// Views whose processing falls behind their input (1) or not (0).
pub const VIEW_NOT_KEEPING_UP: &str = "kappa_view_not_keeping_up";

/// Sets whether `view` keeps up (see `views::catch_up`).
pub fn set_view_not_keeping_up(view: &str, behind: bool) {
    gauge!(VIEW_NOT_KEEPING_UP, "view" => view.to_string()).set(if behind { 1.0 } else { 0.0 });
}

/// Sets the build progress gauges of `view`.
pub fn set_view_build(view: &str, done: u64, total: u64) {
    gauge!(VIEW_BUILD_DONE, "view" => view.to_string()).set(done as f64);
    gauge!(VIEW_BUILD_TOTAL, "view" => view.to_string()).set(total as f64);
}

/// Sets the gauges read from the log, then renders everything.
pub fn render(handle: &PrometheusHandle, log: &Log) -> String {
    for topic in log.topics() {
        for p in topic.partitions() {
            let d = p.describe();
            let labels = [
                ("topic", topic.name().to_string()),
                ("partition", d.partition.to_string()),
            ];
            gauge!(END_OFFSET, &labels).set(d.end_offset as f64);
            gauge!(START_OFFSET, &labels).set(d.start_offset as f64);
            gauge!(PARTITION_BYTES, &labels).set(d.bytes as f64);
            gauge!(SEGMENTS, &labels).set(d.segment_count as f64);
        }
    }
    for group in log.groups() {
        let mut topics: Vec<String> = log.committed(&group).into_iter().map(|c| c.topic).collect();
        topics.dedup();
        for topic in topics {
            for o in log.group_offsets(&group, &topic).unwrap_or_default() {
                let labels = [
                    ("group", group.clone()),
                    ("topic", topic.clone()),
                    ("partition", o.partition.to_string()),
                ];
                gauge!(GROUP_LAG, &labels).set(o.lag as f64);
            }
        }
    }
    let s = kappa_log::stats::global();
    let log_counters = [
        (FSYNCS, s.fsyncs.load(Ordering::Relaxed)),
        (CORRUPTIONS, s.corruptions_detected.load(Ordering::Relaxed)),
        (TORN_TAILS, s.torn_tails_truncated.load(Ordering::Relaxed)),
        (
            FAILED_PARTITIONS,
            s.partitions_failed.load(Ordering::Relaxed),
        ),
        (SEGMENTS_DELETED, s.segments_deleted.load(Ordering::Relaxed)),
    ];
    for (name, value) in log_counters {
        counter!(name).absolute(value);
    }
    handle.render()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_install_renders_what_the_process_records() {
        let (first, second) = (super::install(), super::install());
        super::count_error(418, "install_test");
        for handle in [first, second] {
            let text = handle.render();
            assert!(text.contains("install_test"), "{text}");
        }
    }
}
