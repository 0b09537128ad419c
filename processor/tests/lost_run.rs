//! A version whose output topic holds entries of a run whose state is
//! lost (a task taken over on another node from an older checkpoint, or
//! built from the start of its partition): its entries are numbered past
//! that run's, and what it makes from the inputs that run had read is
//! dropped where the sink kept how far that was — else written again,
//! never lost. Driven with a sink that says what the topic holds, as a
//! Kafka cluster's sink reads it from the outbox group's committed offset.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::sync::{Arc, Mutex};

use common::{Harness, Step};
use kappa_processor::dsl::Pipeline;
use kappa_processor::error::Result;
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::runner::{RunOptions, Runtime};
use kappa_processor::sink::{OutputRecord, OutputSink, Written};
use kappa_processor::source::LogSource;
use serde_json::{json, Value};

/// Input records.
const EVENTS: u64 = 60;

/// An appended entry: its number, its records' `i`, its input positions.
type Appended = (u64, Vec<u64>, Vec<u64>);

/// A topic that already holds `held` from this writer, keeping what is
/// appended to it.
#[derive(Debug)]
struct Topic {
    held: Written,
    appended: Mutex<Vec<Appended>>,
}

impl OutputSink for Topic {
    fn append(&self, seq: u64, records: &[OutputRecord<'_>], reach: &[u64]) -> Result<()> {
        if seq <= self.held.entry {
            return Ok(());
        }
        let values = records
            .iter()
            .map(|r| {
                serde_json::from_str::<Value>(r.value).unwrap()["i"]
                    .as_u64()
                    .unwrap()
            })
            .collect();
        self.appended
            .lock()
            .unwrap()
            .push((seq, values, reach.to_vec()));
        Ok(())
    }

    fn written(&self) -> Option<Written> {
        Some(self.held.clone())
    }

    fn describe(&self) -> String {
        "a test topic".into()
    }
}

fn plan() -> Plan {
    let mut plan = Pipeline::from_topic("in")
        .select([("i", Expr::field("i"))])
        .to_topic("out");
    plan.sink_cluster = Some("prod".into());
    plan
}

/// Runs the projection over [`EVENTS`] records (one partition), in polls
/// of 7 records and a commit after each, with an output topic holding
/// `held`; what it appended.
fn run_over(held: Written) -> Vec<Appended> {
    let h = Harness::new();
    h.create_topic("in", 1);
    for i in 0..EVENTS {
        h.produce(&Step::Produce {
            topic: "in".into(),
            partition: Some(0),
            key: None,
            value: json!({ "i": i }),
            timestamp: Some(1_000 + i as i64),
        });
    }
    let topic = Arc::new(Topic {
        held,
        appended: Mutex::new(Vec::new()),
    });
    let options = RunOptions {
        max_poll_records: 7,
        workers: 1,
        ..RunOptions::default()
    };
    let mut rt = Runtime::open_with_source(
        plan(),
        1,
        h.log.clone(),
        LogSource::shared(h.log.clone()),
        Some(topic.clone()),
        h.store.clone(),
        options,
    )
    .unwrap();
    while rt.positions() != [EVENTS] {
        rt.poll_once().unwrap();
        rt.commit().unwrap();
    }
    let appended = topic.appended.lock().unwrap().clone();
    appended
}

/// The records' `i`, in the order appended.
fn records(appended: &[Appended]) -> Vec<u64> {
    appended.iter().flat_map(|(_, r, _)| r.clone()).collect()
}

#[test]
fn what_a_lost_run_wrote_is_dropped_and_nothing_else() {
    // The lost run's entries 0..=4 hold the records of the inputs before
    // offset 20: none again, and every later one once.
    let appended = run_over(Written {
        entry: 4,
        reach: Some(vec![20]),
    });
    assert_eq!(records(&appended), (20..EVENTS).collect::<Vec<_>>());
    assert!(appended.iter().all(|(seq, _, _)| *seq > 4), "{appended:?}");
    // Each entry names the input positions of the commit that made it.
    let (_, last, reach) = appended.last().unwrap();
    assert_eq!(last.last(), Some(&(EVENTS - 1)));
    assert_eq!(reach, &vec![EVENTS]);
}

#[test]
fn without_how_far_a_lost_run_read_everything_is_written_again() {
    // An entry of an older build (or a broker keeping no metadata): the
    // records come again after the lost run's entries, none lost.
    let appended = run_over(Written {
        entry: 4,
        reach: None,
    });
    assert_eq!(records(&appended), (0..EVENTS).collect::<Vec<_>>());
    assert!(appended.iter().all(|(seq, _, _)| *seq > 4), "{appended:?}");
}
