//! Bad input and cancellation on the PostgreSQL listener (issue 39): a
//! malformed startup packet, an unknown protocol version, garbage after
//! the login and a `Bind` whose format codes do not fit each get a clear
//! error (or the connection closed) while the server and its other
//! connections go on; a cancel request stops a long view scan, answers
//! SQLSTATE `57014`, and leaves the connection usable.
//!
//! The protocol is spoken byte for byte over a plain TCP stream here (a
//! driver would refuse to send such bytes); the cancel is psycopg's. Nothing
//! sleeps to synchronize: the cancel is sent once the server's metrics show
//! the statement running, and the scan's end is polled (bounded).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{eventually, json, Server, Value};

/// A startup message of protocol `major.minor` for user `kappa`.
fn startup(major: u16, minor: u16) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&major.to_be_bytes());
    body.extend_from_slice(&minor.to_be_bytes());
    body.extend_from_slice(b"user\0kappa\0database\0kappa\0\0");
    framed_untyped(&body)
}

fn framed_untyped(body: &[u8]) -> Vec<u8> {
    let mut out = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out
}

/// A frontend message of type `tag`.
fn message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&framed_untyped(body));
    out
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(server.pg_addr()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream
}

/// Reads one backend message (`None`: the server closed the connection).
fn read_message(stream: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 5];
    stream.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut body = vec![0u8; len.checked_sub(4)?];
    stream.read_exact(&mut body).ok()?;
    Some((head[0], body))
}

/// The messages up to and including `ReadyForQuery`, or up to the end of
/// the connection.
fn until_ready(stream: &mut TcpStream) -> Vec<(u8, Vec<u8>)> {
    let mut got = Vec::new();
    while let Some(m) = read_message(stream) {
        let ready = m.0 == b'Z';
        got.push(m);
        if ready {
            break;
        }
    }
    got
}

/// The SQLSTATE of the first `ErrorResponse` among `messages`.
fn sqlstate(messages: &[(u8, Vec<u8>)]) -> Option<String> {
    let (_, body) = messages.iter().find(|m| m.0 == b'E')?;
    body.split(|b| *b == 0)
        .find(|f| f.first() == Some(&b'C'))
        .map(|f| String::from_utf8_lossy(&f[1..]).into_owned())
}

/// A connection logged in (no auth).
fn logged_in(server: &Server) -> TcpStream {
    let mut stream = connect(server);
    stream.write_all(&startup(3, 0)).unwrap();
    let got = until_ready(&mut stream);
    assert_eq!(got.last().map(|m| m.0), Some(b'Z'), "login: {got:?}");
    stream
}

/// The `DataRow`s a simple query answers on `stream`.
fn simple_rows(stream: &mut TcpStream, sql: &str) -> usize {
    let mut body = sql.as_bytes().to_vec();
    body.push(0);
    stream.write_all(&message(b'Q', &body)).unwrap();
    let got = until_ready(stream);
    assert_eq!(sqlstate(&got), None, "{sql}: {got:?}");
    let rows = got.iter().filter(|m| m.0 == b'D').count();
    // The command tag is the command's word and the row count, once.
    let tag = got.iter().find(|m| m.0 == b'C').map(|m| m.1.clone());
    let word = sql.split_whitespace().next().unwrap_or("").to_uppercase();
    assert_eq!(tag, Some(format!("{word} {rows}\0").into_bytes()), "{sql}");
    rows
}

/// Everything the server sends until it closes the connection.
fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out);
    out
}

fn serving() -> Server {
    let server = Server::start(&["--pg-listen", "127.0.0.1:0"]);
    server.client().sql_ok(USER_EVENTS);
    server.client().sql_ok(PURCHASE_STATS);
    server
}

#[test]
fn malformed_startups_are_refused_and_the_server_goes_on() {
    let server = serving();
    // A connection logged in before the bad ones, used after them.
    let mut bystander = logged_in(&server);

    // A length shorter than its own field, a length of 1 GiB, and a
    // startup cut off mid-message: each connection is closed.
    for bytes in [
        3_u32.to_be_bytes().to_vec(),
        (1_u32 << 30).to_be_bytes().to_vec(),
        startup(3, 0)[..10].to_vec(),
    ] {
        let mut stream = connect(&server);
        stream.write_all(&bytes).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        read_to_close(&mut stream);
    }

    // An unknown major protocol version gets an error naming it.
    let mut stream = connect(&server);
    stream.write_all(&startup(4, 0)).unwrap();
    let answer = String::from_utf8_lossy(&read_to_close(&mut stream)).into_owned();
    assert!(answer.starts_with('E'), "{answer:?}");
    assert!(answer.contains("protocol"), "{answer:?}");

    // A newer minor version of protocol 3 is negotiated down.
    let mut stream = connect(&server);
    stream.write_all(&startup(3, 9)).unwrap();
    let got = until_ready(&mut stream);
    assert!(got.iter().any(|m| m.0 == b'v'), "{got:?}");
    assert_eq!(got.last().map(|m| m.0), Some(b'Z'), "{got:?}");
    assert_eq!(simple_rows(&mut stream, "SHOW TABLES"), 1);

    // The server and the connection made before all this still answer.
    assert_eq!(simple_rows(&mut bystander, "SHOW TABLES"), 1);
    assert_eq!(simple_rows(&mut logged_in(&server), "SHOW TABLES"), 1);
    assert_eq!(server.client().get("/health").0, 200);
}

