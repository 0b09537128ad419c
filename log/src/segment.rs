//! One segment: a `.log` file of batches plus its two sparse indexes.
//!
//! A segment is *active* (the partition's last; its writer appends, readers
//! `pread` up to the published length, indexes live in memory) or *sealed*
//! (immutable; log and indexes memory-mapped on demand through the
//! [`SegmentCache`](crate::cache::SegmentCache), records handed out as
//! zero-copy `Bytes`). Invariant: readers never see bytes beyond
//! `readable_bytes`, which the writer publishes only after its fsync policy
//! is met, and every byte they see passed the batch CRC.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use bytes::Bytes;
use memmap2::Mmap;

use crate::batch::{self, BatchView, DecodeError, ReadBatch};
use crate::error::{LogError, Result};
use crate::idempotency::StoredKey;
use crate::index::{OffsetIndex, TimeIndex};
use crate::tiered::{RemotePlace, RemoteSegment, RemoteSource};

/// The three file paths of a segment.
#[derive(Debug, Clone)]
pub struct SegmentPaths {
    /// `<base:020>.log`
    pub log: PathBuf,
    /// `<base:020>.index`
    pub index: PathBuf,
    /// `<base:020>.timeindex`
    pub time_index: PathBuf,
}

impl SegmentPaths {
    /// Paths of the segment with `base_offset` in `dir`.
    pub fn new(dir: &Path, base_offset: u64) -> Self {
        let stem = format!("{base_offset:020}");
        SegmentPaths {
            log: dir.join(format!("{stem}.log")),
            index: dir.join(format!("{stem}.index")),
            time_index: dir.join(format!("{stem}.timeindex")),
        }
    }
}

/// The indexes of a segment.
#[derive(Debug, Default)]
pub struct Indexes {
    /// Offset -> position.
    pub offsets: OffsetIndex,
    /// Timestamp -> offset.
    pub times: TimeIndex,
}

/// What a sequential scan of a segment's bytes found.
#[derive(Debug, Default)]
pub struct ScanResult {
    /// Bytes of valid, complete batches from the start.
    pub valid_bytes: u64,
    /// Offset after the last valid batch.
    pub next_offset: u64,
    /// Indexes rebuilt over the valid batches.
    pub indexes: Indexes,
    /// Largest record timestamp (`i64::MIN` if empty).
    pub max_timestamp: i64,
    /// Append time of the first batch.
    pub first_append_time: Option<i64>,
    /// Largest append time (`i64::MIN` if empty).
    pub max_append_time: i64,
    /// Where and why the scan stopped early, if it did: a bad stretch with
    /// no valid batch after it (a torn tail, in the active segment).
    pub problem: Option<(u64, DecodeError)>,
    /// Damaged stretches with valid batches after them, in file order. The
    /// scan resumed at the next valid batch after each.
    pub damaged: Vec<Damage>,
    /// (idempotency key, base offset, record count, append time) of each
    /// keyed batch, in order.
    pub keys: Vec<StoredKey>,
    /// The index builder, ready to continue after the last valid batch.
    pub builder: Option<IndexBuilder>,
}

/// Builds the sparse indexes as batches are appended or scanned.
#[derive(Debug)]
pub struct IndexBuilder {
    base_offset: u64,
    interval_bytes: u64,
    bytes_since_offset_entry: Option<u64>,
    bytes_since_time_entry: Option<u64>,
    /// Largest record timestamp so far.
    pub max_timestamp: i64,
    last_time_entry: Option<(i64, u32)>,
    last_batch_rel: u32,
}

impl IndexBuilder {
    /// A builder for a segment starting at `base_offset`.
    pub fn new(base_offset: u64, interval_bytes: u64) -> Self {
        IndexBuilder {
            base_offset,
            interval_bytes,
            bytes_since_offset_entry: None,
            bytes_since_time_entry: None,
            max_timestamp: i64::MIN,
            last_time_entry: None,
            last_batch_rel: 0,
        }
    }

