//! Output topics of the built-in log written *ahead* of the commit, each
//! record numbered in its partition: the output path of derived streams
//! (and of late side outputs and repartition topics) whose records are a
//! function of the input in processing order. Their records never go
//! through RocksDB.
//!
//! # Why this is exactly once
//!
//! Over the built-in log a version takes its input in one order, live and
//! in every replay ([`crate::order`]), and each record of these topics is
//! made from one input record and the state committed before it. So what a
//! version writes to such a topic is one sequence of records whatever its
//! polls and commits were, and after a crash the version makes, from its
//! last commit on, the very records it made after that commit before the
//! crash. Each record has a place in that sequence: its *sequence number*,
//! counted per output partition from 0 (a record's partition is a function
//! of the record: murmur2 of its key as the log routes keys, else of its
//! value; [`route`]).
//!
//! Each record is encoded as the log's batch holds it when it is pushed
//! ([`kappa_log::EncodedRecords`]), so an append hands the log one buffer
//! and the writer copies it whole. A projection's rows come here as they
//! are made; other records through the outbox, in order.
//!
//! Records are appended as they fill an append (a poll's records, up to
//! [`APPEND_BYTES_MAX`]) and at the latest by the commit that covers their
//! input. A poll's records wait in their buffer while the partition's
//! append before them is still being written (or synced); they go out with
//! a later poll's. A buffer that fills an append goes out behind the
//! appends in flight, up to [`MAX_IN_FLIGHT`] of them (the log's writer
//! writes queued appends together, with one fsync): the version waits for
//! the log only when that many are in flight and at the commit, not at
//! every poll nor at every fsync. The commit waits
//! until the log has them all and then writes, in the
//! same RocksDB write as the state and the input offsets, each partition's
//! next sequence number and the offset after this writer's last batch there
//! ([`crate::state::key::output_positions`]). Each batch names the range
//! it holds in its idempotency key, `kappa-seq:<writer>:<partition>:<first>:<last>`
//! ([`batch_key`]). A crash:
//!
//! - after the RocksDB write leaves nothing pending;
//! - before it, the log may hold records past the committed numbers. When
//!   the version opens ([`Sequenced::restore`]) it reads each partition
//!   from the committed offset to its end; this writer's batches there say
//!   up to which number the partition holds its records. The version
//!   resumes from the committed input offsets, makes the same records with
//!   the same numbers, drops those the partition holds and appends the
//!   rest: neither duplicates nor gaps.
//!
//! Appends to one partition go in sequence order, in one
//! [`kappa_log::AppendChain`]: the log refuses, unwritten, every append of
//! the chain after one that failed (and those still queued when the
//! version lets go of them), so what a partition holds of this writer is
//! always a prefix of its sequence (a batch never lands after one that
//! failed; [`Sequenced::restore`] checks it). A record
//! counts as written once the log acknowledged it, as the stored outbox
//! counted it before: under `fsync = always` after its fsync.
//!
//! What does not qualify keeps the stored outbox ([`crate::commit`]): an
//! aggregate's row changes (coalesced per commit, so not the same records
//! across a restart), a topic on a Kafka cluster (whose sink appends whole
//! outbox entries in transactions), and every output of a version reading
//! a Kafka cluster (whose replay may order its input differently:
//! docs/clusters.md).

use std::collections::VecDeque;
use std::sync::Arc;

use kappa_log::{
    partition_for_key, AppendChain, AppendOutcome, EncodedRecords, Log, PendingAppend, Topic,
};

use crate::blocking::block_on;
use crate::error::{ProcessorError, Result};
use crate::plan::{Operation, Plan, Sink};
use crate::state::key::output_positions;
use crate::state::store::{Batch, Store};

/// Prefix of the idempotency key of a batch written here.
const KEY_PREFIX: &str = "kappa-seq:";

/// Most bytes of records in one append (the log's `max_batch_bytes` when
/// lower).
pub(crate) const APPEND_BYTES_MAX: usize = 4 << 20;

/// Most records in one append (the log's `max_batch_records` when lower).
const APPEND_RECORDS_MAX: usize = 65_536;

/// Appends one partition may have in flight at once. A buffer that fills
/// while the log still writes or syncs the ones before it goes out behind
/// them instead of waiting: at an fsync per 10,000-record append the
/// version otherwise stopped at each slow fsync, and its source workers
/// with it (a third of q1's two cores idle).
const MAX_IN_FLIGHT: usize = 4;

/// Room a partition's buffer has beyond an append's bytes, for the record
/// that fills it (a larger one grows the buffer once).
const APPEND_SLACK: usize = 64 << 10;

