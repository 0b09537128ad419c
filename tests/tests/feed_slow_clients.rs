//! A change-feed client that stops reading holds a bounded buffer in the
//! server (security probe, finding 8c: 100 such clients fed 60,000 changes
//! of 1 KB grew the server from 25 to 307 MB). The client opens the feed
//! with a small receive window and reads nothing while the view commits
//! thousands of changes of 1.5 KB: the server ends its stream once more
//! than its buffer (1 MiB) waits for it — counted in
//! `kappa_change_feed_clients_behind_total` while the client still reads
//! nothing — and when the client reads again it gets the changes it had
//! been handed, densely, then one `behind` event whose id is the last of
//! them, then the end. Reconnecting with that id as `Last-Event-ID` gets
//! every other change: together, each change exactly once.
//!
//! Synchronization: produced records are awaited with the rows endpoint's
//! `after=`; the metric is polled (bounded); the resumed feed is read on a
//! thread into a channel with bounded waits. Nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use kappa_tests::{after_param, eventually, json, Client, Server, Value};

const NOTES: &str = "CREATE STREAM notes (id VARCHAR, note VARCHAR)
WITH (KAFKA_TOPIC='notes', VALUE_FORMAT='JSON');";
const LATEST_NOTE: &str = "CREATE TABLE latest_note AS
SELECT id, LATEST_BY_OFFSET(note) AS note FROM notes GROUP BY id EMIT CHANGES;";

/// Records (each a change of its own key) per produce.
const ROUND: usize = 200;
/// Most rounds: 8,000 changes, within the feed's ring of 10,000, so the
/// reconnect can always resume.
const MAX_ROUNDS: usize = 40;
/// Bytes of each change's note.
const NOTE_BYTES: usize = 1_500;
/// The server's per-client buffer, as the `behind` event states it.
const BUFFER_BYTES: u64 = 1 << 20;
/// Longest wait for anything.
const WAIT: Duration = Duration::from_secs(60);

/// One SSE event.
#[derive(Debug, Clone)]
struct SseEvent {
    kind: String,
    id: String,
    data: Value,
}

/// Parses SSE text into events (comment lines skipped).
fn parse_events(text: &str) -> Vec<SseEvent> {
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let (mut kind, mut id, mut data) = (String::new(), String::new(), String::new());
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                kind = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("id:") {
                id = v.trim().to_string();
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if !data.is_empty() {
            let data = serde_json::from_str(&data).expect("event data is JSON");
            events.push(SseEvent { kind, id, data });
        }
    }
    events
}

/// The body of a chunked answer.
fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = bytes.windows(2).position(|w| w == b"\r\n") else {
            panic!("the chunked body was cut off");
        };
        let size_text = String::from_utf8_lossy(&bytes[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.trim(), 16)
            .unwrap_or_else(|_| panic!("bad chunk size {size_text:?}"));
        bytes = &bytes[line_end + 2..];
        if size == 0 {
            return body;
        }
        body.extend_from_slice(&bytes[..size]);
        bytes = &bytes[size + 2..];
    }
}

/// A TCP connection whose receive buffer (so its advertised window) is a
/// few KiB: what the server sends and the client does not read stays in
/// the server.
fn connect_with_a_small_window(addr: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(v4) = addr else {
        panic!("the server listens on IPv4 loopback")
    };
    // SAFETY: a new socket, configured and connected before it is handed
    // to TcpStream, which then owns the descriptor.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let size: libc::c_int = 4096;
        let rc = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &size as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "SO_RCVBUF: {}", std::io::Error::last_os_error());
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(v4.ip().octets()),
            },
            sin_zero: [0; 8],
        };
        let rc = libc::connect(
            fd,
            &sin as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    }
}

/// Reads the answer's head; returns it and the body bytes read with it.
fn read_head(stream: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            return (head, buf[end + 4..].to_vec());
        }
        let n = stream.read(&mut chunk).expect("reading the answer's head");
        assert!(n > 0, "the connection closed before the answer's head");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// `kappa_change_feed_clients_behind_total` of view `latest_note`.
