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
//! the same good records ([`Fixture`]); [`SECTIONS`] lists them all.

use std::panic::{catch_unwind, AssertUnwindSafe};

use kappa_tests::{
    assert_error_of, chunked, json, produced_of, raw_request, temp_file, Produced, RawResponse,
    Server, Value,
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

/// Codes of the answers, as the corpus names them.
const BAD_REQUEST: &[&str] = &["bad_request"];
const TOO_LARGE: &[&str] = &["too_large"];
const INVALID_TOPIC_NAME: &[&str] = &["invalid_topic_name"];
const UNKNOWN_TOPIC: &[&str] = &["unknown_topic"];
const UNKNOWN_PARTITION: &[&str] = &["unknown_partition"];
const INVALID_OFFSET: &[&str] = &["invalid_offset"];
const OFFSET_OUT_OF_RANGE: &[&str] = &["offset_out_of_range"];
const INVALID_TIMESTAMP: &[&str] = &["invalid_timestamp"];
const INVALID_GROUP: &[&str] = &["invalid_group"];
const NOT_FOUND: &[&str] = &["not_found"];
const METHOD_NOT_ALLOWED: &[&str] = &["method_not_allowed"];
const INVALID_CONFIG: &[&str] = &["invalid_config"];
/// The docs name no code for a path segment that is not UTF-8 once
/// percent-decoded; any 400 code of the segment's kind is accepted, as long
/// as the body is the JSON error shape.
const NOT_UTF8: &[&str] = &["bad_request", "invalid_topic_name", "invalid_group"];
/// The docs list `invalid_config` for create and `bad_request` for wrong
/// types without saying which one a config value of the wrong type or an
/// unknown field is: either is accepted.
const CONFIG_OR_TYPE: &[&str] = &["invalid_config", "bad_request"];

/// A good produce body of one record.
const ONE: &str = r#"{"records":[{"value":1}]}"#;

/// A read of partition 0 of the good topic with `query`.
fn read(query: &str) -> String {
    format!("/v1/topics/{TOPIC}/partitions/0/records?{query}")
}

/// A group read of the good topic with `query`.
fn group_read(group: &str, query: &str) -> String {
    format!("/v1/groups/{group}/topics/{TOPIC}/records?{query}")
}

/// A valid commit body (offset 0 of partition 0).
fn commit_body() -> String {
    json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": 0}]}).to_string()
}

/// A valid reset body (to earliest).
fn reset_body() -> String {
    json!({"topic": TOPIC, "to": "earliest"}).to_string()
}

/// One bad request and the answer docs/http-api.md documents for it.
struct Case {
    what: String,
    method: &'static str,
    target: String,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    status: u16,
    /// Accepted codes: one, or several where the docs are ambiguous.
    codes: &'static [&'static str],
    /// Text the error message must contain (a line number, a limit, a name).
    message_has: Vec<String>,
}

impl Case {
    fn header(&mut self, name: &'static str, value: impl Into<String>) -> &mut Case {
        self.headers.push((name, value.into()));
        self
    }

    fn message_has(&mut self, part: impl Into<String>) -> &mut Case {
        self.message_has.push(part.into());
        self
    }
}

#[derive(Default)]
struct Corpus(Vec<Case>);

impl Corpus {
    fn add(
        &mut self,
        what: impl Into<String>,
        method: &'static str,
        target: impl Into<String>,
        body: impl Into<Vec<u8>>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.0.push(Case {
            what: what.into(),
            method,
            target: target.into(),
            headers: Vec::new(),
            body: body.into(),
            status,
            codes,
            message_has: Vec::new(),
        });
        self.0.last_mut().expect("just pushed")
    }

    fn get(
        &mut self,
        what: impl Into<String>,
        target: impl Into<String>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.add(what, "GET", target, Vec::new(), status, codes)
    }

    fn post_json(
        &mut self,
        what: impl Into<String>,
        target: impl Into<String>,
        body: impl Into<Vec<u8>>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.add(what, "POST", target, body, status, codes)
            .header("Content-Type", JSON)
    }

