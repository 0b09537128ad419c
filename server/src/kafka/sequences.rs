//! Sequence checks for idempotent producers: a batch must continue its
//! producer's sequence on its partition, so a batch retried after a
//! transient failure can never land after its successor.
//!
//! Kafka numbers every record of an idempotent producer per partition:
//! batch after batch, the base sequence of the next batch is the last
//! sequence of the previous one plus one (wrapping from `i32::MAX` to 0).
//! For each (topic, partition, producer id) this table keeps the epoch and
//! the sequence the next batch must start with:
//!
//! - a negative base sequence: refused with `OUT_OF_ORDER_SEQUENCE_NUMBER`
//!   (an idempotent producer numbers from 0; -1 means "no sequence" only
//!   without a producer id) — nothing is appended;
//! - a repeat of one of the producer's last [`RETAINED_BATCHES`] accepted
//!   batches (same epoch, first and last sequence: a retry): passed on to
//!   the log, whose idempotency window answers it with the first append's
//!   offset (Kafka's brokers retain as many, the most a producer keeps in
//!   flight);
//! - the expected sequence: accepted; the next one is expected after it;
//! - any other sequence — a gap (a batch before it failed and will be
//!   retried), an earlier sequence that is no retained batch, a sequence
//!   far ahead or wrapped around: refused with
//!   `OUT_OF_ORDER_SEQUENCE_NUMBER`, which a client answers by retrying in
//!   order (librdkafka) — nothing is appended;
//! - an older epoch: refused with `INVALID_PRODUCER_EPOCH`;
//! - a producer the table does not know (new, evicted, or from before a
//!   restart: the table is in memory only) or a newer epoch: accepted, and
//!   the sequence starts there.
//!
//! A batch that was accepted but whose append then failed rewinds the
//! expected sequence to its base, so its retry is accepted and its
//! successors wait for it. A connection handles one request at a time, so
//! one producer's batches on one connection are checked in order.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::errors::{INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER};

/// Producers remembered per partition before the least recently used are
/// forgotten (a forgotten producer is treated as new: accepted).
pub const MAX_PRODUCERS: usize = 100_000;

/// Accepted batches remembered per producer and partition, so a retry of
/// any of them is recognized (Kafka's brokers retain five: the most
/// in-flight requests an idempotent producer may have).
pub const RETAINED_BATCHES: usize = 5;

/// Which producer writes where.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProducerKey {
    /// Topic name.
    pub topic: String,
    /// Partition index.
    pub partition: i32,
    /// The producer id `InitProducerId` handed out.
    pub producer_id: i64,
}

/// One batch's sequence numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchSequence {
    /// The producer epoch the batch was written under.
    pub epoch: i16,
    /// Sequence of its first record.
    pub first: i32,
    /// Sequence of its last record.
    pub last: i32,
}

/// What to do with a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it: it continues the sequence (or starts one).
    Append,
    /// Hand it to the log: it repeats a batch already accepted, which the
    /// log's idempotency window recognizes.
    Retry,
    /// Refuse it with this Kafka error code; nothing is appended.
    Refuse(i16),
}

#[derive(Debug, Clone)]
struct Expected {
    epoch: i16,
    next: i32,
    /// The last accepted batches of this epoch, oldest first (at most
    /// [`RETAINED_BATCHES`]).
    recent: VecDeque<BatchSequence>,
    /// A counter value: higher means used more recently.
    used: u64,
}

/// The expected next sequence of every idempotent producer on every
/// partition it wrote to since the start (bounded by `max`).
#[derive(Debug)]
pub struct ProducerSequences {
    table: Mutex<Table>,
    max: usize,
}

#[derive(Debug, Default)]
struct Table {
    expected: HashMap<ProducerKey, Expected>,
    clock: u64,
}

/// The sequence after `last`, wrapping like Kafka's.
fn after(last: i32) -> i32 {
    if last == i32::MAX {
        0
    } else {
        last + 1
    }
}

/// True if `first` lies before `next` in sequence order: within half the
/// sequence space behind it, wrapping.
fn is_behind(first: i32, next: i32) -> bool {
    let distance = (next as i64 - first as i64).rem_euclid(1 << 31);
    distance > 0 && distance <= 1 << 30
}

impl ProducerSequences {
    /// An empty table remembering at most `max` producer-partitions.
    pub fn new(max: usize) -> Self {
        ProducerSequences {
            table: Mutex::new(Table::default()),
            max: max.max(1),
        }
    }

