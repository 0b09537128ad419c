//! Idempotent produce: the same request under the same `Idempotency-Key`
//! appends once and answers the first answer's offsets with
//! `duplicate: true` — also after a graceful restart and after SIGKILL —
//! while end offsets (GET /v1/topics/{t}) do not move, also once the first
//! append sits in a sealed segment; a different request under a used key is
//! `409 idempotency_key_reused`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;

use kappa_tests::{assert_error, json, produced_of, Client, Produced, Server, Value};

const TOPIC: &str = "idem";

fn produce_with_key(client: &Client, key: &str, records: &Value) -> (u16, Value) {
    client.post_json_with(
        &format!("/v1/topics/{TOPIC}/records"),
        &json!({ "records": records }),
        &[("Idempotency-Key", key)],
    )
}

fn ndjson_of(records: &Value) -> String {
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect()
}

/// Asserts an answer of the request that first used its key.
fn first_answer(status: u16, body: &Value) -> Vec<Produced> {
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["duplicate"], false, "{body}");
    produced_of(body)
}

/// Asserts a retry's answer: the first answer's offsets, `duplicate: true`.
fn assert_duplicate(what: &str, status: u16, body: &Value, first: &[Produced]) {
    assert_eq!(status, 200, "{what}: {body}");
    assert_eq!(body["duplicate"], true, "{what}: {body}");
    assert_eq!(body["topic"], TOPIC, "{what}: {body}");
    assert_eq!(
        produced_of(body),
        first,
        "{what}: the first answer's offsets"
    );
}

/// Every value in the topic, with how often it occurs.
fn value_counts(client: &Client) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for p in 0..3 {
        for r in client.read_all(TOPIC, p) {
            *counts.entry(r["value"].to_string()).or_insert(0) += 1;
        }
    }
    counts
}

#[test]
fn a_retried_request_appends_once_also_across_restarts() {
    let mut server = Server::start(&[]);
    server.create_topic(&json!({"name": TOPIC, "partitions": 3}));
    let client = server.client();

    // Keyed records on several partitions, unkeyed ones, an explicit partition.
    let a = json!([
        {"key": "a", "value": "a-1"}, {"key": "b", "value": "b-1"}, {"key": "c", "value": "c-1"},
        {"key": "d", "value": "d-1", "headers": {"h": "v"}}, {"value": "unkeyed-1"}, {"value": "unkeyed-2"},
        {"key": "e", "value": "explicit-1", "partition": 1}
    ]);
    let (status, body) = produce_with_key(&client, "order-42", &a);
    let first_a = first_answer(status, &body);
    let partitions_a: std::collections::BTreeSet<u32> =
        first_a.iter().map(|p| p.partition).collect();
    assert!(
        partitions_a.len() >= 2,
        "the request spans partitions: {first_a:?}"
    );
    let ends = client.end_offsets(TOPIC);

    let (status, body) = produce_with_key(&client, "order-42", &a);
    assert_duplicate("immediate retry", status, &body, &first_a);
    assert_eq!(client.end_offsets(TOPIC), ends, "a retry appends nothing");

    // NDJSON under another key; its retry, also re-encoded as JSON.
    let b = json!([{"key": "x", "value": {"nd": 1}}, {"value": {"nd": 2}}, {"key": "y", "value": {"nd": 3}}]);
    let (status, body) = client.post_ndjson_with(
        &format!("/v1/topics/{TOPIC}/records"),
        &ndjson_of(&b),
        &[("Idempotency-Key", "nd-7")],
    );
    let first_b = first_answer(status, &body);
    let ends = client.end_offsets(TOPIC);
    let (status, body) = client.post_ndjson_with(
        &format!("/v1/topics/{TOPIC}/records"),
        &ndjson_of(&b),
        &[("Idempotency-Key", "nd-7")],
    );
    assert_duplicate("NDJSON retry", status, &body, &first_b);
    let (status, body) = produce_with_key(&client, "nd-7", &b);
    assert_duplicate("the same records as JSON", status, &body, &first_b);
    assert_eq!(client.end_offsets(TOPIC), ends);

    // The same records without a key, or under a new key, are new appends.
    let (status, body) = produce_with_key(&client, "order-43", &a);
    let first_a2 = first_answer(status, &body);
    assert_ne!(first_a2, first_a);
    let ends = client.end_offsets(TOPIC);

    // Graceful restart.
    server.terminate_ok();
    let mut server = server.restart();
    let client = server.client();
    assert_eq!(client.end_offsets(TOPIC), ends);
    let (status, body) = produce_with_key(&client, "order-42", &a);
    assert_duplicate("retry after SIGTERM + restart", status, &body, &first_a);
    let (status, body) = client.post_ndjson_with(
        &format!("/v1/topics/{TOPIC}/records"),
        &ndjson_of(&b),
        &[("Idempotency-Key", "nd-7")],
    );
    assert_duplicate("NDJSON retry after restart", status, &body, &first_b);
    assert_eq!(client.end_offsets(TOPIC), ends);

    // Crash restart.
    server.kill9();
    let server = server.restart();
    let client = server.client();
    assert_eq!(client.end_offsets(TOPIC), ends);
    for key in ["order-42", "order-43"] {
        let want = if key == "order-42" {
            &first_a
        } else {
            &first_a2
        };
        let (status, body) = produce_with_key(&client, key, &a);
        assert_duplicate(
            &format!("{key} after SIGKILL + restart"),
            status,
            &body,
            want,
        );
    }
    assert_eq!(client.end_offsets(TOPIC), ends);

    // A different record count under a used key is refused, and appends nothing.
    let fewer = json!([{"key": "a", "value": "a-1"}]);
    let (status, body) = produce_with_key(&client, "order-42", &fewer);
    assert_error(
        "fewer records under order-42",
        status,
        &body,
        409,
        "idempotency_key_reused",
    );
    let more = json!([{"key": "x", "value": {"nd": 1}}, {"value": {"nd": 2}}, {"key": "y", "value": {"nd": 3}}, {"value": 4}]);
    let (status, body) = produce_with_key(&client, "nd-7", &more);
    assert_error(
        "more records under nd-7",
        status,
        &body,
        409,
        "idempotency_key_reused",
    );
    assert_eq!(client.end_offsets(TOPIC), ends);

    // Each record is stored as often as it was acknowledged as new, at the
    // offsets of the first answer.
    let counts = value_counts(&client);
    for r in a.as_array().unwrap() {
        assert_eq!(
            counts[&r["value"].to_string()],
            2,
            "order-42 and order-43: {}",
            r["value"]
        );
    }
    for r in b.as_array().unwrap() {
        assert_eq!(counts[&r["value"].to_string()], 1, "nd-7: {}", r["value"]);
    }
    for (record, at) in a.as_array().unwrap().iter().zip(&first_a) {
        let page = client.read(
            TOPIC,
            at.partition,
            &format!("offset={}&max_records=1", at.offset),
        );
        assert_eq!(page["records"][0]["value"], record["value"], "{at:?}");
    }
}

