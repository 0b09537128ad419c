//! A derived stream's output path: its records are appended ahead of the
//! commit, numbered per output partition (`kappa_processor`'s sequenced
//! outputs). Whatever the crashes — inside the append, before or after the
//! RocksDB commit, or with records appended ahead and no commit at all —
//! the output topic holds every record once, in order, in the partition a
//! plain run puts it in; and a live run's records equal a replay's.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{Harness, Lcg, Step};
use kappa_log::io::FaultInjector;
use kappa_log::{FsyncPolicy, ManualTime, TopicConfig};
use kappa_processor::dsl::Pipeline;
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::runner::{CrashPoint, RunOptions, Runtime};
use serde_json::{json, Value};

/// Input records.
const EVENTS: u64 = 400;

/// How long a test waits for a version that should not be waiting.
const PATIENCE: Duration = Duration::from_secs(30);

fn plan(topic: &str) -> Plan {
    Pipeline::from_topic("bids")
        .event_time_field("ts")
        .filter(Expr::field("price").gt(Expr::lit(10)))
        .select([
            ("auction", Expr::field("auction")),
            ("euros", Expr::lit(0.908).mul(Expr::field("price"))),
            ("ts", Expr::field("ts")),
            ("extra", Expr::field("extra")),
        ])
        .to_topic(topic)
}

/// Append time of the first bid (a few bids share each millisecond).
const T0: i64 = 1_700_000_000_000;

/// Bids in two input partitions, most keyed by auction, every seventh
/// without a key, appended at the same times in every harness (so that
/// every run reads them in one order); `topics` created with three
/// partitions each.
fn loaded(topics: &[&str]) -> Harness {
    let (h, time) = empty(topics);
    for i in 0..EVENTS {
        produce_bid(&h, &time, i);
    }
    time.set(T0 + EVENTS as i64);
    h
}

/// A harness with a manual clock at [`T0`], the input topic and `topics`.
fn empty(topics: &[&str]) -> (Harness, ManualTime) {
    let time = ManualTime::new(T0);
    let h = Harness::with_time(&time);
    h.create_topic("bids", 2);
    for t in topics {
        h.create_topic(t, 3);
    }
    (h, time)
}

/// Appends bid `i` at its time.
fn produce_bid(h: &Harness, time: &ManualTime, i: u64) {
    time.set(T0 + i as i64 / 3);
    h.produce(&bid(i));
}

/// Bid `i`.
fn bid(i: u64) -> Step {
    Step::Produce {
        topic: "bids".into(),
        partition: Some((i % 2) as u32),
        key: (!i.is_multiple_of(7)).then(|| format!("a{}", i % 13)),
        value: json!({"auction": i % 13, "price": i % 50, "ts": 1_000 + i, "extra": format!("x{i}\"")}),
        timestamp: Some(1_000 + i as i64),
    }
}

fn options(workers: usize, crashing: bool) -> RunOptions {
    RunOptions {
        max_poll_records: if crashing { 3 } else { 5_000 },
        append_ahead_records: if crashing { 2 } else { 4_096 },
        workers,
        ..RunOptions::default()
    }
}

/// Fails naming the first record where `got` and `expected` part.
fn assert_same(got: &[Vec<Value>], expected: &[Vec<Value>], what: &str) {
    for (p, (g, e)) in got.iter().zip(expected).enumerate() {
        if let Some(i) = (0..g.len().max(e.len())).find(|&i| g.get(i) != e.get(i)) {
            panic!(
                "{what}: partition {p} record {i} is {:?}, expected {:?} ({} records, expected {})",
                g.get(i),
                e.get(i),
                g.len(),
                e.len()
            );
        }
    }
    assert_eq!(got.len(), expected.len(), "{what}: partitions");
}

/// Each partition's records, in offset order.
fn by_partition(h: &Harness, topic: &str) -> Vec<Vec<Value>> {
    let t = h.log.topic(topic).unwrap();
    t.partitions()
        .iter()
        .map(|p| {
            p.read(p.start_offset(), u64::MAX, u64::MAX)
                .unwrap()
                .records()
                .map(|r| {
                    json!({
                        "key": r.key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                        "value": String::from_utf8_lossy(&r.value),
                        "timestamp": r.timestamp,
                    })
                })
                .collect()
        })
        .collect()
}

