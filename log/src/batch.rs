//! The record-batch codec: bytes <-> records, with the CRC. No I/O.
//!
//! A batch is what one append writes: a fixed 52-byte header followed by an
//! optional idempotency key and the records. `log/FORMAT.md` describes every
//! byte; the `*_OFFSET` constants below are that table, shared by the encoder
//! and the decoder. Invariant: a [`BatchView`] only exists for bytes that
//! passed [`BatchView::parse`] (length, CRC, magic, version, structure), or
//! the same checks in two steps ([`FramedBatch::parse`], then
//! [`FramedBatch::check`]), so iterating its records cannot fail.

use bytes::{BufMut, Bytes};

use crate::compression::{self, Compression};
use crate::kafka_batch::{self, KafkaRecords};

/// Byte position of `batch_length` (u32): total bytes of the batch.
pub const LENGTH_OFFSET: usize = 0;
/// Byte position of `crc` (u32): CRC-32 of bytes `[CRC_START, batch_length)`.
pub const CRC_OFFSET: usize = 4;
/// First byte covered by the CRC.
pub const CRC_START: usize = 8;
/// Byte position of `magic` (u8).
pub const MAGIC_OFFSET: usize = 8;
/// Byte position of `version` (u8).
pub const VERSION_OFFSET: usize = 9;
/// Byte position of `attributes` (u16: [`COMPACTED`], and a version-2
/// batch's codec).
pub const ATTRIBUTES_OFFSET: usize = 10;
/// The `attributes` bit of a batch the cleaner wrote (FORMAT.md §2.9): its
/// base offset may be past the offset after the batch before it (the
/// records between were compacted away). Allowed in versions 1 and 2.
pub const COMPACTED: u16 = 0x0008;
/// Byte position of `record_count` (u32).
pub const RECORD_COUNT_OFFSET: usize = 12;
/// Byte position of `base_offset` (u64).
pub const BASE_OFFSET_OFFSET: usize = 16;
/// Byte position of `first_timestamp` (i64, ms).
pub const FIRST_TIMESTAMP_OFFSET: usize = 24;
/// Byte position of `max_timestamp` (i64, ms).
pub const MAX_TIMESTAMP_OFFSET: usize = 32;
/// Byte position of `append_time` (i64, ms): when the writer appended it.
pub const APPEND_TIME_OFFSET: usize = 40;
/// Byte position of `idempotency_key_len` (u16).
pub const KEY_LEN_OFFSET: usize = 48;
/// Byte position of a reserved u16 (0 in version 1).
pub const RESERVED_OFFSET: usize = 50;
/// Size of the fixed header; the idempotency key starts here.
pub const HEADER_LEN: usize = 52;

/// The magic byte that starts the CRC-covered part of every batch.
pub const MAGIC: u8 = 0x4B; // 'K'
/// The on-disk format version this code writes and reads.
pub const VERSION: u8 = 1;
/// Longest idempotency key a batch can carry.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;
/// Bytes of a record's fixed fields: timestamp, key length, value length,
/// header count.
pub const RECORD_OVERHEAD: usize = 8 + 4 + 4 + 2;
/// Bytes of a header's fixed fields: name length, value length.
pub const HEADER_OVERHEAD: usize = 2 + 4;

const _: () = assert!(HEADER_LEN == RESERVED_OFFSET + 2);
const _: () = assert!(CRC_START == CRC_OFFSET + 4);

/// One record header: a name and an opaque value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// Header name (UTF-8).
    pub name: String,
    /// Header value.
    pub value: Bytes,
}

/// A record as a producer hands it to the log.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewRecord {
    /// Optional key (partitioning, compaction, joins).
    pub key: Option<Bytes>,
    /// The payload.
    pub value: Bytes,
    /// Event or create time in ms since the epoch; `None` = append time.
    pub timestamp: Option<i64>,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

impl NewRecord {
    /// A record with just a value.
    pub fn value(value: impl Into<Bytes>) -> Self {
        NewRecord {
            value: value.into(),
            ..Default::default()
        }
    }

    /// Bytes this record takes inside a batch.
    pub fn encoded_len(&self) -> usize {
        RECORD_OVERHEAD
            + self.key.as_ref().map_or(0, |k| k.len())
            + self.value.len()
            + self
                .headers
                .iter()
                .map(|h| HEADER_OVERHEAD + h.name.len() + h.value.len())
                .sum::<usize>()
    }
}

/// A stored record, as read back. Key, value and header values share the
/// batch's buffer (no copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Offset in its partition.
    pub offset: u64,
    /// Timestamp in ms since the epoch.
    pub timestamp: i64,
    /// Key, if any.
    pub key: Option<Bytes>,
    /// Value.
    pub value: Bytes,
    /// Headers, in order.
    pub headers: Vec<Header>,
}

