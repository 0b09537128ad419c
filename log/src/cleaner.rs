//! Compaction: the cleaner that keeps, in the sealed segments of a topic
//! whose `cleanup_policy` compacts, the latest record of each key
//! (`log/FORMAT.md` §2.9 for the batches it writes, §8.3 for the pass).
//!
//! One pass over one partition ([`clean_partition`]):
//!
//! 1. **Cleanable**: the leading sealed segments whose newest append is
//!    older than the topic's `min_compaction_lag_ms` and the log's
//!    idempotency window (the cleaner drops the idempotency keys of the
//!    batches it splits, so it leaves alone what a retry could still name).
//!    The active segment and segments in tiered storage are never touched.
//! 2. **Clean and dirty**: a cleanable segment whose first batch the
//!    cleaner wrote ([`batch::COMPACTED`]) was compacted before; the
//!    segments after the clean ones are dirty. Nothing to do without dirty
//!    bytes, or while they are under `min_cleanable_dirty_ratio` of the
//!    cleanable bytes.
//! 3. **The key map**: each key of the dirty segments with its latest
//!    offset, whole segments in order while they fit `cleaner_buffer_bytes`
//!    (the first dirty segment always: a pass needs one segment's keys).
//! 4. **Rewrite**: the segments up to the last one mapped, in groups of at
//!    most `segment_bytes`, each into one new segment named after its
//!    first. A record stays unless the map holds a later offset of its key
//!    or it is a tombstone (an empty value, or JSON `null`) appended more than
//!    `delete_retention_ms` ago; keyless records stay. Offsets do not
//!    change: the records compacted away leave gaps — before, between and
//!    after batches — which readers pass over. Each run of kept records of
//!    one batch becomes one batch marked [`batch::COMPACTED`], in the
//!    topic's codec. A group left with no record joins the group before it
//!    (whose new segment then ends in a gap), or the one after it if it
//!    comes first; if nothing at all is left, nothing changes this pass.
//! 5. **Swap**, crash-safe: the new segment is written as
//!    `<base>.cleaned.tmp` and synced, then renamed to
//!    `<base>.<end>.swap` (the commit point) and the directory synced;
//!    then the old segments' files are removed and the swap file renamed
//!    over `<base>.log`. A start that finds a swap file finishes the swap
//!    ([`finish_swaps`]); one that finds only the `.tmp` deletes it. So a
//!    crash anywhere leaves the old segments or the new one, never a mix.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::batch::{self, BatchMeta, BatchView, NewRecord};
use crate::compression::{self, Compression};
use crate::error::{LogError, Result};
use crate::io;
use crate::partition::PartitionShared;
use crate::segment::{self, IndexBuilder, Indexes, Segment, SegmentPaths};

/// What a compaction pass over one partition did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOutcome {
    /// Sealed segments rewritten.
    pub segments_rewritten: usize,
    /// Segments that took their place.
    pub segments_written: usize,
    /// Records compacted away (older values of a key, expired tombstones).
    pub records_removed: u64,
    /// Bytes of the segments rewritten.
    pub bytes_before: u64,
    /// Bytes of the segments written.
    pub bytes_after: u64,
}

impl CompactionOutcome {
    /// Adds another pass's figures.
    pub fn add(&mut self, other: CompactionOutcome) {
        self.segments_rewritten += other.segments_rewritten;
        self.segments_written += other.segments_written;
        self.records_removed += other.records_removed;
        self.bytes_before += other.bytes_before;
        self.bytes_after += other.bytes_after;
    }
}

/// Memory one key map entry takes besides the key's bytes: the `Bytes`
/// handle, the offset and the hash table's slot.
const ENTRY_OVERHEAD: usize = 56;

/// Bytes the cleaner buffers before a write to the new segment.
const WRITE_BUFFER: usize = 1 << 20;

/// Bytes of batches one read of an old segment takes.
const READ_CHUNK: u64 = 8 << 20;

/// The latest offset of each key of the dirty segments, in a budget.
#[derive(Debug, Default)]
struct KeyMap {
    latest: HashMap<Bytes, u64>,
    bytes: usize,
}

impl KeyMap {
    /// Bytes the map would take with `keys` merged in.
    fn bytes_with(&self, keys: &HashMap<Bytes, u64>) -> usize {
        self.bytes
            + keys
                .keys()
                .filter(|k| !self.latest.contains_key(*k))
                .map(|k| k.len() + ENTRY_OVERHEAD)
                .sum::<usize>()
    }

