//! Slow clients cannot hold connections forever: a client that never
//! finishes its request headers is disconnected after the header-read
//! deadline, one that never finishes its body after the body deadline, and
//! the connection limit holds further clients in the backlog until a slot
//! held by a busy connection frees (connections that sent nothing are
//! closed to make room: `hostile_clients.rs`). Deadlines come from a config file; the server stays healthy.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kappa_tests::{RawConnection, Server};

fn config(dir: &std::path::Path, extra: &str) -> String {
    let path = dir.join("kappa.toml");
    std::fs::write(
        &path,
        format!("header_read_timeout_ms = 300\nrequest_body_timeout_ms = 300\n{extra}"),
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
fn the_connection_limit_queues_clients_until_a_slot_frees() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), "max_connections = 1\n");
    let server = Server::start(&["--config", &cfg]);
    // The only slot is taken by a client that was served once (so it is
    // not a newcomer that may be closed to make room; waiting for that
    // answer is what makes it so, with no race) and now sends a request
    // head but not its body...
    let mut idle = RawConnection::connect(server.addr());
    idle.send("GET", "/health", &[("Connection", "keep-alive")], b"");
    assert_eq!(idle.receive().status, 200);
    // (A statement is only parsed once its whole body is in, so nothing
    // answers this request before the body deadline.)
    idle.send_bytes(b"POST /v1/statements HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/sql\r\nContent-Length: 1000\r\n\r\nSHOW");
    // ...so this request is answered only once the body deadline frees it.
    let started = Instant::now();
    let (status, body) = server.client().get("/health");
    assert_eq!(status, 200, "{body}");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250),
        "served after {waited:?}: the limit did not hold it"
    );
    // The body deadline answered it (or closed it).
    let _ = idle.try_receive();
}
