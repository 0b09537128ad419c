//! Crash recovery and corruption: torn tails at every byte, flipped bytes
//! in sealed and active segments, damaged index files; the torn tails and
//! the active segment's flips also with compressed (version 2) batches.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use bytes::Bytes;
use kappa_log::batch::Crc;
use kappa_log::{
    AppendRequest, Compression, FsyncPolicy, Log, LogConfig, LogError, NewRecord, Record,
    TopicConfig,
};

fn config() -> TopicConfig {
    TopicConfig {
        fsync: FsyncPolicy::Never,
        retention_ms: None,
        ..Default::default()
    }
}

fn config_with(compression: Compression) -> TopicConfig {
    TopicConfig {
        compression,
        ..config()
    }
}

fn batch(tag: &str, n: usize, ts: i64) -> AppendRequest {
    AppendRequest {
        records: (0..n)
            .map(|i| NewRecord {
                key: Some(Bytes::from(format!("{tag}-key-{i}"))),
                value: Bytes::from(format!(
                    "{tag} value {i} ✓ ----------------------------------"
                )),
                timestamp: Some(ts + i as i64),
                headers: vec![kappa_log::Header {
                    name: "h".into(),
                    value: Bytes::from_static(b"v"),
                }],
            })
            .collect(),
        idempotency_key: None,
        as_sent: None,
    }
}

fn segment_log(dir: &Path, base: u64) -> PathBuf {
    dir.join("topics/t/0").join(format!("{base:020}.log"))
}

fn read_all(log: &Log) -> kappa_log::Result<Vec<Record>> {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let fetch = p.read(p.start_offset(), u64::MAX, u64::MAX)?;
    Ok(fetch.records().collect())
}

/// Writes batches of 4, 4 and 3 records; returns the log's bytes and the
/// position where the last batch starts.
async fn three_batches(dir: &Path) -> (Vec<u8>, u64, Vec<Record>) {
    three_batches_with(dir, Compression::None).await
}

/// [`three_batches`] in a topic stored with `compression` (its batches
/// compress: each is version 2 when compressed).
async fn three_batches_with(dir: &Path, compression: Compression) -> (Vec<u8>, u64, Vec<Record>) {
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let topic = log.create_topic("t", config_with(compression)).unwrap();
    let p = topic.partition(0).unwrap();
    p.append(batch("a", 4, 1000)).await.unwrap();
    p.append(batch("b", 4, 2000)).await.unwrap();
    let last_start = p.describe().bytes;
    let first_two = read_all(&log).unwrap();
    p.append(batch("c", 3, 3000)).await.unwrap();
    drop(topic);
    log.close();
    (
        std::fs::read(segment_log(dir, 0)).unwrap(),
        last_start,
        first_two,
    )
}

#[tokio::test]
async fn recovery_truncates_a_torn_tail_at_every_byte() {
    torn_tail_at_every_byte(Compression::None).await;
}

#[tokio::test]
async fn recovery_truncates_a_torn_compressed_tail_at_every_byte() {
    torn_tail_at_every_byte(Compression::Zstd).await;
}

async fn torn_tail_at_every_byte(compression: Compression) {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, last_start, first_two) = three_batches_with(dir.path(), compression).await;
    let version = if compression == Compression::None {
        1
    } else {
        2
    };
    assert_eq!(
        bytes[last_start as usize + 9],
        version,
        "the batch's version"
    );
    assert!(bytes.len() as u64 > last_start + 50);
    for cut in last_start..bytes.len() as u64 {
        std::fs::write(segment_log(dir.path(), 0), &bytes[..cut as usize]).unwrap();
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        assert_eq!(read_all(&log).unwrap(), first_two, "cut at {cut}");
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        assert_eq!(p.end_offset(), 8, "cut at {cut}");
        let outcome = p.append(batch("d", 2, 4000)).await.unwrap();
        assert_eq!(
            outcome.base_offset, 8,
            "appends continue at the right offset (cut at {cut})"
        );
        assert_eq!(
            std::fs::metadata(segment_log(dir.path(), 0)).unwrap().len(),
            last_start + outcome.bytes
        );
    }
}

