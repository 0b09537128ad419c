//! Views hosted by the server, end to end: SQL through `POST
//! /v1/statements`, rows through `GET /v1/views/{view}/rows` (point, prefix,
//! a key's windows, pages, read-your-writes), blue/green replacement and
//! replay observed through `GET /v1/views/{view}`, and restarts during and
//! after a build.
//!
//! Synchronization: reads wait with `after=` (the server waits until the
//! view processed the produced offsets) or poll observable state with a
//! bounded deadline; nothing sleeps to wait for the server.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::Duration;

use kappa_tests::{
    after_param, assert_error, eventually, json, user_event, Client, Produced, Server, Value,
};

/// 2026-01-01T00:00:00Z, a multiple of five minutes.
const BASE: i64 = 1_767_225_600_000;
const WINDOW_MS: i64 = 300_000;
/// The SQL dialect's default watermark delay.
const WATERMARK_DELAY_MS: i64 = 5_000;
/// The SQL dialect's default grace period of a window (ksqlDB's: 24 hours).
const GRACE_MS: i64 = 86_400_000;
const DEADLINE: Duration = Duration::from_secs(60);

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};

/// The replacement: only purchases above 10 count.
const PURCHASE_STATS_V2: &str = "CREATE OR REPLACE TABLE purchase_stats AS
SELECT user_id, COUNT(*) as purchase_count, SUM(amount) as total_amount
FROM user_events
WINDOW TUMBLING (SIZE 5 MINUTES)
WHERE event_type = 'purchase' AND amount > 10
GROUP BY user_id
EMIT CHANGES;";

/// One input event.
#[derive(Clone, Copy)]
struct Event {
    user: &'static str,
    kind: &'static str,
    amount: f64,
    /// Offset from BASE, ms.
    at: i64,
}

const fn ev(user: &'static str, kind: &'static str, amount: f64, at: i64) -> Event {
    Event {
        user,
        kind,
        amount,
        at,
    }
}

/// Purchases and page views, some out of order (still in time: the
/// default grace period is a day) and one too late for its window (the
/// watermark passed the window's end plus a day).
const EVENTS: &[Event] = &[
    ev("u1", "purchase", 10.5, 1_000),
    ev("u2", "purchase", 20.0, 2_000),
    ev("u1", "view", 0.0, 3_000),
    ev("u1", "purchase", 5.0, 60_000),
    // Out of order, within the watermark delay: counts.
    ev("u2", "purchase", 7.25, 57_000),
    ev("u1", "purchase", 100.0, 310_000),
    ev("u3", "purchase", 42.0, 320_000),
    // Out of order into the previous window, still open: counts.
    ev("u3", "purchase", 1.0, 299_000),
    // Doubles would sum these to 0.30000000000000004; DECIMAL(10,2) is exact.
    ev("u4", "purchase", 0.1, 301_000),
    ev("u4", "purchase", 0.2, 302_000),
    ev("u2", "view", 0.0, 700_000),
    // Window [0, 5 min) ended before the watermark, but within the grace
    // period: counts (ksqlDB counts it too).
    ev("u1", "purchase", 1000.0, 30_000),
    ev("u2", "purchase", 12.0, 610_000),
    ev("u1", "purchase", 3.5, 620_000),
    // A day later: window [0, 5 min) is closed for good.
    ev("u3", "view", 0.0, 86_710_000),
    // Late, dropped.
    ev("u1", "purchase", 2.0, 45_000),
];

/// (user, window start) -> (count, sum), computed independently of the
/// server: per event (one partition, in order) the watermark before it is
/// the largest event time seen so far minus the delay; a purchase whose
/// window's end plus the grace period is at or before that watermark is
/// late.
fn expected(events: &[Event], min_amount: f64) -> BTreeMap<(String, i64), (u64, f64)> {
    let mut rows = BTreeMap::new();
    let mut max_seen: Option<i64> = None;
    for e in events {
        let ts = BASE + e.at;
        let watermark = max_seen.map_or(i64::MIN, |m| m - WATERMARK_DELAY_MS);
        max_seen = Some(max_seen.map_or(ts, |m| m.max(ts)));
        if e.kind != "purchase" || e.amount <= min_amount {
            continue;
        }
        let start = ts.div_euclid(WINDOW_MS) * WINDOW_MS;
        if start + WINDOW_MS + GRACE_MS <= watermark {
            continue;
        }
        let row = rows.entry((e.user.to_string(), start)).or_insert((0, 0));
        row.0 += 1;
        // DECIMAL(10,2): summed exactly, in cents.
        row.1 += (e.amount * 100.0).round() as i64;
    }
    rows.into_iter()
        .map(|(k, (n, cents))| (k, (n, cents as f64 / 100.0)))
        .collect()
}

