//! Compression at rest: a topic's batches stored with zstd or lz4
//! (`log/FORMAT.md` §2.8).
//!
//! The writer encodes a batch as always (version 1) and, when its topic
//! compresses, rewrites it as a **version 2** batch: the same 52-byte
//! header and idempotency key, `version = 2`, the codec in the low bits of
//! `attributes`, then the records section's length before compression
//! (`u32`) and the records section compressed. The CRC covers the stored
//! bytes, as for every batch. A batch that compression would not make
//! smaller stays version 1.
//!
//! Readers never see version 2: a reader that checks a stored batch gets
//! the version-1 batch it stands for ([`inflate`]), its CRC computed
//! again, so every record reader, the Kafka fetch path and the processors
//! read records one way. Memory is bounded by the declared length, itself
//! bounded by [`MAX_INFLATED_RECORDS`]; a codec that yields more or less
//! than declared fails the batch as damaged.

use std::fmt;
use std::io::Read;
use std::str::FromStr;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::batch::{
    u16_at, u32_at, DecodeError, ATTRIBUTES_OFFSET, COMPACTED, CRC_OFFSET, CRC_START, HEADER_LEN,
    KEY_LEN_OFFSET, LENGTH_OFFSET, VERSION, VERSION_OFFSET,
};
use crate::kafka_batch::KAFKA_VERSION;

/// The format version of a compressed batch.
pub const COMPRESSED_VERSION: u8 = 2;

/// The bits of `attributes` that name a compressed batch's codec.
pub const CODEC_MASK: u16 = 0b111;

/// Largest records section a compressed batch may declare: the largest
/// batch a topic can be configured to take (`max_batch_bytes`, 1 GiB).
pub const MAX_INFLATED_RECORDS: usize = 1 << 30;

/// The zstd level batches are compressed at: zstd's default, as Kafka's
/// producers use.
const ZSTD_LEVEL: i32 = 3;

/// How a topic's batches are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    /// As encoded (version 1).
    #[default]
    None,
    /// Records compressed with zstd (level 3).
    Zstd,
    /// Records compressed with lz4 (a block).
    Lz4,
}

impl Compression {
    /// Every codec, for messages.
    pub const ALL: [Compression; 3] = [Compression::None, Compression::Zstd, Compression::Lz4];

    /// True for [`Compression::None`].
    pub fn is_none(&self) -> bool {
        *self == Compression::None
    }

    /// The name topic settings use: `none`, `zstd`, `lz4`.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Zstd => "zstd",
            Compression::Lz4 => "lz4",
        }
    }

    /// Its `attributes` bits in a version-2 batch.
    pub(crate) fn codec_bits(self) -> u16 {
        match self {
            Compression::None => 0,
            Compression::Zstd => 1,
            Compression::Lz4 => 2,
        }
    }

    pub(crate) fn of_bits(bits: u16) -> Option<Compression> {
        match bits {
            1 => Some(Compression::Zstd),
            2 => Some(Compression::Lz4),
            _ => None,
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Compression {
    type Err = String;

    /// `none`, `zstd` or `lz4`, in any case (Kafka's `uncompressed` and
    /// `producer` mean none: Kappa compresses what it stores itself).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "uncompressed" | "producer" => Ok(Compression::None),
            "zstd" => Ok(Compression::Zstd),
            "lz4" => Ok(Compression::Lz4),
            other => Err(format!(
                "unknown compression {other:?}: expected none, zstd or lz4"
            )),
        }
    }
}

/// Rewrites the version-1 batch `out[start..]` (the last thing in `out`)
/// as a version-2 batch compressed with `codec`, if that makes it
/// smaller; returns the batch's length as stored.
pub(crate) fn compress_batch(out: &mut Vec<u8>, start: usize, codec: Compression) -> usize {
    let len = out.len() - start;
    if codec == Compression::None {
        return len;
    }
    let batch = &out[start..];
    let records_at = HEADER_LEN + u16_at(batch, KEY_LEN_OFFSET) as usize;
    let records = &batch[records_at..];
    let compressed = match codec {
        Compression::Zstd => zstd::bulk::compress(records, ZSTD_LEVEL),
        Compression::Lz4 => lz4::block::compress(records, None, false),
        Compression::None => unreachable!("returned above"),
    };
    let Ok(compressed) = compressed else {
        // Kept as encoded: compression is an optimization.
        return len;
    };
    let stored = records_at + 4 + compressed.len();
    if stored >= len {
        return len;
    }
    let records_len = records.len() as u32;
    let attributes = (u16_at(batch, ATTRIBUTES_OFFSET) & COMPACTED) | codec.codec_bits();
    out.truncate(start + records_at);
    out.extend_from_slice(&records_len.to_le_bytes());
    out.extend_from_slice(&compressed);
    set_frame(&mut out[start..], COMPRESSED_VERSION, attributes);
    stored
}

