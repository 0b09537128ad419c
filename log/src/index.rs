//! The sparse offset index and the time index of a segment.
//!
//! Both are arrays of fixed-size little-endian entries, held in memory while
//! their segment is active and written to `.index` / `.timeindex` when it is
//! sealed, then memory-mapped. They are derived data: a missing or damaged
//! file is rebuilt from the segment (see `segment::scan`).
//!
//! * Offset index entry (8 bytes): `relative_offset u32`, `position u32` —
//!   a batch starting at `base + relative_offset` begins at byte `position`.
//!   Both strictly increase.
//! * Time index entry (12 bytes): `timestamp i64`, `relative_offset u32` —
//!   `timestamp` is the largest record timestamp of the segment up to and
//!   including the batch at `relative_offset`. Both strictly increase; so no
//!   batch before `relative_offset` has a record at or after `timestamp`.

use std::fs::File;
use std::path::Path;

use memmap2::Mmap;

use crate::error::{LogError, Result};

/// Bytes of one offset index entry.
pub const OFFSET_ENTRY_LEN: usize = 8;
/// Bytes of one time index entry.
pub const TIME_ENTRY_LEN: usize = 12;

/// Entry bytes, in memory (active segment) or mapped (sealed segment).
#[derive(Debug)]
enum Storage {
    Memory(Vec<u8>),
    Mapped(Mmap),
}

impl Storage {
    fn bytes(&self) -> &[u8] {
        match self {
            Storage::Memory(v) => v,
            Storage::Mapped(m) => m,
        }
    }

