//! The idempotency window of a partition: which idempotency keys were
//! appended recently, and at which offsets.
//!
//! The keys themselves live in the batch headers on disk; this window is an
//! in-memory index of the most recent ones, rebuilt from the log on open. It
//! holds at most `max_keys` keys and forgets keys older than `max_age_ms`
//! (by append time), so memory stays bounded. A retry with a remembered key
//! returns the first append's offsets and appends nothing; a key older than
//! the window is treated as new.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};

use crate::batch::{BatchMeta, BatchView, NewRecord};

/// Where an earlier append with a key landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorAppend {
    /// Offset of its first record.
    pub base_offset: u64,
    /// How many records it appended.
    pub record_count: u32,
    /// When it was appended (ms).
    pub append_time: i64,
    /// [`fingerprint_encoded`] of its records: a retry must carry the same
    /// ones.
    pub fingerprint: u64,
}

/// An idempotency key found in a stored batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The key.
    pub key: Vec<u8>,
    /// Where its append landed.
    pub prior: PriorAppend,
}

impl StoredKey {
    /// The key of a stored batch, if it carries one. Its fingerprint is
    /// read off the batch's version-1 bytes (a compressed batch's as it
    /// stands for them), which hold its records as an append encodes them:
    /// no record is decoded (recovery reads every keyed batch of the
    /// window this way).
    pub fn of(view: &BatchView) -> Option<StoredKey> {
        let key = view.idempotency_key()?.to_vec();
        let fingerprint = fingerprint_encoded(view.as_bytes());
        Some(StoredKey {
            key,
            prior: PriorAppend {
                base_offset: view.base_offset(),
                record_count: view.record_count(),
                append_time: view.append_time(),
                fingerprint,
            },
        })
    }
}

/// A hash of the records of `batch`, an encoded batch before any
/// compression ([`crate::batch::encode`]'s bytes): their keys, values and
/// headers, not their timestamps, which a retry may leave to the append
/// time. It tells a true retry from a different request that reuses a key.
///
/// Per record, one foldhash write of its bytes after the timestamp (the
/// key, value and headers with their lengths), chained: a record's hundred-odd
/// bytes are too few for a CRC's fast loop, and a CRC-32 update per record
/// took twice the batch's own CRC on the writer's thread. Kept in memory
/// only (the window), so its definition may change between builds.
pub fn fingerprint_encoded(batch: &[u8]) -> u64 {
    let mut h = fingerprint_hasher();
    let read = crate::batch::read_record_bodies(batch, |body| h.write(body));
    debug_assert!(read.is_ok(), "an encoded batch: {read:?}");
    h.finish()
}

/// The hasher a fingerprint is made with: foldhash with its fixed seed,
/// so equal records give equal fingerprints in every window.
fn fingerprint_hasher() -> foldhash::fast::FoldHasher {
    foldhash::fast::FixedState::default().build_hasher()
}

/// [`fingerprint_encoded`] of records about to be appended (encoded for
/// it: a rare path, a key seen before).
pub fn fingerprint_of(records: &[NewRecord]) -> u64 {
    if records.is_empty() {
        return fingerprint_hasher().finish();
    }
    fingerprint_by(|out, meta| {
        crate::batch::encode(out, meta, records);
    })
}

