//! Compression at rest (issue 40, log/FORMAT.md §2.8): a topic whose
//! batches are stored with zstd or lz4 reads back the records produced —
//! from the active segment and from sealed ones, from any offset, by
//! timestamp, after a reopen (recovery scans compressed batches) — and
//! takes less disk; a change of codec applies to later batches while the
//! earlier ones still read; damage inside a compressed batch is found as
//! damage.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use bytes::Bytes;
use kappa_log::batch::{Crc, ReadBatch};
use kappa_log::{
    AppendRequest, Compression, FsyncPolicy, Log, LogConfig, NewRecord, TopicChanges, TopicConfig,
};

/// Seed-like JSON purchases, `n` of them from `first`.
fn purchases(first: usize, n: usize) -> Vec<NewRecord> {
    (first..first + n)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("user-{}", i % 50))),
            value: Bytes::from(format!(
                r#"{{"event_id":"e-{i:08}","user_id":"user-{}","event_type":"purchase","amount":{}.{:02},"event_time":"2026-01-01T00:{:02}:{:02}Z"}}"#,
                i % 50,
                i % 997,
                i % 100,
                (i / 60) % 60,
                i % 60
            )),
            timestamp: Some(1_767_225_600_000 + i as i64),
            headers: vec![],
        })
        .collect()
}

fn config(compression: Compression) -> TopicConfig {
    TopicConfig {
        segment_bytes: 64 << 10,
        fsync: FsyncPolicy::Never,
        compression,
        ..Default::default()
    }
}

/// The values of every record of partition 0 from `offset`, read in
/// pages of `max_records`.
fn values(log: &Log, offset: u64, max_records: u64) -> Vec<(u64, Bytes)> {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let mut out = Vec::new();
    let mut at = offset;
    while at < p.end_offset() {
        let fetch = p.read(at, max_records, u64::MAX).unwrap();
        out.extend(
            fetch
                .records()
                .filter(|r| r.offset >= at)
                .map(|r| (r.offset, r.value)),
        );
        at = fetch.next_offset;
    }
    out
}

/// `log` closed (its topics' handles dropped by the caller) and opened
/// again over `dir`.
fn reopen(log: Log, dir: &std::path::Path) -> Log {
    log.close();
    drop(log);
    Log::open(LogConfig::new(dir)).unwrap()
}

fn disk_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir.join("topics/t/0"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[tokio::test]
async fn a_compressed_topic_reads_back_what_was_produced_from_any_offset_and_after_a_reopen() {
    let mut sizes = Vec::new();
    for codec in [Compression::None, Compression::Zstd, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let topic = log.create_topic("t", config(codec)).unwrap();
        let p = topic.partition(0).unwrap();
        let mut want = Vec::new();
        for round in 0..40 {
            let records = purchases(round * 250, 250);
            want.extend(records.iter().map(|r| r.value.clone()));
            p.append(AppendRequest {
                records,
                idempotency_key: Some(format!("r{round}").into_bytes()),
                as_sent: None,
            })
            .await
            .unwrap();
        }
        assert!(p.describe().segment_count > 1, "{codec}: sealed segments");
        let expected: Vec<(u64, Bytes)> = want
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, v)| (i as u64, v))
            .collect();
        assert_eq!(values(&log, 0, 10_000), expected, "{codec}");
        // From inside a batch, in small pages.
        assert_eq!(values(&log, 3_333, 7), expected[3_333..], "{codec}");
        // By timestamp: the record stamped 1,767,225,604,321 is offset 4,321.
        assert_eq!(p.offset_for_timestamp(1_767_225_604_321).unwrap(), 4_321);
        // Framed reads, checked elsewhere (as the processors read).
        let framed = p.read_framed(0, u64::MAX, u64::MAX).unwrap();
        let mut count = 0;
        for batch in &framed.batches {
            assert_eq!(batch.compression(), codec, "{codec}");
            batch.read_checked(Crc::Check, |_| count += 1).unwrap();
            assert_eq!(
                batch.check(Crc::Check).unwrap().next_offset(),
                batch.next_offset()
            );
            assert!(batch.byte_len() > 0);
        }
        assert_eq!(count, 10_000);
        // A retried append is still found by its key (the window is rebuilt
        // from the batch headers at open).
        drop(topic);
        let log = reopen(log, dir.path());
        assert_eq!(values(&log, 0, 10_000), expected, "{codec} after a reopen");
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        let retry = p
            .append(AppendRequest {
                records: purchases(39 * 250, 250),
                idempotency_key: Some(b"r39".to_vec()),
                as_sent: None,
            })
            .await
            .unwrap();
        assert!(retry.duplicate, "{codec}");
        sizes.push((codec, disk_bytes(dir.path())));
    }
    let plain = sizes[0].1;
    for (codec, bytes) in &sizes[1..] {
        let ratio = plain as f64 / *bytes as f64;
        assert!(
            ratio > 2.0,
            "{codec}: {bytes} bytes against {plain} ({ratio:.2}x)"
        );
    }
}

