//! Expressions over aggregates (`SUM(x) / COUNT(*)`, `MAX(x) - MIN(x)`,
//! a group column and a window bound in one expression) end to end: the
//! rows equal a computation over the produced events, DESCRIBE types the
//! computed columns, HAVING filters on one and on an aggregate not
//! selected, and the view's stored
//! definition reads back after a restart with the same rows.
//!
//! Synchronization: reads wait with `after=` (the server waits until the
//! view processed the produced offsets); nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;

use kappa_tests::brief::USER_EVENTS;
use kappa_tests::{after_param, json, user_event, Client, Server, Value};

/// 2026-01-01T00:00:00Z, a multiple of a minute.
const BASE: i64 = 1_767_225_600_000;

const SPREADS: &str = "CREATE TABLE spreads AS
SELECT user_id, WINDOWSTART AS window_start,
       SUM(amount) / COUNT(*) AS mean,
       COUNT(*) AS n,
       MAX(amount) - MIN(amount) AS spread,
       user_id || '@' || CAST(WINDOWSTART AS VARCHAR) AS label
FROM user_events
WINDOW TUMBLING (SIZE 1 MINUTE)
GROUP BY user_id
HAVING spread > 0 AND SUM(amount) > 20
EMIT CHANGES;";

/// (user, minute, amount) of each event.
const EVENTS: &[(&str, i64, f64)] = &[
    ("u1", 0, 10.0),
    ("u1", 0, 30.0),
    ("u1", 0, 50.0),
    ("u2", 0, 7.0),
    ("u2", 1, 4.0),
    ("u2", 1, 12.0),
    ("u3", 2, 5.0),
];

/// The rows `spreads` must hold: (user, window start) → (mean, n, spread),
/// groups whose spread is 0 or whose sum (an aggregate not selected) is at
/// most 20 left out by HAVING.
fn expected() -> BTreeMap<(String, i64), (f64, u64, f64)> {
    let mut groups: BTreeMap<(String, i64), Vec<f64>> = BTreeMap::new();
    for (user, minute, amount) in EVENTS {
        groups
            .entry((user.to_string(), BASE + minute * 60_000))
            .or_default()
            .push(*amount);
    }
    groups
        .into_iter()
        .filter_map(|(k, amounts)| {
            let max = amounts.iter().cloned().fold(f64::MIN, f64::max);
            let min = amounts.iter().cloned().fold(f64::MAX, f64::min);
            let mean = amounts.iter().sum::<f64>() / amounts.len() as f64;
            let sum: f64 = amounts.iter().sum();
            (max > min && sum > 20.0).then_some((k, (mean, amounts.len() as u64, max - min)))
        })
        .collect()
}

fn rows(client: &Client, query: &str) -> BTreeMap<(String, i64), (f64, u64, f64)> {
    let body = client.view_rows("spreads", query);
    body["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let row = &r["row"];
            let user = row["user_id"].as_str().unwrap().to_string();
            let start = row["window_start"].as_i64().unwrap();
            assert_eq!(
                row["label"],
                json!(format!("{user}@{start}")),
                "a group column and a window bound in one expression: {row}"
            );
            (
                (user, start),
                (
                    row["mean"].as_f64().unwrap(),
                    row["n"].as_u64().unwrap(),
                    row["spread"].as_f64().unwrap(),
                ),
            )
        })
        .collect()
}

#[test]
fn expressions_over_aggregates_compute_each_rows_columns() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(SPREADS);
    let records: Vec<Value> = EVENTS
        .iter()
        .map(|(user, minute, amount)| user_event(user, "purchase", *amount, BASE + minute * 60_000))
        .collect();
    let produced = client.produce("user_events", &json!(records));
    let after = format!("after={}", after_param(&produced));
    assert_eq!(rows(&client, &after), expected());

    let described = client.sql_ok("DESCRIBE spreads;");
    let columns = described[0]["columns"].as_array().unwrap();
    let type_of = |name: &str| {
        columns
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("DESCRIBE lists {name}: {columns:?}"))["sql_type"]
            .clone()
    };
    assert_eq!(type_of("mean"), json!({"type": "double"}));
    assert_eq!(type_of("n"), json!({"type": "big_int"}));
    assert_eq!(type_of("spread"), json!({"type": "double"}));
    assert_eq!(type_of("label"), json!({"type": "varchar"}));

    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    assert_eq!(rows(&client, &after), expected(), "after a restart");
}
