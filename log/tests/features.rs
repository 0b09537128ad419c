//! Behaviour of the log's features through its public API: segment roll,
//! retention, timestamp lookup, consumer groups, idempotency, topics,
//! limits, failure handling and waiting for data.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kappa_log::batch::ReadBatch;
use kappa_log::io::FaultInjector;
use kappa_log::{
    AppendChain, AppendClock, AppendRequest, EncodedRecords, Fetch, FsyncPolicy, Log, LogConfig,
    LogError, ManualTime, NewRecord, Partition, PendingAppend, ProduceRecord, ResetTo, Topic,
    TopicConfig,
};

fn records(n: usize, ts: i64) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            value: Bytes::from(vec![b'x'; 100]),
            timestamp: Some(ts + i as i64),
            ..Default::default()
        })
        .collect()
}

fn append(n: usize, ts: i64) -> AppendRequest {
    AppendRequest {
        records: records(n, ts),
        idempotency_key: None,
        as_sent: None,
    }
}

fn keyed(key: &str, n: usize) -> AppendRequest {
    AppendRequest {
        records: records(n, 0),
        idempotency_key: Some(key.as_bytes().to_vec()),
        as_sent: None,
    }
}

/// A topic with the default settings but `fsync`.
fn with_fsync(fsync: FsyncPolicy) -> TopicConfig {
    TopicConfig {
        fsync,
        ..Default::default()
    }
}

/// A log configuration over `dir` whose I/O goes through a fault injector.
fn with_faults(dir: &std::path::Path) -> (Arc<FaultInjector>, LogConfig) {
    let faults = Arc::new(FaultInjector::new());
    let config = LogConfig {
        faults: Some(faults.clone()),
        ..LogConfig::new(dir)
    };
    (faults, config)
}

/// A log in a fresh directory holding topic "t" with `config`.
fn log_with_topic(config: TopicConfig) -> (tempfile::TempDir, Log, Arc<Topic>) {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.create_topic("t", config).unwrap();
    (dir, log, topic)
}

fn small_segments() -> TopicConfig {
    TopicConfig {
        segment_bytes: 4096,
        retention_ms: None,
        fsync: FsyncPolicy::Never,
        ..Default::default()
    }
}

