//! The order a version processes its input in: derived from the log alone,
//! the same live and in replay.
//!
//! A version reads the partitions of its source topic and, for a join, of
//! its joined tables' topics (numbered one after the other in join order:
//! [`crate::joined_tables`]). It processes their batches merged by
//!
//! ```text
//! (append_time, input, offset)      input: table partitions first, then
//!                                          stream partitions, each by number
//! ```
//!
//! where `append_time` is the time the log's one clock gave the batch when
//! it was appended (`kappa_log::clock`). A batch is processed only once the
//! log is *complete* up to its append time — no append at or before it is
//! still in flight and none can come later — so a live run never processes
//! a batch before one that a replay of the stored log would put first.
//! Within a partition, batches (and records) keep their offset order, and
//! append times never decrease along it.
//!
//! The cost live: a batch waits until its append time's millisecond has
//! passed and no other append of that millisecond or earlier is still being
//! written (under `fsync = always`, until that append's fsync ends). A
//! replay reads history that is complete long ago and never waits.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use kappa_log::batch::{BatchView, Crc, DecodeError, FramedBatch};
use kappa_log::RecordRef;

use crate::error::{ProcessorError, Result};
use crate::joined_tables::JoinedTables;
use crate::source::{Source, SourceTopic};

/// Which input a batch came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The joined table's topic.
    Table,
    /// The source stream's topic.
    Stream,
}

/// One partition's read-ahead: batches fetched but not yet processed.
#[derive(Debug)]
struct Input {
    side: Side,
    partition: u32,
    /// Fetched batches (their frames checked: the CRC and records are
    /// checked where they are processed, [`NextBatch::check`]), each with
    /// the end (exclusive) of the fetch that returned it — a fetch may stop
    /// inside its last batch — and whether its CRC is still to check (not
    /// for the rest of a batch split between fetches).
    batches: VecDeque<(FramedBatch, u64, Crc)>,
    /// The offset to fetch from next.
    read_to: u64,
    /// The end of the records handed out by [`InputOrder::next`]: a batch
    /// returned again by the next fetch (the last one stopped inside it)
    /// resumes here. It runs ahead of the processed position when batches
    /// are handed out before they are processed (`crate::parallel`).
    handed_to: u64,
    /// The last fetch reached the partition's end (during this poll).
    at_end: bool,
    /// The batch the last fetch stopped inside (at `read_to`): the next
    /// fetch starts with its rest, without reading it again.
    split: Option<FramedBatch>,
}

/// Where [`InputOrder::next`] ends the last batch of a fetch that stops
/// inside it (on its record or byte budget).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchEnds {
    /// At the fetch's end; its rest comes with the next fetch. A poll then
    /// processes at most its budget of records.
    AtTheFetch,
    /// At the batch's end, when the partition holds it whole (up to its
    /// high watermark). For source workers: the two parts of a split
    /// batch would go to two workers, each reading the framing of every
    /// record before its part, the second from memory its core never
    /// touched (a 10,000-record batch split at a poll's 5,000 cost ~9% of
    /// a build's CPU). A poll may then run past its budget by a batch.
    Whole,
}

/// A batch to process now: its records in `[from, to)`.
///
/// The log's read checked only its frame (offsets, length, format): its
/// CRC and records are checked by whoever processes it
/// ([`NextBatch::check`]) — with several workers, a source worker, on the
/// core that then decodes the bytes, rather than the coordinator that
/// reads them. A batch that fails its check stops the version there
/// ([`InputOrder::damaged`]): nothing after it in the processing order is
/// processed, as when the log's read reports the damage.
#[derive(Debug)]
pub struct NextBatch {
    /// Table or stream.
    pub side: Side,
    /// The partition within its topic.
    pub partition: u32,
    /// The batch, its frame checked (its append time is
    /// `batch.append_time()`).
    pub batch: FramedBatch,
    /// First offset to process (the batch may start before it).
    pub from: u64,
    /// End (exclusive) of the records to process.
    pub to: u64,
    /// Whether the batch's CRC is to check: not for the rest of a batch
    /// whose first part was handed out before (processed first, it stops
    /// the version if its check fails).
    pub crc: Crc,
}

impl NextBatch {
    /// The bytes its records are read from
    /// ([`FramedBatch::bytes_to_read`]): the batch as stored, or the
    /// version-1 batch a compressed one stands for, inflated once its CRC
    /// is checked. `Err` says what is damaged.
    pub fn bytes_to_read(&self) -> std::result::Result<&Bytes, DecodeError> {
        self.batch.bytes_to_read(self.crc)
    }

