//! Compaction (issue 40, log/FORMAT.md §2.9 and §8.3): for random
//! histories of puts and tombstones over a few keys, a compacted
//! partition reads as the latest record of each key — every record read
//! is the one appended at its offset, a read from any offset starts at the
//! first kept record at or after it, the end offset stays — after a
//! reopen too, and again after more appends and a second pass. Tombstones
//! go only after `delete_retention_ms`; nothing younger than the
//! compaction lag and the idempotency window is touched; a compacted topic
//! refuses records without a key.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use kappa_log::{
    AppendRequest, CleanupPolicy, Compression, FsyncPolicy, Log, LogConfig, NewRecord,
    TopicChanges, TopicConfig,
};
use proptest::prelude::*;

const MINUTE: i64 = 60_000;
const DAY: i64 = 24 * 60 * MINUTE;

fn config(compression: Compression) -> TopicConfig {
    TopicConfig {
        segment_bytes: 1024,
        fsync: FsyncPolicy::Never,
        compression,
        cleanup_policy: CleanupPolicy::Compact,
        ..Default::default()
    }
}

fn log_config(dir: &Path) -> LogConfig {
    LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::new(dir)
    }
}

/// One record of a history: `Some(value)` puts, `None` deletes.
type Op = (u8, Option<u16>);

fn record(key: u8, value: Option<u16>, timestamp: i64) -> NewRecord {
    NewRecord {
        key: Some(Bytes::from(format!("key-{key}"))),
        value: match value {
            Some(v) => Bytes::from(format!(
                r#"{{"key":{key},"value":{v},"pad":"{}"}}"#,
                "p".repeat(40)
            )),
            None => Bytes::new(),
        },
        timestamp: Some(timestamp),
        headers: vec![],
    }
}

/// Appends `ops` in appends of `chunk` records; returns each offset's
/// record as appended.
fn append(log: &Log, ops: &[Op], chunk: usize) -> BTreeMap<u64, NewRecord> {
    let rt = support::runtime();
    let p = log.topic("t").unwrap();
    let p = p.partition(0).unwrap();
    let mut appended = BTreeMap::new();
    for ops in ops.chunks(chunk.max(1)) {
        let base = p.end_offset();
        let records: Vec<NewRecord> = ops
            .iter()
            .enumerate()
            .map(|(i, &(k, v))| record(k, v, 1_000_000 + (base + i as u64) as i64))
            .collect();
        let outcome = rt
            .block_on(p.append(AppendRequest {
                records: records.clone(),
                idempotency_key: None,
                as_sent: None,
            }))
            .unwrap();
        for (i, r) in records.into_iter().enumerate() {
            appended.insert(outcome.base_offset + i as u64, r);
        }
    }
    appended
}

/// Every record of partition 0 from `offset`, as (offset, key, value).
fn read_from(log: &Log, offset: u64) -> Vec<(u64, Bytes, Bytes)> {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut out = Vec::new();
    let mut at = offset;
    while at < p.end_offset() {
        let fetch = p.read(at, 7, u64::MAX).unwrap();
        for r in fetch.records().filter(|r| r.offset >= at) {
            out.push((r.offset, r.key.unwrap(), r.value));
        }
        assert!(fetch.next_offset > at, "a read from {at} moved nowhere");
        at = fetch.next_offset;
    }
    out
}

/// The promises of a compacted partition against what was appended.
fn check(log: &Log, appended: &BTreeMap<u64, NewRecord>, context: &str) {
    let p = log.topic("t").unwrap();
    let p = p.partition(0).unwrap();
    let end = appended.keys().last().map_or(0, |o| o + 1);
    assert_eq!(p.end_offset(), end, "{context}: the end offset moved");
    let read = read_from(log, p.start_offset());
    for (offset, key, value) in &read {
        let r = &appended[offset];
        assert_eq!(Some(key), r.key.as_ref(), "{context}: key at {offset}");
        assert_eq!(value, &r.value, "{context}: value at {offset}");
    }
    let expected = support::latest(
        appended
            .values()
            .map(|r| (r.key.clone().unwrap(), r.value.clone())),
    );
    assert_eq!(
        support::latest(read.iter().map(|(_, k, v)| (k.clone(), v.clone()))),
        expected,
        "{context}: the latest value of each key"
    );
    // Each key's latest put is there, at its offset.
    let mut last_of: BTreeMap<&Bytes, u64> = BTreeMap::new();
    for (offset, r) in appended {
        last_of.insert(r.key.as_ref().unwrap(), *offset);
    }
    for (key, offset) in last_of {
        if !appended[&offset].value.is_empty() {
            assert!(
                read.iter().any(|(o, _, _)| *o == offset),
                "{context}: the latest record of {key:?} (offset {offset}) is gone"
            );
        }
    }
    // A read from any offset starts at the first kept record at or after it.
    let kept: Vec<u64> = read.iter().map(|(o, _, _)| *o).collect();
    for from in p.start_offset()..end {
        let first = read_from(log, from).first().map(|(o, _, _)| *o);
        assert_eq!(
            first,
            kept.iter().copied().find(|&o| o >= from),
            "{context}: a read from {from}"
        );
    }
}

