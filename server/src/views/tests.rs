//! Manager behaviour that the end-to-end tests cannot provoke on demand:
//! a build whose processor fails, and a derived stream's replacement
//! (which must not write its output twice). The supervisor thread is not
//! started; each test runs [`ViewManager::tick`] itself.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kappa_log::{Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};
use kappa_processor::dsl::{self, Pipeline};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;

use super::manager::Change;
use super::{Clock, ManagerConfig, ViewManager};

struct Fixture {
    _dir: tempfile::TempDir,
    log: Arc<Log>,
    manager: Arc<ViewManager>,
    io: tokio::runtime::Runtime,
    /// The manager's clock (ms), moved by the test.
    clock: Arc<AtomicI64>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(LogConfig::new(dir.path())).unwrap());
    let clock = Arc::new(AtomicI64::new(1_000_000));
    let manager = ViewManager::open(
        log.clone(),
        ManagerConfig {
            data_dir: dir.path().to_path_buf(),
            swap_max_lag: 0,
            grace_ms: 0,
            commit_interval_ms: 10,
            clock: Clock::manual(clock.clone()),
        },
    )
    .unwrap();
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    Fixture {
        _dir: dir,
        log,
        manager,
        io,
        clock,
    }
}

impl Fixture {
    fn produce(&self, topic: &str, keys: &[&str]) {
        let t = match self.log.topic(topic) {
            Ok(t) => t,
            Err(_) => self
                .log
                .create_topic(topic, TopicConfig::default())
                .unwrap(),
        };
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
        self.io.block_on(t.produce(records, None)).unwrap();
    }

