//! Every crash point of the catalog saves that view changes make (issue
//! 11): a scenario creates two views, replaces one and drops the other, and
//! is run once per step that changes the disk — the catalog's backup and
//! the catalog itself, each written to a temporary file, synced, renamed
//! and the directory synced (`kappa_log::io::crash`), and the log's own
//! steps. After each simulated crash the next start must succeed, with
//! every acknowledged view there, every acknowledged drop gone, the change
//! under way either done or not, and every view in the catalog running
//! from state of its own (none failed for lack of it).
//!
//! The crash switch is process-wide, so this binary holds this one test.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kappa_log::io::crash;
use kappa_log::{FsyncPolicy, Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};
use kappa_processor::dsl::{self, Pipeline};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_server::views::manager::{Swap, ViewSettings};
use kappa_server::views::{Clock, ManagerConfig, ViewManager};

/// What the scenario was told, and the change under way at the crash.
#[derive(Debug, Default)]
struct Acked {
    /// Views created and not dropped.
    views: Vec<&'static str>,
    /// Views whose drop was acknowledged.
    dropped: Vec<&'static str>,
    /// The view whose create or drop was under way (may or may not exist).
    pending: Option<&'static str>,
}

fn counts(name: &str, columns: usize) -> Plan {
    let aggregates = (0..columns).map(|i| dsl::count(&format!("n{i}")));
    Pipeline::from_topic("a")
        .key_by([("k", Expr::field("k"))])
        .aggregate(aggregates)
        .to_view(name)
}

fn manager_config(dir: &Path) -> ManagerConfig {
    ManagerConfig {
        data_dir: dir.to_path_buf(),
        swap_max_lag: 0,
        grace_ms: 0,
        keep_versions: 1,
        commit_interval_ms: 10,
        commit_when_caught_up: true,
        processor_threads: 2,
        topic_defaults: kappa_log::TopicConfig::default(),
        clock: Clock::system(),
        clusters: None,
        assignments: None,
        checkpoints: None,
    }
}

/// Creates topic `a` with three records (no crash is armed yet).
fn setup(dir: &Path, io: &tokio::runtime::Runtime) {
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let config = TopicConfig {
        partitions: 1,
        retention_ms: None,
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    let topic = log.create_topic("a", config).unwrap();
    let records = ["x", "y", "x"]
        .iter()
        .map(|k| ProduceRecord {
            partition: None,
            record: NewRecord {
                key: Some(Bytes::from(k.to_string())),
                value: Bytes::from(format!("{{\"k\":\"{k}\"}}")),
                timestamp: None,
                headers: Vec::new(),
            },
        })
        .collect();
    io.block_on(topic.produce(records, None)).unwrap();
    log.close();
}

/// The scenario; stops at the first error, as a crashed process would.
fn scenario(dir: &Path, acked: &mut Acked) -> Result<(), String> {
    let log = Arc::new(Log::open(LogConfig::new(dir)).map_err(|e| e.to_string())?);
    let manager = ViewManager::open(log.clone(), manager_config(dir)).map_err(|e| e.to_string())?;
    let outcome = (|| {
        for name in ["v", "w"] {
            acked.pending = Some(name);
            manager.create(name, counts(name, 1), None, ViewSettings::default())?;
            acked.views.push(name);
            acked.pending = None;
        }
        manager.replace(
            "v",
            counts("v", 2),
            None,
            Swap::Auto,
            ViewSettings::default(),
        )?;
        acked.pending = Some("w");
        manager.drop_view("w")?;
        acked.views.retain(|v| *v != "w");
        acked.dropped.push("w");
        acked.pending = None;
        Ok::<_, kappa_server::views::ViewError>(())
    })();
    manager.close();
    log.close();
    outcome.map_err(|e| e.to_string())
}

/// Starts again after a crash at `step` and checks every promise.
fn verify(dir: &Path, acked: &Acked, step: u64) {
    let log = Arc::new(Log::open(LogConfig::new(dir)).unwrap());
    let manager = ViewManager::open(log.clone(), manager_config(dir))
        .unwrap_or_else(|e| panic!("crash at step {step}: the next start failed: {e}"));
    let catalog = manager.catalog();
    for view in acked.views.iter().filter(|v| acked.pending != Some(**v)) {
        assert!(
            catalog.views.contains_key(*view),
            "crash at step {step}: acknowledged view {view} is gone"
        );
    }
    for view in &acked.dropped {
        assert!(
            !catalog.views.contains_key(*view),
            "crash at step {step}: dropped view {view} is back"
        );
    }
    for name in catalog.views.keys() {
        assert!(
            acked.views.contains(&name.as_str()) || acked.pending == Some(name.as_str()),
            "crash at step {step}: view {name} was never created"
        );
    }
    // Every view runs from state of its own and gets to the end of its input.
    let deadline = Instant::now() + Duration::from_secs(30);
    for name in catalog.views.keys() {
        loop {
            manager.tick();
            let d = manager.describe(name).unwrap();
            assert!(
                d.failure.is_none(),
                "crash at step {step}: view {name} failed: {:?}",
                d.failure
            );
            if d.served_version.partitions.first().map(|p| p.committed) == Some(3) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "crash at step {step}: view {name} never caught up: {d:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    manager.close();
    log.close();
}

#[test]
fn every_crash_point_of_a_catalog_change_keeps_what_was_acknowledged() {
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The steps of an uninterrupted run.
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path(), &io);
    crash::arm(u64::MAX - 1);
    scenario(dir.path(), &mut Acked::default()).unwrap();
    let total = crash::disarm();
    // Five catalog saves (the start, two creates, a replace, a drop) of
    // ten steps each at least.
    assert!(total >= 50, "the scenario takes {total} steps");
    for step in 0..total {
        let dir = tempfile::tempdir().unwrap();
        setup(dir.path(), &io);
        let mut acked = Acked::default();
        crash::arm(step);
        let outcome = scenario(dir.path(), &mut acked);
        let did_crash = crash::crashed();
        crash::disarm();
        assert!(did_crash, "step {step} of {total} was not reached");
        // A crash fails the change under way (every step after it fails
        // too); only a crash while closing, after the last change was
        // acknowledged, leaves the scenario's outcome a success.
        match &outcome {
            Err(e) => assert!(
                e.contains("simulated crash"),
                "step {step}: the scenario failed for another reason: {e}"
            ),
            Ok(()) => assert!(
                acked.pending.is_none() && acked.dropped == ["w"],
                "step {step}: the scenario succeeded though its change was cut: {acked:?}"
            ),
        }
        verify(dir.path(), &acked, step);
    }
    eprintln!("catalog crash points enumerated: {total}");
}