fn reopen(log: Log, dir: &Path) -> Log {
    log.close();
    drop(log);
    Log::open(log_config(dir)).unwrap()
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (
            0u8..10,
            prop_oneof![4 => any::<u16>().prop_map(Some), 1 => Just(None)],
        ),
        1..160,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn a_compacted_partition_reads_as_the_latest_record_of_each_key(
        first in ops(),
        second in ops(),
        chunk in 1usize..9,
        zstd in any::<bool>(),
        tombstones_expired in any::<bool>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let codec = if zstd { Compression::Zstd } else { Compression::None };
        let log = Log::open(log_config(dir.path())).unwrap();
        log.create_topic("t", config(codec)).unwrap();
        let mut appended = append(&log, &first, chunk);
        // Past the idempotency window (15 minutes); past the tombstones'
        // day or not.
        let later = kappa_log::now_ms() + if tombstones_expired { 2 * DAY } else { 20 * MINUTE };
        let before = read_from(&log, 0).len();
        log.compact(later).unwrap();
        check(&log, &appended, "after a pass");
        prop_assert!(read_from(&log, 0).len() <= before);
        let log = reopen(log, dir.path());
        check(&log, &appended, "after a reopen");
        appended.extend(append(&log, &second, chunk));
        log.compact(later + DAY).unwrap();
        check(&log, &appended, "after more appends and a second pass");
        let log = reopen(log, dir.path());
        check(&log, &appended, "after a second reopen");
        log.close();
    }
}

/// Ten keys each put `rounds` times, in appends of 5 records.
fn overwrites(rounds: u16) -> Vec<Op> {
    (0..rounds)
        .flat_map(|round| (0..10u8).map(move |k| (k, Some(round))))
        .collect()
}

#[test]
fn compaction_shrinks_the_partition_to_about_one_record_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(log_config(dir.path())).unwrap();
    log.create_topic("t", config(Compression::None)).unwrap();
    let appended = append(&log, &overwrites(40), 5);
    let p = log.topic("t").unwrap();
    let bytes_before = p.partition(0).unwrap().describe().bytes;
    let outcome = log.compact(kappa_log::now_ms() + 20 * MINUTE).unwrap();
    check(&log, &appended, "after a pass");
    let after = read_from(&log, 0);
    let description = p.partition(0).unwrap().describe();
    assert!(
        outcome.records_removed > 300,
        "{outcome:?}: 400 records of 10 keys"
    );
    assert!(description.bytes < bytes_before / 2, "{description:?}");
    // Of the sealed segments, each key's latest record stays; the active
    // segment (1 KiB, at most 16 of these records) is never compacted.
    assert!(after.len() <= 10 + 16, "{} records: {after:?}", after.len());
    // A second pass with nothing new changes nothing.
    let again = log.compact(kappa_log::now_ms() + 20 * MINUTE).unwrap();
    assert_eq!(again.records_removed, 0, "{again:?}");
}

#[test]
fn nothing_younger_than_the_idempotency_window_or_the_lag_is_compacted() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(log_config(dir.path())).unwrap();
    let topic = TopicConfig {
        min_compaction_lag_ms: Some(3_600_000),
        ..config(Compression::None)
    };
    log.create_topic("t", topic).unwrap();
    append(&log, &overwrites(20), 5);
    let now = kappa_log::now_ms();
    assert_eq!(log.compact(now + MINUTE).unwrap().records_removed, 0);
    assert_eq!(
        log.compact(now + 30 * MINUTE).unwrap().records_removed,
        0,
        "the topic's lag is an hour"
    );
    assert!(log.compact(now + 2 * 60 * MINUTE).unwrap().records_removed > 0);
}

