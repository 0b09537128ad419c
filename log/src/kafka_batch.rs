//! Kafka producers' compressed batches stored as sent (`log/FORMAT.md`
//! §2.10).
//!
//! A Kafka producer compresses the records section of its batch (Kafka's
//! record layout: varint lengths, timestamp and offset deltas). When the
//! topic compresses with the same codec, decompressing that section to
//! compress Kappa's own layout again costs the listener a codec round trip
//! per batch and gives consumers bytes the producer never sent. The writer
//! stores such a batch as **version 3** instead — once it has read the
//! section back and found exactly the records the listener decoded —: the header and
//! idempotency key as for every batch (the record count, offsets and
//! timestamps read off the decoded records), the codec in `attributes`,
//! then the records section's length before compression (`u32`), Kafka's
//! `baseTimestamp` (`i64`), and the section exactly as the producer
//! compressed it. The CRC covers the stored bytes, as for every batch.
//!
//! Readers of the log never see version 3: a checked read gets the
//! version-1 batch it stands for ([`inflate`]), the Kafka records decoded
//! into Kappa's layout, so every record reader and the processors read
//! records one way. The Kafka fetch path asks for the section as stored
//! ([`as_sent`]) and serves it to consumers with a Kafka batch header
//! around it: the producer's bytes. zstd sections are zstd frames, as the
//! topic's own; a Kafka lz4 section is an lz4 *frame* (the topic's own lz4
//! batches hold a block), read as such.

use bytes::{BufMut, Bytes};

use crate::batch::{
    i64_at, u16_at, u32_at, DecodeError, ATTRIBUTES_OFFSET, COMPACTED, HEADER_LEN, KEY_LEN_OFFSET,
    RECORD_COUNT_OFFSET, VERSION_OFFSET,
};
use crate::compression::{Compression, MAX_INFLATED_RECORDS};

/// The format version of a Kafka producer's batch stored as sent.
pub const KAFKA_VERSION: u8 = 3;

/// Bytes after the idempotency key before the compressed section: its
/// length before compression (`u32`) and Kafka's `baseTimestamp` (`i64`).
const SECTION_HEADER: usize = 4 + 8;

/// A Kafka producer's compressed records section, as sent, with what
/// reading it needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecords {
    /// Its codec: [`Compression::Zstd`] (a zstd frame) or
    /// [`Compression::Lz4`] (an lz4 frame, as Kafka's producers write it).
    pub codec: Compression,
    /// The batch's `baseTimestamp`: each record's timestamp is it plus the
    /// record's delta.
    pub base_timestamp: i64,
    /// The records section as the producer compressed it.
    pub compressed: Bytes,
}

/// Rewrites the version-1 batch `out[start..]` (the last thing in `out`)
/// as a version-3 batch holding `kafka`, if `kafka`'s records read back
/// (decompressed, in Kappa's layout) as exactly the records encoded;
/// returns the batch's length as stored, or `None` with `out` untouched
/// (then the caller stores the batch its usual way).
pub(crate) fn store_as_sent(
    out: &mut Vec<u8>,
    start: usize,
    kafka: &KafkaRecords,
) -> Option<usize> {
    let batch = &out[start..];
    let records_at = HEADER_LEN + u16_at(batch, KEY_LEN_OFFSET) as usize;
    let count = u32_at(batch, RECORD_COUNT_OFFSET) as usize;
    // Kafka's layout of these records is at most twice Kappa's (its
    // varints against fixed widths): a larger section is not theirs.
    let bound = (batch.len() - records_at).saturating_mul(2) + 64;
    let mut section = Vec::new();
    inflate_section(kafka.codec, &kafka.compressed, bound, &mut section).ok()?;
    let records_length = u32::try_from(section.len())
        .ok()
        .filter(|&n| n as usize <= bound)?;
    let mut read_back = Vec::with_capacity(batch.len() - records_at);
    kafka_to_kappa(&section, count, kafka.base_timestamp, &mut read_back).ok()?;
    if read_back != batch[records_at..] {
        return None;
    }
    let attributes = (u16_at(batch, ATTRIBUTES_OFFSET) & COMPACTED) | kafka.codec.codec_bits();
    out.truncate(start + records_at);
    out.put_u32_le(records_length);
    out.put_i64_le(kafka.base_timestamp);
    out.put_slice(&kafka.compressed);
    crate::compression::set_frame(&mut out[start..], KAFKA_VERSION, attributes);
    Some(out.len() - start)
}