#[tokio::test]
async fn a_change_of_codec_applies_to_later_batches_and_every_batch_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.create_topic("t", config(Compression::None)).unwrap();
    let p = topic.partition(0).unwrap();
    let mut want = Vec::new();
    for (round, codec) in [
        Compression::None,
        Compression::Zstd,
        Compression::Lz4,
        Compression::None,
    ]
    .into_iter()
    .enumerate()
    {
        let changed = topic
            .alter(&TopicChanges {
                compression: Some(codec),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(changed.compression, codec);
        let records = purchases(round * 100, 100);
        want.extend(records.iter().map(|r| r.value.clone()));
        p.append(AppendRequest {
            records,
            idempotency_key: None,
            as_sent: None,
        })
        .await
        .unwrap();
    }
    let framed = p.read_framed(0, u64::MAX, u64::MAX).unwrap();
    let codecs: Vec<Compression> = framed.batches.iter().map(|b| b.compression()).collect();
    assert_eq!(
        codecs,
        [
            Compression::None,
            Compression::Zstd,
            Compression::Lz4,
            Compression::None
        ]
    );
    let got: Vec<Bytes> = values(&log, 0, 1_000).into_iter().map(|(_, v)| v).collect();
    assert_eq!(got, want);
    // The setting survives a reopen (topic.json), and only a set codec is
    // written there.
    drop(topic);
    let log = reopen(log, dir.path());
    let meta = std::fs::read_to_string(dir.path().join("topics/t/topic.json")).unwrap();
    assert!(!meta.contains("compression"), "{meta}");
    let topic = log.topic("t").unwrap();
    topic
        .alter(&TopicChanges {
            compression: Some(Compression::Zstd),
            ..Default::default()
        })
        .unwrap();
    drop(topic);
    let log = reopen(log, dir.path());
    assert_eq!(
        log.topic("t").unwrap().config().compression,
        Compression::Zstd
    );
}

#[tokio::test]
async fn a_damaged_byte_inside_a_compressed_batch_is_damage_not_other_records() {
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.create_topic("t", config(Compression::Zstd)).unwrap();
    let p = topic.partition(0).unwrap();
    p.append(AppendRequest {
        records: purchases(0, 500),
        idempotency_key: None,
        as_sent: None,
    })
    .await
    .unwrap();
    let stored = p.read_framed(0, u64::MAX, u64::MAX).unwrap().batches[0]
        .as_bytes()
        .clone();
    assert_eq!(stored[9], 2, "a version-2 batch");
    // A byte of the compressed records flipped: the CRC finds it.
    let mut damaged = stored.to_vec();
    let last = damaged.len() - 10;
    damaged[last] ^= 0x40;
    let e = kappa_log::batch::BatchView::parse(&Bytes::from(damaged)).unwrap_err();
    assert!(e.to_string().contains("CRC mismatch"), "{e}");
}
