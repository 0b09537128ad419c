//! The corpus machinery: one [`Case`] per bad request with the answer the
//! docs give for it, the [`Corpus`] builders, and the check of an answer
//! against its case over raw TCP; the codes the cases name.

use std::panic::{catch_unwind, AssertUnwindSafe};

use kappa_tests::{json, raw_request, RawResponse, Server, Value};

use super::*;

/// Codes of the answers, as the corpus names them.
pub(crate) const BAD_REQUEST: &[&str] = &["bad_request"];
pub(crate) const TOO_LARGE: &[&str] = &["too_large"];
pub(crate) const INVALID_TOPIC_NAME: &[&str] = &["invalid_topic_name"];
pub(crate) const UNKNOWN_TOPIC: &[&str] = &["unknown_topic"];
pub(crate) const UNKNOWN_PARTITION: &[&str] = &["unknown_partition"];
pub(crate) const INVALID_OFFSET: &[&str] = &["invalid_offset"];
pub(crate) const OFFSET_OUT_OF_RANGE: &[&str] = &["offset_out_of_range"];
pub(crate) const INVALID_TIMESTAMP: &[&str] = &["invalid_timestamp"];
pub(crate) const INVALID_GROUP: &[&str] = &["invalid_group"];
pub(crate) const NOT_FOUND: &[&str] = &["not_found"];
pub(crate) const METHOD_NOT_ALLOWED: &[&str] = &["method_not_allowed"];
pub(crate) const INVALID_CONFIG: &[&str] = &["invalid_config"];
/// The docs name no code for a path segment that is not UTF-8 once
/// percent-decoded; any 400 code of the segment's kind is accepted, as long
/// as the body is the JSON error shape.
pub(crate) const NOT_UTF8: &[&str] = &["bad_request", "invalid_topic_name", "invalid_group"];
/// The docs list `invalid_config` for create and `bad_request` for wrong
/// types without saying which one a config value of the wrong type or an
/// unknown field is: either is accepted.
pub(crate) const CONFIG_OR_TYPE: &[&str] = &["invalid_config", "bad_request"];

/// A good produce body of one record.
pub(crate) const ONE: &str = r#"{"records":[{"value":1}]}"#;

/// A read of partition 0 of the good topic with `query`.
pub(crate) fn read(query: &str) -> String {
    format!("/v1/topics/{TOPIC}/partitions/0/records?{query}")
}

/// A group read of the good topic with `query`.
pub(crate) fn group_read(group: &str, query: &str) -> String {
    format!("/v1/groups/{group}/topics/{TOPIC}/records?{query}")
}

/// A valid commit body (offset 0 of partition 0).
pub(crate) fn commit_body() -> String {
    json!({"topic": TOPIC, "offsets": [{"partition": 0, "offset": 0}]}).to_string()
}

/// A valid reset body (to earliest).
pub(crate) fn reset_body() -> String {
    json!({"topic": TOPIC, "to": "earliest"}).to_string()
}

/// One bad request and the answer docs/http-api.md documents for it.
pub(crate) struct Case {
    pub(crate) what: String,
    pub(crate) method: &'static str,
    pub(crate) target: String,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: Vec<u8>,
    pub(crate) status: u16,
    /// Accepted codes: one, or several where the docs are ambiguous.
    pub(crate) codes: &'static [&'static str],
    /// Text the error message must contain (a line number, a limit, a name).
    pub(crate) message_has: Vec<String>,
}

impl Case {
    pub(crate) fn header(&mut self, name: &'static str, value: impl Into<String>) -> &mut Case {
        self.headers.push((name, value.into()));
        self
    }

    /// Replaces the `Content-Type` header.
    pub(crate) fn content_type(&mut self, value: &str) -> &mut Case {
        self.headers.retain(|(name, _)| *name != "Content-Type");
        self.header("Content-Type", value)
    }

    pub(crate) fn message_has(&mut self, part: impl Into<String>) -> &mut Case {
        self.message_has.push(part.into());
        self
    }
}

#[derive(Default)]
pub(crate) struct Corpus(pub(crate) Vec<Case>);

impl Corpus {
    pub(crate) fn add(
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

    pub(crate) fn get(
        &mut self,
        what: impl Into<String>,
        target: impl Into<String>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.add(what, "GET", target, Vec::new(), status, codes)
    }

    pub(crate) fn post_json(
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

    /// A JSON produce to `topic` (a raw path segment).
    pub(crate) fn produce(
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

    /// A produce to `topic` (a raw path segment) as NDJSON.
    pub(crate) fn produce_ndjson(
        &mut self,
        what: impl Into<String>,
        topic: &str,
        body: impl Into<Vec<u8>>,
        status: u16,
        codes: &'static [&'static str],
    ) -> &mut Case {
        self.produce(what, topic, body, status, codes)
            .content_type(NDJSON)
    }
}

/// `{"records": records}` as JSON text.
pub(crate) fn records_body(records: &Value) -> String {
    json!({ "records": records }).to_string()
}

/// The first `n` characters of `text`, marked when cut.
pub(crate) fn shorten(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(n).collect::<String>())
    }
}

/// The `(code, message)` of a body of the documented error shape.
pub(crate) fn error_shape(body: &Value) -> Result<(&str, &str), String> {
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
pub(crate) fn check(case: &Case, response: &RawResponse) -> Result<(), String> {
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
pub(crate) fn run(server: &Server, case: &Case) -> Result<(), String> {
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