    /// Merges a later segment's keys in.
    fn merge(&mut self, keys: HashMap<Bytes, u64>) {
        for (key, offset) in keys {
            let len = key.len();
            if self.latest.insert(key, offset).is_none() {
                self.bytes += len + ENTRY_OVERHEAD;
            }
        }
    }

    /// True if the record of `key` at `offset` is its latest as far as the
    /// map knows.
    fn is_latest(&self, key: &[u8], offset: u64) -> bool {
        self.latest.get(key).is_none_or(|&latest| latest <= offset)
    }
}

/// Runs one compaction pass over the partition (see the module doc), as
/// of `now_ms` on the log's append clock.
pub(crate) fn clean_partition(shared: &PartitionShared, now_ms: i64) -> Result<CompactionOutcome> {
    let settings = shared.settings();
    if !settings.cleanup_policy.compacts() {
        return Ok(CompactionOutcome::default());
    }
    let config = &shared.log_config;
    let lag = settings
        .min_compaction_lag_ms
        .unwrap_or(0)
        .max(config.idempotency_window_ms);
    let horizon = now_ms.saturating_sub(lag.min(i64::MAX as u64) as i64);
    let segments = shared.snapshot();
    let Some((_, sealed)) = segments.split_last() else {
        return Ok(CompactionOutcome::default());
    };
    let mut cleanable: Vec<Arc<Segment>> = Vec::new();
    // Segments in tiered storage (a prefix) are not compacted.
    for s in sealed.iter().filter(|s| !s.is_remote()) {
        let newest = match s.known_max_append_time() {
            Some(t) => t,
            None => shared.learn_append_time(s)?,
        };
        if newest >= horizon {
            break;
        }
        cleanable.push(s.clone());
    }
    // The clean segments are a prefix (a pass rewrites from the first):
    // when the last is clean, nothing is new, and the others need not be
    // opened to say so.
    match cleanable.last() {
        None => return Ok(CompactionOutcome::default()),
        Some(last) if first_batch_compacted(shared, last)? => {
            return Ok(CompactionOutcome::default())
        }
        Some(_) => {}
    }
    let mut clean = 0;
    while clean < cleanable.len() && first_batch_compacted(shared, &cleanable[clean])? {
        clean += 1;
    }
    let dirty = &cleanable[clean..];
    let dirty_bytes: u64 = dirty.iter().map(|s| s.readable_bytes()).sum();
    let all_bytes: u64 = cleanable.iter().map(|s| s.readable_bytes()).sum();
    if dirty.is_empty()
        || (dirty_bytes as f64) < config.min_cleanable_dirty_ratio * all_bytes as f64
    {
        return Ok(CompactionOutcome::default());
    }

    let started = Instant::now();
    let mut map = KeyMap::default();
    let mut mapped = 0;
    for s in dirty {
        let keys = latest_keys(shared, s)?;
        if mapped > 0 && map.bytes_with(&keys) > config.cleaner_buffer_bytes {
            break;
        }
        map.merge(keys);
        mapped += 1;
    }
    if map.bytes > config.cleaner_buffer_bytes {
        tracing::warn!(
            topic = %shared.topic,
            partition = shared.partition,
            segment = dirty[0].base_offset,
            key_map_bytes = map.bytes,
            cleaner_buffer_bytes = config.cleaner_buffer_bytes,
            "one segment's keys take more than cleaner_buffer_bytes; compacting it anyway (a pass needs one segment's keys)"
        );
    }
    let rewrite = &cleanable[..clean + mapped];
    let ends: Vec<u64> = segments.iter().skip(1).map(|s| s.base_offset).collect();
    let tombstones_before =
        now_ms.saturating_sub(settings.delete_retention_ms().min(i64::MAX as u64) as i64);
    let end_of = |segment: &Arc<Segment>| {
        ends[segments
            .iter()
            .position(|s| Arc::ptr_eq(s, segment))
            .expect("a group's segments are the partition's")]
    };
    let rule = KeepRule {
        map: &map,
        tombstones_before,
    };
    let mut outcome = CompactionOutcome::default();
    // A written group waiting for its swap (a later empty group may join
    // it), and the leading empty groups waiting for a group to join.
    let mut pending: Option<Written> = None;
    let mut lead: Option<Written> = None;
    for group in groups_by_size(rewrite, settings.segment_bytes) {
        let group_started = Instant::now();
        let base = lead.as_ref().map_or(group[0].base_offset, |l| l.base);
        let mut written = write_group(shared, group, base, &rule, settings.compression)?;
        if written.bytes == 0 {
            std::fs::remove_file(&written.tmp).map_err(|e| LogError::io(&written.tmp, e))?;
            match (pending.as_mut(), lead.as_mut()) {
                (Some(before), _) | (None, Some(before)) => before.absorb(written),
                (None, None) => lead = Some(written),
            }
        } else {
            if let Some(before) = lead.take() {
                written.follow(before);
            }
            if let Some(before) = pending.replace(written) {
                let end = end_of(before.segments.last().expect("segments"));
                outcome.add(swap_in(shared, before, end)?);
            }
        }
        throttle(
            config.cleaner_io_bytes_per_sec,
            group.iter().map(|s| s.readable_bytes()).sum::<u64>() * 2,
            group_started.elapsed(),
        );
    }
    if let Some(last) = pending {
        let end = end_of(last.segments.last().expect("segments"));
        outcome.add(swap_in(shared, last, end)?);
    }
    if outcome.segments_rewritten > 0 {
        let stats = crate::stats::global();
        stats
            .segments_compacted
            .fetch_add(outcome.segments_rewritten as u64, Ordering::Relaxed);
        stats
            .records_compacted
            .fetch_add(outcome.records_removed, Ordering::Relaxed);
        tracing::info!(
            topic = %shared.topic,
            partition = shared.partition,
            segments = outcome.segments_rewritten,
            written = outcome.segments_written,
            records_removed = outcome.records_removed,
            bytes_before = outcome.bytes_before,
            bytes_after = outcome.bytes_after,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "compacted"
        );
    }
    Ok(outcome)
}

