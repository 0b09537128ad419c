//! Records encoded where they are made ([`EncodedRecords`]): an append of
//! them writes their buffer as its batch, the header put in the room left
//! before the records ([`EncodedRecords::into_sealed`]), where an append of
//! [`NewRecord`](super::NewRecord)s encodes each on the writer's thread.

use super::{put_header, seal, BatchMeta, HEADER_LEN, MAX_IDEMPOTENCY_KEY_LEN, RECORD_OVERHEAD};

/// Bytes an [`EncodedRecords`]' buffer keeps before its records: room for
/// a batch header and the longest idempotency key, so that the batch is
/// sealed where the records were pushed instead of copied behind a header.
const HEADROOM: usize = HEADER_LEN + MAX_IDEMPOTENCY_KEY_LEN;

/// Records in the encoding of a batch's records (log/FORMAT.md §2): per
/// record its timestamp, key, value and no headers, one after the other.
/// Built record by record where the records are made
/// ([`EncodedRecords::push`]), then appended whole
/// ([`crate::Partition::submit_encoded`]): no record is held as its own
/// allocation, encoded again or freed on the writer's thread.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EncodedRecords {
    /// Empty while no record is held; then [`HEADROOM`] zero bytes and the
    /// records' bytes, as a batch holds them after its idempotency key.
    bytes: Vec<u8>,
    /// Records in `bytes`.
    count: u32,
    /// The first record's timestamp.
    first_timestamp: i64,
    /// The largest timestamp.
    max_timestamp: i64,
    /// Records without a key.
    unkeyed: u32,
}

impl EncodedRecords {
    /// No records, with room for `bytes` bytes of them.
    pub fn with_capacity(bytes: usize) -> EncodedRecords {
        EncodedRecords {
            bytes: Vec::with_capacity(HEADROOM + bytes),
            ..EncodedRecords::default()
        }
    }

    /// Appends a record of `key`, `value` and `timestamp` (ms), without
    /// headers. The caller keeps a key under 2 GiB and a value under
    /// 4 GiB (the log's batches are far smaller).
    pub fn push(&mut self, key: Option<&[u8]>, value: &[u8], timestamp: i64) {
        if self.count == 0 {
            (self.first_timestamp, self.max_timestamp) = (timestamp, timestamp);
            self.bytes.resize(HEADROOM, 0);
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.count += 1;
        let b = &mut self.bytes;
        b.reserve(RECORD_OVERHEAD + key.map_or(0, <[u8]>::len) + value.len());
        b.extend_from_slice(&timestamp.to_le_bytes());
        match key {
            Some(key) => {
                let len = i32::try_from(key.len()).expect("a key under 2 GiB");
                b.extend_from_slice(&len.to_le_bytes());
                b.extend_from_slice(key);
            }
            None => {
                self.unkeyed += 1;
                b.extend_from_slice(&(-1i32).to_le_bytes());
            }
        }
        let len = u32::try_from(value.len()).expect("a value under 4 GiB");
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(value);
        b.extend_from_slice(&0u16.to_le_bytes());
    }

    /// Records held.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True when no record is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records without a key (a compacted topic takes none).
    pub fn unkeyed(&self) -> usize {
        self.unkeyed as usize
    }

    /// Bytes the records take in a batch.
    pub fn records_len(&self) -> usize {
        self.bytes.len().saturating_sub(HEADROOM)
    }

    /// The records' bytes.
    fn records(&self) -> &[u8] {
        self.bytes.get(HEADROOM..).unwrap_or_default()
    }

    /// Bytes of the batch of these records with `idempotency_key`.
    pub fn batch_len(&self, idempotency_key: Option<&[u8]>) -> usize {
        HEADER_LEN + idempotency_key.map_or(0, <[u8]>::len) + self.records_len()
    }

    /// Appends the batch of these records to `out`, as
    /// [`super::encode`] encodes the same records, and returns its length.
    /// At least one record.
    pub fn encode(&self, out: &mut Vec<u8>, meta: BatchMeta<'_>) -> usize {
        assert!(self.count > 0, "a batch holds at least one record");
        let len = self.batch_len(meta.idempotency_key);
        let start = out.len();
        out.reserve(len);
        let timestamps = (self.first_timestamp, self.max_timestamp);
        put_header(out, len, self.count, timestamps, meta);
        out.extend_from_slice(self.records());
        seal(out, start);
        len
    }

    /// The batch of these records, as [`EncodedRecords::encode`] encodes
    /// it, made in their own buffer: its header is put in the room before
    /// the records. At least one record.
    pub(crate) fn into_sealed(mut self, meta: BatchMeta<'_>) -> SealedBatch {
        assert!(self.count > 0, "a batch holds at least one record");
        let len = self.batch_len(meta.idempotency_key);
        let start = self.bytes.len() - len;
        let mut header = Vec::with_capacity(len - self.records_len());
        let timestamps = (self.first_timestamp, self.max_timestamp);
        put_header(&mut header, len, self.count, timestamps, meta);
        self.bytes[start..HEADROOM].copy_from_slice(&header);
        seal(&mut self.bytes, start);
        SealedBatch {
            bytes: self.bytes,
            start,
        }
    }
}

/// An encoded batch in the buffer its records were pushed into
/// ([`EncodedRecords::into_sealed`]).
#[derive(Debug)]
pub(crate) struct SealedBatch {
    bytes: Vec<u8>,
    /// Where the batch starts in `bytes` (it runs to the end).
    start: usize,
}

impl SealedBatch {
    /// The batch's bytes.
    pub(crate) fn batch(&self) -> &[u8] {
        &self.bytes[self.start..]
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use proptest::prelude::*;

    use super::*;
    use crate::batch::{encode, BatchView, NewRecord};

    fn record() -> impl Strategy<Value = (Option<Vec<u8>>, Vec<u8>, i64)> {
        (
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
            proptest::collection::vec(any::<u8>(), 0..40),
            any::<i64>(),
        )
    }

    proptest! {
        /// Records pushed encode to the very bytes `encode` makes of the
        /// same records, which read back as they went in.
        #[test]
        fn pushed_records_encode_as_new_records_do(
            records in proptest::collection::vec(record(), 1..20),
            key in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..30)),
            base_offset in 0u64..1 << 40,
        ) {
            let mut encoded = EncodedRecords::default();
            let mut new = Vec::new();
            for (k, v, ts) in &records {
                encoded.push(k.as_deref(), v, *ts);
                new.push(NewRecord {
                    key: k.clone().map(Bytes::from),
                    value: Bytes::from(v.clone()),
                    timestamp: Some(*ts),
                    headers: Vec::new(),
                });
            }
            let meta = BatchMeta { base_offset, append_time: 7, idempotency_key: key.as_deref() };
            let (mut ours, mut theirs) = (vec![1, 2], vec![1, 2]);
            let len = encoded.encode(&mut ours, meta);
            prop_assert_eq!(len, encode(&mut theirs, meta, &new));
            prop_assert_eq!(&ours, &theirs);
            let sealed = encoded.clone().into_sealed(meta);
            prop_assert_eq!(sealed.batch(), &theirs[2..]);
            prop_assert_eq!(len, encoded.batch_len(key.as_deref()));
            prop_assert_eq!(encoded.len(), records.len());
            prop_assert_eq!(encoded.unkeyed(), records.iter().filter(|r| r.0.is_none()).count());
            let view = BatchView::parse(&Bytes::from(ours[2..].to_vec())).expect("a valid batch");
            let read: Vec<NewRecord> = view.records().map(NewRecord::from).collect();
            prop_assert_eq!(read, new);
        }
    }
}
