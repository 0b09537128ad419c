//! Limits answered as what they are (issue 11, item 11, server part): the
//! partition budget is `409 limit_exceeded` naming the limit (not `413`, it
//! is no body size problem); auto-creation on produce stops at its own
//! budget (`auto_create_max_partitions`) so made-up topic names cannot use
//! up the log's; a replay from offsets beyond a partition's end is refused
//! at request time naming the partition, the offset and the end.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{assert_error, json, Server};

#[test]
fn the_partition_budget_is_a_conflict_naming_max_partitions() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "big", "partitions": 1000}));
    let (status, body) = server.post_json("/v1/topics", &json!({"name": "more", "partitions": 25}));
    assert_error("over max_partitions", status, &body, 409, "limit_exceeded");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("max_partitions"), "{message}");
    assert_eq!(server.get("/v1/topics/more").0, 404);
    // What still fits is created.
    server.create_topic(&json!({"name": "fits", "partitions": 24}));
}

#[test]
fn auto_creation_stops_at_its_own_budget_and_explicit_creates_go_on() {
    let server = Server::start(&[
        "--auto-create-topics",
        "true",
        "--default-partitions",
        "2",
        "--auto-create-max-partitions",
        "3",
    ]);
    server.produce("a", &json!([{"value": 1}]));
    let (status, body) =
        server.post_json("/v1/topics/b/records", &json!({"records": [{"value": 1}]}));
    assert_error(
        "auto-create over budget",
        status,
        &body,
        409,
        "limit_exceeded",
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("auto_create_max_partitions"), "{message}");
    assert_eq!(server.get("/v1/topics/b").0, 404, "not created");
    // An operator can still create it, and then produce works.
    server.create_topic(&json!({"name": "b", "partitions": 4}));
    server.produce("b", &json!([{"value": 1}]));
}

#[test]
fn a_replay_beyond_the_end_is_refused_at_request_time() {
    let server = Server::start(&[]);
    server.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    server.produce(
        "user_events",
        &json!([{"key": "u1", "value": {"user_id": "u1", "event_type": "purchase", "amount": 5, "event_time": 1767225600000i64}}]),
    );
    let partitions = server.end_offsets("user_events").len();
    let mut beyond = vec![0u64; partitions];
    beyond[0] = 999;
    let (status, body) = server.post_json(
        "/v1/views/purchase_stats/replay",
        &json!({"from": {"offsets": beyond}}),
    );
    assert_error(
        "replay beyond the end",
        status,
        &body,
        400,
        "offset_out_of_range",
    );
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("partition 0") && message.contains("999") && message.contains("(1)"),
        "{message}"
    );
    let too_many = vec![0u64; partitions + 1];
    let (status, body) = server.post_json(
        "/v1/views/purchase_stats/replay",
        &json!({"from": {"offsets": too_many}}),
    );
    assert_error(
        "more offsets than partitions",
        status,
        &body,
        400,
        "offset_out_of_range",
    );
    // No build was started; a replay at the end is fine.
    let (_, view) = server.get("/v1/views/purchase_stats");
    assert!(view["building_version"].is_null(), "{view}");
    let end = server.end_offsets("user_events");
    let (status, body) = server.post_json(
        "/v1/views/purchase_stats/replay",
        &json!({"from": {"offsets": end}}),
    );
    assert_eq!(status, 202, "{body}");
}