fn produce_events(client: &Client, events: &[Event]) -> Vec<Produced> {
    let records: Vec<Value> = events
        .iter()
        .map(|e| user_event(e.user, e.kind, e.amount, BASE + e.at))
        .collect();
    client.produce("user_events", &Value::Array(records))
}

/// Every row of a view, following cursors in pages of 2, as (user, window
/// start) -> (count, sum).
fn all_rows(client: &Client, view: &str, query: &str) -> BTreeMap<(String, i64), (u64, f64)> {
    kappa_tests::events::window_rows(client, view, query, 2)
}

fn assert_rows_eq(
    got: &BTreeMap<(String, i64), (u64, f64)>,
    want: &BTreeMap<(String, i64), (u64, f64)>,
) {
    let keys = |m: &BTreeMap<(String, i64), (u64, f64)>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(got), keys(want), "rows: got {got:?}, want {want:?}");
    for (k, (count, sum)) in want {
        let (c, s) = got[k];
        assert_eq!(c, *count, "{k:?}");
        // Exact: the decimal sum, no binary residue.
        assert_eq!(s, *sum, "{k:?}: sum {s}, want {sum}");
    }
}

fn setup(client: &Client) -> Vec<Produced> {
    let results = client.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["status"], "created", "{results:?}");
    assert_eq!(results[0]["topic_created"], true, "{results:?}");
    assert_eq!(results[1]["status"], "created", "{results:?}");
    assert_eq!(results[1]["version"], 1, "{results:?}");
    produce_events(client, EVENTS)
}