    /// Records a batch at `position`; adds index entries when due.
    pub fn add(
        &mut self,
        indexes: &mut Indexes,
        position: u64,
        base_offset: u64,
        len: u64,
        max_ts: i64,
    ) {
        let rel = (base_offset - self.base_offset) as u32;
        self.last_batch_rel = rel;
        if self
            .bytes_since_offset_entry
            .is_none_or(|b| b >= self.interval_bytes)
        {
            indexes.offsets.push(rel, position as u32);
            self.bytes_since_offset_entry = Some(0);
        }
        if max_ts > self.max_timestamp {
            self.max_timestamp = max_ts;
            if self
                .bytes_since_time_entry
                .is_none_or(|b| b >= self.interval_bytes)
            {
                indexes.times.push(max_ts, rel);
                self.last_time_entry = Some((max_ts, rel));
                self.bytes_since_time_entry = Some(0);
            }
        }
        *self.bytes_since_offset_entry.as_mut().expect("set above") += len;
        if let Some(b) = self.bytes_since_time_entry.as_mut() {
            *b += len;
        }
    }

    /// Makes the next batch added get an offset index entry of its own
    /// (after a damaged stretch, so no lookup past it starts before it).
    pub fn start_new_entry(&mut self) {
        self.bytes_since_offset_entry = None;
    }

    /// Adds the final time entry so the last one holds the segment maximum.
    pub fn finish(&mut self, indexes: &mut Indexes) {
        let last_batch_rel = self.last_batch_rel;
        if let Some((ts, rel)) = self.last_time_entry {
            if ts < self.max_timestamp && rel < last_batch_rel {
                indexes.times.push(self.max_timestamp, last_batch_rel);
                self.last_time_entry = Some((self.max_timestamp, last_batch_rel));
            }
        }
    }
}

/// A damaged stretch of a segment's log: bytes that are not valid batches,
/// followed by a valid batch. The offsets `[first_offset, next_offset)` it
/// held cannot be read (and are never handed out again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// Byte position where the damage starts.
    pub position: u64,
    /// Byte position of the next valid batch.
    pub next_position: u64,
    /// The first offset the damaged bytes held.
    pub first_offset: u64,
    /// The base offset of the next valid batch.
    pub next_offset: u64,
    /// What was wrong with the first damaged batch.
    pub reason: String,
}

/// Scans `bytes` (a segment's log starting at `base_offset`) batch by
/// batch, validating each, and rebuilds its indexes. A bad batch followed
/// by valid ones is recorded in `damaged` and skipped (the scan resumes at
/// the next valid batch, which gets an index entry of its own so reads
/// after the damage never start before it); the scan stops at a bad stretch
/// with nothing valid after it (`problem`), or at a batch of a newer format
/// version, which is never skipped.
pub fn scan(bytes: &Bytes, base_offset: u64, interval_bytes: u64) -> ScanResult {
    let mut result = ScanResult {
        next_offset: base_offset,
        max_timestamp: i64::MIN,
        max_append_time: i64::MIN,
        ..Default::default()
    };
    let mut builder = IndexBuilder::new(base_offset, interval_bytes);
    let mut pos = 0usize;
    while pos < bytes.len() {
        let problem = match BatchView::parse(&bytes.slice(pos..)) {
            Ok(view)
                if batch::follows(view.base_offset(), view.is_compacted(), result.next_offset) =>
            {
                let len = view.len() as u64;
                builder.add(
                    &mut result.indexes,
                    pos as u64,
                    view.base_offset(),
                    len,
                    view.max_timestamp(),
                );
                result.first_append_time.get_or_insert(view.append_time());
                result.max_append_time = result.max_append_time.max(view.append_time());
                result.keys.extend(StoredKey::of(&view));
                result.next_offset = view.next_offset();
                pos += view.len();
                continue;
            }
            Ok(view) => DecodeError::Invalid(format!(
                "batch base offset {} where {} was expected",
                view.base_offset(),
                result.next_offset
            )),
            Err(e) => e,
        };
        let resume = match problem {
            DecodeError::UnsupportedVersion(_) => None,
            _ => next_valid_batch(bytes, pos + 1, result.next_offset)
                .or_else(|| whole_damaged_batch(bytes, pos, result.next_offset)),
        };
        let Some((next_position, next_offset)) = resume else {
            result.problem = Some((pos as u64, problem));
            break;
        };
        result.damaged.push(Damage {
            position: pos as u64,
            next_position: next_position as u64,
            first_offset: result.next_offset,
            next_offset,
            reason: problem.to_string(),
        });
        builder.start_new_entry();
        result.next_offset = next_offset;
        pos = next_position;
    }
    result.valid_bytes = pos as u64;
    result.max_timestamp = builder.max_timestamp;
    result.builder = Some(builder);
    result
}

