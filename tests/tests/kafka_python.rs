//! Kafka clients written in Python, none of them ours, against the real
//! `kappa serve --kafka-listen` (the scripts are in `tests/kafka/`; they run
//! on the venv's interpreter, see [`kappa_tests::python`]):
//!
//! - confluent-kafka's idempotent producer (librdkafka: `acks=all`,
//!   unbounded retries, snappy) keeps producing while the server is killed
//!   with SIGKILL and restarted on the same data directory and Kafka port,
//!   and, in a second run, while the server is paused (SIGSTOP) until the
//!   producer gives up on its requests in flight and sends them again on a
//!   new connection — the resumed server still holds the first copies.
//!   Either way every message it was told was delivered is stored exactly
//!   once, each partition in production order, and nothing is stored that
//!   was never sent: the retries of batches already written are recognized
//!   (after the restart, from the segments). With a token whose produce
//!   rate is limited, the same producer is slowed down, never refused
//!   (librdkafka does not retry `THROTTLING_QUOTA_EXCEEDED`).
//! - Three confluent-kafka consumers of one group split a 6-partition topic
//!   two partitions each; when one leaves (close → LeaveGroup) the other
//!   two take over all six, when one is killed the last one gets all six
//!   after the session timeout; committing after processing, every message
//!   is consumed at least once and none is skipped, and the HTTP groups API
//!   and `/metrics` show the committed offsets at the end with lag 0.
//! - kafka-python, an independent pure-Python implementation of the
//!   protocol, produces (gzip) and consumes keys, values, headers and
//!   timestamps that equal what the HTTP API reads and writes.
//!
//! The scripts print one JSON object per stdout line; the tests wait on
//! those lines (bounded), never on sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use kappa_tests::{eventually, json, kafka_script, now_ms, python, Client, Rng, Server, Value};

/// Arguments of a server with a Kafka listener on a free port.
const KAFKA_ARGS: &[&str] = &["--kafka-listen", "127.0.0.1:0"];

/// One Python client process: its stdout lines (JSON) arrive on a channel
/// shared with the other scripts of a test, tagged with `index`.
struct Script {
    name: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    stderr: tempfile::NamedTempFile,
}

impl Script {
    /// Runs `tests/kafka/{script}` with `args`; each stdout line is sent
    /// to `events` as `(index, json)` (a line that is not JSON fails the
    /// test when it is received).
    fn spawn(
        script: &str,
        args: &[&str],
        index: usize,
        events: Sender<(usize, Result<Value, String>)>,
    ) -> Script {
        let stderr = tempfile::NamedTempFile::new().expect("a temp file for stderr");
        let mut child = Command::new(python())
            // No __pycache__ in the source tree.
            .arg("-B")
            .arg(kafka_script(script))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                stderr.reopen().expect("reopening the stderr file"),
            ))
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {script}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let parsed = serde_json::from_str(&line).map_err(|_| line);
                if events.send((index, parsed)).is_err() {
                    break;
                }
            }
        });
        Script {
            name: format!("{script} #{index}"),
            stdin: child.stdin.take(),
            child: Some(child),
            stderr,
        }
    }

    /// Writes one line to the script's stdin (its go-ahead or stop).
    fn send_line(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin).expect("writing to the script's stdin");
        stdin.flush().expect("flushing the script's stdin");
    }

    /// SIGKILL (by this child's own PID) and reap.
    fn kill9(&mut self) {
        let mut child = self.child.take().expect("the script is running");
        child.kill().expect("SIGKILL");
        child.wait().expect("reaping the script");
    }

    /// Waits (bounded) for the script to exit and asserts it succeeded.
    fn wait_success(&mut self, timeout: Duration) {
        let mut child = self.child.take().expect("the script is running");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait().expect("try_wait") {
                assert!(
                    status.success(),
                    "{} exited with {status}; stderr:\n{}",
                    self.name,
                    self.stderr_text()
                );
                return;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{} did not exit within {timeout:?}; stderr:\n{}",
                    self.name,
                    self.stderr_text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn stderr_text(&self) -> String {
        let text = std::fs::read_to_string(self.stderr.path()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("---- {} stderr ----\n{}", self.name, self.stderr_text());
        }
    }
}

/// Receives events until `handle` returns `Some`, for at most `timeout`;
/// `what` names the wait in the failure.
fn wait_for<T>(
    events: &Receiver<(usize, Result<Value, String>)>,
    timeout: Duration,
    what: &str,
    mut handle: impl FnMut(usize, Value) -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match events.recv_timeout(left) {
            Ok((index, Ok(event))) => {
                if let Some(done) = handle(index, event) {
                    return done;
                }
            }
            Ok((index, Err(line))) => panic!("script #{index} printed a non-JSON line: {line:?}"),
            Err(RecvTimeoutError::Timeout) => {
                panic!("timed out after {timeout:?} waiting for {what}")
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("every script closed its stdout while waiting for {what}")
            }
        }
    }
}

