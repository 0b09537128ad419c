//! The issue-12 idle-partition scenario over HTTP: with a short
//! `IDLE_TIMEOUT`, partition 1 of a stream stays silent for longer than the
//! timeout (in log time) while partition 0 moves event time far ahead;
//! then partition 1 gets an event older than that. The live view drops it
//! as late, and a replay of the unchanged definition — which reads both
//! partitions at full speed — drops it too: idleness is judged on the
//! append times in the log, not on the processing thread's clock.
//!
//! The silence is real time passing between two produce requests (append
//! times come from the server's clock); nothing waits for the server.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::{after_param, eventually, json, Server, Value};

const BASE: i64 = 1_767_225_600_000;

fn click(partition: u32, at: i64) -> Value {
    json!({"partition": partition, "key": "u1", "value": {"user_id": "u1", "ts": BASE + at}})
}

/// (window start, clicks) rows, `query` as for the rows endpoint.
fn rows(server: &Server, query: &str) -> Vec<(i64, i64)> {
    let mut rows = server.view_rows_as("clicks_per_second", query, |r| {
        (
            r["window_start"].as_i64().unwrap(),
            r["row"]["n"].as_i64().unwrap(),
        )
    });
    rows.sort();
    rows
}

#[test]
fn a_replay_drops_the_same_late_event_as_the_live_run_after_an_idle_partition() {
    let server = Server::start(&[]);
    server.sql_ok(
        "CREATE STREAM clicks (user_id VARCHAR, ts BIGINT) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=2, TIMESTAMP='ts', WATERMARK_DELAY='0 SECONDS', IDLE_TIMEOUT='300 MILLISECONDS');
         CREATE TABLE clicks_per_second AS SELECT user_id, COUNT(*) AS n FROM clicks
           WINDOW TUMBLING (SIZE 1 SECOND, GRACE PERIOD 0 SECONDS) GROUP BY user_id;",
    );
    server.produce("clicks", &json!([click(0, 0), click(1, 0)]));
    // Partition 1 falls silent for longer than the idle timeout.
    std::thread::sleep(Duration::from_millis(800));
    server.produce("clicks", &json!([click(0, 10_000)]));
    // An event of second 0 on partition 1: its window closed when
    // partition 1 went idle and partition 0 reached second 10.
    let produced = server.produce("clicks", &json!([click(1, 100)]));
    let live_rows = rows(&server, &format!("after={}", after_param(&produced)));
    assert_eq!(
        live_rows,
        vec![(BASE, 2), (BASE + 10_000, 1)],
        "the late click is not counted live"
    );
    let served = server.describe_view("clicks_per_second")["served_version"].clone();
    assert_eq!(served["late"], 1, "{served}");

    let (status, body) = server.post_json(
        "/v1/views/clicks_per_second/replay",
        &json!({"from": "earliest"}),
    );
    assert_eq!(status, 202, "{body}");
    let replayed = eventually("the replay is served", Duration::from_secs(60), || {
        let view = server.describe_view("clicks_per_second");
        (view["served_version"]["version"] == 2).then_some(view["served_version"].clone())
    });
    assert_eq!(rows(&server, ""), live_rows, "replay = live");
    assert_eq!(replayed["late"], 1, "{replayed}");
}