#[tokio::test]
async fn segments_roll_by_size() {
    let (dir, _log, topic) = log_with_topic(small_segments());
    let p = topic.partition(0).unwrap();
    for i in 0..40 {
        p.append(append(5, i)).await.unwrap();
    }
    let d = p.describe();
    // 40 batches of ~700 bytes in 4 KiB segments.
    assert!(d.segment_count >= 6, "{d:?}");
    let files: Vec<_> = std::fs::read_dir(dir.path().join("topics/t/0"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let logs = files
        .iter()
        .filter(|n| n.to_string_lossy().ends_with(".log"))
        .count();
    assert_eq!(logs, d.segment_count);
    for seg in std::fs::read_dir(dir.path().join("topics/t/0")).unwrap() {
        let seg = seg.unwrap();
        if seg.file_name().to_string_lossy().ends_with(".log") {
            assert!(seg.metadata().unwrap().len() <= 4096 + 800);
        }
    }
    assert_eq!(
        p.read(0, u64::MAX, u64::MAX).unwrap().records().count(),
        200
    );
}

#[tokio::test]
async fn segments_roll_by_age() {
    let config = TopicConfig {
        segment_ms: 1,
        ..small_segments()
    };
    let (_dir, _log, topic) = log_with_topic(config);
    let p = topic.partition(0).unwrap();
    p.append(append(1, 0)).await.unwrap();
    // Let the segment age past segment_ms (time passing, not synchronization).
    std::thread::sleep(Duration::from_millis(5));
    p.append(append(1, 0)).await.unwrap();
    assert_eq!(p.describe().segment_count, 2);
}

#[tokio::test]
async fn retention_by_time_deletes_old_sealed_segments_only() {
    let config = TopicConfig {
        retention_ms: Some(60_000),
        ..small_segments()
    };
    let (dir, log, topic) = log_with_topic(config);
    let p = topic.partition(0).unwrap();
    for i in 0..20 {
        p.append(append(5, i)).await.unwrap();
    }
    let before = p.describe();
    assert!(before.segment_count > 2);
    // Not yet old: nothing goes.
    assert_eq!(log.enforce_retention(kappa_log::now_ms()).unwrap(), 0);
    // An hour later everything sealed is past 60 s; the active one stays.
    let deleted = log
        .enforce_retention(kappa_log::now_ms() + 3_600_000)
        .unwrap();
    assert_eq!(deleted, before.segment_count - 1);
    let after = p.describe();
    assert_eq!(after.segment_count, 1);
    assert_eq!(after.end_offset, before.end_offset);
    assert!(after.start_offset > 0);
    assert!(matches!(
        p.read(0, 1, 1),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    let rest = p.read(after.start_offset, u64::MAX, u64::MAX).unwrap();
    assert_eq!(
        rest.records().count() as u64,
        after.end_offset - after.start_offset
    );
    // The start offset survives a reopen.
    drop(topic);
    drop(log);
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert_eq!(
        log.topic("t").unwrap().partition(0).unwrap().start_offset(),
        after.start_offset
    );
}

#[tokio::test]
async fn retention_by_bytes_keeps_the_partition_under_its_limit() {
    let config = TopicConfig {
        retention_bytes: Some(10_000),
        ..small_segments()
    };
    let (_dir, log, topic) = log_with_topic(config);
    let p = topic.partition(0).unwrap();
    for i in 0..40 {
        p.append(append(5, i)).await.unwrap();
    }
    assert!(p.describe().bytes > 20_000);
    let deleted = log.enforce_retention(kappa_log::now_ms()).unwrap();
    assert!(deleted > 0);
    let d = p.describe();
    assert!(d.bytes <= 10_000, "{d:?}");
    assert!(
        d.bytes > 10_000 - 4096 - 800,
        "deleted more than needed: {d:?}"
    );
    assert_eq!(
        p.read(d.start_offset, u64::MAX, u64::MAX)
            .unwrap()
            .records()
            .count() as u64,
        d.end_offset - d.start_offset
    );
}

/// The append time of the earliest stored batch: none while empty, the
/// first batch's while it is stored, the new earliest batch's once
/// retention deleted the old one (each batch appended a second apart).
#[tokio::test]
async fn the_earliest_append_time_follows_the_earliest_stored_batch() {
    let dir = tempfile::tempdir().unwrap();
    let time = ManualTime::new(1_700_000_000_000);
    let mut config = LogConfig::new(dir.path());
    config.clock = Arc::new(AppendClock::with_source(time.source()));
    let log = Log::open(config).unwrap();
    let topic_config = TopicConfig {
        retention_bytes: Some(10_000),
        ..small_segments()
    };
    let topic = log.create_topic("t", topic_config).unwrap();
    let p = topic.partition(0).unwrap();
    assert_eq!(p.earliest_append_time().unwrap(), None, "empty");
    for i in 0..40 {
        p.append(append(5, i)).await.unwrap();
        time.advance(1_000);
    }
    assert_eq!(
        p.earliest_append_time().unwrap(),
        Some(1_700_000_000_000),
        "the first batch's"
    );
    assert!(log.enforce_retention(time.get()).unwrap() > 0);
    let start = p.start_offset();
    assert!(start > 0);
    let now_first = p.read(start, 1, 1).unwrap().batches[0].append_time();
    assert!(now_first > 1_700_000_000_000);
    assert_eq!(p.earliest_append_time().unwrap(), Some(now_first));
}

#[tokio::test]
async fn offset_lookup_by_timestamp_finds_the_first_record_at_or_after() {
    let (_dir, _log, topic) = log_with_topic(small_segments());
    let p = topic.partition(0).unwrap();
    // Offsets 0..100 with timestamps 1000, 1010, ...; offset 50 is late.
    for i in 0..100i64 {
        let ts = if i == 50 { 5 } else { 1000 + 10 * i };
        p.append(AppendRequest {
            records: records(1, ts),
            idempotency_key: None,
            as_sent: None,
        })
        .await
        .unwrap();
    }
    assert!(p.describe().segment_count > 3);
    assert_eq!(p.offset_for_timestamp(0).unwrap(), 0);
    assert_eq!(p.offset_for_timestamp(5).unwrap(), 0);
    assert_eq!(p.offset_for_timestamp(1000).unwrap(), 0);
    assert_eq!(p.offset_for_timestamp(1001).unwrap(), 1);
    assert_eq!(p.offset_for_timestamp(1500).unwrap(), 51);
    assert_eq!(p.offset_for_timestamp(1495).unwrap(), 51);
    assert_eq!(p.offset_for_timestamp(1490).unwrap(), 49);
    assert_eq!(p.offset_for_timestamp(1990).unwrap(), 99);
    assert_eq!(p.offset_for_timestamp(1991).unwrap(), 100);
}

#[tokio::test]
async fn consumer_groups_commit_reset_and_report_lag() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let topic = log
            .create_topic(
                "t",
                TopicConfig {
                    partitions: 2,
                    ..small_segments()
                },
            )
            .unwrap();
        for p in topic.partitions() {
            for i in 0..10 {
                p.append(append(1, 1000 + i * 100)).await.unwrap();
            }
        }
        let before = log.group_offsets("g", "t").unwrap();
        assert_eq!(before[0].committed, None);
        assert_eq!(before[0].lag, 10);
        log.commit_offsets("g", "t", &[(0, 4), (1, 10)]).unwrap();
        assert!(matches!(
            log.commit_offsets("g", "t", &[(0, 11)]),
            Err(LogError::OffsetOutOfRange { .. })
        ));
        assert!(matches!(
            log.commit_offsets("g", "t", &[(2, 1)]),
            Err(LogError::UnknownPartition { .. })
        ));
        assert!(matches!(
            log.commit_offsets("g", "nope", &[(0, 1)]),
            Err(LogError::UnknownTopic(_))
        ));
    }
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let offsets = log.group_offsets("g", "t").unwrap();
    assert_eq!((offsets[0].committed, offsets[0].lag), (Some(4), 6));
    assert_eq!((offsets[1].committed, offsets[1].lag), (Some(10), 0));
    assert_eq!(log.groups(), vec!["g".to_string()]);

    assert_eq!(
        log.reset_offsets("g", "t", ResetTo::Earliest).unwrap(),
        vec![(0, 0), (1, 0)]
    );
    assert_eq!(
        log.reset_offsets("g", "t", ResetTo::Latest).unwrap(),
        vec![(0, 10), (1, 10)]
    );
    assert_eq!(
        log.reset_offsets("g", "t", ResetTo::Timestamp(1350))
            .unwrap(),
        vec![(0, 4), (1, 4)]
    );
    assert_eq!(
        log.reset_offsets("g", "t", ResetTo::Timestamp(99_999))
            .unwrap(),
        vec![(0, 10), (1, 10)]
    );
    assert_eq!(
        log.reset_offsets("g", "t", ResetTo::Offset(7)).unwrap(),
        vec![(0, 7), (1, 7)]
    );
    assert_eq!(
        log.reset_offsets("g", "t", ResetTo::Offset(70)).unwrap(),
        vec![(0, 10), (1, 10)]
    );
    log.reset_offsets("g", "t", ResetTo::Offset(3)).unwrap();
    drop(log);
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert_eq!(log.group_offsets("g", "t").unwrap()[1].committed, Some(3));
    // Deleting the topic forgets its offsets.
    log.delete_topic("t").unwrap();
    assert!(log.committed("g").is_empty());
}

#[tokio::test]
async fn idempotent_appends_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let topic = log.create_topic("t", small_segments()).unwrap();
        let p = topic.partition(0).unwrap();
        p.append(append(3, 0)).await.unwrap();
        let first = p.append(keyed("req-1", 2)).await.unwrap();
        assert!(!first.duplicate);
        let again = p.append(keyed("req-1", 2)).await.unwrap();
        assert!(again.duplicate);
        assert_eq!(again.base_offset, first.base_offset);
        assert_eq!(p.end_offset(), 5);
        // Push the key into a sealed segment so recovery must look there.
        for i in 0..10 {
            p.append(append(5, i)).await.unwrap();
        }
        assert!(p.describe().segment_count > 1);
        first
    };
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let p_end = log.topic("t").unwrap().partition(0).unwrap().end_offset();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let retry = p.append(keyed("req-1", 2)).await.unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.base_offset, first.base_offset);
    assert_eq!(p.end_offset(), p_end, "a retry appends nothing");
    // The same key for a different request is a conflict.
    assert!(matches!(
        p.append(keyed("req-1", 3)).await,
        Err(LogError::IdempotencyKeyReused { .. })
    ));
    // Produce through the topic: a retry returns every record's offset.
    let produce = || {
        let records = (0..4)
            .map(|i| ProduceRecord {
                partition: None,
                record: NewRecord::value(format!("v{i}")),
            })
            .collect();
        topic.produce(records, Some(b"req-2".to_vec()))
    };
    let a = produce().await.unwrap();
    let b = produce().await.unwrap();
    assert!(!a.duplicate && b.duplicate);
    assert_eq!(a.records, b.records);
}