/// A last batch that fails its CRC but whose header is that of the batch
/// expected here (current format, the expected base offset, a length that
/// ends exactly at the end of the file, a plausible record count): a
/// written batch damaged afterwards rather than a torn write, so its
/// offsets stay reserved. Returns (end of file, offset after the batch).
fn whole_damaged_batch(bytes: &Bytes, pos: usize, expected: u64) -> Option<(usize, u64)> {
    let header = bytes.get(pos..pos + batch::HEADER_LEN)?;
    let len = batch::u32_at(header, batch::LENGTH_OFFSET) as usize;
    let count = u64::from(batch::u32_at(header, batch::RECORD_COUNT_OFFSET));
    // Each record takes at least its fixed fields: in the batch, or in a
    // compressed batch's records before compression (the length it
    // declares after the key).
    let records_bytes = match header[batch::VERSION_OFFSET] {
        batch::VERSION => len.saturating_sub(batch::HEADER_LEN),
        _ => {
            let at =
                pos + batch::HEADER_LEN + batch::u16_at(header, batch::KEY_LEN_OFFSET) as usize;
            bytes
                .get(at..at + 4)
                .map_or(0, |b| batch::u32_at(b, 0) as usize)
        }
    };
    let most_records = (records_bytes / batch::RECORD_OVERHEAD) as u64;
    let plausible = header[batch::MAGIC_OFFSET] == batch::MAGIC
        && batch::is_known_version(header[batch::VERSION_OFFSET])
        && batch::u64_at(header, batch::BASE_OFFSET_OFFSET) == expected
        && pos + len == bytes.len()
        && count >= 1
        && count <= most_records;
    plausible.then_some((bytes.len(), expected + count))
}

/// The position and base offset of the first whole, valid batch of the
/// current format in `bytes` at or after `from` whose base offset is at
/// least `min_offset` (offsets only grow along a segment).
pub fn next_valid_batch(bytes: &Bytes, from: usize, min_offset: u64) -> Option<(usize, u64)> {
    let last = bytes.len().checked_sub(batch::HEADER_LEN)?;
    (from..=last).find_map(|p| {
        if bytes[p + batch::MAGIC_OFFSET] != batch::MAGIC
            || !batch::is_known_version(bytes[p + batch::VERSION_OFFSET])
        {
            return None;
        }
        let view = BatchView::parse(&bytes.slice(p..)).ok()?;
        (view.base_offset() >= min_offset).then_some((p, view.base_offset()))
    })
}

/// Idempotency keys found by [`scan_keys`].
#[derive(Debug, Default)]
pub struct KeyScan {
    /// (key, base offset, record count, append time) of each keyed batch.
    pub keys: Vec<StoredKey>,
    /// Append time of the last batch walked (`i64::MIN` if none).
    pub last_append_time: i64,
    /// Where and why the walk stopped early, if it did.
    pub problem: Option<(u64, DecodeError)>,
}

/// Collects a segment's idempotency keys cheaply: walks the batch headers
/// (length, magic, version, offset sequence) and fully validates — CRC
/// included — only the batches that carry a key. Costs one header read per
/// batch instead of a pass over every byte.
pub fn scan_keys(bytes: &Bytes, base_offset: u64) -> KeyScan {
    let mut out = KeyScan {
        last_append_time: i64::MIN,
        ..Default::default()
    };
    let (mut pos, mut expected) = (0usize, base_offset);
    while pos < bytes.len() {
        let header = &bytes[pos..];
        let step = batch::peek_len(header).and_then(|len| {
            if len > header.len() {
                return Err(DecodeError::Incomplete {
                    needed: len,
                    available: header.len(),
                });
            }
            let h = &header[..batch::HEADER_LEN];
            if h[batch::MAGIC_OFFSET] != batch::MAGIC
                || !batch::is_known_version(h[batch::VERSION_OFFSET])
            {
                return Err(DecodeError::Invalid("bad magic or version".into()));
            }
            let found = batch::u64_at(h, batch::BASE_OFFSET_OFFSET);
            let compacted = batch::u16_at(h, batch::ATTRIBUTES_OFFSET) & batch::COMPACTED != 0;
            if !batch::follows(found, compacted, expected) {
                let reason = format!("batch base offset {found} where {expected} was expected");
                return Err(DecodeError::Invalid(reason));
            }
            let count = batch::u32_at(h, batch::RECORD_COUNT_OFFSET);
            let append_time = batch::u64_at(h, batch::APPEND_TIME_OFFSET) as i64;
            if batch::u16_at(h, batch::KEY_LEN_OFFSET) > 0 {
                let view = BatchView::parse(&bytes.slice(pos..pos + len))?;
                out.keys.extend(StoredKey::of(&view));
            }
            Ok((len, found + u64::from(count), append_time))
        });
        match step {
            Ok((len, next, append_time)) => {
                pos += len;
                expected = next;
                out.last_append_time = append_time;
            }
            Err(e) => {
                out.problem = Some((pos as u64, e));
                break;
            }
        }
    }
    out
}

