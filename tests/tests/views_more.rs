//! More views end to end: the brief's `high_value_alerts` stream writes
//! each alert exactly once (across several partitions, produce requests and
//! SIGKILL restarts); a table replaced while records are produced and rows
//! are read never mixes versions and, once swapped, counts the whole log
//! under the new definition; and bad SQL answers `400 sql_error` with the
//! position of the mistake, unknown views `404`.
//!
//! Synchronization: reads wait with `after=` or long-poll the output topic
//! (`max_wait_ms`), or poll observable state with a bounded deadline;
//! nothing sleeps to wait for the server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kappa_tests::{
    after_param, assert_error, eventually, json, user_event, Client, Produced, Rng, Server, Value,
};

/// 2026-01-01T00:00:00Z, a multiple of five minutes.
const BASE: i64 = 1_767_225_600_000;
/// The SQL dialect's default watermark delay.
const WATERMARK_DELAY_MS: i64 = 5_000;
/// The SQL dialect's default grace period of a window (ksqlDB's: 24 hours).
const GRACE_MS: i64 = 86_400_000;
const DEADLINE: Duration = Duration::from_secs(60);

use kappa_tests::brief::{HIGH_VALUE_ALERTS, PURCHASE_STATS, USER_EVENTS};

/// The replacement: one-minute windows, only purchases above 10.
const PURCHASE_STATS_V2: &str = "CREATE OR REPLACE TABLE purchase_stats AS
SELECT user_id, WINDOWSTART as window_start, WINDOWEND as window_end,
       COUNT(*) as purchase_count, SUM(amount) as total_amount, AVG(amount) as avg_amount
FROM user_events
WINDOW TUMBLING (SIZE 1 MINUTE)
WHERE event_type = 'purchase' AND amount > 10
GROUP BY user_id
EMIT CHANGES;";

/// One input event.
#[derive(Debug, Clone, PartialEq)]
struct Event {
    user: String,
    kind: &'static str,
    amount: f64,
    /// Event time (and record timestamp), ms since the epoch.
    at: i64,
}

impl Event {
    fn record(&self) -> Value {
        user_event(&self.user, self.kind, self.amount, self.at)
    }
}

fn produce_events(client: &Client, events: &[Event]) -> Vec<Produced> {
    let records: Vec<Value> = events.iter().map(Event::record).collect();
    client.produce("user_events", &Value::Array(records))
}

// ---------------------------------------------------------------------------
// 1. The brief's alert stream, exactly once
// ---------------------------------------------------------------------------

/// An alert as compared: (user, amount in cents, event time).
type Alert = (String, i64, i64);

fn cents(amount: f64) -> i64 {
    (amount * 100.0).round() as i64
}

/// `count` events numbered from `first`: page views, purchases below, at
/// and above the 100000 threshold, other kinds with large amounts, and
/// event times that go back by up to 40 s (out of order).
fn alert_events(rng: &mut Rng, first: u64, count: u64) -> Vec<Event> {
    const AMOUNTS: [f64; 8] = [
        12.5,
        99_999.99,
        100_000.0,
        100_000.01,
        150_000.0,
        250_000.75,
        1_000_000.0,
        5.0,
    ];
    const KINDS: [&str; 5] = ["purchase", "purchase", "purchase", "view", "refund"];
    (first..first + count)
        .map(|i| Event {
            user: format!("u{}", rng.below(7)),
            kind: KINDS[rng.below(KINDS.len() as u64) as usize],
            amount: AMOUNTS[rng.below(AMOUNTS.len() as u64) as usize],
            at: BASE + i as i64 * 1_000 - rng.below(40) as i64 * 1_000,
        })
        .collect()
}

/// What `high_value_alerts` must hold for `events`, sorted (a multiset).
fn expected_alerts(events: &[Event]) -> Vec<Alert> {
    let mut want: Vec<Alert> = events
        .iter()
        .filter(|e| e.kind == "purchase" && e.amount > 100_000.0)
        .map(|e| (e.user.clone(), cents(e.amount), e.at))
        .collect();
    want.sort();
    want
}

/// Produces `events` in requests of at most `chunk` records.
fn produce_in_chunks(client: &Client, events: &[Event], chunk: usize) -> Vec<Produced> {
    events
        .chunks(chunk)
        .flat_map(|c| produce_events(client, c))
        .collect()
}