    /// Checks `batch` from `key` and, if it is to be appended, expects its
    /// successor next.
    pub fn check(&self, key: &ProducerKey, batch: BatchSequence) -> Verdict {
        let mut table = self.table.lock().expect("producer sequences");
        table.clock += 1;
        let used = table.clock;
        let verdict = match table.expected.get(key) {
            _ if batch.first < 0 => Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER),
            None => Verdict::Append,
            Some(e) if batch.epoch > e.epoch => Verdict::Append,
            Some(e) if batch.epoch < e.epoch => Verdict::Refuse(INVALID_PRODUCER_EPOCH),
            Some(e) if e.recent.contains(&batch) => Verdict::Retry,
            Some(e) if batch.first == e.next => Verdict::Append,
            Some(_) => Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER),
        };
        match verdict {
            Verdict::Append => match table.expected.get_mut(key) {
                Some(e) => {
                    if e.epoch != batch.epoch {
                        e.recent.clear();
                    }
                    e.epoch = batch.epoch;
                    e.next = after(batch.last);
                    e.used = used;
                    if e.recent.len() == RETAINED_BATCHES {
                        e.recent.pop_front();
                    }
                    e.recent.push_back(batch);
                }
                None => {
                    let expected = Expected {
                        epoch: batch.epoch,
                        next: after(batch.last),
                        recent: VecDeque::from([batch]),
                        used,
                    };
                    table.expected.insert(key.clone(), expected);
                    if table.expected.len() > self.max {
                        table.forget_least_recently_used(self.max);
                    }
                }
            },
            Verdict::Retry | Verdict::Refuse(_) => {
                if let Some(e) = table.expected.get_mut(key) {
                    e.used = used;
                }
            }
        }
        verdict
    }

    /// The append of an accepted `batch` failed: expect it again, so its
    /// retry is accepted and batches after it wait for it.
    pub fn rewind(&self, key: &ProducerKey, batch: BatchSequence) {
        let mut table = self.table.lock().expect("producer sequences");
        if let Some(e) = table.expected.get_mut(key) {
            if e.epoch == batch.epoch && is_behind(batch.first, e.next) {
                e.next = batch.first;
                // It was not appended: its repeat is no retry, and neither
                // is any batch accepted after it.
                if let Some(at) = e.recent.iter().position(|b| *b == batch) {
                    e.recent.truncate(at);
                }
            }
        }
    }
}

impl Table {
    /// Forgets the least recently used quarter of the entries above `max`'s
    /// three quarters, so eviction runs rarely.
    fn forget_least_recently_used(&mut self, max: usize) {
        let keep = max - max / 4;
        let mut uses: Vec<u64> = self.expected.values().map(|e| e.used).collect();
        let cut = uses.len() - keep;
        let (_, threshold, _) = uses.select_nth_unstable(cut);
        let threshold = *threshold;
        self.expected.retain(|_, e| e.used >= threshold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(producer_id: i64) -> ProducerKey {
        ProducerKey {
            topic: "t".into(),
            partition: 0,
            producer_id,
        }
    }

    fn batch(epoch: i16, first: i32, count: i32) -> BatchSequence {
        BatchSequence {
            epoch,
            first,
            last: first + count - 1,
        }
    }

    #[test]
    fn batches_in_order_are_appended_and_a_gap_is_refused() {
        let s = ProducerSequences::new(10);
        assert_eq!(s.check(&key(1), batch(0, 0, 10)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 10, 5)), Verdict::Append);
        assert_eq!(
            s.check(&key(1), batch(0, 20, 5)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(s.check(&key(1), batch(0, 15, 5)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 20, 5)), Verdict::Append);
    }

    #[test]
    fn a_repeated_batch_goes_to_the_log_as_a_retry() {
        let s = ProducerSequences::new(10);
        assert_eq!(s.check(&key(1), batch(0, 0, 10)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 10, 10)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 0, 10)), Verdict::Retry);
        assert_eq!(s.check(&key(1), batch(0, 10, 10)), Verdict::Retry);
        assert_eq!(s.check(&key(1), batch(0, 20, 10)), Verdict::Append);
    }

