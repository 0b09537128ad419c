//! The store's live state, and the two directions between it and a file
//! image: replaying frames into it (at open, skipping damage in the middle
//! and reporting a bad tail, as the module invariants say; the store
//! decides what to do with the tail) and encoding it as frames, after the
//! start frame (compaction, backup, a new file).

use std::collections::BTreeMap;
use std::path::Path;

use super::frame::{
    check_frame, decode_body, encode_frame, find_valid_frame, BadFrame, Entry, Record,
    COMMIT_FIXED_LEN, ENTRY_FIXED_LEN, HEADER_LEN, MAX_BODY_LEN,
};
use crate::error::{LogError, Result};

/// Offsets of one group, keyed and sorted by (topic, partition).
pub(super) type GroupOffsets = BTreeMap<(String, u32), Entry>;

/// The live state: what replaying the file yields.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct State {
    /// Every group with at least one committed offset.
    pub(super) groups: BTreeMap<String, GroupOffsets>,
}

impl State {
    /// Committed (group, topic, partition) entries.
    pub(super) fn live_entries(&self) -> usize {
        self.groups.values().map(BTreeMap::len).sum()
    }

    /// True if some group committed an offset of `topic`.
    pub(super) fn has_topic(&self, topic: &str) -> bool {
        self.groups
            .values()
            .any(|g| g.keys().any(|(t, _)| t == topic))
    }

    /// Applies one frame's change.
    pub(super) fn apply(&mut self, record: Record) {
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
            Record::Start => {}
        }
    }
}

/// Result of replaying a file image.
pub(super) struct Replayed {
    /// The state the good frames give.
    pub(super) state: State,
    /// Good frames.
    pub(super) frames: u64,
    /// Whether the image opens with a good start frame.
    pub(super) has_start: bool,
    /// Bytes up to the end of the last good frame.
    pub(super) valid_len: u64,
    /// Damaged frames skipped because valid ones followed them.
    pub(super) skipped_frames: u64,
    /// The bad stretch after the last good frame, if any: where it starts
    /// and what is wrong there (it runs to the end of the image).
    pub(super) bad_tail: Option<(u64, String)>,
}

/// Replays the frames of `data`. A torn or CRC-failed frame followed by a
/// valid one is skipped (counted in `skipped_frames`, logged); one with
/// nothing valid after it ends the replay (`valid_len` stops there,
/// `bad_tail` says why). A CRC-valid frame that does not decode is an
/// error.
pub(super) fn replay(path: &Path, data: &[u8]) -> Result<Replayed> {
    let mut state = State::default();
    let mut frames = 0u64;
    let mut has_start = false;
    let mut skipped_frames = 0u64;
    let mut pos = 0usize;
    let mut valid_len = 0usize;
    let mut bad_tail = None;
    while pos < data.len() {
        match check_frame(data, pos) {
            Ok(body) => {
                let record = decode_body(body)
                    .map_err(|reason| LogError::corrupt(path, pos as u64, reason))?;
                has_start |= pos == 0 && record == Record::Start;
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
                        bad_tail = Some((pos as u64, format!("{what} frame: {reason}")));
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
        has_start,
        valid_len: valid_len as u64,
        skipped_frames,
        bad_tail,
    })
}

/// Encodes the live state as the start frame followed by commit frames
/// (one per group, split where a frame would pass the size limit); returns
/// the bytes and frame count.
pub(super) fn encode_state(state: &State) -> (Vec<u8>, u64) {
    let mut data = encode_frame(&Record::Start);
    let mut frames = 1u64;
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