/// Bytes of one partition's entry in [`output_positions`]: the next
/// sequence number and the offset after this writer's last batch, `u64`
/// little-endian each.
const POSITION_LEN: usize = 16;

/// Which of `outputs`, the output topics of `plan`, are sequenced: none
/// when the input is on a Kafka cluster; not the sink when it is on a
/// cluster or takes an aggregate's row changes.
pub(crate) fn topics_of(plan: &Plan, outputs: Vec<String>) -> Vec<String> {
    if plan.source.cluster.is_some() {
        return Vec::new();
    }
    let stored_sink = match (&plan.sink, &plan.operation) {
        (Sink::Topic(t), _) if plan.sink_cluster.is_some() => Some(t),
        (Sink::Topic(t), Operation::Aggregate(_)) => Some(t),
        _ => None,
    };
    outputs
        .into_iter()
        .filter(|t| Some(t) != stored_sink)
        .collect()
}

/// The sequenced output topics of one version.
#[derive(Debug)]
pub(crate) struct Sequenced {
    log: Arc<Log>,
    /// `kappa-seq:<writer>:`, the writer being `view@version` (or, when
    /// that would not fit in an idempotency key, a hash of it).
    key_prefix: String,
    topics: Vec<SequencedTopic>,
    /// Bytes and records of one append.
    append_bytes: usize,
    append_records: usize,
    /// Records were appended since the last commit.
    appended: bool,
    /// Records pushed since [`Sequenced::take_pushed`] last counted them.
    pushed: u64,
}

#[derive(Debug)]
struct SequencedTopic {
    name: String,
    /// Per partition; empty until [`Sequenced::restore`].
    partitions: Vec<PartitionOutput>,
}

#[derive(Debug, Default)]
struct PartitionOutput {
    /// Sequence number of the next record made for the partition.
    next_seq: u64,
    /// The partition already holds this writer's records up to here
    /// (appended before a crash; found by [`Sequenced::restore`]).
    held_to: u64,
    /// Offset after this writer's last acknowledged batch: where a restart
    /// starts looking for its batches.
    scan_from: u64,
    /// Records waiting for their append, numbered up to `next_seq`,
    /// encoded as the batch will hold them.
    buffer: EncodedRecords,
    /// The appends sent and not yet acknowledged, oldest first (the log
    /// answers them in this order).
    in_flight: VecDeque<PendingAppend>,
    /// The chain of this partition's appends.
    chain: AppendChain,
}

/// Whether sending a partition's records waits for its appends in flight.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Wait until fewer than [`MAX_IN_FLIGHT`] are, then send.
    ForRoom,
    /// Send only if none is; else keep the records buffered.
    No,
}

impl PartitionOutput {
    /// Takes the log's acknowledgment of the append in flight: the next
    /// restart looks for this writer's batches from its end on.
    fn acknowledge(&mut self, outcome: AppendOutcome) {
        let end = outcome.base_offset + u64::from(outcome.record_count);
        self.scan_from = self.scan_from.max(end);
    }
}

impl Sequenced {
    /// The sequenced `topics` of `log` written by `writer` (`view@version`).
    pub(crate) fn new(log: Arc<Log>, writer: &str, topics: Vec<String>) -> Sequenced {
        let config = log.config();
        // The key, `:<partition>:<first>:<last>` included, within 255 bytes.
        let key_prefix = match writer.len() <= 180 {
            true => format!("{KEY_PREFIX}{writer}:"),
            false => format!("{KEY_PREFIX}#{:016x}:", fnv1a(writer.as_bytes())),
        };
        Sequenced {
            append_bytes: APPEND_BYTES_MAX.min(config.max_batch_bytes.saturating_sub(1024).max(1)),
            append_records: APPEND_RECORDS_MAX.min(config.max_batch_records),
            log,
            key_prefix,
            topics: topics
                .into_iter()
                .map(|name| SequencedTopic {
                    name,
                    partitions: Vec::new(),
                })
                .collect(),
            appended: false,
            pushed: 0,
        }
    }

    /// Records buffered and not yet sent, over all partitions.
    pub(crate) fn buffered(&self) -> usize {
        let partitions = self.topics.iter().flat_map(|t| &t.partitions);
        partitions.map(|p| p.buffer.len()).sum()
    }

    /// Records pushed since the last call (those a partition already held
    /// included: they are this version's output too).
    pub(crate) fn take_pushed(&mut self) -> u64 {
        std::mem::take(&mut self.pushed)
    }