    /// After [`NextBatch::bytes_to_read`]: calls `f` with each record to
    /// process, each checked as it is read (the records outside `[from,
    /// to)` are checked too), borrowed from those bytes, and the CRC
    /// checked along the reading ([`FramedBatch::read_checked`]). `Err`
    /// says what is damaged: whoever `f` gave the records before it to
    /// must drop them (a source worker drops the batch).
    pub fn read_checked<'a>(
        &'a self,
        mut f: impl FnMut(RecordRef<'a>),
    ) -> std::result::Result<(), DecodeError> {
        let (from, to) = (self.from, self.to);
        self.batch.read_checked(self.crc, |record| {
            if from <= record.offset && record.offset < to {
                f(record);
            }
        })
    }

    /// The batch checked whole (CRC, records), to read its records; `Err`
    /// says what is damaged.
    pub fn check(&self) -> std::result::Result<CheckedBatch, DecodeError> {
        Ok(CheckedBatch {
            view: self.batch.check(self.crc)?,
            from: self.from,
            to: self.to,
        })
    }
}

/// A [`NextBatch`] checked whole: its records to process can be read.
#[derive(Debug)]
pub struct CheckedBatch {
    view: BatchView,
    from: u64,
    to: u64,
}

impl CheckedBatch {
    /// The records of the batch to process, in offset order, borrowed from
    /// the batch (a part that must outlive it is taken with
    /// `as_bytes().slice_ref(part)`).
    pub fn record_refs(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        let (from, to) = (self.from, self.to);
        self.view
            .record_refs()
            .filter(move |r| from <= r.offset && r.offset < to)
    }

    /// The whole batch as stored.
    pub fn as_bytes(&self) -> &Bytes {
        self.view.as_bytes()
    }
}

/// The merged reader of a version's inputs. It owns the input positions:
/// the next offset to process in every partition of each side.
pub struct InputOrder {
    stream: Arc<dyn SourceTopic>,
    table: Option<Arc<dyn SourceTopic>>,
    stream_positions: Vec<u64>,
    table_positions: Vec<u64>,
    /// Table partitions first, then stream partitions (the tie order).
    inputs: Vec<Input>,
    /// The oldest append time seen beyond the completeness bound when the
    /// last [`next`](Self::next) returned `None`.
    held_back: Option<i64>,
    /// An input topic bounds its partitions one by one (a cluster's):
    /// [`next`](Self::next) asks the empty ones ([`SourceTopic::bound`]).
    bounded_partitions: bool,
}

impl InputOrder {
    /// Reads `stream` from `stream_positions` and `table` (if any) from
    /// `table_positions`, one position per partition.
    pub fn new(
        stream: Arc<dyn SourceTopic>,
        stream_positions: Vec<u64>,
        table: Option<(Arc<dyn SourceTopic>, Vec<u64>)>,
    ) -> InputOrder {
        let (table, table_positions) = match table {
            Some((t, positions)) => (Some(t), positions),
            None => (None, Vec::new()),
        };
        let input = |side, (p, &position): (usize, &u64)| Input {
            side,
            partition: p as u32,
            batches: VecDeque::new(),
            read_to: position,
            handed_to: position,
            at_end: false,
            split: None,
        };
        let inputs = table_positions
            .iter()
            .enumerate()
            .map(|p| input(Side::Table, p))
            .chain(
                stream_positions
                    .iter()
                    .enumerate()
                    .map(|p| input(Side::Stream, p)),
            )
            .collect();
        let bounded_partitions =
            stream.bounds_partitions() || table.as_ref().is_some_and(|t| t.bounds_partitions());
        InputOrder {
            bounded_partitions,
            stream,
            table,
            stream_positions,
            table_positions,
            inputs,
            held_back: None,
        }
    }

    /// Where each input is to be read from, told to its topic once before
    /// the first read.
    pub fn start_reading(&self) -> Result<()> {
        self.stream.start_reading(&self.stream_positions)?;
        if let Some(table) = &self.table {
            table.start_reading(&self.table_positions)?;
        }
        Ok(())
    }

    /// Fails if an input topic was deleted (or deleted and created again:
    /// its offsets then mean other records) since this reader opened it.
    pub fn check_topics(&self, source: &dyn Source) -> Result<()> {
        for (topic, _) in self.inputs() {
            source.check_current(topic)?;
        }
        Ok(())
    }

