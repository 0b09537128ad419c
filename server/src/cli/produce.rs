//! `kappa produce`: append NDJSON records from stdin or a file.
//!
//! Lines are either records or values, the same for the whole input:
//! records are objects as in the API (`{"key", "value", "timestamp",
//! "headers", "partition"}`, `value` required); a value is any JSON, sent
//! as `{"value": <line>}`. `--raw` says values; otherwise the first
//! non-blank line decides ([`Lines::of_first`]): an object with none of the
//! record fields (what `kappa-datagen` writes) means values, anything else
//! records. Lines are checked before sending so that a bad one is reported
//! with its line number. Records go out in batches as
//! `application/x-ndjson` requests.

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use super::http::{self, Client};

/// Largest record timestamp the API accepts (9999-12-31T23:59:59.999Z).
const MAX_TIMESTAMP: u64 = 253_402_300_799_999;

/// Arguments of `kappa produce`.
#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    /// Topic to append to.
    pub topic: String,
    /// Read records from this file instead of stdin.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Records per request.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch: u32,
    /// Send each batch with Idempotency-Key `<prefix>-<batch number>` (from 1),
    /// so that rerunning the same input appends nothing twice.
    #[arg(long)]
    pub idempotency_prefix: Option<String>,
    /// Each line is a record's value (any JSON), not a record object.
    /// Without --raw the first non-blank line decides for the whole input:
    /// a JSON object with none of the record fields `value`, `key`,
    /// `headers`, `partition`, `timestamp` makes every line a value;
    /// anything else makes every line a record `{"key":..,"value":..}`.
    #[arg(long)]
    pub raw: bool,
}

/// The fields of a record object (`POST /v1/topics/{topic}/records`).
pub const RECORD_FIELDS: [&str; 5] = ["value", "key", "headers", "partition", "timestamp"];

/// What the lines of an input are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lines {
    /// Record objects, `{"key":..,"value":..}`.
    Records,
    /// Values, each sent as `{"value": <line>}`.
    Values,
}

impl Lines {
    /// The kind of an input whose first non-blank line is `first`: values
    /// if it is a JSON object without any of [`RECORD_FIELDS`], else
    /// records (a line that is not JSON is then reported as a bad record).
    pub fn of_first(first: &str) -> Lines {
        match serde_json::from_str::<Value>(first) {
            Ok(Value::Object(o)) if RECORD_FIELDS.iter().all(|f| !o.contains_key(*f)) => {
                Lines::Values
            }
            _ => Lines::Records,
        }
    }
}

/// What the errors of a bad record add: the other way of producing.
const RECORD_HINT: &str = "lines are records {\"key\":..,\"value\":..} (the first line \
    decides); to send each line as the value, use --raw";

/// What a produce run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Records acknowledged by the server.
    pub records: u64,
    /// Requests sent.
    pub batches: u64,
    /// Batches the server answered as duplicates of an earlier request.
    pub duplicates: u64,
}

impl Summary {
    /// A one-line report including the elapsed time and rate.
    pub fn report(&self, elapsed: Duration) -> String {
        let secs = elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            self.records as f64 / secs
        } else {
            0.0
        };
        let mut line = format!(
            "produced {} records in {} batches in {secs:.2}s ({rate:.0} records/s)",
            self.records, self.batches
        );
        if self.duplicates > 0 {
            line.push_str(&format!(
                "; {} batches were duplicates and appended nothing",
                self.duplicates
            ));
        }
        line
    }
}

/// Runs `kappa produce`, printing the summary to `out`.
pub fn run(client: &Client, args: ProduceArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let (reader, progress): (Box<dyn BufRead>, ProgressBar) = match &args.file {
        Some(path) => {
            let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            (Box::new(BufReader::new(file)), bytes_bar(len))
        }
        None => (Box::new(io::stdin().lock()), stdin_spinner()),
    };
    let mut producer = Producer {
        client,
        path: format!("{}/records", super::topics::topic_path(&args.topic)),
        prefix: args.idempotency_prefix.as_deref(),
        lines: args.raw.then_some(Lines::Values),
        progress: &progress,
        summary: Summary {
            records: 0,
            batches: 0,
            duplicates: 0,
        },
    };
    let started = Instant::now();
    let result = producer.produce(reader, args.batch as usize);
    progress.finish_and_clear();
    let summary = producer.summary;
    if let Err(error) = result {
        if summary.batches > 0 {
            eprintln!("stopped: {}", summary.report(started.elapsed()));
        }
        return Err(error);
    }
    writeln!(out, "{}", summary.report(started.elapsed()))?;
    Ok(())
}

