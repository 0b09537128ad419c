//! The frame codec of `offsets.log`: one frame per store call (and the
//! start frame opening the file), each a length, a CRC and a body opening
//! with the magic/version byte and the kind (FORMAT.md §5.1). Pure
//! functions over bytes; no I/O.

use super::{validate_group, validate_topic};

/// Magic/version byte opening every frame body: format version 1.
pub(super) const MAGIC_V1: u8 = 0xC1;
/// Frame kind: offsets committed for one group.
pub(super) const KIND_COMMIT: u8 = 1;
/// Frame kind: every group's offsets of one topic forgotten.
pub(super) const KIND_DELETE_TOPIC: u8 = 2;
/// Frame kind: all offsets of one group forgotten.
pub(super) const KIND_DELETE_GROUP: u8 = 3;
/// Frame kind: the start frame, the first of every file (no fields; it
/// changes nothing). A file without one was cut or replaced, or written
/// before the kind existed.
pub(super) const KIND_START: u8 = 4;

/// Bytes before the body: length u32 and CRC u32.
pub(super) const HEADER_LEN: usize = 8;
/// Smallest body that can be valid (magic and kind).
pub(super) const MIN_BODY_LEN: usize = 2;
/// Largest body written or accepted on replay (16 MiB).
pub(super) const MAX_BODY_LEN: usize = 16 << 20;
/// Fixed bytes of a commit body besides the group name: magic, kind,
/// group length u16, entry count u32.
pub(super) const COMMIT_FIXED_LEN: usize = 1 + 1 + 2 + 4;
/// Fixed bytes of one commit entry besides the topic name: topic length
/// u16, partition u32, offset u64, commit time i64.
pub(super) const ENTRY_FIXED_LEN: usize = 2 + 4 + 8 + 8;

/// The value stored per (group, topic, partition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    /// The committed offset.
    pub(super) offset: u64,
    /// Caller-supplied commit time, ms since the epoch.
    pub(super) commit_time_ms: i64,
}

/// One decoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Record {
    /// Offsets committed for one group: (topic, partition, entry).
    Commit {
        group: String,
        entries: Vec<(String, u32, Entry)>,
    },
    /// Every group's offsets of one topic forgotten.
    DeleteTopic(String),
    /// All offsets of one group forgotten.
    DeleteGroup(String),
    /// The start frame opening the file.
    Start,
}

/// Why a frame cannot be read as a whole, CRC-valid frame.
pub(super) enum BadFrame {
    /// The file ends inside it.
    Torn(&'static str),
    /// Its length is impossible or its CRC does not match.
    Corrupt(&'static str),
}

/// The body of the frame at `pos` if it is whole and its CRC matches.
pub(super) fn check_frame(data: &[u8], pos: usize) -> Result<&[u8], BadFrame> {
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
pub(super) fn find_valid_frame(data: &[u8], from: usize) -> Option<usize> {
    (from..data.len().saturating_sub(HEADER_LEN + MIN_BODY_LEN - 1))
        .find(|&pos| data[pos + HEADER_LEN] == MAGIC_V1 && check_frame(data, pos).is_ok())
}

/// Cursor over a frame body.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.data.len() < n {
            return Err("frame body ends inside a field".to_owned());
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    fn string(&mut self) -> Result<String, String> {
        let len = u16::from_le_bytes(self.array()?) as usize;
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| "name is not valid UTF-8".to_owned())
    }

    fn group(&mut self) -> Result<String, String> {
        let group = self.string()?;
        validate_group(&group).map_err(|e| e.to_string())?;
        Ok(group)
    }

    fn topic(&mut self) -> Result<String, String> {
        let topic = self.string()?;
        validate_topic(&topic).map_err(|e| e.to_string())?;
        Ok(topic)
    }
}

/// Decodes a CRC-valid frame body.
pub(super) fn decode_body(body: &[u8]) -> Result<Record, String> {
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
        KIND_START => Record::Start,
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
pub(super) fn encode_frame(record: &Record) -> Vec<u8> {
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
        Record::Start => buf.push(KIND_START),
    }
    let body_len = (buf.len() - HEADER_LEN) as u32;
    let crc = crc32fast::hash(&buf[HEADER_LEN..]);
    buf[0..4].copy_from_slice(&body_len.to_le_bytes());
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
    buf
}