#[test]
fn bad_messages_after_the_login_get_errors_and_the_connection_goes_on() {
    let server = serving();
    let mut stream = logged_in(&server);

    // A Bind with two parameter format codes for one parameter.
    let sql = "SELECT * FROM purchase_stats WHERE user_id = $1";
    let mut parse = b"\0".to_vec();
    parse.extend_from_slice(sql.as_bytes());
    parse.extend_from_slice(b"\0\0\0");
    let mut bind = b"\0\0".to_vec(); // unnamed portal, unnamed statement
    bind.extend_from_slice(&2_i16.to_be_bytes());
    bind.extend_from_slice(&[0, 0, 0, 0]); // two text format codes
    bind.extend_from_slice(&1_i16.to_be_bytes());
    bind.extend_from_slice(&2_i32.to_be_bytes());
    bind.extend_from_slice(b"u1");
    bind.extend_from_slice(&0_i16.to_be_bytes());
    let mut execute = b"\0".to_vec();
    execute.extend_from_slice(&0_i32.to_be_bytes());
    for m in [
        message(b'P', &parse),
        message(b'B', &bind),
        message(b'E', &execute),
        message(b'S', &[]),
    ] {
        stream.write_all(&m).unwrap();
    }
    let got = until_ready(&mut stream);
    assert_eq!(sqlstate(&got).as_deref(), Some("08P01"), "{got:?}");

    // A binary parameter that is not an int8 of eight bytes.
    let mut parse = b"\0".to_vec();
    parse.extend_from_slice(sql.as_bytes());
    parse.push(0);
    parse.extend_from_slice(&1_i16.to_be_bytes());
    parse.extend_from_slice(&20_u32.to_be_bytes()); // int8
    let mut bind = b"\0\0".to_vec();
    bind.extend_from_slice(&1_i16.to_be_bytes());
    bind.extend_from_slice(&1_i16.to_be_bytes()); // binary
    bind.extend_from_slice(&1_i16.to_be_bytes());
    bind.extend_from_slice(&3_i32.to_be_bytes());
    bind.extend_from_slice(b"abc");
    bind.extend_from_slice(&0_i16.to_be_bytes());
    for m in [
        message(b'P', &parse),
        message(b'B', &bind),
        message(b'E', &execute),
        message(b'S', &[]),
    ] {
        stream.write_all(&m).unwrap();
    }
    let got = until_ready(&mut stream);
    assert_eq!(sqlstate(&got).as_deref(), Some("22P03"), "{got:?}");

    // The connection still runs queries.
    assert_eq!(simple_rows(&mut stream, "SHOW TABLES"), 1);

    // A message type the protocol does not have ends that connection
    // alone.
    stream.write_all(&message(b'@', b"junk")).unwrap();
    read_to_close(&mut stream);
    assert_eq!(simple_rows(&mut logged_in(&server), "SHOW TABLES"), 1);
}

/// Produces `n` purchases by `n` users: `n` rows in `purchase_stats`.
fn produce_users(server: &Server, n: usize) {
    for first in (0..n).step_by(10_000) {
        let events: Vec<Value> = (first..(first + 10_000).min(n))
            .map(|i| {
                json!({"key": format!("u{i:06}"), "value": {
                    "user_id": format!("u{i:06}"), "event_type": "purchase",
                    "amount": 1.5, "event_time": 1_767_225_600_000_i64}})
            })
            .collect();
        server.client().produce("user_events", &json!(events));
    }
}

/// The value of the unlabelled metric `name` (0 when absent).
fn metric(server: &Server, name: &str) -> f64 {
    let (_, body) = server.client().get("/metrics");
    let text = body
        .as_str()
        .map(str::to_string)
        .unwrap_or(body.to_string());
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn a_cancel_request_stops_a_long_scan_and_the_connection_goes_on() {
    let server = serving();
    let users = 100_000;
    produce_users(&server, users);
    server
        .client()
        .wait_view_committed("purchase_stats", users as u64, Duration::from_secs(120));
    // No row's window starts in 2100: the query examines every row.
    let script = format!(
        r#"
import json, threading, urllib.request, psycopg
conn = psycopg.connect(host="127.0.0.1", port={pg}, user="kappa", dbname="kappa",
                       sslmode="disable", autocommit=True)
other = psycopg.connect(host="127.0.0.1", port={pg}, user="kappa", dbname="kappa",
                        sslmode="disable", autocommit=True)
def running():
    text = urllib.request.urlopen("http://{http}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith("kappa_pg_statements_running "):
            return float(line.split()[1])
    return 0.0
outcome = {{}}
def scan():
    try:
        rows = conn.execute(
            "SELECT * FROM purchase_stats WHERE WINDOWSTART >= '2100-01-01T00:00:00Z'").fetchall()
        outcome["scan"] = "finished with %d rows" % len(rows)
    except psycopg.Error as e:
        outcome["scan"] = e.sqlstate
worker = threading.Thread(target=scan)
worker.start()
polls = 0
while running() < 1 and worker.is_alive() and polls < 100000:
    polls += 1
conn.cancel_safe()
worker.join()
# Another connection was never in the way; this one goes on.
outcome["other"] = len(other.execute("SELECT * FROM purchase_stats WHERE user_id = 'u000001'").fetchall())
outcome["after"] = len(conn.execute("SELECT * FROM purchase_stats WHERE user_id = 'u000002'").fetchall())
print(json.dumps(outcome))
"#,
        pg = server.pg_addr().port(),
        http = server.addr(),
    );
    let out = kappa_tests::run_python(&script, "psycopg cancelling a scan");
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(got["scan"], "57014", "{got}");
    assert_eq!(got["other"], 1, "{got}");
    assert_eq!(got["after"], 1, "{got}");
    // The scan itself stopped: nothing runs on a statement thread.
    eventually(
        "the cancelled scan's thread stopped",
        Duration::from_secs(30),
        || (metric(&server, "kappa_pg_statements_running") == 0.0).then_some(()),
    );
    assert_eq!(
        metric(&server, "kappa_pg_statements_total{outcome=\"cancelled\"}"),
        1.0
    );
}