#[test]
fn a_retry_is_recognized_after_segment_rolls_and_a_restart() {
    let mut server = Server::start(&[]);
    // 1 KiB segments: the first append is in a sealed segment by the retry.
    server.create_topic(&json!({"name": TOPIC, "partitions": 1, "segment_bytes": 1024}));
    let client = server.client();
    let request = json!([{"value": "first"}, {"key": "k", "value": "second"}]);
    let (status, body) = produce_with_key(&client, "early", &request);
    let first = first_answer(status, &body);
    for i in 0..50 {
        server.produce(TOPIC, &json!([{"value": {"i": i, "pad": "p".repeat(100)}}]));
    }
    let segments = server.describe(TOPIC)["partitions"][0]["segment_count"]
        .as_u64()
        .unwrap();
    assert!(segments > 3, "{segments} segments");
    let ends = client.end_offsets(TOPIC);
    let (status, body) = produce_with_key(&client, "early", &request);
    assert_duplicate("retry after rolls", status, &body, &first);

    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    let (status, body) = produce_with_key(&client, "early", &request);
    assert_duplicate("retry after rolls and a restart", status, &body, &first);
    assert_eq!(client.end_offsets(TOPIC), ends);
}

#[test]
fn a_different_request_with_the_same_count_under_a_used_key_is_409() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": TOPIC, "partitions": 3}));
    let client = server.client();
    let (status, body) = produce_with_key(&client, "k1", &json!([{"key": "a", "value": 1}]));
    first_answer(status, &body);
    let ends = client.end_offsets(TOPIC);
    let (status, body) = produce_with_key(&client, "k1", &json!([{"key": "a", "value": 2}]));
    assert_error(
        "different value under k1",
        status,
        &body,
        409,
        "idempotency_key_reused",
    );
    assert_eq!(client.end_offsets(TOPIC), ends);
}

#[test]
fn a_different_request_routed_elsewhere_under_a_used_key_is_409() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": TOPIC, "partitions": 3}));
    let client = server.client();
    let (status, body) = produce_with_key(&client, "k2", &json!([{"value": 1, "partition": 0}]));
    first_answer(status, &body);
    let ends = client.end_offsets(TOPIC);
    let (status, body) = produce_with_key(&client, "k2", &json!([{"value": 1, "partition": 2}]));
    assert_error(
        "same key, other partition",
        status,
        &body,
        409,
        "idempotency_key_reused",
    );
    assert_eq!(client.end_offsets(TOPIC), ends);
}