/// Maps a whole file read-only as `Bytes` (empty files give empty `Bytes`).
pub fn map_file(path: &Path) -> Result<Bytes> {
    let file = File::open(path).map_err(|e| LogError::io(path, e))?;
    let len = file.metadata().map_err(|e| LogError::io(path, e))?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: callers map a sealed segment (never written again once
    // sealed, FORMAT.md §6.4) or, in recovery, the active segment before its
    // writer starts; recovery drops that mapping before it truncates a torn
    // tail (`recovery::recover_active`). While the writer runs, the active
    // segment is mapped only by `ActiveFiles::map`, never here. No file is
    // truncated or rewritten in place while a mapping made here is alive;
    // retention and topic deletion unlink files, which leaves mappings valid.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| LogError::io(path, e))?;
    Ok(Bytes::from_owner(map))
}

/// The open files of a sealed segment.
#[derive(Debug)]
pub struct SealedFiles {
    /// The whole `.log`, mapped.
    pub log: Bytes,
    /// Both indexes, mapped (or rebuilt in memory).
    pub indexes: Indexes,
}

/// The reading side of the active segment.
#[derive(Debug)]
pub struct ActiveFiles {
    /// A read handle for `pread` (and for mapping).
    pub file: File,
    /// In-memory indexes, appended by the writer.
    pub indexes: RwLock<Indexes>,
    /// The file's first bytes, mapped when a large read came (all of them
    /// published then); mapped again, longer, when a large read needs more.
    /// Empty until the first large read; kept until the segment seals (not
    /// counted in `max_mapped_bytes`: at most one segment per partition,
    /// and its pages are the page cache's).
    mapped: RwLock<Bytes>,
}

/// Reads of the active segment at least this long are served from a
/// mapping of the file (no copy); shorter ones (a consumer following the
/// tail) use `pread`, which costs less than mapping again.
const MAP_ACTIVE_MIN: u64 = 1 << 20;

impl ActiveFiles {
    /// The reading side of an active segment file, read through `file`.
    pub fn new(file: File, indexes: Indexes) -> Self {
        ActiveFiles {
            file,
            indexes: RwLock::new(indexes),
            mapped: RwLock::new(Bytes::new()),
        }
    }

    /// Bytes `[position, end)` from the mapping, if it covers them.
    fn mapped(&self, position: u64, end: u64) -> Option<Bytes> {
        let mapped = self.mapped.read().expect("active mapping");
        (end <= mapped.len() as u64).then(|| mapped.slice(position as usize..end as usize))
    }

    /// Maps the file's first `readable` bytes (published ones), replacing
    /// the mapping; returns `[position, end)` of it.
    fn map(&self, path: &Path, readable: u64, position: u64, end: u64) -> Result<Bytes> {
        let mut mapped = self.mapped.write().expect("active mapping");
        if (mapped.len() as u64) < readable {
            // SAFETY: the first `readable` bytes are published: written and
            // never truncated (the writer only cuts back an unpublished
            // failed write, recovery runs before any reader), so every
            // mapped page stays backed by the file while it is mapped.
            let map = unsafe {
                memmap2::MmapOptions::new()
                    .len(readable as usize)
                    .map(&self.file)
            }
            .map_err(|e| LogError::io(path, e))?;
            *mapped = Bytes::from_owner(map);
        }
        Ok(mapped.slice(position as usize..end as usize))
    }
}

/// How a segment is read now.
#[derive(Debug)]
enum State {
    Active(Arc<ActiveFiles>),
    /// Sealed; files open if `Some` (the cache closes them).
    Sealed(Option<Arc<SealedFiles>>),
}

/// A segment as the partition's readers and writer share it.
#[derive(Debug)]
pub struct Segment {
    /// Offset of its first record.
    pub base_offset: u64,
    /// Its files.
    pub paths: SegmentPaths,
    readable_bytes: AtomicU64,
    end_offset: AtomicU64,
    /// Largest record timestamp, `i64::MIN` when empty or not yet known.
    max_timestamp: AtomicI64,
    /// Largest append time, `i64::MIN` when empty or not yet known.
    max_append_time: AtomicI64,
    state: Mutex<State>,
    /// LRU tick of the last use (for the cache).
    pub last_used: AtomicU64,
    /// Set when retention, compaction, tiering or topic deletion removed it.
    pub deleted: AtomicBool,
    interval_bytes: u64,
    /// Of a segment in tiered storage (`tiered.rs`): where it is, and how
    /// it comes back to `paths` (the download directory).
    remote: Option<Arc<RemoteSource>>,
}

/// Where a read found the batches.
pub enum Source {
    /// Mapped sealed segment.
    Sealed(Arc<SealedFiles>),
    /// Active segment: `pread`, or a mapping for large reads.
    Active(Arc<ActiveFiles>),
}

impl Segment {
    /// The active segment, with what recovery or creation established.
    pub fn new_active(
        paths: SegmentPaths,
        base_offset: u64,
        files: Arc<ActiveFiles>,
        scanned: &ScanResult,
        interval_bytes: u64,
    ) -> Segment {
        Segment {
            base_offset,
            paths,
            readable_bytes: AtomicU64::new(scanned.valid_bytes),
            end_offset: AtomicU64::new(scanned.next_offset),
            max_timestamp: AtomicI64::new(scanned.max_timestamp),
            max_append_time: AtomicI64::new(scanned.max_append_time),
            state: Mutex::new(State::Active(files)),
            last_used: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
            interval_bytes,
            remote: None,
        }
    }

    /// A sealed segment found at open; its files are opened on first use.
    pub fn new_sealed(
        paths: SegmentPaths,
        base_offset: u64,
        end_offset: u64,
        bytes: u64,
        interval_bytes: u64,
    ) -> Segment {
        Segment {
            base_offset,
            paths,
            readable_bytes: AtomicU64::new(bytes),
            end_offset: AtomicU64::new(end_offset),
            max_timestamp: AtomicI64::new(i64::MIN),
            max_append_time: AtomicI64::new(i64::MIN),
            state: Mutex::new(State::Sealed(None)),
            last_used: AtomicU64::new(0),
            deleted: AtomicBool::new(false),
            interval_bytes,
            remote: None,
        }
    }

    /// A segment in tiered storage, as its partition's `remote.json` lists
    /// it; its files are downloaded on first use.
    pub fn new_remote(place: RemotePlace, entry: &RemoteSegment, interval_bytes: u64) -> Segment {
        let mut segment = Segment::new_sealed(
            place.cache_paths(entry.base_offset),
            entry.base_offset,
            entry.end_offset,
            entry.bytes,
            interval_bytes,
        );
        segment
            .max_timestamp
            .store(entry.max_timestamp, Ordering::Release);
        segment
            .max_append_time
            .store(entry.max_append_time, Ordering::Release);
        segment.remote = Some(Arc::new(RemoteSource::new(place, entry.base_offset)));
        segment
    }

    /// True if the segment is in tiered storage.
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
    }

    /// Where a tiered segment is.
    pub fn remote(&self) -> Option<&Arc<RemoteSource>> {
        self.remote.as_ref()
    }

    /// Bytes readers may read.
    pub fn readable_bytes(&self) -> u64 {
        self.readable_bytes.load(Ordering::Acquire)
    }

    /// Offset after the last readable record.
    pub fn end_offset(&self) -> u64 {
        self.end_offset.load(Ordering::Acquire)
    }

    /// Publishes newly durable data (writer only).
    pub fn publish(
        &self,
        readable_bytes: u64,
        end_offset: u64,
        max_timestamp: i64,
        append_time: i64,
    ) {
        self.max_timestamp
            .fetch_max(max_timestamp, Ordering::AcqRel);
        self.max_append_time
            .fetch_max(append_time, Ordering::AcqRel);
        self.readable_bytes.store(readable_bytes, Ordering::Release);
        self.end_offset.store(end_offset, Ordering::Release);
    }

    /// True while this is the partition's active segment.
    pub fn is_active(&self) -> bool {
        matches!(*self.state.lock().expect("segment state"), State::Active(_))
    }

    /// Turns the active segment into a sealed one (writer only, after its
    /// index files were written).
    pub fn mark_sealed(&self) {
        *self.state.lock().expect("segment state") = State::Sealed(None);
    }

    /// Closes a sealed segment's files (cache eviction); returns the bytes
    /// that were mapped.
    pub fn close_files(&self) -> u64 {
        let mut state = self.state.lock().expect("segment state");
        let closed = match &mut *state {
            State::Sealed(files) => files.take().map_or(0, |f| f.log.len() as u64),
            State::Active(_) => 0,
        };
        drop(state);
        if let Some(remote) = &self.remote {
            remote.evict();
        }
        closed
    }

    /// Current source for reads. For a sealed segment whose files are not
    /// open, returns `None`: the caller opens them through the cache.
    pub fn source(&self) -> Option<Source> {
        match &*self.state.lock().expect("segment state") {
            State::Active(files) => Some(Source::Active(files.clone())),
            State::Sealed(Some(files)) => Some(Source::Sealed(files.clone())),
            State::Sealed(None) => None,
        }
    }

    /// Opens a sealed segment's files: maps the log, loads the indexes and
    /// rebuilds (and rewrites) any that are missing or damaged. Called by the
    /// cache, which accounts for the mapping.
    pub fn open_sealed(&self) -> Result<Arc<SealedFiles>> {
        match &self.remote {
            Some(remote) => remote.with_files(|| self.open_local()),
            None => self.open_local(),
        }
    }

    /// [`Segment::open_sealed`] of files on disk.
    fn open_local(&self) -> Result<Arc<SealedFiles>> {
        let log = map_file(&self.paths.log).map_err(|e| self.deleted_or(e))?;
        let rel_end = self.end_offset() - self.base_offset;
        let offsets =
            OffsetIndex::load(&self.paths.index)?.filter(|i| i.is_valid_for(log.len() as u64));
        let times = TimeIndex::load(&self.paths.time_index)?.filter(|i| i.is_valid_for(rel_end));
        let indexes = match (offsets, times) {
            (Some(offsets), Some(times)) if !offsets.is_empty() || log.is_empty() => {
                Indexes { offsets, times }
            }
            _ => self.rebuild_indexes(&log)?,
        };
        if let Some((ts, _)) = indexes.times.last() {
            self.max_timestamp.fetch_max(ts, Ordering::AcqRel);
        }
        let files = Arc::new(SealedFiles { log, indexes });
        let mut state = self.state.lock().expect("segment state");
        if let State::Sealed(slot) = &mut *state {
            *slot = Some(files.clone());
        }
        Ok(files)
    }

    fn deleted_or(&self, e: LogError) -> LogError {
        if self.deleted.load(Ordering::Acquire) {
            LogError::InvalidArgument(format!(
                "segment {} was deleted by retention while being read",
                self.base_offset
            ))
        } else {
            e
        }
    }

    fn rebuild_indexes(&self, log: &Bytes) -> Result<Indexes> {
        let mut scanned = scan(log, self.base_offset, self.interval_bytes);
        if let Some(builder) = scanned.builder.as_mut() {
            builder.finish(&mut scanned.indexes);
        }
        for damage in &scanned.damaged {
            report_damage(&self.paths.log, damage, "in a sealed segment");
        }
        if let Some((pos, problem)) = &scanned.problem {
            tracing::error!(
                segment = %self.paths.log.display(),
                position = pos,
                %problem,
                "corruption at the end of a sealed segment: indexes cover only the data before it; reads past it fail"
            );
            crate::stats::global()
                .corruptions_detected
                .fetch_add(1, Ordering::Relaxed);
        } else if scanned.damaged.is_empty() {
            tracing::warn!(segment = %self.paths.log.display(), "rebuilt missing or damaged index files");
            crate::io::write_atomic(&self.paths.index, scanned.indexes.offsets.as_bytes())?;
            crate::io::write_atomic(&self.paths.time_index, scanned.indexes.times.as_bytes())?;
        }
        self.max_append_time
            .fetch_max(scanned.max_append_time, Ordering::AcqRel);
        Ok(scanned.indexes)
    }

    /// Largest record timestamp, if known (sealed segments learn it when
    /// their indexes are opened).
    pub fn max_timestamp(&self) -> Option<i64> {
        let ts = self.max_timestamp.load(Ordering::Acquire);
        (ts != i64::MIN).then_some(ts)
    }

    /// Largest append time, if known.
    pub fn known_max_append_time(&self) -> Option<i64> {
        let t = self.max_append_time.load(Ordering::Acquire);
        (t != i64::MIN).then_some(t)
    }

    /// Records the largest append time learned elsewhere (retention scan).
    pub fn set_max_append_time(&self, t: i64) {
        self.max_append_time.fetch_max(t, Ordering::AcqRel);
    }
}