/// Makes `batch` (a whole batch, under 4 GiB) a batch of `version` with
/// `attributes`: its length, version, attributes and CRC.
pub(crate) fn set_frame(batch: &mut [u8], version: u8, attributes: u16) {
    let len = batch.len() as u32;
    batch[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_le_bytes());
    batch[VERSION_OFFSET] = version;
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_le_bytes());
    let crc = crc32fast::hash(&batch[CRC_START..]);
    batch[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_le_bytes());
}

/// The codec of a stored batch whose frame was checked: `None` for a
/// version-1 batch (version 3, a Kafka producer's batch stored as sent,
/// names its codec as version 2 does).
pub(crate) fn codec_of(stored: &[u8]) -> Option<Compression> {
    matches!(stored[VERSION_OFFSET], COMPRESSED_VERSION | KAFKA_VERSION)
        .then(|| Compression::of_bits(u16_at(stored, ATTRIBUTES_OFFSET) & CODEC_MASK))
        .flatten()
}

/// Checks the `attributes` of a version-2 batch: a known codec, no other
/// bits.
pub(crate) fn check_attributes(attributes: u16) -> Result<(), DecodeError> {
    match Compression::of_bits(attributes) {
        Some(_) => Ok(()),
        None => Err(DecodeError::Invalid(format!(
            "a compressed batch names no known codec (attributes {attributes:#06x})"
        ))),
    }
}

/// The version-1 batch a stored version-2 batch (its CRC checked) stands
/// for: the records section decompressed, the header's length, version,
/// attributes and CRC made those of the version-1 form.
pub(crate) fn inflate(stored: &[u8]) -> Result<Bytes, DecodeError> {
    if stored[VERSION_OFFSET] == KAFKA_VERSION {
        return crate::kafka_batch::inflate(stored);
    }
    let codec = codec_of(stored).ok_or_else(|| {
        DecodeError::Invalid("inflate called on a batch that is not compressed".into())
    })?;
    let records_at = HEADER_LEN + u16_at(stored, KEY_LEN_OFFSET) as usize;
    if stored.len() < records_at + 4 {
        return Err(DecodeError::Invalid(format!(
            "a compressed batch of {} bytes ends before its records' length",
            stored.len()
        )));
    }
    let declared = u32_at(stored, records_at) as usize;
    if declared > MAX_INFLATED_RECORDS {
        return Err(DecodeError::Invalid(format!(
            "a compressed batch declares {declared} bytes of records, more than the {MAX_INFLATED_RECORDS} a batch may hold"
        )));
    }
    let compressed = &stored[records_at + 4..];
    // Grown as the records inflate: the declared length alone does not
    // reserve memory.
    let mut out = Vec::with_capacity(records_at + declared.min(compressed.len().saturating_mul(8)));
    out.extend_from_slice(&stored[..records_at]);
    let inflated = match codec {
        Compression::Zstd => zstd_inflate(compressed, declared, &mut out),
        Compression::Lz4 => lz4_inflate(compressed, declared, &mut out),
        Compression::None => unreachable!("codec_of names a codec"),
    };
    inflated.map_err(|reason| {
        DecodeError::Invalid(format!("the {codec} records do not decompress: {reason}"))
    })?;
    if out.len() != records_at + declared {
        return Err(DecodeError::Invalid(format!(
            "the {codec} records decompress to {} bytes, not the {declared} declared",
            out.len() - records_at
        )));
    }
    as_version_1(out, stored)
}

/// `out`, the header and key of the stored batch `stored` followed by its
/// records in version 1's layout, made a version-1 batch: its length,
/// version, attributes (only `COMPACTED` kept) and CRC.
pub(crate) fn as_version_1(mut out: Vec<u8>, stored: &[u8]) -> Result<Bytes, DecodeError> {
    if u32::try_from(out.len()).is_err() {
        return Err(DecodeError::Invalid(
            "a decompressed batch would be 4 GiB or more".into(),
        ));
    }
    set_frame(
        &mut out,
        VERSION,
        u16_at(stored, ATTRIBUTES_OFFSET) & COMPACTED,
    );
    Ok(Bytes::from(out))
}

