//! [`Client`]: a small blocking HTTP client (ureq) whose helpers answer
//! `(status, json)` and never panic on 4xx/5xx, plus asserting helpers for
//! topics, SQL statements, view reads and the JSON error shape.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::*;

/// One HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// The `Content-Type` header ("" if absent).
    pub content_type: String,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
    /// The `WWW-Authenticate` header, if any.
    pub www_authenticate: Option<String>,
    /// The body as text.
    pub text: String,
    /// The body parsed as JSON; `Null` if empty, `Value::String(text)` if
    /// it is not JSON (so error-shape assertions fail with the text shown).
    pub body: Value,
}

pub(crate) fn parse_body(text: &str) -> Value {
    if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
    }
}

/// Where a produced record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Produced {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// A blocking HTTP client of one server.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    /// Sent as `Authorization: Bearer <token>` when set.
    token: Option<String>,
}

impl Client {
    /// A client of `base` (`http://host:port`).
    pub fn new(base: impl Into<String>) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10))
            .timeout_read(HTTP_TIMEOUT)
            .timeout_write(HTTP_TIMEOUT)
            .build();
        Client {
            agent,
            base: base.into(),
            token: None,
        }
    }

    /// A client of `base` sending through `agent` (e.g. one with a TLS
    /// config trusting a test CA).
    pub fn with_agent(base: impl Into<String>, agent: ureq::Agent) -> Client {
        Client {
            agent,
            base: base.into(),
            token: None,
        }
    }

    /// This client sending `Authorization: Bearer <token>` on every request
    /// (same connection pool).
    pub fn with_token(&self, token: &str) -> Client {
        Client {
            token: Some(token.to_string()),
            ..self.clone()
        }
    }

    /// `base` + `path`.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends one request. `Err` only for transport errors (connection
    /// refused or reset, timeouts); every HTTP status is an `Ok`.
    pub fn try_send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Result<Reply, String> {
        let mut request = self.agent.request(method, &self.url_of(path));
        if let Some(ct) = content_type {
            request = request.set("Content-Type", ct);
        }
        if let Some(token) = &self.token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        for (name, value) in headers {
            request = request.set(name, value);
        }
        let result = match body {
            Some(bytes) => request.send_bytes(bytes),
            None => request.call(),
        };
        let response = match result {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(ureq::Error::Transport(t)) => return Err(t.to_string()),
        };
        let status = response.status();
        let content_type = response.header("content-type").unwrap_or("").to_string();
        let retry_after = response.header("retry-after").map(str::to_string);
        let www_authenticate = response.header("www-authenticate").map(str::to_string);
        let text = response
            .into_string()
            .map_err(|e| format!("reading the body: {e}"))?;
        let body = parse_body(&text);
        Ok(Reply {
            status,
            content_type,
            retry_after,
            www_authenticate,
            text,
            body,
        })
    }

    /// The status of `method path` without reading the body: for answers
    /// that stream without end (the change feed). Panics on transport errors.
    pub fn status_only(&self, method: &str, path: &str) -> u16 {
        let mut request = self.agent.request(method, &self.url_of(path));
        if let Some(token) = &self.token {
            request = request.set("Authorization", &format!("Bearer {token}"));
        }
        match request.call() {
            Ok(response) => response.status(),
            Err(ureq::Error::Status(status, _)) => status,
            Err(e) => panic!("{method} {path}: {e}"),
        }
    }

    /// Like [`Client::try_send`], panicking on transport errors.
    pub fn send(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Reply {
        self.try_send(method, path, content_type, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path}: transport error: {e}"))
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = self.send("GET", path, None, &[], None);
        (r.status, r.body)
    }

    /// `DELETE path`.
    pub fn delete(&self, path: &str) -> (u16, Value) {
        let r = self.send("DELETE", path, None, &[], None);
        (r.status, r.body)
    }

    /// `PATCH path` with a JSON body.
    pub fn patch_json(&self, path: &str, body: &Value) -> (u16, Value) {
        let bytes = serde_json::to_vec(body).expect("JSON serializes");
        let r = self.send("PATCH", path, Some("application/json"), &[], Some(&bytes));
        (r.status, r.body)
    }

    /// `POST path` with a JSON body.
    pub fn post_json(&self, path: &str, body: &Value) -> (u16, Value) {
        self.post_json_with(path, body, &[])
    }

    /// `POST path` with a JSON body and extra headers.
    pub fn post_json_with(
        &self,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let bytes = serde_json::to_vec(body).expect("JSON serializes");
        self.post(path, "application/json", &bytes, headers)
    }

    /// `POST path` with an `application/x-ndjson` body.
    pub fn post_ndjson(&self, path: &str, body: &str) -> (u16, Value) {
        self.post_ndjson_with(path, body, &[])
    }

    /// `POST path` with an `application/x-ndjson` body and extra headers.
    pub fn post_ndjson_with(
        &self,
        path: &str,
        body: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        self.post(path, "application/x-ndjson", body.as_bytes(), headers)
    }

    /// `POST path` with `body` of `content_type`.
    fn post(
        &self,
        path: &str,
        content_type: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let r = self.send("POST", path, Some(content_type), headers, Some(body));
        (r.status, r.body)
    }

    // -- API helpers that assert success --------------------------------

    /// `POST /v1/topics`; asserts `201` and returns the description.
    pub fn create_topic(&self, spec: &Value) -> Value {
        let (status, body) = self.post_json("/v1/topics", spec);
        assert_eq!(status, 201, "creating topic {spec}: {body}");
        body
    }

    /// Produces `{"records": records}` as JSON; asserts `200` and
    /// `duplicate: false`; returns where each record landed.
    pub fn produce(&self, topic: &str, records: &Value) -> Vec<Produced> {
        let (status, body) = self.post_json(
            &format!("/v1/topics/{topic}/records"),
            &json!({ "records": records }),
        );
        assert_eq!(status, 200, "producing to {topic}: {body}");
        assert_eq!(body["duplicate"], json!(false), "{body}");
        produced_of(&body)
    }

    /// `GET /v1/topics/{topic}/partitions/{partition}/records?{query}`;
    /// asserts `200`.
    pub fn read(&self, topic: &str, partition: u32, query: &str) -> Value {
        let path = format!("/v1/topics/{topic}/partitions/{partition}/records?{query}");
        let (status, body) = self.get(&path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// The values of every record of `partition` of `topic`, in offset
    /// order ([`Client::read_all`]).
    pub fn read_values(&self, topic: &str, partition: u32) -> Vec<Value> {
        self.read_all(topic, partition)
            .into_iter()
            .map(|r| r["value"].clone())
            .collect()
    }

    /// Every record of a partition from its start to its end when read
    /// (bounded number of pages).
    pub fn read_all(&self, topic: &str, partition: u32) -> Vec<Value> {
        let mut records = Vec::new();
        let first = self.read(topic, partition, "offset=earliest&max_records=10000");
        let mut page = first;
        for _ in 0..10_000 {
            let batch = page["records"].as_array().expect("records array").clone();
            let next = page["next_offset"].as_u64().expect("next_offset");
            let end = page["high_watermark"].as_u64().expect("high_watermark");
            let empty = batch.is_empty();
            records.extend(batch);
            if next >= end || empty {
                return records;
            }
            page = self.read(
                topic,
                partition,
                &format!("offset={next}&max_records=10000"),
            );
        }
        panic!("read_all {topic}/{partition}: more than 10000 pages");
    }

    /// `POST /v1/statements` with `text` as `application/sql`.
    pub fn sql(&self, text: &str) -> (u16, Value) {
        let r = self.send(
            "POST",
            "/v1/statements",
            Some("application/sql"),
            &[],
            Some(text.as_bytes()),
        );
        (r.status, r.body)
    }

    /// Runs SQL statements that must be refused: asserts `400` and returns
    /// the error's message.
    pub fn sql_refused(&self, text: &str) -> String {
        let (status, body) = self.sql(text);
        assert_eq!(status, 400, "{text}\n{body}");
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Runs SQL statements; asserts `200` and returns the `results` array.
    pub fn sql_ok(&self, text: &str) -> Vec<Value> {
        let (status, body) = self.sql(text);
        assert_eq!(status, 200, "{text}\n{body}");
        body["results"].as_array().expect("results").clone()
    }

    /// `GET /v1/views/{view}/rows?{query}`; asserts `200`.
    pub fn view_rows(&self, view: &str, query: &str) -> Value {
        let path = format!("/v1/views/{view}/rows?{query}");
        let (status, body) = self.get(&path);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    /// The rows of `view` (`query` as for [`Client::view_rows`]), each
    /// mapped by `each`, in the answer's order.
    pub fn view_rows_as<T>(
        &self,
        view: &str,
        query: &str,
        each: impl FnMut(&Value) -> T,
    ) -> Vec<T> {
        let body = self.view_rows(view, query);
        body["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("no rows in {body}"))
            .iter()
            .map(each)
            .collect()
    }

    /// `GET /v1/views/{view}`; asserts `200`.
    pub fn describe_view(&self, view: &str) -> Value {
        let (status, body) = self.get(&format!("/v1/views/{view}"));
        assert_eq!(status, 200, "{body}");
        body
    }

    /// Waits, at most `within`, until view `view`'s served version has
    /// committed `records` input records over all its partitions.
    pub fn wait_view_committed(&self, view: &str, records: u64, within: Duration) {
        eventually(&format!("{view} read {records} records"), within, || {
            let d = self.get(&format!("/v1/views/{view}")).1;
            let read: u64 = d["served_version"]["partitions"]
                .as_array()?
                .iter()
                .map(|p| p["committed"].as_u64().unwrap_or(0))
                .sum();
            (read == records).then_some(())
        });
    }

    /// `EXPLAIN view`'s operator names in order, and the whole result.
    pub fn explain_operators(&self, view: &str) -> (Vec<String>, Value) {
        let result = self.sql_ok(&format!("EXPLAIN {view}")).remove(0);
        let names = result["operators"]
            .as_array()
            .expect("EXPLAIN answers operators")
            .iter()
            .map(|o| o["operator"].as_str().unwrap_or_default().to_string())
            .collect();
        (names, result)
    }

    /// `GET /v1/topics/{topic}`; asserts `200`.
    pub fn describe(&self, topic: &str) -> Value {
        let (status, body) = self.get(&format!("/v1/topics/{topic}"));
        assert_eq!(status, 200, "describing {topic}: {body}");
        body
    }

    /// Asserts that `group` has committed the end of every partition of
    /// `topic` (lag 0), as `GET /v1/groups/{group}/offsets` shows it.
    pub fn assert_group_caught_up(&self, group: &str, topic: &str) {
        let ends = self.end_offsets(topic);
        let (status, body) = self.get(&format!("/v1/groups/{group}/offsets?topic={topic}"));
        assert_eq!(status, 200, "{body}");
        for p in body["topics"][0]["partitions"]
            .as_array()
            .expect("partitions")
        {
            let end = ends[p["partition"].as_u64().expect("partition number") as usize];
            assert_eq!(p["committed"].as_u64(), Some(end), "{body}");
            assert_eq!(p["lag"], serde_json::json!(0), "{body}");
        }
    }

    /// End offset of every partition, from `GET /v1/topics/{topic}`.
    pub fn end_offsets(&self, topic: &str) -> Vec<u64> {
        self.describe(topic)["partitions"]
            .as_array()
            .expect("partitions array")
            .iter()
            .map(|p| p["end_offset"].as_u64().expect("end_offset"))
            .collect()
    }
}

/// The `records` of a produce answer.
pub fn produced_of(body: &Value) -> Vec<Produced> {
    body["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records in produce answer {body}"))
        .iter()
        .map(|r| Produced {
            partition: r["partition"].as_u64().expect("partition") as u32,
            offset: r["offset"].as_u64().expect("offset"),
        })
        .collect()
}

/// The `after=` value of a view read that waits for `produced`:
/// `partition:offset` of the highest offset per partition written, joined
/// with commas, partitions in order.
pub fn after_param(produced: &[Produced]) -> String {
    let mut last: BTreeMap<u32, u64> = BTreeMap::new();
    for p in produced {
        let o = last.entry(p.partition).or_insert(p.offset);
        *o = (*o).max(p.offset);
    }
    last.iter()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A record of the `user_events` topic the view tests declare a stream
/// over: keyed by `user`, with timestamp and `event_time` both `at_ms`.
pub fn user_event(user: &str, kind: &str, amount: f64, at_ms: i64) -> Value {
    json!({"key": user, "timestamp": at_ms,
           "value": {"user_id": user, "event_type": kind, "amount": amount,
                     "event_time": at_ms}})
}

/// Polls `f` (every 20 ms) until it returns `Some`, for at most
/// `deadline`; for state the server exposes only by being asked.
pub fn eventually<T>(what: &str, deadline: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + deadline;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asserts the documented error shape: `status`, a JSON body that is
/// exactly `{"error": {"code": code, "message": <non-empty string>}}`.
pub fn assert_error(
    context: &str,
    status: u16,
    body: &Value,
    expected_status: u16,
    expected_code: &str,
) {
    assert_error_of(context, status, body, expected_status, &[expected_code]);
}

/// Like [`assert_error`], accepting any of `codes`.
pub fn assert_error_of(
    context: &str,
    status: u16,
    body: &Value,
    expected_status: u16,
    codes: &[&str],
) {
    assert_eq!(status, expected_status, "{context}: status (body {body})");
    let object = body
        .as_object()
        .unwrap_or_else(|| panic!("{context}: the body is not a JSON object: {body}"));
    assert_eq!(
        object.len(),
        1,
        "{context}: only `error` at the top: {body}"
    );
    let error = body["error"]
        .as_object()
        .unwrap_or_else(|| panic!("{context}: no `error` object: {body}"));
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{context}: no string `error.code`: {body}"));
    assert!(
        codes.contains(&code),
        "{context}: code {code:?}, expected one of {codes:?}: {body}"
    );
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{context}: no string `error.message`: {body}"));
    assert!(
        !message.trim().is_empty(),
        "{context}: empty message: {body}"
    );
}
