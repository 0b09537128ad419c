//! The brief's `high_value_alerts` stream writes each alert exactly once:
//! across several partitions and produce requests, a SIGKILL right after
//! producing, a kill between processing and committing, and a clean
//! restart.
//!
//! Synchronization: reads long-poll the output topic (`max_wait_ms`) or
//! poll observable state with a bounded deadline; nothing sleeps to wait
//! for the server.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::{Duration, Instant};

use kappa_tests::brief::{HIGH_VALUE_ALERTS, USER_EVENTS};
use kappa_tests::events::{produce_in_chunks, Event};
use kappa_tests::{eventually, json, Client, Rng, Server, Value};

/// 2026-01-01T00:00:00Z, a multiple of five minutes.
const BASE: i64 = 1_767_225_600_000;
const DEADLINE: Duration = Duration::from_secs(60);

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
            server = server.restart_with(&[
                "--view-commit-interval-ms",
                "60000",
                "--view-commit-when-caught-up",
                "false",
            ]);
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
