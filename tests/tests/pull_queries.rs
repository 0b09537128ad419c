//! Pull queries beyond one key (issue 39): key lists, prefixes and ranges
//! read in key order, conditions on value columns, `ORDER BY` the key or
//! the window (descending too), `OFFSET`, and aggregates over a view's
//! rows — each answer equal to a naive computation over every row the
//! rows API answers, and `EXPLAIN` saying which read it makes. Over
//! PostgreSQL too: typed aggregates, and `kappa_offsets()` equal to the
//! answer's `as_of`.
//!
//! Synchronization: the view is polled over HTTP (bounded) until it holds
//! every event; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{json, Server, Value};

const BASE: i64 = 1_767_225_600_000;

/// 20 users `u00`..`u19`, user `i` buying `i % 4 + 1` times in the first
/// 5-minute window and once in the second if `i` is even: 30 rows (the
/// brief's stream takes the record timestamp as event time).
fn events() -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..20_i64 {
        let user = format!("u{i:02}");
        for n in 0..(i % 4 + 1) {
            out.push(json!({"key": user, "timestamp": BASE + n * 1000,
                "value": {"user_id": user, "event_type": "purchase", "amount": 10 + i}}));
        }
        if i % 2 == 0 {
            out.push(json!({"key": user, "timestamp": BASE + 300_000 + i,
                "value": {"user_id": user, "event_type": "purchase", "amount": 1}}));
        }
    }
    out
}

fn serving() -> (Server, Vec<Value>) {
    let server = Server::start(&["--pg-listen", "127.0.0.1:0"]);
    server.client().sql_ok(USER_EVENTS);
    server.client().sql_ok(PURCHASE_STATS);
    let events = events();
    server.client().produce("user_events", &json!(events));
    let n = events.len() as u64;
    server
        .client()
        .wait_view_committed("purchase_stats", n, Duration::from_secs(60));
    let all = server.client().view_rows("purchase_stats", "limit=1000")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["row"].clone())
        .collect();
    (server, all)
}

/// The rows a pull query answers over HTTP.
fn pulled(server: &Server, sql: &str) -> Vec<Value> {
    let results = server.client().sql_ok(sql);
    results[0]["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{sql}: {results:?}"))
        .iter()
        .map(|r| r["row"].clone())
        .collect()
}

/// The first line of `EXPLAIN`'s read operator for `sql`.
fn read_of(server: &Server, sql: &str) -> String {
    let results = server.client().sql_ok(&format!("EXPLAIN {sql}"));
    let ops = results[0]["operators"].as_array().unwrap();
    assert_eq!(ops[0]["operator"], "read", "{ops:?}");
    ops[0]["detail"].as_str().unwrap().to_string()
}

/// Which rows of the view a case selects.
type Keep = Box<dyn Fn(&Value) -> bool>;

fn user(r: &Value) -> &str {
    r["user_id"].as_str().unwrap()
}

fn count(r: &Value) -> i64 {
    r["purchase_count"].as_i64().unwrap()
}

#[test]
fn key_lists_prefixes_ranges_and_value_conditions_answer_what_a_scan_would() {
    let (server, all) = serving();
    assert_eq!(all.len(), 30, "{all:#?}");
    let naive = |keep: &dyn Fn(&Value) -> bool| -> Vec<Value> {
        all.iter().filter(|r| keep(r)).cloned().collect()
    };
    let cases: Vec<(&str, Keep, &str)> = vec![
        (
            "SELECT * FROM purchase_stats WHERE user_id IN ('u03', 'u01', 'nope')",
            Box::new(|r| ["u01", "u03"].contains(&user(r))),
            "key lookups (3 keys)",
        ),
        (
            "SELECT * FROM purchase_stats WHERE user_id LIKE 'u1%'",
            Box::new(|r| user(r).starts_with("u1")),
            "key prefix range",
        ),
        (
            "SELECT * FROM purchase_stats WHERE user_id >= 'u05' AND user_id < 'u08'",
            Box::new(|r| ("u05".."u08").contains(&user(r))),
            "key range",
        ),
        (
            "SELECT * FROM purchase_stats WHERE user_id BETWEEN 'u05' AND 'u08'",
            Box::new(|r| ("u05"..="u08").contains(&user(r))),
            "key range",
        ),
        (
            "SELECT * FROM purchase_stats WHERE purchase_count > 2",
            Box::new(|r| count(r) > 2),
            "full scan",
        ),
        (
            "SELECT * FROM purchase_stats WHERE user_id LIKE 'u1%' AND (purchase_count = 1 OR total_amount > 40)",
            Box::new(|r| {
                user(r).starts_with("u1")
                    && (count(r) == 1 || r["total_amount"].as_f64().unwrap() > 40.0)
            }),
            "key prefix range",
        ),
        (
            "SELECT * FROM purchase_stats WHERE user_id = 'u02' AND WINDOWSTART >= 1767225900000",
            Box::new(|r| user(r) == "u02" && r["window_start"].as_i64() == Some(BASE + 300_000)),
            "key lookup",
        ),
    ];
    for (sql, keep, read) in &cases {
        let want = naive(keep.as_ref());
        assert!(!want.is_empty(), "{sql}: the case selects nothing");
        assert_eq!(pulled(&server, sql), want, "{sql}");
        let explained = read_of(&server, sql);
        assert!(explained.starts_with(read), "{sql}: {explained}");
    }
    // The same answers over PostgreSQL (the first case).
    let out = kappa_tests::run_python(
        &format!(
            r#"
import json, psycopg
conn = psycopg.connect(host="127.0.0.1", port={port}, user="kappa", dbname="kappa",
                       sslmode="disable", autocommit=True)
rows = conn.execute("SELECT user_id FROM purchase_stats WHERE user_id IN (%s, %s)", ("u03", "u01")).fetchall()
print(json.dumps([r[0] for r in rows]))
"#,
            port = server.pg_addr().port()
        ),
        "psycopg reading a key list",
    );
    let got: Value = serde_json::from_slice(&out).unwrap();
    let want: Vec<&str> = all
        .iter()
        .map(user)
        .filter(|u| ["u01", "u03"].contains(u))
        .collect();
    assert_eq!(got, json!(want));
}