fn ends(h: &Harness) -> Vec<u64> {
    let t = h.log.topic("bids").unwrap();
    t.partitions().iter().map(|p| p.end_offset()).collect()
}

/// What a plain run writes: the expected records.
fn plain() -> Vec<Vec<Value>> {
    let h = loaded(&["out"]);
    let mut rt = h.open_runtime(&plan("out"), options(1, false));
    h.run_to_end(&mut rt, &plan("out"));
    drop(rt);
    let records = by_partition(&h, "out");
    let passed = (0..EVENTS).filter(|i| i % 50 > 10).count();
    assert_eq!(records.iter().map(Vec::len).sum::<usize>(), passed);
    assert!(
        records.iter().all(|p| !p.is_empty()),
        "every partition gets records"
    );
    records
}

/// Runs to the end through random commits and crashes at `points` (and
/// crashes without a commit), reopening the log and store after each.
fn crashing_run(points: &[CrashPoint], seed: u64, workers: usize) -> Harness {
    let plan = plan("out");
    let mut h = loaded(&["out"]);
    let mut rng = Lcg(seed);
    let mut rt = Some(h.open_runtime(&plan, options(workers, true)));
    let mut crashes = 0;
    for _ in 0..100_000 {
        let r = rt.as_mut().unwrap();
        if r.positions() == ends(&h).as_slice() {
            break;
        }
        r.poll_once().unwrap();
        let crash = match rng.next(8) {
            0 => {
                r.commit().unwrap();
                false
            }
            1 => true,
            2 => {
                let point = points[rng.next(points.len() as u64) as usize];
                // (After the stored outbox's append: none here, no crash.)
                let _ = r.commit_crashing(point);
                true
            }
            _ => false,
        };
        if crash {
            crashes += 1;
            drop(rt.take());
            h = h.reopen();
            rt = Some(h.open_runtime(&plan, options(workers, true)));
        }
    }
    assert!(crashes > 5, "seed {seed}: only {crashes} crashes");
    let mut rt = rt.unwrap();
    h.run_to_end(&mut rt, &plan);
    drop(rt);
    h
}

#[test]
fn every_record_is_written_once_in_order_whatever_the_crash_point() {
    let expected = plain();
    for (points, what) in [
        (&[CrashPoint::InsideAppend][..], "inside the append"),
        (&[CrashPoint::BeforeCommit][..], "before the commit"),
        (&[CrashPoint::AfterCommit][..], "after the commit"),
        (
            &[
                CrashPoint::InsideAppend,
                CrashPoint::BeforeCommit,
                CrashPoint::AfterCommit,
                CrashPoint::AfterAppend,
            ][..],
            "any point",
        ),
    ] {
        for seed in 1..=3 {
            for workers in [1, 2] {
                let h = crashing_run(points, seed, workers);
                assert_same(
                    &by_partition(&h, "out"),
                    &expected,
                    &format!("crashes {what}, seed {seed}, {workers} workers"),
                );
            }
        }
    }
}

#[test]
fn records_appended_ahead_of_a_lost_commit_are_made_again_and_dropped() {
    let expected = plain();
    let plan = plan("out");
    let mut h = loaded(&["out"]);
    // Everything processed and appended ahead, nothing committed.
    let mut rt = h.open_runtime(&plan, options(1, true));
    while rt.positions() != ends(&h).as_slice() {
        rt.poll_once().unwrap();
    }
    drop(rt);
    h = h.reopen();
    // Each partition holds a prefix of its records: a poll's records wait
    // while the append before them is in flight, and the last ones may
    // still have waited when the run was dropped.
    let ahead = by_partition(&h, "out");
    for (p, (held, all)) in ahead.iter().zip(&expected).enumerate() {
        assert!(all.starts_with(held), "partition {p}: not a prefix");
    }
    assert!(
        ahead.iter().any(|p| !p.is_empty()),
        "nothing appended ahead"
    );
    // Made again from the start: the topic keeps one copy of each.
    let mut rt = h.open_runtime(&plan, options(1, true));
    h.run_to_end(&mut rt, &plan);
    drop(rt);
    assert_same(&by_partition(&h, "out"), &expected, "made again");
    // Half of one commit's records in the log (one partition of three).
    let h = loaded(&["out"]);
    let mut rt = h.open_runtime(&plan, options(1, false));
    rt.poll_once().unwrap();
    assert!(rt.commit_crashing(CrashPoint::InsideAppend).is_err());
    drop(rt);
    let held: usize = by_partition(&h, "out").iter().map(Vec::len).sum();
    assert!(held > 0 && held < expected.iter().map(Vec::len).sum::<usize>());
    let h = h.reopen();
    let mut rt = h.open_runtime(&plan, options(1, false));
    h.run_to_end(&mut rt, &plan);
    assert_same(&by_partition(&h, "out"), &expected, "after half an append");
}