fn bytes_bar(len: u64) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "{bytes}/{total_bytes} [{wide_bar}] {binary_bytes_per_sec} eta {eta}",
    )
    .expect("valid template")
    .progress_chars("=> ");
    ProgressBar::new(len).with_style(style)
}

fn stdin_spinner() -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner().with_style(
        ProgressStyle::with_template("{spinner} {bytes} read, {msg}").expect("valid template"),
    );
    spinner.enable_steady_tick(Duration::from_millis(120));
    spinner
}

/// Reads, checks and sends records in batches.
struct Producer<'a> {
    client: &'a Client,
    path: String,
    prefix: Option<&'a str>,
    /// What the lines are: given (`--raw`) or decided by the first line.
    lines: Option<Lines>,
    progress: &'a ProgressBar,
    summary: Summary,
}

impl Producer<'_> {
    /// Sends every record of `reader` in batches of `batch` records.
    fn produce(&mut self, mut reader: impl BufRead, batch: usize) -> anyhow::Result<()> {
        let mut body = String::new();
        let mut pending = 0;
        let mut line = Vec::new();
        let mut number = 0;
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .with_context(|| format!("reading line {}", number + 1))?;
            if n == 0 {
                break;
            }
            number += 1;
            self.progress.inc(n as u64);
            let text = std::str::from_utf8(&line)
                .map_err(|_| anyhow::anyhow!("line {number}: not valid UTF-8"))?
                .trim();
            if text.is_empty() {
                continue;
            }
            match *self.lines.get_or_insert_with(|| Lines::of_first(text)) {
                Lines::Records => {
                    check_record(text).map_err(|e| anyhow::anyhow!("line {number}: {e}"))?;
                    body.push_str(text);
                }
                Lines::Values => {
                    serde_json::from_str::<serde::de::IgnoredAny>(text)
                        .map_err(|e| anyhow::anyhow!("line {number}: not valid JSON: {e}"))?;
                    body.push_str("{\"value\":");
                    body.push_str(text);
                    body.push('}');
                }
            }
            body.push('\n');
            pending += 1;
            if pending == batch {
                self.send(&body, pending)?;
                body.clear();
                pending = 0;
            }
        }
        if pending > 0 {
            self.send(&body, pending)?;
        }
        Ok(())
    }

    /// Sends one batch of `count` records.
    fn send(&mut self, body: &str, count: usize) -> anyhow::Result<()> {
        let number = self.summary.batches + 1;
        let key = self
            .prefix
            .map(|p| idempotency_key(p, number))
            .transpose()?;
        let headers: Vec<(&str, &str)> = key
            .as_deref()
            .map(|k| ("Idempotency-Key", k))
            .into_iter()
            .collect();
        let answer = self
            .client
            .post(&self.path, "application/x-ndjson", body, &headers)?;
        let answer: kappa_wire::ProduceResponse = http::parse(&self.path, &answer)?;
        if answer.records.len() != count {
            bail!(
                "batch {number}: sent {count} records but the server acknowledged {}",
                answer.records.len()
            );
        }
        self.summary.batches = number;
        self.summary.records += count as u64;
        self.summary.duplicates += u64::from(answer.duplicate);
        self.progress
            .set_message(format!("{} records sent", self.summary.records));
        Ok(())
    }
}

/// The Idempotency-Key of batch `number` (1..=255 bytes).
pub fn idempotency_key(prefix: &str, number: u64) -> anyhow::Result<String> {
    let key = format!("{prefix}-{number}");
    if key.len() > 255 {
        bail!("--idempotency-prefix is too long: keys must be at most 255 bytes");
    }
    if key.chars().any(|c| c.is_control()) {
        bail!("--idempotency-prefix must not contain control characters");
    }
    Ok(key)
}

