//! The durable consumer-group offset store.
//!
//! Owns the committed offset of every (consumer group, topic, partition)
//! and its one on-disk file, `offsets.log`, in the store's directory (the
//! byte layout is in `FORMAT.md`, section "Consumer offsets file").
//!
//! Invariants:
//! - The file is a sequence of CRC'd frames; replaying it in order yields
//!   exactly the in-memory state. A mutation is applied in memory only after
//!   its frame was written and fdatasync'ed, so every acknowledged call
//!   survives a crash and an unacknowledged one never half-applies (one call
//!   is one frame).
//! - Replay skips a frame that fails its CRC when a valid frame follows
//!   (damage inside written data: only that one call's commits are lost, and
//!   the error log names them); the damaged file is kept as
//!   `offsets.log.damaged-<ms>` and the live file rewritten from the
//!   replayed state. A torn or corrupt stretch at the very end (the write a
//!   crash interrupted) is truncated. A frame that passes its CRC but cannot
//!   be decoded makes `open` fail with `Corrupt` and leaves the file
//!   untouched.
//! - `offsets.log.bak` holds the last good copy (written at every open and
//!   after every compaction). A missing `offsets.log` beside it makes `open`
//!   fail with `Metadata` (restore it, or move the backup away to start
//!   with no committed offsets), never silently start empty.
//! - When the file holds more than `max(1024, 4 × live entries)` frames it
//!   is rewritten from the live state through `offsets.log.tmp`, fdatasync,
//!   rename and directory fsync, so a crash leaves either the old or the new
//!   file, never a mix. A leftover `offsets.log.tmp` is deleted at open.
//! - After an fdatasync (or the directory fsync of a compaction) fails, the
//!   store refuses further mutations until it is reopened, because what is on
//!   disk is no longer known.

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::error::{LogError, Result};
use crate::io::{crash, sync_dir};

/// Name of the store's file inside its directory.
const FILE_NAME: &str = "offsets.log";
/// Name of the compaction's temporary file inside the store's directory.
const TMP_FILE_NAME: &str = "offsets.log.tmp";
/// Name of the last good copy inside the store's directory.
const BACKUP_FILE_NAME: &str = "offsets.log.bak";
/// Name of the backup's temporary file inside the store's directory.
const BACKUP_TMP_FILE_NAME: &str = "offsets.log.bak.tmp";

/// Magic/version byte opening every frame body: format version 1.
const MAGIC_V1: u8 = 0xC1;
/// Frame kind: offsets committed for one group.
const KIND_COMMIT: u8 = 1;
/// Frame kind: every group's offsets of one topic forgotten.
const KIND_DELETE_TOPIC: u8 = 2;
/// Frame kind: all offsets of one group forgotten.
const KIND_DELETE_GROUP: u8 = 3;

/// Bytes before the body: length u32 and CRC u32.
const HEADER_LEN: usize = 8;
/// Smallest body that can be valid (magic and kind).
const MIN_BODY_LEN: usize = 2;
/// Largest body written or accepted on replay (16 MiB).
const MAX_BODY_LEN: usize = 16 << 20;
/// Fixed bytes of a commit body besides the group name: magic, kind,
/// group length u16, entry count u32.
const COMMIT_FIXED_LEN: usize = 1 + 1 + 2 + 4;
/// Fixed bytes of one commit entry besides the topic name: topic length
/// u16, partition u32, offset u64, commit time i64.
const ENTRY_FIXED_LEN: usize = 2 + 4 + 8 + 8;

/// Longest consumer group name, in bytes.
const MAX_GROUP_LEN: usize = 255;
/// Longest topic name, in bytes.
const MAX_TOPIC_LEN: usize = 249;

/// Compaction never runs while the file holds at most this many frames.
const COMPACT_MIN_FRAMES: u64 = 1024;
/// Compaction runs when frames exceed this many times the live entries.
const COMPACT_FACTOR: u64 = 4;

/// One committed offset of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// Topic of the partition.
    pub topic: String,
    /// Partition number within the topic.
    pub partition: u32,
    /// The committed offset (by convention, the next offset the group will read).
    pub offset: u64,
    /// Caller-supplied commit time, milliseconds since the Unix epoch.
    pub commit_time_ms: i64,
}

/// Durable committed offsets per (group, topic, partition). Thread-safe (&self; internal Mutex).
pub struct OffsetStore {
    path: PathBuf,
    inner: Mutex<Inner>,
}

/// The value stored per (group, topic, partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    offset: u64,
    commit_time_ms: i64,
}

/// Offsets of one group, keyed and sorted by (topic, partition).
type GroupOffsets = BTreeMap<(String, u32), Entry>;

/// The live state: what replaying the file yields.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct State {
    groups: BTreeMap<String, GroupOffsets>,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Record {
    Commit {
        group: String,
        entries: Vec<(String, u32, Entry)>,
    },
    DeleteTopic(String),
    DeleteGroup(String),
}

/// Mutable part of the store, behind the mutex.
struct Inner {
    dir: PathBuf,
    path: PathBuf,
    /// Handle on `offsets.log` (after a compaction, on the renamed new file).
    file: File,
    /// Bytes of valid frames in the file; the next frame is written here.
    len: u64,
    /// Frames in the file.
    frames: u64,
    state: State,
    /// Why mutations are refused, once an fsync failed.
    failed: Option<String>,
    /// Lower bound of `COMPACT_MIN_FRAMES`, lowered by tests.
    compact_min_frames: u64,
    /// After a failed compaction, no new attempt before this many frames.
    compact_retry_at: u64,
}

impl State {
    fn live_entries(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }

    fn has_topic(&self, topic: &str) -> bool {
        self.groups
            .values()
            .any(|g| g.keys().any(|(t, _)| t == topic))
    }

    fn apply(&mut self, record: Record) {
        match record {
            Record::Commit { group, entries } => {
                let offsets = self.groups.entry(group).or_default();
                for (topic, partition, entry) in entries {
                    offsets.insert((topic, partition), entry);
                }
            }
            Record::DeleteTopic(topic) => {
                for offsets in self.groups.values_mut() {
                    offsets.retain(|(t, _), _| *t != topic);
                }
                self.groups.retain(|_, offsets| !offsets.is_empty());
            }
            Record::DeleteGroup(group) => {
                self.groups.remove(&group);
            }
        }
    }
}