#[tokio::test]
async fn idempotency_window_is_bounded_by_count() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        idempotency_window_keys: 2,
        ..LogConfig::new(dir.path())
    };
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    for key in ["a", "b", "c"] {
        p.append(keyed(key, 1)).await.unwrap();
    }
    assert!(p.append(keyed("c", 1)).await.unwrap().duplicate);
    // "a" fell out of the window: appended again.
    assert!(!p.append(keyed("a", 1)).await.unwrap().duplicate);
}

#[tokio::test]
async fn topics_are_created_listed_described_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_partitions: 8,
        ..LogConfig::new(dir.path())
    };
    let log = Log::open(config.clone()).unwrap();
    log.create_topic(
        "b",
        TopicConfig {
            partitions: 3,
            ..Default::default()
        },
    )
    .unwrap();
    log.create_topic("a", TopicConfig::default()).unwrap();
    assert!(matches!(
        log.create_topic("a", TopicConfig::default()),
        Err(LogError::TopicExists(_))
    ));
    for bad in ["", "..", "a/b", "../../etc", "x y"] {
        assert!(
            matches!(
                log.create_topic(bad, TopicConfig::default()),
                Err(LogError::InvalidTopicName { .. })
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        log.create_topic(
            "big",
            TopicConfig {
                partitions: 5,
                ..Default::default()
            }
        ),
        Err(LogError::PartitionBudget { requested: 5, .. })
    ));
    assert!(matches!(
        log.create_topic(
            "zero",
            TopicConfig {
                partitions: 0,
                ..Default::default()
            }
        ),
        Err(LogError::InvalidConfig(_))
    ));
    let names: Vec<String> = log.topics().iter().map(|t| t.name().to_string()).collect();
    assert_eq!(names, ["a", "b"]);
    log.topic("b")
        .unwrap()
        .partition(2)
        .unwrap()
        .append(append(3, 0))
        .await
        .unwrap();
    drop(log);

    let log = Log::open(config).unwrap();
    let d = log.topic("b").unwrap().describe();
    assert_eq!(d.partitions.len(), 3);
    assert_eq!(d.partitions[2].end_offset, 3);
    assert_eq!(d.partitions[2].segment_count, 1);
    assert!(d.partitions[2].bytes > 300);
    log.delete_topic("b").unwrap();
    assert!(matches!(log.topic("b"), Err(LogError::UnknownTopic(_))));
    assert!(!dir.path().join("topics/b").exists());
    log.create_topic("b", TopicConfig::default()).unwrap();
    assert_eq!(
        log.topic("b").unwrap().partition(0).unwrap().end_offset(),
        0
    );
}

