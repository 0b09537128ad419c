//! Tests of the inspector against a data directory written by kappa-log
//! ([`sample`](super::sample)), clean and then deliberately damaged.

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::dump::{self, DumpRequest};
use super::sample::{self, TOPIC};
use super::{groups, layout, segments, verify, walk};

fn sample_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    sample::write(dir.path()).unwrap();
    dir
}

fn partition_dir(data: &Path, p: u32) -> PathBuf {
    data.join("topics").join(TOPIC).join(p.to_string())
}

/// Flips every bit of the byte at `position` of `path`.
fn flip(path: &Path, position: u64) {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8];
    file.read_exact_at(&mut b, position).unwrap();
    file.write_all_at(&[!b[0]], position).unwrap();
}

fn write_u32(path: &Path, position: u64, v: u32) {
    let file = OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(&v.to_le_bytes(), position).unwrap();
}

fn first_segment(data: &Path) -> layout::SegmentFiles {
    layout::segments(&partition_dir(data, 0)).unwrap().remove(0)
}

#[test]
fn segments_lists_what_was_written() {
    let dir = sample_dir();
    let parts = segments::segments(dir.path(), None, None).unwrap();
    assert_eq!(parts.len(), 2);
    let p0 = &parts[0];
    assert!(p0.segments.len() > 2, "1 KiB segments roll: {p0:?}");
    assert_eq!(
        p0.segments.iter().map(|s| s.records).sum::<u64>(),
        sample::RECORDS_P0
    );
    assert_eq!(p0.segments[0].base_offset, 0);
    assert_eq!(p0.segments[0].first_timestamp, Some(sample::BASE_TIME_MS));
    for w in p0.segments.windows(2) {
        assert_eq!(w[0].last_offset.unwrap() + 1, w[1].base_offset);
        assert!(!w[0].active && w[0].index.offset_entries.unwrap() > 1);
        assert!(w[0].index.time_entries.unwrap() >= 1);
    }
    let last = p0.segments.last().unwrap();
    assert!(last.active && last.index.offset_entries.is_none());
    assert_eq!(last.last_offset, Some(sample::RECORDS_P0 - 1));
    assert!(p0.segments.iter().all(|s| s.problem.is_none()));
    assert_eq!(parts[1].segments[0].records, sample::RECORDS_P1);

    let only = segments::segments(dir.path(), Some(TOPIC), Some(1)).unwrap();
    assert_eq!((only.len(), only[0].partition), (1, 1));
    let text = segments::render(&parts);
    assert!(text.contains("topic orders partition 0"), "{text}");
    assert!(text.contains("2026-01-01T00:00:00.000Z"), "{text}");
    assert!(segments::segments(dir.path(), Some("nope"), None).is_err());
    assert!(segments::segments(dir.path(), Some(TOPIC), Some(9)).is_err());
}