/// One output record as an alert; checks its shape on the way.
fn alert_of(record: &Value) -> Alert {
    let v = &record["value"];
    let fields: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("alert value is an object: {record}"))
        .keys()
        .map(String::as_str)
        .collect();
    let mut sorted = fields.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        ["amount", "event_time", "event_type", "user_id"],
        "SELECT * gives the declared columns: {record}"
    );
    assert_eq!(v["event_type"], "purchase", "{record}");
    assert_eq!(
        record["key"], v["user_id"],
        "the input key is kept: {record}"
    );
    let at = v["event_time"].as_i64().expect("event_time");
    assert_eq!(record["timestamp"].as_i64(), Some(at), "{record}");
    (
        v["user_id"].as_str().expect("user_id").to_string(),
        cents(v["amount"].as_f64().expect("amount")),
        at,
    )
}

/// Follows every partition of `high_value_alerts` with long polls.
struct AlertReader {
    next: Vec<u64>,
    alerts: Vec<Alert>,
}

impl AlertReader {
    fn new(client: &Client) -> AlertReader {
        let partitions = client.end_offsets("high_value_alerts").len();
        AlertReader {
            next: vec![0; partitions],
            alerts: Vec::new(),
        }
    }

    /// Reads on until at least `want` alerts were seen (bounded by
    /// DEADLINE); answers them sorted.
    fn read_until(&mut self, client: &Client, want: usize) -> Vec<Alert> {
        let deadline = Instant::now() + DEADLINE;
        while self.alerts.len() < want {
            assert!(
                Instant::now() < deadline,
                "timed out with {} of {want} alerts: {:?}",
                self.alerts.len(),
                self.alerts
            );
            for p in 0..self.next.len() {
                let page = client.read(
                    "high_value_alerts",
                    p as u32,
                    &format!("offset={}&max_records=1000&max_wait_ms=200", self.next[p]),
                );
                for r in page["records"].as_array().expect("records") {
                    self.alerts.push(alert_of(r));
                }
                self.next[p] = page["next_offset"].as_u64().expect("next_offset");
            }
        }
        let mut sorted = self.alerts.clone();
        sorted.sort();
        sorted
    }
}

/// Every record of `high_value_alerts`, read again from the start, sorted.
fn all_alerts(client: &Client) -> Vec<Alert> {
    let partitions = client.end_offsets("high_value_alerts").len();
    let mut all: Vec<Alert> = (0..partitions as u32)
        .flat_map(|p| client.read_all("high_value_alerts", p))
        .map(|r| alert_of(&r))
        .collect();
    all.sort();
    all
}

/// Waits until the stream's served version committed `ends` (the input's
/// end offsets).
fn wait_committed(client: &Client, view: &str, ends: &[u64]) {
    eventually(&format!("{view} committed {ends:?}"), DEADLINE, || {
        let d = client.describe_view(view);
        let committed: Vec<u64> = d["served_version"]["partitions"]
            .as_array()
            .expect("partitions")
            .iter()
            .map(|p| p["committed"].as_u64().expect("committed"))
            .collect();
        (committed == ends).then_some(())
    });
}

