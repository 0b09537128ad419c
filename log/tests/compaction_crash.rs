//! Every crash point of a compaction pass (issue 40): the pass is run
//! once per step that changes the disk, with a simulated process crash
//! before that step (`kappa_log::io::crash`), and after each crash the log
//! reopens with every record it reads being the one appended at its
//! offset, the latest value of every key there, the end offset where it
//! was, no swap or temporary file left behind — the old segments or the
//! new one, never a mix — and a pass after the restart finishing the job.
//!
//! The crash switch is process-wide, so this binary holds this one test.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use kappa_log::io::crash;
use kappa_log::{
    AppendRequest, CleanupPolicy, FsyncPolicy, Log, LogConfig, NewRecord, TopicConfig,
};

fn log_config(dir: &Path) -> LogConfig {
    LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::new(dir)
    }
}

/// Keys 0..8 put over and over, some deleted, in appends of 3 records;
/// returns offset -> (key, value).
fn history(log: &Log) -> BTreeMap<u64, (Bytes, Bytes)> {
    let rt = support::runtime();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut appended = BTreeMap::new();
    for i in 0..120u32 {
        let key = Bytes::from(format!("k{}", (i * 7) % 8));
        let value = if i % 11 == 10 {
            Bytes::new()
        } else {
            Bytes::from(format!(r#"{{"i":{i},"pad":"{}"}}"#, "x".repeat(50)))
        };
        let outcome = rt
            .block_on(p.append(AppendRequest {
                records: vec![NewRecord {
                    key: Some(key.clone()),
                    value: value.clone(),
                    timestamp: Some(1_000 + i64::from(i)),
                    headers: vec![],
                }],
                idempotency_key: None,
            }))
            .unwrap();
        appended.insert(outcome.base_offset, (key, value));
    }
    appended
}

/// Checks the promises over a log reopened after a crash at `step`.
fn verify(log: &Log, dir: &Path, appended: &BTreeMap<u64, (Bytes, Bytes)>, step: u64) {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let end = appended.keys().last().unwrap() + 1;
    assert_eq!(p.end_offset(), end, "crash at step {step}: end offset");
    let mut read = Vec::new();
    let mut at = p.start_offset();
    while at < end {
        let fetch = p
            .read(at, 5, u64::MAX)
            .unwrap_or_else(|e| panic!("crash at step {step}: read at {at}: {e}"));
        for r in fetch.records().filter(|r| r.offset >= at) {
            let (key, value) = &appended[&r.offset];
            assert_eq!(
                r.key.as_ref(),
                Some(key),
                "crash at step {step}: key at {}",
                r.offset
            );
            assert_eq!(
                &r.value, value,
                "crash at step {step}: value at {}",
                r.offset
            );
            read.push((r.key.unwrap(), r.value));
        }
        at = fetch.next_offset;
    }
    assert_eq!(
        support::latest(read),
        support::latest(appended.values().cloned()),
        "crash at step {step}: the latest value of each key"
    );
    let leftovers: Vec<String> = std::fs::read_dir(dir.join("topics/t/0"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".swap") || n.ends_with(".tmp"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "crash at step {step}: left behind {leftovers:?}"
    );
}

#[test]
fn a_crash_anywhere_in_a_compaction_pass_leaves_the_old_segments_or_the_new_one() {
    let base = tempfile::tempdir().unwrap();
    let appended = {
        let log = Log::open(log_config(base.path())).unwrap();
        let config = TopicConfig {
            segment_bytes: 1024,
            fsync: FsyncPolicy::Always,
            cleanup_policy: CleanupPolicy::Compact,
            delete_retention_ms: Some(1),
            ..Default::default()
        };
        log.create_topic("t", config).unwrap();
        let appended = history(&log);
        log.close();
        appended
    };
    let later = kappa_log::now_ms() + 3_600_000;
    let mut step = 0;
    loop {
        let dir = tempfile::tempdir().unwrap();
        support::copy_dir(base.path(), dir.path());
        let log = Log::open(log_config(dir.path())).unwrap();
        crash::arm(step);
        let result = log.compact(later);
        let crashed = crash::crashed();
        log.close();
        drop(log);
        let steps = crash::disarm();
        if !crashed {
            let outcome = result.unwrap();
            assert!(outcome.records_removed > 0, "{outcome:?}");
            assert!(step > 5, "a pass takes more than {step} steps");
            eprintln!("a pass took {step} steps, each crashed at once");
            break;
        }
        assert!(result.is_err(), "crash at step {step} reported success");
        let log = Log::open(log_config(dir.path())).unwrap_or_else(|e| {
            panic!("crash at step {step} of {steps}: the next start failed: {e}")
        });
        verify(&log, dir.path(), &appended, step);
        // The next pass finishes the job.
        log.compact(later).unwrap();
        verify(&log, dir.path(), &appended, step);
        log.close();
        step += 1;
    }
}