impl From<Record> for NewRecord {
    /// The record as appended again: its key, value, headers and
    /// timestamp (no longer left to the append time).
    fn from(r: Record) -> NewRecord {
        NewRecord {
            key: r.key,
            value: r.value,
            timestamp: Some(r.timestamp),
            headers: r.headers,
        }
    }
}

/// What the encoder needs besides the records.
#[derive(Debug, Clone, Copy)]
pub struct BatchMeta<'a> {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Append time in ms; also the timestamp of records that have none.
    pub append_time: i64,
    /// Idempotency key, at most [`MAX_IDEMPOTENCY_KEY_LEN`] bytes.
    pub idempotency_key: Option<&'a [u8]>,
}

/// Bytes a batch of these records takes on disk.
pub fn encoded_len(records: &[NewRecord], idempotency_key: Option<&[u8]>) -> usize {
    HEADER_LEN
        + idempotency_key.map_or(0, |k| k.len())
        + records.iter().map(NewRecord::encoded_len).sum::<usize>()
}

/// Appends the encoded batch to `out` and returns its length.
///
/// The caller has validated the inputs: at least one record, a key of at
/// most [`MAX_IDEMPOTENCY_KEY_LEN`] bytes, header names under 64 KiB, and a
/// total under 4 GiB (the log's limits are far lower).
pub fn encode(out: &mut Vec<u8>, meta: BatchMeta<'_>, records: &[NewRecord]) -> usize {
    assert!(!records.is_empty(), "a batch holds at least one record");
    let len = encoded_len(records, meta.idempotency_key);
    let start = out.len();
    out.reserve(len);

    let timestamp = |r: &NewRecord| r.timestamp.unwrap_or(meta.append_time);
    let first_timestamp = timestamp(&records[0]);
    let max_timestamp = records
        .iter()
        .map(timestamp)
        .max()
        .unwrap_or(first_timestamp);
    let count = records.len() as u32;
    put_header(out, len, count, (first_timestamp, max_timestamp), meta);
    for record in records {
        out.put_i64_le(timestamp(record));
        match &record.key {
            Some(k) => {
                out.put_i32_le(k.len() as i32);
                out.put_slice(k);
            }
            None => out.put_i32_le(-1),
        }
        out.put_u32_le(record.value.len() as u32);
        out.put_slice(&record.value);
        out.put_u16_le(record.headers.len() as u16);
        for h in &record.headers {
            out.put_u16_le(h.name.len() as u16);
            out.put_slice(h.name.as_bytes());
            out.put_u32_le(h.value.len() as u32);
            out.put_slice(&h.value);
        }
    }
    debug_assert_eq!(out.len() - start, len);
    seal(out, start);
    len
}

/// Appends the fixed header and the idempotency key of a batch of `len`
/// bytes and `count` records whose timestamps run from `timestamps.0`
/// (the first record's) up to `timestamps.1` (the largest), its CRC left
/// 0 for [`seal`].
fn put_header(
    out: &mut Vec<u8>,
    len: usize,
    count: u32,
    timestamps: (i64, i64),
    meta: BatchMeta<'_>,
) {
    let key = meta.idempotency_key.unwrap_or(&[]);
    assert!(key.len() <= MAX_IDEMPOTENCY_KEY_LEN);
    out.put_u32_le(u32::try_from(len).expect("batch under 4 GiB"));
    out.put_u32_le(0); // CRC, filled in by `seal`
    out.put_u8(MAGIC);
    out.put_u8(VERSION);
    out.put_u16_le(0);
    out.put_u32_le(count);
    out.put_u64_le(meta.base_offset);
    out.put_i64_le(timestamps.0);
    out.put_i64_le(timestamps.1);
    out.put_i64_le(meta.append_time);
    out.put_u16_le(key.len() as u16);
    out.put_u16_le(0);
    out.put_slice(key);
}

/// Fills in the CRC of the batch that starts at `out[start]` and ends at
/// the end of `out`.
fn seal(out: &mut [u8], start: usize) {
    let crc = crc32fast::hash(&out[start + CRC_START..]);
    out[start + CRC_OFFSET..start + CRC_START].copy_from_slice(&crc.to_le_bytes());
}

/// Why a batch failed to decode; the caller adds the file and position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer bytes than the header or the declared length: a torn write
    /// when at the end of a file.
    Incomplete {
        /// Bytes needed for the batch (or the header).
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// The bytes are there but wrong.
    Invalid(String),
    /// A complete batch (its CRC matches) of a format version this code
    /// does not know: written by a newer Kappa.
    UnsupportedVersion(u8),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Incomplete { needed, available } => {
                write!(
                    f,
                    "incomplete batch: needs {needed} bytes, {available} present"
                )
            }
            DecodeError::Invalid(reason) => f.write_str(reason),
            DecodeError::UnsupportedVersion(v) => {
                write!(
                    f,
                    "batch format version {v} is newer than this build understands ({VERSION})"
                )
            }
        }
    }
}