/// Sleeps so that `bytes` of I/O over `took` stay under `limit` bytes/s.
fn throttle(limit: Option<u64>, bytes: u64, took: Duration) {
    if let Some(limit) = limit {
        let due = Duration::from_secs_f64(bytes as f64 / limit as f64);
        if let Some(rest) = due.checked_sub(took) {
            std::thread::sleep(rest);
        }
    }
}

/// Consecutive segments whose bytes together stay within `limit`, at least
/// one per group.
fn groups_by_size(segments: &[Arc<Segment>], limit: u64) -> Vec<&[Arc<Segment>]> {
    let mut groups = Vec::new();
    let mut start = 0;
    while start < segments.len() {
        let mut end = start + 1;
        let mut bytes = segments[start].readable_bytes();
        while end < segments.len() && bytes + segments[end].readable_bytes() <= limit {
            bytes += segments[end].readable_bytes();
            end += 1;
        }
        groups.push(&segments[start..end]);
        start = end;
    }
    groups
}

/// True if the cleaner wrote the segment's first batch (it was compacted
/// before), or the segment is empty.
fn first_batch_compacted(shared: &PartitionShared, segment: &Arc<Segment>) -> Result<bool> {
    let readable = segment.readable_bytes();
    if readable < batch::HEADER_LEN as u64 {
        return Ok(true);
    }
    let source = shared.cache.source(segment)?;
    let header = source.read(&segment.paths.log, 0, batch::HEADER_LEN as u64, readable)?;
    Ok(batch::u16_at(&header, batch::ATTRIBUTES_OFFSET) & batch::COMPACTED != 0)
}

/// Calls `f` with every batch of `segment`, in order, each checked whole.
/// Damage fails the pass: the cleaner never rewrites what it cannot read.
fn for_each_batch(
    shared: &PartitionShared,
    segment: &Arc<Segment>,
    mut f: impl FnMut(&BatchView) -> Result<()>,
) -> Result<()> {
    let source = shared.cache.source(segment)?;
    let mut cursor = segment.base_offset;
    while cursor < segment.end_offset() {
        let read =
            segment::read_batches::<BatchView>(segment, &source, cursor, u64::MAX, READ_CHUNK)
                .map_err(|e| e.in_partition(&shared.topic, shared.partition))?;
        let Some(last) = read.batches.last() else {
            break;
        };
        cursor = last.next_offset();
        for b in &read.batches {
            f(b)?;
        }
    }
    Ok(())
}