    /// The index of `topic` if it is sequenced.
    pub(crate) fn index(&self, topic: &str) -> Option<usize> {
        self.topics.iter().position(|t| t.name == topic)
    }

    /// True when no topic is sequenced.
    pub(crate) fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// True when records were appended since the last commit.
    pub(crate) fn appended(&self) -> bool {
        self.appended
    }

    /// Reads each topic's committed positions (`cf` of `store`) and finds
    /// what the topic holds beyond them; a topic without positions yet gets
    /// its current end, written at once (nothing of this writer is past
    /// it). Before the first [`Sequenced::push`].
    pub(crate) fn restore(&mut self, store: &Store, cf: &str) -> Result<()> {
        let mut initial = Batch::default();
        for t in &mut self.topics {
            let topic = self.log.topic(&t.name)?;
            let count = topic.partition_count() as usize;
            let key = output_positions(&t.name);
            let committed = match store.get(cf, &key)? {
                Some(value) => decode_positions(&value).ok_or_else(|| corrupt(cf, &t.name))?,
                None => {
                    let ends: Vec<(u64, u64)> = topic
                        .partitions()
                        .iter()
                        .map(|p| (0, p.end_offset()))
                        .collect();
                    initial.put(cf, key, encode_positions(ends.iter().copied()));
                    ends
                }
            };
            if committed.len() > count {
                return Err(ProcessorError::Stopped(format!(
                    "output topic '{}' has {count} partitions, fewer than the {} it was written with",
                    t.name,
                    committed.len()
                )));
            }
            t.partitions = (0..count)
                .map(|p| {
                    // A partition added since: looked at from its start.
                    let (next_seq, scan_from) = committed.get(p).copied().unwrap_or((0, 0));
                    let held_to = held_to(&topic, p as u32, &self.key_prefix, next_seq, scan_from)?;
                    Ok(PartitionOutput {
                        next_seq,
                        held_to,
                        scan_from,
                        ..PartitionOutput::default()
                    })
                })
                .collect::<Result<_>>()?;
        }
        if !initial.is_empty() {
            store.write(initial)?;
        }
        Ok(())
    }

    /// Numbers the record of `key`, `value` (JSON text) and `timestamp`
    /// of sequenced topic `topic` and buffers it for its partition —
    /// dropped when the partition already holds it — and sends the
    /// partition's buffer once it fills an append.
    pub(crate) fn push(
        &mut self,
        topic: usize,
        key: Option<&[u8]>,
        value: &[u8],
        timestamp: i64,
    ) -> Result<()> {
        let t = &mut self.topics[topic];
        let p = route(key, value, t.partitions.len() as u32);
        let out = &mut t.partitions[p];
        let seq = out.next_seq;
        out.next_seq += 1;
        self.pushed += 1;
        if seq < out.held_to {
            return Ok(());
        }
        out.buffer.push(key, value, timestamp);
        if out.buffer.len() >= self.append_records || out.buffer.records_len() >= self.append_bytes
        {
            self.send(topic, p, Wait::ForRoom)?;
        }
        Ok(())
    }

    /// Sends each partition's buffered records without waiting for the
    /// log: it writes them while the version goes on. A partition whose
    /// append before them is still being written (or synced) keeps them:
    /// they go out with the next call after its acknowledgment, once they
    /// fill an append, or with the commit — the version never waits here
    /// for the log's fsync.
    pub(crate) fn send_all(&mut self) -> Result<()> {
        for topic in 0..self.topics.len() {
            for p in 0..self.topics[topic].partitions.len() {
                self.send(topic, p, Wait::No)?;
            }
        }
        Ok(())
    }

    /// Appends every buffered record and waits until the log has them all
    /// (a commit's first step). With `first_only` (a simulated crash inside
    /// the append), only the first partition with records is appended.
    pub(crate) fn flush(&mut self, first_only: bool) -> Result<()> {
        for topic in 0..self.topics.len() {
            for p in 0..self.topics[topic].partitions.len() {
                let sent = !self.topics[topic].partitions[p].buffer.is_empty();
                self.send(topic, p, Wait::ForRoom)?;
                if first_only && sent {
                    return self.wait_all(topic, p);
                }
            }
        }
        for topic in 0..self.topics.len() {
            for p in 0..self.topics[topic].partitions.len() {
                self.wait_all(topic, p)?;
            }
        }
        Ok(())
    }