#[test]
fn dump_shows_the_records() {
    let dir = sample_dir();
    let request = DumpRequest {
        topic: TOPIC,
        partition: 0,
        from: 12,
        max_records: 4,
        records: true,
    };
    let d = dump::dump(dir.path(), request).unwrap();
    assert!(d.problem.is_none());
    let records: Vec<_> = d
        .batches
        .iter()
        .flat_map(|b| b.records.clone().unwrap())
        .collect();
    let offsets: Vec<u64> = records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [12, 13, 14, 15]);
    assert_eq!(records[0].key.as_deref(), Some("user-5"));
    assert_eq!(records[0].value, r#"{"n":12,"amount":36.50}"#);
    assert_eq!(
        records[0].headers,
        [("source".to_owned(), "web".to_owned())]
    );
    assert_eq!(records[0].timestamp, sample::BASE_TIME_MS + 12);
    assert_eq!(records[1].value, "0xff0010", "binary values as hex");
    assert_eq!(d.batches[0].info.base_offset, 10);
    assert_eq!(d.batches[0].info.idempotency_key.as_deref(), Some("req-10"));

    let text = dump::render(&d);
    assert!(text.contains("offset 13"), "{text}");
    assert!(
        text.contains(r#"value {"n":12,"amount":36.50} header source=web"#),
        "{text}"
    );

    // Without --records: batches only; past the end: nothing.
    let batches = dump::dump(
        dir.path(),
        DumpRequest {
            records: false,
            ..request
        },
    )
    .unwrap();
    assert!(batches.batches.iter().all(|b| b.records.is_none()));
    let past = dump::dump(
        dir.path(),
        DumpRequest {
            from: 1000,
            ..request
        },
    )
    .unwrap();
    assert!(past.batches.is_empty() && past.problem.is_none());
}

#[test]
fn verify_is_clean_on_what_the_log_wrote() {
    let dir = sample_dir();
    let report = verify::verify(dir.path(), None).unwrap();
    assert!(report.clean, "{}", verify::render(&report));
    assert_eq!(report.partitions[0].records, sample::RECORDS_P0);
    assert!(verify::render(&report).ends_with("clean\n"));
}

#[test]
fn verify_reports_a_flipped_byte_in_a_sealed_batch_precisely() {
    let dir = sample_dir();
    let seg = first_segment(dir.path());
    let w = walk::walk(&seg.paths.log, seg.base_offset, false).unwrap();
    let batch = w.batches[1].clone();
    flip(&seg.paths.log, batch.position + batch.len - 3);

    let report = verify::verify(dir.path(), Some(TOPIC)).unwrap();
    assert!(!report.clean);
    let p = report.first_problem().unwrap();
    assert_eq!(p.path, seg.paths.log);
    assert_eq!(p.position, batch.position);
    assert_eq!(p.batch_base_offset, Some(batch.base_offset));
    assert_eq!(p.what, "CRC mismatch");
    let text = p.to_string();
    assert!(
        text.contains(&format!(
            "at byte {} (batch base offset {})",
            batch.position, batch.base_offset
        )),
        "{text}"
    );
    // Partition 1 is independent and still checked.
    assert!(report.partitions[1].problem.is_none());
    // `segments` and `dump` report the problem instead of failing.
    let parts = segments::segments(dir.path(), Some(TOPIC), Some(0)).unwrap();
    assert_eq!(parts[0].segments[0].problem.as_ref(), Some(p));
    let request = DumpRequest {
        topic: TOPIC,
        partition: 0,
        from: 0,
        max_records: 1000,
        records: true,
    };
    let d = dump::dump(dir.path(), request).unwrap();
    assert_eq!(d.batches.len(), 1);
    assert_eq!(d.problem.as_ref(), Some(p));
}

#[test]
fn verify_reports_a_valid_batch_out_of_sequence() {
    let dir = sample_dir();
    let seg = first_segment(dir.path());
    let w = walk::walk(&seg.paths.log, seg.base_offset, false).unwrap();
    // A batch whose base offset was rewritten (CRC fixed up) is out of sequence.
    let b = w.batches[2].clone();
    let mut bytes = std::fs::read(&seg.paths.log).unwrap();
    let at = b.position as usize;
    bytes[at + 16..at + 24].copy_from_slice(&999u64.to_le_bytes());
    let crc = crc32fast::hash(&bytes[at + 8..at + b.len as usize]);
    bytes[at + 4..at + 8].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&seg.paths.log, &bytes).unwrap();
    let report = verify::verify(dir.path(), None).unwrap();
    let p = report.first_problem().unwrap();
    assert_eq!(
        (p.position, p.what.as_str()),
        (b.position, "offsets not contiguous")
    );
    assert!(
        p.expected
            .contains(&format!("base offset {}", b.base_offset)),
        "{p}"
    );
    assert!(p.found.contains("base offset 999"), "{p}");
}

#[test]
fn verify_reports_a_corrupt_offset_index_entry() {
    let dir = sample_dir();
    let seg = first_segment(dir.path());
    // Entry 1's position field (bytes 12..16 of the file) now points into a batch.
    let index = std::fs::read(&seg.paths.index).unwrap();
    let pos = u32::from_le_bytes(index[12..16].try_into().unwrap());
    write_u32(&seg.paths.index, 12, pos + 7);

    let report = verify::verify(dir.path(), None).unwrap();
    let p = report.first_problem().unwrap();
    assert_eq!(p.path, seg.paths.index);
    assert_eq!((p.entry, p.position), (Some(1), 8));
    assert!(
        p.expected
            .contains(&format!("starting at byte {}", pos + 7)),
        "{p}"
    );
    assert!(p.found.contains(&format!("starts at byte {pos}")), "{p}");
}

#[test]
fn verify_reports_a_wrong_time_index_timestamp() {
    let dir = sample_dir();
    let seg = first_segment(dir.path());
    let entries = std::fs::metadata(&seg.paths.time_index).unwrap().len() / 12;
    let last = (entries - 1) * 12;
    // Lower the last entry's timestamp by one (low bytes of the i64).
    let bytes = std::fs::read(&seg.paths.time_index).unwrap();
    let ts = i64::from_le_bytes(bytes[last as usize..last as usize + 8].try_into().unwrap());
    let file = OpenOptions::new()
        .write(true)
        .open(&seg.paths.time_index)
        .unwrap();
    file.write_all_at(&(ts - 1).to_le_bytes(), last).unwrap();

    let report = verify::verify(dir.path(), None).unwrap();
    let p = report.first_problem().unwrap();
    assert_eq!(p.path, seg.paths.time_index);
    assert_eq!((p.entry, p.position), (Some(entries as usize - 1), last));
    assert_eq!(
        (p.expected.split(' ').next(), p.found.as_str()),
        (Some(&*ts.to_string()), &*(ts - 1).to_string())
    );
}