/// The latest offset of each key in one segment (keys copied: the
/// segment's mapping or inflated batches are not kept alive by the map).
fn latest_keys(shared: &PartitionShared, segment: &Arc<Segment>) -> Result<HashMap<Bytes, u64>> {
    let mut keys: HashMap<Bytes, u64> = HashMap::new();
    for_each_batch(shared, segment, |batch| {
        for r in batch.record_refs() {
            if let Some(key) = r.key {
                match keys.get_mut(key) {
                    Some(offset) => *offset = r.offset,
                    None => {
                        keys.insert(Bytes::copy_from_slice(key), r.offset);
                    }
                }
            }
        }
        Ok(())
    })?;
    Ok(keys)
}

/// Whether a record's value deletes its key: empty (a Kafka producer's
/// null) or the JSON `null` (an HTTP producer's), as a table reads it.
fn is_tombstone(value: &[u8]) -> bool {
    let value = value.trim_ascii();
    value.is_empty() || value == b"null"
}

/// Which records stay.
struct KeepRule<'a> {
    map: &'a KeyMap,
    /// Tombstones appended before this (ms) go.
    tombstones_before: i64,
}

impl KeepRule<'_> {
    fn keeps(&self, record: &batch::RecordRef<'_>, append_time: i64) -> bool {
        let Some(key) = record.key else {
            return true;
        };
        self.map.is_latest(key, record.offset)
            && !(is_tombstone(record.value) && append_time < self.tombstones_before)
    }
}

/// The new segment being written: batches buffered and written to the
/// `.tmp` file, indexes built as the writer builds them.
struct Output {
    path: PathBuf,
    file: File,
    buffer: Vec<u8>,
    position: u64,
    builder: IndexBuilder,
    indexes: Indexes,
    max_append_time: i64,
    codec: Compression,
    faults: Option<Arc<io::FaultInjector>>,
}

impl Output {
    /// Adds one batch: `encode` appends its version-1 bytes to the buffer;
    /// it is marked as the cleaner's and compressed as the topic is.
    fn push(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        let start = self.buffer.len();
        encode(&mut self.buffer);
        batch::mark_compacted(&mut self.buffer[start..]);
        let stored = compression::compress_batch(&mut self.buffer, start, self.codec);
        let header = &self.buffer[start..start + batch::HEADER_LEN];
        let base = batch::u64_at(header, batch::BASE_OFFSET_OFFSET);
        let max_ts = batch::u64_at(header, batch::MAX_TIMESTAMP_OFFSET) as i64;
        let append_time = batch::u64_at(header, batch::APPEND_TIME_OFFSET) as i64;
        self.builder.add(
            &mut self.indexes,
            self.position,
            base,
            stored as u64,
            max_ts,
        );
        self.position += stored as u64;
        self.max_append_time = self.max_append_time.max(append_time);
        if self.buffer.len() >= WRITE_BUFFER {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buffer.is_empty() {
            io::write_all(
                &mut self.file,
                &self.path,
                &self.buffer,
                self.faults.as_deref(),
            )?;
            self.buffer.clear();
        }
        Ok(())
    }
}

/// A group's new segment, written and synced as `<base>.cleaned.tmp`,
/// before its swap.
struct Written {
    /// The old segments it replaces, in order.
    segments: Vec<Arc<Segment>>,
    /// Its base offset: the first old segment's.
    base: u64,
    tmp: PathBuf,
    /// Its bytes (0: every record of the group went).
    bytes: u64,
    indexes: Indexes,
    max_timestamp: i64,
    max_append_time: i64,
    records_removed: u64,
    /// True if it is one old segment the cleaner wrote, unchanged.
    unchanged: bool,
}

impl Written {
    /// Takes in the range of a later group that kept no record: this new
    /// segment then ends in a gap.
    fn absorb(&mut self, empty: Written) {
        self.segments.extend(empty.segments);
        self.records_removed += empty.records_removed;
        self.unchanged = false;
    }