#[tokio::test]
async fn recovery_drops_a_garbage_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (mut bytes, _, _) = three_batches(dir.path()).await;
    let all_len = bytes.len();
    bytes.extend_from_slice(&[0u8; 100]);
    std::fs::write(segment_log(dir.path(), 0), &bytes).unwrap();
    let before = kappa_log::stats::global()
        .torn_tails_truncated
        .load(Ordering::Relaxed);
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert_eq!(read_all(&log).unwrap().len(), 11);
    assert!(
        kappa_log::stats::global()
            .torn_tails_truncated
            .load(Ordering::Relaxed)
            > before
    );
    drop(log);
    assert_eq!(
        std::fs::metadata(segment_log(dir.path(), 0)).unwrap().len() as usize,
        all_len
    );
}

/// Three batches in a sealed segment, one in the active one.
async fn sealed_segment(dir: &Path) -> (Vec<u8>, u64, u64) {
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let topic = log.create_topic("t", config()).unwrap();
    let p = topic.partition(0).unwrap();
    p.append(batch("a", 4, 1000)).await.unwrap();
    let second_start = p.describe().bytes;
    p.append(batch("b", 4, 2000)).await.unwrap();
    let second_end = p.describe().bytes;
    p.append(batch("c", 3, 3000)).await.unwrap();
    p.roll().await.unwrap();
    p.append(batch("d", 2, 4000)).await.unwrap();
    assert_eq!(p.describe().segment_count, 2);
    drop(topic);
    log.close();
    (
        std::fs::read(segment_log(dir, 0)).unwrap(),
        second_start,
        second_end,
    )
}

/// Writes `bytes` as the first segment of topic `t` with byte `i` flipped,
/// and opens the log.
fn open_with_flip(dir: &Path, bytes: &[u8], i: u64) -> Log {
    let mut copy = bytes.to_vec();
    copy[i as usize] ^= 0xFF;
    std::fs::write(segment_log(dir, 0), &copy).unwrap();
    Log::open(LogConfig::new(dir)).unwrap()
}

/// Asserts that reading `from` fails as damage of offsets
/// `[first, next)` found at byte `position` of `path`.
fn assert_damaged(
    p: &kappa_log::Partition,
    from: u64,
    path: &Path,
    range: (u64, u64),
    position: u64,
) {
    match p.read(from, u64::MAX, u64::MAX) {
        Err(LogError::Damaged {
            topic,
            partition,
            first_offset,
            next_offset,
            path: at,
            position: pos,
            reason,
        }) => {
            assert_eq!((topic.as_str(), partition), ("t", 0));
            assert_eq!(at, path);
            assert_eq!(
                (first_offset, next_offset),
                range,
                "read from {from}: {reason}"
            );
            assert_eq!(pos, position, "read from {from}: {reason}");
        }
        other => panic!("read from {from}: expected Damaged, got {other:?}"),
    }
}

#[tokio::test]
async fn every_flipped_byte_of_a_sealed_batch_is_reported_and_never_returned() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, start, end) = sealed_segment(dir.path()).await;
    let path = segment_log(dir.path(), 0);
    let stats = kappa_log::stats::global();
    for i in start..end {
        let log = open_with_flip(dir.path(), &bytes, i);
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        // A read from before the damage gets the batch before it, not an error.
        let fetch = p.read(0, u64::MAX, u64::MAX).unwrap();
        assert_eq!(fetch.records().count(), 4, "flip at {i}");
        assert_eq!(fetch.next_offset, 4, "flip at {i}");
        // A read starting in the damage names it and where to go on.
        let before = stats.corruptions_detected.load(Ordering::Relaxed);
        for from in [4, 5, 7] {
            assert_damaged(p, from, &path, (4, 8), start);
        }
        assert!(stats.corruptions_detected.load(Ordering::Relaxed) > before);
        // Everything after it reads, across the segment boundary.
        let after = p.read(8, u64::MAX, u64::MAX).unwrap();
        assert_eq!(
            after.records().map(|r| r.offset).collect::<Vec<_>>(),
            vec![8, 9, 10, 11, 12]
        );
        assert_eq!(p.read(11, 10, u64::MAX).unwrap().records().count(), 2);
        // A timestamp lookup passes over the damaged records.
        assert_eq!(p.offset_for_timestamp(2000).unwrap(), 8, "flip at {i}");
    }
    eprintln!("sealed segment: {} flips tried, all detected", end - start);
    std::fs::write(&path, &bytes).unwrap();
}