/// The little-endian header fields at byte `at` (callers check the length).
/// Inlined across crates: [`FramedBatch::read_checked`] is built where it
/// is called.
#[inline]
pub(crate) fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes(b[at..at + 2].try_into().expect("2 bytes"))
}
#[inline]
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
#[inline]
pub(crate) fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}
#[inline]
pub(crate) fn i64_at(b: &[u8], at: usize) -> i64 {
    u64_at(b, at) as i64
}

/// How the stored batch at the start of `bytes` is stored (its frame
/// checked: at least a header): its codec, or `None` for a version-1
/// batch. A [`BatchView`] no longer knows, holding the batch inflated.
pub fn stored_compression(bytes: &[u8]) -> Compression {
    compression::codec_of(bytes).unwrap_or(Compression::None)
}

/// True for a batch format version this build reads: 1, 2 (a
/// compressed batch, FORMAT.md §2.8) and 3 (a Kafka producer's batch
/// stored as sent, §2.10).
pub fn is_known_version(version: u8) -> bool {
    version == VERSION
        || version == compression::COMPRESSED_VERSION
        || version == kafka_batch::KAFKA_VERSION
}

/// Reads the declared length of the batch starting at `bytes[0]`, checking
/// only that the header is present and the length is plausible.
pub fn peek_len(bytes: &[u8]) -> Result<usize, DecodeError> {
    if bytes.len() < HEADER_LEN {
        return Err(DecodeError::Incomplete {
            needed: HEADER_LEN,
            available: bytes.len(),
        });
    }
    let len = u32_at(bytes, LENGTH_OFFSET) as usize;
    if len < HEADER_LEN {
        return Err(DecodeError::Invalid(format!(
            "batch length {len} is below the header size {HEADER_LEN}"
        )));
    }
    Ok(len)
}

/// A validated batch. Cheap to clone (shares the buffer). Of a
/// compressed batch (FORMAT.md §2.8), the version-1 batch it stands for:
/// [`BatchView::as_bytes`] are those, [`BatchView::len`] the bytes stored.
#[derive(Debug, Clone)]
pub struct BatchView {
    bytes: Bytes,
    /// Bytes of the batch as stored (its `batch_length` in the file).
    stored_len: usize,
    /// Of a Kafka producer's batch stored as sent (FORMAT.md §2.10), its
    /// records section as stored.
    as_sent: Option<KafkaRecords>,
}

/// The batch at the start of `buf`, sliced to its declared length (its
/// length checked only to be plausible and present).
fn batch_bytes(buf: &Bytes) -> Result<Bytes, DecodeError> {
    let len = peek_len(buf)?;
    if buf.len() < len {
        return Err(DecodeError::Incomplete {
            needed: len,
            available: buf.len(),
        });
    }
    Ok(buf.slice(..len))
}

/// A stored batch's bytes (CRC and frame checked) as the version-1 batch
/// readers read: itself, or a compressed batch inflated.
fn inflated(bytes: Bytes) -> Result<Bytes, DecodeError> {
    match compression::codec_of(&bytes) {
        None => Ok(bytes),
        Some(_) => compression::inflate(&bytes),
    }
}

/// Checks the CRC of a batch's `bytes`.
fn check_crc(bytes: &[u8]) -> Result<(), DecodeError> {
    crc_matches(bytes, crc32fast::hash(&bytes[CRC_START..]))
}

/// `Err` unless `crc` (of `bytes[CRC_START..]`) is the batch's stored CRC.
fn crc_matches(bytes: &[u8], crc: u32) -> Result<(), DecodeError> {
    let stored_crc = u32_at(bytes, CRC_OFFSET);
    if crc != stored_crc {
        return Err(DecodeError::Invalid(format!(
            "CRC mismatch: stored {stored_crc:#010x}, computed {crc:#010x}"
        )));
    }
    Ok(())
}

/// Checks a batch's frame: magic, version, reserved fields, and that it
/// holds records.
fn check_frame(bytes: &[u8]) -> Result<(), DecodeError> {
    if bytes[MAGIC_OFFSET] != MAGIC {
        return Err(DecodeError::Invalid(format!(
            "bad magic byte {:#04x}",
            bytes[MAGIC_OFFSET]
        )));
    }
    let attributes = u16_at(bytes, ATTRIBUTES_OFFSET) & !COMPACTED;
    match bytes[VERSION_OFFSET] {
        VERSION if attributes != 0 => {
            return Err(DecodeError::Invalid("reserved fields are not zero".into()))
        }
        VERSION => {}
        compression::COMPRESSED_VERSION => compression::check_attributes(attributes)?,
        kafka_batch::KAFKA_VERSION => kafka_batch::check_attributes(attributes)?,
        other => return Err(DecodeError::UnsupportedVersion(other)),
    }
    if u16_at(bytes, RESERVED_OFFSET) != 0 {
        return Err(DecodeError::Invalid("reserved fields are not zero".into()));
    }
    if u32_at(bytes, RECORD_COUNT_OFFSET) == 0 {
        return Err(DecodeError::Invalid("batch has no records".into()));
    }
    Ok(())
}

