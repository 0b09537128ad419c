//! History is kept, and a replay over history that is gone is a decision
//! (issue 12): topics keep every record unless told otherwise; retention
//! can be set later with `PATCH`; a view reports its replay horizon (the
//! earliest input still in the log against what its served version saw),
//! and a replay from earliest after retention deleted some of that input
//! is refused with `409 history_truncated` unless `allow_truncated` says to
//! go ahead.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{assert_error, eventually, json, temp_file, Server, Value};
use std::time::Duration;

#[test]
fn a_replay_over_truncated_history_is_refused_unless_allowed() {
    // Retention passes every 20 ms, so the test waits for one by polling
    // the partition's start offset.
    let (_conf_dir, conf) = temp_file("kappa.toml", "retention_check_interval_ms = 20\n");
    let server = Server::start(&["--config", conf.to_str().unwrap()]);
    let created = server.create_topic(&json!({"name": "clicks", "segment_bytes": 1024}));
    assert_eq!(
        created["config"]["retention_ms"],
        Value::Null,
        "kept forever"
    );
    // Twenty requests of ten records: a batch never spans segments, so
    // this makes about twenty 1 KiB segments.
    for round in 0..20 {
        let records: Vec<Value> = (0..10)
            .map(|i| {
                let page = format!("p{}", (round * 10 + i) % 5);
                json!({"key": page, "value": {"page": page, "pad": "x".repeat(40)}})
            })
            .collect();
        server.produce("clicks", &Value::Array(records));
    }
    server.sql_ok(
        "CREATE STREAM clicks (page VARCHAR) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON');
         CREATE TABLE page_counts AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;",
    );
    let horizon = server.describe_view("page_counts")["replay_horizon"].clone();
    assert_eq!(horizon["complete"], true, "{horizon}");
    assert_eq!(horizon["topics"][0]["topic"], "clicks");
    assert_eq!(horizon["topics"][0]["partitions"][0]["missing"], 0);
    assert!(horizon["topics"][0]["partitions"][0]["earliest_append_ms"].is_i64());

    // Retention by size, set after the fact, deletes the oldest segments.
    let client = server.client();
    let r = client.send(
        "PATCH",
        "/v1/topics/clicks",
        Some("application/json"),
        &[],
        Some(br#"{"retention_bytes": 2048}"#),
    );
    assert_eq!(r.status, 200, "{}", r.text);
    let start = eventually("a retention pass", Duration::from_secs(30), || {
        let start = server.describe("clicks")["partitions"][0]["start_offset"]
            .as_u64()
            .unwrap();
        (start > 0).then_some(start)
    });

    let view = server.describe_view("page_counts");
    let horizon = &view["replay_horizon"];
    assert_eq!(horizon["complete"], false, "{horizon}");
    let partition = &horizon["topics"][0]["partitions"][0];
    assert_eq!(partition["first_seen"], 0);
    assert!(partition["earliest_offset"].as_u64().unwrap() >= start);
    assert_eq!(partition["missing"], partition["earliest_offset"]);

    let (status, body) =
        server.post_json("/v1/views/page_counts/replay", &json!({"from": "earliest"}));
    assert_error("truncated replay", status, &body, 409, "history_truncated");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("clicks/0") && message.contains("allow_truncated"),
        "{message}"
    );
    // Offsets below what the log holds are refused the same way.
    let (status, body) = server.post_json(
        "/v1/views/page_counts/replay",
        &json!({"from": {"offsets": [0]}}),
    );
    assert_error(
        "offsets below the start",
        status,
        &body,
        409,
        "history_truncated",
    );
    // Nothing was started.
    assert!(server.describe_view("page_counts")["building_version"].is_null());

    // Knowingly: the replay goes ahead.
    let (status, body) = server.post_json(
        "/v1/views/page_counts/replay",
        &json!({"from": "earliest", "allow_truncated": true}),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["building_version"], 2);
}
