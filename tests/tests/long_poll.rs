//! Long-poll reads: a read at the end offset with `max_wait_ms=20000`
//! (partition read, `offset=latest`, and group read) returns as soon as a
//! record is produced from another thread, with that record; a read with
//! `max_wait_ms=300` and nothing produced returns empty after ~300 ms.
//!
//! The waiting request is written on its own connection before the record
//! is produced, so the answer itself is the synchronization.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use kappa_tests::{json, RawConnection, RawResponse, Server, Value};

/// Sends `GET target` on a new connection from another thread; returns a
/// receiver of (time from send to answer, answer) once the request is sent.
fn start_waiting_read(server: &Server, target: String) -> mpsc::Receiver<(Duration, RawResponse)> {
    let addr = server.addr();
    let (sent_tx, sent_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    thread::spawn(move || {
        let mut conn = RawConnection::connect(addr);
        let started = Instant::now();
        conn.send("GET", &target, &[], b"");
        sent_tx.send(()).unwrap();
        let response = conn.receive();
        let _ = done_tx.send((started.elapsed(), response));
    });
    sent_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the waiting read was sent");
    done_rx
}

fn finish(done: mpsc::Receiver<(Duration, RawResponse)>) -> (Duration, Value) {
    let (elapsed, response) = done
        .recv_timeout(Duration::from_secs(30))
        .expect("the waiting read answered within 30 s");
    assert_eq!(response.status, 200, "{:?}", response.json());
    (elapsed, response.json())
}

#[test]
fn a_waiting_read_returns_as_soon_as_a_record_is_produced() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "lp", "partitions": 1}));
    server.produce("lp", &json!([{"value": "already there"}]));

    let done = start_waiting_read(
        &server,
        "/v1/topics/lp/partitions/0/records?offset=1&max_wait_ms=20000".into(),
    );
    let produced = server.produce("lp", &json!([{"key": "k", "value": "wake up"}]));
    assert_eq!(produced[0].offset, 1);
    let (elapsed, body) = finish(done);
    assert!(
        elapsed < Duration::from_secs(15),
        "returned after {elapsed:?}, not as soon as the record came"
    );
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{body}");
    assert_eq!(records[0]["offset"], 1);
    assert_eq!(records[0]["key"], "k");
    assert_eq!(records[0]["value"], "wake up");
    assert_eq!(body["next_offset"], 2);
    assert_eq!(body["high_watermark"], 2);

    // The same with offset=latest. `latest` is resolved when the server
    // handles the read, which may be after a record produced here, so keep
    // producing (bounded) until the waiting read answers: it must answer
    // with records produced after it was resolved.
    let done = start_waiting_read(
        &server,
        "/v1/topics/lp/partitions/0/records?offset=latest&max_wait_ms=20000".into(),
    );
    let started = Instant::now();
    let mut answer = None;
    for n in 0..100 {
        server.produce("lp", &json!([{"value": {"n": n}}]));
        if let Ok(done) = done.recv_timeout(Duration::from_millis(200)) {
            answer = Some(done);
            break;
        }
    }
    let (elapsed, response) = answer.expect("the offset=latest read answered");
    assert!(
        elapsed < Duration::from_secs(15) && started.elapsed() < Duration::from_secs(25),
        "returned after {elapsed:?}"
    );
    assert_eq!(response.status, 200);
    let body = response.json();
    let records = body["records"].as_array().unwrap();
    assert!(!records.is_empty(), "{body}");
    let first = records[0]["offset"].as_u64().unwrap();
    assert!(
        first >= 2,
        "latest was 2 or later when the read arrived: {body}"
    );
    assert_eq!(records[0]["value"], json!({"n": first - 2}), "{body}");
}

#[test]
fn a_waiting_group_read_returns_when_any_partition_gets_a_record() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "lpg", "partitions": 3}));
    // Nothing committed and nothing stored: the group waits on all three.
    let done = start_waiting_read(
        &server,
        "/v1/groups/waiters/topics/lpg/records?max_wait_ms=20000".into(),
    );
    server.produce("lpg", &json!([{"value": "on two", "partition": 2}]));
    let (elapsed, body) = finish(done);
    assert!(
        elapsed < Duration::from_secs(15),
        "returned after {elapsed:?}"
    );
    assert_eq!(body["group"], "waiters");
    assert_eq!(body["topic"], "lpg");
    let records = body["records"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{body}");
    assert_eq!(records[0]["partition"], 2);
    assert_eq!(records[0]["offset"], 0);
    assert_eq!(records[0]["value"], "on two");
    assert_eq!(
        body["next_offsets"],
        json!([{"partition": 0, "offset": 0}, {"partition": 1, "offset": 0}, {"partition": 2, "offset": 1}])
    );
}

#[test]
fn a_waiting_read_with_nothing_produced_returns_empty_after_max_wait() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "quiet", "partitions": 2}));
    server.produce("quiet", &json!([{"value": 1, "partition": 0}]));

    for (target, what) in [
        (
            "/v1/topics/quiet/partitions/0/records?offset=1&max_wait_ms=300",
            "partition read at the end",
        ),
        (
            "/v1/topics/quiet/partitions/1/records?max_wait_ms=300",
            "partition read of an empty partition",
        ),
    ] {
        let started = Instant::now();
        let (status, body) = server.get(target);
        let elapsed = started.elapsed();
        assert_eq!(status, 200, "{what}: {body}");
        assert_eq!(body["records"], json!([]), "{what}");
        assert!(
            elapsed >= Duration::from_millis(290),
            "{what}: returned after {elapsed:?}, before max_wait_ms"
        );
        assert!(
            elapsed < Duration::from_secs(10),
            "{what}: returned after {elapsed:?}"
        );
    }
    let page = server.read("quiet", 0, "offset=1&max_wait_ms=300");
    assert_eq!(page["next_offset"], 1);
    assert_eq!(page["high_watermark"], 1);

    // A group already at the end of every partition.
    let (status, body) = server.post_json(
        "/v1/groups/idle/offsets",
        &json!({"topic": "quiet", "offsets": [{"partition": 0, "offset": 1}]}),
    );
    assert_eq!(status, 200, "{body}");
    let started = Instant::now();
    let (status, body) = server.get("/v1/groups/idle/topics/quiet/records?max_wait_ms=300");
    let elapsed = started.elapsed();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"], json!([]));
    assert!(
        elapsed >= Duration::from_millis(290),
        "group read returned after {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(10),
        "group read returned after {elapsed:?}"
    );

    // With records available, max_wait_ms does not delay the answer.
    let started = Instant::now();
    let page = server.read("quiet", 0, "offset=0&max_wait_ms=20000");
    assert_eq!(page["records"].as_array().unwrap().len(), 1);
    assert!(started.elapsed() < Duration::from_secs(15));
}