/// The accessors of a batch's header, the same for a [`BatchView`] and a
/// [`FramedBatch`]: both hold the batch's bytes, its header at least (the
/// frame check made sure of that).
macro_rules! header_accessors {
    () => {
        /// Never true: a batch holds at least one record.
        pub fn is_empty(&self) -> bool {
            false
        }
        /// Offset of the first record.
        pub fn base_offset(&self) -> u64 {
            u64_at(&self.bytes, BASE_OFFSET_OFFSET)
        }
        /// Number of records.
        pub fn record_count(&self) -> u32 {
            u32_at(&self.bytes, RECORD_COUNT_OFFSET)
        }
        /// Offset after the last record.
        pub fn next_offset(&self) -> u64 {
            self.base_offset() + u64::from(self.record_count())
        }
        /// Timestamp of the first record.
        pub fn first_timestamp(&self) -> i64 {
            i64_at(&self.bytes, FIRST_TIMESTAMP_OFFSET)
        }
        /// Largest record timestamp.
        pub fn max_timestamp(&self) -> i64 {
            i64_at(&self.bytes, MAX_TIMESTAMP_OFFSET)
        }
        /// When the writer appended the batch.
        pub fn append_time(&self) -> i64 {
            i64_at(&self.bytes, APPEND_TIME_OFFSET)
        }
        /// True if the cleaner wrote the batch ([`COMPACTED`]): offsets
        /// before it may be missing.
        pub fn is_compacted(&self) -> bool {
            u16_at(&self.bytes, ATTRIBUTES_OFFSET) & COMPACTED != 0
        }
    };
}

/// Rule 12 of FORMAT.md §2.6: whether a batch at `base_offset` may come
/// where `expected` is the offset after the batch before it (or the
/// segment's base): exactly there, or later if the cleaner wrote it.
pub fn follows(base_offset: u64, compacted: bool, expected: u64) -> bool {
    base_offset == expected || (compacted && base_offset > expected)
}

/// Marks the encoded batch `batch` (version 1, the whole batch) as written
/// by the cleaner ([`COMPACTED`]) and computes its CRC again.
pub(crate) fn mark_compacted(batch: &mut [u8]) {
    let attributes = u16_at(batch, ATTRIBUTES_OFFSET) | COMPACTED;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_le_bytes());
    let crc = crc32fast::hash(&batch[CRC_START..]);
    batch[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_le_bytes());
}

impl BatchView {
    /// Validates the batch at the start of `buf` and returns it (sliced to
    /// its length). Checks length, CRC, magic, version, reserved fields and
    /// that every record is well formed and the records fill the batch.
    pub fn parse(buf: &Bytes) -> Result<BatchView, DecodeError> {
        let bytes = batch_bytes(buf)?;
        check_crc(&bytes)?;
        check_frame(&bytes)?;
        let view = BatchView {
            stored_len: bytes.len(),
            as_sent: kafka_batch::as_sent(&bytes),
            bytes: inflated(bytes)?,
        };
        view.check_records()?;
        Ok(view)
    }

    fn check_records(&self) -> Result<(), DecodeError> {
        read_records(&self.bytes, |_| {})
    }

    header_accessors!();

    /// The batch's bytes: as stored, or, for a compressed batch, the
    /// version-1 batch it stands for.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Bytes of the batch as stored: where the next batch of its file
    /// starts.
    pub fn len(&self) -> usize {
        self.stored_len
    }

    /// Of a Kafka producer's batch stored as sent (FORMAT.md §2.10), its
    /// records section as the producer compressed it.
    pub fn as_sent(&self) -> Option<&KafkaRecords> {
        self.as_sent.as_ref()
    }

    /// The idempotency key, if the append carried one.
    pub fn idempotency_key(&self) -> Option<&[u8]> {
        let len = u16_at(&self.bytes, KEY_LEN_OFFSET) as usize;
        (len > 0).then(|| &self.bytes[HEADER_LEN..HEADER_LEN + len])
    }

