//! Where events go: NDJSON lines to a writer (stdout or a file), or batched
//! `POST /v1/topics/{topic}/records` to a running server (docs/http-api.md).
//!
//! Produce requests carry an `Idempotency-Key` unique to this run and batch,
//! so a request retried after a transport error or a 503/429 is appended at
//! most once.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;
use serde_json::json;

use super::{Event, EventJson, TimeFormat};

/// Largest record timestamp the server accepts (year 9999).
pub const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;
/// Attempts of one produce request answered 503/429 or failing in transport.
const MAX_ATTEMPTS: u32 = 30;
/// Timeout of one HTTP request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// What one NDJSON line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFormat {
    /// The event's JSON value.
    Value,
    /// `{"key","value","timestamp"}`: a line `POST /v1/topics/{t}/records`
    /// accepts as `application/x-ndjson`.
    Envelope,
}

/// The produce record of an event: key = entity id, value = the event,
/// timestamp = event time (left out when the server would reject it).
#[derive(Debug, Serialize)]
pub struct RecordJson<'a> {
    /// The entity id.
    pub key: &'a str,
    /// The event's JSON value.
    pub value: EventJson<'a>,
    /// Event time, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
}

/// The produce record of `event`.
pub fn record_json(event: &Event, format: TimeFormat) -> RecordJson<'_> {
    RecordJson {
        key: &event.key,
        value: event.json(format),
        timestamp: (0..=MAX_TIMESTAMP_MS)
            .contains(&event.event_time_ms)
            .then_some(event.event_time_ms),
    }
}

/// Writes one event as one NDJSON line.
pub fn write_line(
    out: &mut dyn Write,
    event: &Event,
    time_format: TimeFormat,
    line: LineFormat,
) -> std::io::Result<()> {
    match line {
        LineFormat::Value => serde_json::to_writer(&mut *out, &event.json(time_format))?,
        LineFormat::Envelope => serde_json::to_writer(&mut *out, &record_json(event, time_format))?,
    }
    out.write_all(b"\n")
}

/// Sends events to a server's topic in batches.
#[derive(Debug)]
pub struct Producer {
    agent: ureq::Agent,
    /// `Bearer <token>` for a server with `auth = "tokens"`.
    authorization: Option<String>,
    base_url: String,
    topic: String,
    time_format: TimeFormat,
    batch_records: usize,
    /// The queued records, as the JSON array elements of the next body.
    pending: Vec<u8>,
    pending_records: usize,
    /// Distinguishes this run's idempotency keys from earlier runs'.
    run_id: i64,
    batches_sent: u64,
}

impl Producer {
    /// A producer to `base_url` (e.g. `http://127.0.0.1:8080`) and `topic`.
    pub fn new(
        base_url: &str,
        topic: &str,
        time_format: TimeFormat,
        batch_records: usize,
    ) -> anyhow::Result<Producer> {
        kappa_log::validate_topic_name(topic)?;
        if !base_url.starts_with("http://") {
            bail!("--produce {base_url:?}: give the server's URL, e.g. http://127.0.0.1:8080");
        }
        if batch_records == 0 {
            bail!("--batch must be at least 1");
        }
        Ok(Producer {
            agent: ureq::AgentBuilder::new().timeout(REQUEST_TIMEOUT).build(),
            authorization: None,
            base_url: base_url.trim_end_matches('/').to_owned(),
            topic: topic.to_owned(),
            time_format,
            batch_records,
            pending: Vec::new(),
            pending_records: 0,
            run_id: kappa_log::now_ms(),
            batches_sent: 0,
        })
    }

    /// Sends `Authorization: Bearer <token>` with every request.
    pub fn with_token(mut self, token: Option<&str>) -> Producer {
        self.authorization = token
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(|t| format!("Bearer {t}"));
        self
    }

