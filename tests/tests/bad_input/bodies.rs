//! Corpus sections about request bodies and headers: JSON and NDJSON
//! syntax, wrong types, limits, record timestamps, Content-Types,
//! Idempotency-Key lengths and conflicts.

use super::corpus::*;
use super::*;

/// Malformed JSON.
pub(crate) fn malformed_json(c: &mut Corpus, _ends: &[u64]) {
    c.produce(
        "truncated JSON",
        TOPIC,
        r#"{"records":[{"value":1}"#,
        400,
        BAD_REQUEST,
    );
    c.produce(
        "trailing comma",
        TOPIC,
        r#"{"records":[{"value":1},]}"#,
        400,
        BAD_REQUEST,
    );
    c.produce(
        "trailing garbage",
        TOPIC,
        format!("{ONE} x"),
        400,
        BAD_REQUEST,
    );
    c.produce(
        "two JSON documents",
        TOPIC,
        format!("{ONE}{ONE}"),
        400,
        BAD_REQUEST,
    );
    c.produce("empty body", TOPIC, "", 400, BAD_REQUEST);
    c.produce("not JSON at all", TOPIC, "records please", 400, BAD_REQUEST);
    c.produce(
        "single quotes",
        TOPIC,
        "{'records':[{'value':1}]}",
        400,
        BAD_REQUEST,
    );
    c.produce(
        "invalid UTF-8 in a string",
        TOPIC,
        b"{\"records\":[{\"value\":\"\xff\"}]}".to_vec(),
        400,
        BAD_REQUEST,
    );
    c.produce(
        "a JSON array body",
        TOPIC,
        r#"[{"value":1}]"#,
        400,
        BAD_REQUEST,
    );
    c.produce("no records field", TOPIC, "{}", 400, BAD_REQUEST);
    c.produce(
        "unknown top-level field",
        TOPIC,
        r#"{"records":[{"value":1}],"extra":1}"#,
        400,
        BAD_REQUEST,
    );
}

/// Malformed NDJSON (the message names the line).
pub(crate) fn malformed_ndjson(c: &mut Corpus, _ends: &[u64]) {
    c.produce_ndjson(
        "NDJSON: a bad line in the middle",
        TOPIC,
        "{\"value\":1}\n{\"value\":2}\n{\"value\":\n{\"value\":4}\n",
        400,
        BAD_REQUEST,
    )
    .message_has("line 3");
    c.produce_ndjson(
        "NDJSON: trailing garbage on a line",
        TOPIC,
        "{\"value\":1} garbage\n{\"value\":2}\n",
        400,
        BAD_REQUEST,
    )
    .message_has("line 1");
    c.produce_ndjson(
        "NDJSON: an array line after a blank line (blank lines count)",
        TOPIC,
        "{\"value\":1}\n\n{\"value\":2}\n[1,2]\n",
        400,
        BAD_REQUEST,
    )
    .message_has("line 4");
    c.produce_ndjson(
        "NDJSON: a JSON produce body as a line",
        TOPIC,
        ONE,
        400,
        BAD_REQUEST,
    )
    .message_has("line 1");
    c.produce_ndjson(
        "NDJSON: a wrongly typed timestamp",
        TOPIC,
        "{\"value\":1}\n{\"value\":2,\"timestamp\":\"x\"}\n",
        400,
        BAD_REQUEST,
    )
    .message_has("line 2");
    c.produce_ndjson(
        "NDJSON: only blank lines",
        TOPIC,
        "\n  \n\n",
        400,
        BAD_REQUEST,
    );
}

/// Wrong types.
pub(crate) fn wrong_types(c: &mut Corpus, _ends: &[u64]) {
    for (what, record) in [
        ("value missing", json!({"key": "a"})),
        ("key as a number", json!({"key": 1, "value": 1})),
        (
            "timestamp as a string",
            json!({"value": 1, "timestamp": "1000"}),
        ),
        (
            "timestamp as a float",
            json!({"value": 1, "timestamp": 1.5}),
        ),
        ("partition negative", json!({"value": 1, "partition": -1})),
        (
            "partition as a string",
            json!({"value": 1, "partition": "0"}),
        ),
        (
            "headers as an array",
            json!({"value": 1, "headers": [["a", "b"]]}),
        ),
        (
            "a header with a number value",
            json!({"value": 1, "headers": {"a": 1}}),
        ),
        ("unknown record field", json!({"value": 1, "bogus": 1})),
        ("a record that is not an object", json!("value")),
    ] {
        c.produce(
            what,
            TOPIC,
            records_body(&json!([record])),
            400,
            BAD_REQUEST,
        );
    }
    c.produce(
        "records not an array",
        TOPIC,
        r#"{"records":{"value":1}}"#,
        400,
        BAD_REQUEST,
    );
    c.produce(
        "empty records",
        TOPIC,
        r#"{"records":[]}"#,
        400,
        BAD_REQUEST,
    );
}