/// [`fingerprint_encoded`] of the batch `encode` appends to an empty
/// buffer, given the header of a batch without a key (at offset and time
/// 0: the fingerprint does not read them).
pub(crate) fn fingerprint_by(encode: impl FnOnce(&mut Vec<u8>, BatchMeta<'static>)) -> u64 {
    let mut encoded = Vec::new();
    let meta = BatchMeta {
        base_offset: 0,
        append_time: 0,
        idempotency_key: None,
    };
    encode(&mut encoded, meta);
    fingerprint_encoded(&encoded)
}

/// Bounded map of recent idempotency keys.
#[derive(Debug)]
pub struct IdempotencyWindow {
    max_keys: usize,
    max_age_ms: u64,
    by_key: HashMap<Vec<u8>, PriorAppend>,
    order: VecDeque<(Vec<u8>, i64)>,
}

impl IdempotencyWindow {
    /// An empty window with the given bounds.
    pub fn new(max_keys: usize, max_age_ms: u64) -> Self {
        IdempotencyWindow {
            max_keys,
            max_age_ms,
            by_key: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The earlier append with `key`, if still in the window at `now_ms`.
    pub fn get(&mut self, key: &[u8], now_ms: i64) -> Option<PriorAppend> {
        self.expire(now_ms);
        self.by_key.get(key).copied()
    }

    /// Remembers an append.
    pub fn insert(&mut self, key: Vec<u8>, prior: PriorAppend) {
        if self.max_keys == 0 {
            return;
        }
        if self.by_key.insert(key.clone(), prior).is_some() {
            // A key reused after it expired: its newer append decides expiry.
            self.order.retain(|(k, _)| *k != key);
        }
        self.order.push_back((key, prior.append_time));
        while self.order.len() > self.max_keys {
            self.pop_oldest();
        }
    }

    /// True if `key` is in the window at `now_ms`.
    pub fn contains(&mut self, key: &[u8], now_ms: i64) -> bool {
        self.get(key, now_ms).is_some()
    }

    /// Forgets a key (its append failed before it became durable).
    pub fn remove(&mut self, key: &[u8]) {
        if self.by_key.remove(key).is_some() {
            self.order.retain(|(k, _)| k != key);
        }
    }

    /// Number of keys held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when no key is held.
    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    fn expire(&mut self, now_ms: i64) {
        let horizon = now_ms.saturating_sub(self.max_age_ms as i64);
        while self.order.front().is_some_and(|(_, t)| *t < horizon) {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some((key, _)) = self.order.pop_front() {
            self.by_key.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prior(base: u64, t: i64) -> PriorAppend {
        PriorAppend {
            base_offset: base,
            record_count: 1,
            append_time: t,
            fingerprint: 0,
        }
    }

    /// A record of `key`, `value`, `timestamp` and one header `h` = `header`.
    fn record(key: Option<&str>, value: &str, timestamp: Option<i64>, header: &str) -> NewRecord {
        NewRecord {
            key: key.map(|k| bytes::Bytes::copy_from_slice(k.as_bytes())),
            value: bytes::Bytes::copy_from_slice(value.as_bytes()),
            timestamp,
            headers: vec![crate::batch::Header {
                name: "h".into(),
                value: bytes::Bytes::copy_from_slice(header.as_bytes()),
            }],
        }
    }

    #[test]
    fn fingerprints_read_keys_values_and_headers_not_timestamps() {
        let base = [
            record(Some("k"), "v", Some(1), "x"),
            record(None, "w", None, ""),
        ];
        let same = fingerprint_of(&base);
        let retried = [
            record(Some("k"), "v", None, "x"),
            record(None, "w", Some(9), ""),
        ];
        assert_eq!(fingerprint_of(&retried), same);
        // Encoded with an idempotency key and another append time: the same.
        let mut encoded = Vec::new();
        let meta = BatchMeta {
            base_offset: 40,
            append_time: 77,
            idempotency_key: Some(b"key"),
        };
        crate::batch::encode(&mut encoded, meta, &base);
        assert_eq!(fingerprint_encoded(&encoded), same);
        let others = [
            [
                record(Some("K"), "v", Some(1), "x"),
                record(None, "w", None, ""),
            ],
            [record(None, "v", Some(1), "x"), record(None, "w", None, "")],
            [
                record(Some(""), "v", Some(1), "x"),
                record(None, "w", None, ""),
            ],
            [
                record(Some("k"), "v", Some(1), "x"),
                record(None, "W", None, ""),
            ],
            [
                record(Some("k"), "v", Some(1), "y"),
                record(None, "w", None, ""),
            ],
            [
                record(Some("k"), "vw", Some(1), "x"),
                record(None, "", None, ""),
            ],
        ];
        for other in others {
            assert_ne!(fingerprint_of(&other), same, "{other:?}");
        }
        assert_ne!(fingerprint_of(&base[..1]), same);
    }

    /// A stored batch's key carries the fingerprint of the records
    /// appended, read off the batch as stored, compressed or not.
    #[test]
    fn stored_keys_carry_the_fingerprint_of_the_records_appended() {
        let records = [
            record(Some("k"), "v", Some(1), "x"),
            record(None, &"w".repeat(300), None, ""),
        ];
        let meta = BatchMeta {
            base_offset: 7,
            append_time: 77,
            idempotency_key: Some(b"key"),
        };
        for codec in [
            crate::compression::Compression::None,
            crate::compression::Compression::Zstd,
            crate::compression::Compression::Lz4,
        ] {
            let mut stored = Vec::new();
            crate::batch::encode(&mut stored, meta, &records);
            let len = crate::compression::compress_batch(&mut stored, 0, codec);
            assert_eq!(
                crate::batch::stored_compression(&stored),
                codec,
                "{codec:?}"
            );
            let view = BatchView::parse(&bytes::Bytes::from(stored[..len].to_vec())).unwrap();
            let stored_key = StoredKey::of(&view).unwrap();
            assert_eq!(stored_key.key, b"key");
            assert_eq!(
                stored_key.prior.fingerprint,
                fingerprint_of(&records),
                "{codec:?}"
            );
            assert_eq!(
                (stored_key.prior.base_offset, stored_key.prior.record_count),
                (7, 2)
            );
        }
    }

    #[test]
    fn remembers_until_count_bound() {
        let mut w = IdempotencyWindow::new(2, 1000);
        w.insert(b"a".to_vec(), prior(0, 10));
        w.insert(b"b".to_vec(), prior(1, 10));
        assert_eq!(w.get(b"a", 10), Some(prior(0, 10)));
        w.insert(b"c".to_vec(), prior(2, 10));
        assert_eq!(w.get(b"a", 10), None);
        assert_eq!(w.len(), 2);
    }

    #[test]
    fn forgets_after_age_bound() {
        let mut w = IdempotencyWindow::new(10, 100);
        w.insert(b"a".to_vec(), prior(0, 1000));
        assert!(w.get(b"a", 1100).is_some());
        assert!(w.get(b"a", 1101).is_none());
    }

    #[test]
    fn remove_forgets_a_key() {
        let mut w = IdempotencyWindow::new(10, 100);
        w.insert(b"a".to_vec(), prior(0, 1000));
        w.remove(b"a");
        assert!(w.is_empty());
    }
}