#[test]
fn the_brief_scenario_answers_what_an_independent_computation_does() {
    let server = Server::start(&[]);
    let client = server.client();
    let produced = setup(&client);
    let want = expected(EVENTS, f64::NEG_INFINITY);

    // Read-your-writes: the answer includes every produced record.
    let body = client.view_rows(
        "purchase_stats",
        &format!("after={}", after_param(&produced)),
    );
    assert_eq!(body["version"], 1, "{body}");
    assert_eq!(
        body["as_of"]["offsets"],
        json!([{"partition": 0, "offset": EVENTS.len()}])
    );
    let max_ts = EVENTS.iter().map(|e| BASE + e.at).max().unwrap();
    assert_eq!(
        body["as_of"]["watermark"],
        json!(max_ts - WATERMARK_DELAY_MS),
        "{body}"
    );
    assert_rows_eq(&all_rows(&client, "purchase_stats", ""), &want);

    // Columns of a row.
    let u1 = client.view_rows("purchase_stats", "key=u1");
    let first = &u1["rows"][0];
    assert_eq!(first["window_start"], json!(BASE));
    assert_eq!(first["window_end"], json!(BASE + WINDOW_MS));
    assert_eq!(first["row"]["user_id"], "u1");
    assert_eq!(
        first["row"]["purchase_count"], 3,
        "the 1000.0 within the grace period counts, the 2.0 a day later does not: {u1}"
    );
    assert!((first["row"]["avg_amount"].as_f64().unwrap() - 338.5).abs() < 1e-9);

    // A key's windows, in time order; a range of them (ms or RFC 3339).
    let starts = |body: &Value| -> Vec<i64> {
        body["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["window_start"].as_i64().unwrap())
            .collect()
    };
    let all_u1: Vec<i64> = want
        .keys()
        .filter(|(u, _)| u == "u1")
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(starts(&u1), all_u1);
    let ranged = client.view_rows(
        "purchase_stats",
        &format!(
            "key=u1&from={}&to={}",
            BASE + WINDOW_MS,
            BASE + 2 * WINDOW_MS
        ),
    );
    assert_eq!(starts(&ranged), vec![BASE + WINDOW_MS]);
    let ranged = client.view_rows(
        "purchase_stats",
        "key=u1&from=2026-01-01T00:05:00Z&to=2026-01-01T01:00:00.000Z",
    );
    assert_eq!(
        starts(&ranged),
        vec![BASE + WINDOW_MS, BASE + 2 * WINDOW_MS]
    );
    // Prefix: every user, no other rows.
    assert_rows_eq(&all_rows(&client, "purchase_stats", "prefix=u"), &want);
    assert!(client.view_rows("purchase_stats", "prefix=x")["rows"]
        .as_array()
        .unwrap()
        .is_empty());
    assert!(client.view_rows("purchase_stats", "key=u")["rows"]
        .as_array()
        .unwrap()
        .is_empty());

    // A pull query answers the same rows.
    let results = client.sql_ok("SELECT * FROM purchase_stats WHERE user_id = 'u2';");
    let pulled = &results[0];
    assert_eq!(pulled["statement"], "SELECT");
    // Columns in SELECT order (JSON objects do not keep one), for reads too.
    let columns = json!([
        "user_id",
        "window_start",
        "window_end",
        "purchase_count",
        "total_amount",
        "avg_amount"
    ]);
    assert_eq!(pulled["columns"], columns, "{pulled}");
    assert_eq!(
        client.view_rows("purchase_stats", "prefix=u")["columns"],
        columns
    );
    let picked =
        client.sql_ok("SELECT AVG_AMOUNT, user_id FROM purchase_stats WHERE user_id = 'u2';");
    assert_eq!(
        picked[0]["columns"],
        json!(["avg_amount", "user_id"]),
        "{picked:?}"
    );
    let u2: Vec<(i64, u64)> = pulled["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["window_start"].as_i64().unwrap(),
                r["row"]["purchase_count"].as_u64().unwrap(),
            )
        })
        .collect();
    let want_u2: Vec<(i64, u64)> = want
        .iter()
        .filter(|((u, _), _)| u == "u2")
        .map(|((_, s), (c, _))| (*s, *c))
        .collect();
    assert_eq!(u2, want_u2, "{pulled}");

    // Prometheus: the served version's input lag (caught up here).
    let (status, metrics) = client.get("/metrics");
    assert_eq!(status, 200);
    let metrics = metrics.as_str().expect("Prometheus text").to_string();
    let lag_line = metrics
        .lines()
        .find(|l| {
            l.starts_with("kappa_view_lag_records{")
                && l.contains("view=\"purchase_stats\"")
                && l.contains("role=\"served\"")
        })
        .unwrap_or_else(|| panic!("no view lag in\n{metrics}"));
    assert!(lag_line.ends_with(" 0"), "{lag_line}");
    // The processor's own series, for this view's version 1.
    for name in [
        "kappa_processor_records_in_total",
        "kappa_processor_late_dropped_total",
        "kappa_processor_watermark_ms",
        "kappa_processor_watermark_lag_seconds",
        "kappa_processor_state_bytes",
        "kappa_processor_commit_seconds_count",
        "kappa_processor_commit_bytes_count",
        "kappa_processor_end_to_end_latency_seconds_count",
    ] {
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with(&format!("{name}{{"))
                    && l.contains("processor=\"purchase_stats\"")
                    && l.contains("version=\"1\"")
            })
            .unwrap_or_else(|| panic!("no {name} for purchase_stats in\n{metrics}"));
        let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(value > 0.0, "{line}");
    }

    // The description.
    let d = client.describe_view("purchase_stats");
    assert_eq!(d["name"], "purchase_stats");
    assert_eq!(d["kind"], "table");
    assert_eq!(d["status"], "running", "{d}");
    assert_eq!(d["source_topic"], "user_events");
    assert!(d["sql"]
        .as_str()
        .unwrap()
        .starts_with("CREATE TABLE purchase_stats AS"));
    assert_eq!(d["served_version"]["version"], 1);
    assert_eq!(d["served_version"]["lag"], 0, "{d}");
    assert_eq!(
        d["served_version"]["partitions"][0]["end"],
        json!(EVENTS.len())
    );
    assert!(d["building_version"].is_null());
    let (status, list) = client.get("/v1/views");
    assert_eq!(status, 200);
    assert_eq!(list["views"][0]["name"], "purchase_stats", "{list}");
    let shown = client.sql_ok("SHOW TABLES; DESCRIBE purchase_stats;");
    assert_eq!(shown[0]["rows"][0]["name"], "purchase_stats", "{shown:?}");
    assert_eq!(
        shown[1]["settings"]["watermark_delay_ms"],
        WATERMARK_DELAY_MS
    );
}

