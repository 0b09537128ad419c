//! A view's change feed: the row changes of its recent commits, in commit
//! order, each with a sequence number, in a bounded ring in memory.
//!
//! Recording starts when the feed is first enabled (a reader subscribed)
//! and then continues for the life of the processor version, so a reader
//! that reconnects can resume after the last change it saw — as long as
//! that change is still in the ring. A reader that asks for a position
//! older than the ring (or from another process lifetime) learns of the gap
//! and re-reads the view instead. Changes are published after their commit
//! is durable, so the feed never shows a change a crash could undo.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde::Serialize;
use serde_json::Value;

use crate::operator::RowChange;

/// Changes kept by default.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// One published row change.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Position in the feed: 1 for the first change recorded, then +1.
    pub seq: u64,
    /// The row's key.
    pub key: String,
    /// Window start, for windowed rows.
    pub window_start: Option<i64>,
    /// Window end (exclusive), for windowed rows.
    pub window_end: Option<i64>,
    /// The new row; `null` when the row went away (a merged session, or
    /// HAVING now rejects it).
    pub row: Option<Value>,
}

/// What [`ChangeFeed::since`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Since {
    /// The changes after the position asked for (possibly none yet).
    Changes(Vec<Change>),
    /// Changes after the position are gone (or were never recorded): the
    /// reader must re-read the view; `next` is where the feed goes on.
    Gap {
        /// The sequence number of the next change to be published.
        next: u64,
    },
}

#[derive(Debug)]
struct Ring {
    changes: VecDeque<Change>,
    /// Sequence number of the next change.
    next: u64,
}

/// The change feed of one processor version.
#[derive(Debug)]
pub struct ChangeFeed {
    enabled: AtomicBool,
    capacity: usize,
    ring: Mutex<Ring>,
    published: tokio::sync::watch::Sender<u64>,
}

impl Default for ChangeFeed {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl ChangeFeed {
    /// An empty feed keeping at most `capacity` changes.
    pub fn new(capacity: usize) -> Self {
        ChangeFeed {
            enabled: AtomicBool::new(false),
            capacity: capacity.max(1),
            ring: Mutex::new(Ring {
                changes: VecDeque::new(),
                next: 1,
            }),
            published: tokio::sync::watch::channel(0).0,
        }
    }

    fn ring(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts recording (idempotent). Returns the sequence number the next
    /// change will get.
    pub fn enable(&self) -> u64 {
        let ring = self.ring();
        if !self.enabled.swap(true, Ordering::AcqRel) {
            tracing::debug!("change feed enabled");
        }
        ring.next
    }

    /// True once a reader enabled the feed.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Acquire)
    }

    /// Appends the row changes of one durable commit.
    pub fn publish(&self, changes: &[RowChange]) {
        if changes.is_empty() || !self.is_enabled() {
            return;
        }
        let mut ring = self.ring();
        for c in changes {
            let seq = ring.next;
            ring.next += 1;
            ring.changes.push_back(Change {
                seq,
                key: c.key.clone(),
                window_start: c.window.map(|w| w.0),
                window_end: c.window.map(|w| w.1),
                row: c.row.clone(),
            });
        }
        while ring.changes.len() > self.capacity {
            ring.changes.pop_front();
        }
        let last = ring.next - 1;
        drop(ring);
        self.published.send_replace(last);
    }

    /// At most `limit` changes after position `after` (0 = from the first
    /// change recorded), or the gap if they are gone.
    pub fn since(&self, after: u64, limit: usize) -> Since {
        let ring = self.ring();
        let oldest = ring.changes.front().map_or(ring.next, |c| c.seq);
        if after + 1 < oldest || (after >= ring.next && after > 0) {
            return Since::Gap { next: ring.next };
        }
        let skip = (after + 1 - oldest) as usize;
        Since::Changes(
            ring.changes
                .iter()
                .skip(skip)
                .take(limit)
                .cloned()
                .collect(),
        )
    }

    /// A receiver that changes whenever changes are published (its value is
    /// the last sequence number published).
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.published.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(key: &str, n: i64) -> RowChange {
        RowChange {
            key: key.into(),
            window: None,
            row: Some(json!({ "n": n })),
        }
    }

    fn seqs(s: Since) -> Vec<u64> {
        match s {
            Since::Changes(c) => c.iter().map(|c| c.seq).collect(),
            Since::Gap { next } => vec![u64::MAX, next],
        }
    }

    #[test]
    fn nothing_is_recorded_until_enabled() {
        let feed = ChangeFeed::new(10);
        feed.publish(&[change("a", 1)]);
        assert_eq!(feed.enable(), 1);
        assert_eq!(seqs(feed.since(0, 10)), Vec::<u64>::new());
        feed.publish(&[change("a", 2), change("b", 1)]);
        assert_eq!(seqs(feed.since(0, 10)), vec![1, 2]);
        assert_eq!(seqs(feed.since(1, 10)), vec![2]);
        assert_eq!(seqs(feed.since(2, 10)), Vec::<u64>::new());
        assert_eq!(seqs(feed.since(0, 1)), vec![1]);
    }

    #[test]
    fn positions_that_fell_out_of_the_ring_are_a_gap() {
        let feed = ChangeFeed::new(3);
        feed.enable();
        for i in 0..5 {
            feed.publish(&[change("k", i)]);
        }
        // Kept: 3, 4, 5.
        assert_eq!(seqs(feed.since(2, 10)), vec![3, 4, 5]);
        assert_eq!(seqs(feed.since(1, 10)), vec![u64::MAX, 6]);
        assert_eq!(seqs(feed.since(0, 10)), vec![u64::MAX, 6]);
        // A position from the future (another process lifetime) is a gap too.
        assert_eq!(seqs(feed.since(99, 10)), vec![u64::MAX, 6]);
        assert_eq!(seqs(feed.since(5, 10)), Vec::<u64>::new());
    }

    #[test]
    fn subscribers_see_each_publication() {
        let feed = ChangeFeed::new(3);
        feed.enable();
        let mut rx = feed.subscribe();
        feed.publish(&[change("k", 1)]);
        assert!(rx.has_changed().unwrap());
        assert_eq!(*rx.borrow_and_update(), 1);
    }
}
