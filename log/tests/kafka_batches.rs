//! A Kafka producer's zstd batch stored as sent (issue 40, log/FORMAT.md
//! §2.10): in a zstd topic the writer keeps the producer's compressed
//! section byte for byte (version 3), readers read back exactly the
//! records appended — after a reopen too — and a reader asking for it gets
//! the section as sent. A section that does not read back as the records
//! appended, or a topic of another codec, stores the records the usual
//! way; damage inside the section is found as damage. The format's
//! fixture (`tests/fixtures/v4`, written by the ignored
//! `write_v4_fixture`) must read back the same forever.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use bytes::{BufMut, Bytes};
use kappa_log::{
    AppendRequest, Compression, FsyncPolicy, Header, KafkaRecords, Log, LogConfig, NewRecord,
    TopicConfig,
};

/// Base timestamp of the batches.
const BASE: i64 = 1_767_225_600_000;

/// Records with keys (one without), headers (one with an empty value)
/// and an empty value, timestamps `BASE + 3 i`.
fn records(n: usize) -> Vec<NewRecord> {
    (0..n)
        .map(|i| NewRecord {
            key: (i % 5 != 4).then(|| Bytes::from(format!("user-{}", i % 7))),
            value: match i % 6 {
                5 => Bytes::new(),
                _ => Bytes::from(format!(r#"{{"n":{i},"kind":"purchase","amount":{i}.5}}"#)),
            },
            timestamp: Some(BASE + 3 * i as i64),
            headers: match i % 3 {
                0 => vec![],
                _ => vec![
                    Header {
                        name: "trace".into(),
                        value: Bytes::from(format!("t-{i}")),
                    },
                    Header {
                        name: "empty".into(),
                        value: Bytes::new(),
                    },
                ],
            },
        })
        .collect()
}

/// Kafka's zigzag varint.
fn varint(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// `records` in Kafka's record layout (v2), as a producer writes them: an
/// empty value or header value sent as null (Kappa stores either as
/// empty).
fn kafka_section(records: &[NewRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, r) in records.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        varint(&mut body, r.timestamp.unwrap() - BASE);
        varint(&mut body, i as i64);
        match &r.key {
            Some(k) => {
                varint(&mut body, k.len() as i64);
                body.extend_from_slice(k);
            }
            None => varint(&mut body, -1),
        }
        let nullable = |body: &mut Vec<u8>, v: &Bytes| match v.is_empty() {
            true => varint(body, -1),
            false => {
                varint(body, v.len() as i64);
                body.extend_from_slice(v);
            }
        };
        nullable(&mut body, &r.value);
        varint(&mut body, r.headers.len() as i64);
        for h in &r.headers {
            varint(&mut body, h.name.len() as i64);
            body.extend_from_slice(h.name.as_bytes());
            nullable(&mut body, &h.value);
        }
        varint(&mut out, body.len() as i64);
        out.put_slice(&body);
    }
    out
}

fn as_sent(records: &[NewRecord]) -> KafkaRecords {
    KafkaRecords {
        codec: Compression::Zstd,
        base_timestamp: BASE,
        compressed: Bytes::from(zstd::bulk::compress(&kafka_section(records), 3).unwrap()),
    }
}

fn open(dir: &std::path::Path, compression: Compression) -> Log {
    let log = Log::open(LogConfig::new(dir)).unwrap();
    if log.topic("t").is_err() {
        let config = TopicConfig {
            fsync: FsyncPolicy::Never,
            compression,
            ..Default::default()
        };
        log.create_topic("t", config).unwrap();
    }
    log
}

/// Every record of partition 0, and the sections as sent of its batches
/// (`None` for a batch stored otherwise).
fn read(log: &Log) -> (Vec<NewRecord>, Vec<Option<KafkaRecords>>) {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let fetch = p.read(0, u64::MAX, u64::MAX).unwrap();
    let sent = fetch.batches.iter().map(|b| b.as_sent().cloned()).collect();
    let records = fetch.records().map(NewRecord::from).collect();
    (records, sent)
}

/// The format version of the first batch of partition 0's first segment.
fn first_version(dir: &std::path::Path) -> u8 {
    let segment = std::fs::read_dir(dir.join("topics/t/0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .unwrap();
    std::fs::read(segment).unwrap()[9]
}

fn append(log: &Log, records: Vec<NewRecord>, sent: Option<KafkaRecords>) {
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(p.append(AppendRequest {
            records,
            idempotency_key: None,
            as_sent: sent,
        }))
        .unwrap();
}

#[test]
fn a_zstd_batch_is_stored_as_sent_and_reads_back_as_appended() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), Compression::Zstd);
    let first = records(40);
    let sent = as_sent(&first);
    append(&log, first.clone(), Some(sent.clone()));
    assert_eq!(first_version(dir.path()), 3, "stored as sent (version 3)");
    // A later batch's timestamps start after the base: each reads back.
    let second: Vec<NewRecord> = records(60)[40..].to_vec();
    append(&log, second.clone(), Some(as_sent_from(&second)));
    let first = [first, second].concat();
    let sent = vec![Some(sent), Some(as_sent_from(&records(60)[40..]))];
    let (back, sections) = read(&log);
    assert_eq!(back, first);
    assert_eq!(sections, sent);

    // After a reopen (recovery scans the batches) too.
    log.close();
    drop(log);
    let log = open(dir.path(), Compression::Zstd);
    let (back, sections) = read(&log);
    assert_eq!(back, first);
    assert_eq!(sections, sent);
}

/// [`as_sent`] as an lz4 frame, as Kafka's producers compress with lz4.
fn as_sent_lz4(records: &[NewRecord]) -> KafkaRecords {
    use std::io::Write;
    let mut encoder = lz4::EncoderBuilder::new().build(Vec::new()).unwrap();
    encoder.write_all(&kafka_section(records)).unwrap();
    let (frame, result) = encoder.finish();
    result.unwrap();
    KafkaRecords {
        codec: Compression::Lz4,
        base_timestamp: BASE,
        compressed: Bytes::from(frame),
    }
}

#[test]
fn an_lz4_frame_in_an_lz4_topic_is_stored_as_sent() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), Compression::Lz4);
    let first = records(40);
    let sent = as_sent_lz4(&first);
    append(&log, first.clone(), Some(sent.clone()));
    assert_eq!(first_version(dir.path()), 3, "stored as sent (version 3)");
    let (back, sections) = read(&log);
    assert_eq!(back, first);
    assert_eq!(sections, vec![Some(sent)]);
    // A zstd topic takes no lz4 section.
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), Compression::Zstd);
    append(&log, first.clone(), Some(as_sent_lz4(&first)));
    assert_eq!(first_version(dir.path()), 2);
    assert_eq!(read(&log), (first, vec![None]));
}