#[test]
fn errors_have_stable_codes() {
    let server = Server::start(&[]);
    let client = server.client();
    setup(&client);
    for path in [
        "/v1/views/nope",
        "/v1/views/nope/rows",
        "/v1/views/nope/rows?key=a",
    ] {
        let (status, body) = client.get(path);
        assert_error(path, status, &body, 404, "unknown_view");
    }
    let (status, body) = client.post_json("/v1/views/nope/replay", &json!({"from": "earliest"}));
    assert_error("replay", status, &body, 404, "unknown_view");
    let (status, body) = client.sql("SELECT * FROM nope;");
    assert_error("select", status, &body, 404, "unknown_view");
    let (status, body) = client.get("/v1/views/purchase_stats/rows?version=7");
    assert_error("version", status, &body, 404, "unknown_version");

    // SQL errors say where.
    let (status, body) = client.sql("SHOW TABLES;\nCREATE TABLE x AS SELEC 1;");
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "sql_error");
    assert_eq!(body["error"]["line"], 2, "{body}");
    assert!(body["error"]["column"].as_u64().unwrap() >= 1);
    // Creating again without OR REPLACE, dropping what is read.
    let (status, body) = client.sql(PURCHASE_STATS);
    assert_error("create twice", status, &body, 409, "already_exists");
    let (status, body) = client.sql("DROP STREAM user_events;");
    assert_error("drop a source in use", status, &body, 409, "has_dependents");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(r#"stream "user_events" is used by "#)
            && message.contains("DROP TABLE purchase_stats;"),
        "{body}"
    );
    // Bad parameters.
    for query in [
        "key=a&prefix=a",
        "from=1",
        "limit=0",
        "cursor=zz",
        "after=0-1",
        "after=0:999",
        "unknown=1",
    ] {
        let (status, body) = client.get(&format!("/v1/views/purchase_stats/rows?{query}"));
        assert_eq!(status, 400, "{query}: {body}");
    }
    // Drop: the view goes, then its source may go.
    client.sql_ok("DROP TABLE purchase_stats; DROP STREAM user_events;");
    let (status, body) = client.get("/v1/views/purchase_stats");
    assert_error("dropped", status, &body, 404, "unknown_view");
    let results = client.sql_ok("DROP TABLE IF EXISTS purchase_stats;");
    assert_eq!(results[0]["status"], "not_found");
}

#[test]
fn read_your_writes_sees_each_produced_record() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok("CREATE STREAM clicks (page VARCHAR) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=3);
         CREATE TABLE page_counts AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page EMIT CHANGES;",
    );
    for i in 1..=20u64 {
        let page = ["home", "cart", "help"][(i % 3) as usize];
        let produced = client.produce("clicks", &json!([{"key": page, "value": {"page": page}}]));
        let body = client.view_rows(
            "page_counts",
            &format!("key={page}&after={}", after_param(&produced)),
        );
        let n: u64 = (1..=i).filter(|j| j % 3 == i % 3).count() as u64;
        assert_eq!(body["rows"][0]["row"]["n"], n, "after record {i}: {body}");
        let p = produced[0].partition as usize;
        assert!(body["as_of"]["offsets"][p]["offset"].as_u64().unwrap() > produced[0].offset);
    }
}

