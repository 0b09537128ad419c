//! Topics are created explicitly by default (issue 16): a produce to an
//! unknown topic answers `404 unknown_topic` saying how to create it, and
//! creates nothing. With `--auto-create-topics true` the produce creates
//! the topic with the server's defaults, and the answer of the produce that
//! created it (only that one) says `"created": true`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{assert_error, json, Server};

#[test]
fn a_produce_to_an_unknown_topic_answers_404_naming_the_fix() {
    let server = Server::start(&[]);
    let json_body = json!({"records": [{"key": "k", "value": 1}]});
    for (how, (status, body)) in [
        (
            "JSON",
            server.post_json("/v1/topics/orders/records", &json_body),
        ),
        (
            "NDJSON",
            server.post_ndjson("/v1/topics/orders/records", "{\"value\": 1}\n"),
        ),
    ] {
        assert_error(how, status, &body, 404, "unknown_topic");
        let message = body["error"]["message"].as_str().unwrap();
        for fix in [
            "topic \"orders\" does not exist",
            "POST /v1/topics",
            "kappa topics create orders",
            "auto_create_topics = true",
        ] {
            assert!(message.contains(fix), "{how}: {fix:?} not in {message:?}");
        }
    }
    let (status, body) = server.get("/v1/topics/orders");
    assert_eq!(status, 404, "a refused produce creates nothing: {body}");

    // Created as the message says, the same produce goes through and does
    // not claim to have created it.
    server.create_topic(&json!({"name": "orders"}));
    let (status, body) = server.post_json("/v1/topics/orders/records", &json_body);
    assert_eq!(status, 200, "{body}");
    assert!(body.get("created").is_none(), "{body}");
}

#[test]
fn auto_creation_says_created_on_the_produce_that_created_the_topic() {
    let server = Server::start(&["--auto-create-topics", "true", "--default-partitions", "2"]);
    let first = json!({"records": [{"key": "k", "value": 1}]});
    let path = "/v1/topics/clicks/records";
    let key = [("Idempotency-Key", "first")];
    let (status, body) = server.post_json_with(path, &first, &key);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["created"], json!(true), "{body}");
    assert_eq!(body["duplicate"], json!(false), "{body}");
    let described = server.describe("clicks");
    assert_eq!(described["config"]["partitions"], 2, "{described}");

    // The retry of that produce is a duplicate and created nothing.
    let (status, body) = server.post_json_with(path, &first, &key);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["duplicate"], json!(true), "{body}");
    assert!(body.get("created").is_none(), "retry: {body}");
    // Later produces find the topic there.
    for (status, body) in [
        server.post_json(path, &json!({"records": [{"value": 2}]})),
        server.post_ndjson(path, "{\"value\": 3}\n"),
    ] {
        assert_eq!(status, 200, "{body}");
        assert!(body.get("created").is_none(), "later produce: {body}");
    }
    // A topic created explicitly is not "created" by its first produce.
    server.create_topic(&json!({"name": "views"}));
    let (status, body) = server.post_json(
        "/v1/topics/views/records",
        &json!({"records": [{"value": 1}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.get("created").is_none(), "explicit topic: {body}");
}
