//! Format compatibility: a data directory written by format version 1 is
//! committed under `tests/fixtures/v1` and must read back the same forever.
//! `write_v1_fixture` (ignored) regenerates it — only do that for a new
//! format version, in a new folder.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use bytes::Bytes;
use kappa_log::{AppendRequest, FsyncPolicy, Header, Log, LogConfig, NewRecord, TopicConfig};

fn fixture() -> std::path::PathBuf {
    support::manifest_dir().join("tests/fixtures/v1")
}

fn record(i: u64) -> NewRecord {
    NewRecord {
        key: (!i.is_multiple_of(3)).then(|| Bytes::from(format!("key-{}", i % 5))),
        value: Bytes::from(format!("{{\"n\":{i},\"text\":\"värde ✓ {i}\"}}")),
        timestamp: Some(1_700_000_000_000 + i as i64 * 1000),
        headers: if i.is_multiple_of(2) {
            vec![Header {
                name: "trace".into(),
                value: Bytes::from(format!("t{i}")),
            }]
        } else {
            vec![]
        },
    }
}

#[tokio::test]
#[ignore = "regenerates the committed fixture"]
async fn write_v1_fixture() {
    let dir = &fixture();
    let _ = std::fs::remove_dir_all(dir);
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let config = TopicConfig {
        segment_bytes: 1024,
        retention_ms: None,
        fsync: FsyncPolicy::Always,
        ..Default::default()
    };
    let topic = log.create_topic("fixture", config).unwrap();
    let p = topic.partition(0).unwrap();
    for batch in 0..10u64 {
        let records = (batch * 3..batch * 3 + 3).map(record).collect();
        let key = (batch == 2).then(|| b"fixture-key".to_vec());
        p.append(AppendRequest {
            records,
            idempotency_key: key,
            as_sent: None,
        })
        .await
        .unwrap();
    }
    log.commit_offsets("g", "fixture", &[(0, 7)]).unwrap();
    log.close();
}

#[tokio::test]
async fn v1_fixture_reads_back_unchanged() {
    let copy = tempfile::tempdir().unwrap();
    support::copy_dir(&fixture(), copy.path());
    let config = LogConfig {
        idempotency_window_ms: 100 * 365 * 24 * 3600 * 1000,
        ..LogConfig::new(copy.path())
    };
    let log = Log::open(config).unwrap();
    let topic = log.topic("fixture").unwrap();
    let p = topic.partition(0).unwrap();
    assert!(
        p.describe().segment_count > 1,
        "the fixture has sealed segments"
    );
    let fetch = p.read(0, u64::MAX, u64::MAX).unwrap();
    let records: Vec<_> = fetch.records().collect();
    assert_eq!(records.len(), 30);
    for (i, r) in records.iter().enumerate() {
        let expect = record(i as u64);
        assert_eq!(r.offset, i as u64);
        assert_eq!(
            (&r.key, &r.value, &r.headers),
            (&expect.key, &expect.value, &expect.headers)
        );
        assert_eq!(r.timestamp, expect.timestamp.unwrap());
    }
    assert_eq!(p.offset_for_timestamp(1_700_000_010_500).unwrap(), 11);
    assert_eq!(
        log.group_offsets("g", "fixture").unwrap()[0].committed,
        Some(7)
    );
    // The idempotency key stored in a v1 batch header is recovered.
    let retry = AppendRequest {
        records: (6..9).map(record).collect(),
        idempotency_key: Some(b"fixture-key".to_vec()),
        as_sent: None,
    };
    let outcome = p.append(retry).await.unwrap();
    assert!(outcome.duplicate);
    assert_eq!(outcome.base_offset, 6);
}