/// Every record of every partition of `topic`, read over HTTP.
fn read_topic(client: &Client, topic: &str, partitions: u32) -> Vec<Vec<Value>> {
    (0..partitions).map(|p| client.read_all(topic, p)).collect()
}

// ---------------------------------------------------------------------
// 1. Idempotent producer across kill -9, and across a pause
// ---------------------------------------------------------------------

/// Messages the producer sends.
const IDEMPOTENT_COUNT: usize = 20_000;
/// The producer waits for the test's go-ahead before message GATE.
const IDEMPOTENT_GATE: usize = 12_000;
/// Acknowledgements seen before the server is disrupted.
const DISRUPT_AFTER_ACKS: u64 = 3_000;
/// The producer's request timeout when the server is paused: short, so
/// requests time out and are sent again on a new connection.
const PAUSE_REQUEST_TIMEOUT_MS: u64 = 1_000;

/// What happens to the server while the idempotent producer runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Disruption {
    /// SIGKILL, then a restart on the same data directory and Kafka port.
    Kill9,
    /// SIGSTOP until the producer has given up on requests in flight
    /// (closing their connection and sending them again on a new one),
    /// then SIGCONT: the paused server still holds the first copies.
    Pause,
}

#[test]
fn idempotent_producer_stores_every_acknowledged_message_once_across_sigkill() {
    let retransmitted = produce_idempotently_through(Disruption::Kill9);
    // Messages sent again after the kill (the batches in flight then):
    // shown, not asserted, as it depends on the moment of the kill.
    eprintln!("retransmitted after the kill: {retransmitted}");
}

#[test]
fn idempotent_producer_retries_after_request_timeouts_store_nothing_twice() {
    let retransmitted = produce_idempotently_through(Disruption::Pause);
    assert!(retransmitted > 0, "the paused requests were sent again");
}

