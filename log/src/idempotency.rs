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

/// Where an earlier append with a key landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PriorAppend {
    /// Offset of its first record.
    pub base_offset: u64,
    /// How many records it appended.
    pub record_count: u32,
    /// When it was appended (ms).
    pub append_time: i64,
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

    /// Forgets a key (its append failed before it became durable).
    pub fn remove(&mut self, key: &[u8]) {
        if self.by_key.remove(key).is_some() {
            self.order.retain(|(k, _)| k != key);
        }
    }

    /// Number of keys held.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// True when no key is held.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// The window's bound on the number of keys.
    pub fn max_keys(&self) -> usize {
        self.max_keys
    }

    /// The window's bound on key age.
    pub fn max_age_ms(&self) -> u64 {
        self.max_age_ms
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
