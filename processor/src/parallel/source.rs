//! Source workers: decode a batch's records ([`crate::decoder`], which
//! applies the filter when nothing stateful comes before it), and compute
//! the key shard of each event, in parallel; decode a joined stream's
//! records ([`JoinedDecoder`]); the coordinator takes the results back in
//! the order it handed the batches out.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;
use kappa_log::batch::DecodeError;

use super::handoff::{EndOnDrop, Results};
use super::shard::ShardEvent;
use crate::decoder::{Decoded, Decoder, Early, FieldsRow, LocatedFields};
use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::expr::Expr;
use crate::operator::stream_join::{JoinedDecoder, JoinedInput, JoinedRecord};
use crate::order::{NextBatch, Side};
use crate::plan::AggregateSpec;
use crate::progress::{Progress, WorkerProgress, WorkerRole};
use crate::project::RowWriter;

/// A record as a source worker hands it to the coordinator.
#[derive(Debug)]
pub(crate) enum Prepared {
    /// Its event time is beyond `MAX_FUTURE` of its append time.
    Future(Event),
    /// It failed the filter, applied early: only its event time matters
    /// (it still moves the watermark).
    Filtered {
        /// Event time.
        event_time: i64,
    },
    /// An event to process.
    Event {
        /// The event.
        event: Event,
        /// The filter was applied (and passed).
        filtered: bool,
    },
}

/// A derived stream's output record, made by a source worker or inline:
/// all the coordinator needs of the event is its time (for the watermark
/// and the record's timestamp). Its key and value are text, one after the
/// other, in a buffer of rows ([`PreparedBatch`]'s, or the runtime's own):
/// no record is its own allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProjectedRow {
    /// The event's time.
    pub(crate) event_time: i64,
    /// Bytes of the output record's key ([`ProjectedRow::NO_KEY`]: none).
    key_len: u32,
    /// Bytes of the output record's value (the row's JSON text).
    value_len: u32,
}

impl ProjectedRow {
    /// `key_len` of a record without a key.
    const NO_KEY: u32 = u32::MAX;

    /// The key and value of this row, which starts at `rows[*at]`; moves
    /// `at` past it.
    pub(crate) fn texts<'r>(&self, rows: &'r [u8], at: &mut usize) -> (Option<&'r [u8]>, &'r [u8]) {
        let key = (self.key_len != Self::NO_KEY).then(|| {
            let key = &rows[*at..*at + self.key_len as usize];
            *at += key.len();
            key
        });
        let value = &rows[*at..*at + self.value_len as usize];
        *at += value.len();
        (key, value)
    }
}

/// What the projection path made of a record.
#[derive(Debug)]
pub(crate) enum Projected {
    /// It failed the filter, applied early, at this event time.
    Filtered(i64),
    /// Its output record, written to the rows given.
    Row(ProjectedRow),
}

/// A projection made where its events are decoded (by source workers, or
/// inline by a single-threaded version): its columns, the row writer and
/// the `PARTITION BY` expression, when nothing before the projection needs
/// the coordinator (no dedup or join, the filter applied early).
#[derive(Debug, Clone)]
pub(crate) struct SourceProjection {
    /// The projection's columns.
    columns: Arc<[(String, Expr)]>,
    /// Writes each row.
    row: RowWriter,
    /// Keys the output records, if given.
    partition_by: Option<Expr>,
    /// The indices among the decoder's used fields of those the row's
    /// computed columns and `partition_by` read, when rows can be written
    /// from located fields ([`SourceProjection::project_located`]).
    located_reads: Option<Arc<[usize]>>,
}