impl Source {
    /// The index entry to start a scan for `offset` from: (offset, position).
    pub fn floor(&self, base_offset: u64, offset: u64) -> (u64, u64) {
        let rel = (offset - base_offset) as u32;
        let entry = match self {
            Source::Sealed(f) => f.indexes.offsets.floor(rel),
            Source::Active(f) => f.indexes.read().expect("indexes").offsets.floor(rel),
        };
        entry.map_or((base_offset, 0), |(r, p)| {
            (base_offset + u64::from(r), u64::from(p))
        })
    }

    /// The time index entry for a timestamp lookup: (offset, timestamp) of
    /// the last entry below `timestamp`.
    pub fn time_floor(&self, base_offset: u64, timestamp: i64) -> Option<u64> {
        let entry = match self {
            Source::Sealed(f) => f.indexes.times.last_before(timestamp),
            Source::Active(f) => f
                .indexes
                .read()
                .expect("indexes")
                .times
                .last_before(timestamp),
        };
        entry.map(|(_, rel)| base_offset + u64::from(rel))
    }

    /// Bytes `[position, position + len)` of the log, a range within the
    /// segment's first `readable` (published) bytes.
    pub fn read(&self, path: &Path, position: u64, len: u64, readable: u64) -> Result<Bytes> {
        match self {
            Source::Sealed(f) => {
                let end = (position + len).min(f.log.len() as u64);
                Ok(f.log.slice(position as usize..end as usize))
            }
            Source::Active(f) => {
                let end = position + len;
                if let Some(bytes) = f.mapped(position, end) {
                    return Ok(bytes);
                }
                if len >= MAP_ACTIVE_MIN && end <= readable {
                    return f.map(path, readable, position, end);
                }
                let mut buf = vec![0u8; len as usize];
                f.file
                    .read_exact_at(&mut buf, position)
                    .map_err(|e| LogError::io(path, e))?;
                Ok(Bytes::from(buf))
            }
        }
    }
}