/// The codec, the records' length before compression, the base timestamp
/// and where the compressed section starts, of a stored version-3 batch
/// (its frame checked); `None` for any other batch, or one too short to
/// hold a section.
fn parts(stored: &[u8]) -> Option<(Compression, u32, i64, usize)> {
    if stored.get(VERSION_OFFSET) != Some(&KAFKA_VERSION) {
        return None;
    }
    let codec = Compression::of_bits(u16_at(stored, ATTRIBUTES_OFFSET) & !COMPACTED)?;
    let section = HEADER_LEN + u16_at(stored, KEY_LEN_OFFSET) as usize;
    if stored.len() < section + SECTION_HEADER {
        return None;
    }
    Some((
        codec,
        u32_at(stored, section),
        i64_at(stored, section + 4),
        section + SECTION_HEADER,
    ))
}

/// The section of a stored version-3 batch (its frame checked), as sent;
/// `None` for any other batch.
pub fn as_sent(stored: &Bytes) -> Option<KafkaRecords> {
    let (codec, _, base_timestamp, at) = parts(stored)?;
    Some(KafkaRecords {
        codec,
        base_timestamp,
        compressed: stored.slice(at..),
    })
}

/// Checks the `attributes` of a version-3 batch: zstd or lz4, no other
/// bit.
pub(crate) fn check_attributes(attributes: u16) -> Result<(), DecodeError> {
    match Compression::of_bits(attributes) {
        Some(Compression::Zstd | Compression::Lz4) => Ok(()),
        _ => Err(DecodeError::Invalid(format!(
            "a Kafka batch stored as sent names no codec it may hold (attributes {attributes:#06x})"
        ))),
    }
}

/// The version-1 batch a stored version-3 batch (its CRC checked) stands
/// for: the Kafka records decompressed and written in Kappa's layout, the
/// header's length, version, attributes and CRC made those of the
/// version-1 form.
pub(crate) fn inflate(stored: &[u8]) -> Result<Bytes, DecodeError> {
    let (codec, declared, base_timestamp, at) = parts(stored).ok_or_else(|| {
        DecodeError::Invalid("a Kafka batch ends before its records' length".into())
    })?;
    let declared = declared as usize;
    if declared > MAX_INFLATED_RECORDS {
        return Err(DecodeError::Invalid(format!(
            "a Kafka batch declares {declared} bytes of records, more than the {MAX_INFLATED_RECORDS} a batch may hold"
        )));
    }
    let compressed = &stored[at..];
    // Grown as the records inflate: the declared length alone does not
    // reserve memory.
    let mut section = Vec::with_capacity(declared.min(compressed.len().saturating_mul(8)));
    inflate_section(codec, compressed, declared, &mut section).map_err(|reason| {
        DecodeError::Invalid(format!("the Kafka records do not decompress: {reason}"))
    })?;
    if section.len() != declared {
        return Err(DecodeError::Invalid(format!(
            "the Kafka records decompress to {} bytes, not the {declared} declared",
            section.len()
        )));
    }
    let records_at = HEADER_LEN + u16_at(stored, KEY_LEN_OFFSET) as usize;
    let count = u32_at(stored, RECORD_COUNT_OFFSET) as usize;
    // Kappa's layout takes at most 12 bytes more per record than Kafka's
    // (fixed-width lengths for varints of at least one byte).
    let mut out = Vec::with_capacity(records_at + declared + count.min(declared) * 12);
    out.extend_from_slice(&stored[..records_at]);
    kafka_to_kappa(&section, count, base_timestamp, &mut out)?;
    crate::compression::as_version_1(out, stored)
}

/// Appends the content of a Kafka section compressed with `codec` (a zstd
/// or an lz4 frame) to `out`, reading at most one byte past `declared`.
fn inflate_section(
    codec: Compression,
    compressed: &[u8],
    declared: usize,
    out: &mut Vec<u8>,
) -> Result<(), String> {
    match codec {
        Compression::Zstd => crate::compression::zstd_inflate(compressed, declared, out),
        Compression::Lz4 => {
            use std::io::Read;
            let decoder = lz4::Decoder::new(compressed).map_err(|e| e.to_string())?;
            decoder
                .take(declared as u64 + 1)
                .read_to_end(out)
                .map_err(|e| e.to_string())?;
            Ok(())
        }
        Compression::None => Err("a Kafka section stored as sent is compressed".into()),
    }
}

