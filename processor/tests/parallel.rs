//! A version with several workers (issue 14) writes exactly what the
//! single-threaded engine writes — output-topic records in the same order,
//! late side outputs in processing order, a derived stream in input order —
//! and reports its workers: what each owns and how many records or events
//! it handled.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::{Harness, Lcg, Step};
use kappa_log::io::FaultInjector;
use kappa_log::LogError;
use kappa_processor::dsl::{self, Pipeline, Tumbling};
use kappa_processor::error::ProcessorError;
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::progress::{ProgressSnapshot, WorkerRole};
use kappa_processor::runner::{RunOptions, Runtime};
use kappa_processor::state::key::KEY_GROUPS;
use serde_json::{json, Value};

const PARTITIONS: u32 = 4;

/// Out-of-order purchases of 40 users over 4 partitions, some late, some
/// not JSON.
fn inputs() -> Vec<Step> {
    let mut rng = Lcg(7);
    (0..3_000)
        .map(|i| {
            let user = rng.next(40);
            let late = rng.next(20) == 0;
            let ts = i * 10 - if late { 5_000 } else { rng.next(300) as i64 };
            let value = if rng.next(100) == 0 {
                Value::String("not an object".into())
            } else {
                json!({"user": format!("u{user}"), "amount": rng.next(100), "ts": ts})
            };
            Step::Produce {
                topic: "buys".into(),
                partition: Some(rng.next(PARTITIONS as u64) as u32),
                key: Some(format!("u{user}")),
                value,
                timestamp: None,
            }
        })
        .collect()
}

/// A harness holding [`inputs`] (one log for every run compared: the
/// processing order follows the append times of this log).
fn loaded() -> Harness {
    let h = Harness::new();
    h.create_topic("buys", PARTITIONS);
    for step in inputs() {
        h.produce(&step);
    }
    h
}

/// Runs `plan` as version `workers` with `workers` workers, polling a few
/// records at a time and committing once at the end; returns its progress.
fn run(h: &Harness, plan: &Plan, workers: usize) -> ProgressSnapshot {
    let options = RunOptions {
        max_poll_records: 50,
        workers,
        ..RunOptions::default()
    };
    let mut rt = Runtime::open(
        plan.clone(),
        workers as u64,
        h.log.clone(),
        h.store.clone(),
        options,
    )
    .unwrap();
    h.run_to_end(&mut rt, plan);
    rt.progress().snapshot()
}

/// Asserts two record lists are equal, naming the first difference.
fn assert_same(got: &[Value], expected: &[Value], what: &str) {
    let first = got.iter().zip(expected).position(|(g, e)| g != e);
    assert!(
        first.is_none() && got.len() == expected.len(),
        "{what}: {} records, expected {}; first difference at {first:?}: {:?} vs {:?}",
        got.len(),
        expected.len(),
        first.map(|i| &got[i]),
        first.map(|i| &expected[i]),
    );
}

/// The records of `topic` without their timestamps: a running aggregate's
/// records carry the time they were made, compared without it.
fn records_untimed(h: &Harness, topic: &str) -> Vec<Value> {
    let mut records = h.topic_records(topic);
    for r in &mut records {
        r.as_object_mut().unwrap().remove("timestamp");
    }
    records
}

/// A tumbling aggregate with EMIT CHANGES to topic `changes-{tag}`, late
/// events to `late-{tag}`.
fn changes_plan(tag: usize) -> Plan {
    Pipeline::from_topic("buys")
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_millis(500))
        .late_events_to(&format!("late-{tag}"))
        .filter(Expr::field("amount").gt(Expr::lit(10)))
        .key_by([("user", Expr::field("user"))])
        .window(Tumbling::of(Duration::from_secs(1)))
        .aggregate([dsl::count("n"), dsl::sum("spent", Expr::field("amount"))])
        .to_topic(&format!("changes-{tag}"))
}