/// Batches read from one segment.
#[derive(Debug)]
pub struct SegmentRead<B = BatchView> {
    /// Checked batches (whole or by their frame, as `B` is), in order; the
    /// first contains the requested offset.
    pub batches: Vec<B>,
    /// Bytes in `batches`.
    pub bytes: u64,
}

impl<B> Default for SegmentRead<B> {
    fn default() -> Self {
        SegmentRead {
            batches: Vec::new(),
            bytes: 0,
        }
    }
}

/// Logs and counts a damaged stretch found by a scan (`context` says
/// where: recovery of the active segment, a sealed segment's index rebuild).
pub fn report_damage(path: &Path, damage: &Damage, context: &str) {
    tracing::error!(
        segment = %path.display(),
        position = damage.position,
        next_valid_batch = damage.next_position,
        first_offset = damage.first_offset,
        next_offset = damage.next_offset,
        reason = %damage.reason,
        "corrupt batch {context}: offsets {}..{} cannot be read; the valid batches after it stay readable and no offset is reused",
        damage.first_offset,
        damage.next_offset,
    );
    crate::stats::global()
        .corruptions_detected
        .fetch_add(1, Ordering::Relaxed);
}

/// Logs and counts damage a read ran into, and builds its error (the
/// partition names its topic and number).
fn report_damaged_read(
    segment: &Segment,
    position: u64,
    first_offset: u64,
    next_offset: u64,
    reason: String,
) -> LogError {
    tracing::error!(
        segment = %segment.paths.log.display(),
        position,
        first_offset,
        next_offset,
        %reason,
        "corrupt batch: a read starting at it fails; offsets {first_offset}..{next_offset} cannot be read"
    );
    crate::stats::global()
        .corruptions_detected
        .fetch_add(1, Ordering::Relaxed);
    LogError::Damaged {
        topic: String::new(),
        partition: 0,
        first_offset,
        next_offset,
        path: segment.paths.log.clone(),
        position,
        reason,
    }
}

