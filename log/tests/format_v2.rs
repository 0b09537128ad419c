//! Format compatibility of version 2 (compressed batches, FORMAT.md §2.8):
//! a data directory with a zstd topic and an lz4 topic is committed under
//! `tests/fixtures/v2` and must read back the same forever, as
//! `format_v1.rs` does for version 1. `write_v2_fixture` (ignored) wrote
//! it.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use bytes::Bytes;
use kappa_log::batch::ReadBatch;
use kappa_log::{
    AppendRequest, Compression, FsyncPolicy, Header, Log, LogConfig, NewRecord, TopicConfig,
};

fn fixture() -> std::path::PathBuf {
    support::manifest_dir().join("tests/fixtures/v2")
}

/// Records per batch: enough for compression to pay.
const BATCH: u64 = 20;
/// Batches per topic.
const BATCHES: u64 = 6;

fn record(i: u64) -> NewRecord {
    NewRecord {
        key: (!i.is_multiple_of(3)).then(|| Bytes::from(format!("key-{}", i % 5))),
        value: Bytes::from(format!(
            "{{\"n\":{i},\"event_type\":\"purchase\",\"text\":\"värde ✓ {}\"}}",
            i % 4
        )),
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

const TOPICS: [(&str, Compression); 2] = [("zstd", Compression::Zstd), ("lz4", Compression::Lz4)];

#[tokio::test]
#[ignore = "regenerates the committed fixture"]
async fn write_v2_fixture() {
    let dir = &fixture();
    let _ = std::fs::remove_dir_all(dir);
    let log = Log::open(LogConfig::new(dir)).unwrap();
    for (name, compression) in TOPICS {
        let config = TopicConfig {
            segment_bytes: 1024,
            fsync: FsyncPolicy::Always,
            compression,
            ..Default::default()
        };
        let topic = log.create_topic(name, config).unwrap();
        let p = topic.partition(0).unwrap();
        for batch in 0..BATCHES {
            let records = (batch * BATCH..(batch + 1) * BATCH).map(record).collect();
            let key = (batch == 2).then(|| b"fixture-key".to_vec());
            p.append(AppendRequest {
                records,
                idempotency_key: key,
                as_sent: None,
            })
            .await
            .unwrap();
        }
    }
    log.close();
}

#[tokio::test]
async fn v2_fixture_reads_back_unchanged() {
    let copy = tempfile::tempdir().unwrap();
    support::copy_dir(&fixture(), copy.path());
    let config = LogConfig {
        idempotency_window_ms: 100 * 365 * 24 * 3600 * 1000,
        ..LogConfig::new(copy.path())
    };
    let log = Log::open(config).unwrap();
    for (name, compression) in TOPICS {
        let topic = log.topic(name).unwrap();
        assert_eq!(topic.config().compression, compression);
        let p = topic.partition(0).unwrap();
        assert!(p.describe().segment_count > 1, "{name}: sealed segments");
        let framed = p.read_framed(0, u64::MAX, u64::MAX).unwrap();
        assert!(
            framed
                .batches
                .iter()
                .all(|b| b.compression() == compression),
            "{name}: every batch stored compressed"
        );
        assert!(framed.batches.iter().all(|b| b.byte_len() < 1024));
        let fetch = p.read(0, u64::MAX, u64::MAX).unwrap();
        let records: Vec<_> = fetch.records().collect();
        assert_eq!(records.len() as u64, BATCH * BATCHES, "{name}");
        for (i, r) in records.iter().enumerate() {
            let expect = record(i as u64);
            assert_eq!(r.offset, i as u64);
            assert_eq!(
                (&r.key, &r.value, &r.headers),
                (&expect.key, &expect.value, &expect.headers),
                "{name}"
            );
            assert_eq!(r.timestamp, expect.timestamp.unwrap());
        }
        assert_eq!(p.offset_for_timestamp(1_700_000_050_500).unwrap(), 51);
        // The idempotency key of a compressed batch's header is recovered.
        let retry = AppendRequest {
            records: (2 * BATCH..3 * BATCH).map(record).collect(),
            idempotency_key: Some(b"fixture-key".to_vec()),
            as_sent: None,
        };
        let outcome = p.append(retry).await.unwrap();
        assert!(outcome.duplicate, "{name}");
        assert_eq!(outcome.base_offset, 2 * BATCH);
    }
}