#[test]
fn tombstones_stay_for_delete_retention_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(log_config(dir.path())).unwrap();
    let topic = TopicConfig {
        delete_retention_ms: Some(2 * 3_600_000),
        ..config(Compression::None)
    };
    log.create_topic("t", topic).unwrap();
    let mut ops = overwrites(10);
    ops.extend((0..5u8).map(|k| (k, None)));
    ops.extend(overwrites(10).into_iter().map(|(k, v)| (k + 20, v)));
    let appended = append(&log, &ops, 5);
    let tombstones = |log: &Log| {
        read_from(log, 0)
            .iter()
            .filter(|(_, _, v)| v.is_empty())
            .count()
    };
    let now = kappa_log::now_ms();
    log.compact(now + 30 * MINUTE).unwrap();
    check(&log, &appended, "within delete_retention_ms");
    assert_eq!(tombstones(&log), 5, "every tombstone stays for 2 hours");
    // A pass runs when there is something new to compact.
    let mut appended = appended;
    appended.extend(append(
        &log,
        &overwrites(10)
            .into_iter()
            .map(|(k, v)| (k + 40, v))
            .collect::<Vec<_>>(),
        5,
    ));
    log.compact(now + 3 * 60 * MINUTE).unwrap();
    check(&log, &appended, "after delete_retention_ms");
    assert_eq!(tombstones(&log), 0, "the tombstones are gone");
    let keys: Vec<Bytes> = read_from(&log, 0).into_iter().map(|(_, k, _)| k).collect();
    assert!(
        (0..5).all(|k| !keys.contains(&Bytes::from(format!("key-{k}")))),
        "a deleted key's puts went with its tombstone: {keys:?}"
    );
}

#[test]
fn a_compacted_topic_refuses_records_without_a_key_and_keeps_older_ones() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(log_config(dir.path())).unwrap();
    log.create_topic(
        "t",
        TopicConfig {
            cleanup_policy: CleanupPolicy::Delete,
            ..config(Compression::None)
        },
    )
    .unwrap();
    let rt = support::runtime();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let keyless = |n: usize| AppendRequest {
        records: (0..n)
            .map(|i| NewRecord::value(format!(r#"{{"keyless":{i},"pad":"{}"}}"#, "p".repeat(60))))
            .collect(),
        idempotency_key: None,
        as_sent: None,
    };
    rt.block_on(p.append(keyless(30))).unwrap();
    topic
        .alter(&TopicChanges {
            cleanup_policy: Some(CleanupPolicy::CompactDelete),
            ..Default::default()
        })
        .unwrap();
    let error = rt.block_on(p.append(keyless(1))).unwrap_err().to_string();
    assert!(
        error.contains("compacted") && error.contains("key"),
        "{error}"
    );
    append(&log, &overwrites(20), 5);
    log.compact(kappa_log::now_ms() + 20 * MINUTE).unwrap();
    let rest = p.read(0, 30, u64::MAX).unwrap();
    assert_eq!(
        rest.records().filter(|r| r.key.is_none()).count(),
        30,
        "records without a key are never compacted away"
    );
}

#[test]
fn the_policy_round_trips_through_topic_json() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(log_config(dir.path())).unwrap();
    log.create_topic(
        "t",
        TopicConfig {
            cleanup_policy: CleanupPolicy::CompactDelete,
            delete_retention_ms: Some(1000),
            min_compaction_lag_ms: Some(2000),
            ..config(Compression::None)
        },
    )
    .unwrap();
    log.create_topic("plain", TopicConfig::default()).unwrap();
    let log = reopen(log, dir.path());
    let config = log.topic("t").unwrap().config();
    assert_eq!(config.cleanup_policy, CleanupPolicy::CompactDelete);
    assert_eq!(config.delete_retention_ms, Some(1000));
    assert_eq!(config.min_compaction_lag_ms, Some(2000));
    let plain = std::fs::read_to_string(dir.path().join("topics/plain/topic.json")).unwrap();
    assert!(
        !plain.contains("cleanup_policy") && !plain.contains("compaction"),
        "a topic that does not compact writes topic.json as before: {plain}"
    );
    assert_eq!(
        "Compact, delete".parse::<CleanupPolicy>().unwrap(),
        CleanupPolicy::CompactDelete
    );
    assert!("purge".parse::<CleanupPolicy>().is_err());
}

#[test]
fn a_key_map_budget_smaller_than_the_keys_compacts_a_segment_per_pass_and_still_right() {
    let dir = tempfile::tempdir().unwrap();
    // 1 KiB holds about 16 keys: each pass maps whole segments while they
    // fit, at least one.
    let small_map = LogConfig {
        cleaner_buffer_bytes: 1024,
        ..log_config(dir.path())
    };
    let log = Log::open(small_map).unwrap();
    log.create_topic("t", config(Compression::None)).unwrap();
    let ops: Vec<Op> = (0..400u16).map(|i| ((i % 40) as u8, Some(i))).collect();
    let appended = append(&log, &ops, 5);
    let later = kappa_log::now_ms() + 20 * MINUTE;
    let mut passes = 0;
    loop {
        let outcome = log.compact(later).unwrap();
        check(&log, &appended, &format!("after pass {passes}"));
        if outcome.segments_rewritten == 0 {
            break;
        }
        passes += 1;
        assert!(passes < 100, "compaction does not converge");
    }
    assert!(passes > 2, "a 1 KiB map took {passes} passes");
    assert!(
        read_from(&log, 0).len() <= 40 + 16,
        "every sealed segment ends compacted"
    );
}