/// Limits: 413 too_large, the message names the limit.
pub(crate) fn limits(c: &mut Corpus, _ends: &[u64]) {
    let big: Vec<Value> = (0..90).map(|_| json!({"value": "b".repeat(800)})).collect();
    let big_json = records_body(&json!(big));
    let big_ndjson: String = big.iter().map(|r| format!("{r}\n")).collect();
    assert!(big.len() <= MAX_RECORDS && big_json.len() > MAX_BODY_BYTES);
    c.produce(
        "JSON body over max_body_bytes",
        TOPIC,
        big_json.clone(),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_BODY_BYTES.to_string());
    c.produce_ndjson(
        "NDJSON body over max_body_bytes",
        TOPIC,
        big_ndjson,
        413,
        TOO_LARGE,
    )
    .message_has(MAX_BODY_BYTES.to_string());
    c.produce(
        "chunked body over max_body_bytes",
        TOPIC,
        chunked(big_json.as_bytes(), 8192),
        413,
        TOO_LARGE,
    )
    .header("Transfer-Encoding", "chunked")
    .message_has(MAX_BODY_BYTES.to_string());
    c.post_json(
        "create-topic body over max_body_bytes",
        "/v1/topics",
        format!(r#"{{"name":"padded"{}}}"#, " ".repeat(MAX_BODY_BYTES)),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_BODY_BYTES.to_string());
    let many: Vec<Value> = (0..=MAX_RECORDS).map(|i| json!({"value": i})).collect();
    c.produce(
        "more records than max_records_per_request",
        TOPIC,
        records_body(&json!(many)),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_RECORDS.to_string());
    c.produce_ndjson(
        "more NDJSON lines than max_records_per_request",
        TOPIC,
        many.iter().map(|r| format!("{r}\n")).collect::<String>(),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_RECORDS.to_string());
    c.produce(
        "key over max_key_bytes",
        TOPIC,
        records_body(&json!([{"key": "k".repeat(MAX_KEY_BYTES + 1), "value": 1}])),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_KEY_BYTES.to_string());
    c.produce_ndjson(
        "NDJSON key over max_key_bytes",
        TOPIC,
        format!(
            "{}\n",
            json!({"key": "k".repeat(MAX_KEY_BYTES + 1), "value": 1})
        ),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_KEY_BYTES.to_string());
    c.produce(
        "string value over max_value_bytes",
        TOPIC,
        records_body(&json!([{"value": "v".repeat(MAX_VALUE_BYTES - 1)}])),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_VALUE_BYTES.to_string());
    c.produce(
        "object value over max_value_bytes",
        TOPIC,
        records_body(&json!([{"value": {"list": vec![12345; MAX_VALUE_BYTES / 5]}}])),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_VALUE_BYTES.to_string());
    c.produce(
        "more headers than max_headers_per_record",
        TOPIC,
        records_body(&json!([{"value": 1,
            "headers": {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}}])),
        413,
        TOO_LARGE,
    )
    .message_has(MAX_HEADERS.to_string());
}

/// Record timestamps out of 0..=253402300799999.
pub(crate) fn record_timestamps(c: &mut Corpus, _ends: &[u64]) {
    for ts in [-1, MAX_TIMESTAMP_MS + 1, i64::MIN, i64::MAX] {
        c.produce(
            format!("record timestamp {ts}"),
            TOPIC,
            records_body(&json!([{"value": 1, "timestamp": ts}])),
            400,
            INVALID_TIMESTAMP,
        );
    }
    c.produce_ndjson(
        "NDJSON record timestamp -5",
        TOPIC,
        "{\"value\":1}\n{\"value\":2,\"timestamp\":-5}\n",
        400,
        INVALID_TIMESTAMP,
    );
    // Above i64::MAX the number is no longer an integer the API can hold:
    // the docs allow reading that as a wrong type (BAD_REQUEST) or as an
    // out-of-range timestamp (INVALID_TIMESTAMP); either is accepted.
    c.produce(
        "record timestamp above i64::MAX",
        TOPIC,
        r#"{"records":[{"value":1,"timestamp":100000000000000000000}]}"#,
        400,
        &["bad_request", "invalid_timestamp"],
    );
}

/// Content-Type: 415 unsupported_media_type.
pub(crate) fn content_types(c: &mut Corpus, _ends: &[u64]) {
    for content_type in [
        "text/plain",
        "application/xml",
        "multipart/form-data; boundary=x",
        "application/x-www-form-urlencoded",
    ] {
        c.add(
            format!("produce as {content_type}"),
            "POST",
            format!("/v1/topics/{TOPIC}/records"),
            ONE,
            415,
            &["unsupported_media_type"],
        )
        .header("Content-Type", content_type);
    }
}

/// Idempotency-Key length (1..=255 bytes): 400 bad_request.
pub(crate) fn idempotency_key_length(c: &mut Corpus, _ends: &[u64]) {
    c.produce(
        "an Idempotency-Key of 256 bytes",
        TOPIC,
        ONE,
        400,
        BAD_REQUEST,
    )
    .header("Idempotency-Key", "i".repeat(256));
    c.produce("an empty Idempotency-Key", TOPIC, ONE, 400, BAD_REQUEST)
        .header("Idempotency-Key", "");
}

/// Conflicts: 409.
pub(crate) fn conflicts(c: &mut Corpus, _ends: &[u64]) {
    c.post_json(
        "create an existing topic",
        "/v1/topics",
        json!({ "name": TOPIC }).to_string(),
        409,
        &["topic_exists"],
    )
    .message_has(TOPIC);
    c.post_json(
        "create an existing topic with another config",
        "/v1/topics",
        json!({"name": TOPIC, "partitions": 3}).to_string(),
        409,
        &["topic_exists"],
    );
    c.produce(
        "a used Idempotency-Key with other records",
        TOPIC,
        records_body(&json!([{"key": "once", "value": "second"}])),
        409,
        &["idempotency_key_reused"],
    )
    .header("Idempotency-Key", "once");
}
