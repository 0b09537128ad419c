//! Checks a segment's `.index` and `.timeindex` (log/FORMAT.md §3) against
//! the batches a [`walk`](super::walk) found. The indexes are loaded with
//! kappa-log's `OffsetIndex::load` / `TimeIndex::load` (read-only maps).
//!
//! Stricter than the log's own structural check (`is_valid_for`): every
//! offset entry must point at the start of a batch with exactly that base
//! offset, and every time entry must name a batch's relative offset and
//! hold the segment's running maximum timestamp up to that batch; the last
//! time entry must hold the segment's maximum.

use std::path::Path;

use kappa_log::index::{OffsetIndex, TimeIndex, OFFSET_ENTRY_LEN, TIME_ENTRY_LEN};

use super::walk::SegmentWalk;
use super::Problem;

/// Entry counts of a segment's index files (`None`: file missing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct IndexCounts {
    /// Entries in `.index`.
    pub offset_entries: Option<usize>,
    /// Entries in `.timeindex`.
    pub time_entries: Option<usize>,
}

/// Counts the entries of both index files.
pub fn counts(index: &Path, time_index: &Path) -> anyhow::Result<IndexCounts> {
    Ok(IndexCounts {
        offset_entries: OffsetIndex::load(index)?.map(|i| i.len()),
        time_entries: TimeIndex::load(time_index)?.map(|i| i.len()),
    })
}

fn entry_problem(path: &Path, i: usize, entry_len: usize, base: Option<u64>) -> Problem {
    Problem {
        path: path.to_owned(),
        position: (i * entry_len) as u64,
        batch_base_offset: base,
        entry: Some(i),
        what: String::new(),
        expected: String::new(),
        found: String::new(),
    }
}

/// Checks the offset index at `path` (if it exists) against `walk`. Entries
/// at or past the walk's first bad batch are not checked.
pub fn check_offset_index(path: &Path, walk: &SegmentWalk) -> anyhow::Result<Option<Problem>> {
    let Some(index) = OffsetIndex::load(path)? else {
        return Ok(None);
    };
    let file_len = std::fs::metadata(path)?.len();
    if !file_len.is_multiple_of(OFFSET_ENTRY_LEN as u64) {
        let mut p = entry_problem(path, index.len(), OFFSET_ENTRY_LEN, None);
        p.what = "index file is not whole entries".into();
        p.expected = format!("a multiple of {OFFSET_ENTRY_LEN} bytes");
        p.found = format!("{file_len} bytes");
        return Ok(Some(p));
    }
    if index.is_empty() && !walk.batches.is_empty() {
        let mut p = entry_problem(path, 0, OFFSET_ENTRY_LEN, Some(walk.base_offset));
        p.what = "offset index is empty".into();
        p.expected = "a first entry at byte 0 for a segment with batches".into();
        p.found = "an empty file".into();
        return Ok(Some(p));
    }
    let checked_end = walk.valid_bytes();
    let mut prev: Option<(u32, u32)> = None;
    for i in 0..index.len() {
        let (rel, pos) = index.entry(i);
        let wanted = walk.base_offset + u64::from(rel);
        let mut p = entry_problem(path, i, OFFSET_ENTRY_LEN, Some(wanted));
        p.what = "offset index entry points to the wrong place".into();
        let first_rel = walk
            .batches
            .first()
            .map_or(0, |b| (b.base_offset - walk.base_offset) as u32);
        if i == 0 && (rel, pos) != (first_rel, 0) {
            p.what = "first offset index entry is not the first batch's".into();
            p.expected = format!("relative offset {first_rel} at byte 0");
            p.found = format!("relative offset {rel} at byte {pos}");
            return Ok(Some(p));
        }
        if let Some((prel, ppos)) = prev {
            if rel <= prel || pos <= ppos {
                p.what = "offset index entries do not strictly increase".into();
                p.expected = format!("relative offset > {prel} and byte > {ppos}");
                p.found = format!("relative offset {rel} at byte {pos}");
                return Ok(Some(p));
            }
        }
        prev = Some((rel, pos));
        if u64::from(pos) >= checked_end && walk.problem.is_some() {
            break; // Beyond the first bad batch: reported by the walk.
        }
        let at = walk
            .batches
            .binary_search_by_key(&u64::from(pos), |b| b.position);
        match at {
            Ok(b) if walk.batches[b].base_offset == wanted => {}
            Ok(b) => {
                p.expected = format!(
                    "the batch at byte {pos} of {} to have base offset {wanted}",
                    walk.path.display()
                );
                p.found = format!("base offset {}", walk.batches[b].base_offset);
                return Ok(Some(p));
            }
            Err(_) => {
                p.expected = format!(
                    "a batch with base offset {wanted} starting at byte {pos} of {}",
                    walk.path.display()
                );
                p.found = match walk.batches.iter().find(|b| b.base_offset == wanted) {
                    Some(b) => format!(
                        "no batch starts at byte {pos} (base offset {wanted} starts at byte {})",
                        b.position
                    ),
                    None => format!(
                        "no batch starts at byte {pos}, and no batch has base offset {wanted}"
                    ),
                };
                return Ok(Some(p));
            }
        }
    }
    Ok(None)
}

