//! Hostile clients (issue 11, item 9): connections that never finish their
//! request head cannot take the server offline. 2,000 slow-header
//! connections from one address (the same one the well-behaved client uses)
//! are held open while `/health` and a produce on fresh connections are
//! answered within a generous second; a new connection that sends nothing is
//! closed after `first_request_timeout_ms`, long before the header deadline
//! later requests get.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use kappa_tests::{json, raw_request, Server};

/// A generous bound for a request on an idle machine (the debug build
/// answers in milliseconds; before the fix these waited ~10 s).
const PROMPT: Duration = Duration::from_secs(1);

/// Opens `n` connections to `addr` at once (one thread each) that each
/// send part of a request head and then nothing, and returns those that
/// connected. A connect gives up after 2 s (a server that stopped
/// accepting leaves it in the backlog); connections the server closed are
/// kept too: a hostile client does not care.
fn slow_header_clients(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let threads: Vec<_> = (0..n)
        .map(|_| {
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    let mut stream =
                        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
                    let _ = stream.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\n");
                    Some(stream)
                })
                .expect("spawning a client thread")
        })
        .collect();
    threads
        .into_iter()
        .filter_map(|t| t.join().expect("client thread"))
        .collect()
}

#[test]
fn two_thousand_slow_header_connections_do_not_keep_a_normal_client_out() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "t", "partitions": 1}));
    let slow = slow_header_clients(server.addr(), 2_000);
    assert!(slow.len() > 1_024, "only {} connections opened", slow.len());
    for round in 0..3 {
        let started = Instant::now();
        let health = raw_request(server.addr(), "GET", "/health", &[], b"");
        let health_took = started.elapsed();
        assert_eq!(health.status, 200, "round {round}");
        let started = Instant::now();
        let produced = raw_request(
            server.addr(),
            "POST",
            "/v1/topics/t/records",
            &[("Content-Type", "application/json")],
            json!({"records": [{"value": round}]})
                .to_string()
                .as_bytes(),
        );
        let produce_took = started.elapsed();
        assert_eq!(produced.status, 200, "round {round}: {}", produced.json());
        assert!(
            health_took < PROMPT && produce_took < PROMPT,
            "round {round}: /health took {health_took:?}, produce {produce_took:?}"
        );
    }
    assert_eq!(server.end_offsets("t"), vec![3]);
    drop(slow);
    assert_eq!(server.get("/health").0, 200);
}

#[test]
fn a_new_connection_that_sends_nothing_is_closed_after_the_first_request_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kappa.toml");
    // The later-request deadline stays long: the first one must close it.
    std::fs::write(
        &config,
        "first_request_timeout_ms = 200\nheader_read_timeout_ms = 60000\n",
    )
    .unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()]);
    let mut idle = TcpStream::connect(server.addr()).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut out = Vec::new();
    let _ = idle.read_to_end(&mut out);
    let held = started.elapsed();
    assert!(held < Duration::from_secs(20), "held for {held:?}");
    // A connection that sent its request is served and kept alive beyond
    // the first-request deadline.
    let mut kept = kappa_tests::RawConnection::connect(server.addr());
    kept.send("GET", "/health", &[("Connection", "keep-alive")], b"");
    assert_eq!(kept.receive().status, 200);
    let (status, _) = server.get("/health");
    assert_eq!(status, 200);
}

#[test]
fn one_address_holds_at_most_its_newcomer_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kappa.toml");
    std::fs::write(&config, "max_new_connections_per_ip = 4\n").unwrap();
    let server = Server::start(&["--config", config.to_str().unwrap()]);
    let mut slow = slow_header_clients(server.addr(), 5);
    // The fifth connection closes the first: the server answers nothing on
    // it and closes it.
    slow[0]
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut out = Vec::new();
    match slow[0].read_to_end(&mut out) {
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("the oldest connection was not closed: {other:?} {out:?}"),
    }
    // A well-behaved client from the same address is served.
    let health = raw_request(server.addr(), "GET", "/health", &[], b"");
    assert_eq!(health.status, 200);
}