    /// The records, in offset order, borrowed from the batch's buffer (no
    /// reference count, no allocation per record).
    pub fn record_refs(&self) -> RecordRefs<'_> {
        let key_len = u16_at(&self.bytes, KEY_LEN_OFFSET) as usize;
        RecordRefs {
            bytes: &self.bytes,
            at: HEADER_LEN + key_len,
            next_offset: self.base_offset(),
            remaining: self.record_count(),
        }
    }

    /// The records, in offset order, as owned [`Record`]s sharing the
    /// batch's buffer.
    pub fn records(&self) -> Records {
        let key_len = u16_at(&self.bytes, KEY_LEN_OFFSET) as usize;
        Records {
            bytes: self.bytes.clone(),
            at: HEADER_LEN + key_len,
            next_offset: self.base_offset(),
            remaining: self.record_count(),
        }
    }
}

/// A batch whose frame is checked — its length, magic byte, version,
/// reserved fields and record count — but not yet its CRC and records:
/// what a reader takes from the log when another thread checks the batch
/// ([`crate::Partition::read_framed`]). Its header can be read; its
/// records only once [`FramedBatch::check`] made it a [`BatchView`]. Cheap
/// to clone (shares the buffer).
#[derive(Debug, Clone)]
pub struct FramedBatch {
    /// The batch as stored.
    bytes: Bytes,
    /// Of a compressed batch, the version-1 batch it stands for, once
    /// [`FramedBatch::read_checked`] inflated it.
    inflated: std::sync::OnceLock<Bytes>,
}

impl FramedBatch {
    /// The batch at the start of `buf` with its frame checked, sliced to
    /// its length.
    pub fn parse(buf: &Bytes) -> Result<FramedBatch, DecodeError> {
        let bytes = batch_bytes(buf)?;
        check_frame(&bytes)?;
        Ok(FramedBatch {
            bytes,
            inflated: std::sync::OnceLock::new(),
        })
    }

    /// The whole batch as stored.
    pub fn as_bytes(&self) -> &Bytes {
        &self.bytes
    }

    /// Bytes of the batch as stored.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// How the batch is stored (`None`: as encoded).
    pub fn compression(&self) -> Compression {
        stored_compression(&self.bytes)
    }

    /// The rest of [`BatchView::parse`]'s checks: the CRC (as `crc` says),
    /// and that every record is well formed and the records fill the batch.
    pub fn check(&self, crc: Crc) -> Result<BatchView, DecodeError> {
        crc.check(&self.bytes)?;
        let view = BatchView {
            stored_len: self.bytes.len(),
            as_sent: kafka_batch::as_sent(&self.bytes),
            bytes: match self.inflated.get() {
                Some(bytes) => bytes.clone(),
                None => inflated(self.bytes.clone())?,
            },
        };
        view.check_records()?;
        Ok(view)
    }

    /// Calls `f` with each record, in offset order, borrowed from the
    /// buffer, each checked as it is read, and the CRC checked (as `crc`
    /// says): [`FramedBatch::check`] in one pass with the reading. An
    /// uncompressed batch's CRC is computed along the reading, a stretch
    /// ahead of the records given to `f`, so each stretch comes from
    /// memory once for both (a batch of 10,000 seed events is about the
    /// size of a core's L2 cache: a CRC pass before the reading made the
    /// reading fetch it again); a compressed batch's is checked before it
    /// is inflated. `Err` says what is damaged, a CRC that does not match
    /// before any other damage; `f` may have been called for records
    /// before the damage is known — even of a batch whose CRC does not
    /// match — and whoever it gave them to must drop them (a failed
    /// [`FramedBatch::check`] gives none).
    #[inline]
    pub fn read_checked<'a>(
        &'a self,
        crc: Crc,
        f: impl FnMut(RecordRef<'a>),
    ) -> Result<(), DecodeError> {
        if crc == Crc::Check && self.reads_as_stored() {
            return read_records_crc_along(&self.bytes, f);
        }
        read_records(self.checked_bytes(crc)?, f)
    }

    /// The bytes [`FramedBatch::read_checked`] reads records from: the
    /// batch as stored, its CRC not checked yet (`read_checked` checks it
    /// along the reading), or, compressed, the version-1 batch it stands
    /// for, inflated once its CRC is checked (as `crc` says) and then kept.
    /// A record read by `read_checked` lies in these bytes, so a part of
    /// it that must outlive the batch is taken with `slice_ref` of them.
    pub fn bytes_to_read(&self, crc: Crc) -> Result<&Bytes, DecodeError> {
        if self.reads_as_stored() {
            return Ok(&self.bytes);
        }
        self.checked_bytes(crc)
    }

    /// True if records are read from the batch as stored: it is not
    /// compressed (and so was never inflated).
    fn reads_as_stored(&self) -> bool {
        self.inflated.get().is_none() && !self.is_compressed()
    }

    /// True if the batch is stored compressed.
    fn is_compressed(&self) -> bool {
        compression::codec_of(&self.bytes).is_some()
    }

