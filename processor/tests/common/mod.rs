//! Test harness: a temporary log and state store, input loading from JSONL,
//! running a plan to the end of its input (optionally with simulated
//! crashes), and reading back view rows and topic records.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use kappa_log::io::FaultInjector;
use kappa_log::{
    AppendClock, FsyncPolicy, Log, LogConfig, ManualTime, NewRecord, ProduceRecord, TopicConfig,
};
use kappa_processor::plan::Plan;
use kappa_processor::runner::{CrashPoint, RunOptions, Runtime};
use kappa_processor::state::store::{Scope, Store};
use kappa_processor::view::{self, ViewQuery};
use serde_json::{json, Value};

/// A log and a state store in a temporary directory.
pub struct Harness {
    pub dir: tempfile::TempDir,
    pub log: Arc<Log>,
    pub store: Arc<Store>,
}

fn open(dir: &Path) -> (Arc<Log>, Arc<Store>) {
    open_with(LogConfig::new(dir.join("log")), dir)
}

fn open_with(config: LogConfig, dir: &Path) -> (Arc<Log>, Arc<Store>) {
    let log = Log::open(config).unwrap();
    let store = Store::open(&dir.join("state")).unwrap();
    (Arc::new(log), Arc::new(store))
}

/// One step of a golden input: produce a record, or run what was produced.
pub enum Step {
    Produce {
        topic: String,
        partition: Option<u32>,
        key: Option<String>,
        value: Value,
        timestamp: Option<i64>,
    },
    Run,
}

/// Parses a golden input: one JSON object per line, either a record
/// `{"topic", "key", "value", "timestamp", "partition"}` or `{"run": true}`.
pub fn parse_steps(text: &str, default_topic: &str) -> Vec<Step> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad input line {l}: {e}"));
            if v.get("run").is_some() {
                return Step::Run;
            }
            Step::Produce {
                topic: v["topic"].as_str().unwrap_or(default_topic).to_string(),
                partition: v["partition"].as_u64().map(|p| p as u32),
                key: v["key"].as_str().map(str::to_string),
                value: v["value"].clone(),
                timestamp: v["timestamp"].as_i64(),
            }
        })
        .collect()
}

impl Harness {
    pub fn new() -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let (log, store) = open(dir.path());
        Harness { dir, log, store }
    }

    /// A harness whose log takes its append times from `time`: a record
    /// produced at the current time stays held back (the log is complete
    /// only up to the millisecond before) until `time` moves on.
    pub fn with_time(time: &ManualTime) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut config = LogConfig::new(dir.path().join("log"));
        config.clock = Arc::new(AppendClock::with_source(time.source()));
        let (log, store) = open_with(config, dir.path());
        Harness { dir, log, store }
    }

    /// A harness whose log's I/O goes through `faults` (a test can stall
    /// reads, writes and syncs at its gates).
    pub fn with_faults(faults: &Arc<FaultInjector>) -> Harness {
        Harness::with_log_config(|config| config.faults = Some(faults.clone()))
    }

    /// A harness whose log's configuration is the default one as `edit`
    /// changes it.
    pub fn with_log_config(edit: impl FnOnce(&mut LogConfig)) -> Harness {
        let dir = tempfile::tempdir().unwrap();
        let mut config = LogConfig::new(dir.path().join("log"));
        edit(&mut config);
        let (log, store) = open_with(config, dir.path());
        Harness { dir, log, store }
    }

    /// Closes and reopens the log and the store, as after a restart.
    pub fn reopen(self) -> Harness {
        let Harness { dir, log, store } = self;
        log.close();
        drop(log);
        drop(store);
        let (log, store) = open(dir.path());
        Harness { dir, log, store }
    }

    pub fn create_topic(&self, name: &str, partitions: u32) {
        let config = TopicConfig {
            partitions,
            fsync: FsyncPolicy::Never,
            retention_ms: None,
            ..Default::default()
        };
        self.log.create_topic(name, config).unwrap();
    }

    pub fn produce(&self, step: &Step) {
        let Step::Produce {
            topic,
            partition,
            key,
            value,
            timestamp,
        } = step
        else {
            return;
        };
        let t = match self.log.topic(topic) {
            Ok(t) => t,
            Err(_) => {
                self.create_topic(topic, 1);
                self.log.topic(topic).unwrap()
            }
        };
        let record = ProduceRecord {
            partition: *partition,
            record: NewRecord {
                key: key.clone().map(Bytes::from),
                value: Bytes::from(value.to_string()),
                timestamp: *timestamp,
                headers: vec![],
            },
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(t.produce(vec![record], None)).unwrap();
    }

    /// Appends `values` to `partition` of the existing `topic` as one
    /// batch of records without keys.
    pub fn produce_batch(
        &self,
        topic: &str,
        partition: u32,
        values: impl IntoIterator<Item = Value>,
    ) {
        let records = values
            .into_iter()
            .map(|value| ProduceRecord {
                partition: Some(partition),
                record: NewRecord {
                    key: None,
                    value: Bytes::from(value.to_string()),
                    timestamp: None,
                    headers: vec![],
                },
            })
            .collect();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(self.log.topic(topic).unwrap().produce(records, None))
            .unwrap();
    }

    pub fn open_runtime(&self, plan: &Plan, options: RunOptions) -> Runtime {
        Runtime::open(
            plan.clone(),
            1,
            self.log.clone(),
            self.store.clone(),
            options,
        )
        .unwrap()
    }

    /// Polls until every source record was processed, then commits.
    pub fn run_to_end(&self, rt: &mut Runtime, plan: &Plan) {
        let source = self.log.topic(&plan.source.topic).unwrap();
        let ends: Vec<u64> = source.partitions().iter().map(|p| p.end_offset()).collect();
        for _ in 0..1_000_000 {
            if rt.positions() == ends.as_slice() {
                break;
            }
            rt.poll_once().unwrap();
        }
        assert_eq!(rt.positions(), ends.as_slice(), "did not reach the end");
        rt.commit().unwrap();
    }

    /// View rows as `{"key", "window_start", "window_end", "row"}`, in key order.
    pub fn view_rows(&self, plan: &Plan) -> Vec<Value> {
        let scope = Scope {
            name: plan.name.clone(),
            version: 1,
        };
        let (rows, _) =
            view::query(&self.store, &scope, &ViewQuery::All, None, usize::MAX - 1).unwrap();
        rows.into_iter()
            .map(|r| json!({"key": r.key, "window_start": r.window_start, "window_end": r.window_end, "row": r.row}))
            .collect()
    }

    /// Records of a topic as `{"key", "value", "timestamp"}`, in partition then offset order.
    pub fn topic_records(&self, topic: &str) -> Vec<Value> {
        let Ok(t) = self.log.topic(topic) else {
            return vec![];
        };
        let mut out = Vec::new();
        for p in t.partitions() {
            let fetch = p.read(p.start_offset(), u64::MAX, u64::MAX).unwrap();
            for r in fetch.records() {
                out.push(json!({
                    "key": r.key.map(|k| String::from_utf8_lossy(&k).into_owned()),
                    "value": serde_json::from_slice::<Value>(&r.value).unwrap(),
                    "timestamp": r.timestamp,
                }));
            }
        }
        out
    }
}

