//! Progress of a processor version, shared between its runtime thread and
//! readers (the API, metrics): committed offsets and watermark, and
//! counters of what happened to input records.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::changes::ChangeFeed;

/// Live counters and the last commit's position.
#[derive(Debug)]
pub struct Progress {
    labels: [(&'static str, String); 2],
    committed: Mutex<(Vec<u64>, i64)>,
    committed_changed: Condvar,
    processed: AtomicU64,
    output: AtomicU64,
    late_dropped: AtomicU64,
    late_side_output: AtomicU64,
    duplicates: AtomicU64,
    invalid: AtomicU64,
    started: Instant,
    /// The workers of a version running in parallel (empty: one thread).
    workers: Mutex<Vec<Arc<WorkerProgress>>>,
    /// Entries each stateful operator keeps in memory, by its gauge name
    /// (`crate::sql::explain`), as of the last poll.
    operator_state: Mutex<BTreeMap<&'static str, u64>>,
    /// Row changes of recent commits, for change-feed readers.
    pub changes: ChangeFeed,
}

/// What a worker of a parallel version does ([`crate::parallel`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum WorkerRole {
    /// Decodes, filters and routes the batches of these input partitions
    /// (with fewer partitions than source workers, batches are dealt out
    /// in turn and every source worker lists every partition).
    Source {
        /// The input partitions whose batches it takes.
        partitions: Vec<u32>,
    },
    /// Applies the events of the groups in these key groups
    /// ([`crate::state::key::KEY_GROUPS`]) to their aggregate state.
    Shard {
        /// First key group owned.
        first_key_group: u32,
        /// End (exclusive) of the key groups owned.
        end_key_group: u32,
    },
}

/// One worker's counters.
#[derive(Debug)]
pub struct WorkerProgress {
    name: String,
    role: WorkerRole,
    events: AtomicU64,
    counter: metrics::Counter,
}

impl WorkerProgress {
    /// Counts `n` records (source) or events (shard) handled.
    pub fn add_events(&self, n: u64) {
        self.events.fetch_add(n, Ordering::Relaxed);
        self.counter.increment(n);
    }
}

/// A copy of one worker's counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerSnapshot {
    /// `source-{i}` or `shard-{i}`.
    pub worker: String,
    /// What it owns.
    #[serde(flatten)]
    pub role: WorkerRole,
    /// Records (source) or events (shard) handled.
    pub events: u64,
    /// Of those, per second since the version started.
    pub rate_per_second: f64,
}

/// A copy of [`Progress`] at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgressSnapshot {
    /// Committed offset per input partition.
    pub committed_offsets: Vec<u64>,
    /// Committed watermark (ms), if any event was seen.
    pub watermark: Option<i64>,
    /// Input records processed.
    pub processed: u64,
    /// Rows or records emitted.
    pub output: u64,
    /// Late records dropped.
    pub late_dropped: u64,
    /// Late records sent to the side output.
    pub late_side_output: u64,
    /// Records dropped as duplicates.
    pub duplicates: u64,
    /// Records skipped: not JSON, or no usable event time.
    pub invalid: u64,
    /// Records processed per second since start.
    pub rate_per_second: f64,
    /// The workers, when the version runs in parallel (else empty).
    pub workers: Vec<WorkerSnapshot>,
    /// Entries each stateful operator keeps in memory, by gauge name
    /// (`crate::sql::explain`).
    pub operator_state: BTreeMap<String, u64>,
}

impl Progress {
    /// Fresh counters for `partitions` input partitions of processor
    /// `name`, version `version` (the labels of its metrics).
    pub fn new(partitions: usize, name: &str, version: u64) -> Self {
        Progress {
            labels: [
                ("processor", name.to_string()),
                ("version", version.to_string()),
            ],
            committed: Mutex::new((vec![0; partitions], i64::MIN)),
            committed_changed: Condvar::new(),
            processed: AtomicU64::new(0),
            output: AtomicU64::new(0),
            late_dropped: AtomicU64::new(0),
            late_side_output: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            started: Instant::now(),
            workers: Mutex::new(Vec::new()),
            operator_state: Mutex::new(BTreeMap::new()),
            changes: ChangeFeed::default(),
        }
    }

