//! A view that failed because its store could not write (a full disk)
//! recovers at its next retry once the disk can be written again — without
//! a restart — and counts every record exactly once (outside probe,
//! finding 4).
//!
//! RocksDB really fails here, not a seam in front of it: the file size
//! limit (`RLIMIT_FSIZE`, which binds root too) is set to the size of the
//! store's write-ahead log, so RocksDB's next append to it fails with
//! EFBIG, and RocksDB makes that — like ENOSPC — a background error of the
//! whole database, answered to every later write until the database is
//! reopened. Lifting the limit stands for freeing space.
//!
//! The limit is process-wide, so this binary holds this one test, and the
//! limit is set only while nothing but the view's commit writes.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kappa_log::{FsyncPolicy, Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};
use kappa_processor::dsl::{self, Pipeline};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::view::ViewQuery;
use kappa_server::views::manager::ViewSettings;
use kappa_server::views::{Clock, ManagerConfig, ViewManager};

fn counts_plan() -> Plan {
    Pipeline::from_topic("a")
        .key_by([("k", Expr::field("k"))])
        .aggregate([dsl::count("n")])
        .to_view("v")
}

fn manager_config(dir: &Path, clock: &Arc<AtomicI64>) -> ManagerConfig {
    ManagerConfig {
        data_dir: dir.to_path_buf(),
        swap_max_lag: 0,
        grace_ms: 0,
        keep_versions: 1,
        commit_interval_ms: 10,
        commit_when_caught_up: true,
        processor_threads: 1,
        topic_defaults: TopicConfig::default(),
        clock: Clock::manual(clock.clone()),
        clusters: None,
        assignments: None,
        checkpoints: None,
    }
}

fn produce(log: &Log, io: &tokio::runtime::Runtime, keys: &[&str]) {
    let records = keys
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
    io.block_on(log.topic("a").unwrap().produce(records, None))
        .unwrap();
}

/// Polls `f` for at most 30 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn committed(manager: &ViewManager) -> u64 {
    manager.describe("v").unwrap().served_version.partitions[0].committed
}

/// The `n` column of every row of `v`@1, by key.
fn counts(manager: &ViewManager) -> Vec<(String, i64)> {
    let reader = manager.reader_of("v", 1).expect("the store is open");
    let (rows, _) = reader.rows(&ViewQuery::All, None, 10).unwrap();
    rows.into_iter()
        .map(|r| (r.key, r.row["n"].as_i64().expect("a count")))
        .collect()
}

/// Sets the soft file size limit (bytes; `None`: none).
fn limit_file_size(bytes: Option<u64>) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain libc calls with a valid pointer.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit), 0);
        limit.rlim_cur = bytes.map_or(limit.rlim_max, |b| b as libc::rlim_t);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

/// Size of the store's newest write-ahead log file.
fn wal_bytes(store_dir: &Path) -> u64 {
    let mut wals: Vec<(String, u64)> = std::fs::read_dir(store_dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    wals.sort();
    wals.last().expect("a write-ahead log").1
}

#[test]
fn a_view_failed_by_a_full_disk_recovers_at_the_next_retry_once_space_is_back() {
    // A write past the limit raises SIGXFSZ, which would end the process:
    // ignored, the write fails with EFBIG instead.
    // SAFETY: setting a signal's disposition to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let dir = tempfile::tempdir().unwrap();
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let clock = Arc::new(AtomicI64::new(1_000_000));
    let log = Arc::new(Log::open(LogConfig::new(dir.path())).unwrap());
    let config = TopicConfig {
        partitions: 1,
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    log.create_topic("a", config).unwrap();
    produce(&log, &io, &["x"]);
    // The supervisor thread is not started: the test ticks it.
    let manager = ViewManager::open(log.clone(), manager_config(dir.path(), &clock)).unwrap();
    manager
        .create("v", counts_plan(), None, ViewSettings::default())
        .unwrap();
    eventually("the first record committed", || committed(&manager) == 1);

    // The view's next commit waits at the store while "y" is appended to
    // the log, so only that commit writes while the disk is full.
    let store = manager.reader_of("v", 1).unwrap();
    store.hold_writes(true);
    produce(&log, &io, &["y"]);
    eventually("the commit of y waiting", || store.writes_waiting() == 1);
    let store_dir = dir.path().join("views").join("v@1");
    limit_file_size(Some(wal_bytes(&store_dir)));
    store.hold_writes(false);
    eventually("the processor ended", || {
        !manager.describe("v").unwrap().served_version.running
    });
    // Space is freed.
    limit_file_size(None);
    drop(store);

    manager.tick();
    let d = manager.describe("v").unwrap();
    assert_eq!(d.status, "failed", "{d:?}");
    let reason = d.failure.expect("a failure").reason;
    assert!(reason.contains("File too large"), "{reason}");
    assert_eq!(d.retry.expect("a retry is due").next_attempt_ms, 1_001_000);

    // The first retry, with the disk writable again, brings the view back:
    // no further retries, no restart.
    clock.fetch_add(1_000, Ordering::AcqRel);
    manager.tick();
    let d = manager.describe("v").unwrap();
    assert!(
        d.retry.is_none() && d.failure.is_none() && d.served_version.running,
        "the retry after space came back did not recover the view: {:?}",
        d.retry
    );
    eventually("both records committed", || committed(&manager) == 2);
    assert_eq!(counts(&manager), [("x".into(), 1), ("y".into(), 1)]);

    // It goes on counting, each record once, and so does a restart.
    produce(&log, &io, &["x", "z"]);
    eventually("four records committed", || committed(&manager) == 4);
    let expected: Vec<(String, i64)> = vec![("x".into(), 2), ("y".into(), 1), ("z".into(), 1)];
    assert_eq!(counts(&manager), expected);
    manager.close();
    drop(manager);
    let manager = ViewManager::open(log.clone(), manager_config(dir.path(), &clock)).unwrap();
    eventually("the restarted view at its commit", || {
        committed(&manager) == 4
    });
    assert_eq!(counts(&manager), expected);
    manager.close();
    log.close();
}
