//! The change feed of a view over Server-Sent Events, end to end: every
//! committed row change arrives once, in order, with dense sequence
//! numbers; replaying the events gives the view's rows; a client resumes
//! after the last event id it saw (`Last-Event-ID`); a position the server
//! cannot resume yields a `reset` event.
//!
//! Synchronization: the SSE stream is read on a thread into a channel and
//! awaited with bounded timeouts; produced records are awaited with the
//! rows endpoint's `after=` (read-your-writes). Nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

use kappa_tests::{after_param, json, Client, Produced, Server, Value};

use kappa_tests::brief::USER_EVENTS;

const SPEND: &str = "CREATE TABLE spend AS
SELECT user_id, COUNT(*) AS n, SUM(amount) AS total
FROM user_events WHERE event_type = 'purchase' GROUP BY user_id EMIT CHANGES;";

const WAIT: Duration = Duration::from_secs(30);

/// One SSE event.
#[derive(Debug, Clone)]
struct SseEvent {
    kind: String,
    id: String,
    data: Value,
}

/// Opens the feed (with `Last-Event-ID` when given) and forwards its
/// events to a channel from a reader thread.
fn subscribe(server: &Server, view: &str, last_id: Option<&str>) -> mpsc::Receiver<SseEvent> {
    let agent = ureq::AgentBuilder::new()
        .timeout_read(Duration::from_secs(120))
        .build();
    let mut request = agent
        .get(&format!("{}/v1/views/{view}/changes", server.url()))
        .set("Accept", "text/event-stream");
    if let Some(id) = last_id {
        request = request.set("Last-Event-ID", id);
    }
    let response = request.call().expect("the feed answers");
    assert_eq!(response.status(), 200);
    assert!(response
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/event-stream"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reader = BufReader::new(response.into_reader());
        let (mut kind, mut id, mut data) = (String::new(), String::new(), String::new());
        for line in reader.lines() {
            let Ok(line) = line else { return };
            if line.is_empty() {
                if !data.is_empty() {
                    let event = SseEvent {
                        kind: std::mem::take(&mut kind),
                        id: std::mem::take(&mut id),
                        data: serde_json::from_str(&std::mem::take(&mut data))
                            .expect("event data is JSON"),
                    };
                    if tx.send(event).is_err() {
                        return;
                    }
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
    });
    rx
}

fn produce(client: &Client, purchases: &[(&str, i64)]) -> Vec<Produced> {
    let records: Vec<Value> = purchases
        .iter()
        .map(|(user, amount)| {
            json!({"key": user, "value": {"user_id": user, "event_type": "purchase",
                   "amount": amount, "event_time": 1_767_225_600_000i64}})
        })
        .collect();
    client.produce("user_events", &Value::Array(records))
}

/// The view's rows as key -> row, read after the produced records were applied.
fn view_rows(client: &Client, produced: &[Produced]) -> BTreeMap<String, Value> {
    let query = format!("limit=1000&after={}", after_param(produced));
    client.view_rows("spend", &query)["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| (r["key"].as_str().unwrap().to_string(), r["row"].clone()))
        .collect()
}

/// Applies events from `rx` to `state` until it equals `want`.
fn follow_until(
    rx: &mpsc::Receiver<SseEvent>,
    state: &mut BTreeMap<String, Value>,
    seen: &mut Vec<SseEvent>,
    want: &BTreeMap<String, Value>,
) {
    while state != want {
        let event = rx
            .recv_timeout(WAIT)
            .unwrap_or_else(|_| panic!("feed stalled at {state:?}, want {want:?}"));
        assert_eq!(event.kind, "change", "{event:?}");
        let key = event.data["key"].as_str().unwrap().to_string();
        match &event.data["row"] {
            Value::Null => state.remove(&key),
            row => state.insert(key, row.clone()),
        };
        seen.push(event);
    }
}

#[test]
fn the_feed_delivers_every_change_in_order_and_resumes() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(SPEND);

    let rx = subscribe(&server, "spend", None);
    let mut state = BTreeMap::new();
    let mut seen = Vec::new();
    let batches: [&[(&str, i64)]; 3] = [
        &[("u1", 10), ("u2", 5)],
        &[("u1", 7), ("u3", 1), ("u2", 2)],
        &[("u4", 100), ("u1", 1)],
    ];
    let mut marks = Vec::new();
    for batch in batches {
        let produced = produce(&client, batch);
        let want = view_rows(&client, &produced);
        follow_until(&rx, &mut state, &mut seen, &want);
        marks.push(seen.len());
    }
    assert_eq!(state["u1"], json!({"user_id": "u1", "n": 3, "total": 18}));
    // Dense, increasing sequence numbers; ids are <version>:<seq>.
    for (i, e) in seen.iter().enumerate() {
        assert_eq!(e.data["seq"], json!(i as u64 + 1), "{e:?}");
        assert_eq!(e.id, format!("1:{}", i + 1));
    }

    // Resume after the first batch's last event: exactly the later events.
    let resume_at = seen[marks[0] - 1].id.clone();
    let resumed = subscribe(&server, "spend", Some(&resume_at));
    let mut again = Vec::new();
    for expected in &seen[marks[0]..] {
        let e = resumed.recv_timeout(WAIT).expect("resumed events");
        assert_eq!(
            (e.kind.as_str(), &e.id, &e.data),
            ("change", &expected.id, &expected.data)
        );
        again.push(e);
    }
    // And it goes on with new changes.
    let produced = produce(&client, &[("u5", 3)]);
    let want = view_rows(&client, &produced);
    follow_until(&rx, &mut state, &mut seen, &want);
    let next = resumed.recv_timeout(WAIT).expect("a new change");
    assert_eq!(next.id, seen.last().unwrap().id);

    // A position from another version (or server run) is a reset.
    let reset = subscribe(&server, "spend", Some("7:3"));
    let e = reset.recv_timeout(WAIT).expect("a reset");
    assert_eq!(e.kind, "reset", "{e:?}");
    assert_eq!(e.data["version"], json!(1));

    // Bad positions and unknown views are errors.
    let (status, _) = client.get("/v1/views/spend/changes?from=nonsense");
    assert_eq!(status, 400);
    let (status, _) = client.get("/v1/views/nope/changes");
    assert_eq!(status, 404);
}