/// Runs `idempotent_produce.py` against a server disrupted by `disruption`
/// after the first acknowledgements, then asserts that every message was
/// acknowledged and is stored exactly once, each partition in production
/// order, and nothing else is stored. Returns how many messages the
/// producer transmitted more than once.
fn produce_idempotently_through(disruption: Disruption) -> u64 {
    let port = free_port_below_ephemeral();
    let kafka_listen = format!("127.0.0.1:{port}");
    let mut server = Server::start(&["--kafka-listen", &kafka_listen]);
    let topic = "idempotent";
    server.create_topic(&json!({"name": topic, "partitions": 3}));
    let kafka = server.kafka_addr();
    let acked_dir = tempfile::tempdir().expect("a temp dir");
    let acked_path = acked_dir.path().join("acked.txt");
    let request_timeout_ms = match disruption {
        Disruption::Kill9 => 30_000,
        Disruption::Pause => PAUSE_REQUEST_TIMEOUT_MS,
    };
    let (tx, events) = mpsc::channel();
    let mut producer = spawn_idempotent_producer(
        &kafka.to_string(),
        topic,
        &acked_path,
        IDEMPOTENT_GATE,
        request_timeout_ms,
        None,
        tx,
    );
    let secs = Duration::from_secs;
    wait_for(&events, secs(60), "the first acks", |_, e| {
        (e["event"] == "acked" && e["count"].as_u64() >= Some(DISRUPT_AFTER_ACKS)).then_some(())
    });
    let server = match disruption {
        Disruption::Kill9 => {
            server.kill9();
            let server = server.restart_with(&["--kafka-listen", &kafka_listen]);
            assert_eq!(server.kafka_addr(), kafka, "restarted on the same port");
            // The rest of the messages (from the gate on) go to the new
            // server.
            producer.send_line();
            server
        }
        Disruption::Pause => {
            signal(&server, libc::SIGSTOP);
            // Messages from the gate on are sent to the paused server for
            // sure: their requests time out.
            producer.send_line();
            let error = wait_for(&events, secs(60), "the producer to give up", |_, e| {
                (e["event"] == "request_timeout").then_some(e)
            });
            eprintln!("the producer while the server is paused: {error}");
            signal(&server, libc::SIGCONT);
            server
        }
    };
    let acked_before = acked_ids(&acked_path).len();
    let done = wait_for(&events, secs(120), "the producer's end", |_, e| {
        (e["event"] == "done").then_some(e)
    });
    producer.wait_success(secs(30));
    eprintln!("acknowledged before the {disruption:?}: {acked_before}; at the end: {done}");
    assert!(
        acked_before <= IDEMPOTENT_GATE,
        "the producer waited at the gate: {acked_before} acknowledged before the {disruption:?}"
    );
    assert_all_acknowledged_once(&done, &acked_path, &server.client(), topic);
    done["retransmitted"].as_u64().expect("retransmitted")
}

/// The secret of the bootstrap (admin) token where the server has auth.
const BOOTSTRAP_TOKEN: &str = "kafka-python-tests-bootstrap-secret";
/// What the rate-limited token may produce: a tenth of IDEMPOTENT_COUNT,
/// so the producer needs about ten seconds however fast it is, and waits.
const RATE_LIMIT_RECORDS_PER_SECOND: u64 = 2_000;

#[test]
fn rate_limited_idempotent_producer_is_slowed_down_not_refused() {
    let server = Server::start_env(
        &["--kafka-listen", "127.0.0.1:0", "--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP_TOKEN)],
    );
    let admin = server.client().with_token(BOOTSTRAP_TOKEN);
    let topic = "idempotent";
    admin.create_topic(&json!({"name": topic, "partitions": 3}));
    let (status, body) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "kafka-writer", "grants": [format!("produce:{topic}")],
                "produce_records_per_second": RATE_LIMIT_RECORDS_PER_SECOND}),
    );
    assert_eq!(status, 201, "{body}");
    let token = body["token"].as_str().expect("the token's secret");
    let acked_dir = tempfile::tempdir().expect("a temp dir");
    let acked_path = acked_dir.path().join("acked.txt");
    let (tx, events) = mpsc::channel();
    let mut producer = spawn_idempotent_producer(
        &server.kafka_addr().to_string(),
        topic,
        &acked_path,
        IDEMPOTENT_COUNT,
        30_000,
        Some(token),
        tx,
    );
    let done = wait_for(
        &events,
        Duration::from_secs(120),
        "the producer's end",
        |_, e| (e["event"] == "done").then_some(e),
    );
    producer.wait_success(Duration::from_secs(30));
    assert_all_acknowledged_once(&done, &acked_path, &admin, topic);
    // Slowed down: the server held produce requests for the rate limit.
    let metrics = admin.send("GET", "/metrics", None, &[], None).text;
    let sample = |name: &str| -> f64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .map_or(0.0, |v| v.trim().parse().expect("a number"))
    };
    let held = sample("kappa_kafka_produce_throttle_seconds_count");
    let held_secs = sample("kappa_kafka_produce_throttle_seconds_sum");
    eprintln!("produce requests held by the rate limit: {held}, {held_secs:.2} s in all");
    assert!(
        held >= 1.0 && held_secs > 0.0,
        "the rate-limited producer was never held: {held} requests, {held_secs} s"
    );
}