#[test]
fn an_aggregate_to_a_topic_writes_the_single_threaded_records_in_the_same_order() {
    let h = loaded();
    let one_progress = run(&h, &changes_plan(1), 1);
    let expected_changes = h.topic_records("changes-1");
    let expected_late = h.topic_records("late-1");
    assert!(expected_changes.len() > 100, "the case has many changes");
    assert!(!expected_late.is_empty(), "the case has late events");
    for workers in [2, 4] {
        let progress = run(&h, &changes_plan(workers), workers);
        let what = format!("{workers} workers");
        assert_same(
            &h.topic_records(&format!("changes-{workers}")),
            &expected_changes,
            &what,
        );
        assert_same(
            &h.topic_records(&format!("late-{workers}")),
            &expected_late,
            &what,
        );
        assert_eq!(
            (
                progress.processed,
                progress.late_side_output,
                progress.invalid
            ),
            (
                one_progress.processed,
                one_progress.late_side_output,
                one_progress.invalid
            ),
            "{workers} workers"
        );
    }
}

#[test]
fn a_derived_stream_keeps_the_input_order_with_several_workers() {
    let plan = |tag: usize| {
        Pipeline::from_topic("buys")
            .event_time_field("ts")
            .filter(Expr::field("amount").gt(Expr::lit(50)))
            .select([
                ("who", Expr::field("user")),
                ("paid", Expr::field("amount")),
            ])
            .to_topic(&format!("big-{tag}"))
    };
    let h = loaded();
    run(&h, &plan(1), 1);
    let expected = h.topic_records("big-1");
    assert!(expected.len() > 100);
    run(&h, &plan(3), 3);
    assert_same(&h.topic_records("big-3"), &expected, "3 workers");
}

#[test]
fn a_parallel_version_reports_what_each_worker_owns_and_handled() {
    let h = loaded();
    let one = run(&h, &changes_plan(1), 1);
    assert!(one.workers.is_empty(), "one thread has no workers");
    let progress = run(&h, &changes_plan(3), 3);
    let names: Vec<&str> = progress.workers.iter().map(|w| w.worker.as_str()).collect();
    assert_eq!(
        names,
        ["shard-0", "shard-1", "shard-2", "source-0", "source-1", "source-2"]
    );
    // Shards own the key groups between them, each once, in order.
    let mut next_group = 0;
    let mut shard_events = 0;
    let mut source_records = 0;
    let mut partitions = Vec::new();
    for w in &progress.workers {
        match &w.role {
            WorkerRole::Shard {
                first_key_group,
                end_key_group,
            } => {
                assert_eq!(*first_key_group, next_group);
                assert!(end_key_group > first_key_group);
                next_group = *end_key_group;
                shard_events += w.events;
            }
            WorkerRole::Source { partitions: owned } => {
                partitions.extend(owned.iter().copied());
                source_records += w.events;
            }
        }
        assert!(w.events > 0, "{} did work", w.worker);
    }
    assert_eq!(next_group, KEY_GROUPS);
    // 4 partitions over 3 source workers: each partition owned once.
    partitions.sort_unstable();
    assert_eq!(partitions, [0, 1, 2, 3]);
    // Every record went through a source worker; the shards got the valid
    // events that passed the filter.
    assert_eq!(source_records, progress.processed);
    assert!(shard_events > 0 && shard_events < progress.processed);
}

/// A view `name` counting the events of `buys` per user.
fn count_per_user(name: &str) -> Plan {
    Pipeline::from_topic("buys")
        .event_time_field("ts")
        .key_by([("user", Expr::field("user"))])
        .aggregate([dsl::count("n")])
        .to_view(name)
}

/// Batches of 7 records read 5 at a time: a fetch ends inside a batch and
/// the next fetch returns that batch again. Every record is processed once
/// with any number of workers (the parallel poll hands out batches ahead of
/// processing them; it must start the returned batch after what it already
/// handed out).
#[test]
fn a_batch_split_between_fetches_is_processed_once_with_several_workers() {
    let h = Harness::new();
    h.create_topic("buys", 3);
    for b in 0..60u32 {
        h.produce_batch(
            "buys",
            b % 3,
            (0..7u32).map(
                |i| json!({"user": format!("u{}", (b * 7 + i) % 11), "amount": 1, "ts": b * 100}),
            ),
        );
    }
    let plan = count_per_user;
    for workers in [1, 2, 3] {
        let name = format!("per_user_{workers}");
        let options = RunOptions {
            max_poll_records: 5,
            workers,
            ..RunOptions::default()
        };
        let mut rt =
            Runtime::open(plan(&name), 1, h.log.clone(), h.store.clone(), options).unwrap();
        h.run_to_end(&mut rt, &plan(&name));
        assert_eq!(rt.progress().snapshot().processed, 420, "{workers} workers");
        let total: u64 = h
            .view_rows(&plan(&name))
            .iter()
            .map(|r| r["row"]["n"].as_u64().unwrap())
            .sum();
        assert_eq!(total, 420, "{workers} workers");
    }
}