#[test]
fn high_value_alerts_are_written_exactly_once_across_sigkill_restarts() {
    let mut server = Server::start(&[]);
    let client = server.client();
    for topic in ["user_events", "high_value_alerts"] {
        client.create_topic(&json!({"name": topic, "partitions": 3}));
    }
    let results = client.sql_ok(&format!("{USER_EVENTS}\n{HIGH_VALUE_ALERTS}"));
    assert_eq!(results[0]["status"], "created", "{results:?}");
    assert_eq!(results[0]["topic_created"], false, "{results:?}");
    assert_eq!(results[1]["status"], "created", "{results:?}");
    assert_eq!(results[1]["kind"], "stream", "{results:?}");

    let mut rng = Rng::new(0x5eed_a1e7);
    let mut events = alert_events(&mut rng, 0, 90);
    let produced = produce_in_chunks(&client, &events, 11);
    let partitions: Vec<u32> = produced.iter().map(|p| p.partition).collect();
    for p in 0..3 {
        assert!(
            partitions.contains(&p),
            "records on every partition: {partitions:?}"
        );
    }
    let want = expected_alerts(&events);
    assert!(want.len() >= 10, "enough alerts to be meaningful: {want:?}");
    let mut reader = AlertReader::new(&client);
    assert_eq!(reader.next.len(), 3);
    assert_eq!(reader.read_until(&client, want.len()), want);
    wait_committed(
        &client,
        "high_value_alerts",
        &client.end_offsets("user_events"),
    );
    assert_eq!(all_alerts(&client), want, "nothing else, nothing twice");

    // Round 0: SIGKILL right after producing, while the records are likely
    // still being processed. Round 1: a server that commits once a minute
    // processes records (and holds their alerts) without committing, then
    // is killed: the restart must process them again and append each
    // alert once.
    for round in 0..2u64 {
        if round == 1 {
            server.terminate_ok();
            server = server.restart_with(&["--view-commit-interval-ms", "60000"]);
        }
        let client = server.client();
        let more = alert_events(&mut rng, 90 + round * 120, 60);
        produce_in_chunks(&client, &more, 7);
        events.extend(more);
        if round == 1 {
            let d = eventually("the records processed, not committed", DEADLINE, || {
                let d = client.describe_view("high_value_alerts");
                (d["served_version"]["processed"] == 60).then_some(d)
            });
            assert!(d["served_version"]["lag"].as_u64() > Some(0), "{d}");
            assert_eq!(
                all_alerts(&client).len(),
                reader.alerts.len(),
                "nothing appended before a commit"
            );
        }
        server.kill9();
        server = server.restart_with(&[]);
        let client = server.client();
        let more = alert_events(&mut rng, 150 + round * 120, 60);
        produce_in_chunks(&client, &more, 13);
        events.extend(more);
        let want = expected_alerts(&events);
        assert_eq!(
            reader.read_until(&client, want.len()),
            want,
            "round {round}: every alert once"
        );
        wait_committed(
            &client,
            "high_value_alerts",
            &client.end_offsets("user_events"),
        );
        assert_eq!(all_alerts(&client), want, "round {round}: nothing else");
    }

    // A clean restart appends nothing again either.
    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    wait_committed(
        &client,
        "high_value_alerts",
        &client.end_offsets("user_events"),
    );
    let d = client.describe_view("high_value_alerts");
    assert_eq!(d["served_version"]["version"], 1, "{d}");
    assert_eq!(all_alerts(&client), expected_alerts(&events));
}

// ---------------------------------------------------------------------------
// 2. A logic change under load
// ---------------------------------------------------------------------------

/// (user, window start) -> (count, sum).
type Rows = BTreeMap<(String, i64), (u64, f64)>;

/// The rows of a tumbling-window purchase table over `events` read in this
/// order from one partition, computed independently of the server: the
/// watermark before an event is the largest event time seen so far minus
/// the delay, and a purchase whose window's end plus the grace period is
/// at or before it is late.
fn expected_rows(events: &[Event], window_ms: i64, min_amount: f64) -> Rows {
    let mut rows = Rows::new();
    let mut max_seen: Option<i64> = None;
    for e in events {
        let watermark = max_seen.map_or(i64::MIN, |m| m - WATERMARK_DELAY_MS);
        max_seen = Some(max_seen.map_or(e.at, |m| m.max(e.at)));
        if e.kind != "purchase" || e.amount <= min_amount {
            continue;
        }
        let start = e.at.div_euclid(window_ms) * window_ms;
        if start + window_ms + GRACE_MS <= watermark {
            continue;
        }
        let row = rows.entry((e.user.clone(), start)).or_insert((0, 0.0));
        row.0 += 1;
        row.1 += e.amount;
    }
    rows
}

/// Event `i` of the load: mostly purchases of 0.00..=29.99 (so `> 10`
/// matters, 10.00 included), two seconds apart, every seventh one 20 s
/// back in time (late when that crosses a window's end plus the delay).
fn load_event(rng: &mut Rng, i: u64) -> Event {
    let back = if i % 7 == 3 { 20_000 } else { 0 };
    let amount = if i.is_multiple_of(11) {
        10.0
    } else {
        rng.below(3_000) as f64 / 100.0
    };
    Event {
        user: format!("u{}", rng.below(5)),
        kind: if rng.below(5) == 0 {
            "view"
        } else {
            "purchase"
        },
        amount,
        at: BASE + i as i64 * 2_000 - back,
    }
}