#[test]
fn a_replacement_is_built_beside_the_served_version_and_swapped_in() {
    let server = Server::start(&["--view-grace-ms", "3000"]);
    let client = server.client();
    let produced = setup(&client);
    client.view_rows(
        "purchase_stats",
        &format!("after={}", after_param(&produced)),
    );

    // The same definition again is a no-op.
    let same = client.sql_ok(&PURCHASE_STATS.replace("CREATE TABLE", "CREATE OR REPLACE TABLE"));
    assert_eq!(same[0]["status"], "unchanged", "{same:?}");

    let replaced = client.sql_ok(PURCHASE_STATS_V2);
    assert_eq!(replaced[0]["status"], "building", "{replaced:?}");
    assert_eq!(replaced[0]["version"], 2);
    let d = eventually("version 2 served", DEADLINE, || {
        let d = client.describe_view("purchase_stats");
        (d["served_version"]["version"] == 2).then_some(d)
    });
    assert!(d["sql"].as_str().unwrap().contains("amount > 10"), "{d}");
    assert_eq!(d["grace_versions"][0]["version"], 1, "{d}");
    // Served: the new definition; version 1 still readable during its grace.
    let v2 = expected(EVENTS, 10.0);
    assert_rows_eq(&all_rows(&client, "purchase_stats", ""), &v2);
    assert_rows_eq(
        &all_rows(&client, "purchase_stats", "version=1"),
        &expected(EVENTS, f64::NEG_INFINITY),
    );
    eventually("version 1 dropped after its grace", DEADLINE, || {
        let (status, _) = client.get("/v1/views/purchase_stats/rows?version=1");
        (status == 404).then_some(())
    });
    assert!(client.describe_view("purchase_stats")["grace_versions"]
        .as_array()
        .unwrap()
        .is_empty());

    // A replay from a time: only events from then on count.
    let (status, body) = client.post_json(
        "/v1/views/purchase_stats/replay",
        &json!({"from": {"timestamp": BASE + 600_000}}),
    );
    assert_eq!(status, 202, "{body}");
    assert_eq!(body["building_version"], 3, "{body}");
    eventually("version 3 served", DEADLINE, || {
        (client.describe_view("purchase_stats")["served_version"]["version"] == 3).then_some(())
    });
    // Records are in the log in production order; the replay starts at the
    // first record stamped at or after the time.
    let first = EVENTS.iter().position(|e| e.at >= 600_000).unwrap();
    let tail = expected(&EVENTS[first..], 10.0);
    assert_rows_eq(&all_rows(&client, "purchase_stats", ""), &tail);

    // After a restart the swapped-in version is served.
    let mut server = server;
    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    let d = client.describe_view("purchase_stats");
    assert_eq!(d["served_version"]["version"], 3, "{d}");
    assert_eq!(d["status"], "running", "{d}");
    assert_rows_eq(&all_rows(&client, "purchase_stats", ""), &tail);
    // New records flow into it.
    let more = [ev("u9", "purchase", 50.0, 900_000)];
    let produced = produce_events(&client, &more);
    let body = client.view_rows(
        "purchase_stats",
        &format!("key=u9&after={}", after_param(&produced)),
    );
    assert_eq!(body["rows"][0]["row"]["purchase_count"], 1, "{body}");
}

