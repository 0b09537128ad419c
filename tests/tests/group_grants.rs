//! Consumer-group offsets over HTTP need the topic's read grant as over
//! Kafka (security probe, finding 5): a token with `group:g1` and
//! `read:orders.a` commits, resets and fetches `g1`'s offsets of
//! `orders.a`, and gets `403 forbidden` naming `read` on the topic for
//! `secret` — nothing is committed or reset, and the group's offsets of
//! `secret` are neither shown nor listed.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{assert_error, json, Client, Server, Value};

/// The bootstrap secret of these tests.
const BOOTSTRAP: &str = "bootstrap-secret-for-the-group-grant-tests";

/// The committed offsets of `group` on `topic`, per partition, as the
/// admin sees them.
fn committed(admin: &Client, group: &str, topic: &str) -> Vec<Value> {
    let (status, body) = admin.get(&format!("/v1/groups/{group}/offsets?topic={topic}"));
    assert_eq!(status, 200, "{body}");
    body["topics"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["committed"].clone())
        .collect()
}

/// Asserts a `403 forbidden` whose message names `read` on `topic`.
fn assert_needs_read(what: &str, status: u16, body: &Value, topic: &str) {
    assert_error(what, status, body, 403, "forbidden");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("read on topic {topic:?}")),
        "{what}: the 403 names the missing grant: {message}"
    );
}

#[test]
fn committing_resetting_and_fetching_a_groups_offsets_need_read_on_the_topic() {
    let server = Server::start_env(
        &["--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = server.client().with_token(BOOTSTRAP);
    for topic in ["orders.a", "secret"] {
        admin.create_topic(&json!({"name": topic, "partitions": 1}));
        admin.produce(topic, &json!([{"value": 1}, {"value": 2}, {"value": 3}]));
    }
    // The admin commits g1 on secret, so the group has offsets there.
    let (status, body) = admin.post_json(
        "/v1/groups/g1/offsets",
        &json!({"topic": "secret", "offsets": [{"partition": 0, "offset": 1}]}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "g1-consumer", "grants": ["group:g1", "read:orders.a"]}),
    );
    assert_eq!(status, 201, "{body}");
    let consumer = server.client().with_token(body["token"].as_str().unwrap());

    // Refused on the topic it may not read; nothing changes.
    let (status, body) = consumer.post_json(
        "/v1/groups/g1/offsets",
        &json!({"topic": "secret", "offsets": [{"partition": 0, "offset": 3}]}),
    );
    assert_needs_read("commit on secret", status, &body, "secret");
    let (status, body) = consumer.post_json(
        "/v1/groups/g1/reset",
        &json!({"topic": "secret", "to": "latest"}),
    );
    assert_needs_read("reset on secret", status, &body, "secret");
    assert_eq!(committed(&admin, "g1", "secret"), [json!(1)]);
    let (status, body) = consumer.get("/v1/groups/g1/offsets?topic=secret");
    assert_needs_read("offsets of secret", status, &body, "secret");

    // Allowed on the topic it reads.
    let (status, body) = consumer.post_json(
        "/v1/groups/g1/offsets",
        &json!({"topic": "orders.a", "offsets": [{"partition": 0, "offset": 2}]}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = consumer.get("/v1/groups/g1/offsets?topic=orders.a");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["topics"][0]["partitions"][0]["committed"], 2, "{body}");
    let (status, body) = consumer.post_json(
        "/v1/groups/g1/reset",
        &json!({"topic": "orders.a", "to": "latest"}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(committed(&admin, "g1", "orders.a"), [json!(3)]);

    // Listed without a topic: only the topics it may read.
    let (status, body) = consumer.get("/v1/groups/g1/offsets");
    assert_eq!(status, 200, "{body}");
    let topics: Vec<&str> = body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["topic"].as_str().unwrap())
        .collect();
    assert_eq!(topics, ["orders.a"], "{body}");
    let (_, all) = admin.get("/v1/groups/g1/offsets");
    assert_eq!(all["topics"].as_array().unwrap().len(), 2, "{all}");

    // Without the group's grant, the group's name is what it lacks.
    let (status, body) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "reader", "grants": ["read:*"]}),
    );
    assert_eq!(status, 201, "{body}");
    let reader = server.client().with_token(body["token"].as_str().unwrap());
    let (status, body) = reader.post_json(
        "/v1/groups/g1/offsets",
        &json!({"topic": "orders.a", "offsets": [{"partition": 0, "offset": 1}]}),
    );
    assert_error("commit without group:g1", status, &body, 403, "forbidden");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(r#"group on consumer group "g1""#),
        "{body}"
    );
}
