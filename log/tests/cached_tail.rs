//! The page cache tail (`TopicConfig::cached_tail_bytes`): under
//! `fsync = always` a partition keeps only its newest bytes in the
//! operating system's page cache — the older bytes of its active segment,
//! and of the segment sealed before it, leave the cache after the writer's
//! fsync — and every record still reads back, from disk. Without the
//! setting, or under `interval`, the page cache is left to the operating
//! system. Which pages are cached is read with `mincore`.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, NewRecord, TopicChanges, TopicConfig};

const PAGE: usize = 4096;

/// Per page of the file at `path`: whether it is in the page cache.
fn cached_pages(path: &Path) -> Vec<bool> {
    let file = std::fs::File::open(path).unwrap();
    let len = file.metadata().unwrap().len() as usize;
    if len == 0 {
        return Vec::new();
    }
    // SAFETY: the mapping is only handed to mincore, never read; the log
    // only appends to the file.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    let mut vec = vec![0u8; len.div_ceil(PAGE)];
    // SAFETY: `map` is a live mapping of `len` bytes and `vec` holds one
    // byte per page of it.
    let rc = unsafe { libc::mincore(map.as_ptr() as *mut _, len, vec.as_mut_ptr()) };
    assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
    vec.iter().map(|b| b & 1 == 1).collect()
}

/// The segment files of partition 0 of `t`, oldest first.
fn segments(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("topics/t/0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    files.sort();
    files
}

/// `n` appends of 64 records of 1 KiB each (64 KiB), numbered from `first`.
async fn append(log: &Log, first: usize, n: usize) {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    for a in first..first + n {
        let records = (0..64)
            .map(|i| NewRecord {
                key: None,
                value: Bytes::from(format!("{a:06}-{i:02}-{}", "x".repeat(1014))),
                timestamp: Some(1_767_225_600_000),
                headers: vec![],
            })
            .collect();
        p.append(AppendRequest {
            records,
            idempotency_key: None,
            as_sent: None,
        })
        .await
        .unwrap();
    }
}

/// Every value of partition 0, in order.
fn values(log: &Log) -> Vec<Bytes> {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut out = Vec::new();
    let mut at = 0;
    while at < p.end_offset() {
        let fetch = p.read(at, 10_000, u64::MAX).unwrap();
        out.extend(fetch.records().filter(|r| r.offset >= at).map(|r| r.value));
        at = fetch.next_offset;
    }
    out
}

/// A log in a directory under the target directory (on disk: a tmpfs
/// keeps its pages whatever it is told).
fn open_log() -> (tempfile::TempDir, Log) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    (dir, log)
}

#[tokio::test]
async fn a_partition_keeps_only_its_newest_bytes_in_the_page_cache() {
    let (dir, log) = open_log();
    let config = TopicConfig {
        segment_bytes: 8 << 20,
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    log.create_topic("t", config).unwrap();
    // Without the setting, everything written stays cached.
    append(&log, 0, 16).await;
    let first = segments(dir.path());
    assert!(
        cached_pages(&first[0]).iter().all(|&c| c),
        "nothing dropped"
    );
    // Set later, it applies from the next fsync on: 14 MiB more in
    // segments of 8 MiB.
    let tail = 1 << 20;
    log.topic("t")
        .unwrap()
        .alter(&TopicChanges {
            cached_tail_bytes: Some(Some(tail)),
            ..Default::default()
        })
        .unwrap();
    append(&log, 16, 224).await;
    let files = segments(dir.path());
    assert_eq!(files.len(), 2, "{files:?}");
    let (active, sealed) = files.split_last().unwrap();
    for path in sealed {
        let cached = cached_pages(path);
        assert!(
            cached.iter().all(|&c| !c),
            "{path:?}: {} of {} pages still cached: {:?}",
            cached.iter().filter(|&&c| c).count(),
            cached.len(),
            cached
                .iter()
                .enumerate()
                .filter(|(_, &c)| c)
                .map(|(i, _)| i)
                .collect::<Vec<_>>()
        );
    }
    // The active segment: its newest `tail` bytes cached, the older ones
    // dropped but for the pages of a folio (at most a huge page, 2 MiB)
    // that reaches into the tail, dropped with it later.
    let cached = cached_pages(active);
    let size = std::fs::metadata(active).unwrap().len() as usize;
    assert!(size > 6 << 20, "the active segment holds 7 MiB: {size}");
    let older = (size - tail as usize) / PAGE;
    let folio = (2 << 20) / PAGE;
    let still = |pages: &[bool]| pages.iter().filter(|&&c| c).count();
    assert_eq!(still(&cached[..older - folio]), 0, "older pages dropped");
    assert!(
        still(&cached[older - folio..older]) < folio,
        "one folio at most"
    );
    assert!(cached[older..].iter().all(|&c| c), "the tail is cached");
    // Every record reads back, from disk where it was dropped.
    let values = values(&log);
    assert_eq!(values.len(), 240 * 64);
    for (n, value) in values.iter().enumerate() {
        let want = format!("{:06}-{:02}-", n / 64, n % 64);
        assert!(value.starts_with(want.as_bytes()), "record {n}");
    }
}

#[tokio::test]
async fn under_interval_the_page_cache_is_left_to_the_operating_system() {
    let (dir, log) = open_log();
    let config = TopicConfig {
        fsync: FsyncPolicy::Interval,
        cached_tail_bytes: Some(64 << 10),
        ..Default::default()
    };
    log.create_topic("t", config).unwrap();
    append(&log, 0, 32).await;
    let files = segments(dir.path());
    let cached = cached_pages(&files[0]);
    assert!(cached.len() > 16, "2 MiB written");
    assert!(cached.iter().all(|&c| c), "nothing dropped");
    assert_eq!(values(&log).len(), 32 * 64);
}

mod support;

/// Format v5's fixture (log/FORMAT.md §9.1): a topic whose `topic.json`
/// has `cached_tail_bytes`, as a derived stream's has.
fn fixture() -> PathBuf {
    support::manifest_dir().join("tests/fixtures/v5")
}

#[tokio::test]
#[ignore = "regenerates the committed fixture"]
async fn write_v5_fixture() {
    let dir = &fixture();
    let _ = std::fs::remove_dir_all(dir);
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let config = TopicConfig {
        segment_bytes: 64 << 10,
        fsync: FsyncPolicy::Always,
        cached_tail_bytes: Some(8 << 20),
        ..Default::default()
    };
    log.create_topic("t", config).unwrap();
    append(&log, 0, 2).await;
    log.close();
}

#[test]
fn v5_fixture_reads_back_with_its_page_cache_tail() {
    let copy = tempfile::tempdir().unwrap();
    support::copy_dir(&fixture(), copy.path());
    let topic_json = std::fs::read_to_string(copy.path().join("topics/t/topic.json")).unwrap();
    assert!(
        topic_json.contains("\"cached_tail_bytes\": 8388608"),
        "{topic_json}"
    );
    let log = Log::open(LogConfig::new(copy.path())).unwrap();
    let topic = log.topic("t").unwrap();
    assert_eq!(topic.describe().config.cached_tail_bytes, Some(8 << 20));
    assert!(
        topic.partition(0).unwrap().describe().segment_count > 1,
        "sealed segments"
    );
    let values = values(&log);
    assert_eq!(values.len(), 2 * 64);
    assert!(values[127].starts_with(b"000001-63-"));
}