impl SourceProjection {
    /// The projection of `columns` written by `row`, keyed by
    /// `partition_by`, its events decoded by `decoder`.
    pub(crate) fn new(
        columns: Arc<[(String, Expr)]>,
        row: RowWriter,
        partition_by: Option<Expr>,
        decoder: &Decoder,
    ) -> SourceProjection {
        let located_reads = (|| {
            let names = decoder.used_fields()?;
            let mut reads = row.computed_reads()?.to_vec();
            for path in partition_by.iter().flat_map(Expr::fields) {
                let at = names.iter().position(|n| Some(n) == path.first())?;
                if !reads.contains(&at) {
                    reads.push(at);
                }
            }
            Some(Arc::from(reads))
        })();
        SourceProjection {
            columns,
            row,
            partition_by,
            located_reads,
        }
    }

    /// The output record of `record` (appended at `append_time`) made from
    /// its located fields ([`Decoder::locate`]) without decoding an event,
    /// written to `rows`, or that it failed the filter: what
    /// [`SourceProjection::project`] makes of the event `decoder` decodes.
    /// `None` where that path does not apply or is not sure (`rows` then
    /// as it was): the record is then decoded.
    pub(crate) fn project_located(
        &mut self,
        decoder: &Decoder,
        record: &kappa_log::RecordRef<'_>,
        append_time: i64,
        rows: &mut Vec<u8>,
    ) -> Option<Projected> {
        let reads = self.located_reads.as_deref()?;
        let mut fields = LocatedFields::default();
        let event_time = match decoder.locate(record, append_time, &mut fields)? {
            Early::Filtered(event_time) => return Some(Projected::Filtered(event_time)),
            Early::Passed(event_time) => event_time,
        };
        let LocatedFields { raws, mut values } = fields;
        let names = decoder.used_fields()?;
        if !reads.is_empty() && values.is_empty() {
            values.resize(names.len(), serde_json::Value::Null);
        }
        for &i in reads {
            if values[i].is_null() {
                values[i] = raws[i].build()?;
            }
        }
        let row = FieldsRow {
            names,
            values: &values,
            key: record.key.map(crate::event::key_text),
            record_timestamp: record.timestamp,
        };
        let start = rows.len();
        let key_len = match &self.partition_by {
            Some(by) => put_key(rows, crate::expr::stringify(&by.eval(&row)).as_deref()),
            None => put_key(rows, row.key.as_deref()),
        };
        let value_start = rows.len();
        if self
            .row
            .write_located(&self.columns, &raws, &row, rows)
            .is_none()
        {
            rows.truncate(start);
            return None;
        }
        Some(Projected::Row(ProjectedRow {
            event_time,
            key_len,
            value_len: (rows.len() - value_start) as u32,
        }))
    }

    /// The output record of `event`, written to `rows`.
    pub(crate) fn project(&mut self, event: &Event, rows: &mut Vec<u8>) -> ProjectedRow {
        let key_len = match &self.partition_by {
            Some(by) => put_key(rows, crate::expr::stringify(&by.eval(event)).as_deref()),
            None => put_key(rows, event.key_text()),
        };
        let value_start = rows.len();
        self.row.write(&self.columns, event, rows);
        ProjectedRow {
            event_time: event.event_time,
            key_len,
            value_len: (rows.len() - value_start) as u32,
        }
    }
}

/// Puts `key` at the end of `rows`: its [`ProjectedRow`] length.
fn put_key(rows: &mut Vec<u8>, key: Option<&str>) -> u32 {
    match key {
        Some(key) => {
            rows.extend_from_slice(key.as_bytes());
            key.len() as u32
        }
        None => ProjectedRow::NO_KEY,
    }
}

