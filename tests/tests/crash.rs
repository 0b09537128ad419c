//! Crash durability: on a topic with `fsync: always`, 3 partitions and
//! small segments (so segments roll under load), 8 client threads produce
//! small batches (random keys, unique values) while the server is
//! SIGKILLed after 400 acknowledged requests. After a restart on the same
//! data directory every acknowledged record is there exactly once, at the
//! partition and offset it was given; every partition reads densely from 0
//! to its end; nothing that was never sent appears. The same again on the
//! recovered server (a second crash), then new appends continue at the end.
//! `KAPPA_CRASH_ROUNDS` sets the number of crashes (2 by default).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use kappa_tests::{json, produced_of, Client, Rng, Server, Value};

const TOPIC: &str = "crash";
const PARTITIONS: u32 = 3;
const THREADS: usize = 8;
const ACKS_BEFORE_KILL: usize = 400;
/// Bounds of each producer thread.
const MAX_REQUESTS_PER_THREAD: usize = 20_000;
const THREAD_DEADLINE: Duration = Duration::from_secs(90);

/// An acknowledged record.
struct Ack {
    partition: u32,
    offset: u64,
    key: Value,
    value: Value,
}

#[derive(Default)]
struct Shared {
    acks: Mutex<Vec<Ack>>,
    acked_requests: AtomicUsize,
    /// Signalled when `acked_requests` reaches `ACKS_BEFORE_KILL`.
    reached: (Mutex<bool>, Condvar),
    /// Ids of every value ever sent (acknowledged or not).
    sent: Mutex<HashSet<String>>,
    /// Set just before the SIGKILL: transport errors are expected from then on.
    killing: AtomicBool,
    problems: Mutex<Vec<String>>,
}

fn producer(client: Client, writer: usize, shared: Arc<Shared>) {
    let mut rng = Rng::new(0x5eed_0000 + writer as u64);
    let started = Instant::now();
    for seq in 0..MAX_REQUESTS_PER_THREAD {
        if started.elapsed() > THREAD_DEADLINE {
            shared
                .problems
                .lock()
                .unwrap()
                .push(format!("writer {writer}: deadline"));
            return;
        }
        let n = 1 + rng.below(4) as usize;
        let records: Vec<Value> = (0..n)
            .map(|i| {
                let id = format!("{writer}-{seq}-{i}");
                let pad = "x".repeat(rng.below(64) as usize);
                let value = json!({"id": id, "pad": pad});
                if rng.below(8) == 0 {
                    json!({"value": value})
                } else {
                    json!({"key": format!("key-{}", rng.below(40)), "value": value})
                }
            })
            .collect();
        {
            let mut sent = shared.sent.lock().unwrap();
            for r in &records {
                sent.insert(r["value"]["id"].as_str().unwrap().to_string());
            }
        }
        let body = serde_json::to_vec(&json!({ "records": records })).unwrap();
        let reply = client.try_send(
            "POST",
            &format!("/v1/topics/{TOPIC}/records"),
            Some("application/json"),
            &[],
            Some(&body),
        );
        match reply {
            Ok(reply) if reply.status == 200 => {
                let produced = produced_of(&reply.body);
                assert_eq!(produced.len(), n, "{}", reply.text);
                {
                    let mut acks = shared.acks.lock().unwrap();
                    for (r, p) in records.iter().zip(produced) {
                        acks.push(Ack {
                            partition: p.partition,
                            offset: p.offset,
                            key: r.get("key").cloned().unwrap_or(Value::Null),
                            value: r["value"].clone(),
                        });
                    }
                }
                if shared.acked_requests.fetch_add(1, Ordering::SeqCst) + 1 == ACKS_BEFORE_KILL {
                    let (lock, cv) = &shared.reached;
                    *lock.lock().unwrap() = true;
                    cv.notify_all();
                }
            }
            Ok(reply) => {
                // Once the process is dead no HTTP answer can come; before,
                // every request must succeed.
                shared
                    .problems
                    .lock()
                    .unwrap()
                    .push(format!("writer {writer}: {} {}", reply.status, reply.text));
                return;
            }
            Err(error) => {
                if !shared.killing.load(Ordering::SeqCst) {
                    shared.problems.lock().unwrap().push(format!(
                        "writer {writer}: transport error before the kill: {error}"
                    ));
                }
                return;
            }
        }
    }
    shared.problems.lock().unwrap().push(format!(
        "writer {writer}: still running after {MAX_REQUESTS_PER_THREAD} requests"
    ));
}

