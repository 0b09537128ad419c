//! Tiered storage (issue 40, log/FORMAT.md §8.4), with a store that is a
//! local directory: sealed segments past a topic's local retention move
//! to the store and leave the disk; every record still reads at its
//! offset — from the start, by timestamp, after a reopen (the manifest
//! lists them; downloads come back through the segment cache); a store
//! that cannot be reached fails reads of moved segments with a clear
//! error while appends and recent reads go on, and nothing is lost once
//! it is back; retention and topic deletion delete the objects; a move
//! stopped after its commit point is finished at the next open.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use kappa_log::{
    AppendRequest, FsyncPolicy, Log, LogConfig, LogError, NewRecord, SegmentStore, TopicChanges,
    TopicConfig,
};

/// A store in a directory: objects are files named by their keys.
#[derive(Debug)]
struct DirStore {
    root: PathBuf,
    up: AtomicBool,
}

impl DirStore {
    fn path(&self, key: &str) -> Result<PathBuf, String> {
        if !self.up.load(Ordering::SeqCst) {
            return Err("connection refused (the test took the store down)".into());
        }
        Ok(self.root.join(key))
    }

    fn objects(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut dirs = vec![self.root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                if entry.path().is_dir() {
                    dirs.push(entry.path());
                } else {
                    out.push(entry.file_name().to_string_lossy().into_owned());
                }
            }
        }
        out.sort();
        out
    }
}

impl SegmentStore for DirStore {
    fn put(&self, key: &str, from: &Path) -> Result<(), String> {
        let to = self.path(key)?;
        std::fs::create_dir_all(to.parent().unwrap()).map_err(|e| e.to_string())?;
        std::fs::copy(from, &to)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn get(&self, key: &str, to: &Path) -> Result<(), String> {
        std::fs::copy(self.path(key)?, to)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
    fn delete(&self, key: &str) -> Result<(), String> {
        match std::fs::remove_file(self.path(key)?) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e.to_string()),
        }
    }
    fn describe(&self) -> String {
        format!("dir://{}", self.root.display())
    }
}

struct Setup {
    dir: tempfile::TempDir,
    store: Arc<DirStore>,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(DirStore {
            root: dir.path().join("store"),
            up: AtomicBool::new(true),
        });
        Setup { dir, store }
    }

    fn open(&self) -> Log {
        Log::open(LogConfig {
            remote_store: Some(self.store.clone()),
            ..LogConfig::new(self.dir.path().join("log"))
        })
        .unwrap()
    }

    fn partition_dir(&self) -> PathBuf {
        self.dir.path().join("log/topics/t/0")
    }

    fn local_segments(&self) -> usize {
        std::fs::read_dir(self.partition_dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".log")
            })
            .count()
    }
}

fn tiered_topic() -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        fsync: FsyncPolicy::Never,
        local_retention_ms: Some(60_000),
        ..Default::default()
    }
}