/// A batch damaged in the log — a digit of one record changed, valid JSON
/// still, which only the batch's CRC shows — stops a version at that
/// batch with the log's damage error, however many workers check and
/// decode the batches, and wherever a poll's fetch splits them: the
/// batches before it are processed, nothing of it or after it.
#[test]
fn a_damaged_batch_stops_the_version_there_with_any_number_of_workers() {
    let h = Harness::new();
    h.create_topic("buys", 1);
    for b in 0..5u32 {
        h.produce_batch(
            "buys",
            0,
            (0..10u32).map(|i| json!({"user": format!("u{i}"), "amount": 1, "ts": b * 100 + i})),
        );
    }
    damage_record_205(&h, "buys");
    let plan = count_per_user;
    for (workers, max_poll_records) in [(1, 50), (1, 5), (2, 50), (2, 5), (3, 7)] {
        let what = format!("{workers} workers, polls of {max_poll_records}");
        let name = format!("per_user_{workers}_{max_poll_records}");
        let options = RunOptions {
            max_poll_records,
            workers,
            ..RunOptions::default()
        };
        let mut rt =
            Runtime::open(plan(&name), 1, h.log.clone(), h.store.clone(), options).unwrap();
        stops_at_damaged_batch_2(&mut rt, &what);
        assert_eq!(rt.positions(), [20], "{what}");
    }
}

/// Polls `rt` until it stops, which must be with the log's damage error
/// for the batch of offsets 20 to 29 ([`damage_record_205`]).
fn stops_at_damaged_batch_2(rt: &mut Runtime, what: &str) {
    let error = (0..1_000)
        .find_map(|_| rt.poll_once().err())
        .unwrap_or_else(|| panic!("{what}: no error"));
    match error {
        ProcessorError::Log(LogError::Damaged {
            first_offset,
            next_offset,
            ..
        }) => assert_eq!((first_offset, next_offset), (20, 30), "{what}"),
        other => panic!("{what}: {other}"),
    }
}

/// Changes a digit of the record whose `ts` is 205 (record 5 of batch 2)
/// in partition 0 of `topic`, in place in its segment file: valid JSON
/// still, which only the batch's CRC shows.
fn damage_record_205(h: &Harness, topic: &str) {
    let path = h
        .dir
        .path()
        .join(format!("log/topics/{topic}/0/00000000000000000000.log"));
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes
        .windows(8)
        .position(|w| w == b"\"ts\":205")
        .expect("record 5 of batch 2");
    bytes[at + 7] = b'6';
    std::fs::write(&path, &bytes).unwrap();
}

/// As [`a_damaged_batch_stops_the_version_there_with_any_number_of_workers`],
/// in the stream a join of two streams joins: source workers decode its
/// batches too, and a damaged one stops the version at it with the log's
/// damage error.
#[test]
fn a_damaged_batch_of_a_joined_stream_stops_the_version_there() {
    let h = Harness::new();
    for topic in ["orders", "pays"] {
        h.create_topic(topic, 1);
    }
    for b in 0..5u32 {
        h.produce_batch(
            "pays",
            0,
            (0..10u32).map(|i| json!({"ts": b * 100 + i, "k": format!("k{i}")})),
        );
    }
    damage_record_205(&h, "pays");
    let sources = "CREATE STREAM orders (k VARCHAR) WITH (KAFKA_TOPIC='orders');
                   CREATE STREAM pays (ts BIGINT, k VARCHAR) WITH (KAFKA_TOPIC='pays');";
    for (workers, max_poll_records) in [(1, 50), (1, 5), (2, 50), (2, 5), (3, 7)] {
        let what = format!("{workers} workers, polls of {max_poll_records}");
        let name = format!("paid_{workers}_{max_poll_records}");
        h.create_topic(&name, 1);
        let plan = common::sql_plan_over(
            sources,
            &format!(
                "CREATE STREAM {name} AS SELECT o.k AS k FROM orders o JOIN pays p WITHIN 1 HOUR ON o.k = p.k;"
            ),
        );
        let options = RunOptions {
            max_poll_records,
            workers,
            ..RunOptions::default()
        };
        let mut rt = Runtime::open(plan, 1, h.log.clone(), h.store.clone(), options).unwrap();
        stops_at_damaged_batch_2(&mut rt, &what);
        assert_eq!(rt.joined_positions(), [20], "{what}");
    }
}