    /// The bytes [`FramedBatch::read_checked`] reads records from, the CRC
    /// checked (as `crc` says): the batch as stored, or, compressed, the
    /// version-1 batch it stands for (inflated once, then kept). A record
    /// read by `read_checked` lies in these bytes, so a part of it that
    /// must outlive the batch is taken with `slice_ref` of them.
    pub fn checked_bytes(&self, crc: Crc) -> Result<&Bytes, DecodeError> {
        if let Some(bytes) = self.inflated.get() {
            return Ok(bytes);
        }
        crc.check(&self.bytes)?;
        if !self.is_compressed() {
            return Ok(&self.bytes);
        }
        let _ = self.inflated.set(compression::inflate(&self.bytes)?);
        Ok(self.inflated.get().expect("set above"))
    }

    header_accessors!();
}

/// Whether [`FramedBatch::check`] and [`FramedBatch::read_checked`]
/// check the CRC. The records' structure is checked either way: reading
/// them cannot go wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crc {
    /// Check it.
    Check,
    /// The same bytes' CRC was checked by a reader that is sure to use
    /// nothing of the batch if it failed — the part of a batch read
    /// before a fetch stopped inside it, when the rest is read later.
    CheckedBefore,
}

impl Crc {
    fn check(self, bytes: &[u8]) -> Result<(), DecodeError> {
        match self {
            Crc::Check => check_crc(bytes),
            Crc::CheckedBefore => Ok(()),
        }
    }
}

/// A batch as a read of the log hands it out: checked whole
/// ([`BatchView`]) or by its frame ([`FramedBatch`]).
pub trait ReadBatch: Sized {
    /// The batch at the start of `buf`, checked as this kind is.
    fn parse(buf: &Bytes) -> Result<Self, DecodeError>;
    /// Offset of the first record.
    fn base_offset(&self) -> u64;
    /// Offset after the last record.
    fn next_offset(&self) -> u64;
    /// Total bytes.
    fn byte_len(&self) -> usize;
    /// True if the cleaner wrote the batch: offsets before it may be
    /// missing ([`follows`]).
    fn is_compacted(&self) -> bool;
}

impl ReadBatch for BatchView {
    fn parse(buf: &Bytes) -> Result<Self, DecodeError> {
        BatchView::parse(buf)
    }
    fn base_offset(&self) -> u64 {
        BatchView::base_offset(self)
    }
    fn next_offset(&self) -> u64 {
        BatchView::next_offset(self)
    }
    fn byte_len(&self) -> usize {
        BatchView::len(self)
    }
    fn is_compacted(&self) -> bool {
        BatchView::is_compacted(self)
    }
}

impl ReadBatch for FramedBatch {
    fn parse(buf: &Bytes) -> Result<Self, DecodeError> {
        FramedBatch::parse(buf)
    }
    fn base_offset(&self) -> u64 {
        FramedBatch::base_offset(self)
    }
    fn next_offset(&self) -> u64 {
        FramedBatch::next_offset(self)
    }
    fn byte_len(&self) -> usize {
        FramedBatch::len(self)
    }
    fn is_compacted(&self) -> bool {
        FramedBatch::is_compacted(self)
    }
}

/// Iterator over a validated batch's records, each as an owned [`Record`]
/// sharing the batch's buffer.
#[derive(Debug)]
pub struct Records {
    bytes: Bytes,
    at: usize,
    next_offset: u64,
    remaining: u32,
}

impl Iterator for Records {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (record, end) = read_record(&self.bytes, self.at, self.next_offset)
            .expect("the records of a checked batch read");
        let record = record.to_record(&self.bytes);
        self.at = end;
        self.next_offset += 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining as usize, Some(self.remaining as usize))
    }
}

/// A stored record borrowed from its batch's buffer: reading it takes no
/// reference count and allocates nothing (headers are read lazily). Turn
/// the parts that must outlive the batch into [`Bytes`] with
/// `batch.as_bytes().slice_ref(part)`, or the whole with
/// [`RecordRef::to_record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    /// Offset in its partition.
    pub offset: u64,
    /// Timestamp in ms since the epoch.
    pub timestamp: i64,
    /// Key, if any (`Some` of an empty slice for an empty key).
    pub key: Option<&'a [u8]>,
    /// Value.
    pub value: &'a [u8],
    /// Headers, in order.
    pub headers: HeadersRef<'a>,
}

impl RecordRef<'_> {
    /// The owned record, its parts sharing `buffer`, which must be the
    /// buffer this record was read from (else this panics).
    pub fn to_record(&self, buffer: &Bytes) -> Record {
        Record {
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key.map(|key| buffer.slice_ref(key)),
            value: buffer.slice_ref(self.value),
            headers: self
                .headers
                .iter()
                .map(|h| Header {
                    name: h.name.to_owned(),
                    value: buffer.slice_ref(h.value),
                })
                .collect(),
        }
    }
}