#[test]
fn a_restart_during_a_build_resumes_it() {
    // Commits every minute: nothing commits while this server runs, so the
    // build cannot catch up (and read-your-writes cannot be met) before the kill.
    let mut server = Server::start(&[
        "--view-commit-interval-ms",
        "60000",
        "--view-commit-when-caught-up",
        "false",
        "--view-swap-max-lag",
        "0",
    ]);
    let client = server.client();
    let produced = setup(&client);
    let (status, body) = client.get(&format!(
        "/v1/views/purchase_stats/rows?after={}&max_wait_ms=100",
        after_param(&produced)
    ));
    assert_error("not caught up", status, &body, 504, "view_behind");
    let replaced = client.sql_ok(PURCHASE_STATS_V2);
    assert_eq!(replaced[0]["status"], "building", "{replaced:?}");
    let d = client.describe_view("purchase_stats");
    assert_eq!(d["status"], "building", "{d}");
    assert_eq!(d["building_version"]["version"], 2, "{d}");
    assert_eq!(d["building_version"]["start"], "earliest", "{d}");
    let progress = &d["building_version"]["progress"];
    assert_eq!(
        progress["done"].as_u64().unwrap() + d["building_version"]["lag"].as_u64().unwrap(),
        progress["total"].as_u64().unwrap(),
        "{d}"
    );
    assert_eq!(d["served_version"]["version"], 1);

    server.kill9();
    let server = server.restart_with(&[]);
    let client = server.client();
    let d = eventually("the resumed build swapped in", DEADLINE, || {
        let d = client.describe_view("purchase_stats");
        (d["served_version"]["version"] == 2).then_some(d)
    });
    assert!(d["building_version"].is_null(), "{d}");
    let body = client.view_rows(
        "purchase_stats",
        &format!("after={}", after_param(&produced)),
    );
    assert_eq!(body["version"], 2);
    assert_rows_eq(
        &all_rows(&client, "purchase_stats", ""),
        &expected(EVENTS, 10.0),
    );
}

#[test]
fn a_derived_stream_writes_its_topic_once_across_a_replacement() {
    let server = Server::start(&[]);
    let client = server.client();
    setup(&client);
    let created = client.sql_ok(
        "CREATE STREAM high_value AS SELECT user_id, amount FROM user_events
         WHERE event_type = 'purchase' AND amount > 15 EMIT CHANGES;",
    );
    assert_eq!(created[0]["status"], "created", "{created:?}");
    let committed = |client: &Client| {
        client.describe_view("high_value")["served_version"]["partitions"][0]["committed"]
            .as_u64()
            .unwrap()
    };
    let d = client.describe_view("high_value");
    assert_eq!(
        (d["kind"].as_str(), d["output_topic"].as_str()),
        (Some("stream"), Some("high_value"))
    );
    let amounts = |client: &Client| -> Vec<f64> {
        client
            .read_all("high_value", 0)
            .iter()
            .map(|r| r["value"]["amount"].as_f64().unwrap())
            .collect()
    };
    // A commit appends its output right after it: wait for the topic.
    let want = vec![20.0, 100.0, 42.0, 1000.0];
    eventually("the stream's output", DEADLINE, || {
        (amounts(&client).len() >= want.len()).then_some(())
    });
    assert_eq!(amounts(&client), want);
    let (status, body) = client.get("/v1/views/high_value/rows");
    assert_error("rows of a stream", status, &body, 400, "not_a_table");

    // The replacement continues where the old definition stopped.
    let replaced = client.sql_ok(
        "CREATE OR REPLACE STREAM high_value AS SELECT user_id, amount FROM user_events
         WHERE event_type = 'purchase' AND amount > 50 EMIT CHANGES;",
    );
    assert_eq!(replaced[0]["status"], "replaced", "{replaced:?}");
    assert_eq!(replaced[0]["version"], 2);
    produce_events(
        &client,
        &[
            ev("u5", "purchase", 30.0, 800_000),
            ev("u5", "purchase", 60.0, 801_000),
        ],
    );
    eventually("the new version's output", DEADLINE, || {
        (committed(&client) == EVENTS.len() as u64 + 2 && amounts(&client).len() >= 5).then_some(())
    });
    // A clean stop flushes everything; nothing was written twice.
    let mut server = server;
    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    assert_eq!(amounts(&client), vec![20.0, 100.0, 42.0, 1000.0, 60.0]);
    assert_eq!(
        client.describe_view("high_value")["served_version"]["version"],
        2
    );

    let shown = client.sql_ok("SHOW STREAMS;");
    let names: Vec<&str> = shown[0]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["high_value", "user_events"]);
    // A pull query's conditions name the view's columns.
    let (status, body) = client.sql("SELECT * FROM purchase_stats WHERE event_type = 'x';");
    assert_error("unknown column", status, &body, 400, "bad_request");
    assert!(
        body.to_string()
            .contains("has no column \\\"event_type\\\""),
        "{body}"
    );
    client.sql_ok("DROP STREAM high_value;");
    let (status, _) = client.get("/v1/views/high_value");
    assert_eq!(status, 404);
}