/// A batch's records as a source worker prepared them: its number of
/// records, and the valid ones in order as [`Item`]s of 16 bytes — a run
/// of records that failed the early filter as one item; an event of an
/// aggregate the coordinator only sequences ([`SourceWork::grouped`]) as
/// an item with its key shard and event time, the event itself
/// ([`ShardEvent`]) in one vector per key shard that goes to the shard as
/// it is; any other record as an item, the record ([`Prepared`], a few
/// hundred bytes for an event) in a vector beside them.
#[derive(Debug, Default)]
pub(crate) struct PreparedBatch {
    /// The batch failed its check (CRC, records): its first offset and
    /// what is damaged (and nothing else is prepared).
    pub(crate) damage: Option<(u64, DecodeError)>,
    /// Records in the batch, valid or not.
    pub(crate) records: u64,
    /// The valid records, in order.
    items: Vec<Item>,
    /// The records of [`Item::Kept`], in order.
    kept: Vec<Prepared>,
    /// The rows of [`Item::Projected`], in order, their texts in `rows`.
    projected: Vec<ProjectedRow>,
    /// The projected rows' keys and values, one after the other.
    rows: Vec<u8>,
    /// Per key shard, the events of its [`Item::Grouped`] items, in order
    /// (empty without [`SourceWork::grouped`]).
    grouped: Vec<Vec<ShardEvent>>,
    /// A joined stream's batch: its valid records in order, each with its
    /// offset ([`JoinedRecord::Filtered`] or [`JoinedRecord::Event`]; the
    /// invalid ones are counted and left out).
    pub(crate) joined: Vec<(u64, JoinedRecord)>,
}

/// What the coordinator processes of a [`PreparedBatch`], in order: one
/// item of 16 bytes per run of filtered records, grouped event or other
/// valid record (which it takes from [`Parts::kept`]). The records stay
/// in their vector: an item holding one (a few hundred bytes) was copied
/// whole at every move, whatever its kind.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Item {
    /// Consecutive records that failed the early filter: how many, and
    /// the largest event time among them
    /// ([`crate::runner::Runtime::process_filtered_run`]).
    FilteredRun { max_event_time: i64, records: u32 },
    /// The next of the batch's other valid records ([`Parts::kept`]).
    Kept,
    /// The next projected row ([`Parts::projected`]).
    Projected,
    /// The next grouped event of key shard `shard` (the event itself is
    /// in the batch's vector for the shard), the filter applied
    /// ([`crate::runner::Runtime::process_grouped`]).
    Grouped { event_time: i64, shard: u32 },
}

/// A [`PreparedBatch`] taken apart for the coordinator.
pub(crate) struct Parts {
    /// The valid records, in order.
    pub(crate) items: std::vec::IntoIter<Item>,
    /// The records of the [`Item::Kept`] items, in order.
    pub(crate) kept: std::vec::IntoIter<Prepared>,
    /// The rows of the [`Item::Projected`] items, in order, their texts
    /// one after the other in `rows`.
    pub(crate) projected: std::vec::IntoIter<ProjectedRow>,
    /// The projected rows' texts.
    pub(crate) rows: Vec<u8>,
    /// Per key shard, its grouped events in the order of their items.
    pub(crate) grouped: Vec<Vec<ShardEvent>>,
}

impl PreparedBatch {
    /// An empty batch with room for `records` items and `expected` kept
    /// records: grouped ones over `shards` key shards (none: not grouped),
    /// or, with `row_bytes`, projected rows of about that many bytes.
    fn with_capacity(
        records: usize,
        expected: usize,
        shards: usize,
        row_bytes: Option<usize>,
    ) -> PreparedBatch {
        // A quarter more than an even share: the shares vary from batch to
        // batch, and a vector that outgrows its room is copied whole (a
        // share of ~60 events overflowed in half of the batches). Rounded
        // down: with many shards and few events, most shards' vectors stay
        // unallocated until an event comes.
        let per_shard = (expected + expected / 4) / shards.max(1);
        PreparedBatch {
            damage: None,
            records: 0,
            items: Vec::with_capacity(records),
            kept: Vec::with_capacity(if shards == 0 && row_bytes.is_none() {
                expected
            } else {
                0
            }),
            projected: Vec::with_capacity(row_bytes.map_or(0, |_| expected)),
            rows: Vec::with_capacity(row_bytes.unwrap_or(0)),
            grouped: (0..shards).map(|_| Vec::with_capacity(per_shard)).collect(),
            joined: Vec::new(),
        }
    }