fn behind_total(client: &Client) -> u64 {
    let text = client.send("GET", "/metrics", None, &[], None).text;
    text.lines()
        .filter(|l| {
            l.starts_with("kappa_change_feed_clients_behind_total{")
                && l.contains(r#"view="latest_note""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Opens the feed with `Last-Event-ID` and forwards its events to a
/// channel from a reader thread.
fn resume(server: &Server, last_id: &str) -> mpsc::Receiver<SseEvent> {
    let agent = ureq::AgentBuilder::new().timeout_read(WAIT).build();
    let response = agent
        .get(&format!("{}/v1/views/latest_note/changes", server.url()))
        .set("Last-Event-ID", last_id)
        .call()
        .expect("the feed answers");
    assert_eq!(response.status(), 200);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut block = String::new();
        for line in BufReader::new(response.into_reader()).lines() {
            let Ok(line) = line else { return };
            if !line.is_empty() {
                block.push_str(&line);
                block.push('\n');
                continue;
            }
            for event in parse_events(&std::mem::take(&mut block)) {
                if tx.send(event).is_err() {
                    return;
                }
            }
        }
    });
    rx
}

/// The feed position of a change event (`<version>:<seq>`).
fn seq_of(event: &SseEvent) -> u64 {
    assert_eq!(event.kind, "change", "{event:?}");
    let seq = event.data["seq"].as_u64().expect("seq");
    assert_eq!(event.id, format!("1:{seq}"), "{event:?}");
    seq
}

#[test]
fn a_feed_client_that_stops_reading_is_ended_with_a_resumable_id_and_loses_nothing() {
    let server = Server::start(&[]);
    let client = server.client();
    client.create_topic(&json!({"name": "notes", "partitions": 1}));
    client.sql_ok(NOTES);
    client.sql_ok(LATEST_NOTE);

    // The slow client asks for the feed, reads the answer's head, then
    // stops reading.
    let mut slow = connect_with_a_small_window(server.addr());
    slow.write_all(
        b"GET /v1/views/latest_note/changes HTTP/1.1\r\nHost: localhost\r\n\
          Accept: text/event-stream\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let (head, mut body) = read_head(&mut slow);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_ascii_lowercase().contains("chunked"), "{head}");

    // Changes each of their own key, until the server gives up on the
    // client (bounded).
    let note = "n".repeat(NOTE_BYTES);
    let mut produced = 0;
    for _ in 0..MAX_ROUNDS {
        let records: Vec<Value> = (produced + 1..=produced + ROUND)
            .map(|n| {
                let id = format!("k{n:05}");
                json!({"key": id, "value": {"id": id, "note": note}})
            })
            .collect();
        let at = client.produce("notes", &Value::Array(records));
        produced += ROUND;
        client.view_rows(
            "latest_note",
            &format!("limit=1&after={}", after_param(&at)),
        );
        if behind_total(&client) > 0 {
            break;
        }
    }
    eventually(
        "the server to end the feed of a client that stopped reading \
         (kappa_change_feed_clients_behind_total)",
        WAIT,
        || (behind_total(&client) > 0).then_some(()),
    );
    assert_eq!(behind_total(&client), 1);

    // Reading again: what it had been handed, then `behind`, then the end.
    slow.set_read_timeout(Some(WAIT)).unwrap();
    slow.read_to_end(&mut body)
        .expect("the server ends the stream");
    let events = parse_events(&String::from_utf8(dechunk(&body)).expect("UTF-8 events"));
    let (last, handed) = events.split_last().expect("at least the `behind` event");
    let mut seen = BTreeSet::new();
    for (i, event) in handed.iter().enumerate() {
        assert_eq!(seq_of(event), i as u64 + 1, "dense from the first change");
        seen.insert(event.data["key"].as_str().unwrap().to_string());
    }
    assert_eq!(
        last.kind, "behind",
        "the stream ends with `behind`: {last:?}"
    );
    assert_eq!(
        last.id,
        format!("1:{}", handed.len()),
        "the `behind` id is the last change handed: {last:?}"
    );
    assert_eq!(last.data["buffer_bytes"], json!(BUFFER_BYTES), "{last:?}");
    assert!(
        (handed.len() as u64) < produced as u64,
        "the client fell behind, so it was not handed everything"
    );

    eprintln!(
        "{produced} changes produced; the server ended the stream after handing {} of them",
        handed.len()
    );
    // Reconnecting from there gets every other change, once.
    let resumed = resume(&server, &last.id);
    let mut next = handed.len() as u64 + 1;
    while next <= produced as u64 {
        let event = resumed.recv_timeout(WAIT).unwrap_or_else(|_| {
            panic!("the resumed feed stalled before change {next} of {produced}")
        });
        assert_eq!(seq_of(&event), next, "dense after the resumed id");
        let key = event.data["key"].as_str().unwrap().to_string();
        assert!(seen.insert(key.clone()), "{key} came twice");
        next += 1;
    }
    let all: BTreeSet<String> = (1..=produced).map(|n| format!("k{n:05}")).collect();
    assert_eq!(seen, all, "every change exactly once");
}