    /// Polls `f` for at most 30 s.
    fn eventually(&self, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn counts(topic: &str, name: &str) -> Plan {
    Pipeline::from_topic(topic)
        .key_by([("k", Expr::field("k"))])
        .aggregate([dsl::count("n")])
        .to_view(name)
}

#[test]
fn a_failed_build_leaves_the_served_version_serving_and_says_why() {
    let f = fixture();
    f.produce("a", &["x", "y"]);
    f.produce("b", &["z"]);
    assert_eq!(f.manager.create("v", counts("a", "v"), None).unwrap(), 1);
    let change = f.manager.replace("v", counts("b", "v"), None).unwrap();
    assert_eq!(change, Change::Building(2));
    // The build's input disappears: its processor ends with an error.
    f.log.delete_topic("b").unwrap();
    f.eventually("the build's processor ended", || {
        let d = f.manager.describe("v").unwrap();
        d.building_version.is_some_and(|b| !b.version.running)
    });
    f.manager.tick();
    let d = f.manager.describe("v").unwrap();
    assert!(d.building_version.is_none());
    assert_eq!(d.status, "running");
    assert_eq!(d.served_version.version, 1);
    let failure = d.failure.expect("the failure is recorded");
    assert_eq!((failure.version, failure.during_build), (2, true));
    assert!(failure.reason.contains('b'), "{}", failure.reason);
    // Recorded in the catalog, and the build's state is gone.
    assert!(f.manager.catalog().views["v"].failure.is_some());
    let store_has = |version| f.manager.store.has(&super::manager::scope("v", version));
    assert!(store_has(1) && !store_has(2));
}

#[test]
fn a_build_is_swapped_in_once_caught_up_and_the_old_version_dropped() {
    let f = fixture();
    f.produce("a", &["x", "y", "x"]);
    f.manager.create("v", counts("a", "v"), None).unwrap();
    let plan = Pipeline::from_topic("a")
        .key_by([("k", Expr::field("k"))])
        .aggregate([dsl::count("n"), dsl::count("m")])
        .to_view("v");
    assert_eq!(
        f.manager.replace("v", plan.clone(), None).unwrap(),
        Change::Building(2)
    );
    assert_eq!(
        f.manager.replace("v", plan, None).unwrap(),
        Change::Unchanged
    );
    f.eventually("the swap", || {
        f.manager.tick();
        f.manager.describe("v").unwrap().served_version.version == 2
    });
    // Grace 0: version 1 is stopped and dropped at the swap.
    assert!(!f.manager.store.has(&super::manager::scope("v", 1)));
    let d = f.manager.describe("v").unwrap();
    assert!(d.grace_versions.is_empty() && d.building_version.is_none());
}

#[test]
fn a_stream_replacement_continues_where_the_old_version_stopped() {
    let f = fixture();
    f.produce("a", &["1", "2", "3", "4", "5"]);
    let plan = |cols: &[&'static str]| {
        Pipeline::from_topic("a")
            .select(cols.iter().map(|c| (*c, Expr::field("k"))))
            .to_topic("out")
    };
    f.manager.create("s", plan(&["k"]), None).unwrap();
    let committed = |f: &Fixture| -> u64 {
        f.manager.describe("s").unwrap().served_version.partitions[0].committed
    };
    f.eventually("version 1 processed everything", || committed(&f) == 5);
    let change = f.manager.replace("s", plan(&["k", "k2"]), None).unwrap();
    assert_eq!(change, Change::Served(2));
    f.produce("a", &["6", "7"]);
    f.eventually("version 2 processed the new records", || committed(&f) == 7);
    f.manager.close();
    let out = f.log.topic("out").unwrap();
    let fetch = out.partition(0).unwrap().read(0, 1000, 1 << 20).unwrap();
    let values: Vec<String> = fetch
        .records()
        .map(|r| String::from_utf8_lossy(&r.value).into_owned())
        .collect();
    assert_eq!(values.len(), 7, "each input once: {values:?}");
    assert!(values[..5].iter().all(|v| !v.contains("k2")), "{values:?}");
    assert!(values[5..].iter().all(|v| v.contains("k2")), "{values:?}");
}

#[test]
fn a_served_version_whose_processor_fails_is_reported_as_failed() {
    let f = fixture();
    f.produce("a", &["x"]);
    assert_eq!(f.manager.create("v", counts("a", "v"), None).unwrap(), 1);
    assert!(f.manager.failed_views().is_empty());
    // The input disappears under the log (the HTTP API refuses this while a
    // view reads the topic): the served processor ends with an error.
    f.log.delete_topic("a").unwrap();
    f.eventually("the served processor ended", || {
        !f.manager.describe("v").unwrap().served_version.running
    });
    f.manager.tick();
    let failed = f.manager.failed_views();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert_eq!(failed[0].0, "v");
    assert_eq!(f.manager.describe("v").unwrap().status, "failed");
}

impl Fixture {
    /// The `n` column of every row of version 1 of `view`, by key.
    fn counts(&self, view: &str) -> Vec<(String, i64)> {
        let (rows, _) = kappa_processor::view::query(
            &self.manager.store,
            &super::manager::scope(view, 1),
            &kappa_processor::view::ViewQuery::All,
            None,
            10,
        )
        .unwrap();
        rows.into_iter()
            .map(|r| (r.key, r.row["n"].as_i64().expect("a count")))
            .collect()
    }

    /// Moves the manager's clock on by `ms`.
    fn advance(&self, ms: i64) {
        self.clock.fetch_add(ms, Ordering::AcqRel);
    }
}

#[test]
fn a_view_whose_store_writes_failed_is_retried_with_backoff_and_recovers() {
    let f = fixture();
    f.produce("a", &["x"]);
    assert_eq!(f.manager.create("v", counts("a", "v"), None).unwrap(), 1);
    // The disk fills: the processor's next commit fails.
    f.manager
        .store
        .fail_writes(Some("No space left on device (injected)".into()));
    f.produce("a", &["y"]);
    f.eventually("the served processor ended", || {
        !f.manager.describe("v").unwrap().served_version.running
    });
    f.manager.tick();
    let d = f.manager.describe("v").unwrap();
    assert_eq!(d.status, "failed");
    let reason = d.failure.expect("a failure").reason;
    assert!(reason.contains("No space left"), "{reason}");
    let retry = d.retry.expect("retried");
    assert_eq!((retry.attempts, retry.next_attempt_ms), (0, 1_001_000));
    let failed = f.manager.failed_views();
    assert!(
        failed[0]
            .1
            .as_deref()
            .is_some_and(|r| r.contains("No space")),
        "{failed:?}"
    );

    // Not yet due: nothing happens. Due, still full: it fails again and
    // the next attempt waits twice as long.
    f.advance(999);
    f.manager.tick();
    assert_eq!(f.manager.describe("v").unwrap().retry.unwrap().attempts, 0);
    f.advance(1);
    f.manager.tick();
    let retry = f
        .manager
        .describe("v")
        .unwrap()
        .retry
        .expect("still retried");
    assert_eq!((retry.attempts, retry.next_attempt_ms), (1, 1_003_000));

    // Space is freed: the next attempt brings the view back, and it
    // resumes from its last commit (each record counted once).
    f.manager.store.fail_writes(None);
    f.advance(2_000);
    f.manager.tick();
    let d = f.manager.describe("v").unwrap();
    assert_eq!(d.status, "running");
    assert!(d.retry.is_none() && d.failure.is_none(), "{d:?}");
    assert!(f.manager.failed_views().is_empty());
    f.eventually("both records committed", || {
        f.manager.describe("v").unwrap().served_version.partitions[0].committed == 2
    });
    assert_eq!(f.counts("v"), [("x".to_string(), 1), ("y".to_string(), 1)]);
}

impl Fixture {
    /// Stops the manager, runs `between` (the store is closed), and opens
    /// a new manager on the same directory and log.
    fn reopen_with(self, between: impl FnOnce()) -> Fixture {
        let Fixture {
            _dir,
            log,
            manager,
            io,
            clock,
        } = self;
        manager.close();
        let config = manager.config.clone();
        drop(manager);
        between();
        let manager = ViewManager::open(log.clone(), config).unwrap();
        Fixture {
            _dir,
            log,
            manager,
            io,
            clock,
        }
    }

    fn committed(&self, view: &str) -> u64 {
        self.manager
            .describe(view)
            .unwrap()
            .served_version
            .partitions[0]
            .committed
    }
}

#[test]
fn damaged_table_files_of_one_view_do_not_stop_the_start_and_every_view_rebuilds() {
    let f = fixture();
    f.produce("a", &["x", "y", "x"]);
    f.manager.create("hurt", counts("a", "hurt"), None).unwrap();
    f.manager.create("fine", counts("a", "fine"), None).unwrap();
    f.eventually("both views processed everything", || {
        f.committed("hurt") == 3 && f.committed("fine") == 3
    });
    f.manager.close();
    f.manager.store.flush_all().unwrap();
    // Every table file of one view (its state and its rows) is
    // overwritten with garbage.
    let s = super::manager::scope("hurt", 1);
    let mut files = f.manager.store.table_files(&s.state_cf()).unwrap();
    files.extend(f.manager.store.table_files(&s.view_cf()).unwrap());
    assert!(
        files.len() >= 2,
        "state and rows are in table files: {files:?}"
    );
    let data = f._dir.path().to_path_buf();
    let f = f.reopen_with(|| {
        for file in files {
            let len = std::fs::metadata(&file).unwrap().len() as usize;
            std::fs::write(&file, vec![0x5A; len]).unwrap();
        }
    });
    // The manager opened (the server starts); the damaged store is kept
    // aside and both views rebuild their state from the log.
    f.eventually("both views rebuilt", || {
        f.committed("hurt") == 3 && f.committed("fine") == 3
    });
    assert_eq!(
        f.counts("hurt"),
        [("x".to_string(), 2), ("y".to_string(), 1)]
    );
    let kept = std::fs::read_dir(&data)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("state.damaged-")
        })
        .count();
    assert_eq!(kept, 1);
}

#[test]
fn a_state_store_that_cannot_be_opened_is_kept_aside_and_views_rebuild_from_the_log() {
    let f = fixture();
    f.produce("a", &["x", "y", "x"]);
    f.manager.create("v", counts("a", "v"), None).unwrap();
    f.eventually("the view processed everything", || f.committed("v") == 3);
    let data = f._dir.path().to_path_buf();
    let f = f.reopen_with(|| {
        std::fs::write(data.join("state").join("CURRENT"), b"garbage").unwrap();
    });
    f.eventually("the view rebuilt from the log", || f.committed("v") == 3);
    assert_eq!(f.counts("v"), [("x".to_string(), 2), ("y".to_string(), 1)]);
    // The damaged store is kept, named.
    let kept: Vec<_> = std::fs::read_dir(&data)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("state.damaged-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(
        std::fs::read(data.join(&kept[0]).join("CURRENT")).unwrap(),
        b"garbage"
    );
}