/// Appends `n` records from number `first`, 4 per append; returns them.
fn append(log: &Log, first: u64, n: u64) -> Vec<(u64, Bytes)> {
    let rt = support::runtime();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut out = Vec::new();
    for chunk in (first..first + n).collect::<Vec<_>>().chunks(4) {
        let values: Vec<Bytes> = chunk
            .iter()
            .map(|i| Bytes::from(format!(r#"{{"i":{i},"pad":"{}"}}"#, "p".repeat(60))))
            .collect();
        let outcome = rt
            .block_on(
                p.append(AppendRequest {
                    records: chunk
                        .iter()
                        .zip(&values)
                        .map(|(i, v)| NewRecord {
                            key: Some(Bytes::from(format!("k{}", i % 7))),
                            value: v.clone(),
                            timestamp: Some(1_000_000 + *i as i64),
                            headers: vec![],
                        })
                        .collect(),
                    idempotency_key: None,
                    as_sent: None,
                }),
            )
            .unwrap();
        for (j, v) in values.into_iter().enumerate() {
            out.push((outcome.base_offset + j as u64, v));
        }
    }
    out
}

fn read_all(log: &Log) -> Result<Vec<(u64, Bytes)>, LogError> {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut out = Vec::new();
    let mut at = p.start_offset();
    while at < p.end_offset() {
        let fetch = p.read(at, 50, u64::MAX)?;
        out.extend(fetch.records().map(|r| (r.offset, r.value)));
        at = fetch.next_offset;
    }
    Ok(out)
}

fn later() -> i64 {
    kappa_log::now_ms() + 3_600_000
}

#[test]
fn old_segments_move_to_the_store_and_read_back_from_it() {
    let setup = Setup::new();
    let log = setup.open();
    log.create_topic("t", tiered_topic()).unwrap();
    let appended = append(&log, 0, 300);
    let before = setup.local_segments();
    assert_eq!(
        log.tier(kappa_log::now_ms()).unwrap(),
        0,
        "nothing is a minute old yet"
    );
    let moved = log.tier(later()).unwrap();
    assert_eq!(
        moved,
        before - 1,
        "every sealed segment moved, the active one stayed"
    );
    assert_eq!(setup.local_segments(), 1);
    assert_eq!(setup.store.objects().len(), 3 * moved);
    let p = log.topic("t").unwrap();
    let description = p.partition(0).unwrap().describe();
    assert!(description.remote_bytes > 0 && description.remote_bytes < description.bytes);
    assert_eq!(read_all(&log).unwrap(), appended);
    // By timestamp: record i has timestamp 1_000_000 + i.
    let partition = p.partition(0).unwrap();
    assert_eq!(partition.offset_for_timestamp(1_000_123).unwrap(), 123);
    drop(p);

    // A reopen finds them through remote.json; the downloads are gone.
    log.close();
    drop(log);
    assert!(setup.partition_dir().join("remote.json").exists());
    let log = setup.open();
    assert_eq!(read_all(&log).unwrap(), appended);
    let more = append(&log, 300, 40);
    assert_eq!(read_all(&log).unwrap(), [appended, more].concat());
    log.close();
}

#[test]
fn an_unreachable_store_fails_old_reads_clearly_while_appends_and_recent_reads_go_on() {
    let setup = Setup::new();
    let log = setup.open();
    log.create_topic("t", tiered_topic()).unwrap();
    let appended = append(&log, 0, 200);
    log.tier(later()).unwrap();
    log.close();
    drop(log);
    let log = setup.open();
    setup.store.up.store(false, Ordering::SeqCst);
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let error = p.read(0, 10, u64::MAX).unwrap_err();
    assert!(
        matches!(&error, LogError::Unavailable(m) if m.contains("dir://") && m.contains("connection refused")),
        "{error}"
    );
    let recent = p.end_offset() - 1;
    let fetch = p.read(recent, 1, u64::MAX).unwrap();
    assert_eq!(fetch.records().next().unwrap().offset, recent);
    let more = append(&log, 200, 20);
    // A move that cannot upload leaves the segments local.
    assert!(log.tier(later()).is_err());
    setup.store.up.store(true, Ordering::SeqCst);
    assert_eq!(read_all(&log).unwrap(), [appended, more].concat());
    log.close();
}

#[test]
fn retention_and_topic_deletion_delete_the_objects() {
    let setup = Setup::new();
    let log = setup.open();
    log.create_topic("t", tiered_topic()).unwrap();
    append(&log, 0, 200);
    let moved = log.tier(later()).unwrap();
    assert!(moved > 2);
    let topic = log.topic("t").unwrap();
    topic
        .alter(&TopicChanges {
            retention_ms: Some(Some(1_800_000)),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(log.enforce_retention(later()).unwrap(), moved);
    assert!(
        setup.store.objects().is_empty(),
        "{:?}",
        setup.store.objects()
    );
    assert!(topic.partition(0).unwrap().start_offset() > 0);
    append(&log, 200, 100);
    assert!(log.tier(later() + 3_600_000).unwrap() > 0);
    assert!(!setup.store.objects().is_empty());
    drop(topic);
    log.delete_topic("t").unwrap();
    assert!(
        setup.store.objects().is_empty(),
        "{:?}",
        setup.store.objects()
    );
    log.close();
}

#[test]
fn a_move_stopped_after_the_manifest_is_finished_at_open() {
    let setup = Setup::new();
    let log = setup.open();
    log.create_topic("t", tiered_topic()).unwrap();
    let appended = append(&log, 0, 100);
    log.tier(later()).unwrap();
    log.close();
    drop(log);
    // The local files of the first moved segment, as a stop between the
    // manifest and the deletion leaves them.
    let first = "00000000000000000000";
    let objects = setup.store.root.clone();
    for ext in ["log", "index", "timeindex"] {
        let object = walk_find(&objects, &format!("{first}.{ext}")).unwrap();
        std::fs::copy(object, setup.partition_dir().join(format!("{first}.{ext}"))).unwrap();
    }
    let local = setup.local_segments();
    let log = setup.open();
    assert_eq!(
        setup.local_segments(),
        local - 1,
        "the local copy is removed"
    );
    assert_eq!(read_all(&log).unwrap(), appended);
    log.close();
}

fn walk_find(dir: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = walk_find(&path, name) {
                return Some(found);
            }
        } else if entry.file_name().to_string_lossy() == name {
            return Some(path);
        }
    }
    None
}

#[test]
fn a_local_retention_needs_a_store_and_a_tiered_partition_needs_its_store_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let error = log.create_topic("t", tiered_topic()).unwrap_err();
    assert!(
        matches!(&error, LogError::InvalidConfig(m) if m.contains("tiered")),
        "{error}"
    );
    log.close();
    drop(log);

    let setup = Setup::new();
    let log = setup.open();
    log.create_topic("t", tiered_topic()).unwrap();
    append(&log, 0, 100);
    log.tier(later()).unwrap();
    log.close();
    drop(log);
    let error = Log::open(LogConfig::new(setup.dir.path().join("log"))).unwrap_err();
    assert!(
        matches!(&error, LogError::Metadata { problem, .. } if problem.contains("tiered")),
        "{error}"
    );
}