impl OffsetStore {
    /// Opens or creates the store in `dir` (creating the dir), replaying its file.
    pub fn open(dir: &Path) -> Result<OffsetStore> {
        Self::open_with(dir, COMPACT_MIN_FRAMES)
    }

    /// `open` with the compaction floor as a parameter (tests lower it).
    fn open_with(dir: &Path, compact_min_frames: u64) -> Result<OffsetStore> {
        let dir_existed = dir.is_dir();
        fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        if !dir_existed {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            sync_dir(parent)?;
        }

        for leftover in [TMP_FILE_NAME, BACKUP_TMP_FILE_NAME] {
            let tmp_path = dir.join(leftover);
            match fs::remove_file(&tmp_path) {
                Ok(()) => tracing::warn!(
                    path = %tmp_path.display(),
                    "removed a leftover temporary offsets file (a compaction or backup was interrupted)"
                ),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(LogError::io(&tmp_path, e)),
            }
        }

        let path = dir.join(FILE_NAME);
        let existed = path.exists();
        let backup = dir.join(BACKUP_FILE_NAME);
        if !existed && backup.exists() {
            return Err(LogError::Metadata {
                problem: "missing, but its last good copy offsets.log.bak is here: \
                          starting would forget every consumer group's committed offsets"
                    .into(),
                recovery: format!(
                    "stop the server and restore the copy (`cp {} {}`); or, to start \
                     with no committed offsets, move {} elsewhere",
                    backup.display(),
                    path.display(),
                    backup.display()
                ),
                path,
            });
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        if !existed {
            sync_dir(dir)?;
        }

        let mut data = Vec::new();
        file.read_to_end(&mut data)
            .map_err(|e| LogError::io(&path, e))?;
        let replayed = replay(&path, &data)?;
        if replayed.skipped_frames > 0 {
            let aside = dir.join(format!("{FILE_NAME}.damaged-{}", crate::now_ms()));
            fs::write(&aside, &data)
                .and_then(|()| File::open(&aside)?.sync_all())
                .map_err(|e| LogError::io(&aside, e))?;
            tracing::error!(
                path = %path.display(),
                kept_in = %aside.display(),
                skipped_frames = replayed.skipped_frames,
                "the offsets file had damaged frames in the middle: skipped them (their commits are lost; the groups re-read from their earlier offsets), kept the damaged file aside and rewrote it"
            );
            crate::stats::global()
                .corruptions_detected
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        } else if replayed.valid_len < data.len() as u64 {
            file.set_len(replayed.valid_len)
                .and_then(|()| file.sync_all())
                .map_err(|e| LogError::io(&path, e))?;
        }
        let damaged = replayed.skipped_frames > 0;

        let mut inner = Inner {
            dir: dir.to_path_buf(),
            path: path.clone(),
            file,
            len: replayed.valid_len,
            frames: replayed.frames,
            state: replayed.state,
            failed: None,
            compact_min_frames,
            compact_retry_at: 0,
        };
        if damaged {
            inner.compact()?;
        } else {
            inner.maybe_compact();
        }
        inner.write_backup()?;
        Ok(OffsetStore {
            path,
            inner: Mutex::new(inner),
        })
    }

    /// Durably records the given (topic, partition, offset) commits for `group` as one CRC'd frame, fdatasync'ed before it returns; all-or-nothing (later duplicates in `commits` win).
    pub fn commit(
        &self,
        group: &str,
        commits: &[(&str, u32, u64)],
        commit_time_ms: i64,
    ) -> Result<()> {
        validate_group(group)?;
        for &(topic, _, _) in commits {
            validate_topic(topic)?;
        }
        if commits.is_empty() {
            return Ok(());
        }
        let record = Record::Commit {
            group: group.to_owned(),
            entries: commits
                .iter()
                .map(|&(topic, partition, offset)| {
                    let entry = Entry {
                        offset,
                        commit_time_ms,
                    };
                    (topic.to_owned(), partition, entry)
                })
                .collect(),
        };
        let frame = encode_frame(&record);
        if frame.len() - HEADER_LEN > MAX_BODY_LEN {
            return Err(LogError::InvalidArgument(format!(
                "commit of {} offsets for consumer group {group:?} encodes to {} bytes, over the {MAX_BODY_LEN}-byte frame limit",
                commits.len(),
                frame.len() - HEADER_LEN
            )));
        }
        self.lock().append(record, &frame)
    }

    /// The committed offset, if any.
    pub fn committed(&self, group: &str, topic: &str, partition: u32) -> Option<u64> {
        let inner = self.lock();
        inner
            .state
            .groups
            .get(group)?
            .get(&(topic.to_owned(), partition))
            .map(|e| e.offset)
    }

    /// All offsets of a group, sorted by (topic, partition).
    pub fn group_offsets(&self, group: &str) -> Vec<CommittedOffset> {
        let inner = self.lock();
        let Some(offsets) = inner.state.groups.get(group) else {
            return Vec::new();
        };
        offsets
            .iter()
            .map(|((topic, partition), e)| CommittedOffset {
                topic: topic.clone(),
                partition: *partition,
                offset: e.offset,
                commit_time_ms: e.commit_time_ms,
            })
            .collect()
    }

    /// Names of all groups with at least one committed offset, sorted.
    pub fn groups(&self) -> Vec<String> {
        self.lock().state.groups.keys().cloned().collect()
    }

    /// Durably forgets every group's offsets for `topic` (used when a topic is deleted).
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        validate_topic(topic)?;
        let mut inner = self.lock();
        if !inner.state.has_topic(topic) {
            return Ok(());
        }
        let record = Record::DeleteTopic(topic.to_owned());
        let frame = encode_frame(&record);
        inner.append(record, &frame)
    }