/// Smallest chunk read from an active segment with one `pread`.
const MIN_ACTIVE_READ: u64 = 64 * 1024;

/// Reads the batches of `segment` from the one containing `offset`, until
/// `max_bytes` are collected (at least one batch), a batch reaches
/// `until_offset`, or the readable end. Every batch is checked as `B` is
/// (whole, or by its frame: damage only its CRC or records show is then
/// the caller's to find). A damaged batch ends the read after what came
/// before it; a read that starts at damage fails with `Damaged` naming the
/// first readable offset after it, and one that asks for an offset past
/// the damage skips to it. A read for offsets a compaction removed from
/// the segment's end gets no batch.
pub fn read_batches<B: ReadBatch>(
    segment: &Segment,
    source: &Source,
    offset: u64,
    until_offset: u64,
    max_bytes: u64,
) -> Result<SegmentRead<B>> {
    let readable = segment.readable_bytes();
    let end_offset = segment.end_offset();
    let (mut expected, mut position) = source.floor(segment.base_offset, offset);
    let mut out = SegmentRead::default();
    let mut window = Bytes::new();
    let mut window_start = position;
    // Whether the last batch passed was the cleaner's: then the offsets
    // after it up to the segment's end may be a compaction gap.
    let mut after_compacted = false;
    while position < readable && expected < end_offset {
        let at = (position - window_start) as usize;
        let parsed = if at < window.len() {
            B::parse(&window.slice(at..))
        } else {
            Err(DecodeError::Incomplete {
                needed: batch::HEADER_LEN,
                available: 0,
            })
        };
        let problem = match parsed {
            Ok(view) if batch::follows(view.base_offset(), view.is_compacted(), expected) => {
                position += view.byte_len() as u64;
                expected = view.next_offset();
                after_compacted = view.is_compacted();
                if view.next_offset() <= offset {
                    continue;
                }
                out.bytes += view.byte_len() as u64;
                out.batches.push(view);
                if out.bytes >= max_bytes || expected >= until_offset {
                    break;
                }
                continue;
            }
            Ok(view) => format!(
                "batch base offset {} where {expected} was expected",
                view.base_offset()
            ),
            Err(DecodeError::Incomplete { needed, .. })
                if window_start + (window.len() as u64) < readable =>
            {
                // Refill the window from `position`.
                let len = match source {
                    // Zero-copy: take the whole rest of the mapping.
                    Source::Sealed(_) => readable - position,
                    Source::Active(_) => (needed as u64)
                        .max(max_bytes.saturating_sub(out.bytes))
                        .max(MIN_ACTIVE_READ)
                        .min(readable - position),
                };
                window = source.read(&segment.paths.log, position, len, readable)?;
                window_start = position;
                continue;
            }
            Err(e) => e.to_string(),
        };
        if !out.batches.is_empty() {
            // Hand out what came before; the next read starts at the damage.
            break;
        }
        let rest = source.read(&segment.paths.log, position, readable - position, readable)?;
        let next = next_valid_batch(&rest, 1, expected);
        match next {
            Some((at, next_offset)) if next_offset <= offset => {
                tracing::warn!(
                    segment = %segment.paths.log.display(),
                    position,
                    first_offset = expected,
                    next_offset,
                    %problem,
                    "a read for offset {offset} passes over damaged batches before it"
                );
                position += at as u64;
                expected = next_offset;
                window = Bytes::new();
                window_start = position;
            }
            _ => {
                let next_offset = next.map_or(end_offset, |(_, o)| o);
                return Err(report_damaged_read(
                    segment,
                    position,
                    expected,
                    next_offset,
                    problem,
                ));
            }
        }
    }
    if out.batches.is_empty() && position >= readable && after_compacted {
        // The offsets from `offset` to the segment's end were compacted
        // away (FORMAT.md §2.9): nothing to read here.
        return Ok(out);
    }
    if out.batches.is_empty() && offset < end_offset {
        let reason = format!("offset {offset} not found before the end of the readable data");
        return Err(report_damaged_read(
            segment, position, expected, end_offset, reason,
        ));
    }
    Ok(out)
}