#[tokio::test]
async fn appends_over_the_limits_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_batch_bytes: 4096,
        append_queue_bytes: 4096,
        max_batch_records: 10,
        ..LogConfig::new(dir.path())
    };
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    assert!(matches!(
        p.append(append(11, 0)).await,
        Err(LogError::LimitExceeded(_))
    ));
    let big = AppendRequest {
        records: vec![NewRecord::value(vec![0u8; 5000])],
        idempotency_key: None,
        as_sent: None,
    };
    assert!(matches!(
        p.append(big).await,
        Err(LogError::LimitExceeded(_))
    ));
    assert!(matches!(
        p.append(AppendRequest::default()).await,
        Err(LogError::InvalidArgument(_))
    ));
    let long_key = AppendRequest {
        records: records(1, 0),
        idempotency_key: Some(vec![b'k'; 256]),
        as_sent: None,
    };
    assert!(matches!(
        p.append(long_key).await,
        Err(LogError::InvalidArgument(_))
    ));
    assert_eq!(p.end_offset(), 0);
}

// Holding the gate across awaits is the point: it stalls the writer thread.
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn a_full_queue_answers_backpressure() {
    let dir = tempfile::tempdir().unwrap();
    let faults = Arc::new(FaultInjector::new());
    let config = LogConfig {
        max_batch_bytes: 4096,
        append_queue_bytes: 4096,
        append_queue_wait_ms: 50,
        faults: Some(faults.clone()),
        ..LogConfig::new(dir.path())
    };
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    let gate = faults.write_gate.lock().unwrap();
    // The stalled writer holds the first append; the rest fill the queue.
    let mut pending = Vec::new();
    let mut refused = 0;
    for _ in 0..10 {
        match p.submit(append(20, 0)).await {
            Ok(a) => pending.push(a),
            Err(LogError::Backpressure { .. }) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(refused > 0, "the queue never filled");
    drop(gate);
    for a in pending {
        a.wait().await.unwrap();
    }
    p.append(append(1, 0)).await.unwrap();
}

#[tokio::test]
async fn a_failed_fsync_stops_the_partition_until_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, config) = with_faults(dir.path());
    {
        let log = Log::open(config.clone()).unwrap();
        let topic = log
            .create_topic("t", with_fsync(FsyncPolicy::Always))
            .unwrap();
        let p = topic.partition(0).unwrap();
        p.append(append(2, 0)).await.unwrap();
        faults.fail_next_sync.store(true, Ordering::SeqCst);
        assert!(matches!(
            p.append(append(2, 0)).await,
            Err(LogError::PartitionFailed { .. })
        ));
        // No silent retry: later appends fail too, with the reason.
        match p.append(append(1, 0)).await {
            Err(LogError::PartitionFailed { reason, .. }) => {
                assert!(reason.contains("fsync"), "{reason}")
            }
            other => panic!("{other:?}"),
        }
        assert!(p.failure().is_some());
        // Acknowledged data still reads; the unacknowledged append is not visible.
        assert_eq!(p.end_offset(), 2);
        assert_eq!(p.read(0, 10, u64::MAX).unwrap().records().count(), 2);
    }
    let log = Log::open(config).unwrap();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let end = p.end_offset();
    assert!(end >= 2);
    assert_eq!(p.append(append(1, 0)).await.unwrap().base_offset, end);
}

fn interval_sync() -> TopicConfig {
    TopicConfig {
        fsync: FsyncPolicy::Interval,
        fsync_interval_ms: 1,
        ..Default::default()
    }
}

/// Waits until one of the injector's counters (`writes_started`,
/// `syncs_started`) has moved past `started`: a write or sync begun since
/// is held at its gate (the deadline only turns a hang into a failure).
async fn started_past(counter: &AtomicUsize, started: usize, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while counter.load(Ordering::SeqCst) == started {
        assert!(std::time::Instant::now() < deadline, "no {what} started");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

// Holding the gate across awaits is the point: it stalls the syncs.
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn interval_fsync_never_holds_up_appends() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, config) = with_faults(dir.path());
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", interval_sync()).unwrap();
    let p = topic.partition(0).unwrap();
    let gate = faults.sync_gate.lock().unwrap();
    let started = faults.syncs_started.load(Ordering::SeqCst);
    p.append(append(1, 0)).await.unwrap();
    // Wait until an interval sync of that append is stuck at the gate...
    started_past(&faults.syncs_started, started, "sync").await;
    // ...appends are still answered (the timeout only turns a hang into a
    // failure).
    for _ in 0..20 {
        tokio::time::timeout(Duration::from_secs(30), p.append(append(2, 0)))
            .await
            .expect("an append waited for a stalled fsync")
            .unwrap();
    }
    drop(gate);
    assert_eq!(p.end_offset(), 41);
}