#[test]
fn verify_reports_a_torn_tail_and_a_missing_segment() {
    let dir = sample_dir();
    let p1 = partition_dir(dir.path(), 1);
    let log = layout::segments(&p1).unwrap().remove(0).paths.log;
    let len = std::fs::metadata(&log).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    // A missing sealed segment in partition 0 breaks offset continuity.
    let segs = layout::segments(&partition_dir(dir.path(), 0)).unwrap();
    std::fs::remove_file(&segs[1].paths.log).unwrap();

    let report = verify::verify(dir.path(), None).unwrap();
    let p0 = report.partitions[0].problem.as_ref().unwrap();
    assert_eq!(p0.path, segs[2].paths.log);
    assert_eq!(p0.what, "offsets not contiguous across segments");
    let p1 = report.partitions[1].problem.as_ref().unwrap();
    assert_eq!((p1.path.clone(), p1.position), (log, 0));
    assert!(p1.what.starts_with("incomplete batch (a torn tail"), "{p1}");
}

#[test]
fn groups_lists_committed_offsets_without_touching_the_file() {
    let dir = sample_dir();
    let file = dir.path().join("groups").join("offsets.log");
    let before = std::fs::read(&file).unwrap();
    let offsets = groups::groups(dir.path()).unwrap();
    let got: Vec<_> = offsets
        .iter()
        .map(|o| (o.group.as_str(), o.partition, o.offset, o.lag))
        .collect();
    assert_eq!(
        got,
        [
            ("audit", 0, 100, Some(0)),
            ("billing", 0, 40, Some(60)),
            ("billing", 1, 3, Some(0))
        ]
    );
    assert_eq!(std::fs::read(&file).unwrap(), before);
    let text = groups::render(&offsets);
    assert!(text.contains("billing") && text.contains("60"), "{text}");
}

#[test]
fn inspecting_never_modifies_the_data_dir() {
    let dir = sample_dir();
    let snapshot = |root: &Path| {
        let mut files = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let path = e.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    files.push((path.clone(), std::fs::read(&path).unwrap()));
                }
            }
        }
        files.sort();
        files
    };
    let before = snapshot(dir.path());
    segments::segments(dir.path(), None, None).unwrap();
    verify::verify(dir.path(), None).unwrap();
    groups::groups(dir.path()).unwrap();
    let request = DumpRequest {
        topic: TOPIC,
        partition: 0,
        from: 0,
        max_records: 1000,
        records: true,
    };
    dump::dump(dir.path(), request).unwrap();
    assert_eq!(snapshot(dir.path()), before);
    assert!(verify::verify(&dir.path().join("nope"), None).is_err());
}

/// A topic stored with zstd: `segments` counts the batches' bytes as
/// stored and uncompressed and prints the ratio; `verify` finds nothing
/// wrong.
#[test]
fn segments_shows_the_ratio_of_a_compressed_topic() {
    use kappa_log::{
        AppendRequest, Compression, FsyncPolicy, Log, LogConfig, NewRecord, TopicConfig,
    };
    let dir = tempfile::tempdir().unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let config = TopicConfig {
        fsync: FsyncPolicy::Never,
        compression: Compression::Zstd,
        ..TopicConfig::default()
    };
    let topic = log.create_topic("packed", config).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let p = topic.partition(0).unwrap();
        for round in 0..4 {
            let records = (0..500)
                .map(|i| {
                    NewRecord::value(format!(
                        r#"{{"user":"u{}","n":{round},"kind":"purchase"}}"#,
                        i % 9
                    ))
                })
                .collect();
            p.append(AppendRequest {
                records,
                idempotency_key: None,
                as_sent: None,
            })
            .await
            .unwrap();
        }
    });
    drop(topic);
    log.close();
    drop(log);
    let parts = segments::segments(dir.path(), Some("packed"), None).unwrap();
    let s = &parts[0].segments[0];
    assert_eq!((s.records, s.batches), (2_000, 4));
    assert_eq!(s.valid_bytes, s.bytes);
    assert!(s.uncompressed_bytes > 5 * s.valid_bytes, "{s:?}");
    let text = segments::render(&parts);
    assert!(
        text.contains("uncompressed,") && text.contains("x)"),
        "{text}"
    );
    let w = walk::walk(&first_segment_of(dir.path(), "packed"), 0, true).unwrap();
    assert!(
        w.batches.iter().all(|b| b.compression == "zstd"),
        "{:?}",
        w.batches
    );
    let report = verify::verify(dir.path(), Some("packed")).unwrap();
    assert!(report.clean, "{}", verify::render(&report));
}

fn first_segment_of(data: &Path, topic: &str) -> PathBuf {
    layout::segments(&data.join("topics").join(topic).join("0"))
        .unwrap()
        .remove(0)
        .paths
        .log
}
