//! `PARTITION BY` re-keys a derived stream: each output record's key is the
//! expression's value (the input records are keyed by user), so every
//! record of one key lands in one partition of the output topic; a `NULL`
//! value gives a record without a key; the definition survives a restart.
//!
//! Synchronization: the output topic is long-polled until it holds the
//! expected records (bounded); nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kappa_tests::brief::USER_EVENTS;
use kappa_tests::{json, Client, Server, Value};

const BY_KIND: &str = "CREATE STREAM by_kind WITH (PARTITIONS=3) AS
SELECT user_id, amount FROM user_events PARTITION BY UPPER(event_type);";

/// 2026-01-01T00:00:00Z.
const BASE: i64 = 1_767_225_600_000;

/// Reads every record of `by_kind` until there are `want` (bounded).
fn output(client: &Client, want: usize) -> Vec<(u32, Value)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut records = Vec::new();
        for p in 0..3u32 {
            for r in client.read_all("by_kind", p) {
                records.push((p, r));
            }
        }
        if records.len() >= want {
            assert_eq!(records.len(), want, "{records:?}");
            return records;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {want} records",
            records.len()
        );
        client.read("by_kind", 0, "offset=0&max_wait_ms=200");
    }
}

fn produce(client: &Client, first: usize, count: usize) {
    let kinds = ["view", "cart", "purchase", "refund"];
    let records: Vec<Value> = (first..first + count)
        .map(|i| {
            let kind = if i % 10 == 9 {
                Value::Null
            } else {
                json!(kinds[i % 4])
            };
            json!({"key": format!("u{}", i % 7), "timestamp": BASE + i as i64,
                   "value": {"user_id": format!("u{}", i % 7), "event_type": kind,
                             "amount": i, "event_time": BASE + i as i64}})
        })
        .collect();
    client.produce("user_events", &json!(records));
}

/// Checks each record's key against its event and that a key stays in
/// one partition.
fn check(records: &[(u32, Value)]) {
    let mut partition_of: BTreeMap<String, u32> = BTreeMap::new();
    for (p, r) in records {
        let i = r["value"]["amount"].as_u64().unwrap() as usize;
        let want = if i % 10 == 9 {
            Value::Null
        } else {
            json!(["VIEW", "CART", "PURCHASE", "REFUND"][i % 4])
        };
        assert_eq!(r["key"], want, "record {i}: {r}");
        if let Some(k) = r["key"].as_str() {
            let first = *partition_of.entry(k.to_string()).or_insert(*p);
            assert_eq!(first, *p, "key {k} in partitions {first} and {p}");
        }
    }
    assert!(partition_of.len() == 4, "{partition_of:?}");
}

#[test]
fn partition_by_keys_each_output_record_by_the_expression() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(BY_KIND);
    produce(&client, 0, 40);
    check(&output(&client, 40));

    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    produce(&client, 40, 40);
    check(&output(&client, 80));
}
