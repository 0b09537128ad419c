//! Slow clients cannot hold connections forever: a client that never
//! finishes its request headers is disconnected after the header-read
//! deadline, one that never finishes its body after the whole-body
//! deadline, one that drips its body after the minimum rate; the
//! connection limit holds data requests until a slot held by a busy
//! connection frees while probes answer at once on a reserved slot
//! (connections that may be closed to make room: `hostile_clients.rs`).
//! Deadlines come from a config file; the server stays healthy.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kappa_tests::{eventually, raw_request, RawConnection, Server};

fn config(dir: &std::path::Path, extra: &str) -> String {
    config_body(dir, 300, extra)
}

/// A config file with a 300 ms header deadline, `body_timeout_ms` for
/// bodies, and `extra`.
fn config_body(dir: &std::path::Path, body_timeout_ms: u64, extra: &str) -> String {
    let path = dir.join("kappa.toml");
    std::fs::write(
        &path,
        format!(
            "header_read_timeout_ms = 300\nrequest_body_timeout_ms = {body_timeout_ms}\n{extra}"
        ),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

/// Reads until the server closes the connection; returns what it sent.
fn read_until_closed(stream: &mut TcpStream) -> String {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let server = Server::start(&["--config", &cfg]);
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n")
        .unwrap();
    let started = Instant::now();
    read_until_closed(&mut stream);
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(15), "held for {waited:?}");
    let (status, _) = server.client().get("/health");
    assert_eq!(status, 200);
}

#[test]
fn a_client_that_never_finishes_its_body_gets_an_error_and_is_disconnected() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "");
    let server = Server::start(&["--config", &cfg]);
    let mut stream = TcpStream::connect(server.addr()).unwrap();
    stream
        .write_all(b"POST /v1/topics/t/records HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"records\":")
        .unwrap();
    let started = Instant::now();
    let answer = read_until_closed(&mut stream);
    assert!(answer.starts_with("HTTP/1.1 4"), "{answer:?}");
    assert!(answer.contains("\"error\""), "{answer:?}");
    assert!(started.elapsed() < Duration::from_secs(15));
    // Nothing was appended or created.
    let (status, _) = server.client().get("/v1/topics/t");
    assert_eq!(status, 404);
}

#[test]
fn the_connection_limit_queues_data_requests_until_a_slot_frees_and_probes_answer_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("kappa.toml");
    std::fs::write(&cfg, "max_connections = 1\n").unwrap();
    // The topic made before the limit applies: no connection of the test's
    // own but those under test may hold the only regular slot.
    let mut server = Server::start(&[]);
    server
        .client()
        .create_topic(&serde_json::json!({"name": "t", "partitions": 1}));
    server.terminate();
    let server = server.restart_with(&["--config", cfg.to_str().unwrap()]);
    let addr = server.addr();
    let long_poll = |conn: &mut RawConnection| {
        conn.send(
            "GET",
            "/v1/topics/t/partitions/0/records?max_wait_ms=10000",
            &[],
            b"",
        );
    };
    // No connection is opened while a long-poll's request may still be
    // unread (a connection whose request the server has not marked
    // authenticated may be closed for the next one's room), so what
    // happens is what the test lays out, however loaded the machine:
    // 1. A long-poll takes the only regular slot, waiting 10 s (long
    //    enough for the checks below on a loaded machine).
    let mut poll = RawConnection::connect(addr);
    long_poll(&mut poll);
    // 2. The probe connection comes while the slot is taken: it is served
    //    on a reserved slot, kept alive, and asks /metrics on it from then
    //    on (probes stay on reserved slots). Its arrival may have closed
    //    the long-poll for room (its request not read yet); then a second
    //    one takes the slot once the first is gone, with nobody arriving.
    let mut probe = RawConnection::connect(addr);
    let mut metrics = || {
        probe.send("GET", "/metrics", &[("Connection", "keep-alive")], b"");
        let answer = probe.receive();
        assert_eq!(answer.status, 200);
        String::from_utf8_lossy(&answer.body).into_owned()
    };
    if closed_for_room(&metrics()) > 0 {
        poll.wait_closed();
        eventually(
            "the closed long-poll to stop waiting",
            Duration::from_secs(10),
            || (long_polls_waiting(&metrics()) == 0).then_some(()),
        );
        poll = RawConnection::connect(addr);
        long_poll(&mut poll);
    }
    eventually("the long-poll to wait", Duration::from_secs(9), || {
        (long_polls_waiting(&metrics()) == 1).then_some(())
    });
    // 3. A data request waits for the regular slot...
    let mut data = RawConnection::connect(addr);
    data.send("GET", "/v1/topics", &[], b"");
    // ...while a probe on a new connection is answered at once.
    let (status, body) = server.client().get("/health");
    assert_eq!(status, 200, "{body}");
    if !poll.nothing_received() {
        panic!("the long-poll ended early: {:?}", poll.try_receive());
    }
    if !data.nothing_received() {
        panic!(
            "queued behind the long-poll, yet answered: {:?}",
            data.receive()
        );
    }
    // 4. The long-poll's wait ends; the data request gets the slot.
    assert_eq!(poll.receive().status, 200);
    drop(poll);
    assert_eq!(data.receive().status, 200, "served once the slot freed");
}