/// Appends the zstd frame's content to `out`, reading at most one byte
/// past `declared` (so a frame that inflates further is caught without
/// inflating it whole).
pub(crate) fn zstd_inflate(
    compressed: &[u8],
    declared: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let decoder =
        zstd::stream::read::Decoder::with_buffer(compressed).map_err(|e| e.to_string())?;
    decoder
        .take(declared as u64 + 1)
        .read_to_end(out)
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Appends the lz4 block's content (`declared` bytes) to `out`.
fn lz4_inflate(compressed: &[u8], declared: usize, out: &mut Vec<u8>) -> Result<(), String> {
    let size = i32::try_from(declared).map_err(|_| "too large for an lz4 block".to_string())?;
    let block = lz4::block::decompress(compressed, Some(size)).map_err(|e| e.to_string())?;
    out.extend_from_slice(&block);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{encode, BatchMeta, BatchView, NewRecord};

    fn batch(records: usize) -> Vec<u8> {
        let records: Vec<NewRecord> = (0..records)
            .map(|i| {
                NewRecord::value(format!(
                    r#"{{"user":"u{}","amount":{i},"kind":"purchase"}}"#,
                    i % 7
                ))
            })
            .collect();
        let mut out = Vec::new();
        let meta = BatchMeta {
            base_offset: 40,
            append_time: 1_700_000_000_000,
            idempotency_key: Some(b"key-1"),
        };
        encode(&mut out, meta, &records);
        out
    }

    #[test]
    fn every_codec_round_trips_to_the_version_1_batch() {
        let plain = batch(500);
        for codec in [Compression::Zstd, Compression::Lz4] {
            let mut stored = plain.clone();
            let len = compress_batch(&mut stored, 0, codec);
            assert_eq!(len, stored.len());
            assert!(len * 3 < plain.len(), "{codec}: {len} of {}", plain.len());
            assert_eq!(stored[VERSION_OFFSET], COMPRESSED_VERSION);
            assert_eq!(codec_of(&stored), Some(codec));
            let view = BatchView::parse(&Bytes::from(stored)).unwrap();
            assert_eq!(view.as_bytes().as_ref(), plain.as_slice(), "{codec}");
            assert_eq!(view.idempotency_key(), Some(&b"key-1"[..]));
            assert_eq!(view.records().count(), 500);
        }
    }

    #[test]
    fn a_batch_compression_does_not_shrink_stays_version_1() {
        let mut stored = batch(1);
        let plain = stored.clone();
        let len = compress_batch(&mut stored, 0, Compression::Lz4);
        assert_eq!((len, stored), (plain.len(), plain));
    }

    #[test]
    fn a_batch_inflating_past_its_declared_length_is_damaged_not_inflated() {
        let plain = batch(500);
        let mut stored = plain.clone();
        compress_batch(&mut stored, 0, Compression::Zstd);
        // Declare fewer bytes than the frame holds (the CRC made right).
        let records_at = HEADER_LEN + 5;
        stored[records_at..records_at + 4].copy_from_slice(&100u32.to_le_bytes());
        let crc = crc32fast::hash(&stored[CRC_START..]);
        stored[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_le_bytes());
        let e = BatchView::parse(&Bytes::from(stored.clone())).unwrap_err();
        assert!(e.to_string().contains("not the 100 declared"), "{e}");
        // And more than a batch may hold.
        stored[records_at..records_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32fast::hash(&stored[CRC_START..]);
        stored[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_le_bytes());
        let e = BatchView::parse(&Bytes::from(stored)).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
    }

    #[test]
    fn names_parse_in_any_case_and_unknown_ones_are_refused() {
        assert_eq!("ZSTD".parse::<Compression>(), Ok(Compression::Zstd));
        assert_eq!("lz4".parse::<Compression>(), Ok(Compression::Lz4));
        assert_eq!("uncompressed".parse::<Compression>(), Ok(Compression::None));
        assert!("gzip"
            .parse::<Compression>()
            .unwrap_err()
            .contains("none, zstd or lz4"));
    }
}
