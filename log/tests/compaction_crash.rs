//! Every crash point of a compaction pass (issue 40), over four random
//! histories of puts and tombstones: the pass is run once per step that
//! changes the disk, with a simulated process crash
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

/// A random history from `seed`: 120 records over a few keys (3 to 10),
/// about one in eight a tombstone, in appends of 1 to 4 records; returns
/// offset -> (key, value).
fn history(log: &Log, seed: u64) -> BTreeMap<u64, (Bytes, Bytes)> {
    let mut state = seed;
    let mut next = move |n: u64| {
        // SplitMix64: a deterministic stream of the seed.
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    };
    let keys = 3 + next(8);
    let rt = support::runtime();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut appended = BTreeMap::new();
    let mut i = 0u64;
    while i < 120 {
        let n = 1 + next(4);
        let records: Vec<NewRecord> = (i..i + n)
            .map(|j| NewRecord {
                key: Some(Bytes::from(format!("k{}", next(keys)))),
                value: if next(8) == 0 {
                    Bytes::new()
                } else {
                    Bytes::from(format!(r#"{{"i":{j},"pad":"{}"}}"#, "x".repeat(50)))
                },
                timestamp: Some(1_000 + j as i64),
                headers: vec![],
            })
            .collect();
        let outcome = rt
            .block_on(p.append(AppendRequest {
                records: records.clone(),
                idempotency_key: None,
                as_sent: None,
            }))
            .unwrap();
        for (k, r) in records.into_iter().enumerate() {
            appended.insert(outcome.base_offset + k as u64, (r.key.unwrap(), r.value));
        }
        i += n;
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
    for seed in 1..=4 {
        crash_at_every_step(seed);
    }
}

/// The pass over the history of `seed`, crashed at each of its steps.
fn crash_at_every_step(seed: u64) {
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
        let appended = history(&log, seed);
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
            assert!(outcome.records_removed > 0, "history {seed}: {outcome:?}");
            assert!(
                step > 5,
                "history {seed}: a pass takes more than {step} steps"
            );
            eprintln!("history {seed}: a pass took {step} steps, each crashed at once");
            break;
        }
        assert!(
            result.is_err(),
            "history {seed}: crash at step {step} reported success"
        );
        let log = Log::open(log_config(dir.path())).unwrap_or_else(|e| {
            panic!("history {seed}: crash at step {step} of {steps}: the next start failed: {e}")
        });
        verify(&log, dir.path(), &appended, step);
        // The next pass finishes the job.
        log.compact(later).unwrap();
        verify(&log, dir.path(), &appended, step);
        log.close();
        step += 1;
    }
}