/// Starts `idempotent_produce.py` (IDEMPOTENT_COUNT messages to `topic`,
/// waiting at `gate`), logging in with `token` if given.
fn spawn_idempotent_producer(
    kafka: &str,
    topic: &str,
    acked_path: &Path,
    gate: usize,
    request_timeout_ms: u64,
    token: Option<&str>,
    events: Sender<(usize, Result<Value, String>)>,
) -> Script {
    let (count, gate, timeout) = (
        IDEMPOTENT_COUNT.to_string(),
        gate.to_string(),
        request_timeout_ms.to_string(),
    );
    let acked = acked_path.to_str().expect("a UTF-8 temp path");
    let mut args = vec![kafka, topic, &count, &gate, acked, &timeout];
    args.extend(token);
    Script::spawn("idempotent_produce.py", &args, 0, events)
}

/// Asserts the producer's `done` report says every message was
/// acknowledged, once, and that the topic holds exactly those, each once
/// and in order ([`stored_once_in_order`]).
fn assert_all_acknowledged_once(done: &Value, acked_path: &Path, client: &Client, topic: &str) {
    assert_eq!(done["failed"], json!(0), "{done}");
    assert_eq!(done["unflushed"], json!(0), "{done}");
    let acked = acked_ids(acked_path);
    assert_eq!(
        acked.len(),
        IDEMPOTENT_COUNT,
        "every message acknowledged once"
    );
    let stored = stored_once_in_order(client, topic);
    for id in &acked {
        assert!(
            stored.contains_key(id),
            "acknowledged id {id} is not stored"
        );
    }
}

/// Sends `signal` to the running server (by its own child's PID).
fn signal(server: &Server, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(server.pid().expect("the server runs")).expect("a pid_t");
    // SAFETY: kill(2) on the PID of the harness's unreaped child.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}): {}",
        std::io::Error::last_os_error()
    );
}

/// Where each id of the idempotence topic is stored; asserts each is
/// stored once, was sent (an id below the count, with its key), and that
/// ids increase along each partition (the idempotent producer keeps a
/// partition's order, also across its retries).
fn stored_once_in_order(client: &Client, topic: &str) -> HashMap<u64, (u32, u64)> {
    let mut stored: HashMap<u64, (u32, u64)> = HashMap::new();
    for (p, records) in read_topic(client, topic, 3).iter().enumerate() {
        let mut last_id = None;
        for r in records {
            let id = r["value"]["id"]
                .as_u64()
                .unwrap_or_else(|| panic!("a stored record that was never sent: {r}"));
            assert!(id < IDEMPOTENT_COUNT as u64, "id {id} was never sent: {r}");
            assert_eq!(r["key"], json!(format!("k{id}")), "{r}");
            let at = (p as u32, r["offset"].as_u64().expect("offset"));
            if let Some(first) = stored.insert(id, at) {
                panic!("id {id} is stored twice: at {first:?} and at {at:?}");
            }
            assert!(
                last_id < Some(id),
                "partition {p}: id {id} at offset {} after id {last_id:?}",
                at.1
            );
            last_id = Some(id);
        }
    }
    stored
}

