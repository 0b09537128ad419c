//! Kafka compatibility proven with a client nobody here wrote: kcat
//! (librdkafka), Debian's package, run as a process against the real
//! server's `--kafka-listen` port.
//!
//! - 100,000 keyed records with headers, a third each uncompressed, lz4
//!   and zstd, produced by kcat and consumed back by kcat: every record
//!   once, and the HTTP read API answers the same keys, values (JSON or
//!   not), headers and timestamps at the same partitions and offsets.
//! - Records produced over HTTP are consumed by kcat with the same keys,
//!   values, headers and timestamps.
//! - The brief's `purchase_stats` over a topic fed only by kcat equals the
//!   same view fed over HTTP (event time from the value, one partition, so
//!   nothing depends on who set the record timestamps or chose the
//!   partitions).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use kappa_tests::{brief, json, kcat_output, user_event, Client, Server, Value};

/// Runs kcat with `args`, feeding `input`; answers its stdout, asserting
/// success (stderr in the message otherwise).
fn run_kcat(args: &[&str], input: &[u8]) -> String {
    let out = kcat_output(args, input);
    assert!(
        out.status.success(),
        "kcat {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// One record as kcat printed it with [`FORMAT`].
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    partition: u32,
    offset: u64,
    key: String,
    value: String,
    timestamp: i64,
    headers: String,
}

/// A value as compared: JSON re-serialized (the HTTP client parses JSON
/// values, which orders object keys), anything else as is.
fn normalized(value: &str) -> String {
    serde_json::from_str::<Value>(value).map_or_else(|_| value.to_string(), |v| v.to_string())
}

/// Asserts two record lists are equal, naming the first difference (the
/// lists are too long to print whole).
fn assert_same(got: &[Seen], want: &[Seen]) {
    assert_eq!(got.len(), want.len(), "record counts differ");
    if let Some((g, w)) = got.iter().zip(want).find(|(g, w)| g != w) {
        panic!("first difference:\n got  {g:?}\n want {w:?}");
    }
}

/// kcat's consume format: fields separated by a byte that never occurs in
/// the data (0x1f), one record per line.
const FORMAT: &str = "%p\x1f%o\x1f%k\x1f%s\x1f%T\x1f%h\n";

fn consume_all(broker: &str, topic: &str) -> Vec<Seen> {
    let out = run_kcat(
        &[
            "-b",
            broker,
            "-C",
            "-t",
            topic,
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            FORMAT,
        ],
        b"",
    );
    let mut seen: Vec<Seen> = out
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\x1f').collect();
            assert_eq!(f.len(), 6, "{line:?}");
            Seen {
                partition: f[0].parse().unwrap(),
                offset: f[1].parse().unwrap(),
                key: f[2].to_string(),
                value: normalized(f[3]),
                timestamp: f[4].parse().unwrap(),
                headers: f[5].to_string(),
            }
        })
        .collect();
    seen.sort();
    seen
}