    fn post_ndjson(
        &mut self,
        what: impl Into<String>,
        target: impl Into<String>,
        body: impl Into<Vec<u8>>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.add(what, "POST", target, body, status, codes)
            .header("Content-Type", NDJSON)
    }

    /// A JSON produce to `topic` (a raw path segment).
    fn produce(
        &mut self,
        what: impl Into<String>,
        topic: &str,
        body: impl Into<Vec<u8>>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.post_json(
            what,
            format!("/v1/topics/{topic}/records"),
            body,
            status,
            codes,
        )
    }

    /// An NDJSON produce to `topic` (a raw path segment).
    fn produce_ndjson(
        &mut self,
        what: impl Into<String>,
        topic: &str,
        body: impl Into<Vec<u8>>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.post_ndjson(
            what,
            format!("/v1/topics/{topic}/records"),
            body,
            status,
            codes,
        )
    }
}

/// `{"records": records}` as JSON text.
fn records_body(records: &Value) -> String {
    json!({ "records": records }).to_string()
}

/// The first `n` characters of `text`, marked when cut.
fn shorten(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(n).collect::<String>())
    }
}

/// The `(code, message)` of a body of the documented error shape.
fn error_shape(body: &Value) -> Result<(&str, &str), String> {
    let object = body.as_object().ok_or("the body is not a JSON object")?;
    if object.len() != 1 {
        return Err("more than `error` at the top".into());
    }
    let error = body["error"].as_object().ok_or("no `error` object")?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .ok_or("no string `error.code`")?;
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .ok_or("no string `error.message`")?;
    if message.trim().is_empty() {
        return Err("empty `error.message`".into());
    }
    Ok((code, message))
}

/// Checks one answer against its case; `Err` describes every mismatch.
fn check(case: &Case, response: &RawResponse) -> Result<(), String> {
    let body = response.json();
    let mut problems = Vec::new();
    if response.status != case.status {
        problems.push(format!(
            "status {}, expected {}",
            response.status, case.status
        ));
    }
    let content_type = response
        .headers
        .get("content-type")
        .map(String::as_str)
        .unwrap_or("");
    if !content_type.starts_with(JSON) {
        problems.push(format!("Content-Type {content_type:?}, expected {JSON}"));
    }
    match error_shape(&body) {
        Err(problem) => problems.push(problem),
        Ok((code, message)) => {
            if !case.codes.contains(&code) {
                problems.push(format!("code {code:?}, expected one of {:?}", case.codes));
            }
            for part in &case.message_has {
                if !message.contains(part.as_str()) {
                    problems.push(format!("the message does not contain {part:?}"));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}: {} {} -> {} {}: {}",
            case.what,
            case.method,
            shorten(&case.target, 120),
            response.status,
            shorten(&body.to_string(), 400),
            problems.join("; ")
        ))
    }
}

/// Sends one case over raw TCP and checks the answer.
fn run(server: &Server, case: &Case) -> Result<(), String> {
    let headers: Vec<(&str, &str)> = case
        .headers
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let sent = catch_unwind(AssertUnwindSafe(|| {
        raw_request(
            server.addr(),
            case.method,
            &case.target,
            &headers,
            &case.body,
        )
    }));
    match sent {
        Ok(response) => check(case, &response),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!(
                "{}: {} {}: no answer: {why}",
                case.what,
                case.method,
                shorten(&case.target, 120)
            ))
        }
    }
}

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