/// Each batch's offsets, the fetch's `next_offset` and its `high_watermark`.
fn offsets_of<B: ReadBatch>(fetch: Fetch<B>) -> (Vec<(u64, u64)>, u64, u64) {
    let batches = fetch.batches.iter();
    let ranges = batches
        .map(|b| (b.base_offset(), b.next_offset()))
        .collect();
    (ranges, fetch.next_offset, fetch.high_watermark)
}

/// A read reads the partition's end offset, then its segments; appends
/// published in between must not reach the fetch. They did: the segments
/// showed the new batches, the fetch handed them out with its
/// `next_offset` and `high_watermark` still at the old end, and a reader
/// that trusts each batch to overlap `[offset, next_offset)` (a view's
/// input order) computed an empty or inverted range from them — a source
/// worker panicked allocating for it, one worker skipped the first new
/// batch's records for good.
// Holding the gate across awaits is the point: it stalls the read.
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn a_read_racing_appends_hands_out_nothing_past_its_end() {
    for framed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (faults, config) = with_faults(dir.path());
        let log = Log::open(config).unwrap();
        let topic = log.create_topic("t", TopicConfig::default()).unwrap();
        topic
            .partition(0)
            .unwrap()
            .append(append(3, 0))
            .await
            .unwrap();
        let gate = faults.read_gate.lock().unwrap();
        let gated = faults.reads_gated.load(Ordering::SeqCst);
        let reader = {
            let topic = topic.clone();
            std::thread::spawn(move || {
                let p = topic.partition(0).unwrap();
                match framed {
                    false => offsets_of(p.read(0, 1000, u64::MAX).unwrap()),
                    true => offsets_of(p.read_framed(0, 1000, u64::MAX).unwrap()),
                }
            })
        };
        // Wait until the read has its end offset (3) and waits at the gate...
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while faults.reads_gated.load(Ordering::SeqCst) == gated {
            assert!(
                std::time::Instant::now() < deadline,
                "the read never came to the gate"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // ...then publish two more batches before it reads the segments.
        let p = topic.partition(0).unwrap();
        p.append(append(2, 0)).await.unwrap();
        p.append(append(2, 0)).await.unwrap();
        drop(gate);
        let (batches, next_offset, high_watermark) = reader.join().unwrap();
        assert_eq!((next_offset, high_watermark), (3, 3), "framed: {framed}");
        assert_eq!(
            batches,
            vec![(0, 3)],
            "framed: {framed}: batches past the fetch's end"
        );
    }
}

#[tokio::test]
async fn a_failed_interval_fsync_stops_the_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, config) = with_faults(dir.path());
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", interval_sync()).unwrap();
    let p = topic.partition(0).unwrap();
    faults.fail_next_sync.store(true, Ordering::SeqCst);
    // Acknowledged once written; the syncer's failed sync comes after.
    p.append(append(2, 0)).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while p.failure().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "the failed sync never stopped the partition"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    match p.append(append(1, 0)).await {
        Err(LogError::PartitionFailed { reason, .. }) => {
            assert!(reason.contains("fsync"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(p.end_offset(), 2);
}

/// Records whose values say their number, ~1 KB each.
fn numbered(from: u64, n: u64) -> AppendRequest {
    AppendRequest {
        records: (from..from + n)
            .map(|i| NewRecord {
                value: Bytes::from(format!("{i:08}{}", "y".repeat(1000))),
                ..Default::default()
            })
            .collect(),
        idempotency_key: None,
        as_sent: None,
    }
}

/// Reads every record from `offset` on (in several reads when `max_bytes`
/// cuts them) and checks each value names its offset.
fn read_all_numbered(p: &kappa_log::Partition, offset: u64, max_bytes: u64) -> u64 {
    let mut next = offset;
    loop {
        let fetch = p.read(next, u64::MAX, max_bytes).unwrap();
        let before = next;
        for r in fetch.records() {
            assert_eq!(r.offset, next);
            assert_eq!(&r.value[..8], format!("{next:08}").as_bytes());
            next += 1;
        }
        if next == before {
            return next - offset;
        }
    }
}

#[tokio::test]
async fn large_reads_of_the_active_segment_are_whole_and_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log
        .create_topic("t", with_fsync(FsyncPolicy::Never))
        .unwrap();
    let p = topic.partition(0).unwrap();
    // ~3 MB in the active segment: reads of several MB are served from a
    // mapping of the file, small ones with pread.
    for i in 0..30 {
        p.append(numbered(i * 100, 100)).await.unwrap();
    }
    assert_eq!(p.describe().segment_count, 1);
    assert_eq!(read_all_numbered(p, 0, 64 << 20), 3000);
    // More appends after the mapping was made: reads past it map again.
    for i in 30..50 {
        p.append(numbered(i * 100, 100)).await.unwrap();
    }
    assert_eq!(read_all_numbered(p, 0, 64 << 20), 5000);
    assert_eq!(read_all_numbered(p, 2345, 8 << 20), 5000 - 2345);
    // Small reads (pread) agree.
    assert_eq!(read_all_numbered(p, 1000, 10_000), 4000);
}

#[tokio::test]
async fn a_failed_write_is_undone_and_the_partition_continues() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, config) = with_faults(dir.path());
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    p.append(append(2, 0)).await.unwrap();
    let size = p.describe().bytes;
    faults.fail_next_write_after.store(37, Ordering::SeqCst);
    assert!(matches!(
        p.append(append(2, 0)).await,
        Err(LogError::Io { .. })
    ));
    assert_eq!(
        std::fs::metadata(dir.path().join("topics/t/0/00000000000000000000.log"))
            .unwrap()
            .len(),
        size
    );
    assert_eq!(p.append(append(3, 0)).await.unwrap().base_offset, 2);
    assert_eq!(p.read(0, 100, u64::MAX).unwrap().records().count(), 5);
    drop(topic);
    drop(log);
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert_eq!(
        log.topic("t").unwrap().partition(0).unwrap().end_offset(),
        5
    );
}

