//! Bad input: a corpus of malformed and out-of-range requests (JSON and
//! NDJSON syntax, wrong types, oversized values / keys / headers / bodies /
//! record counts, invalid and path-like topic names, unknown topics with
//! auto-creation off, partitions and offsets out of range, bad timestamps,
//! unknown or repeated query parameters, unsupported Content-Types, bad
//! reset targets and commits, bad group names, unknown routes and methods)
//! each gets its documented 4xx status and a JSON body
//! `{"error": {"code", "message"}}` with a non-empty message. Afterwards
//! the server is healthy and ready, and every record acknowledged before
//! the corpus reads back unchanged — no rejected request appended anything.
//! Path-like topic names on an auto-creating server are refused and create
//! nothing on disk.
//!
//! Requests go over raw TCP, so request targets reach the server byte for
//! byte (a URL library would resolve `..` and `%2e%2e`). Cases the server
//! once got wrong (non-UTF-8 path segments, group names on reads, ambiguous
//! reset targets) also have small tests of their own.
//!
//! One test per section of the corpus, each on a server of its own with
//! the same good records ([`Fixture`]); [`SECTIONS`] lists them all. The
//! cases are built in `bodies.rs`, `targets.rs` and `groups.rs` with the
//! machinery of `corpus.rs`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{
    assert_error_of, chunked, json, produced_of, raw_request, temp_file, Produced, Server, Value,
};

const JSON: &str = "application/json";
const NDJSON: &str = "application/x-ndjson";

/// The topic every good record goes to (two partitions).
const TOPIC: &str = "good";
/// A topic that does not exist (auto-creation is off).
const MISSING: &str = "missing";

/// Limits of the corpus server.
const MAX_BODY_BYTES: usize = 64 << 10;
const MAX_RECORDS: usize = 100;
const MAX_KEY_BYTES: usize = 64;
const MAX_VALUE_BYTES: usize = 1024;
const MAX_HEADERS: usize = 4;

/// Largest accepted record timestamp (9999-12-31T23:59:59.999Z).
const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;

mod bodies;
mod corpus;
mod groups;
mod targets;

use bodies::*;
use corpus::*;
use groups::*;
use targets::*;

/// Asserts that each acknowledged record is in `partitions` (indexed by
/// partition) at its offset with the key, value, headers and timestamp it
/// was sent with.
fn assert_acknowledged(partitions: &[Vec<Value>], acknowledged: &[(Produced, Value)]) {
    for (at, sent) in acknowledged {
        let stored = partitions[at.partition as usize]
            .iter()
            .find(|r| r["offset"] == json!(at.offset))
            .unwrap_or_else(|| panic!("{at:?} ({sent}) is not in the partition"));
        let key = sent.get("key").cloned().unwrap_or(Value::Null);
        assert_eq!(stored["key"], key, "key of {at:?}: {stored}");
        assert_eq!(stored["value"], sent["value"], "value of {at:?}: {stored}");
        let headers = sent.get("headers").cloned().unwrap_or_else(|| json!({}));
        assert_eq!(stored["headers"], headers, "headers of {at:?}: {stored}");
        match sent.get("timestamp") {
            Some(ts) => assert_eq!(&stored["timestamp"], ts, "timestamp of {at:?}"),
            None => assert!(
                stored["timestamp"].as_i64().is_some_and(|t| t > 0),
                "append-time timestamp of {at:?}: {stored}"
            ),
        }
    }
}

/// Builds the cases of one section of the corpus; `ends` are the good
/// topic's end offsets.
type Section = fn(&mut Corpus, &[u64]);

/// A corpus server (small limits, auto-creation off) holding good records
/// on both partitions of [`TOPIC`], some exactly at the limits.
struct Fixture {
    server: Server,
    /// Kept until the end: the server's config file is in it.
    _conf_dir: tempfile::TempDir,
    /// Each acknowledged record with what was sent.
    acknowledged: Vec<(Produced, Value)>,
    /// Both partitions as read back before the corpus.
    before: Vec<Vec<Value>>,
    /// End offsets before the corpus.
    ends: Vec<u64>,
}