    /// Records kept (not dropped by the early filter).
    fn kept_records(&self) -> usize {
        self.kept.len() + self.projected.len() + self.grouped.iter().map(Vec::len).sum::<usize>()
    }

    fn push_projected(&mut self, projected: Projected) {
        match projected {
            Projected::Filtered(event_time) => self.push(Prepared::Filtered { event_time }),
            Projected::Row(row) => {
                self.items.push(Item::Projected);
                self.projected.push(row);
            }
        }
    }

    fn push(&mut self, prepared: Prepared) {
        match prepared {
            Prepared::Filtered { event_time } => match self.items.last_mut() {
                Some(Item::FilteredRun {
                    max_event_time,
                    records,
                }) if *records < u32::MAX => {
                    *max_event_time = (*max_event_time).max(event_time);
                    *records += 1;
                }
                _ => self.items.push(Item::FilteredRun {
                    max_event_time: event_time,
                    records: 1,
                }),
            },
            kept => {
                self.items.push(Item::Kept);
                self.kept.push(kept);
            }
        }
    }

    fn push_grouped(&mut self, shard: usize, event: ShardEvent) {
        self.items.push(Item::Grouped {
            event_time: event.grouped.event_time,
            shard: shard as u32,
        });
        self.grouped[shard].push(event);
    }

    /// This batch, prepared from `next` with `invalid` records among them,
    /// once its reading ended as `checked`: nothing but its damage if that
    /// failed, else the invalid records are counted in `progress` (once
    /// the whole batch is known to be undamaged).
    fn checked(
        self,
        next: &NextBatch,
        checked: std::result::Result<(), DecodeError>,
        invalid: u64,
        progress: &Progress,
    ) -> PreparedBatch {
        if let Err(damage) = checked {
            return PreparedBatch::damaged(next, damage);
        }
        if invalid > 0 {
            progress.count_invalid_records(invalid);
        }
        self
    }

    /// A batch that failed its check: `next`'s first offset and `damage`.
    fn damaged(next: &NextBatch, damage: DecodeError) -> PreparedBatch {
        PreparedBatch {
            damage: Some((next.batch.base_offset(), damage)),
            ..PreparedBatch::default()
        }
    }

    /// The valid records, in order, runs of filtered ones together; the
    /// kept records; and per key shard, its grouped events in the order of
    /// their items.
    pub(crate) fn into_parts(self) -> Parts {
        Parts {
            items: self.items.into_iter(),
            kept: self.kept.into_iter(),
            projected: self.projected.into_iter(),
            rows: self.rows,
            grouped: self.grouped,
        }
    }
}

/// What a source worker does beyond decoding, fixed per version.
#[derive(Debug, Clone)]
pub(crate) struct SourceWork {
    /// Decodes records, and applies the filter when nothing stateful
    /// (dedup, join) comes before it.
    pub(crate) decoder: Decoder,
    /// The aggregate and its number of key shards, when the coordinator
    /// needs nothing of an event but its event time (no dedup or join, and
    /// the filter, if any, applied by the decoder): events are then handed
    /// over grouped ([`ShardEvent`]), with their key shard.
    pub(crate) grouped: Option<(AggregateSpec, usize)>,
    /// Late events go to a side output: a grouped event keeps its record.
    pub(crate) late_side_output: bool,
    /// The projection, when source workers make a derived stream's rows.
    pub(crate) project: Option<SourceProjection>,
    /// With a stream-stream join: what decodes the joined stream's records,
    /// and the plan's `max_future_ms` they are checked against.
    pub(crate) joined: Option<(JoinedDecoder, i64)>,
}