/// A record's headers as stored: the encoded header fields and their count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadersRef<'a> {
    bytes: &'a [u8],
    count: u16,
}

impl<'a> HeadersRef<'a> {
    /// Number of headers.
    pub fn len(&self) -> usize {
        self.count as usize
    }
    /// True when the record has no headers.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The headers, in order, decoded as they are read.
    pub fn iter(&self) -> HeaderRefs<'a> {
        HeaderRefs {
            bytes: self.bytes,
            remaining: self.count,
        }
    }
}

impl<'a> IntoIterator for HeadersRef<'a> {
    type Item = HeaderRef<'a>;
    type IntoIter = HeaderRefs<'a>;
    fn into_iter(self) -> HeaderRefs<'a> {
        self.iter()
    }
}

/// One header borrowed from its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderRef<'a> {
    /// Header name.
    pub name: &'a str,
    /// Header value.
    pub value: &'a [u8],
}

/// Iterator over a [`HeadersRef`].
#[derive(Debug, Clone)]
pub struct HeaderRefs<'a> {
    /// The headers not read yet.
    bytes: &'a [u8],
    remaining: u16,
}

impl<'a> Iterator for HeaderRefs<'a> {
    type Item = HeaderRef<'a>;

    fn next(&mut self) -> Option<HeaderRef<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let b = self.bytes;
        let name_end = 2 + u16_at(b, 0) as usize;
        let value_end = name_end + 4 + u32_at(b, name_end) as usize;
        let name = std::str::from_utf8(&b[2..name_end])
            .expect("header names are checked to be UTF-8 in check_records");
        self.bytes = &b[value_end..];
        Some(HeaderRef {
            name,
            value: &b[name_end + 4..value_end],
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining as usize, Some(self.remaining as usize))
    }
}

/// Iterator over a validated batch's records, borrowed from its buffer
/// ([`BatchView::record_refs`]).
#[derive(Debug, Clone)]
pub struct RecordRefs<'a> {
    bytes: &'a [u8],
    at: usize,
    next_offset: u64,
    remaining: u32,
}

impl<'a> Iterator for RecordRefs<'a> {
    type Item = RecordRef<'a>;

    fn next(&mut self) -> Option<RecordRef<'a>> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let (record, end) = read_record(self.bytes, self.at, self.next_offset)
            .expect("the records of a checked batch read");
        self.at = end;
        self.next_offset += 1;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining as usize, Some(self.remaining as usize))
    }
}

/// Bytes of a batch's CRC computed at a time by
/// [`read_records_crc_along`], ahead of the records read: well inside a
/// core's L1 and L2 caches.
const CRC_STRETCH: usize = 32 << 10;

/// [`read_records`] of the uncompressed batch `b` (its frame checked) with
/// its CRC computed along: before a record is given to `f`, the CRC covers
/// it and up to [`CRC_STRETCH`] bytes after it. A CRC that does not match
/// is the error whatever other damage there is (the rest of the batch is
/// hashed after any), as when it is checked first.
fn read_records_crc_along<'a>(
    b: &'a [u8],
    mut f: impl FnMut(RecordRef<'a>),
) -> Result<(), DecodeError> {
    let mut hasher = crc32fast::Hasher::new();
    let mut hashed = CRC_START;
    let read = read_records_ending(b, |record, end| {
        if end > hashed {
            let to = end.max(hashed + CRC_STRETCH).min(b.len());
            hasher.update(&b[hashed..to]);
            hashed = to;
        }
        f(record);
    });
    hasher.update(&b[hashed..]);
    crc_matches(b, hasher.finalize())?;
    read
}

/// Calls `f` with each record of batch `b` (its frame checked), each
/// checked as it is read, and checks that they fill the batch.
#[inline(always)]
fn read_records<'a>(b: &'a [u8], mut f: impl FnMut(RecordRef<'a>)) -> Result<(), DecodeError> {
    read_records_ending(b, |record, _| f(record))
}

/// [`read_records`], `f` given each record's end (exclusive) in `b` too.
#[inline(always)]
fn read_records_ending<'a>(
    b: &'a [u8],
    mut f: impl FnMut(RecordRef<'a>, usize),
) -> Result<(), DecodeError> {
    let mut at = records_start(b)?;
    let base_offset = u64_at(b, BASE_OFFSET_OFFSET);
    for i in 0..u32_at(b, RECORD_COUNT_OFFSET) {
        let (record, end) = read_record(b, at, base_offset + u64::from(i))?;
        f(record, end);
        at = end;
    }
    records_fill(b, at)
}