/// Checks the time index at `path` (if it exists) against `walk`.
pub fn check_time_index(path: &Path, walk: &SegmentWalk) -> anyhow::Result<Option<Problem>> {
    let Some(index) = TimeIndex::load(path)? else {
        return Ok(None);
    };
    let file_len = std::fs::metadata(path)?.len();
    if !file_len.is_multiple_of(TIME_ENTRY_LEN as u64) {
        let mut p = entry_problem(path, index.len(), TIME_ENTRY_LEN, None);
        p.what = "time index file is not whole entries".into();
        p.expected = format!("a multiple of {TIME_ENTRY_LEN} bytes");
        p.found = format!("{file_len} bytes");
        return Ok(Some(p));
    }
    // Running maximum timestamp up to and including each batch.
    let mut running = Vec::with_capacity(walk.batches.len());
    let mut max = i64::MIN;
    for b in &walk.batches {
        max = max.max(b.max_timestamp);
        running.push(max);
    }
    let mut prev: Option<(i64, u32)> = None;
    for i in 0..index.len() {
        let (ts, rel) = index.entry(i);
        let wanted = walk.base_offset + u64::from(rel);
        let mut p = entry_problem(path, i, TIME_ENTRY_LEN, Some(wanted));
        if let Some((pts, prel)) = prev {
            if ts <= pts || rel <= prel {
                p.what = "time index entries do not strictly increase".into();
                p.expected = format!("timestamp > {pts} and relative offset > {prel}");
                p.found = format!("timestamp {ts}, relative offset {rel}");
                return Ok(Some(p));
            }
        }
        prev = Some((ts, rel));
        match walk
            .batches
            .binary_search_by_key(&wanted, |b| b.base_offset)
        {
            Ok(b) if running[b] == ts => {}
            Ok(b) => {
                p.what = "time index entry has the wrong timestamp".into();
                p.expected = format!(
                    "{} (the largest timestamp up to the batch at offset {wanted})",
                    running[b]
                );
                p.found = format!("{ts}");
                return Ok(Some(p));
            }
            Err(_) if walk.problem.is_some() && wanted >= walk.next_offset => break,
            Err(_) => {
                p.what = "time index entry names no batch".into();
                p.expected = format!("a batch with base offset {wanted} (relative {rel})");
                p.found = "no batch starts at that offset".into();
                return Ok(Some(p));
            }
        }
    }
    if walk.problem.is_none() {
        if let (Some(&max), Some((ts, _))) = (running.last(), index.last()) {
            if ts != max {
                let mut p = entry_problem(path, index.len() - 1, TIME_ENTRY_LEN, None);
                p.what = "last time index entry is not the segment's maximum".into();
                p.expected = format!("timestamp {max}");
                p.found = format!("{ts}");
                return Ok(Some(p));
            }
        }
    }
    Ok(None)
}