impl SourceWork {
    /// The records of a joined stream's batch `next`, checked and decoded
    /// (invalid ones are counted in `progress`). A damaged batch gives its
    /// damage and nothing else.
    fn prepare_joined(&self, next: &NextBatch, progress: &Progress) -> PreparedBatch {
        let (decoder, max_future_ms) = self
            .joined
            .as_ref()
            .expect("joined batches come only with a stream-stream join");
        let append_time = next.batch.append_time();
        let mut out = PreparedBatch {
            joined: Vec::with_capacity((next.to - next.from) as usize),
            ..PreparedBatch::default()
        };
        let mut invalid = 0;
        let checked = next.bytes_to_read().map(|_| ()).and_then(|()| {
            next.read_checked(|record| {
                out.records += 1;
                let input = JoinedInput::of(next.partition, &record);
                match decoder.decode(input, append_time, *max_future_ms) {
                    JoinedRecord::Invalid | JoinedRecord::Future => invalid += 1,
                    decoded => out.joined.push((record.offset, decoded)),
                }
            })
        });
        out.checked(next, checked, invalid, progress)
    }

    /// The records of `next`, checked and prepared (invalid ones are
    /// counted in `progress`); `expected` kept records are made room for.
    /// A damaged batch gives its damage and nothing else.
    fn prepare(&mut self, next: &NextBatch, progress: &Progress, expected: usize) -> PreparedBatch {
        let append_time = next.batch.append_time();
        // Events share the batch's bytes through a reference count of this
        // batch alone: the log's buffer is one mapping of a whole segment,
        // whose one count every source worker would otherwise take and
        // release per event, from several cores.
        // Checked here, on the core that decodes them, as they are read
        // (a compressed batch is checked and inflated here first); a
        // damaged batch gives nothing but its damage.
        let bytes = match next.bytes_to_read() {
            Ok(bytes) => bytes,
            Err(damage) => return PreparedBatch::damaged(next, damage),
        };
        let buffer = &Bytes::from_owner(bytes.clone());
        let count = (next.to - next.from) as usize;
        let shards = self.grouped.as_ref().map_or(0, |(_, shards)| *shards);
        // Room for rows as long as the batch, and some.
        let row_bytes = self.project.as_ref().map(|_| bytes.len() + bytes.len() / 8);
        let mut out = PreparedBatch::with_capacity(count, expected, shards, row_bytes);
        let mut invalid = 0;
        // Its records checked as they are read.
        let checked = next.read_checked(|record| {
            out.records += 1;
            if let Some(project) = &mut self.project {
                let rows = &mut out.rows;
                if let Some(projected) =
                    project.project_located(&self.decoder, &record, append_time, rows)
                {
                    return out.push_projected(projected);
                }
            }
            match self
                .decoder
                .decode(next.partition, record, buffer, append_time)
            {
                Decoded::Invalid => invalid += 1,
                Decoded::Future(event) => out.push(Prepared::Future(event)),
                Decoded::Filtered { event_time } => out.push(Prepared::Filtered { event_time }),
                Decoded::Valid { event, filtered } => match &self.grouped {
                    _ if self.project.is_some() => {
                        debug_assert!(filtered || !self.decoder.filters());
                        let project = self.project.as_mut().expect("a projection");
                        let row = project.project(&event, &mut out.rows);
                        out.push_projected(Projected::Row(row));
                    }
                    Some((spec, shards)) => {
                        debug_assert!(filtered || !self.decoder.filters());
                        // The event's memory (its fields, and its share of
                        // the batch buffer) is released here, on the
                        // thread that took it.
                        let shard_event = ShardEvent::of(spec, &event, self.late_side_output);
                        out.push_grouped(shard_event.shard(*shards), shard_event);
                    }
                    None => out.push(Prepared::Event { event, filtered }),
                },
            }
        });
        out.checked(next, checked, invalid, progress)
    }
}

/// Records in the pool per source worker at most (see
/// [`SourcePool::has_room`]).
const READ_AHEAD_RECORDS: u64 = 16_384;
/// Batches in the pool per source worker at most.
const READ_AHEAD_BATCHES: usize = 16;