/// Checks that `line` is a record object as the API takes it.
pub fn check_record(line: &str) -> Result<(), String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not valid JSON: {e}"))?;
    let Value::Object(record) = value else {
        return Err(format!("expected a record object: {RECORD_HINT}"));
    };
    if !record.contains_key("value") {
        return Err(format!("the record has no \"value\": {RECORD_HINT}"));
    }
    for (field, value) in &record {
        let absent = value.is_null();
        let ok = match field.as_str() {
            "value" => true,
            "key" => absent || value.is_string(),
            "timestamp" => absent || value.as_u64().is_some_and(|t| t <= MAX_TIMESTAMP),
            "partition" => absent || value.as_u64().is_some_and(|p| p <= u64::from(u32::MAX)),
            "headers" => {
                absent
                    || value
                        .as_object()
                        .is_some_and(|h| h.values().all(Value::is_string))
            }
            _ => return Err(format!("unknown field {field:?}: {RECORD_HINT}")),
        };
        if !ok {
            return Err(format!("field {field:?} must be {}", expected(field)));
        }
    }
    Ok(())
}

fn expected(field: &str) -> &'static str {
    match field {
        "key" => "a string or null",
        "timestamp" => "an integer of milliseconds in 0..=253402300799999",
        "partition" => "a non-negative integer",
        _ => "an object of strings to strings",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    #[test]
    fn accepts_record_objects() {
        assert_eq!(check_record(r#"{"value": 1}"#), Ok(()));
        let full = r#"{"key": "k", "value": {"a": [1]}, "timestamp": 1767225600000,
                       "headers": {"source": "web"}, "partition": 2}"#;
        assert_eq!(check_record(full), Ok(()));
        assert_eq!(check_record(r#"{"key": null, "value": null}"#), Ok(()));
    }

    #[test]
    fn rejects_what_the_api_would() {
        let cases = [
            ("[1]", "expected a record object"),
            ("\"v\"", "expected a record object"),
            ("{\"value\": 1", "not valid JSON"),
            (r#"{"key": "k"}"#, "no \"value\""),
            (
                r#"{"value": 1, "key": 5}"#,
                "field \"key\" must be a string or null",
            ),
            (r#"{"value": 1, "timestamp": -1}"#, "field \"timestamp\""),
            (
                r#"{"value": 1, "timestamp": 253402300800000}"#,
                "field \"timestamp\"",
            ),
            (r#"{"value": 1, "partition": 1.5}"#, "field \"partition\""),
            (r#"{"value": 1, "headers": {"a": 1}}"#, "field \"headers\""),
            (r#"{"value": 1, "vaule": 1}"#, "unknown field \"vaule\""),
            (r#"{"value": 1, "vaule": null}"#, "unknown field \"vaule\""),
        ];
        for (line, message) in cases {
            let error = check_record(line).unwrap_err();
            assert!(error.contains(message), "{line}: {error}");
        }
    }

    #[test]
    fn the_first_line_decides_records_or_values() {
        assert_eq!(Lines::of_first(r#"{"user": "u1", "n": 1}"#), Lines::Values);
        assert_eq!(Lines::of_first("{}"), Lines::Values);
        for first in [
            r#"{"value": 1}"#,
            r#"{"key": "k"}"#,
            r#"{"user": "u1", "timestamp": 5}"#,
            r#"{"headers": {}}"#,
            r#"{"partition": 0, "x": 1}"#,
            "42",
            "[1]",
            "not json",
        ] {
            assert_eq!(Lines::of_first(first), Lines::Records, "{first}");
        }
    }

    #[test]
    fn bad_records_point_to_raw() {
        for line in ["42", r#"{"key": "k"}"#, r#"{"value": 1, "user": "u"}"#] {
            let error = check_record(line).unwrap_err();
            assert!(
                error.contains("--raw") && error.contains(r#"{"key":..,"value":..}"#),
                "{error}"
            );
        }
    }

    #[test]
    fn values_are_wrapped_as_records() {
        let server = FakeServer::start(vec![Canned::json(
            200,
            r#"{"topic":"t","records":[{"partition":0,"offset":0},{"partition":0,"offset":1}],"duplicate":false}"#,
        )]);
        let client = Client::new(&server.url);
        let hidden = ProgressBar::hidden();
        let mut values = producer(&client, None, &hidden);
        let input = "{\"user\": \"u1\"}\n\n{\"value\": 2, \"user\": \"u2\"}\n";
        values.produce(input.as_bytes(), 10).unwrap();
        assert_eq!(values.lines, Some(Lines::Values));
        assert_eq!(
            server.requests()[0].body,
            "{\"value\":{\"user\": \"u1\"}}\n{\"value\":{\"value\": 2, \"user\": \"u2\"}}\n"
        );
        let mut raw = producer(&client, None, &hidden);
        raw.lines = Some(Lines::Values);
        let error = raw.produce("1\n{".as_bytes(), 10).unwrap_err();
        assert!(
            error.to_string().starts_with("line 2: not valid JSON"),
            "{error}"
        );
    }

    #[test]
    fn idempotency_keys_are_bounded() {
        assert_eq!(idempotency_key("load", 3).unwrap(), "load-3");
        assert!(idempotency_key(&"x".repeat(254), 1).is_err());
        assert!(idempotency_key("a\nb", 1).is_err());
    }

    fn producer<'a>(
        client: &'a Client,
        prefix: Option<&'a str>,
        progress: &'a ProgressBar,
    ) -> Producer<'a> {
        Producer {
            client,
            path: "/v1/topics/t/records".into(),
            prefix,
            lines: None,
            progress,
            summary: Summary {
                records: 0,
                batches: 0,
                duplicates: 0,
            },
        }
    }

    #[test]
    fn bad_line_is_named_and_nothing_after_it_is_sent() {
        let hidden = ProgressBar::hidden();
        let client = Client::new("http://127.0.0.1:1");
        let input = "{\"value\": 1}\n\n{\"value\": 2}\nnot json\n";
        let error = producer(&client, None, &hidden)
            .produce(input.as_bytes(), 10)
            .unwrap_err();
        assert!(
            error.to_string().starts_with("line 4: not valid JSON"),
            "{error}"
        );
    }

    #[test]
    fn sends_batches_with_idempotency_keys() {
        let ok = |n: usize, duplicate: bool| {
            let records = vec![r#"{"partition":0,"offset":0}"#; n].join(",");
            Canned::json(
                200,
                &format!(r#"{{"topic":"t","records":[{records}],"duplicate":{duplicate}}}"#),
            )
        };
        let server = FakeServer::start(vec![ok(2, true), ok(1, false)]);
        let client = Client::new(&server.url);
        let hidden = ProgressBar::hidden();
        let mut producer = producer(&client, Some("run7"), &hidden);
        let input = "{\"value\": 1}\r\n{\"key\": \"a\", \"value\": \"x\"}\n\n{\"value\": 3}";
        producer.produce(input.as_bytes(), 2).unwrap();
        assert_eq!(
            producer.summary,
            Summary {
                records: 3,
                batches: 2,
                duplicates: 1
            }
        );
        let requests = server.requests();
        assert_eq!(requests[0].target, "/v1/topics/t/records");
        assert_eq!(
            requests[0].header("content-type"),
            Some("application/x-ndjson")
        );
        assert_eq!(requests[0].header("idempotency-key"), Some("run7-1"));
        assert_eq!(
            requests[0].body,
            "{\"value\": 1}\n{\"key\": \"a\", \"value\": \"x\"}\n"
        );
        assert_eq!(requests[1].header("idempotency-key"), Some("run7-2"));
        assert_eq!(requests[1].body, "{\"value\": 3}\n");
    }

    #[test]
    fn run_reads_a_file_and_prints_a_summary() {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        writeln!(file, "{{\"value\": 1}}").unwrap();
        let server = FakeServer::start(vec![Canned::json(
            200,
            r#"{"topic":"t","records":[{"partition":0,"offset":9}],"duplicate":false}"#,
        )]);
        let args = ProduceArgs {
            topic: "t".into(),
            file: Some(file.path().to_path_buf()),
            batch: 1000,
            idempotency_prefix: None,
            raw: false,
        };
        let mut out = Vec::new();
        run(&Client::new(&server.url), args, &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with("produced 1 records in 1 batches in "),
            "{out}"
        );
        assert_eq!(server.requests()[0].header("idempotency-key"), None);
    }

    #[test]
    fn summary_report() {
        let summary = Summary {
            records: 3000,
            batches: 3,
            duplicates: 1,
        };
        assert_eq!(
            summary.report(Duration::from_millis(1500)),
            "produced 3000 records in 3 batches in 1.50s (2000 records/s); \
             1 batches were duplicates and appended nothing"
        );
    }
}
