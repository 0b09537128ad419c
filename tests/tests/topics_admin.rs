//! Topic administration and the service endpoints: a created topic gets
//! the documented defaults; `GET /v1/topics` lists topics sorted by name;
//! DELETE answers 204, removes the data and every group's offsets for the
//! topic (a re-created topic starts empty at offset 0); Content-Type
//! parameters are accepted; /health, /ready, /metrics and
//! /v1/openapi.json answer.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{assert_error, json, Server, Value};

#[test]
fn topics_are_created_with_defaults_listed_sorted_and_deleted_with_their_offsets() {
    let server = Server::start(&[]);
    let created = server.create_topic(&json!({"name": "orders"}));
    assert_eq!(
        created,
        json!({"name": "orders",
               "config": {"partitions": 1, "segment_bytes": 134_217_728, "segment_ms": 604_800_000_u64,
                          "retention_ms": null, "retention_bytes": null, "fsync": "always",
                          "fsync_interval_ms": 100, "compression_type": "none",
                          "cleanup_policy": "delete", "delete_retention_ms": 86_400_000,
                          "min_compaction_lag_ms": 0, "local_retention_ms": null,
                          "local_retention_bytes": null, "cached_tail_bytes": null},
               "partitions": [{"partition": 0, "start_offset": 0, "end_offset": 0, "bytes": 0, "segment_count": 1}]})
    );
    let custom = server.create_topic(&json!({"name": "b.custom_1-x", "partitions": 3, "segment_bytes": 1_048_576,
                                             "retention_ms": null, "retention_bytes": 10_000_000, "fsync": "interval",
                                             "fsync_interval_ms": 50}));
    assert_eq!(
        custom["config"],
        json!({"partitions": 3, "segment_bytes": 1_048_576, "segment_ms": 604_800_000_u64, "retention_ms": null,
               "retention_bytes": 10_000_000, "fsync": "interval", "fsync_interval_ms": 50,
               "compression_type": "none", "cleanup_policy": "delete",
               "delete_retention_ms": 86_400_000, "min_compaction_lag_ms": 0,
               "local_retention_ms": null, "local_retention_bytes": null, "cached_tail_bytes": null})
    );
    server.create_topic(&json!({"name": "A-upper"}));
    let (status, list) = server.get("/v1/topics");
    assert_eq!(status, 200);
    let names: Vec<&str> = list["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted, "sorted by name");
    assert_eq!(names.len(), 3);

    // Data and offsets, then DELETE.
    server.produce("orders", &json!([{"value": 1}, {"value": 2}]));
    let described = server.describe("orders");
    assert_eq!(described["partitions"][0]["end_offset"], 2);
    assert!(
        described["partitions"][0]["bytes"].as_u64().unwrap() > 0,
        "{described}"
    );
    let (status, body) = server.post_json(
        "/v1/groups/reader/offsets",
        &json!({"topic": "orders", "offsets": [{"partition": 0, "offset": 2}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.delete("/v1/topics/orders"), (204, Value::Null));
    assert_eq!(server.get("/v1/topics/orders").0, 404);
    assert_eq!(server.delete("/v1/topics/orders").0, 404);
    let (_, offsets) = server.get("/v1/groups/reader/offsets");
    assert_eq!(
        offsets["topics"],
        json!([]),
        "the group's offsets went with the topic"
    );

    // Re-created: empty, from 0, no committed offset.
    server.create_topic(&json!({"name": "orders"}));
    assert_eq!(server.end_offsets("orders"), vec![0]);
    let (status, offsets) = server.get("/v1/groups/reader/offsets?topic=orders");
    assert_eq!(status, 200);
    assert_eq!(
        offsets["topics"][0]["partitions"][0]["committed"],
        Value::Null,
        "{offsets}"
    );
    let produced = server.produce("orders", &json!([{"value": "new"}]));
    assert_eq!(produced[0].offset, 0);
}

#[test]
fn content_type_parameters_are_accepted() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "ct"}));
    for (content_type, body) in [
        (
            "application/json; charset=utf-8",
            r#"{"records":[{"value":1}]}"#,
        ),
        ("Application/JSON", r#"{"records":[{"value":2}]}"#),
        ("application/x-ndjson; charset=utf-8", "{\"value\":3}\n"),
    ] {
        let reply = server.send(
            "POST",
            "/v1/topics/ct/records",
            Some(content_type),
            &[],
            Some(body.as_bytes()),
        );
        assert_eq!(reply.status, 200, "{content_type}: {}", reply.text);
    }
    let values: Vec<Value> = server
        .read_all("ct", 0)
        .iter()
        .map(|r| r["value"].clone())
        .collect();
    assert_eq!(values, vec![json!(1), json!(2), json!(3)]);
}

#[test]
fn service_endpoints_answer() {
    let server = Server::start(&[]);
    assert_eq!(server.get("/health"), (200, json!({"status": "ok"})));
    assert_eq!(server.get("/ready"), (200, json!({"status": "ready"})));
    server.create_topic(&json!({"name": "m"}));
    server.produce("m", &json!([{"value": 1}]));
    let metrics = server.send("GET", "/metrics", None, &[], None);
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.content_type.starts_with("text/plain"),
        "{}",
        metrics.content_type
    );
    assert!(
        metrics.text.contains("kappa_partition_end_offset"),
        "{}",
        metrics.text
    );
    let openapi = server.send("GET", "/v1/openapi.json", None, &[], None);
    assert_eq!(openapi.status, 200);
    assert!(openapi.content_type.starts_with("application/json"));
    assert!(
        openapi.body["openapi"]
            .as_str()
            .unwrap_or("")
            .starts_with("3."),
        "{}",
        openapi.text
    );
    assert!(openapi.body["paths"]["/v1/topics/{topic}/records"].is_object());
}