/// A read by frames (`read_framed`) leaves a batch's CRC and records to
/// its reader: for every flipped byte of a sealed batch, the read either
/// stops before the batch (its frame showed the damage) or hands it out,
/// and then its check fails — never a damaged batch that checks — and a
/// checked read at its first offset reports the damage.
#[tokio::test]
async fn every_flipped_byte_a_framed_read_hands_out_fails_its_check() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, start, end) = sealed_segment(dir.path()).await;
    let path = segment_log(dir.path(), 0);
    let (mut stopped, mut handed_out) = (0, 0);
    for i in start..end {
        let log = open_with_flip(dir.path(), &bytes, i);
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        let fetch = p.read_framed(0, u64::MAX, u64::MAX).unwrap();
        let first = fetch.batches[0]
            .check(Crc::Check)
            .expect("the batch before the damage");
        assert_eq!((first.base_offset(), first.next_offset()), (0, 4));
        match fetch.batches.get(1) {
            Some(damaged) if damaged.base_offset() == 4 => {
                handed_out += 1;
                assert!(
                    damaged.check(Crc::Check).is_err(),
                    "flip at {i} passed the check"
                );
                assert_damaged(p, 4, &path, (4, 8), start);
            }
            other => {
                stopped += 1;
                assert!(other.is_none(), "flip at {i}: {other:?}");
                assert_eq!(fetch.next_offset, 4, "flip at {i}");
            }
        }
    }
    // Most flips are inside records, which only the check sees.
    assert!(
        handed_out > stopped,
        "{handed_out} handed out, {stopped} stopped"
    );
    std::fs::write(&path, &bytes).unwrap();
}

#[tokio::test]
async fn a_flipped_byte_in_the_active_segment_keeps_the_batches_after_it_and_reuses_no_offset() {
    flipped_byte_in_the_active_segment(Compression::None).await;
}

#[tokio::test]
async fn a_flipped_byte_in_a_compressed_active_segment_keeps_the_batches_after_it() {
    flipped_byte_in_the_active_segment(Compression::Zstd).await;
}