    /// Durably forgets all offsets of `group`.
    pub fn delete_group(&self, group: &str) -> Result<()> {
        validate_group(group)?;
        let mut inner = self.lock();
        if !inner.state.groups.contains_key(group) {
            return Ok(());
        }
        let record = Record::DeleteGroup(group.to_owned());
        let frame = encode_frame(&record);
        inner.append(record, &frame)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state is changed only after the file write succeeded and by
        // code that does not panic, so a poisoned lock still guards a
        // consistent state.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl fmt::Debug for OffsetStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OffsetStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Inner {
    /// Writes and fdatasyncs `frame` (the encoding of `record`), then
    /// applies `record` and compacts if due.
    fn append(&mut self, record: Record, frame: &[u8]) -> Result<()> {
        if let Some(reason) = &self.failed {
            return Err(LogError::io(
                &self.path,
                io::Error::other(format!(
                    "offset store refuses writes until it is reopened: {reason}"
                )),
            ));
        }
        crash::step(&self.path, "write")?;
        let written = self
            .file
            .seek(SeekFrom::Start(self.len))
            .and_then(|_| self.file.write_all(frame));
        if let Err(e) = written {
            // Take back a partial frame so the next frame is not written
            // after garbage (which replay would cut off together with it).
            if let Err(undo) = self.file.set_len(self.len) {
                self.fail(format!(
                    "could not remove a partly written frame at byte {}: {undo}",
                    self.len
                ));
            }
            return Err(LogError::io(&self.path, e));
        }
        if let Err(e) = crash::step(&self.path, "fdatasync") {
            self.fail(format!("fdatasync failed: {e}"));
            return Err(e);
        }
        if let Err(e) = self.file.sync_data() {
            self.fail(format!("fdatasync failed: {e}"));
            return Err(LogError::io(&self.path, e));
        }
        self.len += frame.len() as u64;
        self.frames += 1;
        self.state.apply(record);
        self.maybe_compact();
        Ok(())
    }

    fn fail(&mut self, reason: String) {
        tracing::error!(path = %self.path.display(), %reason, "offset store stops accepting writes");
        self.failed.get_or_insert(reason);
    }

    /// Compacts when the file holds more than `max(floor, 4 × live)`
    /// frames. A failure is logged, not returned: the caller's mutation is
    /// already durable in the old file.
    fn maybe_compact(&mut self) {
        if self.failed.is_some() {
            return;
        }
        let live = self.state.live_entries() as u64;
        let threshold = self
            .compact_min_frames
            .max(COMPACT_FACTOR.saturating_mul(live));
        if self.frames <= threshold || self.frames < self.compact_retry_at {
            return;
        }
        let before = (self.frames, self.len);
        match self.compact() {
            Ok(()) => tracing::debug!(
                path = %self.path.display(),
                frames_before = before.0,
                bytes_before = before.1,
                frames_after = self.frames,
                bytes_after = self.len,
                "compacted offsets file"
            ),
            Err(e) => {
                self.compact_retry_at = self.frames.saturating_add(threshold);
                tracing::error!(path = %self.path.display(), error = %e, "offsets compaction failed");
            }
        }
    }

    /// Writes the live state to `offsets.log.bak` (temporary file,
    /// fdatasync, rename, directory fsync): the last good copy.
    fn write_backup(&self) -> Result<()> {
        let tmp = self.dir.join(BACKUP_TMP_FILE_NAME);
        let (data, _) = encode_state(&self.state);
        crash::step(&tmp, "write backup")?;
        File::create(&tmp)
            .and_then(|mut f| {
                f.write_all(&data)?;
                f.sync_data()
            })
            .map_err(|e| LogError::io(&tmp, e))?;
        let backup = self.dir.join(BACKUP_FILE_NAME);
        crash::step(&backup, "rename")?;
        fs::rename(&tmp, &backup).map_err(|e| LogError::io(&backup, e))?;
        sync_dir(&self.dir)
    }

    /// Rewrites the live state to the temporary file, fdatasyncs it,
    /// renames it over `offsets.log` and fsyncs the directory.
    fn compact(&mut self) -> Result<()> {
        let tmp_path = self.dir.join(TMP_FILE_NAME);
        let (data, frames) = encode_state(&self.state);
        crash::step(&tmp_path, "write compacted file")?;
        let written = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp_path)
            .and_then(|mut tmp| {
                tmp.write_all(&data)?;
                tmp.sync_data()?;
                Ok(tmp)
            });
        let tmp = match written {
            Ok(tmp) => tmp,
            Err(e) => {
                let _ = fs::remove_file(&tmp_path);
                return Err(LogError::io(&tmp_path, e));
            }
        };
        crash::step(&self.path, "rename")?;
        if let Err(e) = fs::rename(&tmp_path, &self.path) {
            let _ = fs::remove_file(&tmp_path);
            return Err(LogError::io(&self.path, e));
        }
        // From here on `offsets.log` names the new file.
        self.file = tmp;
        self.len = data.len() as u64;
        self.frames = frames;
        if let Err(e) = sync_dir(&self.dir) {
            // Until the rename is durable a crash may bring back the old
            // file, which lacks whatever is appended to the new one.
            self.fail(format!("directory fsync after compaction failed: {e}"));
            return Err(e);
        }
        if let Err(e) = self.write_backup() {
            tracing::warn!(error = %e, "could not refresh offsets.log.bak after compaction");
        }
        Ok(())
    }
}

/// Result of replaying a file image.
struct Replayed {
    state: State,
    frames: u64,
    /// Bytes up to the end of the last good frame.
    valid_len: u64,
    /// Damaged frames skipped because valid ones followed them.
    skipped_frames: u64,
}

