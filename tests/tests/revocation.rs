//! Revoking a token ends what it already opened (security probe, finding
//! 3). A change feed opened with it ends with one `revoked` event and
//! sends nothing committed after the revocation, while another token's
//! feed goes on; a revocation made offline (`kappa token revoke
//! --data-dir`) ends it too. A read waiting with `max_wait_ms` when its
//! token is revoked answers `401` as a new request would, and a waiting
//! group read with `commit=true` commits nothing.
//!
//! Synchronization: feeds are read on threads into channels and awaited
//! with bounded timeouts; a read is known to be waiting from the
//! `kappa_http_long_polls_waiting` gauge (polled, bounded); produced
//! records are awaited with the rows endpoint's `after=`. Nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

use kappa_tests::brief::USER_EVENTS;
use kappa_tests::{
    after_param, eventually, json, kappa_bin, Client, RawConnection, RawResponse, Server, Value,
};

/// The bootstrap secret of these tests.
const BOOTSTRAP: &str = "bootstrap-secret-for-the-revocation-tests";
/// Longest wait for anything.
const WAIT: Duration = Duration::from_secs(30);

const SPEND: &str = "CREATE TABLE spend AS
SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id EMIT CHANGES;";

fn start() -> Server {
    Server::start_env(
        &["--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    )
}

fn admin(server: &Server) -> Client {
    server.client().with_token(BOOTSTRAP)
}

/// Creates a token with `grants`; returns its secret.
fn token(server: &Server, name: &str, grants: &[&str]) -> String {
    let (status, body) =
        admin(server).post_json("/v1/tokens", &json!({"name": name, "grants": grants}));
    assert_eq!(status, 201, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// What a feed's reader thread saw.
#[derive(Debug)]
enum Seen {
    Event {
        kind: String,
        data: Value,
    },
    /// The server ended the stream.
    Ended,
}

/// Opens `view`'s change feed with `token` and forwards its events (then
/// its end) to a channel from a reader thread.
fn subscribe(server: &Server, token: &str, view: &str) -> mpsc::Receiver<Seen> {
    let agent = ureq::AgentBuilder::new()
        .timeout_read(Duration::from_secs(120))
        .build();
    let response = agent
        .get(&format!("{}/v1/views/{view}/changes", server.url()))
        .set("Authorization", &format!("Bearer {token}"))
        .set("Accept", "text/event-stream")
        .call()
        .expect("the feed answers");
    assert_eq!(response.status(), 200);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let reader = BufReader::new(response.into_reader());
        let (mut kind, mut data) = (String::new(), String::new());
        for line in reader.lines() {
            let Ok(line) = line else { break };
            if line.is_empty() {
                if !data.is_empty() {
                    let event = Seen::Event {
                        kind: std::mem::take(&mut kind),
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
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        let _ = tx.send(Seen::Ended);
    });
    rx
}

/// The keys of the next `n` events of `feed`, all of which must be changes.
fn changes(feed: &mpsc::Receiver<Seen>, n: usize) -> Vec<String> {
    let mut keys: Vec<String> = (0..n)
        .map(|_| match feed.recv_timeout(WAIT) {
            Ok(Seen::Event { kind, data }) if kind == "change" => {
                data["key"].as_str().unwrap().to_string()
            }
            other => panic!("expected a change, got {other:?}"),
        })
        .collect();
    keys.sort();
    keys
}

/// Produces one purchase per user and waits until the view applied them.
fn purchases(admin: &Client, users: &[&str]) {
    let records: Vec<Value> = users
        .iter()
        .map(|u| {
            json!({"key": u, "value": {"user_id": u, "event_type": "purchase",
                         "amount": 1, "event_time": 1_767_225_600_000i64}})
        })
        .collect();
    let produced = admin.produce("user_events", &Value::Array(records));
    admin.view_rows("spend", &format!("after={}", after_param(&produced)));
}

/// Asserts that the next thing `feed` shows is one `revoked` event naming
/// `name`, and then its end.
fn assert_ends_revoked(feed: &mpsc::Receiver<Seen>, name: &str) {
    match feed.recv_timeout(WAIT) {
        Ok(Seen::Event { kind, data }) if kind == "revoked" => {
            let reason = data["reason"].as_str().unwrap_or_default();
            assert!(reason.contains(name), "{data}");
        }
        other => panic!(
            "after the revocation the feed must end with a `revoked` event and send nothing \
             else; got {other:?}"
        ),
    }
    match feed.recv_timeout(WAIT) {
        Ok(Seen::Ended) => {}
        other => panic!("the feed must end after the `revoked` event; got {other:?}"),
    }
}

#[test]
fn a_change_feed_ends_with_a_revoked_event_when_its_token_is_revoked() {
    let server = start();
    let admin = admin(&server);
    admin.sql_ok(USER_EVENTS);
    admin.sql_ok(SPEND);
    let reader = token(&server, "rv", &["read-view:spend"]);
    let bystander = token(&server, "other", &["read-view:spend"]);
    let revoked_feed = subscribe(&server, &reader, "spend");
    let other_feed = subscribe(&server, &bystander, "spend");
    purchases(&admin, &["u1", "u2"]);
    for feed in [&revoked_feed, &other_feed] {
        assert_eq!(changes(feed, 2), ["u1", "u2"]);
    }

    let (status, body) = admin.delete("/v1/tokens/rv");
    assert_eq!(status, 200, "{body}");
    // Committed after the revocation: only the other token's feed has it.
    purchases(&admin, &["u3"]);
    assert_eq!(changes(&other_feed, 1), ["u3"]);
    assert_ends_revoked(&revoked_feed, "rv");
    // The revoked token opens nothing new; the other one still does.
    let client = server.client();
    let feed = "/v1/views/spend/changes";
    assert_eq!(client.with_token(&reader).status_only("GET", feed), 401);
    assert_eq!(client.with_token(&bystander).status_only("GET", feed), 200);
}

#[test]
fn a_change_feed_ends_when_its_token_is_revoked_offline() {
    let server = start();
    let admin = admin(&server);
    admin.sql_ok(USER_EVENTS);
    admin.sql_ok(SPEND);
    let reader = token(&server, "offline-rv", &["read-view:spend"]);
    let feed = subscribe(&server, &reader, "spend");
    purchases(&admin, &["u1"]);
    assert_eq!(changes(&feed, 1), ["u1"]);
    // Another process changes the token file; the feed looks at it every
    // second, with or without traffic.
    let revoke = std::process::Command::new(kappa_bin())
        .args(["token", "revoke", "offline-rv", "--data-dir"])
        .arg(server.data_dir())
        .env_remove("KAPPA_TOKEN")
        .output()
        .unwrap();
    assert!(
        revoke.status.success(),
        "{}",
        String::from_utf8_lossy(&revoke.stderr)
    );
    assert_ends_revoked(&feed, "offline-rv");
}

/// Sends `GET target` with `token` on a new connection from another
/// thread; the answer comes through the channel.
fn start_waiting_read(server: &Server, token: &str, target: &str) -> mpsc::Receiver<RawResponse> {
    let (addr, target) = (server.addr(), target.to_string());
    let bearer = format!("Bearer {token}");
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut conn = RawConnection::connect(addr);
        conn.send("GET", &target, &[("Authorization", &bearer)], b"");
        let _ = done_tx.send(conn.receive());
    });
    done_rx
}

/// Waits (bounded) until the server shows `n` long-polls waiting.
fn wait_until_waiting(admin: &Client, n: u64) {
    eventually(
        "the read to wait (kappa_http_long_polls_waiting)",
        WAIT,
        || {
            let text = admin.send("GET", "/metrics", None, &[], None).text;
            text.lines()
                .filter_map(|l| l.strip_prefix("kappa_http_long_polls_waiting "))
                .any(|v| v.trim().parse::<f64>().ok() == Some(n as f64))
                .then_some(())
        },
    );
}

/// Asserts the answer a new request with a revoked token gets.
fn assert_unauthorized(what: &str, response: &RawResponse) {
    let body = response.json();
    assert_eq!(
        response.status, 401,
        "{what}: a read waiting when its token was revoked answered {}: {body}",
        response.status
    );
    assert_eq!(body["error"]["code"], "unauthorized", "{what}: {body}");
    let challenge = response
        .headers
        .get("www-authenticate")
        .cloned()
        .unwrap_or_default();
    assert!(
        challenge.starts_with("Bearer realm="),
        "{what}: {challenge}"
    );
}

#[test]
fn a_partition_read_waiting_when_its_token_is_revoked_answers_401() {
    let server = start();
    let admin = admin(&server);
    admin.create_topic(&json!({"name": "lp", "partitions": 1}));
    let poller = token(&server, "poller", &["read:lp"]);
    let waiting = start_waiting_read(
        &server,
        &poller,
        "/v1/topics/lp/partitions/0/records?offset=0&max_wait_ms=25000",
    );
    wait_until_waiting(&admin, 1);
    let (status, body) = admin.delete("/v1/tokens/poller");
    assert_eq!(status, 200, "{body}");
    // A record that would have woken the read with data.
    admin.produce("lp", &json!([{"value": "after the revocation"}]));
    let answer = waiting
        .recv_timeout(WAIT)
        .expect("the waiting read answers");
    assert_unauthorized("partition read", &answer);
}

#[test]
fn a_group_read_waiting_when_its_token_is_revoked_answers_401_and_commits_nothing() {
    let server = start();
    let admin = admin(&server);
    admin.create_topic(&json!({"name": "lpg", "partitions": 2}));
    let consumer = token(&server, "consumer", &["group:g", "read:lpg"]);
    let waiting = start_waiting_read(
        &server,
        &consumer,
        "/v1/groups/g/topics/lpg/records?max_wait_ms=25000&commit=true",
    );
    wait_until_waiting(&admin, 1);
    let (status, body) = admin.delete("/v1/tokens/consumer");
    assert_eq!(status, 200, "{body}");
    admin.produce(
        "lpg",
        &json!([{"value": "after the revocation", "partition": 1}]),
    );
    let answer = waiting
        .recv_timeout(WAIT)
        .expect("the waiting read answers");
    assert_unauthorized("group read", &answer);
    let (status, offsets) = admin.get("/v1/groups/g/offsets?topic=lpg");
    assert_eq!(status, 200, "{offsets}");
    for p in offsets["topics"][0]["partitions"].as_array().unwrap() {
        assert_eq!(p["committed"], Value::Null, "nothing committed: {offsets}");
    }
}
