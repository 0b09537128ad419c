//! [`OffsetStore`]: the file `offsets.log` (created with its start frame),
//! its backup `offsets.log.bak` and compaction; at open, a file found
//! missing, empty or damaged is refused or kept aside through
//! [`super::damage`]. Every write and fdatasync goes through [`crate::io`]
//! (so tests inject failed writes and fsyncs, and simulate crashes) and
//! every other step that changes the disk passes [`crash::step`].

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use super::damage::{empty_file, keep_aside, missing_beside_backup, no_valid_frame, report_kept};
use super::frame::{encode_frame, Entry, Record, HEADER_LEN, MAX_BODY_LEN};
use super::state::{encode_state, replay, State};
use super::{validate_group, validate_topic, CommittedOffset};
use crate::error::{LogError, Result};
use crate::io::{self as file_io, crash, sync_dir, FaultInjector};

/// Name of the store's file inside its directory.
pub(super) const FILE_NAME: &str = "offsets.log";
/// Name of the compaction's temporary file inside the store's directory.
pub(super) const TMP_FILE_NAME: &str = "offsets.log.tmp";
/// Name of the last good copy inside the store's directory.
pub(super) const BACKUP_FILE_NAME: &str = "offsets.log.bak";
/// Name of the backup's temporary file inside the store's directory.
const BACKUP_TMP_FILE_NAME: &str = "offsets.log.bak.tmp";

/// Compaction never runs while the file holds at most this many frames.
pub(super) const COMPACT_MIN_FRAMES: u64 = 1024;
/// Compaction runs when frames exceed this many times the live entries.
const COMPACT_FACTOR: u64 = 4;

/// Durable committed offsets per (group, topic, partition). Thread-safe (&self; internal Mutex).
pub struct OffsetStore {
    path: PathBuf,
    inner: Mutex<Inner>,
}

/// Mutable part of the store, behind the mutex.
pub(super) struct Inner {
    dir: PathBuf,
    path: PathBuf,
    /// Handle on `offsets.log` (after a compaction, on the renamed new file).
    file: File,
    /// Bytes of valid frames in the file; the next frame is written here.
    pub(super) len: u64,
    /// Frames in the file.
    pub(super) frames: u64,
    state: State,
    /// Why mutations are refused, once an fsync failed.
    failed: Option<String>,
    /// Lower bound of `COMPACT_MIN_FRAMES`, lowered by tests.
    compact_min_frames: u64,
    /// After a failed compaction, no new attempt before this many frames.
    compact_retry_at: u64,
    /// Injected I/O failures (tests only; `None` in production).
    faults: Option<Arc<FaultInjector>>,
}

impl OffsetStore {
    /// Opens or creates the store in `dir` (creating the dir), replaying its
    /// file. Fails with [`LogError::Metadata`], changing nothing, when the
    /// file is missing beside its backup, empty, or holds no valid frame.
    pub fn open(dir: &Path) -> Result<OffsetStore> {
        Self::open_with(dir, COMPACT_MIN_FRAMES, None)
    }

    /// `open` whose writes and fdatasyncs can be made to fail by `faults`
    /// (the log passes its [`LogConfig::faults`](crate::LogConfig)).
    pub fn open_with_faults(dir: &Path, faults: Option<Arc<FaultInjector>>) -> Result<OffsetStore> {
        Self::open_with(dir, COMPACT_MIN_FRAMES, faults)
    }