/// Every record of `topic` over HTTP, as kcat would print it: the value's
/// stored text (JSON as is, `value_encoding: text` as the text), headers
/// as `name=value` joined by commas.
fn http_records(client: &Client, topic: &str, partitions: u32) -> Vec<Seen> {
    let mut out = Vec::new();
    for p in 0..partitions {
        for r in client.read_all(topic, p) {
            let value = match r["value_encoding"].as_str() {
                Some("text") => r["value"].as_str().unwrap().to_string(),
                Some(other) => panic!("unexpected encoding {other}: {r}"),
                None => r["value"].to_string(),
            };
            let headers: Vec<String> = r["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
                .collect();
            out.push(Seen {
                partition: p,
                offset: r["offset"].as_u64().unwrap(),
                key: r["key"].as_str().unwrap_or("").to_string(),
                value,
                timestamp: r["timestamp"].as_i64().unwrap(),
                headers: headers.join(","),
            });
        }
    }
    out.sort();
    out
}

/// The lines kcat produces from (`key<TAB>value`), record `i` of `n`:
/// every other value is JSON.
fn kcat_lines(range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in range {
        if i.is_multiple_of(2) {
            writeln!(out, "key-{i}\t{{\"i\":{i},\"even\":true}}").unwrap();
        } else {
            writeln!(out, "key-{i}\tplain text {i}").unwrap();
        }
    }
    out
}

#[test]
fn kcat_produces_and_consumes_100000_keyed_records_with_headers_and_http_reads_the_same() {
    const N: usize = 100_000;
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    let broker = server.kafka_addr().to_string();
    client.create_topic(&json!({"name": "events", "partitions": 4}));
    let thirds = [
        (0..N / 3, None),
        (N / 3..2 * N / 3, Some("lz4")),
        (2 * N / 3..N, Some("zstd")),
    ];
    for (range, codec) in thirds {
        let mut args = vec![
            "-b",
            &broker,
            "-P",
            "-t",
            "events",
            "-K",
            "\t",
            "-H",
            "source=kcat",
            "-H",
            "batch=one",
        ];
        if let Some(codec) = codec {
            args.extend(["-z", codec]);
        }
        run_kcat(&args, &kcat_lines(range));
    }

    let consumed = consume_all(&broker, "events");
    assert_eq!(consumed.len(), N, "every record once");
    let keys: BTreeSet<&str> = consumed.iter().map(|s| s.key.as_str()).collect();
    assert_eq!(keys.len(), N, "no record twice");
    for seen in &consumed {
        let i: usize = seen.key.strip_prefix("key-").unwrap().parse().unwrap();
        let want = if i.is_multiple_of(2) {
            format!("{{\"i\":{i},\"even\":true}}")
        } else {
            format!("plain text {i}")
        };
        assert_eq!(seen.value, normalized(&want), "{seen:?}");
        assert_eq!(seen.headers, "source=kcat,batch=one", "{seen:?}");
    }
    // The HTTP API reads the very same records (headers come back sorted
    // by name there).
    let mut via_http = http_records(&client, "events", 4);
    for r in &mut via_http {
        assert_eq!(r.headers, "batch=one,source=kcat");
        r.headers = "source=kcat,batch=one".into();
    }
    assert_same(&via_http, &consumed);
}

#[test]
fn records_produced_over_http_are_consumed_by_kcat_identically() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    client.create_topic(&json!({"name": "orders", "partitions": 2}));
    let records: Vec<Value> = (0..200)
        .map(|i| {
            json!({"key": format!("user-{}", i % 7), "timestamp": 1_767_225_600_000i64 + i * 1000,
                   "value": {"order": i, "note": "ünïcode ✓"}, "headers": {"trace": format!("t{i}")}})
        })
        .collect();
    client.produce("orders", &Value::Array(records));
    let consumed = consume_all(&server.kafka_addr().to_string(), "orders");
    assert_eq!(consumed.len(), 200);
    assert_same(&consumed, &http_records(&client, "orders", 2));
}

/// The brief's stream, with event time taken from the value so that the
/// record timestamps (which kcat cannot set) do not matter.
fn user_events_by_event_time() -> String {
    brief::USER_EVENTS.replace(
        "VALUE_FORMAT='JSON')",
        "VALUE_FORMAT='JSON', TIMESTAMP='event_time')",
    )
}

/// Every row of `purchase_stats` once it reflects input offset `last`.
fn purchase_stats(client: &Client, last: u64) -> BTreeMap<(String, i64), Value> {
    let mut rows = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut query = format!("after=0:{last}&max_wait_ms=30000&limit=500");
        if let Some(c) = &cursor {
            query.push_str(&format!("&cursor={c}"));
        }
        let page = client.view_rows("purchase_stats", &query);
        for r in page["rows"].as_array().unwrap() {
            let key = (
                r["key"].as_str().unwrap().to_string(),
                r["window_start"].as_i64().unwrap(),
            );
            rows.insert(key, r["row"].clone());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return rows,
        }
    }
}

#[test]
fn purchase_stats_over_a_topic_fed_by_kcat_equals_the_view_fed_over_http() {
    // 1,500 events of 12 users over about 40 minutes, in event-time order.
    let mut rng = kappa_tests::Rng::new(17);
    let base = 1_767_225_600_000i64;
    let events: Vec<Value> = (0..1500i64)
        .map(|i| {
            let user = format!("u{}", rng.below(12));
            let kind = if rng.below(3) == 0 {
                "view"
            } else {
                "purchase"
            };
            let amount = (rng.below(100_000) as f64) / 100.0;
            user_event(&user, kind, amount, base + i * 1600)
        })
        .collect();
    let setup = |client: &Client| {
        client.create_topic(&json!({"name": "user_events", "partitions": 1}));
        client.sql_ok(&user_events_by_event_time());
        client.sql_ok(brief::PURCHASE_STATS);
    };

    let over_http = Server::start(&[]);
    let http = over_http.client();
    setup(&http);
    for chunk in events.chunks(500) {
        http.produce("user_events", &Value::Array(chunk.to_vec()));
    }

    let over_kafka = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let kafka = over_kafka.client();
    setup(&kafka);
    let mut lines = Vec::new();
    for e in &events {
        writeln!(lines, "{}\t{}", e["key"].as_str().unwrap(), e["value"]).unwrap();
    }
    run_kcat(
        &[
            "-b",
            &over_kafka.kafka_addr().to_string(),
            "-P",
            "-t",
            "user_events",
            "-K",
            "\t",
        ],
        &lines,
    );
    assert_eq!(kafka.end_offsets("user_events"), vec![1500]);

    let want = purchase_stats(&http, 1499);
    assert!(want.len() > 12, "windows of every user: {}", want.len());
    assert_eq!(purchase_stats(&kafka, 1499), want);
}