/// A free port below the kernel's ephemeral range, for a Kafka listener
/// that must come back on the same port after a restart: a port of the
/// ephemeral range could meanwhile be taken by any outgoing connection,
/// even by one of the producer's reconnects to it.
fn free_port_below_ephemeral() -> u16 {
    const LOWEST: u16 = 10_000;
    let first_ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    assert!(
        first_ephemeral > LOWEST + 1_000,
        "ephemeral ports start at {first_ephemeral}"
    );
    // Tests of this process start in the same millisecond: each call gets
    // its own seed, or two of them would probe the same ports in turn.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut rng = Rng::new(
        now_ms() as u64
            ^ (u64::from(std::process::id()) << 40)
            ^ call.wrapping_mul(0x9E37_79B9_7F4A_7C15),
    );
    for _ in 0..100 {
        let port = LOWEST + rng.below(u64::from(first_ephemeral - LOWEST)) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {LOWEST}..{first_ephemeral} after 100 tries");
}

/// The ids in the producer's file of acknowledged messages, each once.
fn acked_ids(path: &Path) -> BTreeSet<u64> {
    let file = File::open(path).expect("the acked file exists");
    let mut ids = BTreeSet::new();
    for line in BufReader::new(file).lines() {
        let line = line.expect("reading the acked file");
        // The last line may be partly written when read during the run.
        let Ok(id) = line.parse::<u64>() else {
            continue;
        };
        assert!(ids.insert(id), "id {id} acknowledged twice");
    }
    ids
}

// ---------------------------------------------------------------------
// 2. A consumer group of three
// ---------------------------------------------------------------------

/// Partitions of the group test's topic.
const GROUP_PARTITIONS: u32 = 6;
/// Messages produced in each phase of the group test.
const PHASE_MESSAGES: u64 = 600;
/// The consumers' `session.timeout.ms` (the server's minimum).
const SESSION_TIMEOUT_MS: u64 = 6_000;

/// What the test knows of the group from the consumers' reports.
#[derive(Default)]
struct GroupView {
    /// Current assignment of each consumer (empty between a revocation and
    /// the next assignment).
    assigned: BTreeMap<usize, BTreeSet<u32>>,
    /// Id consumed at each (partition, offset), by anyone.
    consumed: BTreeMap<(u32, u64), u64>,
    /// Records consumed, counting repeats.
    deliveries: u64,
    /// Records consumed by each consumer, counting repeats.
    deliveries_by: BTreeMap<usize, u64>,
    /// Consumers that reported `closed`.
    closed: BTreeSet<usize>,
}

impl GroupView {
    fn apply(&mut self, index: usize, event: &Value) {
        let partitions = || -> BTreeSet<u32> {
            event["partitions"]
                .as_array()
                .expect("partitions")
                .iter()
                .map(|p| p.as_u64().expect("a partition") as u32)
                .collect()
        };
        match event["event"].as_str().expect("an event name") {
            "assigned" => {
                self.assigned.insert(index, partitions());
            }
            "revoked" => {
                self.assigned.insert(index, BTreeSet::new());
            }
            "consumed" => {
                for r in event["records"].as_array().expect("records") {
                    let (p, o, id) = (r[0].as_u64(), r[1].as_u64(), r[2].as_u64());
                    let (Some(p), Some(o), Some(id)) = (p, o, id) else {
                        panic!("bad record {r}");
                    };
                    self.deliveries += 1;
                    *self.deliveries_by.entry(index).or_default() += 1;
                    if let Some(seen) = self.consumed.insert((p as u32, o), id) {
                        assert_eq!(seen, id, "two ids consumed at {p}/{o}");
                    }
                }
            }
            "closed" => {
                self.closed.insert(index);
            }
            "committed" => {}
            "error" => eprintln!("consumer #{index}: {event}"),
            other => panic!("unknown event {other:?} from consumer #{index}"),
        }
    }

    /// True if exactly the consumers in `members` hold an assignment, each
    /// `per_member` partitions, together all of them once.
    fn split_among(&self, members: &[usize], per_member: usize) -> bool {
        let mut all = BTreeSet::new();
        for m in members {
            let Some(set) = self.assigned.get(m) else {
                return false;
            };
            if set.len() != per_member || !set.iter().all(|p| all.insert(*p)) {
                return false;
            }
        }
        all.len() == GROUP_PARTITIONS as usize
    }