    /// Takes in the range of the earlier groups that kept no record (its
    /// base is theirs already): this new segment then starts in a gap.
    fn follow(&mut self, empty: Written) {
        self.segments.splice(0..0, empty.segments);
        self.records_removed += empty.records_removed;
        self.unchanged = false;
    }
}

/// Writes the records of `group` that `rule` keeps into a new segment
/// starting at `base` (the group's first offset, or an earlier empty
/// group's), synced, as `<base>.cleaned.tmp`.
fn write_group(
    shared: &PartitionShared,
    group: &[Arc<Segment>],
    base: u64,
    rule: &KeepRule<'_>,
    codec: Compression,
) -> Result<Written> {
    let tmp = shared.dir.join(format!("{base:020}.cleaned.tmp"));
    io::crash::step(&tmp, "create")?;
    let file = File::create(&tmp).map_err(|e| LogError::io(&tmp, e))?;
    let mut out = Output {
        path: tmp.clone(),
        file,
        buffer: Vec::with_capacity(WRITE_BUFFER + (64 << 10)),
        position: 0,
        builder: IndexBuilder::new(base, shared.log_config.index_interval_bytes),
        indexes: Indexes::default(),
        max_append_time: i64::MIN,
        codec,
        faults: shared.log_config.faults.clone(),
    };
    let mut removed = 0u64;
    let mut unchanged = group.len() == 1 && group[0].base_offset == base;
    for segment in group {
        for_each_batch(shared, segment, |b| {
            unchanged &= b.is_compacted();
            let append_time = b.append_time();
            let kept: Vec<bool> = b
                .record_refs()
                .map(|r| rule.keeps(&r, append_time))
                .collect();
            if kept.iter().all(|&k| k) {
                return out.push(|buf| buf.extend_from_slice(b.as_bytes()));
            }
            unchanged = false;
            removed += kept.iter().filter(|&&k| !k).count() as u64;
            let records: Vec<_> = b.records().collect();
            let mut i = 0;
            while i < records.len() {
                if !kept[i] {
                    i += 1;
                    continue;
                }
                let run_end = (i..records.len())
                    .find(|&j| !kept[j])
                    .unwrap_or(records.len());
                let run: Vec<NewRecord> = records[i..run_end]
                    .iter()
                    .map(|r| NewRecord {
                        key: r.key.clone(),
                        value: r.value.clone(),
                        timestamp: Some(r.timestamp),
                        headers: r.headers.clone(),
                    })
                    .collect();
                let meta = BatchMeta {
                    base_offset: records[i].offset,
                    append_time,
                    idempotency_key: None,
                };
                out.push(|buf| {
                    batch::encode(buf, meta, &run);
                })?;
                i = run_end;
            }
            Ok(())
        })?;
    }
    out.flush()?;
    io::sync_data(&out.file, &tmp, out.faults.as_deref())?;
    out.builder.finish(&mut out.indexes);
    Ok(Written {
        segments: group.to_vec(),
        base,
        tmp,
        bytes: out.position,
        indexes: out.indexes,
        max_timestamp: out.builder.max_timestamp,
        max_append_time: out.max_append_time,
        records_removed: removed,
        unchanged,
    })
}

/// Puts a written segment in the place of the old ones (see the module
/// doc): the rename to the swap file commits it. An unchanged segment is
/// dropped instead.
fn swap_in(shared: &PartitionShared, written: Written, end: u64) -> Result<CompactionOutcome> {
    let dir = &shared.dir;
    let Written {
        segments,
        base,
        tmp,
        bytes,
        indexes,
        ..
    } = written;
    if written.unchanged {
        std::fs::remove_file(&tmp).map_err(|e| LogError::io(&tmp, e))?;
        return Ok(CompactionOutcome::default());
    }
    let swap = swap_path(dir, base, end);
    io::crash::step(&swap, "rename")?;
    std::fs::rename(&tmp, &swap).map_err(|e| LogError::io(&swap, e))?;
    io::sync_dir(dir)?;
    // Committed: from here a crash is finished forward by the next start.
    let paths = SegmentPaths::new(dir, base);
    let new = Arc::new(Segment::new_sealed(
        paths.clone(),
        base,
        end,
        bytes,
        shared.log_config.index_interval_bytes,
    ));
    new.publish(bytes, end, written.max_timestamp, written.max_append_time);
    let swapped = shared.replace_segments(&segments, new, |_| {
        finish_swap(dir, base, end, &swap)?;
        io::write_atomic(&paths.index, indexes.offsets.as_bytes())?;
        io::write_atomic(&paths.time_index, indexes.times.as_bytes())
    });
    if let Err(e) = &swapped {
        // The old segments' files may be partly gone: stop writes; the
        // next start finishes the swap from the swap file.
        shared.fail(e);
    }
    swapped?;
    Ok(CompactionOutcome {
        segments_rewritten: segments.len(),
        segments_written: 1,
        records_removed: written.records_removed,
        bytes_before: segments.iter().map(|s| s.readable_bytes()).sum(),
        bytes_after: bytes,
    })
}

/// `<base:020>.<end:020>.swap`: a compacted segment replacing the segments
/// from `base` up to `end`, between the commit and the end of its swap.
fn swap_path(dir: &Path, base: u64, end: u64) -> PathBuf {
    dir.join(format!("{base:020}.{end:020}.swap"))
}

/// The (base, end) of a swap file's name.
fn parse_swap(name: &str) -> Option<(u64, u64)> {
    let stem = name.strip_suffix(".swap")?;
    let (base, end) = stem.split_once('.')?;
    let digits = |s: &str| s.len() == 20 && s.bytes().all(|b| b.is_ascii_digit());
    (digits(base) && digits(end)).then(|| Some((base.parse().ok()?, end.parse().ok()?)))?
}

/// Removes the files of the segments in `base..end` (their indexes, and
/// every `.log` but `base`'s), renames the swap file over `<base>.log` and
/// syncs the directory. Repeating it after a crash is harmless.
fn finish_swap(dir: &Path, base: u64, end: u64, swap: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((stem, ext)) = name.split_once('.') else {
            continue;
        };
        let in_range = stem.len() == 20
            && stem.bytes().all(|b| b.is_ascii_digit())
            && stem.parse::<u64>().is_ok_and(|b| (base..end).contains(&b));
        let doomed = match ext {
            "index" | "timeindex" => in_range,
            "log" => in_range && stem.parse::<u64>() != Ok(base),
            _ => false,
        };
        if doomed {
            let path = entry.path();
            io::crash::step(&path, "remove")?;
            std::fs::remove_file(&path).map_err(|e| LogError::io(&path, e))?;
        }
    }
    let log = SegmentPaths::new(dir, base).log;
    io::crash::step(&log, "rename")?;
    std::fs::rename(swap, &log).map_err(|e| LogError::io(&log, e))?;
    io::sync_dir(dir)
}