    #[test]
    fn a_failed_append_is_expected_again_and_its_successor_waits() {
        let s = ProducerSequences::new(10);
        assert_eq!(s.check(&key(1), batch(0, 0, 10)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 10, 10)), Verdict::Append);
        s.rewind(&key(1), batch(0, 10, 10));
        assert_eq!(
            s.check(&key(1), batch(0, 20, 10)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(s.check(&key(1), batch(0, 10, 10)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 20, 10)), Verdict::Append);
    }

    #[test]
    fn unknown_producers_and_new_epochs_start_a_sequence_and_old_epochs_are_fenced() {
        let s = ProducerSequences::new(10);
        assert_eq!(s.check(&key(1), batch(3, 500, 10)), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(4, 0, 10)), Verdict::Append);
        assert_eq!(
            s.check(&key(1), batch(3, 510, 10)),
            Verdict::Refuse(INVALID_PRODUCER_EPOCH)
        );
        // Partitions and producers are independent.
        let other_partition = ProducerKey {
            partition: 1,
            ..key(1)
        };
        assert_eq!(s.check(&other_partition, batch(4, 7, 1)), Verdict::Append);
        assert_eq!(s.check(&key(2), batch(0, 7, 1)), Verdict::Append);
    }

    #[test]
    fn sequences_wrap_after_the_largest() {
        let s = ProducerSequences::new(10);
        let last = BatchSequence {
            epoch: 0,
            first: i32::MAX - 1,
            last: i32::MAX,
        };
        assert_eq!(s.check(&key(1), last), Verdict::Append);
        assert_eq!(s.check(&key(1), batch(0, 0, 5)), Verdict::Append);
        assert_eq!(s.check(&key(1), last), Verdict::Retry);
        assert_eq!(
            s.check(&key(1), batch(0, 6, 5)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
    }

    /// The outside probe's finding: after sequences 0-3 (4 expected next),
    /// a batch at `i32::MAX` and one at -5 were both appended.
    #[test]
    fn a_wrapped_or_negative_sequence_is_refused_not_taken_for_a_retry() {
        let s = ProducerSequences::new(10);
        for first in 0..4 {
            assert_eq!(s.check(&key(1), batch(0, first, 1)), Verdict::Append);
        }
        let at_max = BatchSequence {
            epoch: 0,
            first: i32::MAX,
            last: i32::MAX,
        };
        assert_eq!(
            s.check(&key(1), at_max),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(
            s.check(&key(1), batch(0, -5, 1)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        // A producer the table does not know may not start below zero.
        assert_eq!(
            s.check(&key(2), batch(0, -5, 1)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        // An earlier sequence that is not a batch accepted is no retry.
        assert_eq!(
            s.check(&key(1), batch(0, 1, 2)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(s.check(&key(1), batch(0, 2, 1)), Verdict::Retry);
        assert_eq!(s.check(&key(1), batch(0, 4, 1)), Verdict::Append);
    }

    #[test]
    fn only_the_last_retained_batches_are_recognized_as_retries() {
        let s = ProducerSequences::new(10);
        for first in 0..(RETAINED_BATCHES as i32 + 2) {
            assert_eq!(s.check(&key(1), batch(0, first, 1)), Verdict::Append);
        }
        assert_eq!(
            s.check(&key(1), batch(0, 0, 1)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER),
            "older than the retained batches"
        );
        assert_eq!(s.check(&key(1), batch(0, 2, 1)), Verdict::Retry);
        assert_eq!(
            s.check(&key(1), batch(0, 6, 1)),
            Verdict::Retry,
            "the newest"
        );
    }

    #[test]
    fn the_least_recently_used_producers_are_forgotten_beyond_the_bound() {
        let s = ProducerSequences::new(8);
        for id in 0..8 {
            assert_eq!(s.check(&key(id), batch(0, 0, 1)), Verdict::Append);
        }
        // Producer 0 writes again: it is now the most recently used.
        assert_eq!(s.check(&key(0), batch(0, 1, 1)), Verdict::Append);
        assert_eq!(s.check(&key(8), batch(0, 0, 1)), Verdict::Append);
        let remembered = s.table.lock().unwrap().expected.len();
        assert!(remembered <= 8, "{remembered} remembered");
        // Producer 0 is still known (a gap is refused); producer 1 is not (a
        // gap starts a new sequence).
        assert_eq!(
            s.check(&key(0), batch(0, 5, 1)),
            Verdict::Refuse(OUT_OF_ORDER_SEQUENCE_NUMBER)
        );
        assert_eq!(s.check(&key(1), batch(0, 5, 1)), Verdict::Append);
    }
}