    /// True if every offset below `ends[p]` was consumed on each partition.
    fn consumed_up_to(&self, ends: &[u64]) -> bool {
        ends.iter()
            .enumerate()
            .all(|(p, end)| (0..*end).all(|o| self.consumed.contains_key(&(p as u32, o))))
    }
}

/// Applies the consumers' events to `view` until `done(view)` holds (at
/// most `timeout`).
fn wait_group(
    events: &Receiver<(usize, Result<Value, String>)>,
    view: &mut GroupView,
    what: &str,
    timeout: Duration,
    done: impl Fn(&GroupView) -> bool,
) {
    if done(view) {
        return;
    }
    wait_for(events, timeout, what, |i, e| {
        view.apply(i, &e);
        done(view).then_some(())
    })
}

/// Produces ids `ids` over HTTP, id `i` to partition `i % 6`.
fn produce_ids(client: &Client, topic: &str, ids: std::ops::Range<u64>) {
    let records: Vec<Value> = ids
        .map(|i| {
            json!({"key": format!("k{i}"), "partition": i % GROUP_PARTITIONS as u64,
                        "value": {"id": i}})
        })
        .collect();
    client.produce(topic, &json!(records));
}

#[test]
fn three_consumers_split_rebalance_on_leave_and_crash_and_commit_everything() {
    let server = Server::start(KAFKA_ARGS);
    let client = server.client();
    let (topic, group) = ("orders6", "trio");
    server.create_topic(&json!({"name": topic, "partitions": GROUP_PARTITIONS}));
    produce_ids(&client, topic, 0..PHASE_MESSAGES);
    let (tx, events) = mpsc::channel();
    let kafka = server.kafka_addr().to_string();
    let session = SESSION_TIMEOUT_MS.to_string();
    let mut consumers: Vec<Script> = (0..3)
        .map(|i| {
            Script::spawn(
                "group_consume.py",
                &[&kafka, topic, group, &session],
                i,
                tx.clone(),
            )
        })
        .collect();
    drop(tx);
    let mut view = GroupView::default();
    let secs = Duration::from_secs;

    wait_group(
        &events,
        &mut view,
        "two partitions for each of three consumers",
        secs(30),
        |v| v.split_among(&[0, 1, 2], 2),
    );
    produce_ids(&client, topic, PHASE_MESSAGES..2 * PHASE_MESSAGES);
    let ends = client.end_offsets(topic);
    wait_group(&events, &mut view, "phase 1 consumed", secs(30), |v| {
        v.consumed_up_to(&ends)
    });

    // A graceful leave: the other two take over at once.
    consumers[2].send_line();
    wait_group(&events, &mut view, "consumer 2 closed", secs(30), |v| {
        v.closed.contains(&2)
    });
    consumers[2].wait_success(Duration::from_secs(30));
    view.assigned.remove(&2);
    wait_group(
        &events,
        &mut view,
        "three partitions for each of two consumers",
        secs(30),
        |v| v.split_among(&[0, 1], 3),
    );
    produce_ids(&client, topic, 2 * PHASE_MESSAGES..3 * PHASE_MESSAGES);
    let ends = client.end_offsets(topic);
    wait_group(&events, &mut view, "phase 2 consumed", secs(30), |v| {
        v.consumed_up_to(&ends)
    });

    // A crash while consumer 1 is busy with new messages: consumer 0 gets
    // everything after the session timeout and goes on from consumer 1's
    // last commit (what it consumed after that is consumed again).
    let before = view.deliveries_by.get(&1).copied().unwrap_or(0);
    produce_ids(&client, topic, 3 * PHASE_MESSAGES..4 * PHASE_MESSAGES);
    wait_group(&events, &mut view, "consumer 1 consuming", secs(30), |v| {
        v.deliveries_by.get(&1).copied().unwrap_or(0) > before
    });
    consumers[1].kill9();
    view.assigned.remove(&1);
    produce_ids(&client, topic, 4 * PHASE_MESSAGES..5 * PHASE_MESSAGES);
    let killed = Instant::now();
    wait_group(
        &events,
        &mut view,
        "all six partitions for consumer 0",
        secs(30),
        |v| v.split_among(&[0], GROUP_PARTITIONS as usize),
    );
    eprintln!(
        "consumer 0 got all partitions {:?} after the kill",
        killed.elapsed()
    );
    let ends = client.end_offsets(topic);
    wait_group(
        &events,
        &mut view,
        "phases 3 and 4 consumed",
        secs(30),
        |v| v.consumed_up_to(&ends),
    );
    assert_eq!(ends.iter().sum::<u64>(), 5 * PHASE_MESSAGES);

    // Every message consumed (at least once) is the one stored there.
    for (p, records) in read_topic(&client, topic, GROUP_PARTITIONS)
        .iter()
        .enumerate()
    {
        for r in records {
            let at = (p as u32, r["offset"].as_u64().expect("offset"));
            assert_eq!(
                view.consumed.get(&at).copied(),
                r["value"]["id"].as_u64(),
                "{at:?}"
            );
        }
    }
    eprintln!(
        "{} messages, {} deliveries",
        view.consumed.len(),
        view.deliveries
    );

    // The commits after processing reach the end: HTTP and /metrics agree.
    let path = format!("/v1/groups/{group}/offsets?topic={topic}");
    let body = eventually(
        "committed offsets at the end",
        Duration::from_secs(30),
        || {
            let (status, body) = client.get(&path);
            assert_eq!(status, 200, "{body}");
            let parts = body["topics"][0]["partitions"].as_array()?.clone();
            let at_end = parts.len() == GROUP_PARTITIONS as usize
                && parts.iter().all(|p| {
                    let end = ends[p["partition"].as_u64().unwrap() as usize];
                    p["committed"].as_u64() == Some(end) && p["lag"] == json!(0)
                });
            at_end.then_some(body)
        },
    );
    assert_eq!(body["topics"][0]["topic"], json!(topic), "{body}");
    let metrics = eventually(
        "the group's lag in /metrics",
        Duration::from_secs(30),
        || {
            let r = client.send("GET", "/metrics", None, &[], None);
            assert_eq!(r.status, 200);
            let text = r.text;
            let lines: Vec<String> = text
                .lines()
                .filter(|l| {
                    l.starts_with("kappa_group_lag{")
                        && l.contains(&format!("group=\"{group}\""))
                        && l.contains(&format!("topic=\"{topic}\""))
                })
                .map(str::to_string)
                .collect();
            (lines.len() == GROUP_PARTITIONS as usize && lines.iter().all(|l| l.ends_with(" 0")))
                .then_some(lines)
        },
    );
    eprintln!("{}", metrics.join("\n"));

    consumers[0].send_line();
    wait_group(&events, &mut view, "consumer 0 closed", secs(30), |v| {
        v.closed.contains(&0)
    });
    consumers[0].wait_success(Duration::from_secs(30));
}