    /// Maps `path`; `Ok(None)` when the file does not exist.
    fn map(path: &Path) -> Result<Option<Storage>> {
        let file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(LogError::io(path, e)),
        };
        let len = file.metadata().map_err(|e| LogError::io(path, e))?.len();
        if len == 0 {
            return Ok(Some(Storage::Memory(Vec::new())));
        }
        // SAFETY: index files of sealed segments are never modified in place:
        // they are written whole (temporary file + rename) and only deleted.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| LogError::io(path, e))?;
        Ok(Some(Storage::Mapped(map)))
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

/// The sparse offset -> position index.
#[derive(Debug)]
pub struct OffsetIndex {
    storage: Storage,
}

impl Default for OffsetIndex {
    fn default() -> Self {
        OffsetIndex {
            storage: Storage::Memory(Vec::new()),
        }
    }
}

impl OffsetIndex {
    /// Maps an index file; `None` if it is missing.
    pub fn load(path: &Path) -> Result<Option<OffsetIndex>> {
        Ok(Storage::map(path)?.map(|storage| OffsetIndex { storage }))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.storage.bytes().len() / OFFSET_ENTRY_LEN
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`: (relative offset, position).
    pub fn entry(&self, i: usize) -> (u32, u32) {
        let b = self.storage.bytes();
        let at = i * OFFSET_ENTRY_LEN;
        (u32_at(b, at), u32_at(b, at + 4))
    }

    /// Appends an entry (active segments only).
    pub fn push(&mut self, relative_offset: u32, position: u32) {
        match &mut self.storage {
            Storage::Memory(v) => {
                v.extend_from_slice(&relative_offset.to_le_bytes());
                v.extend_from_slice(&position.to_le_bytes());
            }
            Storage::Mapped(_) => panic!("a mapped index is read-only"),
        }
    }

    /// The last entry whose relative offset is at most `relative_offset`.
    pub fn floor(&self, relative_offset: u32) -> Option<(u32, u32)> {
        let idx = partition_point(self.len(), |i| self.entry(i).0 <= relative_offset);
        (idx > 0).then(|| self.entry(idx - 1))
    }

    /// True if the file is well formed for a log of `log_len` bytes: whole
    /// entries, both fields strictly increasing, positions inside the log.
    pub fn is_valid_for(&self, log_len: u64) -> bool {
        if !self.storage.bytes().len().is_multiple_of(OFFSET_ENTRY_LEN) {
            return false;
        }
        let mut prev: Option<(u32, u32)> = None;
        for i in 0..self.len() {
            let (rel, pos) = self.entry(i);
            if u64::from(pos) >= log_len.max(1) {
                return false;
            }
            if let Some((prel, ppos)) = prev {
                if rel <= prel || pos <= ppos {
                    return false;
                }
            } else if pos != 0 {
                // The first batch starts the file; a compacted segment's
                // first batch may come after its base offset.
                return false;
            }
            prev = Some((rel, pos));
        }
        true
    }

    /// The raw entry bytes, to write to a file.
    pub fn as_bytes(&self) -> &[u8] {
        self.storage.bytes()
    }
}

/// The sparse timestamp -> offset index.
#[derive(Debug)]
pub struct TimeIndex {
    storage: Storage,
}

impl Default for TimeIndex {
    fn default() -> Self {
        TimeIndex {
            storage: Storage::Memory(Vec::new()),
        }
    }
}

impl TimeIndex {
    /// Maps a time index file; `None` if it is missing.
    pub fn load(path: &Path) -> Result<Option<TimeIndex>> {
        Ok(Storage::map(path)?.map(|storage| TimeIndex { storage }))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.storage.bytes().len() / TIME_ENTRY_LEN
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`: (timestamp, relative offset).
    pub fn entry(&self, i: usize) -> (i64, u32) {
        let b = self.storage.bytes();
        let at = i * TIME_ENTRY_LEN;
        let ts = i64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        (ts, u32_at(b, at + 8))
    }

    /// The last entry, which holds the segment's largest timestamp once the
    /// segment is sealed.
    pub fn last(&self) -> Option<(i64, u32)> {
        (!self.is_empty()).then(|| self.entry(self.len() - 1))
    }

    /// Appends an entry (active segments only).
    pub fn push(&mut self, timestamp: i64, relative_offset: u32) {
        match &mut self.storage {
            Storage::Memory(v) => {
                v.extend_from_slice(&timestamp.to_le_bytes());
                v.extend_from_slice(&relative_offset.to_le_bytes());
            }
            Storage::Mapped(_) => panic!("a mapped index is read-only"),
        }
    }

    /// The last entry whose timestamp is below `timestamp`: no batch before
    /// its offset holds a record at or after `timestamp`.
    pub fn last_before(&self, timestamp: i64) -> Option<(i64, u32)> {
        let idx = partition_point(self.len(), |i| self.entry(i).0 < timestamp);
        (idx > 0).then(|| self.entry(idx - 1))
    }

    /// True if well formed: whole entries, both fields strictly increasing,
    /// offsets below `relative_end`.
    pub fn is_valid_for(&self, relative_end: u64) -> bool {
        if !self.storage.bytes().len().is_multiple_of(TIME_ENTRY_LEN) {
            return false;
        }
        let mut prev: Option<(i64, u32)> = None;
        for i in 0..self.len() {
            let (ts, rel) = self.entry(i);
            if u64::from(rel) >= relative_end.max(1) {
                return false;
            }
            if let Some((pts, prel)) = prev {
                if ts <= pts || rel <= prel {
                    return false;
                }
            }
            prev = Some((ts, rel));
        }
        true
    }

    /// The raw entry bytes, to write to a file.
    pub fn as_bytes(&self) -> &[u8] {
        self.storage.bytes()
    }
}

/// First `i` in `0..len` for which `pred(i)` is false (`pred` must be true
/// for a prefix and false after it).
fn partition_point(len: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, len);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_finds_the_last_entry_at_or_before() {
        let mut idx = OffsetIndex::default();
        idx.push(0, 0);
        idx.push(10, 4096);
        idx.push(25, 9000);
        assert_eq!(idx.floor(0), Some((0, 0)));
        assert_eq!(idx.floor(9), Some((0, 0)));
        assert_eq!(idx.floor(10), Some((10, 4096)));
        assert_eq!(idx.floor(1000), Some((25, 9000)));
        assert!(idx.is_valid_for(9001));
        assert!(!idx.is_valid_for(9000));
    }

    #[test]
    fn last_before_is_strictly_below() {
        let mut idx = TimeIndex::default();
        idx.push(100, 0);
        idx.push(200, 5);
        assert_eq!(idx.last_before(100), None);
        assert_eq!(idx.last_before(101), Some((100, 0)));
        assert_eq!(idx.last_before(200), Some((100, 0)));
        assert_eq!(idx.last_before(201), Some((200, 5)));
        assert_eq!(idx.last(), Some((200, 5)));
        assert!(idx.is_valid_for(6));
        assert!(!idx.is_valid_for(5));
    }

    #[test]
    fn damaged_files_are_invalid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.index");
        std::fs::write(&path, [0u8; 7]).unwrap();
        assert!(!OffsetIndex::load(&path).unwrap().unwrap().is_valid_for(100));
        let mut bytes = Vec::new();
        for (rel, pos) in [(0u32, 0u32), (5, 100), (3, 200)] {
            bytes.extend_from_slice(&rel.to_le_bytes());
            bytes.extend_from_slice(&pos.to_le_bytes());
        }
        std::fs::write(&path, &bytes).unwrap();
        assert!(!OffsetIndex::load(&path)
            .unwrap()
            .unwrap()
            .is_valid_for(1000));
        assert!(OffsetIndex::load(&dir.path().join("missing"))
            .unwrap()
            .is_none());
    }
}
