//! `SELECT DISTINCT` (issue 38): a table of the distinct values of its
//! items, one row per value, keyed by them — equal to the distinct set
//! computed here, also for values seen again after a restart.
//!
//! Synchronization: the view is polled (bounded) until it holds the
//! expected rows; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeSet;
use std::time::Duration;

use kappa_tests::brief::USER_EVENTS;
use kappa_tests::{eventually, json, Client, Server, Value};

const KINDS: &str = "CREATE TABLE kinds AS
SELECT DISTINCT user_id, UPPER(event_type) AS kind FROM user_events WHERE amount > 1;";

fn produce(client: &Client, from: u64, to: u64) {
    let records: Vec<Value> = (from..to)
        .map(|i| {
            let kind = ["view", "cart", "purchase"][(i % 3) as usize];
            json!({"key": format!("u{}", i % 4), "value": {"user_id": format!("u{}", i % 4),
                   "event_type": kind,
                   "amount": i % 5, "event_time": 1_767_225_600_000i64 + i as i64}})
        })
        .collect();
    client.produce("user_events", &json!(records));
}

/// The distinct (user, kind) of events `0..to` with an amount over 1.
fn expected(to: u64) -> BTreeSet<(String, String)> {
    (0..to)
        .filter(|i| i % 5 > 1)
        .map(|i| {
            (
                format!("u{}", i % 4),
                ["VIEW", "CART", "PURCHASE"][(i % 3) as usize].to_string(),
            )
        })
        .collect()
}

fn rows(client: &Client) -> Vec<(String, String)> {
    client.view_rows("kinds", "limit=1000")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["row"]["user_id"].as_str().unwrap().to_string(),
                r["row"]["kind"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn wait_for(client: &Client, want: &BTreeSet<(String, String)>) {
    eventually(
        "kinds holds the distinct values",
        Duration::from_secs(60),
        || {
            let got = rows(client);
            // Each value once: as many rows as distinct values.
            (got.len() == want.len() && got.iter().cloned().collect::<BTreeSet<_>>() == *want)
                .then_some(())
        },
    );
}

#[test]
fn select_distinct_keeps_one_row_per_distinct_value() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(KINDS);
    produce(&client, 0, 30);
    wait_for(&client, &expected(30));
    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    produce(&client, 30, 90);
    wait_for(&client, &expected(90));
}