/// One round: 8 writers until `ACKS_BEFORE_KILL` acknowledged requests,
/// then SIGKILL mid-stream. Returns the acknowledged records and the ids
/// of every value sent.
fn produce_and_crash(server: &mut Server, round: usize) -> (Vec<Ack>, HashSet<String>) {
    let shared = Arc::new(Shared::default());
    let writers: Vec<_> = (0..THREADS)
        .map(|w| {
            let (client, shared) = (server.client(), shared.clone());
            thread::spawn(move || producer(client, round * THREADS + w, shared))
        })
        .collect();
    // Wait (bounded) for the acknowledgements, then kill mid-stream.
    {
        let (lock, cv) = &shared.reached;
        let (reached, timeout) = cv
            .wait_timeout_while(lock.lock().unwrap(), Duration::from_secs(60), |reached| {
                !*reached
            })
            .unwrap();
        assert!(
            *reached && !timeout.timed_out(),
            "round {round}: only {} acknowledged requests within 60 s; problems: {:?}",
            shared.acked_requests.load(Ordering::SeqCst),
            shared.problems.lock().unwrap()
        );
    }
    shared.killing.store(true, Ordering::SeqCst);
    server.kill9();
    for w in writers {
        w.join().expect("a producer thread panicked");
    }
    let problems = shared.problems.lock().unwrap().clone();
    assert!(problems.is_empty(), "round {round}: {problems:#?}");
    assert!(shared.acked_requests.load(Ordering::SeqCst) >= ACKS_BEFORE_KILL);
    let acks = std::mem::take(&mut *shared.acks.lock().unwrap());
    let sent = std::mem::take(&mut *shared.sent.lock().unwrap());
    (acks, sent)
}

/// Checks the recovered topic against everything acknowledged and sent;
/// returns the end offsets.
fn verify(server: &Server, acks: &[Ack], sent: &HashSet<String>, round: usize) -> Vec<u64> {
    assert_eq!(server.get("/ready").0, 200);
    let ends = server.end_offsets(TOPIC);
    // Dense partitions; every stored value was sent, and is stored once.
    let mut stored: BTreeMap<(u32, u64), (Value, Value)> = BTreeMap::new();
    let mut ids = HashSet::new();
    for p in 0..PARTITIONS {
        let records = server.read_all(TOPIC, p);
        assert_eq!(
            records.len() as u64,
            ends[p as usize],
            "round {round}, partition {p}: read count = end offset"
        );
        for (i, r) in records.iter().enumerate() {
            assert_eq!(
                r["offset"],
                json!(i),
                "round {round}: partition {p} is dense from 0: {r}"
            );
            let id = r["value"]["id"]
                .as_str()
                .unwrap_or_else(|| panic!("not ours: {r}"))
                .to_string();
            assert!(
                sent.contains(&id),
                "round {round}: partition {p} offset {i}: {id} was never sent"
            );
            assert!(
                ids.insert(id.clone()),
                "round {round}: {id} is stored twice"
            );
            stored.insert((p, i as u64), (r["key"].clone(), r["value"].clone()));
        }
    }
    // Every acknowledged record, at the place it was given.
    for ack in acks {
        let at = (ack.partition, ack.offset);
        let (key, value) = stored.get(&at).unwrap_or_else(|| {
            panic!(
                "round {round}: acknowledged record {} at {at:?} is missing (ends {ends:?})",
                ack.value
            )
        });
        assert_eq!(value, &ack.value, "round {round}: at {at:?}");
        assert_eq!(key, &ack.key, "round {round}: at {at:?}");
    }
    ends
}

#[test]
fn acknowledged_records_survive_sigkill_exactly_once_at_their_offsets() {
    let mut server = Server::start(&[]);
    let created = server.create_topic(
        &json!({"name": TOPIC, "partitions": PARTITIONS, "fsync": "always",
                                              "segment_bytes": 16_384}),
    );
    assert_eq!(created["config"]["fsync"], "always", "{created}");

    let mut all_acks = Vec::new();
    let mut all_sent = HashSet::new();
    // Two rounds in CI; `KAPPA_CRASH_ROUNDS=20` for the figures in TESTING.md.
    let rounds: usize = std::env::var("KAPPA_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(2);
    for round in 0..rounds {
        let (acks, sent) = produce_and_crash(&mut server, round);
        assert!(
            acks.len() >= ACKS_BEFORE_KILL,
            "{} acknowledged records",
            acks.len()
        );
        all_acks.extend(acks);
        all_sent.extend(sent);
        server = server.restart();
        verify(&server, &all_acks, &all_sent, round);
        eprintln!(
            "round {round}: SIGKILL, restart, {} acknowledged records checked ({} sent)",
            all_acks.len(),
            all_sent.len()
        );
    }
    let segments: u64 = server.describe(TOPIC)["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["segment_count"].as_u64().unwrap())
        .sum();
    assert!(
        segments > u64::from(PARTITIONS),
        "segments rolled: {segments}"
    );

    // Appends continue at the end of every partition.
    let ends = server.end_offsets(TOPIC);
    let more: Vec<Value> = (0..PARTITIONS)
        .map(|p| json!({"value": {"id": format!("after-{p}")}, "partition": p}))
        .collect();
    let produced = server.produce(TOPIC, &Value::Array(more));
    for (p, at) in produced.iter().enumerate() {
        assert_eq!(at.partition, p as u32);
        assert_eq!(at.offset, ends[p], "partition {p} continues at its end");
        let page = server.read(TOPIC, at.partition, &format!("offset={}", at.offset));
        assert_eq!(
            page["records"][0]["value"],
            json!({"id": format!("after-{p}")})
        );
    }
    assert_eq!(
        server.end_offsets(TOPIC),
        ends.iter().map(|e| e + 1).collect::<Vec<_>>()
    );
}
