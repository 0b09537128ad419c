//! Walks one segment's `.log` batch by batch, validating each with
//! kappa-log's `BatchView::parse` plus the base-offset sequence check
//! (log/FORMAT.md §2.6, rules 1–12), and stops at the first bad batch,
//! saying where and what precisely.
//!
//! The file is read into memory (not memory-mapped), so a server truncating
//! its active segment meanwhile cannot crash the inspector.

use std::path::{Path, PathBuf};

use anyhow::Context;
use bytes::Bytes;
use kappa_log::batch::{self, BatchView, DecodeError};
use serde::Serialize;

use super::Problem;

/// The header facts of one valid batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchInfo {
    /// Byte position of the batch in the `.log`.
    pub position: u64,
    /// Bytes of the batch as stored.
    pub len: u64,
    /// Bytes of the batch uncompressed: `len` unless it is stored
    /// compressed (log/FORMAT.md §2.8).
    pub uncompressed_len: u64,
    /// How it is stored: `none`, `zstd` or `lz4`.
    pub compression: String,
    /// Offset of its first record.
    pub base_offset: u64,
    /// Number of records.
    pub record_count: u32,
    /// Timestamp of its first record.
    pub first_timestamp: i64,
    /// Largest record timestamp.
    pub max_timestamp: i64,
    /// Timestamp of its last record.
    pub last_timestamp: i64,
    /// When the writer appended it.
    pub append_time: i64,
    /// The idempotency key (lossy UTF-8), if the append carried one.
    pub idempotency_key: Option<String>,
    /// The cleaner wrote it (log/FORMAT.md §2.9): offsets before it, and
    /// after it up to the segment's end if it is the last, may be missing.
    /// Left out of the JSON when false.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
}

impl BatchInfo {
    /// Offset of its last record.
    pub fn last_offset(&self) -> u64 {
        self.base_offset + u64::from(self.record_count) - 1
    }
}

/// What a walk of one segment found.
#[derive(Debug, Clone)]
pub struct SegmentWalk {
    /// The `.log` file.
    pub path: PathBuf,
    /// Base offset from the file name.
    pub base_offset: u64,
    /// The file's bytes.
    pub bytes: Bytes,
    /// The valid batches, in order.
    pub batches: Vec<BatchInfo>,
    /// Offset after the last valid batch.
    pub next_offset: u64,
    /// The first bad batch, if any (the walk stopped there).
    pub problem: Option<Problem>,
}

impl SegmentWalk {
    /// Bytes of valid batches from the start of the file.
    pub fn valid_bytes(&self) -> u64 {
        self.batches.last().map_or(0, |b| b.position + b.len)
    }

    /// The valid batch at `position`, re-parsed (for its records).
    pub fn view(&self, info: &BatchInfo) -> Option<BatchView> {
        BatchView::parse(&self.bytes.slice(info.position as usize..)).ok()
    }
}