/// Every row of a view (pages of 1000), with each row's average checked.
fn all_rows(client: &Client, view: &str, query: &str) -> (u64, Rows) {
    let mut out = Rows::new();
    let mut cursor: Option<String> = None;
    let mut version = None;
    for _ in 0..1000 {
        let q = match &cursor {
            Some(c) => format!("{query}&limit=1000&cursor={c}"),
            None => format!("{query}&limit=1000"),
        };
        let page = client.view_rows(view, &q);
        let v = page["version"].as_u64().expect("version");
        assert_eq!(*version.get_or_insert(v), v, "pages of one version");
        for r in page["rows"].as_array().expect("rows") {
            let key = (
                r["key"].as_str().expect("key").to_string(),
                r["window_start"].as_i64().expect("window_start"),
            );
            let row = &r["row"];
            let count = row["purchase_count"].as_u64().expect("purchase_count");
            let sum = row["total_amount"].as_f64().expect("total_amount");
            let avg = row["avg_amount"].as_f64().expect("avg_amount");
            assert!((avg - sum / count as f64).abs() < 1e-6, "{r}");
            assert_eq!(row["user_id"].as_str(), Some(key.0.as_str()), "{r}");
            assert_eq!(row["window_start"], r["window_start"], "{r}");
            assert!(
                out.insert(key, (count, sum)).is_none(),
                "each row once: {r}"
            );
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return (v, out),
        }
    }
    panic!("more than 1000 pages");
}

fn assert_rows_eq(context: &str, got: &Rows, want: &Rows) {
    let keys = |m: &Rows| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(got), keys(want), "{context}: row keys");
    for (k, (count, sum)) in want {
        let (c, s) = got[k];
        assert_eq!(c, *count, "{context}: count of {k:?}");
        assert!(
            (s - sum).abs() < 1e-6,
            "{context}: {k:?}: sum {s}, want {sum}"
        );
    }
}

/// Produces batches of five load events until `stop`; answers the events
/// in production order.
fn producer(
    client: Client,
    first: u64,
    stop: Arc<AtomicBool>,
    batches: Arc<AtomicU64>,
) -> Vec<Event> {
    let mut rng = Rng::new(0xfeed_0002);
    let mut events = Vec::new();
    let mut i = first;
    // The cap only bounds a runaway test; the main thread stops it first.
    while !stop.load(Ordering::Acquire) && events.len() < 50_000 {
        let batch: Vec<Event> = (i..i + 5).map(|j| load_event(&mut rng, j)).collect();
        i += 5;
        produce_events(&client, &batch);
        events.extend(batch);
        batches.fetch_add(1, Ordering::AcqRel);
    }
    events
}

/// Reads u1's rows until `stop`; answers (status, version) of each read.
fn querier(client: Client, stop: Arc<AtomicBool>, reads: Arc<AtomicU64>) -> Vec<(u16, u64)> {
    let mut seen = Vec::new();
    while !stop.load(Ordering::Acquire) {
        let (status, body) = client.get("/v1/views/purchase_stats/rows?key=u1");
        seen.push((status, body["version"].as_u64().unwrap_or(0)));
        reads.fetch_add(1, Ordering::AcqRel);
    }
    seen
}

/// Waits until `counter` went `by` past `from`.
fn wait_count(what: &str, counter: &AtomicU64, from: u64, by: u64) {
    eventually(what, DEADLINE, || {
        (counter.load(Ordering::Acquire) >= from + by).then_some(())
    });
}