#[test]
fn a_live_run_writes_what_a_replay_writes() {
    // Live: the input arrives in steps, each run and committed.
    let (h2, time) = empty(&["live"]);
    let mut rt: Option<Runtime> = None;
    for i in 0..EVENTS {
        produce_bid(&h2, &time, i);
        if i % 37 == 0 {
            let rt = rt.get_or_insert_with(|| h2.open_runtime(&plan("live"), options(1, false)));
            while rt.poll_once().unwrap() > 0 {}
            rt.commit().unwrap();
        }
    }
    time.set(T0 + EVENTS as i64);
    let mut rt = rt.unwrap();
    h2.run_to_end(&mut rt, &plan("live"));
    drop(rt);
    // Replay: all of it at once.
    let h = loaded(&["replay"]);
    let mut rt = h.open_runtime(&plan("replay"), options(2, false));
    h.run_to_end(&mut rt, &plan("replay"));
    drop(rt);
    let live = by_partition(&h2, "live");
    assert!(!live.concat().is_empty());
    assert_same(&live, &by_partition(&h, "replay"), "live against replay");
}

/// Options that read three records a poll, on `workers`, and never
/// commit before the test does: a commit waits for the appends, so for a
/// gate the test holds.
fn held_options(workers: usize) -> RunOptions {
    RunOptions {
        max_poll_records: 3,
        workers,
        commit_when_caught_up: false,
        commit_interval_ms: u64::MAX / 4,
        catch_up_commit_interval_ms: u64::MAX / 4,
        ..RunOptions::default()
    }
}

/// Runs `plan("out")` with `run` over all of `h`'s input while every
/// fsync waits at the gate of `faults` (the log's): the version must read
/// it all all the same (`waited` says what it waited for if not), with an
/// append being synced meanwhile. Then the syncs go on, a commit appends
/// the rest, and "out" must hold what a plain run writes to "plain".
fn reads_all_with_syncs_held(h: &Harness, faults: &FaultInjector, run: RunOptions, waited: &str) {
    let workers = run.workers;
    let mut rt = h.open_runtime(&plan("plain"), options(1, false));
    h.run_to_end(&mut rt, &plan("plain"));
    drop(rt);
    let expected = by_partition(h, "plain");
    let mut rt = h.open_runtime(&plan("out"), run);
    let ends = ends(h);
    let gate = faults.sync_gate.lock().unwrap();
    let (read_all, all_read) = mpsc::channel();
    let runner = std::thread::spawn(move || {
        while rt.positions() != ends.as_slice() {
            rt.poll_once().unwrap();
        }
        read_all.send(()).unwrap();
        rt
    });
    assert!(
        all_read.recv_timeout(PATIENCE).is_ok(),
        "{workers} workers: the version waited for {waited}"
    );
    assert!(
        faults.syncs_started.load(Ordering::SeqCst) > 0,
        "{workers} workers: no append was being synced while the input was read"
    );
    drop(gate);
    let mut rt = runner.join().unwrap();
    rt.commit().unwrap();
    drop(rt);
    assert_same(
        &by_partition(h, "out"),
        &expected,
        &format!("{workers} workers, syncs held"),
    );
}