/// Reads and walks the segment at `path` whose file name says `base_offset`.
/// `active` marks the partition's last segment, whose torn tail recovery
/// would truncate (said in the problem). Only I/O errors fail; bad data is
/// reported in [`SegmentWalk::problem`].
pub fn walk(path: &Path, base_offset: u64, active: bool) -> anyhow::Result<SegmentWalk> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let bytes = Bytes::from(data);
    let mut out = SegmentWalk {
        path: path.to_owned(),
        base_offset,
        bytes: bytes.clone(),
        batches: Vec::new(),
        next_offset: base_offset,
        problem: None,
    };
    let mut pos = 0usize;
    while pos < bytes.len() {
        let view = match BatchView::parse(&bytes.slice(pos..)) {
            Ok(view) => view,
            Err(e) => {
                out.problem = Some(diagnose(
                    path,
                    &bytes[pos..],
                    pos,
                    out.next_offset,
                    e,
                    active,
                ));
                break;
            }
        };
        if !batch::follows(view.base_offset(), view.is_compacted(), out.next_offset) {
            out.problem = Some(Problem {
                path: path.to_owned(),
                position: pos as u64,
                batch_base_offset: Some(view.base_offset()),
                entry: None,
                what: "offsets not contiguous".into(),
                expected: format!("a batch with base offset {}", out.next_offset),
                found: format!(
                    "a valid batch with base offset {} ({} records)",
                    view.base_offset(),
                    view.record_count()
                ),
            });
            break;
        }
        let last_timestamp = view.records().last().map_or(i64::MIN, |r| r.timestamp);
        out.batches.push(BatchInfo {
            position: pos as u64,
            len: view.len() as u64,
            uncompressed_len: view.as_bytes().len() as u64,
            compression: batch::stored_compression(&bytes[pos..]).to_string(),
            base_offset: view.base_offset(),
            record_count: view.record_count(),
            first_timestamp: view.first_timestamp(),
            max_timestamp: view.max_timestamp(),
            last_timestamp,
            append_time: view.append_time(),
            idempotency_key: view
                .idempotency_key()
                .map(|k| String::from_utf8_lossy(k).into_owned()),
            compacted: view.is_compacted(),
        });
        out.next_offset = view.next_offset();
        pos += view.len();
    }
    Ok(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// Says precisely why the batch at the start of `rest` (byte `pos` of the
/// file, expected to start at offset `expected_base`) failed to parse.
fn diagnose(
    path: &Path,
    rest: &[u8],
    pos: usize,
    expected_base: u64,
    error: DecodeError,
    active: bool,
) -> Problem {
    let torn = " (a torn tail of the active segment: recovery truncates it at the next open)";
    let problem = |what: String, expected: String, found: String| Problem {
        path: path.to_owned(),
        position: pos as u64,
        batch_base_offset: Some(expected_base),
        entry: None,
        what,
        expected,
        found,
    };
    if rest.len() < batch::HEADER_LEN {
        return problem(
            format!("incomplete batch header{}", if active { torn } else { "" }),
            format!("a {}-byte batch header", batch::HEADER_LEN),
            format!("{} bytes before the end of the file", rest.len()),
        );
    }
    let len = u32_at(rest, batch::LENGTH_OFFSET) as usize;
    if len < batch::HEADER_LEN {
        return problem(
            "bad batch length".into(),
            format!("a length of at least {} bytes", batch::HEADER_LEN),
            format!("{len}"),
        );
    }
    if len > rest.len() {
        return problem(
            format!("incomplete batch{}", if active { torn } else { "" }),
            format!("{len} bytes (the batch's declared length)"),
            format!("{} bytes before the end of the file", rest.len()),
        );
    }
    let stored = u32_at(rest, batch::CRC_OFFSET);
    let computed = crc32fast::hash(&rest[batch::CRC_START..len]);
    if stored != computed {
        return problem(
            "CRC mismatch".into(),
            format!(
                "CRC {computed:#010x}, computed over bytes {}..{}",
                pos + batch::CRC_START,
                pos + len
            ),
            format!(
                "{stored:#010x}, stored at byte {}: a byte of this {len}-byte batch is damaged",
                pos + batch::CRC_OFFSET
            ),
        );
    }
    match error {
        DecodeError::UnsupportedVersion(v) => problem(
            "unsupported batch version (written by a newer kappa?)".into(),
            format!("version {} or 2 (compressed)", batch::VERSION),
            format!("version {v} at byte {}", pos + batch::VERSION_OFFSET),
        ),
        _ if rest[batch::MAGIC_OFFSET] != batch::MAGIC => problem(
            "bad magic byte".into(),
            format!("{:#04x}", batch::MAGIC),
            format!(
                "{:#04x} at byte {}",
                rest[batch::MAGIC_OFFSET],
                pos + batch::MAGIC_OFFSET
            ),
        ),
        other => problem(
            "malformed batch".into(),
            "a well-formed batch (log/FORMAT.md §2.6)".into(),
            other.to_string(),
        ),
    }
}