/// Writes the `count` Kafka records of `section` (Kafka's record layout,
/// version 2) in Kappa's record layout (FORMAT.md §2.4) to `out`: each
/// record's timestamp `base_timestamp` plus its delta, a null value or
/// header value as empty (as the Kafka listener stores one), and its
/// offset delta its place in the batch.
fn kafka_to_kappa(
    section: &[u8],
    count: usize,
    base_timestamp: i64,
    out: &mut Vec<u8>,
) -> Result<(), DecodeError> {
    let mut r = Reader { b: section, at: 0 };
    for i in 0..count {
        let length = usize::try_from(r.varint()?)
            .map_err(|_| DecodeError::Invalid(format!("Kafka record {i} has a negative length")))?;
        let end = r
            .at
            .checked_add(length)
            .filter(|&e| e <= section.len())
            .ok_or_else(|| DecodeError::Invalid(format!("Kafka record {i} runs past its batch")))?;
        let _attributes = r.bytes(1)?;
        let timestamp = base_timestamp.wrapping_add(r.varint()?);
        if r.varint()? != i as i64 {
            return Err(DecodeError::Invalid(format!(
                "Kafka record {i} does not have offset delta {i}"
            )));
        }
        out.put_i64_le(timestamp);
        match r.nullable()? {
            Some(key) => {
                out.put_i32_le(key.len() as i32);
                out.put_slice(key);
            }
            None => out.put_i32_le(-1),
        }
        let value = r.nullable()?.unwrap_or_default();
        out.put_u32_le(value.len() as u32);
        out.put_slice(value);
        let headers = u16::try_from(r.varint()?).map_err(|_| {
            DecodeError::Invalid(format!("Kafka record {i} has a header count out of range"))
        })?;
        out.put_u16_le(headers);
        for _ in 0..headers {
            let name = r.nullable()?.unwrap_or_default();
            let name_len = u16::try_from(name.len()).map_err(|_| {
                DecodeError::Invalid(format!("Kafka record {i} has a header name over 64 KiB"))
            })?;
            if std::str::from_utf8(name).is_err() {
                return Err(DecodeError::Invalid(format!(
                    "Kafka record {i} has a header name that is not UTF-8"
                )));
            }
            out.put_u16_le(name_len);
            out.put_slice(name);
            let value = r.nullable()?.unwrap_or_default();
            out.put_u32_le(value.len() as u32);
            out.put_slice(value);
        }
        if r.at != end {
            return Err(DecodeError::Invalid(format!(
                "Kafka record {i} does not end where its length says"
            )));
        }
    }
    if r.at != section.len() {
        return Err(DecodeError::Invalid(
            "the Kafka records do not fill their section".into(),
        ));
    }
    Ok(())
}

/// Kafka's record fields, read from the front.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// A zigzag varint (Kafka's `varint` and `varlong`), at most 10 bytes.
    fn varint(&mut self) -> Result<i64, DecodeError> {
        let mut raw = 0u64;
        for shift in (0..70).step_by(7) {
            let byte = *self
                .b
                .get(self.at)
                .ok_or_else(|| DecodeError::Invalid("a Kafka record runs past its batch".into()))?;
            self.at += 1;
            raw |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
            }
        }
        Err(DecodeError::Invalid(
            "a Kafka varint is longer than 10 bytes".into(),
        ))
    }

    /// `n` bytes.
    fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or_else(|| DecodeError::Invalid("a Kafka record runs past its batch".into()))?;
        let out = &self.b[self.at..end];
        self.at = end;
        Ok(out)
    }

    /// Bytes after a varint length; `None` for length -1.
    fn nullable(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.varint()? {
            -1 => Ok(None),
            n => {
                let n = usize::try_from(n)
                    .map_err(|_| DecodeError::Invalid("a Kafka length below -1".into()))?;
                self.bytes(n).map(Some)
            }
        }
    }
}

#[cfg(test)]
mod tests;