/// A batch handed to a source worker.
struct Job {
    batch: NextBatch,
    /// It is the joined stream's ([`SourceWork::prepare_joined`]).
    joined: bool,
}

/// A batch the coordinator handed to the pool, in log order.
enum Queued {
    /// A table batch: passes through (the coordinator applies it).
    Table(NextBatch),
    /// A batch a worker prepares, the stream's or the joined stream's
    /// (`joined`): its number of records (those read, `to` minus the
    /// first), partition, log time and end (exclusive) of its records.
    Prepared {
        joined: bool,
        records: u64,
        partition: u32,
        append_time: i64,
        to: u64,
        /// The worker preparing it.
        worker: usize,
    },
}

/// A batch handed back by the pool, in the order handed in.
pub(crate) enum Handed {
    /// A table batch, as it went in.
    Table(NextBatch),
    /// A stream batch, prepared.
    Stream {
        /// Its partition.
        partition: u32,
        /// Its log (append) time.
        append_time: i64,
        /// End (exclusive) of its records.
        to: u64,
        /// Its records, prepared.
        prepared: PreparedBatch,
    },
    /// A joined stream's batch, decoded ([`PreparedBatch::joined`]).
    Joined {
        /// Its partition (of the table side).
        partition: u32,
        /// Its log (append) time.
        append_time: i64,
        /// End (exclusive) of its records.
        to: u64,
        /// Its records, decoded.
        prepared: PreparedBatch,
    },
}

/// The coordinator's handle on a version's source workers. Batches go in
/// in log order and come back in that order, stream batches prepared;
/// what is in the pool stays there from one poll to the next, so the
/// workers never wait for a poll to start.
pub(crate) struct SourcePool {
    jobs: Vec<Sender<Job>>,
    /// Each worker's prepared batches, in the order it was given them.
    results: Arc<Results<PreparedBatch>>,
    /// The batches handed in and not yet handed back, oldest first.
    queue: VecDeque<Queued>,
    /// Records of the stream batches in `queue`.
    queued_records: u64,
    /// Partitions read; a partition's batches go to worker `p % workers`
    /// when there are at least as many partitions as workers, else in turn.
    partitions: usize,
    next_turn: usize,
    threads: Vec<JoinHandle<()>>,
}

impl SourcePool {
    /// Starts `workers` source workers doing `work` for a source of
    /// `partitions` partitions.
    pub(crate) fn start(
        workers: usize,
        partitions: usize,
        work: SourceWork,
        progress: &Arc<Progress>,
        thread_name: &str,
    ) -> Result<SourcePool> {
        let mut pool = SourcePool {
            jobs: Vec::new(),
            results: Arc::new(Results::new(workers)),
            queue: VecDeque::new(),
            queued_records: 0,
            partitions,
            next_turn: 0,
            threads: Vec::new(),
        };
        for index in 0..workers {
            let owned = (0..partitions as u32)
                .filter(|p| partitions < workers || *p as usize % workers == index)
                .collect();
            let worker = progress.add_worker(
                format!("source-{index}"),
                WorkerRole::Source { partitions: owned },
            );
            let (job_tx, job_rx) = mpsc::channel::<Job>();
            let work = SourceWork {
                decoder: work.decoder.detached(),
                ..work.clone()
            };
            let progress = progress.clone();
            let results = pool.results.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{thread_name}-source-{index}"))
                .spawn(move || run(work, &progress, &worker, job_rx, &results, index))
                .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?;
            pool.jobs.push(job_tx);
            pool.threads.push(thread);
        }
        Ok(pool)
    }

    /// Batches handed in and not yet handed back.
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// True while the pool takes more batches: until it holds
    /// [`READ_AHEAD_RECORDS`] records per worker (a few milliseconds of
    /// work, so a worker does not run dry while the coordinator waits for
    /// a core) or [`READ_AHEAD_BATCHES`] batches per worker.
    pub(crate) fn has_room(&self) -> bool {
        let workers = self.jobs.len();
        self.queue.len() < workers * READ_AHEAD_BATCHES
            && self.queued_records < (workers as u64) * READ_AHEAD_RECORDS
    }