// ---------------------------------------------------------------------
// 3. kafka-python
// ---------------------------------------------------------------------

/// Records kafka-python produces; records produced over HTTP after them.
const KAFKA_PYTHON_COUNT: u64 = 300;
const HTTP_COUNT: u64 = 30;

#[test]
fn kafka_python_produces_and_consumes_what_http_reads_and_writes() {
    let server = Server::start(KAFKA_ARGS);
    let client = server.client();
    let topic = "pyclients";
    server.create_topic(&json!({"name": topic, "partitions": 3}));
    let kafka = server.kafka_addr().to_string();

    let produced = run_kafka_python(&["produce", &kafka, topic, &KAFKA_PYTHON_COUNT.to_string()]);
    let produced = produced["produced"].as_array().expect("produced").clone();
    assert_eq!(produced.len() as u64, KAFKA_PYTHON_COUNT);
    let stored = read_topic(&client, topic, 3);
    let at = |p: u64, o: u64| -> &Value {
        let r = &stored[p as usize][o as usize];
        assert_eq!(r["offset"], json!(o), "HTTP reads offsets in order");
        r
    };
    for m in &produced {
        let [i, p, o, ts] = [0, 1, 2, 3].map(|k| m[k].as_u64().expect("metadata numbers"));
        let r = at(p, o);
        assert_eq!(p, i % 3, "sent to partition i % 3: {m}");
        assert_eq!(r["key"], json!(format!("key-{i}")), "{r}");
        assert_eq!(
            r["value"],
            json!({"n": i, "text": format!("café {i}")}),
            "{r}"
        );
        assert_eq!(
            r["headers"],
            json!({"seq": i.to_string(), "source": "kafka-python"})
        );
        assert_eq!(r["timestamp"].as_u64(), Some(ts), "{r}");
    }

    // Records produced over HTTP are consumed by kafka-python as well.
    let http: Vec<Value> = (0..HTTP_COUNT)
        .map(|i| {
            json!({"key": format!("http-{i}"), "partition": i % 3,
                   "timestamp": 1_767_225_600_000i64 + i as i64,
                   "headers": {"via": "http", "n": i.to_string()},
                   "value": {"http": i, "nested": {"list": [1, 2, i]}}})
        })
        .collect();
    client.produce(topic, &json!(http));

    let group = "pyreaders";
    let total = KAFKA_PYTHON_COUNT + HTTP_COUNT;
    let consumed = run_kafka_python(&["consume", &kafka, topic, &total.to_string(), group]);
    let consumed = consumed["consumed"].as_array().expect("consumed").clone();
    let stored = read_topic(&client, topic, 3);
    let mut seen = BTreeSet::new();
    for c in &consumed {
        let (p, o) = (
            c["partition"].as_u64().unwrap(),
            c["offset"].as_u64().unwrap(),
        );
        assert!(seen.insert((p, o)), "{p}/{o} consumed twice");
        let r = &stored[p as usize][o as usize];
        assert_eq!(c["key"], r["key"], "{c} vs {r}");
        assert_eq!(c["timestamp"], r["timestamp"], "{c} vs {r}");
        let value: Value = serde_json::from_str(c["value"].as_str().unwrap()).unwrap();
        assert_eq!(value, r["value"], "{c} vs {r}");
        let headers: BTreeMap<String, Value> = c["headers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0].as_str().unwrap().to_string(), h[1].clone()))
            .collect();
        assert_eq!(json!(headers), r["headers"], "{c} vs {r}");
        if let Some(i) = value["n"].as_u64() {
            // Byte for byte what kafka-python sent (Python's json.dumps).
            assert_eq!(
                c["value"].as_str().unwrap(),
                format!("{{\"n\": {i}, \"text\": \"caf\\u00e9 {i}\"}}")
            );
        }
    }
    assert_eq!(seen.len() as u64, total, "every record consumed");

    client.assert_group_caught_up(group, topic);

    // A group that only committed over HTTP is listed to Kafka clients too.
    let (status, body) = client.post_json(
        "/v1/groups/http-only/offsets",
        &json!({"topic": topic, "offsets": [{"partition": 0, "offset": 1}]}),
    );
    assert_eq!(status, 200, "{body}");
    let listed = run_kafka_python(&["groups", &kafka]);
    assert_eq!(listed["groups"], json!(["http-only", group]), "{listed}");
}

/// Runs `kafka_python_roundtrip.py` with `args` to its end (bounded) and
/// returns the JSON it printed.
fn run_kafka_python(args: &[&str]) -> Value {
    let (tx, events) = mpsc::channel();
    let mut script = Script::spawn("kafka_python_roundtrip.py", args, 0, tx);
    let answer = wait_for(
        &events,
        Duration::from_secs(60),
        "kafka-python's answer",
        |_, e| Some(e),
    );
    script.wait_success(Duration::from_secs(30));
    answer
}