    /// The input topics with the next offset to process in each partition.
    pub fn inputs(&self) -> Vec<(&dyn SourceTopic, &[u64])> {
        let mut inputs = vec![(self.stream.as_ref(), self.stream_positions.as_slice())];
        if let Some(table) = &self.table {
            // Each joined table's topic on its own.
            inputs.extend(JoinedTables::split(table.as_ref(), &self.table_positions));
        }
        inputs
    }

    /// The stream's topic.
    pub fn stream_topic(&self) -> Arc<dyn SourceTopic> {
        self.stream.clone()
    }

    /// Next offset to process per stream partition.
    pub fn stream_positions(&self) -> &[u64] {
        &self.stream_positions
    }

    /// The joined tables' topic (its partitions numbered across the
    /// tables: [`JoinedTables`]); the stream's when there is no join.
    pub fn table_topic(&self) -> &dyn SourceTopic {
        self.table.as_deref().unwrap_or(self.stream.as_ref())
    }

    /// Next offset to process per table partition (empty without a join).
    pub fn table_positions(&self) -> &[u64] {
        &self.table_positions
    }

    /// Number of partitions read (table and stream).
    pub fn input_count(&self) -> usize {
        self.inputs.len()
    }

    /// Starts a poll: partitions at their end may have grown since.
    pub fn start_poll(&mut self) {
        for input in &mut self.inputs {
            input.at_end = false;
        }
        self.held_back = None;
    }

    /// The next batch in log order whose append time is at most
    /// `complete` (the log's completeness bound, read before this poll),
    /// fetching up to `max_records` from a partition when its read-ahead
    /// runs out (a fetch's last batch handed out as `ends` says). `None`
    /// when every partition is at its end or the next batch is beyond
    /// `complete` ([`held_back`](Self::held_back) says when).
    pub fn next(
        &mut self,
        complete: i64,
        max_records: u64,
        ends: BatchEnds,
    ) -> Result<Option<NextBatch>> {
        for i in 0..self.inputs.len() {
            if self.inputs[i].batches.is_empty() && !self.inputs[i].at_end {
                self.fetch(i, max_records, ends)?;
            }
        }
        let Some(best) = (0..self.inputs.len())
            .filter_map(|i| {
                let (batch, _, _) = self.inputs[i].batches.front()?;
                Some((batch.append_time(), i))
            })
            .min()
        else {
            return Ok(None);
        };
        let (append_time, i) = best;
        if append_time > complete
            || (self.bounded_partitions && append_time > self.bound_of_empty_inputs(i))
        {
            self.held_back = Some(append_time);
            return Ok(None);
        }
        let input = &mut self.inputs[i];
        let (batch, fetch_end, crc) = input.batches.pop_front().expect("non-empty");
        let (from, to) = (
            input.handed_to.max(batch.base_offset()),
            batch.next_offset().min(fetch_end),
        );
        if from >= to {
            // The log's fetch contract broken (`kappa_log::Fetch`): handing
            // out nothing here would skip the batch's records for good.
            return Err(ProcessorError::Stopped(format!(
                "{}/{}: the batch at offset {} came back outside its read (records {from}..{to}); stopped rather than skip its records",
                topic_of(&self.stream, &self.table, input.side).name(),
                input.partition,
                batch.base_offset()
            )));
        }
        input.handed_to = input.handed_to.max(to);
        Ok(Some(NextBatch {
            side: input.side,
            partition: input.partition,
            from,
            to,
            batch,
            crc,
        }))
    }

    /// The latest append time up to which the inputs other than `but`
    /// with nothing read ahead can get no more records
    /// ([`SourceTopic::bound`]).
    fn bound_of_empty_inputs(&self, but: usize) -> i64 {
        self.inputs
            .iter()
            .enumerate()
            .filter(|(j, input)| *j != but && input.batches.is_empty())
            .map(|(_, input)| {
                topic_of(&self.stream, &self.table, input.side).bound(input.partition)
            })
            .min()
            .unwrap_or(i64::MAX)
    }

    /// The append time of the oldest batch already in the log that the
    /// last [`next`](Self::next) held back because the log was not yet
    /// complete up to it.
    pub fn held_back(&self) -> Option<i64> {
        self.held_back
    }

    /// `next` checked whole ([`NextBatch::check`]), or the error its
    /// damage stops the version with ([`InputOrder::damaged`]).
    pub fn check(&self, next: &NextBatch) -> Result<CheckedBatch> {
        next.check().map_err(|reason| {
            self.damaged(next.side, next.partition, next.batch.base_offset(), &reason)
        })
    }