#[test]
fn retention_changes_with_patch_and_nothing_else_does() {
    let mut server = Server::start(&[]);
    server.create_topic(&json!({"name": "orders", "partitions": 2}));
    let client = server.client();
    let patch = |body: &Value| {
        let bytes = serde_json::to_vec(body).unwrap();
        let r = client.send(
            "PATCH",
            "/v1/topics/orders",
            Some("application/json"),
            &[],
            Some(&bytes),
        );
        (r.status, r.body)
    };
    let (status, body) = patch(&json!({"retention_ms": 86_400_000, "retention_bytes": 1_000_000}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["config"]["retention_ms"], 86_400_000);
    assert_eq!(body["config"]["retention_bytes"], 1_000_000);
    assert_eq!(body["config"]["partitions"], 2);
    // null removes a limit; an absent field is left alone.
    let (status, body) = patch(&json!({"retention_bytes": null}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["config"]["retention_ms"], 86_400_000);
    assert_eq!(body["config"]["retention_bytes"], Value::Null);

    // What cannot change, nothing to change, bad values, unknown topics.
    let (status, body) = patch(&json!({"partitions": 4}));
    assert_error("partitions", status, &body, 400, "bad_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("partitions"),
        "{body}"
    );
    let (status, body) = patch(&json!({}));
    assert_error("empty", status, &body, 400, "bad_request");
    let (status, body) = patch(&json!({"retention_ms": 0}));
    assert_error("zero", status, &body, 400, "invalid_config");
    let r = client.send(
        "PATCH",
        "/v1/topics/nope",
        Some("application/json"),
        &[],
        Some(b"{\"retention_ms\": 5}"),
    );
    assert_eq!(r.status, 404, "{}", r.text);

    // The setting is in topic.json: a restart keeps it.
    server.terminate_ok();
    let server = server.restart();
    assert_eq!(
        server.describe("orders")["config"]["retention_ms"],
        86_400_000
    );
}
