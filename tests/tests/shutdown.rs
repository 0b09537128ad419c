//! Graceful shutdown: with `--default-fsync never` and a topic created
//! with the server's defaults, N acknowledged records survive SIGTERM (exit status 0, nothing
//! more on stdout) and a restart, and appends continue at the end; SIGINT
//! shuts down the same way; a long-poll waiting at SIGTERM gets an answer
//! and does not hold the exit back.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use kappa_tests::{json, temp_file, Produced, RawConnection, Server, Value};

const N: usize = 300;

fn produce_n(server: &Server, topic: &str) -> Vec<(Produced, Value)> {
    let mut acked = Vec::new();
    for request in 0..N / 10 {
        let records: Vec<Value> = (0..10)
            .map(|i| {
                let n = request * 10 + i;
                json!({"key": format!("key-{}", n % 17), "value": {"n": n, "text": "ß😀中文"}, "headers": {"req": request.to_string()}})
            })
            .collect();
        let produced = server.produce(topic, &Value::Array(records.clone()));
        acked.extend(produced.into_iter().zip(records));
    }
    acked
}

fn assert_all_there(server: &Server, topic: &str, acked: &[(Produced, Value)], partitions: u32) {
    let stored: Vec<Vec<Value>> = (0..partitions).map(|p| server.read_all(topic, p)).collect();
    assert_eq!(stored.iter().map(Vec::len).sum::<usize>(), acked.len());
    for (at, record) in acked {
        let r = &stored[at.partition as usize][at.offset as usize];
        assert_eq!(r["offset"], json!(at.offset));
        assert_eq!(r["key"], record["key"], "{at:?}");
        assert_eq!(r["value"], record["value"], "{at:?}");
        assert_eq!(r["headers"], record["headers"], "{at:?}");
    }
}

#[test]
fn sigterm_exits_0_and_keeps_every_acknowledged_record_with_fsync_never() {
    let args = ["--default-fsync", "never", "--default-partitions", "2"];
    let mut server = Server::start(&args);
    server.create_topic(&json!({"name": "lazy"}));
    let acked = produce_n(&server, "lazy");
    let description = server.describe("lazy");
    assert_eq!(
        description["config"]["fsync"], "never",
        "created with the server default: {description}"
    );
    assert_eq!(description["config"]["partitions"], 2);
    let ends = server.end_offsets("lazy");
    assert_eq!(ends.iter().sum::<u64>(), N as u64);

    server.terminate_ok();
    let server = server.restart();
    assert_eq!(server.end_offsets("lazy"), ends);
    assert_all_there(&server, "lazy", &acked, 2);

    // Appends continue at the end.
    let more = server.produce(
        "lazy",
        &json!([{"value": "after", "partition": 0}, {"value": "after", "partition": 1}]),
    );
    assert_eq!(more.iter().map(|p| p.offset).collect::<Vec<_>>(), ends);
}

#[test]
fn sigint_exits_0_and_keeps_every_acknowledged_record() {
    let mut server = Server::start(&["--default-fsync", "never"]);
    server.create_topic(&json!({"name": "interrupted"}));
    let acked = produce_n(&server, "interrupted");
    let status = server.interrupt();
    assert!(
        status.success(),
        "exit after SIGINT: {status}\n{}",
        server.stderr_log()
    );
    server.assert_no_more_stdout();
    let server = server.restart();
    assert_all_there(&server, "interrupted", &acked, 1);
}

#[test]
fn sigterm_ends_a_waiting_long_poll_with_an_answer_and_exits_promptly() {
    let (_conf_dir, conf) = temp_file("kappa.toml", "shutdown_grace_ms = 5000\n");
    let mut server = Server::start(&["--config", conf.to_str().unwrap()]);
    server.create_topic(&json!({"name": "waiting"}));

    let addr = server.addr();
    let (sent_tx, sent_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut conn = RawConnection::connect(addr);
        conn.send(
            "GET",
            "/v1/topics/waiting/partitions/0/records?max_wait_ms=20000",
            &[],
            b"",
        );
        sent_tx.send(()).unwrap();
        let _ = done_tx.send(conn.try_receive());
    });
    sent_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    // The server shows the long-poll as waiting once it has read it.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = server
            .client()
            .send("GET", "/metrics", None, &[], None)
            .text;
        if text
            .lines()
            .any(|l| l.starts_with("kappa_http_long_polls_waiting ") && !l.ends_with(" 0"))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the long-poll never showed as waiting"
        );
    }

    let started = Instant::now();
    let status = server.terminate();
    let took = started.elapsed();
    assert!(status.success(), "exit status {status}");
    let answer = done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the long-poll thread finished");
    let response = answer.expect("the waiting long-poll got an HTTP answer");
    let body = response.json();
    match response.status {
        200 => assert_eq!(body["records"], json!([]), "{body}"),
        503 => assert_eq!(body["error"]["code"], "shutting_down", "{body}"),
        other => panic!("long-poll answered {other} {body}"),
    }
    assert!(
        took < Duration::from_secs(4),
        "exit took {took:?}: the long-poll held the shutdown for the grace period"
    );
}
