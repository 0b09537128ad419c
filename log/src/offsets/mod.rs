//! The durable consumer-group offset store.
//!
//! Owns the committed offset of every (consumer group, topic, partition)
//! and its one on-disk file, `offsets.log`, in the store's directory (the
//! byte layout is in `FORMAT.md`, section "Consumer offsets file"). The
//! parts:
//!
//! - [`frame`]: the frame codec — header, kinds, encode and decode; no I/O.
//! - [`state`]: the live state, and replaying a file image into it (and
//!   back into frames, for compaction).
//! - [`store`]: [`OffsetStore`], the file, its backup and compaction; every
//!   write and fdatasync goes through [`crate::io`], the fault-injection
//!   seam.
//! - [`damage`]: what a start does with a file it finds missing, empty or
//!   damaged — refuse, naming the file and the recovery, or keep a copy
//!   aside and go on.
//!
//! Invariants:
//! - The file is a sequence of CRC'd frames opening with a start frame
//!   (written with the file, through a temporary file and a rename, so a
//!   file of this version is never empty); replaying it in order yields
//!   exactly the in-memory state. A mutation is applied in memory only
//!   after its frame was written and fdatasync'ed, so every acknowledged
//!   call survives a crash and an unacknowledged one never half-applies
//!   (one call is one frame).
//! - A start never deletes offsets data and never goes on silently over
//!   lost commits. Before it changes the file (skipping damage, cutting a
//!   tail) it keeps the file as it was as `offsets.log.damaged-<ms>`.
//!   Replay skips a frame that fails its CRC when a valid frame follows
//!   (damage inside written data: only that one call's commits are lost,
//!   and the error log names them); the live file is then rewritten from
//!   the replayed state. A torn or corrupt stretch at the very end (the
//!   write a crash interrupted) is cut off, with a warning. A frame that
//!   passes its CRC but cannot be decoded makes `open` fail with `Corrupt`
//!   and leaves the file untouched.
//! - `offsets.log.bak` holds the last good copy (written at every open and
//!   after every compaction). `open` fails with `Metadata`, changing
//!   nothing, when the file is missing beside its backup, empty (0 bytes),
//!   or holds not one valid frame; the error names the file and the
//!   recovery (restore the backup when it holds a valid copy, or move the
//!   files away to start with no committed offsets) — a lost file never
//!   silently becomes "no group has committed anything".
//! - A file without a start frame (written before the kind existed) is
//!   read as before and rewritten with one at open.
//! - When the file holds more than `max(1024, 4 × live entries)` frames it
//!   is rewritten from the live state through `offsets.log.tmp`, fdatasync,
//!   rename and directory fsync, so a crash leaves either the old or the new
//!   file, never a mix. A leftover `offsets.log.tmp` is deleted at open.
//! - After an fdatasync (or the directory fsync of a compaction) fails, the
//!   store refuses further mutations until it is reopened, because what is on
//!   disk is no longer known.

mod damage;
mod frame;
mod state;
mod store;
#[cfg(test)]
mod tests;

pub use store::OffsetStore;

use crate::error::{LogError, Result};
use crate::topic::MAX_TOPIC_NAME_LEN;

/// Longest consumer group name, in bytes.
pub const MAX_GROUP_NAME_LEN: usize = 255;

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

/// Checks a consumer group name: 1..=255 bytes, no ASCII control character.
pub fn validate_group(group: &str) -> Result<()> {
    let reason = if group.is_empty() {
        "must not be empty"
    } else if group.len() > MAX_GROUP_NAME_LEN {
        "must be at most 255 bytes"
    } else if group.bytes().any(|b| b.is_ascii_control()) {
        "must not contain ASCII control characters"
    } else {
        return Ok(());
    };
    Err(LogError::InvalidGroupName {
        name: group.to_owned(),
        reason,
    })
}

/// Checks the length of a topic name (the full rule is
/// [`crate::topic::validate_topic_name`], checked where topics are made).
fn validate_topic(topic: &str) -> Result<()> {
    let reason = if topic.is_empty() {
        "must not be empty"
    } else if topic.len() > MAX_TOPIC_NAME_LEN {
        "must be at most 249 bytes"
    } else {
        return Ok(());
    };
    Err(LogError::InvalidTopicName {
        name: topic.to_owned(),
        reason,
    })
}

/// Replays `data` for the fuzz target ([`crate::fuzzing::offsets_replay`]),
/// checking what replay promises.
pub(crate) fn check_replay(path: &std::path::Path, data: &[u8]) {
    if let Ok(replayed) = state::replay(path, data) {
        assert!(replayed.valid_len as usize <= data.len());
        // What replay kept re-encodes to frames that replay to the same state.
        let (encoded, _) = state::encode_state(&replayed.state);
        let again = state::replay(path, &encoded).expect("re-encoded state replays");
        assert_eq!(again.state, replayed.state);
        assert_eq!(again.skipped_frames, 0);
    }
}