impl Fixture {
    /// Starts the server and produces the good records.
    fn start() -> Fixture {
        let (_conf_dir, conf) = temp_file(
            "kappa.toml",
            &format!(
                "max_key_bytes = {MAX_KEY_BYTES}\nmax_value_bytes = {MAX_VALUE_BYTES}\n\
                 max_headers_per_record = {MAX_HEADERS}\n"
            ),
        );
        let server = Server::start(&[
            "--config",
            conf.to_str().expect("UTF-8 temp path"),
            "--max-body-bytes",
            &MAX_BODY_BYTES.to_string(),
            "--max-records-per-request",
            &MAX_RECORDS.to_string(),
            "--auto-create-topics",
            "false",
        ]);
        server.create_topic(&json!({"name": TOPIC, "partitions": 2}));

        // Good records first, some exactly at the limits.
        let mut acknowledged: Vec<(Produced, Value)> = Vec::new();
        let at_limits = json!([
            {"key": "user-1", "value": {"amount": 42}, "timestamp": 1_000,
             "headers": {"source": "web"}, "partition": 0},
            {"key": "user-2", "value": "two", "timestamp": 2_000, "partition": 1},
            {"value": [1, 2, 3], "partition": 0},
            {"key": null, "value": null, "timestamp": 0, "partition": 1},
            {"key": "k".repeat(MAX_KEY_BYTES), "value": "v".repeat(MAX_VALUE_BYTES - 2),
             "timestamp": MAX_TIMESTAMP_MS, "partition": 0,
             "headers": {"a": "1", "b": "2", "c": "3", "d": "4"}},
        ]);
        let produced = server.produce(TOPIC, &at_limits);
        acknowledged.extend(
            produced
                .into_iter()
                .zip(at_limits.as_array().unwrap().clone()),
        );
        let lines = [
            json!({"key": "nd-1", "value": {"nd": 1}, "timestamp": 3_000}),
            json!({"value": "nd-2", "headers": {"h": "v"}}),
        ];
        let (status, body) = server.post_ndjson(
            &format!("/v1/topics/{TOPIC}/records"),
            &format!("{}\n\n{}\n", lines[0], lines[1]),
        );
        assert_eq!(status, 200, "{body}");
        acknowledged.extend(produced_of(&body).into_iter().zip(lines));
        let once = json!([{"key": "once", "value": "first"}]);
        let (status, body) = server.post_json_with(
            &format!("/v1/topics/{TOPIC}/records"),
            &json!({ "records": once }),
            &[("Idempotency-Key", "once")],
        );
        assert_eq!(status, 200, "{body}");
        acknowledged.extend(
            produced_of(&body)
                .into_iter()
                .zip(once.as_array().unwrap().clone()),
        );
        let before: Vec<Vec<Value>> = (0..2).map(|p| server.read_all(TOPIC, p)).collect();
        assert_acknowledged(&before, &acknowledged);
        let ends = server.end_offsets(TOPIC);
        assert!(
            ends.iter().all(|&e| e > 0),
            "both partitions hold records: {ends:?}"
        );
        Fixture {
            server,
            _conf_dir,
            acknowledged,
            before,
            ends,
        }
    }

