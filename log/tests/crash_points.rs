//! Every crash point of a scenario that rolls segments (writing their
//! indexes), creates and deletes topics and commits consumer offsets: the
//! scenario is run once per step that changes the disk, with a simulated
//! process crash before that step (`kappa_log::io::crash`), and after each
//! crash the log must reopen with every acknowledged record at its offset,
//! no offset handed out again, every acknowledged commit and topic there,
//! and nothing destroyed.
//!
//! The crash switch is process-wide, so this binary holds this one test.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use kappa_log::io::crash;
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, NewRecord, Result, TopicConfig};

/// What the scenario was told succeeded before the crash.
#[derive(Debug, Default)]
struct Acked {
    /// (topic, partition, offset) -> value.
    records: BTreeMap<(String, u32, u64), Bytes>,
    /// (group, topic, partition) -> committed offset.
    commits: BTreeMap<(String, String, u32), u64>,
    /// Topic -> exists (after an acknowledged create or delete).
    topics: BTreeMap<String, bool>,
    /// The operation under way when the crash came: it may or may not
    /// have taken effect.
    pending: Option<Pending>,
}

/// An operation that was started but not acknowledged.
#[derive(Debug, Clone)]
enum Pending {
    Commit((String, String, u32), u64),
    Topic(String),
}

fn topic_config(partitions: u32) -> TopicConfig {
    TopicConfig {
        partitions,
        segment_bytes: 1024,
        retention_ms: None,
        fsync: FsyncPolicy::Always,
        ..Default::default()
    }
}

async fn append(log: &Log, acked: &mut Acked, topic: &str, p: u32, n: usize) -> Result<u64> {
    let values: Vec<Bytes> = (0..n)
        .map(|i| {
            Bytes::from(format!(
                "{{\"topic\":\"{topic}\",\"p\":{p},\"i\":{i},\"pad\":\"{}\"}}",
                "x".repeat(60)
            ))
        })
        .collect();
    let request = AppendRequest {
        records: values
            .iter()
            .map(|v| NewRecord {
                value: v.clone(),
                ..Default::default()
            })
            .collect(),
        idempotency_key: None,
        as_sent: None,
    };
    let outcome = log.topic(topic)?.partition(p)?.append(request).await?;
    for (i, v) in values.into_iter().enumerate() {
        acked
            .records
            .insert((topic.to_string(), p, outcome.base_offset + i as u64), v);
    }
    Ok(outcome.base_offset + n as u64)
}

fn commit(
    log: &Log,
    acked: &mut Acked,
    group: &str,
    topic: &str,
    p: u32,
    offset: u64,
) -> Result<()> {
    let key = (group.to_string(), topic.to_string(), p);
    acked.pending = Some(Pending::Commit(key.clone(), offset));
    log.commit_offsets(group, topic, &[(p, offset)])?;
    acked.commits.insert(key, offset);
    acked.pending = None;
    Ok(())
}

/// The scenario; stops at the first error, as a crashed process would.
async fn scenario(dir: &Path, acked: &mut Acked) -> Result<()> {
    let log = Log::open(LogConfig::new(dir))?;
    acked.pending = Some(Pending::Topic("a".into()));
    log.create_topic("a", topic_config(2))?;
    acked.topics.insert("a".into(), true);
    for round in 0..5 {
        for p in 0..2 {
            let end = append(&log, acked, "a", p, 3).await?;
            if round % 2 == 1 {
                commit(&log, acked, "g", "a", p, end)?;
            }
        }
    }
    acked.pending = Some(Pending::Topic("b".into()));
    log.create_topic("b", topic_config(1))?;
    acked.topics.insert("b".into(), true);
    acked.pending = None;
    let end = append(&log, acked, "b", 0, 2).await?;
    commit(&log, acked, "h", "b", 0, end)?;
    acked.pending = Some(Pending::Topic("b".into()));
    log.delete_topic("b")?;
    acked.topics.insert("b".into(), false);
    acked.pending = None;
    acked.records.retain(|(t, _, _), _| t != "b");
    acked.commits.retain(|(_, t, _), _| t != "b");
    log.topic("a")?.partition(0)?.roll().await?;
    let end = append(&log, acked, "a", 0, 1).await?;
    commit(&log, acked, "g", "a", 0, end)?;
    log.close();
    Ok(())
}