    /// `open` with the compaction floor as a parameter (tests lower it).
    pub(super) fn open_with(
        dir: &Path,
        compact_min_frames: u64,
        faults: Option<Arc<FaultInjector>>,
    ) -> Result<OffsetStore> {
        create_dir(dir)?;
        for leftover in [TMP_FILE_NAME, BACKUP_TMP_FILE_NAME] {
            remove_leftover(&dir.join(leftover))?;
        }
        let path = dir.join(FILE_NAME);
        let backup = dir.join(BACKUP_FILE_NAME);
        if !path.exists() {
            if backup.exists() {
                return Err(missing_beside_backup(path, &backup));
            }
            create_file(dir, &path, faults.as_deref())?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| LogError::io(&path, e))?;
        let mut data = Vec::new();
        file.read_to_end(&mut data)
            .map_err(|e| LogError::io(&path, e))?;
        if data.is_empty() {
            return Err(empty_file(path, &backup));
        }
        let replayed = replay(&path, &data)?;
        if replayed.frames == 0 {
            return Err(no_valid_frame(path, &backup, &data, &replayed));
        }
        let damaged = replayed.skipped_frames > 0;
        // Before the start changes the file, it keeps it as it was.
        if damaged || replayed.bad_tail.is_some() {
            let aside = keep_aside(dir, &data, faults.as_deref())?;
            report_kept(&path, &aside, &replayed, data.len() as u64);
        }
        let rewrite = damaged || !replayed.has_start;
        if !rewrite && replayed.bad_tail.is_some() {
            crash::step(&path, "truncate")?;
            file.set_len(replayed.valid_len)
                .map_err(|e| LogError::io(&path, e))?;
            file_io::sync_data(&file, &path, faults.as_deref())?;
        }

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
            faults,
        };
        if rewrite {
            if !replayed.has_start && !damaged {
                tracing::info!(
                    path = %path.display(),
                    "rewriting the offsets file with the start frame it lacks (written by an earlier version)"
                );
            }
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

    /// The mutable part, for the store's methods (and its tests).
    pub(super) fn lock(&self) -> MutexGuard<'_, Inner> {
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

/// Creates `dir` if missing, fsyncing its parent so the new entry is durable.
fn create_dir(dir: &Path) -> Result<()> {
    let dir_existed = dir.is_dir();
    fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
    if !dir_existed {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        sync_dir(parent)?;
    }
    Ok(())
}

/// Deletes a temporary file an interrupted compaction or backup left.
fn remove_leftover(tmp_path: &Path) -> Result<()> {
    match fs::remove_file(tmp_path) {
        Ok(()) => tracing::warn!(
            path = %tmp_path.display(),
            "removed a leftover temporary offsets file (a compaction or backup was interrupted)"
        ),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(LogError::io(tmp_path, e)),
    }
    Ok(())
}

/// Writes a new `offsets.log` holding only the start frame (temporary
/// file, fdatasync, rename, directory fsync): the file never exists
/// without it.
fn create_file(dir: &Path, path: &Path, faults: Option<&FaultInjector>) -> Result<()> {
    let tmp = dir.join(TMP_FILE_NAME);
    write_new_file(&tmp, &encode_frame(&Record::Start), faults)?;
    crash::step(path, "rename")?;
    fs::rename(&tmp, path).map_err(|e| LogError::io(path, e))?;
    sync_dir(dir)
}

/// Creates (truncating) `path` and writes and fdatasyncs `data` into it;
/// on failure the partial file is removed.
pub(super) fn write_new_file(
    path: &Path,
    data: &[u8],
    faults: Option<&FaultInjector>,
) -> Result<File> {
    crash::step(path, "create")?;
    let written = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| LogError::io(path, e))
        .and_then(|mut file| {
            file_io::write_all(&mut file, path, data, faults)?;
            file_io::sync_data(&file, path, faults)?;
            Ok(file)
        });
    if written.is_err() && !crash::crashed() {
        let _ = fs::remove_file(path);
    }
    written
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
        let faults = self.faults.as_deref();
        let written = self
            .file
            .seek(SeekFrom::Start(self.len))
            .map_err(|e| LogError::io(&self.path, e))
            .and_then(|_| file_io::write_all(&mut self.file, &self.path, frame, faults));
        if let Err(e) = written {
            // Take back a partial frame so the next frame is not written
            // after garbage (which replay would cut off together with it).
            // (After a simulated crash nothing more reaches the disk.)
            if crash::crashed() {
                return Err(e);
            }
            if let Err(undo) = self.file.set_len(self.len) {
                self.fail(format!(
                    "could not remove a partly written frame at byte {}: {undo}",
                    self.len
                ));
            }
            return Err(e);
        }
        if let Err(e) = file_io::sync_data(&self.file, &self.path, faults) {
            self.fail(format!("fdatasync failed: {e}"));
            return Err(e);
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
        write_new_file(&tmp, &data, self.faults.as_deref())?;
        let backup = self.dir.join(BACKUP_FILE_NAME);
        crash::step(&backup, "rename")?;
        fs::rename(&tmp, &backup).map_err(|e| LogError::io(&backup, e))?;
        sync_dir(&self.dir)
    }

    /// Rewrites the live state to the temporary file, fdatasyncs it,
    /// renames it over `offsets.log` and fsyncs the directory.
    pub(super) fn compact(&mut self) -> Result<()> {
        let tmp_path = self.dir.join(TMP_FILE_NAME);
        let (data, frames) = encode_state(&self.state);
        let tmp = write_new_file(&tmp_path, &data, self.faults.as_deref())?;
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