#[test]
fn a_replacement_under_load_serves_one_version_at_a_time_and_counts_the_whole_log() {
    let server = Server::start(&["--view-grace-ms", "1000"]);
    let client = server.client();
    let results = client.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    assert_eq!(results[1]["version"], 1, "{results:?}");

    // The initial load, in several requests; version 1 counts it.
    let mut rng = Rng::new(0x10ad);
    let initial: Vec<Event> = (0..600).map(|i| load_event(&mut rng, i)).collect();
    let produced = produce_in_chunks(&client, &initial, 100);
    let (status, body) = client.get(&format!(
        "/v1/views/purchase_stats/rows?key=u1&after={}",
        after_param(&produced)
    ));
    assert_eq!(status, 200, "{body}");
    let (version, v1) = all_rows(&client, "purchase_stats", "");
    assert_eq!(version, 1);
    assert_rows_eq(
        "version 1",
        &v1,
        &expected_rows(&initial, 300_000, f64::NEG_INFINITY),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let batches = Arc::new(AtomicU64::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let producing = {
        let (client, stop, batches) = (client.clone(), stop.clone(), batches.clone());
        std::thread::spawn(move || producer(client, 600, stop, batches))
    };
    let querying = {
        let (client, stop, reads) = (client.clone(), stop.clone(), reads.clone());
        std::thread::spawn(move || querier(client, stop, reads))
    };
    wait_count("the producer running", &batches, 0, 5);
    wait_count("the querier running", &reads, 0, 5);

    let replaced = client.sql_ok(PURCHASE_STATS_V2);
    assert_eq!(replaced[0]["status"], "building", "{replaced:?}");
    assert_eq!(replaced[0]["version"], 2, "{replaced:?}");
    eventually("version 2 served", DEADLINE, || {
        (client.describe_view("purchase_stats")["served_version"]["version"] == 2).then_some(())
    });
    // The load goes on across the swap.
    let (b, r) = (
        batches.load(Ordering::Acquire),
        reads.load(Ordering::Acquire),
    );
    wait_count("batches after the swap", &batches, b, 5);
    wait_count("reads after the swap", &reads, r, 5);
    stop.store(true, Ordering::Release);
    let more = producing.join().expect("the producer thread");
    let seen = querying.join().expect("the querier thread");

    // Every read answered, and once version 2 answered, version 1 never did.
    assert!(seen.iter().all(|(s, _)| *s == 200), "statuses: {seen:?}");
    let first_v2 = seen
        .iter()
        .position(|(_, v)| *v == 2)
        .unwrap_or_else(|| panic!("version 2 never answered: {seen:?}"));
    assert!(seen[..first_v2].iter().all(|(_, v)| *v == 1), "{seen:?}");
    assert!(
        seen[first_v2..].iter().all(|(_, v)| *v == 2),
        "back to version 1 after version 2: {seen:?}"
    );
    assert!(
        seen.len() - first_v2 >= 5,
        "{} reads of v2",
        seen.len() - first_v2
    );

    // The log holds exactly what was produced, in this order.
    let mut all = initial;
    all.extend(more);
    let log = client.read_all("user_events", 0);
    assert_eq!(log.len(), all.len());
    for (record, event) in log.iter().zip(&all) {
        assert_eq!(record["value"], event.record()["value"], "{record}");
    }
    // Version 2 counts the whole log, including what came before it.
    let last = Produced {
        partition: 0,
        offset: all.len() as u64 - 1,
    };
    let (status, body) = client.get(&format!(
        "/v1/views/purchase_stats/rows?key=u1&after={}",
        after_param(&[last])
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["version"], 2, "{body}");
    assert_eq!(
        body["as_of"]["offsets"],
        json!([{"partition": 0, "offset": all.len()}]),
        "{body}"
    );
    let (version, v2) = all_rows(&client, "purchase_stats", "");
    assert_eq!(version, 2);
    let want = expected_rows(&all, 60_000, 10.0);
    assert!(
        want.keys().any(|(_, start)| *start < BASE + 1_200_000),
        "rows from before the replacement: {want:?}"
    );
    assert_rows_eq("version 2", &v2, &want);

    // Version 1 goes after its grace.
    eventually("version 1 dropped after its grace", DEADLINE, || {
        let (status, body) = client.get("/v1/views/purchase_stats/rows?version=1");
        match status {
            404 => Some(body),
            200 => None,
            other => panic!("rows?version=1: {other} {body}"),
        }
    });
    let (status, body) = client.get("/v1/views/purchase_stats/rows?version=1");
    assert_error("version 1", status, &body, 404, "unknown_version");
    let d = client.describe_view("purchase_stats");
    assert_eq!(d["grace_versions"], json!([]), "{d}");
    assert!(d["building_version"].is_null(), "{d}");
}

// ---------------------------------------------------------------------------
// 3. Bad SQL over HTTP
// ---------------------------------------------------------------------------

/// Marks where the error must be reported; removed before sending.
const MARK: char = '¦';

/// The text without `MARK`, and the 1-based line and column (in
/// characters) of the mark.
fn marked(sql: &str) -> (String, u64, u64) {
    let (mut line, mut column) = (1, 1);
    for ch in sql.chars() {
        if ch == MARK {
            return (sql.replace(MARK, ""), line, column);
        }
        if ch == '\n' {
            line += 1;
            column = 1;
        } else {
            column += 1;
        }
    }
    panic!("no marker in {sql}");
}

/// (SQL with the error position marked, words the message must contain).
const BAD_SQL: &[(&str, &str)] = &[
    // Syntax.
    ("¦SELEC * FROM purchase_stats;", "SELEC"),
    ("SHOW ¦FUNCTIONS;", "expected STREAMS, TABLES, VIEWS or TOPICS"),
    ("CREATE STREAM x AS SELECT * FROM user_events WHERE event_type = ¦'purchase;", "unterminated string"),
    ("CREATE STREAM s (a VARCHAR¦", "expected ',' or ')'"),
    ("CREATE STREAM s (a ¦FOO) WITH (KAFKA_TOPIC='t');", "expected a type"),
    // Names.
    ("CREATE STREAM x AS SELECT user_id FROM ¦nope;", "unknown stream 'nope'"),
    ("CREATE STREAM x AS SELECT ¦nope FROM user_events;", "unknown column 'nope'"),
    ("CREATE STREAM x AS SELECT ¦FOO(user_id) FROM user_events;", "unknown function 'FOO'"),
    // Aggregates.
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events WHERE ¦COUNT(*) > 1 GROUP BY user_id;", "aggregate COUNT(*) in WHERE"),
    ("CREATE TABLE x AS SELECT ¦event_type, COUNT(*) FROM user_events GROUP BY user_id;", "expected a GROUP BY column"),
    ("CREATE TABLE x AS SELECT ¦user_id, COUNT(*) FROM user_events;", "user_id"),
    ("¦CREATE TABLE x AS SELECT user_id FROM user_events;", "needs GROUP BY or an aggregate"),
    ("¦CREATE STREAM x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id;", "cannot aggregate"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id HAVING ¦SUM(amount) > 1;", "not in the SELECT list"),
    // Windows.
    (
        "CREATE TABLE x AS\nSELECT user_id, COUNT(*)\nFROM user_events\nWINDOW TUMBLING (SIZE 5 ¦FORTNIGHTS)\nGROUP BY user_id;",
        "expected a time unit",
    ),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW TUMBLING (SIZE ¦five MINUTES);", "five"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events WINDOW ¦SLIDING (SIZE 1 MINUTE);", "expected TUMBLING, HOPPING or SESSION"),
    ("CREATE TABLE x AS SELECT COUNT(*) FROM user_events ¦WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 2 MINUTES);", "advance must not exceed its size"),
    ("CREATE TABLE x AS SELECT user_id, COUNT(*) FROM user_events GROUP BY user_id ¦EMIT FINAL;", "EMIT FINAL needs a WINDOW clause"),
    // WITH properties.
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', ¦COLOR='red');", "unknown property COLOR"),
    ("CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT=¦'AVRO');", "'AVRO' is not supported"),
    ("CREATE STREAM x WITH (PARTITIONS=¦0) AS SELECT * FROM user_events;", "PARTITIONS must be a whole number"),
    // Not supported.
    ("CREATE STREAM x AS SELECT * FROM user_events ¦PARTITION BY user_id;", "PARTITION BY is not supported"),
    ("SELECT * FROM purchase_stats WHERE ¦amount > 1;", "a pull query's WHERE takes <key column> = value"),
    // Multi-line texts: the line and column in the whole text.
    (
        "SHOW TABLES;\n\nCREATE STREAM x AS\n  SELECT user_id\n  FROM user_events\n  WHERE amount > ¦> 3;",
        "expected an expression",
    ),
    (
        "SHOW STREAMS;\nCREATE STREAM y AS\n  SELECT user_id,\n         ¦nope\n  FROM user_events;",
        "unknown column 'nope'",
    ),
    (
        "CREATE STREAM ok_s (a INT) WITH (KAFKA_TOPIC='ok_t');\nCREATE STREAM z AS SELECT * FROM user_events\n  WHERE amount >¦\n;",
        "expected an expression",
    ),
    // Columns count characters, not bytes.
    ("CREATE STREAM x AS SELECT user_id AS \"ünïcödé\", ¦nope FROM user_events;", "unknown column 'nope'"),
];

/// Asserts `400 sql_error` at `line`:`column` with a message containing `want`.
fn assert_sql_error(text: &str, status: u16, body: &Value, line: u64, column: u64, want: &str) {
    assert_eq!(status, 400, "{text}\n{body}");
    let error = &body["error"];
    assert_eq!(error["code"], "sql_error", "{text}\n{body}");
    let message = error["message"].as_str().unwrap_or("");
    assert!(!message.trim().is_empty(), "{text}\n{body}");
    assert!(message.contains(want), "{text}\nwant {want:?} in {body}");
    let (l, c) = (error["line"].as_u64(), error["column"].as_u64());
    assert!(l >= Some(1) && c >= Some(1), "{text}\n{body}");
    assert_eq!((l, c), (Some(line), Some(column)), "{text}\n{body}");
}

#[test]
fn bad_sql_answers_400_with_its_position_and_unknown_views_404() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));

    assert!(BAD_SQL.len() >= 20);
    let mut distinct: Vec<&str> = BAD_SQL.iter().map(|(s, _)| *s).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), BAD_SQL.len(), "distinct statements");
    for (sql_text, want) in BAD_SQL {
        let (text, line, column) = marked(sql_text);
        let (status, body) = client.sql(&text);
        assert_sql_error(&text, status, &body, line, column, want);
    }
    // The same as JSON.
    let (text, line, column) = marked(BAD_SQL[5].0);
    let (status, body) = client.post_json("/v1/statements", &json!({ "sql": text }));
    assert_sql_error(&text, status, &body, line, column, BAD_SQL[5].1);

    // Nothing was created: a syntax error anywhere changes nothing, and the
    // statements that ran before a failing one only showed things.
    let shown = client.sql_ok("SHOW STREAMS; SHOW TABLES;");
    let names = |r: &Value| -> Vec<String> {
        r["rows"]
            .as_array()
            .expect("rows")
            .iter()
            .map(|r| r["name"].as_str().expect("name").to_string())
            .collect()
    };
    assert_eq!(names(&shown[0]), ["user_events"], "{shown:?}");
    assert_eq!(names(&shown[1]), ["purchase_stats"], "{shown:?}");
    for topic in ["t", "ok_t", "x", "y", "z"] {
        let (status, body) = client.get(&format!("/v1/topics/{topic}"));
        assert_error(topic, status, &body, 404, "unknown_topic");
    }

    // Unknown views.
    for path in [
        "/v1/views/nope",
        "/v1/views/nope/rows",
        "/v1/views/nope/rows?key=u1",
        "/v1/views/nope/changes",
    ] {
        let (status, body) = client.get(path);
        assert_error(path, status, &body, 404, "unknown_view");
    }
    for body in [json!({}), json!({"from": "earliest"})] {
        let (status, answer) = client.post_json("/v1/views/nope/replay", &body);
        assert_error("replay", status, &answer, 404, "unknown_view");
    }
    for text in ["DESCRIBE nope;", "DROP TABLE nope;", "SELECT * FROM nope;"] {
        let (status, body) = client.sql(text);
        assert_eq!(status, 404, "{text}: {body}");
        assert_eq!(body["error"]["code"], "unknown_view", "{text}: {body}");
    }

    // The topic under a declared stream and a view cannot be deleted: 409,
    // naming them; once they are dropped it can.
    let (status, body) = client.delete("/v1/topics/user_events");
    assert_error("delete topic", status, &body, 409, "has_dependents");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("purchase_stats") && message.contains("user_events"),
        "{body}"
    );
    client.sql_ok("DROP TABLE purchase_stats; DROP STREAM user_events;");
    let (status, body) = client.delete("/v1/topics/user_events");
    assert_eq!(status, 204, "{body}");
}