#[test]
fn order_offset_and_aggregates_answer_what_a_scan_would() {
    let (server, all) = serving();
    // Descending key order (windows of a key descending too), an offset.
    let mut desc = all.clone();
    desc.reverse();
    let want: Vec<Value> = desc
        .iter()
        .filter(|r| user(r).starts_with("u1") && count(r) >= 2)
        .skip(1)
        .take(3)
        .cloned()
        .collect();
    let sql = "SELECT * FROM purchase_stats WHERE user_id LIKE 'u1%' AND purchase_count >= 2 \
               ORDER BY user_id DESC LIMIT 3 OFFSET 1";
    assert_eq!(pulled(&server, sql), want, "{sql}");
    let explained = server.client().sql_ok(&format!("EXPLAIN {sql}"))[0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(explained.contains("descending key order"), "{explained}");
    // Ascending with an offset.
    let want: Vec<Value> = all.iter().skip(25).cloned().collect();
    assert_eq!(
        pulled(
            &server,
            "SELECT * FROM purchase_stats ORDER BY user_id LIMIT 10 OFFSET 25"
        ),
        want
    );
    // One key's windows, latest first.
    let u04: Vec<Value> = all
        .iter()
        .filter(|r| user(r) == "u04")
        .rev()
        .cloned()
        .collect();
    assert_eq!(u04.len(), 2);
    assert_eq!(
        pulled(
            &server,
            "SELECT * FROM purchase_stats WHERE user_id = 'u04' ORDER BY WINDOWSTART DESC"
        ),
        u04
    );

    // Aggregates over the rows a condition selects, in one row.
    let u1: Vec<&Value> = all.iter().filter(|r| user(r).starts_with("u1")).collect();
    let sql = "SELECT COUNT(*), SUM(purchase_count) AS purchases, MAX(total_amount) AS most, \
               MIN(user_id) FROM purchase_stats WHERE user_id LIKE 'u1%'";
    let results = server.client().sql_ok(sql);
    assert_eq!(
        results[0]["columns"],
        json!(["count", "purchases", "most", "min"])
    );
    let row = &results[0]["rows"][0]["row"];
    assert_eq!(row["count"], json!(u1.len()));
    assert_eq!(
        row["purchases"],
        json!(u1.iter().map(|r| count(r)).sum::<i64>())
    );
    let most = u1
        .iter()
        .map(|r| r["total_amount"].as_f64().unwrap())
        .fold(f64::MIN, f64::max);
    assert_eq!(row["most"].as_f64(), Some(most));
    assert_eq!(row["min"], "u10");

    // What cannot be answered in key order is refused, clearly.
    let (status, body) = server
        .client()
        .sql("SELECT * FROM purchase_stats ORDER BY total_amount");
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].to_string().contains("answers in key order"),
        "{body}"
    );

    // Over PostgreSQL: the aggregates typed, and kappa_offsets() the
    // input offsets the last answer reflects (the rows API's as_of).
    let out = kappa_tests::run_python(
        &format!(
            r#"
import json, psycopg
conn = psycopg.connect(host="127.0.0.1", port={port}, user="kappa", dbname="kappa",
                       sslmode="disable", autocommit=True)
before = conn.execute("SELECT * FROM kappa_offsets()").fetchall()
counted = conn.execute({sql:?}).fetchone()
offsets = conn.execute("SELECT * FROM kappa_offsets()").fetchall()
print(json.dumps({{"before": before, "count": counted[0], "count_type": type(counted[0]).__name__,
                  "purchases": counted[1], "offsets": [[v, p, o] for (v, p, o) in offsets]}}))
"#,
            port = server.pg_addr().port(),
        ),
        "psycopg reading aggregates and kappa_offsets()",
    );
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(got["before"], json!([]), "{got}");
    assert_eq!(got["count"], json!(u1.len()), "{got}");
    assert_eq!(got["count_type"], "int", "{got}");
    let as_of: Vec<Value> = server.client().view_rows("purchase_stats", "limit=1")["as_of"]
        ["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| json!(["purchase_stats", p["partition"], p["offset"]]))
        .collect();
    assert_eq!(got["offsets"], json!(as_of), "{got}");
}