    /// Hands in the next batch in log order: a stream batch to its worker,
    /// a table batch to pass through — unless it is the joined stream's
    /// (`joined`), which a worker decodes too.
    pub(crate) fn push(&mut self, next: NextBatch, joined: bool) -> Result<()> {
        if next.side == Side::Table && !joined {
            self.queue.push_back(Queued::Table(next));
            return Ok(());
        }
        let workers = self.jobs.len();
        // The joined stream's partitions are not the stream's: in turn.
        let worker = if self.partitions >= workers && !joined {
            next.partition as usize % workers
        } else {
            self.next_turn = (self.next_turn + 1) % workers;
            self.next_turn
        };
        let records = next.to - next.from;
        self.queued_records += records;
        self.queue.push_back(Queued::Prepared {
            joined,
            records,
            partition: next.partition,
            append_time: next.batch.append_time(),
            to: next.to,
            worker,
        });
        self.results.given_work(worker);
        self.jobs[worker]
            .send(Job {
                batch: next,
                joined,
            })
            .map_err(|_| ProcessorError::Stopped(format!("source worker {worker} ended")))
    }

    /// The oldest batch handed in (a stream batch once prepared); `None`
    /// when the pool is empty.
    pub(crate) fn pop(&mut self) -> Result<Option<Handed>> {
        let Some(queued) = self.queue.pop_front() else {
            return Ok(None);
        };
        match queued {
            Queued::Table(next) => Ok(Some(Handed::Table(next))),
            Queued::Prepared {
                joined,
                records,
                partition,
                append_time,
                to,
                worker,
            } => {
                self.queued_records -= records;
                let prepared = self.results.take(worker).ok_or_else(|| {
                    ProcessorError::Stopped(format!("source worker {worker} ended"))
                })?;
                Ok(Some(match joined {
                    true => Handed::Joined {
                        partition,
                        append_time,
                        to,
                        prepared,
                    },
                    false => Handed::Stream {
                        partition,
                        append_time,
                        to,
                        prepared,
                    },
                }))
            }
        }
    }
}

impl Drop for SourcePool {
    fn drop(&mut self) {
        self.jobs.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Source worker `index`: prepares the batches of `jobs` in turn into
/// `results` until the pool drops its end of `jobs`.
fn run(
    mut work: SourceWork,
    progress: &Progress,
    worker: &WorkerProgress,
    jobs: Receiver<Job>,
    results: &Results<PreparedBatch>,
    index: usize,
) {
    let _end = EndOnDrop {
        results,
        worker: index,
    };
    // Kept records per record of the last batch, to size the next one's
    // vector of kept records (growing it by doubling copied each batch's
    // events several times).
    let (mut last_kept, mut last_records) = (0usize, 1usize);
    let mut next = jobs.recv().ok();
    while let Some(job) = next {
        let prepared = match job.joined {
            true => work.prepare_joined(&job.batch, progress),
            false => {
                let records = (job.batch.to - job.batch.from) as usize;
                let expected = (records * last_kept).div_ceil(last_records) + 8;
                let prepared = work.prepare(&job.batch, progress, expected);
                (last_kept, last_records) = (prepared.kept_records(), records.max(1));
                prepared
            }
        };
        worker.add_events(prepared.records);
        // Whether it is out of work (no job waiting) decides when the
        // waiting coordinator is woken (`Results`).
        next = match jobs.try_recv() {
            Ok(job) => {
                results.put(index, prepared, false);
                Some(job)
            }
            Err(TryRecvError::Empty) => {
                results.put(index, prepared, true);
                jobs.recv().ok()
            }
            // The pool is gone: nobody takes this batch.
            Err(TryRecvError::Disconnected) => None,
        };
    }
}
