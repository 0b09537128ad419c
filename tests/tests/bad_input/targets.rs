//! Corpus sections about request targets: topic names, unknown topics and
//! partitions, offsets and timestamps in queries, query parameters,
//! non-UTF-8 path segments, routes and methods, create-topic configs.

use super::corpus::*;
use super::*;

/// Invalid topic names, on create and on produce.
pub(crate) fn invalid_topic_names(c: &mut Corpus, _ends: &[u64]) {
    let long_name = "n".repeat(250);
    for name in [
        "..",
        ".",
        "a/b",
        "../escape",
        "%2e%2e",
        "",
        "a b",
        "naïve",
        "a\u{0}b",
        long_name.as_str(),
    ] {
        c.post_json(
            format!("create topic {:?}", shorten(name, 20)),
            "/v1/topics",
            json!({ "name": name }).to_string(),
            400,
            INVALID_TOPIC_NAME,
        );
    }
    for segment in [
        "..",
        ".",
        "a%2Fb",
        "%2e%2e",
        "%2E%2E",
        "..%2F..%2Fescape",
        long_name.as_str(),
    ] {
        c.produce(
            format!("produce to topic segment {:?}", shorten(segment, 20)),
            segment,
            ONE,
            400,
            INVALID_TOPIC_NAME,
        );
    }
}

/// Unknown topics (auto-creation off): 404 unknown_topic.
pub(crate) fn unknown_topics(c: &mut Corpus, _ends: &[u64]) {
    c.produce(
        "produce to an unknown topic",
        MISSING,
        ONE,
        404,
        UNKNOWN_TOPIC,
    )
    .message_has(MISSING);
    c.produce_ndjson(
        "NDJSON produce to an unknown topic",
        MISSING,
        "{\"value\":1}\n",
        404,
        UNKNOWN_TOPIC,
    )
    .message_has(MISSING);
    c.get(
        "read an unknown topic",
        format!("/v1/topics/{MISSING}/partitions/0/records"),
        404,
        UNKNOWN_TOPIC,
    )
    .message_has(MISSING);
    c.get(
        "describe an unknown topic",
        format!("/v1/topics/{MISSING}"),
        404,
        UNKNOWN_TOPIC,
    )
    .message_has(MISSING);
    c.add(
        "delete an unknown topic",
        "DELETE",
        format!("/v1/topics/{MISSING}"),
        Vec::new(),
        404,
        UNKNOWN_TOPIC,
    )
    .message_has(MISSING);
    c.get(
        "group read of an unknown topic",
        format!("/v1/groups/g/topics/{MISSING}/records"),
        404,
        UNKNOWN_TOPIC,
    );
    c.post_json(
        "commit on an unknown topic",
        "/v1/groups/g/offsets",
        json!({"topic": MISSING, "offsets": [{"partition": 0, "offset": 0}]}).to_string(),
        404,
        UNKNOWN_TOPIC,
    );
    c.post_json(
        "reset on an unknown topic",
        "/v1/groups/g/reset",
        json!({"topic": MISSING, "to": "earliest"}).to_string(),
        404,
        UNKNOWN_TOPIC,
    );
    c.get(
        "group offsets of an unknown topic",
        format!("/v1/groups/g/offsets?topic={MISSING}"),
        404,
        UNKNOWN_TOPIC,
    );
}

/// Partitions: 400 unknown_partition.
pub(crate) fn partitions(c: &mut Corpus, _ends: &[u64]) {
    for partition in [2, u32::MAX] {
        c.produce(
            format!("produce to partition {partition}"),
            TOPIC,
            records_body(&json!([{"value": 1, "partition": partition}])),
            400,
            UNKNOWN_PARTITION,
        );
    }
    for partition in ["2", "abc", "-1", "4294967296", "1.0", "%20"] {
        c.get(
            format!("read partition {partition:?}"),
            format!("/v1/topics/{TOPIC}/partitions/{partition}/records"),
            400,
            UNKNOWN_PARTITION,
        );
    }
    c.post_json(
        "commit on partition 5",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 5, "offset": 0}]}).to_string(),
        400,
        UNKNOWN_PARTITION,
    );
}