/// Finishes every swap a crash interrupted in a partition directory (at
/// open, before its segments are listed); returns how many.
pub(crate) fn finish_swaps(dir: &Path) -> Result<usize> {
    let mut swaps = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        if let Some((base, end)) = entry.file_name().to_str().and_then(parse_swap) {
            swaps.push((base, end, entry.path()));
        }
    }
    for (base, end, path) in &swaps {
        tracing::warn!(
            swap = %path.display(),
            base,
            end,
            "finishing a compaction swap a stop interrupted: the compacted segment replaces the old ones"
        );
        finish_swap(dir, *base, *end, path)?;
    }
    Ok(swaps.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_names_parse_strictly() {
        assert_eq!(
            parse_swap("00000000000000000010.00000000000000000042.swap"),
            Some((10, 42))
        );
        assert_eq!(parse_swap("10.42.swap"), None);
        assert_eq!(
            parse_swap("00000000000000000010.00000000000000000042.swa"),
            None
        );
        assert_eq!(parse_swap("00000000000000000010.log"), None);
    }

    #[test]
    fn the_key_map_counts_each_key_once_and_keeps_the_latest_offset() {
        let mut map = KeyMap::default();
        let first: HashMap<Bytes, u64> = [(Bytes::from("a"), 3), (Bytes::from("bb"), 4)].into();
        assert_eq!(map.bytes_with(&first), 3 + 2 * ENTRY_OVERHEAD);
        map.merge(first);
        let second: HashMap<Bytes, u64> = [(Bytes::from("a"), 9)].into();
        assert_eq!(map.bytes_with(&second), map.bytes);
        map.merge(second);
        assert!(!map.is_latest(b"a", 3));
        assert!(map.is_latest(b"a", 9));
        assert!(map.is_latest(b"bb", 4));
        assert!(map.is_latest(b"unmapped", 0));
    }
}