    /// Puts each topic's positions into the commit's `batch` (after
    /// [`Sequenced::flush`]).
    pub(crate) fn put_positions(&mut self, batch: &mut Batch, cf: &str) {
        for t in &self.topics {
            let positions = t.partitions.iter().map(|p| (p.next_seq, p.scan_from));
            batch.put(cf, output_positions(&t.name), encode_positions(positions));
        }
        self.appended = false;
    }

    /// Sends partition `p`'s buffered records of `topic` in one append,
    /// behind its appends in flight: once fewer than [`MAX_IN_FLIGHT`]
    /// are, waiting for that, or (with [`Wait::No`]) once none is, keeping
    /// them buffered until then.
    fn send(&mut self, topic: usize, p: usize, wait: Wait) -> Result<()> {
        if self.topics[topic].partitions[p].buffer.is_empty() {
            return Ok(());
        }
        let mut in_flight = self.take_answered(topic, p)?;
        match wait {
            Wait::ForRoom => {
                while in_flight >= MAX_IN_FLIGHT {
                    self.wait_oldest(topic, p)?;
                    in_flight -= 1;
                }
            }
            Wait::No if in_flight > 0 => return Ok(()),
            Wait::No => {}
        }
        let target = self.log_topic(topic)?;
        let out = &mut self.topics[topic].partitions[p];
        // The next buffer sized to fill an append without growing: a
        // buffer sent at a poll's end was small, and one sized as it grew
        // by copying itself (its pages are touched only as it fills).
        let room = self.append_bytes + APPEND_SLACK;
        let records = std::mem::replace(&mut out.buffer, EncodedRecords::with_capacity(room));
        let last = out.next_seq - 1;
        let first = out.next_seq - records.len() as u64;
        let key = batch_key(&self.key_prefix, p as u32, first, last).into_bytes();
        let partition = target.partition(p as u32)?;
        let chain = Some(&out.chain);
        let pending = block_on(partition.submit_encoded(records, Some(key), chain))??;
        out.in_flight.push_back(pending);
        self.appended = true;
        Ok(())
    }

    /// Waits for the oldest of partition `p`'s appends in flight, if any.
    fn wait_oldest(&mut self, topic: usize, p: usize) -> Result<()> {
        let out = &mut self.topics[topic].partitions[p];
        if let Some(pending) = out.in_flight.pop_front() {
            let outcome = block_on(pending.wait())??;
            out.acknowledge(outcome);
        }
        Ok(())
    }

    /// Waits for all of partition `p`'s appends in flight.
    fn wait_all(&mut self, topic: usize, p: usize) -> Result<()> {
        while !self.topics[topic].partitions[p].in_flight.is_empty() {
            self.wait_oldest(topic, p)?;
        }
        Ok(())
    }

    /// Takes the log's answers to partition `p`'s appends in flight that
    /// it has answered, oldest first, without waiting (a failure is
    /// returned as waiting for it would); the appends still in flight.
    fn take_answered(&mut self, topic: usize, p: usize) -> Result<usize> {
        let out = &mut self.topics[topic].partitions[p];
        while let Some(pending) = out.in_flight.front_mut() {
            let Some(outcome) = pending.try_outcome() else {
                break;
            };
            out.in_flight.pop_front();
            out.acknowledge(outcome?);
        }
        Ok(out.in_flight.len())
    }

    /// The log's topic, checked to have the partitions it was restored with.
    fn log_topic(&self, topic: usize) -> Result<Arc<Topic>> {
        let t = &self.topics[topic];
        let target = self.log.topic(&t.name)?;
        if target.partition_count() as usize != t.partitions.len() {
            return Err(ProcessorError::Stopped(format!(
                "output topic '{}' now has {} partitions, not {}: the version restarts to route its records anew",
                t.name,
                target.partition_count(),
                t.partitions.len()
            )));
        }
        Ok(target)
    }
}

impl Drop for Sequenced {
    /// Appends still queued are refused: a version that lets go of its
    /// appends in flight makes their records again after its restart.
    fn drop(&mut self) {
        for out in self.topics.iter().flat_map(|t| &t.partitions) {
            out.chain.stop();
        }
    }
}

/// The partition of the record of `key` and `value` among `partitions`:
/// murmur2 of its key, as the log routes keyed records; an unkeyed record
/// by its value, so that a record made again goes where it went.
fn route(key: Option<&[u8]>, value: &[u8], partitions: u32) -> usize {
    if partitions <= 1 {
        return 0;
    }
    partition_for_key(key.unwrap_or(value), partitions) as usize
}

/// The idempotency key of a batch of records `first..=last` of partition
/// `p`.
fn batch_key(prefix: &str, p: u32, first: u64, last: u64) -> String {
    format!("{prefix}{p}:{first}:{last}")
}