/// Offsets and start timestamps.
pub(crate) fn offsets_and_start_timestamps(c: &mut Corpus, ends: &[u64]) {
    for offset in ["-1", "18446744073709551616", "abc", "1.5", ""] {
        c.get(
            format!("read at offset {offset:?}"),
            read(&format!("offset={offset}")),
            400,
            INVALID_OFFSET,
        );
    }
    c.get(
        "read beyond the end",
        read(&format!("offset={}", ends[0] + 1)),
        400,
        OFFSET_OUT_OF_RANGE,
    )
    .message_has(format!("{}", ends[0]));
    c.get(
        "read at u64::MAX",
        read(&format!("offset={}", u64::MAX)),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.get(
        "offset and from_timestamp",
        read("offset=0&from_timestamp=0"),
        400,
        BAD_REQUEST,
    );
    c.get(
        "offset=earliest and from_timestamp",
        read("from_timestamp=5&offset=earliest"),
        400,
        BAD_REQUEST,
    );
    for ts in ["abc", "1.5", "9223372036854775808"] {
        c.get(
            format!("from_timestamp {ts:?}"),
            read(&format!("from_timestamp={ts}")),
            400,
            INVALID_TIMESTAMP,
        );
    }
}

/// Query parameters: 400 bad_request.
pub(crate) fn query_parameters(c: &mut Corpus, _ends: &[u64]) {
    for query in [
        "max_records=0",
        "max_records=10001",
        "max_records=abc",
        "max_bytes=0",
        "max_bytes=16777217",
        "max_wait_ms=30001",
        "max_wait_ms=-1",
        "foo=1",
        "offset=0&offset=1",
        "max_records=1&max_records=1",
    ] {
        c.get(format!("read with {query}"), read(query), 400, BAD_REQUEST);
    }
    for query in [
        "max_records=0",
        "max_wait_ms=30001",
        "commit=yes",
        "offset=0",
        "commit=true&commit=true",
    ] {
        c.get(
            format!("group read with {query}"),
            group_read("g", query),
            400,
            BAD_REQUEST,
        );
    }
    c.get(
        "group offsets with an unknown parameter",
        format!("/v1/groups/g/offsets?topic={TOPIC}&x=1"),
        400,
        BAD_REQUEST,
    );
    c.get(
        "group offsets with topic twice",
        format!("/v1/groups/g/offsets?topic={TOPIC}&topic={TOPIC}"),
        400,
        BAD_REQUEST,
    );
    // Not UTF-8 once decoded: a bad query parameter (BAD_REQUEST) or, the
    // docs being silent on it, a bad offset (INVALID_OFFSET).
    c.get(
        "offset that is not UTF-8",
        read("offset=%FF"),
        400,
        &["bad_request", "invalid_offset"],
    );
}

/// Path segments that are not UTF-8 once percent-decoded.
pub(crate) fn non_utf8_segments(c: &mut Corpus, _ends: &[u64]) {
    c.get(
        "read of a non-UTF-8 topic",
        "/v1/topics/%FF/partitions/0/records",
        400,
        NOT_UTF8,
    );
    c.produce("produce to a non-UTF-8 topic", "%C3", ONE, 400, NOT_UTF8);
    c.get(
        "describe a non-UTF-8 topic",
        "/v1/topics/%FF",
        400,
        NOT_UTF8,
    );
    c.get(
        "offsets of a non-UTF-8 group",
        "/v1/groups/%FF/offsets",
        400,
        NOT_UTF8,
    );
    c.post_json(
        "commit as a non-UTF-8 group",
        "/v1/groups/%FF/offsets",
        commit_body(),
        400,
        NOT_UTF8,
    );
    c.post_json(
        "reset as a non-UTF-8 group",
        "/v1/groups/%C3%28/reset",
        reset_body(),
        400,
        NOT_UTF8,
    );
}

/// Routes and methods.
pub(crate) fn routes_and_methods(c: &mut Corpus, _ends: &[u64]) {
    c.get("unknown route", "/v1/nope", 404, NOT_FOUND);
    c.get("unknown API version", "/v2/topics", 404, NOT_FOUND);
    c.get(
        "partitions without a number",
        format!("/v1/topics/{TOPIC}/partitions"),
        404,
        NOT_FOUND,
    );
    c.post_json(
        "produce with an extra segment",
        format!("/v1/topics/{TOPIC}/records/extra"),
        ONE,
        404,
        NOT_FOUND,
    );
    for (method, target) in [
        ("PUT", "/v1/topics".to_string()),
        ("DELETE", "/v1/groups".to_string()),
        ("GET", format!("/v1/topics/{TOPIC}/records")),
        ("PUT", format!("/v1/topics/{TOPIC}")),
        ("DELETE", format!("/v1/topics/{TOPIC}/partitions/0/records")),
        ("DELETE", "/v1/groups/g/offsets".to_string()),
        ("GET", "/v1/groups/g/reset".to_string()),
        ("POST", "/health".to_string()),
    ] {
        c.add(
            format!("{method} {target}"),
            method,
            target,
            Vec::new(),
            405,
            METHOD_NOT_ALLOWED,
        );
    }
}

/// Create-topic configs.
pub(crate) fn create_topic_configs(c: &mut Corpus, _ends: &[u64]) {
    for (what, spec) in [
        ("partitions 0", json!({"name": "c", "partitions": 0})),
        ("partitions 5000", json!({"name": "c", "partitions": 5000})),
        ("segment_bytes 1", json!({"name": "c", "segment_bytes": 1})),
        ("segment_ms 0", json!({"name": "c", "segment_ms": 0})),
        ("retention_ms 0", json!({"name": "c", "retention_ms": 0})),
        (
            "fsync_interval_ms 0",
            json!({"name": "c", "fsync_interval_ms": 0}),
        ),
    ] {
        c.post_json(
            format!("create with {what}"),
            "/v1/topics",
            spec.to_string(),
            400,
            INVALID_CONFIG,
        );
    }
    // The docs list `INVALID_CONFIG` for create and `BAD_REQUEST` for wrong
    // types without saying which ONE a config value of the wrong type or an
    // unknown field is: either is accepted.
    for (what, spec) in [
        (
            "fsync \"sometimes\"",
            json!({"name": "c", "fsync": "sometimes"}),
        ),
        ("an unknown field", json!({"name": "c", "replicas": 3})),
        ("partitions -1", json!({"name": "c", "partitions": -1})),
        ("partitions \"2\"", json!({"name": "c", "partitions": "2"})),
    ] {
        c.post_json(
            format!("create with {what}"),
            "/v1/topics",
            spec.to_string(),
            400,
            CONFIG_OR_TYPE,
        );
    }
    c.post_json(
        "create without a name",
        "/v1/topics",
        "{}",
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "create with a numeric name",
        "/v1/topics",
        r#"{"name":7}"#,
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "create with malformed JSON",
        "/v1/topics",
        r#"{"name":"#,
        400,
        BAD_REQUEST,
    );
}