#[test]
fn a_section_that_does_not_read_back_as_the_records_is_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), Compression::Zstd);
    let mut appended = records(40);
    let sent = as_sent(&appended);
    // The records appended differ from the section in one value.
    appended[7].value = Bytes::from_static(b"{\"n\":\"other\"}");
    append(&log, appended.clone(), Some(sent));
    assert_eq!(first_version(dir.path()), 2, "compressed the usual way");
    let (back, sections) = read(&log);
    assert_eq!(back, appended);
    assert_eq!(sections, vec![None]);
}

#[test]
fn a_topic_of_another_codec_stores_the_records_its_own_way() {
    for codec in [Compression::None, Compression::Lz4] {
        let dir = tempfile::tempdir().unwrap();
        let log = open(dir.path(), codec);
        let first = records(40);
        append(&log, first.clone(), Some(as_sent(&first)));
        let (back, sections) = read(&log);
        assert_eq!(back, first, "{codec}");
        assert_eq!(sections, vec![None], "{codec}");
        assert_ne!(first_version(dir.path()), 3, "{codec}");
    }
}

#[test]
fn damage_inside_a_section_stored_as_sent_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(dir.path(), Compression::Zstd);
    let first = records(40);
    append(&log, first.clone(), Some(as_sent(&first)));
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    let stored = p.read_framed(0, u64::MAX, u64::MAX).unwrap().batches[0]
        .as_bytes()
        .clone();
    assert_eq!(stored[9], 3, "a version-3 batch");
    // A byte of the section flipped: the CRC finds it.
    let mut damaged = stored.to_vec();
    let last = damaged.len() - 10;
    damaged[last] ^= 0x40;
    let e = kappa_log::batch::BatchView::parse(&Bytes::from(damaged.clone())).unwrap_err();
    assert!(e.to_string().contains("CRC mismatch"), "{e}");
    // With its CRC made again (damage before the CRC was taken), the
    // section does not decode: damage, not other records.
    let crc = crc32fast::hash(&damaged[8..]);
    damaged[4..8].copy_from_slice(&crc.to_le_bytes());
    let e = kappa_log::batch::BatchView::parse(&Bytes::from(damaged)).unwrap_err();
    assert!(e.to_string().contains("Kafka records"), "{e}");
}

fn fixture() -> std::path::PathBuf {
    support::manifest_dir().join("tests/fixtures/v4")
}

/// Batches in the fixture, of 20 records each, sealed segments among them.
const FIXTURE_BATCHES: usize = 4;

#[test]
#[ignore = "regenerates the committed fixture"]
fn write_v4_fixture() {
    let dir = &fixture();
    let _ = std::fs::remove_dir_all(dir);
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let config = TopicConfig {
        segment_bytes: 1024,
        fsync: FsyncPolicy::Always,
        compression: Compression::Zstd,
        ..Default::default()
    };
    log.create_topic("t", config).unwrap();
    for batch in records(20 * FIXTURE_BATCHES).chunks(20) {
        append(&log, batch.to_vec(), Some(as_sent_from(batch)));
    }
    log.close();
}

/// [`as_sent`] of records that need not start at the base timestamp.
fn as_sent_from(records: &[NewRecord]) -> KafkaRecords {
    let base = records[0].timestamp.unwrap();
    let shifted: Vec<NewRecord> = records
        .iter()
        .map(|r| NewRecord {
            timestamp: Some(r.timestamp.unwrap() - base + BASE),
            ..r.clone()
        })
        .collect();
    KafkaRecords {
        base_timestamp: base,
        ..as_sent(&shifted)
    }
}

#[test]
fn v4_fixture_reads_back_unchanged() {
    let copy = tempfile::tempdir().unwrap();
    support::copy_dir(&fixture(), copy.path());
    let log = Log::open(LogConfig::new(copy.path())).unwrap();
    let topic = log.topic("t").unwrap();
    let p = topic.partition(0).unwrap();
    assert!(p.describe().segment_count > 1, "sealed segments");
    let (back, sections) = read(&log);
    assert_eq!(back, records(20 * FIXTURE_BATCHES));
    let want: Vec<Option<KafkaRecords>> = records(20 * FIXTURE_BATCHES)
        .chunks(20)
        .map(|b| Some(as_sent_from(b)))
        .collect();
    assert_eq!(sections, want);
}
