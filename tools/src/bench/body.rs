//! Produce request bodies: NDJSON, one record per line,
//! `{"key":"u123","value":{"user":"u123","seq":n,"pad":"xxx…"}}`, where the
//! value is padded to about `record_bytes` bytes of JSON text.
//!
//! Bodies are built before a run, in a [`BodyPool`] cycled by the connections,
//! so the load generator spends its CPU on HTTP rather than on formatting.

use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;

use super::keys::KeyGen;

/// The records of one body: how many, how big, and where keys come from.
#[derive(Debug)]
pub struct BodySpec {
    /// Records per body (the request's batch).
    pub batch: usize,
    /// Target size of each record's value, as JSON text.
    pub record_bytes: usize,
    /// Key source; `None` = records without a key.
    pub keys: Option<KeyGen>,
}

/// Writes a value of about `record_bytes` bytes: exactly that many when it
/// is at least the size of the value without padding, else that minimum.
pub fn write_value(out: &mut Vec<u8>, user: &str, seq: u64, record_bytes: usize) {
    let start = out.len();
    write!(out, "{{\"user\":\"{user}\",\"seq\":{seq},\"pad\":\"").expect("Vec write");
    // What is left after the padding: the closing `"}`.
    let pad = record_bytes.saturating_sub(out.len() - start + 2);
    out.resize(out.len() + pad, b'x');
    out.extend_from_slice(b"\"}");
}

/// Appends one NDJSON record line (with its `\n`).
pub fn write_record_line(out: &mut Vec<u8>, key: Option<&str>, seq: u64, record_bytes: usize) {
    match key {
        Some(k) => {
            write!(out, "{{\"key\":\"{k}\",\"value\":").expect("Vec write");
            write_value(out, k, seq, record_bytes);
        }
        None => {
            out.extend_from_slice(b"{\"value\":");
            write_value(out, "none", seq, record_bytes);
        }
    }
    out.extend_from_slice(b"}\n");
}

/// Builds one body of `spec.batch` records numbered from `first_seq`.
pub fn build_body(spec: &mut BodySpec, first_seq: u64) -> Bytes {
    let mut out = Vec::with_capacity(spec.batch * (spec.record_bytes + 40));
    for i in 0..spec.batch as u64 {
        let key = spec.keys.as_mut().map(KeyGen::next_key);
        write_record_line(&mut out, key.as_deref(), first_seq + i, spec.record_bytes);
    }
    Bytes::from(out)
}

/// Pre-built bodies, handed out round-robin to every connection.
#[derive(Debug)]
pub struct BodyPool {
    bodies: Vec<Bytes>,
    next: AtomicUsize,
}

impl BodyPool {
    /// Builds enough bodies to hold at least `pool_records` records (and at
    /// least 16 bodies), with record numbers running on across bodies.
    pub fn build(mut spec: BodySpec, pool_records: usize) -> BodyPool {
        let batch = spec.batch.max(1);
        let count = pool_records.div_ceil(batch).max(16);
        let bodies = (0..count)
            .map(|i| build_body(&mut spec, (i * batch) as u64))
            .collect();
        BodyPool {
            bodies,
            next: AtomicUsize::new(0),
        }
    }

    /// The next body (a cheap reference-counted clone).
    pub fn next(&self) -> Bytes {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.bodies.len();
        self.bodies[i].clone()
    }

    /// Number of distinct bodies.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// True when the pool has no body (never, once built).
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
    }

    /// Mean body size in bytes.
    pub fn mean_body_bytes(&self) -> f64 {
        let total: usize = self.bodies.iter().map(Bytes::len).sum();
        total as f64 / self.bodies.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::super::keys::Skew;
    use super::*;

    fn value_len(record_bytes: usize, seq: u64) -> usize {
        let mut out = Vec::new();
        write_value(&mut out, "u123", seq, record_bytes);
        serde_json::from_slice::<serde_json::Value>(&out).expect("valid JSON");
        out.len()
    }

    #[test]
    fn value_has_the_requested_size() {
        for (bytes, seq) in [(100, 0), (100, 123_456_789), (1000, 7), (64, 99)] {
            assert_eq!(value_len(bytes, seq), bytes, "{bytes} bytes, seq {seq}");
        }
    }

    #[test]
    fn tiny_sizes_give_the_unpadded_value() {
        // {"user":"u123","seq":5,"pad":""} is 32 bytes.
        assert_eq!(value_len(1, 5), 32);
        assert_eq!(value_len(32, 5), 32);
        assert_eq!(value_len(33, 5), 33);
    }

    #[test]
    fn body_is_batch_lines_of_valid_records() {
        let mut spec = BodySpec {
            batch: 1000,
            record_bytes: 100,
            keys: Some(KeyGen::new(50, Skew::Zipf(1.1), 1)),
        };
        let body = build_body(&mut spec, 10);
        let lines: Vec<&[u8]> = body
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(*body.last().unwrap(), b'\n');
        for (i, line) in lines.iter().enumerate() {
            let v: serde_json::Value = serde_json::from_slice(line).unwrap();
            let key = v["key"].as_str().unwrap();
            assert_eq!(v["value"]["user"], key);
            assert_eq!(v["value"]["seq"], 10 + i as u64);
            assert_eq!(serde_json::to_string(&v["value"]).unwrap().len(), 100);
        }
        // {"key":"uN","value":<100 bytes>}\n is 120 bytes + the key (2..=3 here).
        assert!((122_000..=123_000).contains(&body.len()), "{}", body.len());
    }

    #[test]
    fn keyless_records_have_no_key_field() {
        let mut spec = BodySpec {
            batch: 2,
            record_bytes: 50,
            keys: None,
        };
        let body = build_body(&mut spec, 0);
        let first: serde_json::Value =
            serde_json::from_slice(body.split(|&b| b == b'\n').next().unwrap()).unwrap();
        assert!(first.get("key").is_none());
        assert_eq!(first["value"]["user"], "none");
    }

    #[test]
    fn pool_covers_the_requested_records_and_cycles() {
        let spec = BodySpec {
            batch: 3,
            record_bytes: 40,
            keys: Some(KeyGen::new(10, Skew::Uniform, 5)),
        };
        let pool = BodyPool::build(spec, 100);
        assert_eq!(pool.len(), 34);
        let first = pool.next();
        for _ in 1..pool.len() {
            assert_ne!(pool.next(), first, "distinct record numbers");
        }
        assert_eq!(pool.next(), first, "wraps around");
        assert!(pool.mean_body_bytes() > 3.0 * 40.0);
    }
}