async fn flipped_byte_in_the_active_segment(compression: Compression) {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, last_start, _) = three_batches_with(dir.path(), compression).await;
    let path = segment_log(dir.path(), 0);
    let all = {
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        read_all(&log).unwrap()
    };
    assert_eq!(all.len(), 11);
    // The first batch's length field says where the second starts.
    let second_start = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    let stats = kappa_log::stats::global();
    // The last batch's header fields a torn write could also have left
    // garbage in: a flip there cannot be told from a torn tail.
    let tail_header = last_start as usize..last_start as usize + kappa_log::batch::HEADER_LEN;
    eprintln!("active segment: {} flips tried", bytes.len().div_ceil(3));
    for i in (0..bytes.len()).step_by(3) {
        let mut copy = bytes.clone();
        copy[i] ^= 0x01;
        std::fs::write(&path, &copy).unwrap();
        let before = stats.corruptions_detected.load(Ordering::Relaxed)
            + stats.torn_tails_truncated.load(Ordering::Relaxed);
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let after = stats.corruptions_detected.load(Ordering::Relaxed)
            + stats.torn_tails_truncated.load(Ordering::Relaxed);
        assert!(after > before, "flip at {i} was not reported");
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        if tail_header.contains(&i) {
            // Either kept as damage or dropped as a torn tail; never more.
            // A flip of the record count itself (hit by this walk's steps
            // only in the compressed batch) reserves the count it reads.
            let end = p.end_offset();
            let count_byte = i - last_start as usize == kappa_log::batch::RECORD_COUNT_OFFSET + 1
                || i - last_start as usize == kappa_log::batch::RECORD_COUNT_OFFSET;
            assert!(
                end == 8 || end == 11 || (count_byte && end == 10),
                "flip at {i}: end {end}"
            );
            drop(topic);
            drop(log);
            continue;
        }
        let flipped = if (i as u64) >= last_start {
            (8, 11)
        } else if i < second_start {
            (0, 4)
        } else {
            (4, 8)
        };
        // No offset is handed out again: the end stays where it was.
        assert_eq!(p.end_offset(), 11, "flip at {i}");
        // Every record outside the flipped batch is readable, unchanged.
        let mut readable = Vec::new();
        let mut from = 0;
        while from < 11 {
            match p.read(from, u64::MAX, u64::MAX) {
                Ok(fetch) => {
                    readable.extend(fetch.records());
                    from = fetch.next_offset;
                }
                Err(LogError::Damaged {
                    first_offset,
                    next_offset,
                    ..
                }) => {
                    assert_eq!((first_offset, next_offset), flipped, "flip at {i}");
                    from = next_offset;
                }
                Err(e) => panic!("flip at {i}: {e}"),
            }
        }
        let expect: Vec<Record> = all
            .iter()
            .filter(|r| !(flipped.0..flipped.1).contains(&r.offset))
            .cloned()
            .collect();
        assert_eq!(readable, expect, "flip at {i}");
        // The next append continues after the damaged batch.
        let outcome = p.append(batch("e", 2, 5000)).await.unwrap();
        assert_eq!(outcome.base_offset, 11, "flip at {i}");
        drop(topic);
        drop(log);
        // The damage is still reported the same after another restart.
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        let end = log.topic("t").unwrap().partition(0).unwrap().end_offset();
        assert_eq!(end, 13, "flip at {i}");
        drop(log);
    }
}

#[tokio::test]
async fn a_batch_of_a_newer_format_version_is_never_truncated() {
    let dir = tempfile::tempdir().unwrap();
    let (bytes, last_start, _) = three_batches(dir.path()).await;
    let mut copy = bytes.clone();
    // Rewrite the last batch as version 4 (unknown) with a valid CRC.
    let at = last_start as usize;
    copy[at + kappa_log::batch::VERSION_OFFSET] = 4;
    let crc = crc32fast::hash(&copy[at + kappa_log::batch::CRC_START..]);
    copy[at + kappa_log::batch::CRC_OFFSET..at + kappa_log::batch::CRC_START]
        .copy_from_slice(&crc.to_le_bytes());
    std::fs::write(segment_log(dir.path(), 0), &copy).unwrap();
    match Log::open(LogConfig::new(dir.path())) {
        Err(LogError::Corrupt {
            position, reason, ..
        }) => {
            assert_eq!(position, last_start);
            assert!(reason.contains("version 4"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(segment_log(dir.path(), 0)).unwrap(),
        copy,
        "nothing was truncated"
    );
}

#[tokio::test]
async fn missing_or_damaged_index_files_are_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    sealed_segment(dir.path()).await;
    let seg = dir.path().join("topics/t/0");
    let index = seg.join(format!("{:020}.index", 0));
    let time_index = seg.join(format!("{:020}.timeindex", 0));
    let good_index = std::fs::read(&index).unwrap();
    let good_time = std::fs::read(&time_index).unwrap();
    assert!(!good_index.is_empty() && !good_time.is_empty());
    std::fs::remove_file(&index).unwrap();
    std::fs::write(&time_index, b"garbage").unwrap();

    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert_eq!(read_all(&log).unwrap().len(), 13);
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    assert_eq!(p.offset_for_timestamp(2002).unwrap(), 6);
    assert_eq!(p.offset_for_timestamp(3000).unwrap(), 8);
    assert_eq!(p.offset_for_timestamp(4001).unwrap(), 12);
    assert_eq!(p.offset_for_timestamp(9999).unwrap(), 13);
    assert_eq!(std::fs::read(&index).unwrap(), good_index);
    assert_eq!(std::fs::read(&time_index).unwrap(), good_time);
}
