//! `segments`: a table per partition of its segments — offsets, timestamps,
//! size, record and batch counts, index entries. A bad batch does not stop
//! the listing: the segment's row covers the valid batches before it and
//! the problem is shown under the table (`verify` checks everything).

use std::fmt::Write;
use std::path::Path;

use serde::Serialize;

use super::indexes::{self, IndexCounts};
use super::{layout, text, walk, Problem};

/// One segment's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SegmentSummary {
    /// Base offset (from the file name).
    pub base_offset: u64,
    /// Offset of the last valid record (`None` when empty).
    pub last_offset: Option<u64>,
    /// Timestamp of the first record.
    pub first_timestamp: Option<i64>,
    /// Timestamp of the last record.
    pub last_timestamp: Option<i64>,
    /// Largest record timestamp.
    pub max_timestamp: Option<i64>,
    /// Size of the `.log` file in bytes.
    pub bytes: u64,
    /// Bytes of its valid batches as stored.
    pub valid_bytes: u64,
    /// Bytes its valid batches would take uncompressed (log/FORMAT.md
    /// §2.8): `valid_bytes` when none is stored compressed.
    pub uncompressed_bytes: u64,
    /// Records in valid batches.
    pub records: u64,
    /// Valid batches.
    pub batches: u64,
    /// Index entry counts (`None`: file missing).
    pub index: IndexCounts,
    /// True for the partition's last (active) segment.
    pub active: bool,
    /// The first bad batch, if any.
    pub problem: Option<Problem>,
}

/// The segments of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionSegments {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// Segments by base offset.
    pub segments: Vec<SegmentSummary>,
}

/// Summarises the segments of the chosen topics and partitions.
pub fn segments(
    data_dir: &Path,
    topic: Option<&str>,
    partition: Option<u32>,
) -> anyhow::Result<Vec<PartitionSegments>> {
    let mut out = Vec::new();
    for t in layout::topics(data_dir, topic)? {
        for p in layout::partitions(&t, partition)? {
            let dir = t.partition_dir(p);
            let files = if dir.is_dir() {
                layout::segments(&dir)?
            } else {
                Vec::new()
            };
            let mut segments = Vec::new();
            for (i, f) in files.iter().enumerate() {
                let active = i + 1 == files.len();
                let w = walk::walk(&f.paths.log, f.base_offset, active)?;
                let (first, last) = (w.batches.first(), w.batches.last());
                segments.push(SegmentSummary {
                    base_offset: f.base_offset,
                    last_offset: last.map(|b| b.last_offset()),
                    first_timestamp: first.map(|b| b.first_timestamp),
                    last_timestamp: last.map(|b| b.last_timestamp),
                    max_timestamp: w.batches.iter().map(|b| b.max_timestamp).max(),
                    bytes: w.bytes.len() as u64,
                    valid_bytes: w.batches.iter().map(|b| b.len).sum(),
                    uncompressed_bytes: w.batches.iter().map(|b| b.uncompressed_len).sum(),
                    records: w.batches.iter().map(|b| u64::from(b.record_count)).sum(),
                    batches: w.batches.len() as u64,
                    index: indexes::counts(&f.paths.index, &f.paths.time_index)?,
                    active,
                    problem: w.problem,
                });
            }
            out.push(PartitionSegments {
                topic: t.name.clone(),
                partition: p,
                segments,
            });
        }
    }
    Ok(out)
}

/// The text form: a heading and a table per partition.
pub fn render(partitions: &[PartitionSegments]) -> String {
    let mut out = String::new();
    for p in partitions {
        let records: u64 = p.segments.iter().map(|s| s.records).sum();
        let bytes: u64 = p.segments.iter().map(|s| s.bytes).sum();
        let uncompressed: u64 = p.segments.iter().map(|s| s.uncompressed_bytes).sum();
        let valid: u64 = p.segments.iter().map(|s| s.valid_bytes).sum();
        let _ = write!(
            out,
            "topic {} partition {}: {} segment(s), {records} records, {bytes} bytes",
            p.topic,
            p.partition,
            p.segments.len()
        );
        if uncompressed != valid {
            // Some batches are stored compressed: the ratio of what the
            // valid batches would take to what they take.
            let ratio = uncompressed as f64 / valid.max(1) as f64;
            let _ = write!(out, " ({uncompressed} uncompressed, {ratio:.2}x)");
        }
        out.push('\n');
        let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
        let entries = |v: Option<usize>| v.map_or("-".to_owned(), |v| v.to_string());
        let rows: Vec<Vec<String>> = p
            .segments
            .iter()
            .map(|s| {
                vec![
                    s.base_offset.to_string(),
                    opt(s.last_offset),
                    s.first_timestamp.map_or("-".into(), text::time),
                    s.max_timestamp.map_or("-".into(), text::time),
                    s.bytes.to_string(),
                    s.records.to_string(),
                    s.batches.to_string(),
                    entries(s.index.offset_entries),
                    entries(s.index.time_entries),
                    match (&s.problem, s.active) {
                        (Some(_), _) => "PROBLEM".into(),
                        (None, true) => "active".into(),
                        (None, false) => "sealed".into(),
                    },
                ]
            })
            .collect();
        out.push_str(&text::table(
            &[
                "base",
                "last",
                "first_time",
                "max_time",
                "bytes",
                "records",
                "batches",
                "index",
                "timeindex",
                "state",
            ],
            &rows,
            &[0, 1, 4, 5, 6, 7, 8],
        ));
        for s in &p.segments {
            if let Some(problem) = &s.problem {
                let _ = writeln!(out, "  problem: {problem}");
            }
        }
        out.push('\n');
    }
    out
}