/// A small deterministic generator for crash schedules.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

/// Runs the steps; every `{"run": true}` (and the end) processes what was
/// produced so far. With `crash_seed`, the runtime polls two records at a
/// time and, at random points, commits, crashes (dropped without a commit,
/// log and store reopened), or crashes inside a commit (inside or after the
/// sequenced output append, after the RocksDB write, or after the stored
/// outbox's append); such runs keep one state entry cached and append
/// sequenced outputs ahead after every poll. Returns the harness for
/// reading.
pub fn run_steps(plan: &Plan, steps: &[Step], crash_seed: Option<u64>) -> Harness {
    run_steps_with(plan, steps, crash_seed, 1)
}

/// [`run_steps`] with a version of `workers` workers (every restart too).
pub fn run_steps_with(
    plan: &Plan,
    steps: &[Step],
    crash_seed: Option<u64>,
    workers: usize,
) -> Harness {
    let mut h = Harness::new();
    h.create_topic(&plan.source.topic, 1);
    for step in steps {
        if let Step::Produce { topic, .. } = step {
            if h.log.topic(topic).is_err() {
                h.create_topic(topic, 1);
            }
        }
    }
    // Runs with crashes also keep almost nothing cached, so state is
    // evicted and loaded back from the store all the time.
    let options = || RunOptions {
        max_poll_records: if crash_seed.is_some() { 2 } else { 5000 },
        state_cache_entries: if crash_seed.is_some() {
            1
        } else {
            RunOptions::default().state_cache_entries
        },
        workers,
        append_ahead_records: if crash_seed.is_some() {
            1
        } else {
            RunOptions::default().append_ahead_records
        },
        ..RunOptions::default()
    };
    let mut rng = Lcg(crash_seed.unwrap_or(0));
    let mut rt = Some(h.open_runtime(plan, options()));
    let mut run = |h: Harness, rt: &mut Option<Runtime>| -> Harness {
        let mut h = h;
        if crash_seed.is_none() {
            h.run_to_end(rt.as_mut().unwrap(), plan);
            return h;
        }
        let source = h.log.topic(&plan.source.topic).unwrap();
        let ends: Vec<u64> = source.partitions().iter().map(|p| p.end_offset()).collect();
        for _ in 0..100_000 {
            let r = rt.as_mut().unwrap();
            if r.positions() == ends.as_slice() {
                break;
            }
            r.poll_once().unwrap();
            match rng.next(10) {
                0 | 1 => r.commit().unwrap(),
                2 => {
                    // Crash without committing.
                    drop(rt.take());
                    h = h.reopen();
                    *rt = Some(h.open_runtime(plan, options()));
                }
                3 => {
                    let point = match rng.next(4) {
                        0 => CrashPoint::AfterCommit,
                        1 => CrashPoint::AfterAppend,
                        2 => CrashPoint::BeforeCommit,
                        _ => CrashPoint::InsideAppend,
                    };
                    let _ = r.commit_crashing(point);
                    drop(rt.take());
                    h = h.reopen();
                    *rt = Some(h.open_runtime(plan, options()));
                }
                _ => {}
            }
        }
        h.run_to_end(rt.as_mut().unwrap(), plan);
        h
    };
    for step in steps {
        match step {
            Step::Run => h = run(h, &mut rt),
            produce => h.produce(produce),
        }
    }
    h = run(h, &mut rt);
    drop(rt);
    h
}

/// The plan of the `CREATE ... AS` statement `sql` over the sources the
/// statements `sources` declare.
pub fn sql_plan_over(sources: &str, sql: &str) -> Plan {
    let catalog = kappa_processor::sql::parse(sources)
        .unwrap()
        .into_iter()
        .map(|s| match s {
            kappa_processor::sql::Statement::CreateSource(d) => d,
            other => panic!("{other:?}"),
        })
        .collect::<Vec<_>>();
    match kappa_processor::sql::parse(sql).unwrap().remove(0) {
        kappa_processor::sql::Statement::CreateAs(c) => {
            kappa_processor::sql::plan(&c, &catalog).unwrap()
        }
        other => panic!("{other:?}"),
    }
}