    /// A request to `url` carrying the token, if any.
    fn request(&self, method: &str, url: &str) -> ureq::Request {
        let request = self.agent.request(method, url);
        match &self.authorization {
            Some(value) => request.set("Authorization", value),
            None => request,
        }
    }

    /// Creates the topic (`partitions`, else the server's default) unless it
    /// exists. Returns true if it was created.
    pub fn ensure_topic(&self, partitions: Option<u32>) -> anyhow::Result<bool> {
        let url = format!("{}/v1/topics/{}", self.base_url, self.topic);
        match self.request("GET", &url).call() {
            Ok(_) => return Ok(false),
            Err(ureq::Error::Status(404, _)) => {}
            Err(e) => return Err(describe(e)).with_context(|| format!("GET {url}")),
        }
        let mut body = json!({ "name": self.topic });
        if let Some(p) = partitions {
            body["partitions"] = json!(p);
        }
        let url = format!("{}/v1/topics", self.base_url);
        match self.request("POST", &url).send_json(body) {
            Ok(_) => Ok(true),
            Err(ureq::Error::Status(409, _)) => Ok(false),
            Err(e) => Err(describe(e)).with_context(|| format!("POST {url}")),
        }
    }

    /// Queues an event; sends a batch when `--batch` events are queued.
    pub fn send(&mut self, event: &Event) -> anyhow::Result<()> {
        let record = record_json(event, self.time_format);
        self.send_json(&record)
    }

    /// Queues one record (`{"key","value","timestamp"}` as the produce
    /// API takes it); sends a batch when `--batch` records are queued.
    pub fn send_json<T: Serialize>(&mut self, record: &T) -> anyhow::Result<()> {
        if self.pending_records > 0 {
            self.pending.push(b',');
        }
        serde_json::to_writer(&mut self.pending, record)?;
        self.pending_records += 1;
        if self.pending_records >= self.batch_records {
            self.flush()?;
        }
        Ok(())
    }

    /// Sends the queued events, if any, retrying on 503/429 and transport
    /// errors under the same idempotency key.
    pub fn flush(&mut self) -> anyhow::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let url = format!("{}/v1/topics/{}/records", self.base_url, self.topic);
        let key = format!("datagen-{}-{}", self.run_id, self.batches_sent);
        let mut body = Vec::with_capacity(self.pending.len() + 16);
        body.extend_from_slice(b"{\"records\":[");
        body.append(&mut self.pending);
        body.extend_from_slice(b"]}");
        self.pending_records = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = self
                .request("POST", &url)
                .set("Idempotency-Key", &key)
                .set("Content-Type", "application/json")
                .send_bytes(&body);
            let wait = match result {
                Ok(_) => break,
                Err(ureq::Error::Status(code @ (429 | 503), response)) => {
                    let secs = response
                        .header("Retry-After")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .unwrap_or(1);
                    if attempt >= MAX_ATTEMPTS {
                        bail!("POST {url}: still {code} after {attempt} attempts");
                    }
                    Duration::from_secs(secs.clamp(1, 30))
                }
                Err(ureq::Error::Transport(t)) if attempt < MAX_ATTEMPTS.min(5) => {
                    eprintln!("kappa-datagen: {t}; retrying");
                    Duration::from_millis(200 << attempt)
                }
                Err(e) => return Err(describe(e)).with_context(|| format!("POST {url}")),
            };
            std::thread::sleep(wait);
        }
        self.batches_sent += 1;
        Ok(())
    }

    /// Batches sent so far.
    pub fn batches_sent(&self) -> u64 {
        self.batches_sent
    }
}

/// A ureq error with the server's JSON error body, if it sent one.
fn describe(e: ureq::Error) -> anyhow::Error {
    match e {
        ureq::Error::Status(code, response) => {
            let body = response.into_string().unwrap_or_default();
            anyhow::anyhow!("HTTP {code}: {}", body.trim())
        }
        ureq::Error::Transport(t) => anyhow::anyhow!("{t}"),
    }
}