/// Reopens after a crash at `step` and checks every promise.
async fn verify(dir: &Path, acked: &Acked, step: u64) {
    let log = Log::open(LogConfig::new(dir))
        .unwrap_or_else(|e| panic!("crash at step {step}: the next start failed: {e}"));
    for (topic, exists) in &acked.topics {
        if matches!(&acked.pending, Some(Pending::Topic(t)) if t == topic) {
            continue;
        }
        assert_eq!(
            log.topic(topic).is_ok(),
            *exists,
            "crash at step {step}: topic {topic}"
        );
    }
    let in_doubt = |t: &str| matches!(&acked.pending, Some(Pending::Topic(d)) if d == t);
    for ((topic, p, offset), value) in &acked.records {
        if in_doubt(topic) {
            continue;
        }
        let fetch = log
            .topic(topic)
            .unwrap()
            .partition(*p)
            .unwrap()
            .read(*offset, 1, u64::MAX)
            .unwrap_or_else(|e| panic!("crash at step {step}: {topic}/{p}@{offset}: {e}"));
        let record = fetch.records().next().expect("the record");
        assert_eq!(record.offset, *offset, "crash at step {step}");
        assert_eq!(
            &record.value, value,
            "crash at step {step}: {topic}/{p}@{offset}"
        );
    }
    for (key, offset) in &acked.commits {
        let (group, topic, p) = key;
        if in_doubt(topic) {
            continue;
        }
        let committed = log
            .committed(group)
            .into_iter()
            .find(|c| &c.topic == topic && c.partition == *p)
            .map(|c| c.offset);
        match &acked.pending {
            Some(Pending::Commit(k, attempted)) if k == key && committed == Some(*attempted) => {}
            _ => assert_eq!(
                committed,
                Some(*offset),
                "crash at step {step}: {group} {topic}/{p}"
            ),
        }
    }
    // No offset is handed out again.
    if let Ok(topic) = log.topic("a") {
        for p in 0..2 {
            let acked_end = acked
                .records
                .keys()
                .filter(|(t, q, _)| t == "a" && *q == p)
                .map(|(_, _, o)| o + 1)
                .max()
                .unwrap_or(0);
            let request = AppendRequest {
                records: vec![NewRecord {
                    value: Bytes::from_static(b"{\"after\":\"crash\"}"),
                    ..Default::default()
                }],
                idempotency_key: None,
                as_sent: None,
            };
            let outcome = topic.partition(p).unwrap().append(request).await.unwrap();
            assert!(
                outcome.base_offset >= acked_end,
                "crash at step {step}: partition {p} handed out {} again (acknowledged up to {acked_end})",
                outcome.base_offset
            );
        }
    }
    log.close();
}

#[tokio::test]
async fn every_crash_point_keeps_what_was_acknowledged() {
    // The steps of an uninterrupted run.
    let dir = tempfile::tempdir().unwrap();
    crash::arm(u64::MAX - 1);
    scenario(dir.path(), &mut Acked::default()).await.unwrap();
    let total = crash::disarm();
    assert!(total > 50, "the scenario takes {total} steps");
    let mut crashed = 0;
    for step in 0..total {
        let dir = tempfile::tempdir().unwrap();
        let mut acked = Acked::default();
        crash::arm(step);
        let outcome = scenario(dir.path(), &mut acked).await;
        let did_crash = crash::crashed();
        crash::disarm();
        assert!(
            did_crash && outcome.is_err(),
            "step {step} of {total} was not reached"
        );
        crashed += 1;
        verify(dir.path(), &acked, step).await;
        // A crash during the recovery of that crash changes nothing either.
        for again in [0, 3, 7] {
            crash::arm(again);
            let reopened = Log::open(LogConfig::new(dir.path()));
            crash::disarm();
            drop(reopened);
            verify(dir.path(), &acked, step).await;
        }
    }
    eprintln!("crash points enumerated: {crashed} of {total} steps");
}
