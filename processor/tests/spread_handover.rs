//! A version spread over nodes hands a partition over by stopping its
//! task after a final commit, and that stop can hang: a cluster that
//! fenced the task's transactional producer may let its last transaction
//! wait out its timeout (Tansu 0.6 closes the connection where Kafka
//! answers `PRODUCER_FENCED`). The partitions the node gained meanwhile
//! must not wait for it. Driven with an output topic whose appends wait at
//! a gate the test opens.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::{Harness, Step};
use kappa_processor::dsl::Pipeline;
use kappa_processor::error::Result;
use kappa_processor::expr::Expr;
use kappa_processor::host::RunningVersion;
use kappa_processor::runner::RunOptions;
use kappa_processor::sink::{OutputRecord, OutputSink};
use kappa_processor::source::LogSource;
use kappa_processor::spread::{Assignment, OnePartition, SpreadVersion, StartTask, Task};
use kappa_processor::state::store::{Scope, Store};
use serde_json::json;

/// Records per input partition.
const EVENTS: i64 = 10;

/// How long the test waits for the gained partition's task.
const PATIENCE: Duration = Duration::from_secs(30);

/// The partitions this node owns, moved by the test.
#[derive(Debug)]
struct Moving {
    owned: Mutex<(u64, Vec<u32>)>,
}

impl Moving {
    fn give(&self, partitions: Vec<u32>) {
        let mut owned = self.owned.lock().unwrap();
        *owned = (owned.0 + 1, partitions);
    }
}

impl Assignment for Moving {
    fn owned(&self) -> (u64, Option<Vec<u32>>) {
        let owned = self.owned.lock().unwrap();
        (owned.0, Some(owned.1.clone()))
    }

    fn leave(&self) {}
}

/// An output topic whose appends wait while its gate is closed.
#[derive(Debug, Default)]
struct Gated {
    open: Mutex<bool>,
    opened: Condvar,
    /// Appends waiting at the gate now.
    waiting: AtomicUsize,
}

impl Gated {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

impl OutputSink for Gated {
    fn append(&self, _seq: u64, _records: &[OutputRecord<'_>], _reach: &[u64]) -> Result<()> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.opened.wait(open).unwrap();
        }
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        Ok(())
    }

    fn describe(&self) -> String {
        "a gated test topic".into()
    }
}

/// Waits until `done` holds, at most [`PATIENCE`]; whether it did.
fn within_patience(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

#[test]
fn a_handover_whose_stop_hangs_holds_up_no_partition_gained() {
    let h = Harness::new();
    h.create_topic("in", 2);
    for partition in 0..2 {
        for i in 0..EVENTS {
            h.produce(&Step::Produce {
                topic: "in".into(),
                partition: Some(partition),
                key: None,
                value: json!({ "i": i }),
                timestamp: Some(1_000 + i),
            });
        }
    }
    let gate = Arc::new(Gated::default());
    let assignment = Arc::new(Moving {
        owned: Mutex::new((1, vec![0])),
    });
    let start: StartTask = {
        let (log, dir, gate) = (h.log.clone(), h.dir.path().to_path_buf(), gate.clone());
        Box::new(move |partition, _role| {
            let mut plan = Pipeline::from_topic("in")
                .select([("i", Expr::field("i"))])
                .to_topic("out");
            plan.sink_cluster = Some("prod".into());
            plan.name = format!("moved#{partition}");
            let store = Arc::new(Store::open(&dir.join(format!("task-{partition}")))?);
            let source =
                OnePartition::of_topics(LogSource::shared(log.clone()), &["in"], partition);
            let sink: Arc<dyn OutputSink> = gate.clone();
            let running = RunningVersion::start(
                plan,
                1,
                log.clone(),
                source,
                Some(sink),
                store.clone(),
                RunOptions {
                    workers: 1,
                    ..RunOptions::default()
                },
            )?;
            Ok(Task {
                running,
                store,
                upstream: None,
            })
        })
    };
    let scope = Scope {
        name: "moved".into(),
        version: 1,
    };
    let version = SpreadVersion::start(scope, 2, assignment.clone(), start, None, false).unwrap();
    let handle = version.handle();

    // Partition 0's task commits its records; their append waits at the
    // gate, and so will the final commit of its stop.
    assert!(
        within_patience(|| gate.waiting.load(Ordering::SeqCst) > 0),
        "partition 0's task never appended"
    );
    assignment.give(vec![1]);
    let gained = within_patience(|| handle.stores().iter().any(|t| t.partition == 1));
    let handed_over = handle.stores().iter().all(|t| t.partition != 0);
    gate.open();
    assert!(handed_over, "partition 0's task is still served here");
    assert!(
        gained,
        "partition 1 was not started while partition 0's stop hung"
    );
    version.stop().unwrap();
}