#[tokio::test]
async fn a_waiting_reader_wakes_on_append_and_times_out_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(LogConfig::new(dir.path())).unwrap());
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    assert_eq!(p.wait_for(0, Duration::from_millis(20)).await.unwrap(), 0);
    let waiter = {
        let topic = topic.clone();
        tokio::spawn(async move {
            topic
                .partition(0)
                .unwrap()
                .wait_for(0, Duration::from_secs(60))
                .await
        })
    };
    p.append(append(1, 0)).await.unwrap();
    // Returns because of the append, long before its 60 s timeout.
    assert_eq!(waiter.await.unwrap().unwrap(), 1);
}

#[tokio::test]
async fn an_idempotency_key_reused_for_different_records_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log
        .create_topic(
            "t",
            TopicConfig {
                partitions: 3,
                ..small_segments()
            },
        )
        .unwrap();
    let request = |value: &str, partition: u32| {
        vec![ProduceRecord {
            partition: Some(partition),
            record: NewRecord::value(value.to_string()),
        }]
    };
    topic
        .produce(request("a", 0), Some(b"k".to_vec()))
        .await
        .unwrap();
    // Same count, different value.
    let err = topic
        .produce(request("b", 0), Some(b"k".to_vec()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LogError::IdempotencyKeyReused { .. }),
        "{err}"
    );
    // Same records, another partition.
    let err = topic
        .produce(request("a", 2), Some(b"k".to_vec()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, LogError::IdempotencyKeyReused { .. }),
        "{err}"
    );
    assert_eq!(topic.partition(2).unwrap().end_offset(), 0);
    // A true retry (timestamps may differ) is a duplicate, also after a reopen.
    assert!(
        topic
            .produce(request("a", 0), Some(b"k".to_vec()))
            .await
            .unwrap()
            .duplicate
    );
    drop(topic);
    drop(log);
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.topic("t").unwrap();
    assert!(
        topic
            .produce(request("a", 0), Some(b"k".to_vec()))
            .await
            .unwrap()
            .duplicate
    );
    assert!(topic
        .produce(request("b", 0), Some(b"k".to_vec()))
        .await
        .is_err());
}

#[tokio::test]
async fn sealed_segments_stay_within_the_open_segment_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_open_segments: 2,
        ..LogConfig::new(dir.path())
    };
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    for i in 0..40 {
        p.append(append(5, i)).await.unwrap();
    }
    assert!(p.describe().segment_count > 5);
    // Read every record one at a time, touching every sealed segment.
    let mut offset = 0;
    while offset < p.end_offset() {
        let fetch = p.read(offset, 1, 1).unwrap();
        assert_eq!(fetch.records().next().unwrap().offset, offset);
        offset = fetch.next_offset;
    }
    let open = log.open_sealed_segments();
    assert!(open <= 2, "{open} sealed segments open, the limit is 2");
}