/// Malformed JSON.
fn malformed_json(c: &mut Corpus, _ends: &[u64]) {
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
fn malformed_ndjson(c: &mut Corpus, _ends: &[u64]) {
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
fn wrong_types(c: &mut Corpus, _ends: &[u64]) {
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
fn limits(c: &mut Corpus, _ends: &[u64]) {
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

/// Invalid topic names, on create and on produce.
fn invalid_topic_names(c: &mut Corpus, _ends: &[u64]) {
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
fn unknown_topics(c: &mut Corpus, _ends: &[u64]) {
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
fn partitions(c: &mut Corpus, _ends: &[u64]) {
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
fn offsets_and_start_timestamps(c: &mut Corpus, ends: &[u64]) {
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

/// Record timestamps out of 0..=253402300799999.
fn record_timestamps(c: &mut Corpus, _ends: &[u64]) {
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

/// Query parameters: 400 bad_request.
fn query_parameters(c: &mut Corpus, _ends: &[u64]) {
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

/// Content-Type: 415 unsupported_media_type.
fn content_types(c: &mut Corpus, _ends: &[u64]) {
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

/// Reset targets: 400 bad_request.
fn reset_targets(c: &mut Corpus, _ends: &[u64]) {
    for to in [
        json!("middle"),
        json!({"offset": -1}),
        json!({"offset": 3, "timestamp": 5}),
        json!({"offset": 3, "bogus": 1}),
        json!({"offset": 1.5}),
        json!({"timestamp": "x"}),
        json!({}),
        json!(5),
        json!(null),
    ] {
        c.post_json(
            format!("reset to {to}"),
            "/v1/groups/g/reset",
            json!({"topic": TOPIC, "to": to}).to_string(),
            400,
            BAD_REQUEST,
        );
    }
    c.post_json(
        "reset without `to`",
        "/v1/groups/g/reset",
        json!({"topic": TOPIC}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "reset with an unknown field",
        "/v1/groups/g/reset",
        json!({"topic": TOPIC, "to": "earliest", "bogus": 1}).to_string(),
        400,
        BAD_REQUEST,
    );
}

/// Commits.
fn commits(c: &mut Corpus, ends: &[u64]) {
    c.post_json(
        "commit beyond the end",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": ends[0] + 1}]}).to_string(),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.post_json(
        "commit with ONE good and ONE offset beyond the end",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": 0},
                                            {"partition": 1, "offset": ends[1] + 1}]})
        .to_string(),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.post_json(
        "commit at u64::MAX",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": u64::MAX}]}).to_string(),
        400,
        OFFSET_OUT_OF_RANGE,
    );
    c.post_json(
        "commit of an empty offsets list",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": []}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "commit of a negative offset",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": -1}]}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "commit without offsets",
        "/v1/groups/g/offsets",
        json!({"topic": TOPIC}).to_string(),
        400,
        BAD_REQUEST,
    );
    c.post_json(
        "commit of malformed JSON",
        "/v1/groups/g/offsets",
        r#"{"topic":"good","offsets":[{"partition":0,"offset":0}"#,
        400,
        BAD_REQUEST,
    );
}

/// Group names: 400 invalid_group.
fn group_names(c: &mut Corpus, _ends: &[u64]) {
    let long_group = "g".repeat(256);
    for group in ["g%01x", "g%0Ax", "g%7Fx", long_group.as_str()] {
        let shown = shorten(group, 12);
        c.post_json(
            format!("commit as group {shown:?}"),
            format!("/v1/groups/{group}/offsets"),
            commit_body(),
            400,
            INVALID_GROUP,
        );
        c.post_json(
            format!("reset as group {shown:?}"),
            format!("/v1/groups/{group}/reset"),
            reset_body(),
            400,
            INVALID_GROUP,
        );
        c.get(
            format!("group read as group {shown:?}"),
            group_read(group, ""),
            400,
            INVALID_GROUP,
        );
        c.get(
            format!("offsets listing of group {shown:?}"),
            format!("/v1/groups/{group}/offsets?topic={TOPIC}"),
            400,
            INVALID_GROUP,
        );
        c.get(
            format!("offsets listing (all topics) of group {shown:?}"),
            format!("/v1/groups/{group}/offsets"),
            400,
            INVALID_GROUP,
        );
    }
}

/// Path segments that are not UTF-8 once percent-decoded.
fn non_utf8_segments(c: &mut Corpus, _ends: &[u64]) {
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

/// Conflicts: 409.
fn conflicts(c: &mut Corpus, _ends: &[u64]) {
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

/// Idempotency-Key length (1..=255 bytes): 400 bad_request.
fn idempotency_key_length(c: &mut Corpus, _ends: &[u64]) {
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

/// Routes and methods.
fn routes_and_methods(c: &mut Corpus, _ends: &[u64]) {
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
fn create_topic_configs(c: &mut Corpus, _ends: &[u64]) {
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
    let server = Server::start(&[]);
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
