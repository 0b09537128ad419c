//! A logic change under load: a table replaced while records are produced
//! and rows are read never mixes versions (once version 2 answers, version
//! 1 never does), and once swapped counts the whole log under the new
//! definition; the old version goes after its grace.
//!
//! Synchronization: reads wait with `after=`, or poll observable state
//! with a bounded deadline; nothing sleeps to wait for the server.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::events::{produce_events, produce_in_chunks, Event};
use kappa_tests::{after_param, assert_error, eventually, json, Client, Produced, Rng, Server};

/// 2026-01-01T00:00:00Z, a multiple of five minutes.
const BASE: i64 = 1_767_225_600_000;
/// The SQL dialect's default watermark delay.
const WATERMARK_DELAY_MS: i64 = 5_000;
/// The SQL dialect's default grace period of a window (ksqlDB's: 24 hours).
const GRACE_MS: i64 = 86_400_000;
const DEADLINE: Duration = Duration::from_secs(60);

/// The replacement: one-minute windows, only purchases above 10.
const PURCHASE_STATS_V2: &str = "CREATE OR REPLACE TABLE purchase_stats AS
SELECT user_id, WINDOWSTART as window_start, WINDOWEND as window_end,
       COUNT(*) as purchase_count, SUM(amount) as total_amount, AVG(amount) as avg_amount
FROM user_events
WINDOW TUMBLING (SIZE 1 MINUTE)
WHERE event_type = 'purchase' AND amount > 10
GROUP BY user_id
EMIT CHANGES;";

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