#[tokio::test]
async fn a_topic_with_default_settings_keeps_history_and_retention_can_change_later() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert_eq!(TopicConfig::default().retention_ms, None, "kept forever");
    let config = TopicConfig {
        segment_bytes: small_segments().segment_bytes,
        ..TopicConfig::default()
    };
    let topic = log.create_topic("t", config).unwrap();
    let p = topic.partition(0).unwrap();
    for i in 0..20 {
        p.append(append(5, i)).await.unwrap();
    }
    let segments = p.describe().segment_count;
    assert!(segments > 2);
    // A year later, with the defaults, nothing has gone.
    let year_later = kappa_log::now_ms() + 365 * 24 * 3_600_000;
    assert_eq!(log.enforce_retention(year_later).unwrap(), 0);
    assert_eq!(p.start_offset(), 0);

    // Retention set afterwards: the next pass applies it, and the setting
    // survives a reopen (topic.json was rewritten).
    let changed = topic
        .alter(&kappa_log::TopicChanges {
            retention_ms: Some(Some(24 * 3_600_000)),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(changed.retention_ms, Some(24 * 3_600_000));
    assert_eq!(topic.describe().config.retention_ms, Some(24 * 3_600_000));
    assert_eq!(log.enforce_retention(kappa_log::now_ms()).unwrap(), 0);
    assert_eq!(
        log.enforce_retention(year_later).unwrap(),
        segments - 1,
        "every sealed segment is past a day"
    );
    assert!(p.start_offset() > 0);
    // A bad value is refused and changes nothing.
    let refused = topic.alter(&kappa_log::TopicChanges {
        retention_ms: Some(Some(0)),
        ..Default::default()
    });
    assert!(
        matches!(refused, Err(kappa_log::LogError::InvalidConfig(_))),
        "{refused:?}"
    );
    drop(topic);
    log.close();
    drop(log);
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let config = log.topic("t").unwrap().config();
    assert_eq!(config.retention_ms, Some(24 * 3_600_000));
    assert_eq!(config.segment_bytes, small_segments().segment_bytes);
}

/// Records encoded where they were made are appended as the same records
/// appended one by one: read back alike, a retry with their idempotency
/// key answered as a duplicate (and the same records appended as
/// `NewRecord`s under that key too: one fingerprint), other records under
/// it refused, and a compacted topic refuses an unkeyed one.
#[tokio::test]
async fn encoded_records_append_as_the_same_records_do() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.create_topic("t", small_segments()).unwrap();
    let p = topic.partition(0).unwrap();
    let rows = [(Some("k1"), "one", 5), (None, "two", 3), (Some(""), "", 9)];
    let encoded = || {
        let mut records = EncodedRecords::default();
        for (key, value, ts) in rows {
            records.push(key.map(str::as_bytes), value.as_bytes(), ts);
        }
        records
    };
    let key = Some(b"batch-1".to_vec());
    let first = p
        .submit_encoded(encoded(), key.clone(), None)
        .await
        .unwrap();
    let first = first.wait().await.unwrap();
    assert_eq!((first.base_offset, first.record_count), (0, 3));
    assert!(!first.duplicate);
    let read = p.read(0, u64::MAX, 1 << 20).unwrap();
    let records: Vec<_> = read.batches.iter().flat_map(|b| b.records()).collect();
    let got: Vec<_> = records
        .iter()
        .map(|r| (r.key.clone(), r.value.clone(), r.timestamp, r.headers.len()))
        .collect();
    let want: Vec<_> = rows
        .iter()
        .map(|(k, v, ts)| (k.map(Bytes::from), Bytes::from(*v), *ts, 0))
        .collect();
    assert_eq!(got, want);

    let again = p
        .submit_encoded(encoded(), key.clone(), None)
        .await
        .unwrap();
    assert!(again.wait().await.unwrap().duplicate);
    let as_new_records = AppendRequest {
        records: rows
            .iter()
            .map(|(k, v, ts)| NewRecord {
                key: k.map(Bytes::from),
                value: Bytes::from(*v),
                timestamp: Some(*ts),
                headers: Vec::new(),
            })
            .collect(),
        idempotency_key: key.clone(),
        as_sent: None,
    };
    assert!(p.append(as_new_records).await.unwrap().duplicate);
    let mut other = encoded();
    other.push(None, b"four", 1);
    let pending = p.submit_encoded(other, key, None).await.unwrap();
    let err = pending.wait().await.unwrap_err();
    assert!(
        matches!(err, LogError::IdempotencyKeyReused { .. }),
        "{err}"
    );
    assert_eq!(p.end_offset(), 3);

    let err = p
        .submit_encoded(EncodedRecords::default(), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::InvalidArgument(_)), "{err}");
    let compacted = log
        .create_topic(
            "c",
            TopicConfig {
                cleanup_policy: kappa_log::CleanupPolicy::Compact,
                ..small_segments()
            },
        )
        .unwrap();
    let err = compacted
        .partition(0)
        .unwrap()
        .submit_encoded(encoded(), None, None)
        .await
        .unwrap_err();
    assert!(matches!(err, LogError::KeyRequired { .. }), "{err}");
}

/// Queues an append of one record of `value` to `p`, in `chain`.
async fn submit_one(p: &Partition, value: &str, chain: Option<&AppendChain>) -> PendingAppend {
    let mut records = EncodedRecords::default();
    records.push(None, value.as_bytes(), 1);
    p.submit_encoded(records, None, chain).await.unwrap()
}