    /// The error a batch of `side`'s `partition` starting at `first_offset`
    /// that failed its check (`reason`) stops the version with: what the
    /// log's read at that offset reports (the damaged offsets and the next
    /// readable one, logged and counted as every damage the log finds).
    pub fn damaged(
        &self,
        side: Side,
        partition: u32,
        first_offset: u64,
        reason: &DecodeError,
    ) -> ProcessorError {
        topic_of(&self.stream, &self.table, side).damaged(
            partition,
            first_offset,
            &reason.to_string(),
        )
    }

    /// Records that every offset of `side`'s `partition` before `offset`
    /// was processed.
    pub fn processed_to(&mut self, side: Side, partition: u32, offset: u64) {
        let position = match side {
            Side::Table => &mut self.table_positions[partition as usize],
            Side::Stream => &mut self.stream_positions[partition as usize],
        };
        *position = (*position).max(offset);
    }

    fn fetch(&mut self, i: usize, max_records: u64, ends: BatchEnds) -> Result<()> {
        let input = &mut self.inputs[i];
        if let Some(batch) = input.split.take() {
            // Its records from `read_to` on, at most `max_records` of them,
            // from the batch the last fetch read: not read once more per
            // fetch it is split over, nor its CRC checked once more (the
            // part handed out first checks it, and is processed first).
            let end = batch
                .next_offset()
                .min(input.read_to.saturating_add(max_records));
            if end < batch.next_offset() {
                input.split = Some(batch.clone());
            }
            input.batches.push_back((batch, end, Crc::CheckedBefore));
            input.read_to = end;
            return Ok(());
        }
        let topic = topic_of(&self.stream, &self.table, input.side);
        let offset = input.read_to;
        let fetch = topic.read(input.partition, offset, max_records, 4 << 20)?;
        input.at_end = fetch.at_end;
        let mut end = fetch.next_offset;
        if let Some(last) = fetch.batches.last() {
            // A batch the partition holds whole is taken whole if asked.
            if ends == BatchEnds::Whole && last.next_offset() <= fetch.readable_to {
                end = end.max(last.next_offset());
            }
            if end < last.next_offset() {
                input.split = Some(last.clone());
            }
        }
        for batch in fetch.batches {
            if batch.next_offset() > offset {
                input.batches.push_back((batch, end, Crc::Check));
            }
        }
        input.read_to = end;
        Ok(())
    }
}

/// The topic of `side`: the stream's, or the joined table's.
fn topic_of<'a>(
    stream: &'a Arc<dyn SourceTopic>,
    table: &'a Option<Arc<dyn SourceTopic>>,
    side: Side,
) -> &'a Arc<dyn SourceTopic> {
    match side {
        Side::Table => table.as_ref().expect("table inputs have a topic"),
        Side::Stream => stream,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LogSource;
    use bytes::Bytes;
    use kappa_log::{Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};

    /// The `(from, to, crc checked)` of the batches handed out of one
    /// partition holding a batch of 10 records then one of 3, fetching
    /// 4 records at a time.
    fn handed_out(ends: BatchEnds) -> Vec<(u64, u64, bool)> {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(LogConfig::new(dir.path().join("log"))).unwrap());
        log.create_topic("t", TopicConfig::default()).unwrap();
        let topic = log.topic("t").unwrap();
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for count in [10, 3] {
            let records = (0..count)
                .map(|i| ProduceRecord {
                    partition: Some(0),
                    record: NewRecord::value(Bytes::from(format!("{i}"))),
                })
                .collect();
            io.block_on(topic.produce(records, None)).unwrap();
        }
        let stream = LogSource::shared(log.clone()).open("t").unwrap();
        let mut order = InputOrder::new(stream, vec![0], None);
        order.start_reading().unwrap();
        order.start_poll();
        let mut handed = Vec::new();
        while let Some(next) = order.next(i64::MAX, 4, ends).unwrap() {
            let mut read = 0;
            next.read_checked(|_| read += 1).unwrap();
            assert_eq!(read, next.to - next.from);
            handed.push((next.from, next.to, next.crc == Crc::Check));
        }
        handed
    }

    /// A fetch that stops inside a batch hands out its part and the rest
    /// with the next fetch — or, for source workers, the batch whole.
    #[test]
    fn a_batch_a_fetch_stops_inside_is_split_or_taken_whole() {
        assert_eq!(
            handed_out(BatchEnds::AtTheFetch),
            [(0, 4, true), (4, 8, false), (8, 10, false), (10, 13, true)]
        );
        assert_eq!(
            handed_out(BatchEnds::Whole),
            [(0, 10, true), (10, 13, true)]
        );
    }
}
