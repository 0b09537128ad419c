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
use kappa_processor::host::StartFrom;
use kappa_processor::plan::Plan;
use kappa_processor::state::store::{Scope, Store};

use super::manager::{Change, Swap, ViewSettings};
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
    fixture_with_grace(0)
}

/// A fixture whose replaced versions stay readable for `grace_ms`.
fn fixture_with_grace(grace_ms: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(LogConfig::new(dir.path())).unwrap());
    let clock = Arc::new(AtomicI64::new(1_000_000));
    let manager = ViewManager::open(
        log.clone(),
        ManagerConfig {
            data_dir: dir.path().to_path_buf(),
            swap_max_lag: 0,
            grace_ms,
            keep_versions: 1,
            commit_interval_ms: 10,
            commit_when_caught_up: true,
            processor_threads: 2,
            topic_defaults: kappa_log::TopicConfig::default(),
            clock: Clock::manual(clock.clone()),
            clusters: None,
            assignments: None,
            checkpoints: None,
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

    /// Polls `f` for at most 30 s; a timeout shows every view as
    /// `describe` has it then.
    fn eventually(&self, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the views: {:#?}",
                self.manager.list()
            );
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
    assert_eq!(
        f.manager
            .create("v", counts("a", "v"), None, ViewSettings::default())
            .unwrap(),
        1
    );
    let change = f
        .manager
        .replace(
            "v",
            counts("b", "v"),
            None,
            Swap::Auto,
            ViewSettings::default(),
        )
        .unwrap();
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
    // Recorded in the catalog, and the build's state is gone (once retired).
    assert!(f.manager.catalog().views["v"].failure.is_some());
    f.manager.wait_retired(None);
    let store_has = |version| f.manager.host.has(&super::manager::scope("v", version));
    assert!(store_has(1) && !store_has(2));
}

#[test]
fn a_build_is_swapped_in_once_caught_up_and_the_old_version_dropped() {
    let f = fixture();
    f.produce("a", &["x", "y", "x"]);
    f.manager
        .create("v", counts("a", "v"), None, ViewSettings::default())
        .unwrap();
    let plan = Pipeline::from_topic("a")
        .key_by([("k", Expr::field("k"))])
        .aggregate([dsl::count("n"), dsl::count("m")])
        .to_view("v");
    assert_eq!(
        f.manager
            .replace("v", plan.clone(), None, Swap::Auto, ViewSettings::default())
            .unwrap(),
        Change::Building(2)
    );
    assert_eq!(
        f.manager
            .replace("v", plan, None, Swap::Auto, ViewSettings::default())
            .unwrap(),
        Change::Unchanged
    );
    f.eventually("the swap", || {
        f.manager.tick();
        f.manager.describe("v").unwrap().served_version.version == 2
    });
    // Grace 0: version 1 is stopped and dropped at the swap.
    f.manager.wait_retired(None);
    assert!(!f.manager.host.has(&super::manager::scope("v", 1)));
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
    f.manager
        .create("s", plan(&["k"]), None, ViewSettings::default())
        .unwrap();
    let committed = |f: &Fixture| -> u64 {
        f.manager.describe("s").unwrap().served_version.partitions[0].committed
    };
    f.eventually("version 1 processed everything", || committed(&f) == 5);
    let change = f
        .manager
        .replace(
            "s",
            plan(&["k", "k2"]),
            None,
            Swap::Auto,
            ViewSettings::default(),
        )
        .unwrap();
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
    assert_eq!(
        f.manager
            .create("v", counts("a", "v"), None, ViewSettings::default())
            .unwrap(),
        1
    );
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
        self.counts_of(view, 1)
    }

    /// The `n` column of every row of `version` of `view`, by key.
    fn counts_of(&self, view: &str, version: u64) -> Vec<(String, i64)> {
        let s = super::manager::scope(view, version);
        let (rows, _) = kappa_processor::view::query(
            &self.store(&s),
            &s,
            &kappa_processor::view::ViewQuery::All,
            None,
            10,
        )
        .unwrap();
        rows.into_iter()
            .map(|r| (r.key, r.row["n"].as_i64().expect("a count")))
            .collect()
    }

    /// The open store of a version.
    fn store(&self, s: &Scope) -> Arc<Store> {
        self.manager
            .host
            .open_store(s)
            .expect("the version's store is open")
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
    assert_eq!(
        f.manager
            .create("v", counts("a", "v"), None, ViewSettings::default())
            .unwrap(),
        1
    );
    // The disk fills: the processor's next commit fails. (The test lets go
    // of the store before every retry: a retry reopens it.)
    let s = super::manager::scope("v", 1);
    f.store(&s)
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
    f.store(&s).fail_writes(None);
    f.advance(2_000);
    f.manager.tick();
    let d = f.manager.describe("v").unwrap();
    // Running again: at its input's end already, or catching up to it.
    assert!(
        matches!(d.status.as_str(), "running" | "catching_up"),
        "{d:?}"
    );
    assert!(d.served_version.running);
    assert!(d.retry.is_none() && d.failure.is_none(), "{d:?}");
    assert!(f.manager.failed_views().is_empty());
    f.eventually("both records committed", || {
        f.manager.describe("v").unwrap().served_version.partitions[0].committed == 2
    });
    f.manager.tick();
    assert_eq!(f.manager.describe("v").unwrap().status, "running");
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
        // Nothing of the closed manager's lives on: dropping it closes
        // every store the new one opens.
        assert_eq!(
            Arc::strong_count(&manager),
            1,
            "a thread still holds the closed manager"
        );
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

/// The names in `dir` that start with `prefix`.
fn names_starting(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn damaged_state_of_one_view_fails_that_view_only_and_a_replay_rebuilds_it() {
    let f = fixture();
    f.produce("a", &["x", "y", "x"]);
    f.manager
        .create("hurt", counts("a", "hurt"), None, ViewSettings::default())
        .unwrap();
    f.manager
        .create("lost", counts("a", "lost"), None, ViewSettings::default())
        .unwrap();
    f.manager
        .create("fine", counts("a", "fine"), None, ViewSettings::default())
        .unwrap();
    f.eventually("every view processed everything", || {
        ["hurt", "lost", "fine"].iter().all(|v| f.committed(v) == 3)
    });
    f.manager.close();
    // Every table file of one view (its state and its rows) is
    // overwritten with garbage; the manifest pointer of another is.
    let hurt = super::manager::scope("hurt", 1);
    let store = f.store(&hurt);
    store.flush_all().unwrap();
    let mut files = store.table_files(&hurt.state_cf()).unwrap();
    files.extend(store.table_files(&hurt.view_cf()).unwrap());
    drop(store);
    assert!(
        files.len() >= 2,
        "state and rows are in table files: {files:?}"
    );
    let stores = f.manager.host.dir().to_path_buf();
    let f = f.reopen_with(|| {
        for file in files {
            let len = std::fs::metadata(&file).unwrap().len() as usize;
            std::fs::write(&file, vec![0x5A; len]).unwrap();
        }
        std::fs::write(stores.join("lost@1").join("CURRENT"), b"garbage").unwrap();
    });
    f.manager.tick();

    // The manager opened (the server starts). The untouched view resumed
    // from its own store: nothing to reprocess.
    let fine = f.manager.describe("fine").unwrap();
    assert_eq!(fine.status, "running");
    assert_eq!(fine.served_version.processed, 0, "not rebuilt");
    assert_eq!(
        f.counts("fine"),
        [("x".to_string(), 2), ("y".to_string(), 1)]
    );
    // The damaged ones failed, saying why and how to rebuild; they are
    // not retried (they would read the same damage), and their reads say
    // the state is not available.
    for view in ["hurt", "lost"] {
        let d = f.manager.describe(view).unwrap();
        assert_eq!(d.status, "failed", "{view}");
        let reason = d.failure.expect("a failure").reason;
        assert!(reason.contains("damaged"), "{reason}");
        assert!(
            reason.contains(&format!("POST /v1/views/{view}/replay")),
            "{reason}"
        );
        assert!(d.retry.is_none(), "{view}");
        let read = f.manager.rows(
            view,
            &super::RowsRequest {
                max_staleness: None,
                test: None,
                filter: Default::default(),
                query: kappa_processor::view::ViewQuery::All,
                cursor: None,
                limit: 10,
                version: None,
                after: Vec::new(),
                max_wait: Duration::ZERO,
            },
        );
        assert!(
            matches!(read, Err(super::ViewError::Unavailable { .. })),
            "{view}: {:?}",
            read.map(|r| r.rows.len())
        );
    }
    // Each damaged store is kept aside, named, never deleted.
    assert_eq!(names_starting(&stores, "hurt@1.damaged-").len(), 1);
    let lost_kept = names_starting(&stores, "lost@1.damaged-");
    assert_eq!(lost_kept.len(), 1);
    assert_eq!(
        std::fs::read(stores.join(&lost_kept[0]).join("CURRENT")).unwrap(),
        b"garbage"
    );

    // One command rebuilds a damaged view from the log.
    assert_eq!(
        f.manager
            .replay("hurt", StartFrom::Earliest, Swap::Auto)
            .unwrap(),
        Change::Building(2)
    );
    f.eventually("the rebuilt version is swapped in", || {
        f.manager.tick();
        f.manager.describe("hurt").unwrap().served_version.version == 2
    });
    let d = f.manager.describe("hurt").unwrap();
    assert_eq!(d.status, "running");
    assert!(d.failure.is_none(), "{:?}", d.failure);
    assert_eq!(
        f.counts_of("hurt", 2),
        [("x".to_string(), 2), ("y".to_string(), 1)]
    );
}

#[test]
fn a_store_shared_by_every_version_is_moved_into_one_store_each_without_reprocessing() {
    let f = fixture();
    f.produce("a", &["x", "y", "x"]);
    f.manager
        .create("v", counts("a", "v"), None, ViewSettings::default())
        .unwrap();
    f.manager
        .create("w", counts("a", "w"), None, ViewSettings::default())
        .unwrap();
    f.eventually("both views processed everything", || {
        f.committed("v") == 3 && f.committed("w") == 3
    });
    f.manager.close();
    let data = f._dir.path().to_path_buf();
    let stores = f.manager.host.dir().to_path_buf();
    // The earlier layout: every version's column families in one
    // database at <data>/state.
    let own: Vec<(Scope, Arc<Store>)> = ["v", "w"]
        .iter()
        .map(|v| {
            let s = super::manager::scope(v, 1);
            let store = f.store(&s);
            (s, store)
        })
        .collect();
    {
        let shared = Store::open(&data.join("state")).unwrap();
        for (s, store) in &own {
            shared.ensure(s).unwrap();
            for cf in [s.state_cf(), s.view_cf()] {
                let mut batch = kappa_processor::state::store::Batch::default();
                store
                    .for_each_entry(&cf, &[], None, |k, v| {
                        batch.put(&cf, k, v);
                        Ok(())
                    })
                    .unwrap();
                assert!(!batch.is_empty());
                shared.write(batch).unwrap();
            }
        }
    }
    drop(own);
    let f = f.reopen_with(|| std::fs::remove_dir_all(&stores).unwrap());
    f.manager.tick();
    for view in ["v", "w"] {
        let d = f.manager.describe(view).unwrap();
        assert_eq!(d.status, "running", "{view}: {:?}", d.failure);
        assert_eq!(d.served_version.processed, 0, "{view}: not rebuilt");
        assert_eq!(f.committed(view), 3);
        assert_eq!(f.counts(view), [("x".to_string(), 2), ("y".to_string(), 1)]);
    }
    // The shared store is kept, renamed; nothing is deleted.
    assert!(!data.join("state").exists());
    assert_eq!(names_starting(&data, "state.migrated-").len(), 1);
}

#[test]
fn a_manual_build_waits_ready_for_promote_and_a_rollback_serves_the_old_version_again() {
    let f = fixture_with_grace(3_600_000);
    f.produce("a", &["x", "y", "x"]);
    f.manager
        .create("v", counts("a", "v"), None, ViewSettings::default())
        .unwrap();
    let two_counts = Pipeline::from_topic("a")
        .key_by([("k", Expr::field("k"))])
        .aggregate([dsl::count("n"), dsl::count("m")])
        .to_view("v");
    assert_eq!(
        f.manager
            .replace("v", two_counts, None, Swap::Manual, ViewSettings::default())
            .unwrap(),
        Change::Building(2)
    );
    // Caught up, it waits: ready, following its input, not served.
    f.eventually("the build is ready", || {
        f.manager.tick();
        f.manager.describe("v").unwrap().status == "ready"
    });
    f.produce("a", &["z"]);
    f.eventually("both versions follow the input", || {
        let d = f.manager.describe("v").unwrap();
        let build = d.building_version.expect("still building");
        d.served_version.partitions[0].committed == 4 && build.version.partitions[0].committed == 4
    });
    f.manager.tick();
    assert_eq!(f.manager.describe("v").unwrap().served_version.version, 1);

    // A restart keeps the build waiting.
    let f = f.reopen_with(|| ());
    f.eventually("ready again after the restart", || {
        f.manager.tick();
        f.manager.describe("v").unwrap().status == "ready"
    });
    assert_eq!(f.manager.describe("v").unwrap().served_version.version, 1);

    let done = f.manager.promote("v").unwrap();
    assert_eq!((done.served, done.previous), (2, 1));
    let d = f.manager.describe("v").unwrap();
    assert_eq!(d.status, "running");
    assert!(d.building_version.is_none());
    assert_eq!(
        d.grace_versions
            .iter()
            .map(|g| g.version)
            .collect::<Vec<_>>(),
        [1]
    );
    assert!(matches!(
        f.manager.promote("v"),
        Err(super::ViewError::Refused {
            code: "nothing_to_promote",
            ..
        })
    ));

    // Roll back: version 1 serves again (its rows were kept up to date),
    // version 2 is kept in grace and can be rolled back to in turn.
    let done = f.manager.rollback("v").unwrap();
    assert_eq!((done.served, done.previous), (1, 2));
    assert_eq!(f.counts("v").len(), 3);
    let f = f.reopen_with(|| ());
    let d = f.manager.describe("v").unwrap();
    assert_eq!(d.served_version.version, 1, "a restart keeps the rollback");
    assert_eq!(
        d.grace_versions
            .iter()
            .map(|g| g.version)
            .collect::<Vec<_>>(),
        [2]
    );
    f.eventually("version 2 runs again after the restart", || {
        f.manager.describe("v").unwrap().served_version.partitions[0].committed == 4
            && f.manager.rollback("v").is_ok()
    });
    assert_eq!(f.manager.describe("v").unwrap().served_version.version, 2);
}

#[test]
fn a_rollback_without_a_kept_version_is_refused() {
    let f = fixture();
    f.produce("a", &["x"]);
    f.manager
        .create("v", counts("a", "v"), None, ViewSettings::default())
        .unwrap();
    assert!(matches!(
        f.manager.rollback("v"),
        Err(super::ViewError::Refused {
            code: "nothing_to_roll_back",
            ..
        })
    ));
}

#[test]
fn a_diff_of_a_one_minute_and_a_five_minute_version_matches_a_direct_comparison() {
    use kappa_processor::window::WindowSpec;
    use std::collections::BTreeMap;
    let f = fixture();
    // 40 events of three keys, 17 s apart (about eleven minutes).
    let base_ms = 1_767_225_600_000_i64;
    let topic = f.log.create_topic("a", TopicConfig::default()).unwrap();
    let records = (0..40)
        .map(|i| ProduceRecord {
            partition: None,
            record: NewRecord {
                key: None,
                value: Bytes::from(format!("{{\"k\":\"{}\"}}", ["x", "y", "z"][i % 3])),
                timestamp: Some(base_ms + i as i64 * 17_000),
                headers: Vec::new(),
            },
        })
        .collect();
    f.io.block_on(topic.produce(records, None)).unwrap();
    let windowed = |size_ms: i64| {
        Pipeline::from_topic("a")
            .key_by([("k", Expr::field("k"))])
            .window(WindowSpec::Tumbling { size_ms })
            .aggregate([dsl::count("n")])
            .to_view("v")
    };
    f.manager
        .create("v", windowed(60_000), None, ViewSettings::default())
        .unwrap();
    f.manager
        .replace(
            "v",
            windowed(300_000),
            None,
            Swap::Manual,
            ViewSettings::default(),
        )
        .unwrap();
    f.eventually("the build is ready", || {
        f.manager.tick();
        f.manager.describe("v").unwrap().status == "ready"
    });

    // The direct comparison: every row of both versions.
    let rows = |version: u64| -> BTreeMap<(String, Option<i64>, Option<i64>), serde_json::Value> {
        let s = super::manager::scope("v", version);
        let (rows, next) = kappa_processor::view::query(
            &f.store(&s),
            &s,
            &kappa_processor::view::ViewQuery::All,
            None,
            10_000,
        )
        .unwrap();
        assert!(next.is_none());
        rows.into_iter()
            .map(|r| ((r.key, r.window_start, r.window_end), r.row))
            .collect()
    };
    let (one, five) = (rows(1), rows(2));
    let added = five.keys().filter(|k| !one.contains_key(*k)).count() as u64;
    let removed = one.keys().filter(|k| !five.contains_key(*k)).count() as u64;
    let (changed, unchanged) = one
        .iter()
        .filter_map(|(k, v)| five.get(k).map(|w| v != w))
        .fold(
            (0, 0),
            |(c, u), differs| if differs { (c + 1, u) } else { (c, u + 1) },
        );
    assert!(added > 0 && removed > 0, "{one:?} {five:?}");

    let (base, candidate, diff) = f.manager.diff("v", None, None, 1_000).unwrap();
    assert_eq!((base, candidate), (1, 2));
    assert_eq!(
        (diff.added, diff.removed, diff.changed, diff.unchanged),
        (added, removed, changed, unchanged)
    );
    assert_eq!(diff.examples.len() as u64, added + removed + changed);
    // Examples come in key order, each with both sides as they are.
    for e in &diff.examples {
        let k = (e.key.clone(), e.window_start, e.window_end);
        assert_eq!(e.base.as_ref(), one.get(&k), "{e:?}");
        assert_eq!(e.candidate.as_ref(), five.get(&k), "{e:?}");
    }
    let keys: Vec<_> = diff
        .examples
        .iter()
        .map(|e| (e.key.clone(), e.window_start))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    // The other way round, and capped examples.
    let (_, _, back) = f.manager.diff("v", Some(2), Some(1), 3).unwrap();
    assert_eq!((back.added, back.removed), (removed, added));
    assert_eq!(back.examples.len(), 3);
    assert!(matches!(
        f.manager.diff("v", Some(7), None, 3),
        Err(super::ViewError::UnknownVersion { version: 7, .. })
    ));
}

#[test]
fn a_view_keeps_as_many_replaced_versions_as_it_says_and_the_server_default_otherwise() {
    // The server keeps one replaced version for an hour.
    let f = fixture_with_grace(3_600_000);
    f.produce("a", &["x", "y"]);
    let plan = |aggregates: usize| {
        let names = ["n", "m", "o", "p"];
        Pipeline::from_topic("a")
            .key_by([("k", Expr::field("k"))])
            .aggregate(names[..aggregates].iter().map(|n| dsl::count(n)))
            .to_view("v")
    };
    let replace_and_swap = |aggregates: usize, settings: ViewSettings| {
        let Change::Building(version) = f
            .manager
            .replace("v", plan(aggregates), None, Swap::Auto, settings)
            .unwrap()
        else {
            panic!("a new version")
        };
        f.eventually("the swap", || {
            f.manager.tick();
            f.manager.describe("v").unwrap().served_version.version == version
        });
    };
    let kept = || -> Vec<u64> {
        let d = f.manager.describe("v").unwrap();
        d.grace_versions.iter().map(|g| g.version).collect()
    };
    f.manager
        .create("v", plan(1), None, ViewSettings::default())
        .unwrap();
    replace_and_swap(2, ViewSettings::default());
    replace_and_swap(3, ViewSettings::default());
    assert_eq!(
        kept(),
        vec![2],
        "the server keeps one: version 1 was dropped"
    );
    f.manager.wait_retired(None);
    assert!(!f.manager.host.has(&super::manager::scope("v", 1)));
    let d = f.manager.describe("v").unwrap();
    assert_eq!((d.keep_versions, d.version_grace_ms), (1, 3_600_000));

    // KEEP_VERSIONS=2 on the view (set by the statement that replaces it).
    let two = ViewSettings {
        keep_versions: Some(2),
        version_grace_ms: Some(600_000),
        parallelism: None,
    };
    replace_and_swap(4, two);
    assert_eq!(kept(), vec![2, 3]);
    let d = f.manager.describe("v").unwrap();
    assert_eq!((d.keep_versions, d.version_grace_ms), (2, 600_000));
    let left = d.grace_versions[1].readable_until_ms - kappa_log::now_ms();
    assert!(
        (500_000..=600_000).contains(&left),
        "version 3 is kept for the view's VERSION_GRACE: {left} ms left"
    );
    // Kept in the catalog across a restart of the manager.
    assert_eq!(f.manager.catalog().views["v"].keep_versions, Some(2));

    // KEEP_VERSIONS=0: a replaced version is dropped at the swap; an
    // unchanged definition still takes the new settings.
    let none = ViewSettings {
        keep_versions: Some(0),
        version_grace_ms: None,
        parallelism: None,
    };
    assert_eq!(
        f.manager
            .replace("v", plan(4), None, Swap::Auto, none)
            .unwrap(),
        Change::Unchanged
    );
    assert_eq!(f.manager.describe("v").unwrap().keep_versions, 0);
}

/// Every row of `view`, as the rows endpoint reads them.
fn read_all(f: &Fixture, view: &str) -> super::RowsAnswer {
    f.manager
        .rows(
            view,
            &super::RowsRequest {
                max_staleness: None,
                test: None,
                filter: Default::default(),
                query: kappa_processor::view::ViewQuery::All,
                cursor: None,
                limit: 100,
                version: None,
                after: Vec::new(),
                max_wait: Duration::ZERO,
            },
        )
        .unwrap()
}

#[test]
fn a_first_build_is_catching_up_with_progress_until_it_reached_the_input_end_once() {
    let f = fixture();
    let keys: Vec<String> = (0..500).map(|i| format!("k{}", i % 7)).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    f.produce("a", &keys);
    f.manager
        .create("v", counts("a", "v"), None, ViewSettings::default())
        .unwrap();
    // Before the supervisor looked, what it says follows where the version
    // is: still behind, or already at the end.
    let d = f.manager.describe("v").unwrap();
    assert_eq!(
        d.served_version.catching_up,
        d.served_version.lag > 0,
        "{d:?}"
    );
    // The supervisor looked while it was behind (as it would on a large
    // input): catching up, with a first build's progress, rows partial.
    let s = super::manager::scope("v", 1);
    let mut looked = super::catch_up::CatchUp::default();
    looked.observe(f.clock.load(Ordering::Acquire), 500, false);
    super::manager::lock(&f.manager.state)
        .catch_up
        .insert(s, looked);
    let d = f.manager.describe("v").unwrap();
    assert_eq!(d.status, "catching_up");
    assert!(d.served_version.catching_up);
    let progress = d.served_version.catch_up.as_ref().expect("progress");
    assert!(progress.total >= progress.done, "{progress:?}");
    assert!(read_all(&f, "v").catching_up);
    f.eventually("the view processed its input", || {
        f.manager.describe("v").unwrap().served_version.lag == 0
    });
    f.manager.tick();
    let d = f.manager.describe("v").unwrap();
    assert_eq!(d.status, "running");
    assert!(!d.served_version.catching_up && d.served_version.catch_up.is_none());
    assert!(!read_all(&f, "v").catching_up);
    // Once caught up, a burst does not make it "catching up" again.
    f.produce("a", &keys);
    f.manager.tick();
    assert!(!f.manager.describe("v").unwrap().served_version.catching_up);
}

#[test]
fn a_drop_returns_while_the_version_is_stalled_and_its_state_goes_once_it_ended() {
    let f = fixture();
    f.produce("a", &["x"]);
    f.manager
        .create("v", counts("a", "v"), None, ViewSettings::default())
        .unwrap();
    let old = super::manager::scope("v", 1);
    // Not held: the test must not keep the old store open.
    let store = Arc::downgrade(&f.store(&old));
    let store = || store.upgrade().expect("open until retired");
    // The version's next commit stalls (a slow disk, a huge cache flush).
    store().hold_writes(true);
    f.produce("a", &["y"]);
    f.eventually("the commit to stall", || store().writes_waiting() == 1);

    // DROP does not wait for the stalled version: it is gone from the
    // catalog at once and retires in the background.
    f.manager.drop_view("v").unwrap();
    assert!(f.manager.describe("v").is_err());
    assert!(super::manager::lock(&f.manager.state)
        .retiring
        .contains(&old));
    let dir = f.manager.host.dir().to_path_buf();
    assert_eq!(
        names_starting(&dir, "v@1").len(),
        1,
        "state kept while it runs"
    );

    // A view of the same name made meanwhile waits for the old state to go,
    // then builds from scratch.
    let recreate = {
        let manager = f.manager.clone();
        std::thread::spawn(move || {
            manager
                .create("v", counts("a", "v"), None, ViewSettings::default())
                .unwrap()
        })
    };
    store().hold_writes(false);
    assert_eq!(recreate.join().unwrap(), 1);
    assert!(super::manager::lock(&f.manager.state).retiring.is_empty());
    f.eventually("the new version to count both records", || {
        read_all(&f, "v").rows.len() == 2
    });
}