/// The appends of one chain land only as a prefix of their order: after
/// one failed, the writer refuses every later one of the chain unwritten,
/// while an append outside the chain queued among them is written; a
/// stopped chain refuses what is still queued, not what is being written.
// Holding the gate across awaits is the point: it stalls the writer.
#[allow(clippy::await_holding_lock)]
#[tokio::test]
async fn a_chains_appends_after_a_failed_one_are_refused_unwritten() {
    let dir = tempfile::tempdir().unwrap();
    let (faults, config) = with_faults(dir.path());
    let log = Log::open(config).unwrap();
    let topic = log.create_topic("t", TopicConfig::default()).unwrap();
    let p = topic.partition(0).unwrap();
    let values = || {
        let read = p.read(0, u64::MAX, 1 << 20).unwrap();
        let records = read.batches.iter().flat_map(|b| b.records());
        records.map(|r| r.value.clone()).collect::<Vec<_>>()
    };

    // The chain's first append fails while its second and third wait
    // behind it, an append outside the chain between them.
    let chain = AppendChain::new();
    let gate = faults.write_gate.lock().unwrap();
    let started = faults.writes_started.load(Ordering::SeqCst);
    let first = submit_one(p, "a", Some(&chain)).await;
    started_past(&faults.writes_started, started, "write").await;
    let second = submit_one(p, "b", Some(&chain)).await;
    let outside = submit_one(p, "c", None).await;
    let third = submit_one(p, "d", Some(&chain)).await;
    faults.fail_next_write_after.store(0, Ordering::SeqCst);
    drop(gate);
    let err = first.wait().await.unwrap_err();
    assert!(matches!(err, LogError::Io { .. }), "{err}");
    for refused in [second, third] {
        let err = refused.wait().await.unwrap_err();
        assert!(matches!(err, LogError::ChainBroken { .. }), "{err}");
    }
    assert_eq!(outside.wait().await.unwrap().base_offset, 0);
    assert!(chain.is_broken());
    assert_eq!(values(), [Bytes::from("c")]);

    // A stopped chain: the append being written lands, the one queued
    // behind it does not.
    let chain = AppendChain::new();
    let gate = faults.write_gate.lock().unwrap();
    let started = faults.writes_started.load(Ordering::SeqCst);
    let writing = submit_one(p, "e", Some(&chain)).await;
    started_past(&faults.writes_started, started, "write").await;
    let queued = submit_one(p, "f", Some(&chain)).await;
    chain.stop();
    drop(gate);
    assert_eq!(writing.wait().await.unwrap().base_offset, 1);
    let err = queued.wait().await.unwrap_err();
    assert!(matches!(err, LogError::ChainBroken { .. }), "{err}");
    assert_eq!(values(), [Bytes::from("c"), Bytes::from("e")]);

    // A chain nothing failed in lands whole, in order.
    let chain = AppendChain::new();
    let mut pending = Vec::new();
    for value in ["g", "h", "i"] {
        pending.push(submit_one(p, value, Some(&chain)).await);
    }
    for (n, append) in pending.into_iter().enumerate() {
        assert_eq!(append.wait().await.unwrap().base_offset, 2 + n as u64);
    }
    assert_eq!(values().len(), 5);
}

/// Appends of encoded records and of `NewRecord`s queued together (so the
/// writer takes several in one group: encoded ones written from their own
/// buffers between batches encoded by the writer, or all encoded by it
/// where the topic compresses) read back as appended, in order, under
/// their offsets.
#[tokio::test]
async fn encoded_and_new_records_queued_together_read_back_in_order() {
    for compression in [kappa_log::Compression::None, kappa_log::Compression::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let config = TopicConfig {
            compression,
            ..small_segments()
        };
        let topic = log.create_topic("t", config).unwrap();
        let p = topic.partition(0).unwrap();
        let mut pending = Vec::new();
        let mut want = Vec::new();
        for i in 0..40u32 {
            let value = format!(
                "{{\"append\":{i},\"pad\":\"{}\"}}",
                "p".repeat(i as usize * 7)
            );
            let key = format!("k{i}");
            if i % 3 == 0 {
                let request = AppendRequest {
                    records: vec![NewRecord {
                        key: Some(Bytes::from(key.clone())),
                        value: Bytes::from(value.clone()),
                        timestamp: Some(i64::from(i)),
                        headers: Vec::new(),
                    }],
                    idempotency_key: None,
                    as_sent: None,
                };
                pending.push(p.submit(request).await.unwrap());
                want.push((key, value, i64::from(i)));
            } else {
                let mut records = EncodedRecords::default();
                for r in 0..i % 4 + 1 {
                    let value = format!("{value}{r}");
                    records.push(Some(key.as_bytes()), value.as_bytes(), i64::from(i + r));
                    want.push((key.clone(), value, i64::from(i + r)));
                }
                let batch_key = (i % 2 == 0).then(|| format!("batch-{i}").into_bytes());
                pending.push(p.submit_encoded(records, batch_key, None).await.unwrap());
            }
        }
        let mut next = 0;
        for append in pending {
            let outcome = append.wait().await.unwrap();
            assert_eq!(outcome.base_offset, next, "{compression:?}");
            next += u64::from(outcome.record_count);
        }
        let read = p.read(0, u64::MAX, 1 << 24).unwrap();
        let got: Vec<_> = read
            .batches
            .iter()
            .flat_map(|b| b.records())
            .map(|r| {
                let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
                let value = String::from_utf8(r.value.to_vec()).unwrap();
                (key, value, r.timestamp)
            })
            .collect();
        assert_eq!(got, want, "{compression:?}");
        drop(topic);
        log.close();
        drop(log);
        // Read again after a restart (its recovery checks every batch).
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        assert_eq!(p.end_offset(), want.len() as u64, "{compression:?}");
    }
}