/// Inside one batch, a run of records the early filter drops moves the
/// watermark by its largest event time, whatever the order of its
/// records: several workers take such a run in one step, one thread
/// record by record, and both find the same events late after it.
#[test]
fn a_run_of_filtered_records_moves_the_watermark_as_its_records_do() {
    let h = Harness::new();
    h.create_topic("buys", 1);
    // Per batch: dropped (amount 1) at +1900 then +100 — the run's largest
    // time first — then a kept event at +900, late only if the run moved
    // the watermark to its largest time (+1400 closes the window of +900),
    // and more of both.
    let pattern: [(u32, i64); 6] = [(1, 1900), (1, 100), (50, 900), (1, 50), (1, 20), (50, 1950)];
    for b in 0..40u32 {
        let base = i64::from(b) * 2_000;
        h.produce_batch(
            "buys",
            0,
            pattern.iter().enumerate().map(|(i, &(amount, at))| {
                json!({"user": format!("u{}", (b as usize + i) % 5), "amount": amount, "ts": base + at})
            }),
        );
    }
    run(&h, &changes_plan(1), 1);
    let expected_changes = h.topic_records("changes-1");
    let expected_late = h.topic_records("late-1");
    assert!(
        expected_late.len() >= 20,
        "the kept events at +900 are late"
    );
    for workers in [2, 3] {
        run(&h, &changes_plan(workers), workers);
        let what = format!("{workers} workers");
        assert_same(
            &h.topic_records(&format!("changes-{workers}")),
            &expected_changes,
            &what,
        );
        assert_same(
            &h.topic_records(&format!("late-{workers}")),
            &expected_late,
            &what,
        );
    }
}