/// Calls `f` with the encoded bytes of each record of the uncompressed
/// batch `b` after its 8-byte timestamp — its key, value and headers with
/// their lengths — each record checked as it is read ([`read_record`]),
/// and checks that they fill the batch.
pub(crate) fn read_record_bodies<'a>(
    b: &'a [u8],
    mut f: impl FnMut(&'a [u8]),
) -> Result<(), DecodeError> {
    let mut at = records_start(b)?;
    for i in 0..u32_at(b, RECORD_COUNT_OFFSET) {
        let (_, end) = read_record(b, at, u64::from(i))?;
        f(&b[at + 8..end]);
        at = end;
    }
    records_fill(b, at)
}

/// Where the records of batch `b` start (after its idempotency key); `Err`
/// if the key's length is over the limit.
fn records_start(b: &[u8]) -> Result<usize, DecodeError> {
    let key_len = u16_at(b, KEY_LEN_OFFSET) as usize;
    if key_len > MAX_IDEMPOTENCY_KEY_LEN {
        return Err(DecodeError::Invalid(format!(
            "idempotency key length {key_len} is over {MAX_IDEMPOTENCY_KEY_LEN}"
        )));
    }
    Ok(HEADER_LEN + key_len)
}

/// Checks that the records of batch `b`, ending at byte `at`, fill it.
fn records_fill(b: &[u8], at: usize) -> Result<(), DecodeError> {
    if at != b.len() {
        return Err(DecodeError::Invalid(format!(
            "records end at byte {at} but the batch is {} bytes",
            b.len()
        )));
    }
    Ok(())
}

/// The record at byte `at` of batch `b`, at `offset`, and the byte after
/// it; `Err` if it runs past the batch, has a key length below -1, or a
/// header name that is not UTF-8. Every read of a record goes through
/// here: the checks of [`BatchView::parse`], the records of a batch read
/// as they are checked ([`FramedBatch::read_checked`]), and those of a
/// checked batch (which cannot fail).
#[inline(always)]
fn read_record(b: &[u8], at: usize, offset: u64) -> Result<(RecordRef<'_>, usize), DecodeError> {
    // The record is taken off the front of `rest` field by field: each
    // length is checked once, by the split that takes the field.
    let rest = b.get(at..).unwrap_or_default();
    let Some((fixed, rest)) = rest.split_first_chunk::<12>() else {
        return Err(runs_past("fixed fields"));
    };
    let timestamp = i64::from_le_bytes(*fixed.first_chunk::<8>().expect("8 of 12 bytes"));
    let key_len = i32::from_le_bytes(*fixed.last_chunk::<4>().expect("4 of 12 bytes"));
    if key_len < -1 {
        return Err(negative_key_length(key_len));
    }
    let Some((key, rest)) = rest.split_at_checked(key_len.max(0) as usize) else {
        return Err(runs_past("key"));
    };
    let Some((value_len, rest)) = rest.split_first_chunk::<4>() else {
        return Err(runs_past("value length"));
    };
    let Some((value, rest)) = rest.split_at_checked(u32::from_le_bytes(*value_len) as usize) else {
        return Err(runs_past("value"));
    };
    let Some((count, headers)) = rest.split_first_chunk::<2>() else {
        return Err(runs_past("header count"));
    };
    let count = u16::from_le_bytes(*count);
    let mut rest = headers;
    for _ in 0..count {
        let Some((name_len, after)) = rest.split_first_chunk::<2>() else {
            return Err(runs_past("header name length"));
        };
        let Some((name, after)) = after.split_at_checked(u16::from_le_bytes(*name_len) as usize)
        else {
            return Err(runs_past("header name"));
        };
        if std::str::from_utf8(name).is_err() {
            return Err(DecodeError::Invalid("header name is not UTF-8".into()));
        }
        let Some((value_len, after)) = after.split_first_chunk::<4>() else {
            return Err(runs_past("header value length"));
        };
        let Some((_, after)) = after.split_at_checked(u32::from_le_bytes(*value_len) as usize)
        else {
            return Err(runs_past("header value"));
        };
        rest = after;
    }
    let record = RecordRef {
        offset,
        timestamp,
        key: (key_len >= 0).then_some(key),
        value,
        headers: HeadersRef {
            bytes: &headers[..headers.len() - rest.len()],
            count,
        },
    };
    Ok((record, b.len() - rest.len()))
}

/// The error of a record part (`what`) that runs past its batch.
#[cold]
fn runs_past(what: &str) -> DecodeError {
    DecodeError::Invalid(format!("record {what} runs past the batch"))
}

/// The error of a record key length below -1.
#[cold]
fn negative_key_length(key_len: i32) -> DecodeError {
    DecodeError::Invalid(format!("negative key length {key_len}"))
}

mod encoded;
pub use encoded::EncodedRecords;
pub(crate) use encoded::SealedBatch;

#[cfg(test)]
mod tests;