/// Why a frame cannot be read as a whole, CRC-valid frame.
enum BadFrame {
    Torn(&'static str),
    Corrupt(&'static str),
}

/// Replays the frames of `data`. A torn or CRC-failed frame followed by a
/// valid one is skipped (counted in `skipped_frames`); one with nothing
/// valid after it ends the replay (`valid_len` stops there). A CRC-valid
/// frame that does not decode is an error.
fn replay(path: &Path, data: &[u8]) -> Result<Replayed> {
    let mut state = State::default();
    let mut frames = 0u64;
    let mut skipped_frames = 0u64;
    let mut pos = 0usize;
    let mut valid_len = 0usize;
    while pos < data.len() {
        match check_frame(data, pos) {
            Ok(body) => {
                let record = decode_body(body)
                    .map_err(|reason| LogError::corrupt(path, pos as u64, reason))?;
                state.apply(record);
                frames += 1;
                pos += HEADER_LEN + body.len();
                valid_len = pos;
            }
            Err(bad) => {
                let (what, reason) = match bad {
                    BadFrame::Torn(r) => ("torn", r),
                    BadFrame::Corrupt(r) => ("corrupt", r),
                };
                match find_valid_frame(data, pos + 1) {
                    None => {
                        tracing::warn!(
                            path = %path.display(),
                            position = pos,
                            dropped_bytes = data.len() - pos,
                            "truncating {what} final frame of offsets file: {reason}"
                        );
                        break;
                    }
                    Some(next) => {
                        tracing::error!(
                            path = %path.display(),
                            position = pos,
                            skipped_bytes = next - pos,
                            next_valid_frame = next,
                            "{what} frame in the middle of offsets file ({reason}); skipping to the next valid frame"
                        );
                        skipped_frames += 1;
                        pos = next;
                    }
                }
            }
        }
    }
    Ok(Replayed {
        state,
        frames,
        valid_len: valid_len as u64,
        skipped_frames,
    })
}

/// Replays `data` for the fuzz target ([`crate::fuzzing::offsets_replay`]),
/// checking what replay promises.
pub(crate) fn check_replay(path: &Path, data: &[u8]) {
    if let Ok(replayed) = replay(path, data) {
        assert!(replayed.valid_len as usize <= data.len());
        // What replay kept re-encodes to frames that replay to the same state.
        let (encoded, _) = encode_state(&replayed.state);
        let again = replay(path, &encoded).expect("re-encoded state replays");
        assert_eq!(again.state, replayed.state);
        assert_eq!(again.skipped_frames, 0);
    }
}

/// The body of the frame at `pos` if it is whole and its CRC matches.
fn check_frame(data: &[u8], pos: usize) -> std::result::Result<&[u8], BadFrame> {
    let rest = &data[pos..];
    if rest.len() < HEADER_LEN {
        return Err(BadFrame::Torn("file ends inside the frame header"));
    }
    let len = u32::from_le_bytes(rest[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(rest[4..8].try_into().expect("4 bytes"));
    if !(MIN_BODY_LEN..=MAX_BODY_LEN).contains(&len) {
        return Err(BadFrame::Corrupt("frame length out of range"));
    }
    if rest.len() - HEADER_LEN < len {
        return Err(BadFrame::Torn("frame runs past the end of the file"));
    }
    let body = &rest[HEADER_LEN..HEADER_LEN + len];
    if crc32fast::hash(body) != crc {
        return Err(BadFrame::Corrupt("CRC mismatch"));
    }
    Ok(body)
}

/// The first position at or after `from` where a whole, CRC-valid frame
/// with the current magic starts, if any.
fn find_valid_frame(data: &[u8], from: usize) -> Option<usize> {
    (from..data.len().saturating_sub(HEADER_LEN + MIN_BODY_LEN - 1))
        .find(|&pos| data[pos + HEADER_LEN] == MAGIC_V1 && check_frame(data, pos).is_ok())
}

/// Cursor over a frame body.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        if self.data.len() < n {
            return Err("frame body ends inside a field".to_owned());
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> std::result::Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self) -> std::result::Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> std::result::Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> std::result::Result<i64, String> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> std::result::Result<String, String> {
        let len = u16::from_le_bytes(self.array()?) as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "name is not valid UTF-8".to_owned())
    }

    fn group(&mut self) -> std::result::Result<String, String> {
        let group = self.string()?;
        validate_group(&group).map_err(|e| e.to_string())?;
        Ok(group)
    }

    fn topic(&mut self) -> std::result::Result<String, String> {
        let topic = self.string()?;
        validate_topic(&topic).map_err(|e| e.to_string())?;
        Ok(topic)
    }
}

/// Decodes a CRC-valid frame body.
fn decode_body(body: &[u8]) -> std::result::Result<Record, String> {
    let mut r = Reader { data: body };
    let magic = r.u8()?;
    if magic != MAGIC_V1 {
        return Err(format!(
            "unknown magic/version byte {magic:#04x} (expected {MAGIC_V1:#04x})"
        ));
    }
    let record = match r.u8()? {
        KIND_COMMIT => {
            let group = r.group()?;
            let count = r.u32()? as usize;
            if count == 0 || count > body.len() / ENTRY_FIXED_LEN {
                return Err(format!("implausible commit entry count {count}"));
            }
            let mut entries = Vec::with_capacity(count);
            for _ in 0..count {
                let topic = r.topic()?;
                let partition = r.u32()?;
                let offset = r.u64()?;
                let commit_time_ms = r.i64()?;
                let entry = Entry {
                    offset,
                    commit_time_ms,
                };
                entries.push((topic, partition, entry));
            }
            Record::Commit { group, entries }
        }
        KIND_DELETE_TOPIC => Record::DeleteTopic(r.topic()?),
        KIND_DELETE_GROUP => Record::DeleteGroup(r.group()?),
        kind => return Err(format!("unknown frame kind {kind}")),
    };
    if !r.data.is_empty() {
        return Err(format!(
            "{} unexpected bytes after the frame's fields",
            r.data.len()
        ));
    }
    Ok(record)
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    // Names are validated to at most 255 bytes before they get here.
    buf.extend_from_slice(&(s.len() as u16).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

/// Encodes one whole frame (header and body) for `record`.
fn encode_frame(record: &Record) -> Vec<u8> {
    let mut buf = vec![0u8; HEADER_LEN];
    buf.push(MAGIC_V1);
    match record {
        Record::Commit { group, entries } => {
            buf.push(KIND_COMMIT);
            put_str(&mut buf, group);
            buf.extend_from_slice(&(entries.len() as u32).to_le_bytes());
            for (topic, partition, entry) in entries {
                put_str(&mut buf, topic);
                buf.extend_from_slice(&partition.to_le_bytes());
                buf.extend_from_slice(&entry.offset.to_le_bytes());
                buf.extend_from_slice(&entry.commit_time_ms.to_le_bytes());
            }
        }
        Record::DeleteTopic(topic) => {
            buf.push(KIND_DELETE_TOPIC);
            put_str(&mut buf, topic);
        }
        Record::DeleteGroup(group) => {
            buf.push(KIND_DELETE_GROUP);
            put_str(&mut buf, group);
        }
    }
    let body_len = (buf.len() - HEADER_LEN) as u32;
    let crc = crc32fast::hash(&buf[HEADER_LEN..]);
    buf[0..4].copy_from_slice(&body_len.to_le_bytes());
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// Encodes the live state as commit frames (one per group, split where a
/// frame would pass the size limit); returns the bytes and frame count.
fn encode_state(state: &State) -> (Vec<u8>, u64) {
    let mut data = Vec::new();
    let mut frames = 0u64;
    for (group, offsets) in &state.groups {
        let mut entries = Vec::new();
        let mut body_len = COMMIT_FIXED_LEN + group.len();
        for ((topic, partition), entry) in offsets {
            let entry_len = ENTRY_FIXED_LEN + topic.len();
            if !entries.is_empty() && body_len + entry_len > MAX_BODY_LEN {
                let record = Record::Commit {
                    group: group.clone(),
                    entries: std::mem::take(&mut entries),
                };
                data.extend_from_slice(&encode_frame(&record));
                frames += 1;
                body_len = COMMIT_FIXED_LEN + group.len();
            }
            entries.push((topic.clone(), *partition, *entry));
            body_len += entry_len;
        }
        if !entries.is_empty() {
            let record = Record::Commit {
                group: group.clone(),
                entries,
            };
            data.extend_from_slice(&encode_frame(&record));
            frames += 1;
        }
    }
    (data, frames)
}

/// Checks a consumer group name: 1..=255 bytes, no ASCII control character.
pub fn validate_group(group: &str) -> Result<()> {
    let problem = if group.is_empty() {
        "must not be empty"
    } else if group.len() > MAX_GROUP_LEN {
        "must be at most 255 bytes"
    } else if group.bytes().any(|b| b.is_ascii_control()) {
        "must not contain ASCII control characters"
    } else {
        return Ok(());
    };
    Err(LogError::InvalidArgument(format!(
        "consumer group name {group:?} {problem}"
    )))
}

/// Checks the length of a topic name (the full rule is checked elsewhere).
fn validate_topic(topic: &str) -> Result<()> {
    let reason = if topic.is_empty() {
        "must not be empty"
    } else if topic.len() > MAX_TOPIC_LEN {
        "must be at most 249 bytes"
    } else {
        return Ok(());
    };
    Err(LogError::InvalidTopicName {
        name: topic.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Arc;

    fn log_path(dir: &Path) -> PathBuf {
        dir.join(FILE_NAME)
    }

    fn file_len(dir: &Path) -> u64 {
        fs::metadata(log_path(dir)).unwrap().len()
    }

    /// Everything the store holds, in a comparable form.
    fn snapshot(store: &OffsetStore) -> Vec<(String, Vec<CommittedOffset>)> {
        store
            .groups()
            .into_iter()
            .map(|g| {
                let offsets = store.group_offsets(&g);
                (g, offsets)
            })
            .collect()
    }

    /// Writes `bytes` as the offsets file of a fresh directory.
    fn dir_with_file(bytes: &[u8]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        fs::write(log_path(dir.path()), bytes).unwrap();
        dir
    }

    #[test]
    fn frame_bytes_match_the_documented_example() {
        // The worked example of FORMAT.md, "Consumer offsets file".
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 5)], 1000).unwrap();
        let expected: [u8; 40] = [
            0x20, 0x00, 0x00, 0x00, 0x35, 0xf6, 0x7f, 0xce, 0xc1, 0x01, 0x01, 0x00, 0x67, 0x01,
            0x00, 0x00, 0x00, 0x01, 0x00, 0x74, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0xe8, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        assert_eq!(fs::read(log_path(dir.path())).unwrap(), expected);
        assert_eq!(
            encode_frame(&Record::DeleteTopic("t".into()))[8..],
            [0xc1, 0x02, 0x01, 0x00, 0x74]
        );
        assert_eq!(
            encode_frame(&Record::DeleteGroup("g".into()))[8..],
            [0xc1, 0x03, 0x01, 0x00, 0x67]
        );
    }

    #[test]
    fn commits_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store
                .commit("g1", &[("orders", 0, 10), ("orders", 1, 20)], 1_000)
                .unwrap();
            store.commit("g2", &[("payments", 3, 7)], 2_000).unwrap();
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g1", "orders", 0), Some(10));
        assert_eq!(store.committed("g1", "orders", 1), Some(20));
        assert_eq!(store.committed("g2", "payments", 3), Some(7));
        assert_eq!(store.committed("g2", "orders", 0), None);
        assert_eq!(store.groups(), vec!["g1".to_owned(), "g2".to_owned()]);
        assert_eq!(
            store.group_offsets("g2"),
            vec![CommittedOffset {
                topic: "payments".into(),
                partition: 3,
                offset: 7,
                commit_time_ms: 2_000,
            }]
        );
    }

    #[test]
    fn open_creates_missing_directories() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a").join("b");
        let store = OffsetStore::open(&dir).unwrap();
        store.commit("g", &[("t", 0, 1)], 0).unwrap();
        drop(store);
        assert_eq!(
            OffsetStore::open(&dir).unwrap().committed("g", "t", 0),
            Some(1)
        );
    }

    #[test]
    fn latest_commit_wins_even_when_it_goes_backwards() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 100)], 1).unwrap();
        store.commit("g", &[("t", 0, 150)], 2).unwrap();
        store.commit("g", &[("t", 0, 50)], 3).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(50));
        drop(store);
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(50));
        assert_eq!(store.group_offsets("g")[0].commit_time_ms, 3);
    }

    #[test]
    fn later_duplicate_in_one_commit_wins() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 5), ("t", 0, 9)], 1).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(9));
        drop(store);
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(9));
    }

    #[test]
    fn group_offsets_are_sorted_by_topic_then_partition() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store
            .commit(
                "g",
                &[("b", 2, 1), ("a", 10, 2), ("b", 0, 3), ("a", 9, 4)],
                0,
            )
            .unwrap();
        let keys: Vec<(String, u32)> = store
            .group_offsets("g")
            .into_iter()
            .map(|c| (c.topic, c.partition))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("a".to_owned(), 9),
                ("a".to_owned(), 10),
                ("b".to_owned(), 0),
                ("b".to_owned(), 2)
            ]
        );
        assert!(store.group_offsets("nobody").is_empty());
    }

    #[test]
    fn empty_commit_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[], 0).unwrap();
        assert_eq!(file_len(dir.path()), 0);
        assert!(store.groups().is_empty());
        assert!(store.commit("bad\n", &[], 0).is_err());
    }

    #[test]
    fn delete_topic_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store.commit("g1", &[("t", 0, 1), ("u", 0, 2)], 0).unwrap();
            store.commit("g2", &[("t", 1, 3)], 0).unwrap();
            store.delete_topic("t").unwrap();
            assert_eq!(store.committed("g1", "t", 0), None);
            assert_eq!(store.groups(), vec!["g1".to_owned()]);
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g1", "t", 0), None);
        assert_eq!(store.committed("g2", "t", 1), None);
        assert_eq!(store.committed("g1", "u", 0), Some(2));
        assert_eq!(store.groups(), vec!["g1".to_owned()]);
    }

    #[test]
    fn delete_group_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store.commit("g1", &[("t", 0, 1)], 0).unwrap();
            store.commit("g2", &[("t", 0, 2)], 0).unwrap();
            store.delete_group("g1").unwrap();
            assert_eq!(store.groups(), vec!["g2".to_owned()]);
        }
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.groups(), vec!["g2".to_owned()]);
        assert_eq!(store.committed("g1", "t", 0), None);
        assert_eq!(store.committed("g2", "t", 0), Some(2));
        // A group can commit again after it was deleted.
        store.commit("g1", &[("t", 0, 5)], 0).unwrap();
        drop(store);
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g1", "t", 0), Some(5));
    }

    #[test]
    fn deleting_what_is_not_there_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1)], 0).unwrap();
        let len = file_len(dir.path());
        store.delete_topic("other").unwrap();
        store.delete_group("other").unwrap();
        assert_eq!(file_len(dir.path()), len);
    }

    #[test]
    fn torn_last_frame_at_every_byte_keeps_earlier_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1), ("u", 2, 3)], 10).unwrap();
        store.delete_topic("u").unwrap();
        store.commit("h", &[("t", 1, 4)], 11).unwrap();
        let earlier = snapshot(&store);
        let start = file_len(dir.path()) as usize;
        store.commit("g", &[("t", 0, 99), ("v", 7, 8)], 12).unwrap();
        drop(store);
        let full = fs::read(log_path(dir.path())).unwrap();
        assert!(full.len() > start + HEADER_LEN);

        for cut in start..full.len() {
            // Nothing valid follows the cut, so replay logs a warning, not an error.
            assert_eq!(find_valid_frame(&full[..cut], start + 1), None);
            let d = dir_with_file(&full[..cut]);
            let store = OffsetStore::open(d.path()).unwrap();
            assert_eq!(snapshot(&store), earlier, "cut at byte {cut}");
            assert_eq!(file_len(d.path()), start as u64, "cut at byte {cut}");
            store.commit("g", &[("t", 0, 42)], 13).unwrap();
            drop(store);
            let store = OffsetStore::open(d.path()).unwrap();
            assert_eq!(store.committed("g", "t", 0), Some(42), "cut at byte {cut}");
            assert_eq!(store.committed("h", "t", 1), Some(4), "cut at byte {cut}");
        }
    }

    #[test]
    fn flipped_byte_in_last_frame_drops_only_that_frame() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1)], 10).unwrap();
        store.commit("h", &[("t", 3, 2)], 10).unwrap();
        let earlier = snapshot(&store);
        let start = file_len(dir.path()) as usize;
        store.commit("g", &[("t", 0, 77), ("w", 1, 5)], 11).unwrap();
        drop(store);
        let full = fs::read(log_path(dir.path())).unwrap();

        for pos in start..full.len() {
            for mask in [0x01u8, 0x80, 0xFF] {
                let mut bytes = full.clone();
                bytes[pos] ^= mask;
                assert_eq!(find_valid_frame(&bytes, start + 1), None);
                let d = dir_with_file(&bytes);
                let store = OffsetStore::open(d.path()).unwrap();
                assert_eq!(snapshot(&store), earlier, "byte {pos} ^ {mask:#x}");
                store.commit("g", &[("t", 0, 78)], 12).unwrap();
                drop(store);
                let store = OffsetStore::open(d.path()).unwrap();
                assert_eq!(store.committed("g", "t", 0), Some(78));
                assert_eq!(store.committed("h", "t", 3), Some(2));
            }
        }
    }

    #[test]
    fn corrupt_frame_in_the_middle_is_skipped_and_the_frames_after_it_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1)], 0).unwrap();
        let first_end = file_len(dir.path()) as usize;
        store.commit("g", &[("t", 1, 2)], 0).unwrap();
        store.commit("g", &[("t", 2, 3)], 0).unwrap();
        store.commit("h", &[("t", 0, 7)], 0).unwrap();
        drop(store);
        let mut bytes = fs::read(log_path(dir.path())).unwrap();
        bytes[first_end + HEADER_LEN + 3] ^= 0x55;
        let d = dir_with_file(&bytes);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(1));
        assert_eq!(
            store.committed("g", "t", 1),
            None,
            "the damaged frame's commit"
        );
        assert_eq!(store.committed("g", "t", 2), Some(3));
        assert_eq!(store.committed("h", "t", 0), Some(7));
        drop(store);
        // The damaged file is kept aside, the live one rewritten clean.
        let aside: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("offsets.log.damaged-"))
            .collect();
        assert_eq!(aside.len(), 1);
        assert_eq!(fs::read(d.path().join(&aside[0])).unwrap(), bytes);
        let rewritten = fs::read(log_path(d.path())).unwrap();
        assert_eq!(
            replay(&log_path(d.path()), &rewritten)
                .unwrap()
                .skipped_frames,
            0
        );
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 2), Some(3));
    }

    #[test]
    fn a_bad_first_frame_loses_only_that_frame() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1)], 0).unwrap();
        store.commit("h", &[("t", 0, 5)], 0).unwrap();
        store.commit("g", &[("u", 3, 9)], 0).unwrap();
        drop(store);
        let mut bytes = fs::read(log_path(dir.path())).unwrap();
        bytes[0] ^= 0xFF; // the first frame's length
        let d = dir_with_file(&bytes);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), None);
        assert_eq!(store.committed("h", "t", 0), Some(5));
        assert_eq!(store.committed("g", "u", 3), Some(9));
    }

    #[test]
    fn a_missing_file_beside_its_backup_refuses_to_open() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 4)], 0).unwrap();
        drop(store);
        // Every open leaves the last good copy.
        let store = OffsetStore::open(dir.path()).unwrap();
        drop(store);
        let backup = dir.path().join(BACKUP_FILE_NAME);
        assert!(backup.exists());
        fs::remove_file(log_path(dir.path())).unwrap();
        match OffsetStore::open(dir.path()) {
            Err(LogError::Metadata { path, recovery, .. }) => {
                assert_eq!(path, log_path(dir.path()));
                assert!(recovery.contains("offsets.log.bak"), "{recovery}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(!log_path(dir.path()).exists(), "nothing was created");
        // The recovery it names works.
        fs::copy(&backup, log_path(dir.path())).unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(4));
    }

    #[test]
    fn zero_filled_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        store.commit("g", &[("t", 0, 1)], 0).unwrap();
        drop(store);
        let mut bytes = fs::read(log_path(dir.path())).unwrap();
        let len = bytes.len();
        bytes.resize(len + 4096, 0);
        let d = dir_with_file(&bytes);
        let store = OffsetStore::open(d.path()).unwrap();
        assert_eq!(store.committed("g", "t", 0), Some(1));
        assert_eq!(file_len(d.path()), len as u64);
    }

    #[test]
    fn crc_valid_but_undecodable_frame_fails_open_and_keeps_file() {
        for body in [
            vec![MAGIC_V1, 9, 0, 0],                          // unknown kind
            vec![0xC2, KIND_DELETE_GROUP, 1, 0, b'g'],        // unknown version
            vec![MAGIC_V1, KIND_DELETE_GROUP, 1, 0, b'g', 0], // trailing byte
            vec![MAGIC_V1, KIND_DELETE_GROUP, 0, 0],          // empty group name
        ] {
            let mut bytes = encode_frame(&Record::DeleteGroup("x".into()));
            let position = bytes.len() as u64;
            bytes.extend_from_slice(&(body.len() as u32).to_le_bytes());
            bytes.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
            bytes.extend_from_slice(&body);
            let d = dir_with_file(&bytes);
            let err = OffsetStore::open(d.path()).unwrap_err();
            assert!(
                matches!(err, LogError::Corrupt { position: p, .. } if p == position),
                "{err:?}"
            );
            assert_eq!(fs::read(log_path(d.path())).unwrap(), bytes);
        }
    }

    #[test]
    fn compaction_keeps_state_identical_and_shrinks_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open_with(dir.path(), 64).unwrap();
        let mut max_len = 0;
        for i in 0..300u64 {
            let group = format!("g{}", i % 3);
            let topic = format!("t{}", i % 2);
            store
                .commit(&group, &[(&topic, (i % 4) as u32, i)], i as i64)
                .unwrap();
            max_len = max_len.max(file_len(dir.path()));
        }
        let before = snapshot(&store);
        let inner = store.lock();
        assert!(inner.frames <= 64, "frames {}", inner.frames);
        assert_eq!(inner.len, file_len(dir.path()));
        drop(inner);
        drop(store);
        // Without compaction the file would hold 300 single-entry frames.
        let one_frame = encode_frame(&Record::Commit {
            group: "g0".into(),
            entries: vec![(
                "t0".into(),
                0,
                Entry {
                    offset: 0,
                    commit_time_ms: 0,
                },
            )],
        })
        .len() as u64;
        assert!(
            max_len < 300 * one_frame / 3,
            "max {max_len}, frame {one_frame}"
        );
        assert!(file_len(dir.path()) < max_len);
        assert!(!dir.path().join(TMP_FILE_NAME).exists());
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(snapshot(&store), before);
    }

    #[test]
    fn compaction_triggers_at_the_default_threshold() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        let entries: Vec<(String, u32)> = (0..4).map(|p| ("topic".to_owned(), p)).collect();
        let mut lens = Vec::new();
        for i in 0..(COMPACT_MIN_FRAMES + 1) {
            let (topic, partition) = &entries[(i % 4) as usize];
            store.commit("group", &[(topic, *partition, i)], 7).unwrap();
            lens.push(file_len(dir.path()));
        }
        let before = snapshot(&store);
        drop(store);
        // The 1025th frame passed max(1024, 4 × 4) and compacted to one frame.
        assert!(lens[lens.len() - 1] < lens[lens.len() - 2] / 100);
        let store = OffsetStore::open(dir.path()).unwrap();
        assert_eq!(snapshot(&store), before);
        assert_eq!(store.lock().frames, 1);
    }

    #[test]
    fn compaction_splits_huge_groups_into_several_frames() {
        let mut state = State::default();
        let topic = "t".repeat(MAX_TOPIC_LEN);
        let per_entry = ENTRY_FIXED_LEN + topic.len();
        let n = MAX_BODY_LEN / per_entry + 10;
        let offsets = state.groups.entry("g".into()).or_default();
        for p in 0..n as u32 {
            offsets.insert(
                (topic.clone(), p),
                Entry {
                    offset: p as u64,
                    commit_time_ms: 1,
                },
            );
        }
        let (data, frames) = encode_state(&state);
        assert_eq!(frames, 2);
        let replayed = replay(Path::new("mem"), &data).unwrap();
        assert_eq!(replayed.frames, 2);
        assert_eq!(replayed.valid_len, data.len() as u64);
        assert_eq!(replayed.state, state);
    }

    #[test]
    fn leftover_tmp_file_is_deleted_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = OffsetStore::open(dir.path()).unwrap();
            store.commit("g", &[("t", 0, 1)], 0).unwrap();
        }
        fs::write(dir.path().join(TMP_FILE_NAME), b"half a compaction").unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        assert!(!dir.path().join(TMP_FILE_NAME).exists());
        assert_eq!(store.committed("g", "t", 0), Some(1));
    }

    #[test]
    fn invalid_group_names_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        let long = "g".repeat(256);
        for bad in ["", "a\nb", "tab\there", "del\u{7f}", long.as_str()] {
            let err = store.commit(bad, &[("t", 0, 1)], 0).unwrap_err();
            assert!(
                matches!(&err, LogError::InvalidArgument(m) if m.contains(&format!("{bad:?}"))),
                "{err:?}"
            );
            assert!(matches!(
                store.delete_group(bad),
                Err(LogError::InvalidArgument(_))
            ));
        }
        store.commit(&"g".repeat(255), &[("t", 0, 1)], 0).unwrap();
        store.commit("ünïcode group", &[("t", 0, 1)], 0).unwrap();
        assert_eq!(store.groups().len(), 2);
    }

    #[test]
    fn invalid_topic_names_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        let long = "t".repeat(250);
        for bad in ["", long.as_str()] {
            assert!(matches!(
                store.commit("g", &[("ok", 0, 1), (bad, 0, 1)], 0),
                Err(LogError::InvalidTopicName { .. })
            ));
            assert!(matches!(
                store.delete_topic(bad),
                Err(LogError::InvalidTopicName { .. })
            ));
        }
        // A rejected call applies nothing, not even its valid entries.
        assert!(store.groups().is_empty());
        assert_eq!(file_len(dir.path()), 0);
        store.commit("g", &[(&"t".repeat(249), 0, 1)], 0).unwrap();
    }

    #[test]
    fn oversized_commit_is_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let store = OffsetStore::open(dir.path()).unwrap();
        let topic = "t".repeat(MAX_TOPIC_LEN);
        let n = MAX_BODY_LEN / (ENTRY_FIXED_LEN + topic.len()) + 1;
        let commits: Vec<(&str, u32, u64)> =
            (0..n as u32).map(|p| (topic.as_str(), p, 0)).collect();
        assert!(matches!(
            store.commit("g", &commits, 0),
            Err(LogError::InvalidArgument(_))
        ));
        assert_eq!(file_len(dir.path()), 0);
    }

    #[test]
    fn concurrent_commits_from_threads_all_land() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(OffsetStore::open(dir.path()).unwrap());
        let handles: Vec<_> = (0..4u32)
            .map(|t| {
                let store = Arc::clone(&store);
                std::thread::spawn(move || {
                    for i in 0..10u64 {
                        store.commit("g", &[("t", t, i)], 0).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        drop(store);
        let store = OffsetStore::open(dir.path()).unwrap();
        for t in 0..4 {
            assert_eq!(store.committed("g", "t", t), Some(9));
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Commit(usize, Vec<(usize, u32, u64)>, i64),
        DeleteTopic(usize),
        DeleteGroup(usize),
        Reopen,
    }

    const GROUPS: [&str; 3] = ["alpha", "beta", "gamma"];
    const TOPICS: [&str; 3] = ["orders", "payments", "t"];

    fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            6 => (
                0..GROUPS.len(),
                proptest::collection::vec((0..TOPICS.len(), 0..3u32, any::<u64>()), 0..4),
                any::<i64>()
            )
                .prop_map(|(g, c, t)| Op::Commit(g, c, t)),
            1 => (0..TOPICS.len()).prop_map(Op::DeleteTopic),
            1 => (0..GROUPS.len()).prop_map(Op::DeleteGroup),
            1 => Just(Op::Reopen),
        ]
    }

    type Model = HashMap<(String, String, u32), (u64, i64)>;

    fn check_against_model(store: &OffsetStore, model: &Model) {
        let mut groups: Vec<String> = model.keys().map(|(g, _, _)| g.clone()).collect();
        groups.sort();
        groups.dedup();
        assert_eq!(store.groups(), groups);
        for g in GROUPS {
            let mut expected: Vec<CommittedOffset> = model
                .iter()
                .filter(|((mg, _, _), _)| mg == g)
                .map(|((_, t, p), (o, ts))| CommittedOffset {
                    topic: t.clone(),
                    partition: *p,
                    offset: *o,
                    commit_time_ms: *ts,
                })
                .collect();
            expected.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
            assert_eq!(store.group_offsets(g), expected);
            for t in TOPICS {
                for p in 0..3 {
                    let key = (g.to_owned(), t.to_owned(), p);
                    assert_eq!(store.committed(g, t, p), model.get(&key).map(|v| v.0));
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 32,
            failure_persistence: None,
            ..proptest::test_runner::Config::default()
        })]

        #[test]
        fn random_ops_match_a_hashmap_model(
            ops in proptest::collection::vec(op_strategy(), 1..40),
        ) {
            let dir = tempfile::tempdir().unwrap();
            // A low compaction floor makes compactions happen within a case.
            let mut store = OffsetStore::open_with(dir.path(), 4).unwrap();
            let mut model = Model::new();
            for op in ops {
                match op {
                    Op::Commit(g, commits, time) => {
                        let commits: Vec<(&str, u32, u64)> =
                            commits.iter().map(|&(t, p, o)| (TOPICS[t], p, o)).collect();
                        store.commit(GROUPS[g], &commits, time).unwrap();
                        for (t, p, o) in commits {
                            model.insert((GROUPS[g].to_owned(), t.to_owned(), p), (o, time));
                        }
                    }
                    Op::DeleteTopic(t) => {
                        store.delete_topic(TOPICS[t]).unwrap();
                        model.retain(|(_, mt, _), _| mt != TOPICS[t]);
                    }
                    Op::DeleteGroup(g) => {
                        store.delete_group(GROUPS[g]).unwrap();
                        model.retain(|(mg, _, _), _| mg != GROUPS[g]);
                    }
                    Op::Reopen => {
                        drop(store);
                        store = OffsetStore::open_with(dir.path(), 4).unwrap();
                    }
                }
                check_against_model(&store, &model);
            }
            drop(store);
            let store = OffsetStore::open(dir.path()).unwrap();
            check_against_model(&store, &model);
        }
    }
}