#[test]
fn a_full_append_goes_out_behind_the_appends_being_synced() {
    // An append holds at most 4 records (the log's `max_batch_records`)
    // and the output topic syncs every append: each buffer that fills
    // goes out behind the appends being synced (up to four in flight)
    // instead of waiting for their fsync.
    for workers in [1, 2] {
        let faults = Arc::new(FaultInjector::new());
        let h = Harness::with_log_config(|config| {
            config.faults = Some(faults.clone());
            config.max_batch_records = 4;
        });
        h.create_topic("bids", 2);
        let synced = TopicConfig {
            fsync: FsyncPolicy::Always,
            ..TopicConfig::default()
        };
        h.log.create_topic("out", synced).unwrap();
        h.create_topic("plain", 1);
        // 15 of them pass the filter (price > 10): three full appends of
        // four behind the first, and three records left for the commit.
        for i in 0..26 {
            h.produce(&bid(i));
        }
        let waited = "the fsync of an append before a full one";
        reads_all_with_syncs_held(&h, &faults, held_options(workers), waited);
        assert_eq!(by_partition(&h, "out")[0].len(), 15);
    }
}

#[test]
fn a_poll_does_not_wait_for_the_fsync_of_the_append_before_it() {
    // The output topic syncs every append (`fsync = always`): the version
    // still reads all of its input, the records of later polls waiting in
    // their buffers until the syncs go on.
    for workers in [1, 2] {
        let faults = Arc::new(FaultInjector::new());
        let h = Harness::with_faults(&faults);
        h.create_topic("bids", 2);
        let synced = TopicConfig {
            partitions: 3,
            fsync: FsyncPolicy::Always,
            ..TopicConfig::default()
        };
        h.log.create_topic("out", synced).unwrap();
        for i in 0..EVENTS {
            h.produce(&bid(i));
        }
        h.create_topic("plain", 3);
        let run = RunOptions {
            append_ahead_records: 2,
            ..held_options(workers)
        };
        reads_all_with_syncs_held(&h, &faults, run, "an append's fsync at a poll's end");
    }
}

/// Polls `rt` until it has read `orders` and `pays` to their ends (ten
/// records each).
fn join_to_the_end(rt: &mut Runtime) {
    for _ in 0..1_000 {
        if rt.positions() == [10] && rt.joined_positions() == [10] {
            return;
        }
        rt.poll_once().unwrap();
    }
    panic!("did not reach the end: {:?}", rt.joined_positions());
}

/// A join of two streams commits after every record it joins here
/// (`pending_entries_max` 0), inside the joined stream's one batch. Each
/// such commit must cover the joined records before it: a crash after
/// them, and no commit at the batch's end, then joins none of them again.
/// (Such a commit used to keep the joined stream's offset at the batch's
/// start, with the buffers and rows of the records after it: the restart
/// joined all ten again, and the output held twenty rows.)
#[test]
fn a_commit_inside_a_joined_streams_batch_covers_the_records_it_joined() {
    let sources = "CREATE STREAM orders (k VARCHAR) WITH (KAFKA_TOPIC='orders');
                   CREATE STREAM pays (k VARCHAR) WITH (KAFKA_TOPIC='pays');";
    let plan = common::sql_plan_over(
        sources,
        "CREATE STREAM out AS SELECT o.k AS k FROM orders o JOIN pays p WITHIN 1 HOUR ON o.k = p.k;",
    );
    for workers in [1, 2] {
        let time = ManualTime::new(T0);
        let h = Harness::with_time(&time);
        for topic in ["orders", "pays", "out"] {
            h.create_topic(topic, 1);
        }
        for i in 0..10 {
            h.produce(&Step::Produce {
                topic: "orders".into(),
                partition: Some(0),
                key: None,
                value: json!({ "k": format!("k{i}") }),
                timestamp: None,
            });
        }
        time.set(T0 + 1);
        h.produce_batch("pays", 0, (0..10).map(|i| json!({ "k": format!("k{i}") })));
        time.set(T0 + 2);
        let run = RunOptions {
            pending_entries_max: 0,
            ..options(workers, false)
        };
        let mut rt = h.open_runtime(&plan, run.clone());
        join_to_the_end(&mut rt);
        // A crash: no commit after the batch's last record.
        drop(rt);
        let h = h.reopen();
        let mut rt = h.open_runtime(&plan, run);
        join_to_the_end(&mut rt);
        rt.commit().unwrap();
        drop(rt);
        let mut keys: Vec<String> = h
            .topic_records("out")
            .iter()
            .map(|r| r["value"]["k"].as_str().unwrap().to_string())
            .collect();
        keys.sort();
        let want: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        assert_eq!(keys, want, "{workers} workers");
    }
}