    /// Sends every case of `section`, reports every failure at once, then
    /// checks that the server is fine and nothing changed.
    fn check(self, section: Section) {
        let server = &self.server;
        let mut c = Corpus::default();
        section(&mut c, &self.ends);
        let cases = c.0;
        assert!(!cases.is_empty(), "the section has cases");
        let failures: Vec<String> = cases
            .iter()
            .filter_map(|case| run(server, case).err())
            .collect();
        assert!(
            failures.is_empty(),
            "{} of {} bad requests were not answered as documented:\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );

        // The server is fine, and nothing changed.
        let (status, body) = server.get("/health");
        assert_eq!(status, 200, "{body}");
        let (status, body) = server.get("/ready");
        assert_eq!(status, 200, "{body}");
        let after: Vec<Vec<Value>> = (0..2).map(|p| server.read_all(TOPIC, p)).collect();
        assert_acknowledged(&after, &self.acknowledged);
        assert_eq!(after, self.before, "the records read back unchanged");
        assert_eq!(
            server.end_offsets(TOPIC),
            self.ends,
            "no rejected request appended anything"
        );
        let (status, topics) = server.get("/v1/topics");
        assert_eq!(status, 200);
        let names: Vec<&Value> = topics["topics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["name"])
            .collect();
        assert_eq!(
            names,
            [&json!("good")],
            "no rejected request created a topic"
        );
        let (status, groups) = server.get("/v1/groups");
        assert_eq!(status, 200);
        assert_eq!(
            groups,
            json!({"groups": []}),
            "no rejected request created a group"
        );
        let topics_dir = server.data_dir().join("topics");
        let mut on_disk: Vec<String> = std::fs::read_dir(&topics_dir)
            .expect("the topics directory")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        assert_eq!(
            on_disk,
            [TOPIC],
            "{} holds only the good topic",
            topics_dir.display()
        );
    }
}

/// Runs one section of the corpus on a fresh [`Fixture`].
fn check_section(section: Section) {
    Fixture::start().check(section);
}

/// Every section of the corpus, in the order of docs/http-api.md.
const SECTIONS: &[(&str, Section)] = &[
    ("malformed_json", malformed_json),
    ("malformed_ndjson", malformed_ndjson),
    ("wrong_types", wrong_types),
    ("limits", limits),
    ("invalid_topic_names", invalid_topic_names),
    ("unknown_topics", unknown_topics),
    ("partitions", partitions),
    ("offsets_and_start_timestamps", offsets_and_start_timestamps),
    ("record_timestamps", record_timestamps),
    ("query_parameters", query_parameters),
    ("content_types", content_types),
    ("reset_targets", reset_targets),
    ("commits", commits),
    ("group_names", group_names),
    ("non_utf8_segments", non_utf8_segments),
    ("conflicts", conflicts),
    ("idempotency_key_length", idempotency_key_length),
    ("routes_and_methods", routes_and_methods),
    ("create_topic_configs", create_topic_configs),
];

#[test]
fn malformed_json_answers_bad_request() {
    check_section(malformed_json);
}

#[test]
fn malformed_ndjson_answers_bad_request_naming_the_line() {
    check_section(malformed_ndjson);
}

#[test]
fn wrongly_typed_fields_answer_bad_request() {
    check_section(wrong_types);
}

#[test]
fn bodies_and_records_over_the_limits_answer_too_large_naming_the_limit() {
    check_section(limits);
}

#[test]
fn invalid_topic_names_answer_invalid_topic_name_on_create_and_produce() {
    check_section(invalid_topic_names);
}

#[test]
fn unknown_topics_answer_404_when_auto_creation_is_off() {
    check_section(unknown_topics);
}

#[test]
fn unknown_partitions_answer_unknown_partition() {
    check_section(partitions);
}

#[test]
fn bad_offsets_and_start_timestamps_are_refused() {
    check_section(offsets_and_start_timestamps);
}

#[test]
fn record_timestamps_out_of_range_answer_invalid_timestamp() {
    check_section(record_timestamps);
}

#[test]
fn bad_query_parameters_answer_bad_request() {
    check_section(query_parameters);
}

#[test]
fn unsupported_content_types_answer_415() {
    check_section(content_types);
}

#[test]
fn bad_reset_targets_answer_bad_request() {
    check_section(reset_targets);
}

#[test]
fn bad_commits_are_refused() {
    check_section(commits);
}

#[test]
fn invalid_group_names_answer_invalid_group() {
    check_section(group_names);
}

#[test]
fn path_segments_not_utf8_once_decoded_answer_a_json_400() {
    check_section(non_utf8_segments);
}

#[test]
fn conflicts_answer_409() {
    check_section(conflicts);
}

#[test]
fn idempotency_keys_of_a_bad_length_answer_bad_request() {
    check_section(idempotency_key_length);
}

#[test]
fn unknown_routes_and_methods_answer_404_and_405() {
    check_section(routes_and_methods);
}

#[test]
fn bad_create_topic_configs_are_refused() {
    check_section(create_topic_configs);
}

#[test]
fn the_corpus_has_at_least_40_cases() {
    let mut c = Corpus::default();
    for (_, section) in SECTIONS {
        section(&mut c, &[1, 1]);
    }
    let cases = c.0;
    assert!(cases.len() >= 40, "the corpus has {} cases", cases.len());
}

#[test]
fn path_like_topic_names_are_refused_and_create_nothing() {
    let server = Server::start(&["--auto-create-topics", "true"]);
    let records = br#"{"records":[{"value":1}]}"#;
    let long = "n".repeat(250);
    let names = [
        "..",
        ".",
        "%2e%2e",
        "%2E%2E",
        "%2e",
        ".%2e",
        "a%2Fb",
        "..%2F..%2Fescape",
        "%2e%2e%2fescape",
        "a%5Cb",
        "a%00b",
        "a%20b",
        "na%C3%AFve",
        long.as_str(),
    ];
    let mut failures = Vec::new();
    for name in names {
        let target = format!("/v1/topics/{name}/records");
        let response = raw_request(
            server.addr(),
            "POST",
            &target,
            &[("Content-Type", "application/json")],
            records,
        );
        let body = response.json();
        let checked = std::panic::catch_unwind(|| {
            assert_error_of(
                &target,
                response.status,
                &body,
                400,
                &["invalid_topic_name"],
            );
        });
        if checked.is_err() {
            failures.push(format!("POST {target}: {} {body}", response.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let (status, topics) = server.get("/v1/topics");
    assert_eq!(status, 200);
    assert_eq!(topics, json!({"topics": []}));
    let data = server.data_dir();
    for escaped in [data.join("escape"), data.parent().unwrap().join("escape")] {
        assert!(!escaped.exists(), "{} was created", escaped.display());
    }
    let topics_dir = data.join("topics");
    let entries: Vec<_> = std::fs::read_dir(&topics_dir)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        entries.is_empty(),
        "{} holds {entries:?}",
        topics_dir.display()
    );

    // The longest valid name is fine.
    let ok = "n".repeat(249);
    let produced = server.produce(&ok, &json!([{"value": "longest name"}]));
    assert_eq!(produced[0].offset, 0);
    assert_eq!(server.get("/health").0, 200);
}

#[test]
fn non_utf8_path_segments_get_a_json_error() {
    let server = Server::start(&[]);
    let cases: [(&str, &str, &[u8]); 4] = [
        ("GET", "/v1/topics/%FF/partitions/0/records", b""),
        (
            "POST",
            "/v1/topics/%C3/records",
            br#"{"records":[{"value":1}]}"#,
        ),
        ("GET", "/v1/topics/%FF", b""),
        ("GET", "/v1/groups/%FF/offsets", b""),
    ];
    for (method, target, body) in cases {
        let response = raw_request(
            server.addr(),
            method,
            target,
            &[("Content-Type", "application/json")],
            body,
        );
        assert_error_of(
            &format!("{method} {target}"),
            response.status,
            &response.json(),
            400,
            &["bad_request", "invalid_topic_name", "invalid_group"],
        );
    }
}

#[test]
fn invalid_group_names_are_refused_on_reads() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "t"}));
    let long = "g".repeat(256);
    for target in [
        "/v1/groups/g%01x/topics/t/records".to_string(),
        format!("/v1/groups/{long}/topics/t/records"),
        "/v1/groups/g%01x/offsets?topic=t".to_string(),
        format!("/v1/groups/{long}/offsets?topic=t"),
    ] {
        let response = raw_request(server.addr(), "GET", &target, &[], b"");
        assert_error_of(
            &target,
            response.status,
            &response.json(),
            400,
            &["invalid_group"],
        );
    }
}

#[test]
fn ambiguous_or_unknown_reset_targets_are_refused() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "t"}));
    server.produce(
        "t",
        &json!([{"value": 1, "timestamp": 100}, {"value": 2, "timestamp": 200}]),
    );
    for to in [
        json!({"offset": 1, "timestamp": 150}),
        json!({"offset": 1, "bogus": 1}),
    ] {
        let (status, body) =
            server.post_json("/v1/groups/g/reset", &json!({"topic": "t", "to": to}));
        assert_error_of(
            &format!("reset to {to}"),
            status,
            &body,
            400,
            &["bad_request"],
        );
    }
}