/// The range `(first, last)` a batch key of `prefix` and partition `p`
/// names; `None` for any other key.
fn parse_batch_key(key: &[u8], prefix: &str, p: u32) -> Option<(u64, u64)> {
    let rest = std::str::from_utf8(key.strip_prefix(prefix.as_bytes())?).ok()?;
    let mut parts = rest.split(':');
    let (partition, first, last) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || partition.parse::<u32>().ok()? != p {
        return None;
    }
    Some((first.parse().ok()?, last.parse().ok()?))
}

/// Up to which sequence number partition `p` of `topic` holds this
/// writer's records, reading its batches from `scan_from` on: `next_seq`
/// (the committed number) when none is past it. Fails on a batch that
/// would leave a gap, which the one-append-at-a-time rule rules out.
fn held_to(topic: &Topic, p: u32, prefix: &str, next_seq: u64, scan_from: u64) -> Result<u64> {
    let partition = topic.partition(p)?;
    let end = partition.end_offset();
    let mut offset = scan_from.max(partition.start_offset());
    let mut held = next_seq;
    while offset < end {
        let fetch = partition.read(offset, u64::MAX, 8 << 20)?;
        for batch in &fetch.batches {
            let Some((first, last)) = batch
                .idempotency_key()
                .and_then(|k| parse_batch_key(k, prefix, p))
            else {
                continue;
            };
            if last < held {
                continue;
            }
            if first > held {
                return Err(ProcessorError::Stopped(format!(
                    "output topic '{}' partition {p}: this version's records {first}..={last} follow {held} without the ones between (offset {})",
                    topic.describe().name,
                    batch.base_offset()
                )));
            }
            held = last + 1;
        }
        if fetch.next_offset <= offset {
            break;
        }
        offset = fetch.next_offset;
    }
    Ok(held)
}

/// The value of [`output_positions`]: per partition the next sequence
/// number and the offset after the writer's last batch.
fn encode_positions(positions: impl Iterator<Item = (u64, u64)>) -> Vec<u8> {
    let mut out = Vec::new();
    for (next_seq, scan_from) in positions {
        out.extend_from_slice(&next_seq.to_le_bytes());
        out.extend_from_slice(&scan_from.to_le_bytes());
    }
    out
}

fn decode_positions(value: &[u8]) -> Option<Vec<(u64, u64)>> {
    if !value.len().is_multiple_of(POSITION_LEN) {
        return None;
    }
    value
        .chunks_exact(POSITION_LEN)
        .map(|c| {
            let next_seq = u64::from_le_bytes(c[..8].try_into().ok()?);
            let scan_from = u64::from_le_bytes(c[8..].try_into().ok()?);
            Some((next_seq, scan_from))
        })
        .collect()
}

fn corrupt(cf: &str, topic: &str) -> ProcessorError {
    ProcessorError::CorruptState {
        cf: cf.to_string(),
        reason: format!(
            "the positions of output topic '{topic}' are not a whole number of 16-byte entries"
        ),
    }
}

/// FNV-1a, 64 bits: a stable name for a writer too long for the key.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_keys_name_their_writer_partition_and_range() {
        let key = batch_key("kappa-seq:q0@1:", 3, 10, 19);
        assert_eq!(key, "kappa-seq:q0@1:3:10:19");
        assert_eq!(
            parse_batch_key(key.as_bytes(), "kappa-seq:q0@1:", 3),
            Some((10, 19))
        );
        assert_eq!(parse_batch_key(key.as_bytes(), "kappa-seq:q0@1:", 2), None);
        assert_eq!(parse_batch_key(key.as_bytes(), "kappa-seq:q0@2:", 3), None);
        assert_eq!(parse_batch_key(key.as_bytes(), "kappa-seq:q0@", 3), None);
        assert_eq!(
            parse_batch_key(b"kappa:q0@1:7:t", "kappa-seq:q0@1:", 3),
            None
        );
        assert_eq!(
            parse_batch_key(b"kappa-seq:q0@1:3:1:2:3", "kappa-seq:q0@1:", 3),
            None
        );
    }

    #[test]
    fn positions_round_trip_and_refuse_torn_values() {
        let positions = vec![(0, 5), (7, u64::MAX)];
        let value = encode_positions(positions.iter().copied());
        assert_eq!(value.len(), 2 * POSITION_LEN);
        assert_eq!(decode_positions(&value), Some(positions));
        assert_eq!(decode_positions(&value[..20]), None);
        assert_eq!(decode_positions(&[]), Some(Vec::new()));
    }
}