/// How many connections the server has closed to make room, by the
/// metrics text `text`.
fn closed_for_room(text: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("kappa_http_connections_closed_total{reason=\"connection_limit"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// How many long-polls wait, by the metrics text `text` (0 before the
/// first).
fn long_polls_waiting(text: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix("kappa_http_long_polls_waiting "))
        .map_or(0, |n| n.parse().unwrap())
}

/// Sends the head of a POST announcing a 100,000-byte body, and the body's
/// first byte.
fn start_dripping(addr: std::net::SocketAddr, token: Option<&str>) -> RawConnection {
    let mut conn = RawConnection::connect(addr);
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    conn.send_bytes(
        format!(
            "POST /v1/statements HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sql\r\n{auth}Content-Length: 100000\r\n\r\nS"
        )
        .as_bytes(),
    );
    conn
}

/// Drips one byte every 100 ms until the server answers; the answer, and
/// how many bytes were dripped. A drip the closed connection refuses (the
/// server answered and closed after the last check) ends it too.
fn drip_until_answered(mut conn: RawConnection) -> (kappa_tests::RawResponse, usize) {
    for dripped in 1..600 {
        if !conn.nothing_received() {
            return (conn.receive(), dripped);
        }
        std::thread::sleep(Duration::from_millis(100));
        if conn.try_send_bytes(b" ").is_err() {
            return (conn.receive(), dripped);
        }
    }
    panic!("a body dripped for 60 s was never cut off");
}

#[test]
fn a_body_dripped_a_byte_at_a_time_is_cut_off_by_its_whole_body_deadline() {
    // The deadline is for the whole body (a byte every 100 ms used to reset
    // a per-read timeout forever); the minimum rate is off here.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_body(dir.path(), 1500, "request_body_min_bytes_per_s = 0\n");
    let server = Server::start(&["--config", &cfg]);
    let (answer, dripped) = drip_until_answered(start_dripping(server.addr(), None));
    assert_eq!(answer.status, 408, "{:?}", answer.json());
    assert_eq!(answer.json()["error"]["code"], "timeout");
    assert!(dripped < 100, "cut off after {dripped} bytes");
    // And with the minimum rate (1,024 bytes/s after 2 s) instead of a
    // short deadline.
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_body(dir.path(), 600_000, "request_body_min_bytes_per_s = 1024\n");
    let server = Server::start(&["--config", &cfg]);
    let (answer, dripped) = drip_until_answered(start_dripping(server.addr(), None));
    assert_eq!(answer.status, 408, "{:?}", answer.json());
    assert!(
        String::from_utf8_lossy(&answer.body).contains("request_body_min_bytes_per_s"),
        "{:?}",
        answer.json()
    );
    assert!(dripped < 100, "cut off after {dripped} bytes");
}

const BOOTSTRAP: &str = "bootstrap-secret-for-the-slow-client-tests";

#[test]
fn a_tokenless_post_is_refused_at_once_without_reading_its_body() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_body(dir.path(), 60_000, "request_body_min_bytes_per_s = 0\n");
    let server = Server::start_env(
        &["--config", &cfg, "--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    for token in [None, Some("kp_wrong-token")] {
        // The body is announced and never sent: the answer cannot wait for it.
        let mut conn = start_dripping(server.addr(), token);
        let answer = conn.receive();
        assert_eq!(answer.status, 401, "{:?}", answer.json());
        assert_eq!(
            answer.headers.get("connection").map(String::as_str),
            Some("close")
        );
        assert!(conn.try_receive().is_err(), "the connection is closed");
    }
}

#[test]
fn probes_answer_while_slow_bodies_tokenless_posts_and_long_polls_hold_every_slot() {
    // The outside probe's numbers scaled down with the limits: 1,100
    // dripped bodies, 1,100 tokenless POSTs and 1,024 long-polls against
    // max_connections = 1024 become 40 bodies, 40 POSTs and 4 long-polls
    // against 8 (and the 32 reserved).
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_body(
        dir.path(),
        600_000,
        "request_body_min_bytes_per_s = 0\nmax_connections = 8\nmax_new_connections_per_ip = 1000\n",
    );
    let server = Server::start_env(
        &["--config", &cfg, "--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = server.client().with_token(BOOTSTRAP);
    admin.create_topic(&serde_json::json!({"name": "t", "partitions": 1}));
    drop(admin);
    let poll_target = "/v1/topics/t/partitions/0/records?max_wait_ms=30000";
    let auth = format!("Bearer {BOOTSTRAP}");
    // Four long-polls hold regular slots, each waiting before the next
    // arrives; dripped bodies take the other four (and the reserved ones).
    let metrics = || {
        let answer = raw_request(
            server.addr(),
            "GET",
            "/metrics",
            &[("Authorization", &auth)],
            b"",
        );
        assert_eq!(answer.status, 200);
        String::from_utf8(answer.body).unwrap()
    };
    let waiting = |n: usize| {
        metrics()
            .lines()
            .any(|l| l == format!("kappa_http_long_polls_waiting {n}"))
    };
    let mut polls = Vec::new();
    for n in 1..=4 {
        let mut poll = RawConnection::connect(server.addr());
        poll.send("GET", poll_target, &[("Authorization", &auth)], b"");
        polls.push(poll);
        eventually("the long-poll waiting", Duration::from_secs(20), || {
            waiting(n).then_some(())
        });
    }
    let drips: Vec<RawConnection> = (0..40)
        .map(|_| start_dripping(server.addr(), Some(BOOTSTRAP)))
        .collect();
    for _ in 0..40 {
        let mut tokenless = start_dripping(server.addr(), None);
        assert_eq!(tokenless.receive().status, 401);
    }
    for _ in 0..3 {
        let (status, body) = server.client().get("/health");
        assert_eq!(status, 200, "{body}");
        let (status, _) = server.client().get("/ready");
        assert_eq!(status, 200);
    }
    for poll in &mut polls {
        assert!(poll.nothing_received(), "the long-polls still wait");
    }
    assert!(waiting(4));
    // The dripped bodies were closed to make room, oldest first.
    let text = metrics();
    assert!(
        text.contains("kappa_http_connections_closed_total{reason=\"connection_limit_slow_body\"}"),
        "{text}"
    );
    drop(drips);
}