    /// Records the position of a commit.
    pub fn set_committed(&self, offsets: &[u64], watermark: i64) {
        if watermark != i64::MIN {
            metrics::gauge!(crate::metrics::WATERMARK, &self.labels).set(watermark as f64);
            let lag = kappa_log::now_ms().saturating_sub(watermark);
            metrics::gauge!(crate::metrics::WATERMARK_LAG, &self.labels).set(lag as f64 / 1000.0);
        }
        *self.committed.lock().expect("progress") = (offsets.to_vec(), watermark);
        self.committed_changed.notify_all();
    }

    /// Blocks until the committed offsets satisfy `done` (woken by each
    /// commit, no polling) or `timeout` passes; returns whether they do.
    pub fn wait_committed(&self, timeout: Duration, done: impl Fn(&[u64]) -> bool) -> bool {
        let guard = self.committed.lock().expect("progress");
        let (guard, _) = self
            .committed_changed
            .wait_timeout_while(guard, timeout, |(offsets, _)| !done(offsets))
            .expect("progress");
        done(&guard.0)
    }
    /// Counts processed input records.
    pub fn add_processed(&self, n: u64) {
        self.processed.fetch_add(n, Ordering::Relaxed);
        metrics::counter!(crate::metrics::RECORDS_IN, &self.labels).increment(n);
    }
    /// Counts emitted rows or records.
    pub fn add_output(&self, n: u64) {
        self.output.fetch_add(n, Ordering::Relaxed);
        metrics::counter!(crate::metrics::RECORDS_OUT, &self.labels).increment(n);
    }
    /// Counts a dropped late record.
    pub fn count_late_dropped(&self) {
        self.late_dropped.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(crate::metrics::LATE_DROPPED, &self.labels).increment(1);
    }
    /// Counts a late record sent to the side output.
    pub fn count_late_side_output(&self) {
        self.late_side_output.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(crate::metrics::LATE_SIDE_OUTPUT, &self.labels).increment(1);
    }
    /// Counts a duplicate.
    pub fn count_duplicate(&self) {
        self.duplicates.fetch_add(1, Ordering::Relaxed);
        metrics::counter!(crate::metrics::DUPLICATES, &self.labels).increment(1);
    }
    /// Counts an undecodable record.
    pub fn count_invalid(&self) {
        self.count_invalid_records(1);
    }
    /// Counts `n` undecodable records.
    pub fn count_invalid_records(&self, n: u64) {
        self.invalid.fetch_add(n, Ordering::Relaxed);
        metrics::counter!(crate::metrics::INVALID, &self.labels).increment(n);
    }

    /// Adds a worker named `name` doing `role`; its events are counted in
    /// `kappa_processor_worker_events_total{processor,version,worker}`.
    pub fn add_worker(&self, name: String, role: WorkerRole) -> Arc<WorkerProgress> {
        let [processor, version] = self.labels.clone();
        let labels = [processor, version, ("worker", name.clone())];
        let worker = Arc::new(WorkerProgress {
            counter: metrics::counter!(crate::metrics::WORKER_EVENTS, &labels),
            name,
            role,
            events: AtomicU64::new(0),
        });
        self.workers.lock().expect("progress").push(worker.clone());
        worker
    }

    /// A consistent copy.
    pub fn snapshot(&self) -> ProgressSnapshot {
        let (committed_offsets, watermark) = self.committed.lock().expect("progress").clone();
        let processed = self.processed.load(Ordering::Relaxed);
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        ProgressSnapshot {
            committed_offsets,
            watermark: (watermark != i64::MIN).then_some(watermark),
            processed,
            output: self.output.load(Ordering::Relaxed),
            late_dropped: self.late_dropped.load(Ordering::Relaxed),
            late_side_output: self.late_side_output.load(Ordering::Relaxed),
            duplicates: self.duplicates.load(Ordering::Relaxed),
            invalid: self.invalid.load(Ordering::Relaxed),
            rate_per_second: processed as f64 / secs,
            workers: self
                .workers
                .lock()
                .expect("progress")
                .iter()
                .map(|w| {
                    let events = w.events.load(Ordering::Relaxed);
                    WorkerSnapshot {
                        worker: w.name.clone(),
                        role: w.role.clone(),
                        events,
                        rate_per_second: events as f64 / secs,
                    }
                })
                .collect(),
            operator_state: self
                .operator_state
                .lock()
                .expect("progress")
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }
    }

    /// Records that the operator reporting under `gauge` keeps `entries`
    /// in memory now.
    pub fn set_operator_state(&self, gauge: &'static str, entries: u64) {
        self.operator_state
            .lock()
            .expect("progress")
            .insert(gauge, entries);
    }
}