/// Source workers keep preparing batches between polls: a poll that ends
/// on its budget leaves the batches it read ahead with the workers, and the
/// next poll takes them up in order — each record once.
#[test]
fn source_workers_keep_preparing_between_polls() {
    let h = Harness::new();
    h.create_topic("buys", 1);
    for b in 0..40u32 {
        h.produce_batch(
            "buys",
            0,
            (0..10u32).map(|i| json!({"user": format!("u{}", (b + i) % 7), "amount": 1, "ts": b})),
        );
    }
    let plan = Pipeline::from_topic("buys")
        .event_time_field("ts")
        .key_by([("user", Expr::field("user"))])
        .aggregate([dsl::count("n")])
        .to_view("per_user");
    let options = RunOptions {
        max_poll_records: 10,
        workers: 2,
        ..RunOptions::default()
    };
    let mut rt = Runtime::open(plan.clone(), 1, h.log.clone(), h.store.clone(), options).unwrap();
    rt.poll_once().unwrap();
    let processed = rt.progress().snapshot().processed;
    assert_eq!(processed, 10, "one batch per poll");
    // Without another poll, the workers go on with what was read ahead.
    let prepared = || -> u64 {
        let snapshot = rt.progress().snapshot();
        snapshot
            .workers
            .iter()
            .filter(|w| matches!(w.role, WorkerRole::Source { .. }))
            .map(|w| w.events)
            .sum()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while prepared() < processed + 20 {
        assert!(
            std::time::Instant::now() < deadline,
            "the workers stopped with the poll: {} records prepared",
            prepared()
        );
        std::thread::yield_now();
    }
    h.run_to_end(&mut rt, &plan);
    assert_eq!(rt.progress().snapshot().processed, 400);
    let total: u64 = h
        .view_rows(&plan)
        .iter()
        .map(|r| r["row"]["n"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 400);
}

#[test]
fn deduplication_by_record_key_sees_the_key_with_several_workers() {
    // The aggregate reads no key, but the dedup before it does: a source
    // worker must not drop the key of an event the coordinator dedups.
    let plan = |tag: usize| {
        Pipeline::from_topic("buys")
            .event_time_field("ts")
            .dedup_by(Expr::Key, Duration::from_millis(200))
            .key_by([("user", Expr::field("user"))])
            .aggregate([dsl::count("n"), dsl::sum("spent", Expr::field("amount"))])
            .to_topic(&format!("dedup-{tag}"))
    };
    let rows = |h: &Harness, tag: usize| records_untimed(h, &format!("dedup-{tag}"));
    let h = loaded();
    let one = run(&h, &plan(1), 1);
    let expected = rows(&h, 1);
    assert!(
        one.duplicates > 100 && one.processed - one.duplicates > 1_000,
        "the case drops some duplicates and keeps many events: {one:?}"
    );
    assert_eq!(expected.len(), 40, "one row per user");
    for workers in [2, 4] {
        let progress = run(&h, &plan(workers), workers);
        assert_same(&rows(&h, workers), &expected, &format!("{workers} workers"));
        assert_eq!(progress.duplicates, one.duplicates, "{workers} workers");
    }
}

#[test]
fn an_aggregate_grouping_by_the_record_key_reads_it_with_several_workers() {
    // Source workers hand on grouped events without their records when
    // nothing reads them; an aggregate grouping by the key reads it.
    let plan = |tag: usize| {
        Pipeline::from_topic("buys")
            .event_time_field("ts")
            .filter(Expr::field("amount").gt(Expr::lit(10)))
            .key_by([("user", Expr::Key)])
            .aggregate([dsl::count("n"), dsl::sum("spent", Expr::field("amount"))])
            .to_topic(&format!("by-key-{tag}"))
    };
    let rows = |h: &Harness, tag: usize| records_untimed(h, &format!("by-key-{tag}"));
    let h = loaded();
    run(&h, &plan(1), 1);
    let expected = rows(&h, 1);
    assert_eq!(expected.len(), 40, "one row per key: {expected:?}");
    for workers in [2, 4] {
        run(&h, &plan(workers), workers);
        assert_same(&rows(&h, workers), &expected, &format!("{workers} workers"));
    }
}

/// A poll reads its input while producers append: the log read it makes
/// (the partition's end offset, then its segments) is held between the
/// two while two more batches are appended. Every record is processed
/// once, with one worker and with two. Before the log bounded its reads by
/// the end offset it had read, the two new batches came back with a fetch
/// ending before them: one worker skipped the first of them for good (the
/// view counted 2 of 3 clicks), and with two a source worker panicked on
/// the inverted range (found by `kappa-bench e2e --rate 100000`: the
/// version failed and restarted, p99 above 100 ms).
#[test]
fn a_poll_racing_appends_processes_every_record_with_any_number_of_workers() {
    let click = |page: &str| Step::Produce {
        topic: "clicks".into(),
        partition: Some(0),
        key: None,
        value: json!({ "page": page }),
        timestamp: None,
    };
    let plan = Pipeline::from_topic("clicks")
        .key_by([("page", Expr::field("page"))])
        .aggregate([dsl::count("n")])
        .to_view("per_page");
    for workers in [1, 2] {
        let faults = Arc::new(FaultInjector::new());
        let h = Harness::with_faults(&faults);
        h.create_topic("clicks", 1);
        h.produce(&click("a"));
        let options = RunOptions {
            workers,
            ..RunOptions::default()
        };
        let mut rt =
            Runtime::open(plan.clone(), 1, h.log.clone(), h.store.clone(), options).unwrap();
        let gate = faults.read_gate.lock().unwrap();
        let gated = faults.reads_gated.load(Ordering::SeqCst);
        let poller = std::thread::spawn(move || {
            let polled = rt.poll_once().map(|_| ());
            (rt, polled)
        });
        // The poll has read the end offset (1) and waits at the gate...
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while faults.reads_gated.load(Ordering::SeqCst) == gated {
            assert!(
                std::time::Instant::now() < deadline,
                "the poll never read its input"
            );
            std::thread::yield_now();
        }
        // ...while two more batches are appended.
        h.produce(&click("b"));
        h.produce(&click("a"));
        drop(gate);
        let (mut rt, polled) = poller.join().unwrap();
        polled.unwrap_or_else(|e| panic!("{workers} workers: the poll failed: {e}"));
        h.run_to_end(&mut rt, &plan);
        let counts: Vec<(Value, Value)> = h
            .view_rows(&plan)
            .iter()
            .map(|r| (r["key"].clone(), r["row"]["n"].clone()))
            .collect();
        assert_eq!(
            counts,
            vec![(json!("a"), json!(2)), (json!("b"), json!(1))],
            "{workers} workers"
        );
    }
}
