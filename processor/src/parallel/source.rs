//! Source workers: decode a batch's records ([`crate::decoder`], which
//! applies the filter when nothing stateful comes before it), and compute
//! the key shard of each event, in parallel; the coordinator takes the
//! results back in the order it handed the batches out.

use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::decoder::{Decoded, Decoder};
use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::operator::aggregate::GroupOf;
use crate::order::{NextBatch, Side};
use crate::plan::AggregateSpec;
use crate::progress::{Progress, WorkerProgress, WorkerRole};
use crate::state::key::Shard;

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
        /// The key shard its group belongs to, when the source computed it.
        shard: Option<usize>,
        /// The filter was applied (and passed).
        filtered: bool,
    },
}

/// A batch's records as a source worker prepared them: its number of
/// records, and the valid ones in order — each run of records that failed
/// the early filter as one step of 16 bytes, the others as [`Prepared`]
/// values on the side (an event is a few hundred bytes; most records of a
/// filtered view are dropped, and a batch of them stays small).
#[derive(Debug, Default)]
pub(crate) struct PreparedBatch {
    /// Records in the batch, valid or not.
    pub(crate) records: u64,
    /// The valid records, in order.
    steps: Vec<Step>,
    /// The records of [`Step::Kept`], in order.
    kept: Vec<Prepared>,
}

/// A step of a [`PreparedBatch`].
#[derive(Debug, Clone, Copy)]
enum Step {
    /// Consecutive records that failed the early filter.
    Filtered { max_event_time: i64, records: u32 },
    /// The next of the batch's kept records.
    Kept,
}

/// What the coordinator processes of a [`PreparedBatch`], in order.
#[derive(Debug)]
// Made one at a time and matched at once: boxing the record would cost an
// allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Item {
    /// Consecutive records that failed the early filter: how many, and
    /// the largest event time among them
    /// ([`crate::runner::Runtime::process_filtered_run`]).
    FilteredRun { max_event_time: i64, records: u32 },
    /// Any other valid record.
    Record(Prepared),
}

impl PreparedBatch {
    fn push(&mut self, prepared: Prepared) {
        match prepared {
            Prepared::Filtered { event_time } => match self.steps.last_mut() {
                Some(Step::Filtered {
                    max_event_time,
                    records,
                }) if *records < u32::MAX => {
                    *max_event_time = (*max_event_time).max(event_time);
                    *records += 1;
                }
                _ => self.steps.push(Step::Filtered {
                    max_event_time: event_time,
                    records: 1,
                }),
            },
            kept => {
                self.steps.push(Step::Kept);
                self.kept.push(kept);
            }
        }
    }

    /// The valid records, in order, runs of filtered ones together.
    pub(crate) fn into_items(self) -> impl Iterator<Item = Item> {
        let mut kept = self.kept.into_iter();
        self.steps.into_iter().map(move |step| match step {
            Step::Filtered {
                max_event_time,
                records,
            } => Item::FilteredRun {
                max_event_time,
                records,
            },
            Step::Kept => Item::Record(kept.next().expect("one kept record per kept step")),
        })
    }
}

/// What a source worker does beyond decoding, fixed per version.
#[derive(Debug, Clone)]
pub(crate) struct SourceWork {
    /// Decodes records, and applies the filter when nothing stateful
    /// (dedup, join) comes before it.
    pub(crate) decoder: Decoder,
    /// The aggregate and the number of key shards, when the group key can
    /// be computed from the record alone (no join).
    pub(crate) route: Option<(AggregateSpec, usize)>,
    /// Routed events need their raw value (a late side output sends it).
    pub(crate) keep_value: bool,
    /// Routed events need their record key (the aggregate reads it).
    pub(crate) keep_key: bool,
}

impl SourceWork {
    /// The records of `batch`, prepared (invalid ones are counted in
    /// `progress`).
    fn prepare(&self, batch: &NextBatch, progress: &Progress) -> PreparedBatch {
        let append_time = batch.batch.append_time();
        let buffer = batch.batch.as_bytes();
        let mut out = PreparedBatch {
            records: 0,
            steps: Vec::with_capacity((batch.to - batch.from) as usize),
            kept: Vec::new(),
        };
        for record in batch.record_refs() {
            out.records += 1;
            let (mut event, filtered) =
                match self
                    .decoder
                    .decode(batch.partition, record, buffer, append_time)
                {
                    Decoded::Invalid => {
                        progress.count_invalid();
                        continue;
                    }
                    Decoded::Future(event) => {
                        out.push(Prepared::Future(event));
                        continue;
                    }
                    Decoded::Filtered { event_time } => {
                        out.push(Prepared::Filtered { event_time });
                        continue;
                    }
                    Decoded::Valid { event, filtered } => (event, filtered),
                };
            let shard = self.route.as_ref().map(|(spec, shards)| {
                Shard::of_key(GroupOf::event(spec, &event).view_key(), *shards)
            });
            if shard.is_some() {
                // What the shard does not read is released here, on the
                // thread that took it: a record's bytes share one counted
                // buffer with its whole batch.
                if !self.keep_value {
                    event.raw_value = bytes::Bytes::new();
                }
                if !self.keep_key {
                    event.raw_key = None;
                }
            }
            out.push(Prepared::Event {
                event,
                shard,
                filtered,
            });
        }
        out
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
}

/// A batch the coordinator handed to the pool, in log order.
enum Queued {
    /// A table batch: passes through (the coordinator applies it).
    Table(NextBatch),
    /// A stream batch a worker prepares: its number of records (those
    /// read, `to` minus the first), partition, log time and end
    /// (exclusive) of its records.
    Stream {
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
}

/// The coordinator's handle on a version's source workers. Batches go in
/// in log order and come back in that order, stream batches prepared;
/// what is in the pool stays there from one poll to the next, so the
/// workers never wait for a poll to start.
pub(crate) struct SourcePool {
    jobs: Vec<Sender<Job>>,
    results: Vec<Receiver<PreparedBatch>>,
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
            results: Vec::new(),
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
            let (result_tx, result_rx) = mpsc::channel();
            let work = SourceWork {
                decoder: work.decoder.detached(),
                ..work.clone()
            };
            let progress = progress.clone();
            let thread = std::thread::Builder::new()
                .name(format!("{thread_name}-source-{index}"))
                .spawn(move || run(work, &progress, &worker, job_rx, result_tx))
                .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?;
            pool.jobs.push(job_tx);
            pool.results.push(result_rx);
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
    /// a table batch to pass through.
    pub(crate) fn push(&mut self, next: NextBatch) -> Result<()> {
        if next.side == Side::Table {
            self.queue.push_back(Queued::Table(next));
            return Ok(());
        }
        let workers = self.jobs.len();
        let worker = if self.partitions >= workers {
            next.partition as usize % workers
        } else {
            self.next_turn = (self.next_turn + 1) % workers;
            self.next_turn
        };
        let records = next.to - next.from;
        self.queued_records += records;
        self.queue.push_back(Queued::Stream {
            records,
            partition: next.partition,
            append_time: next.batch.append_time(),
            to: next.to,
            worker,
        });
        self.jobs[worker]
            .send(Job { batch: next })
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
            Queued::Stream {
                records,
                partition,
                append_time,
                to,
                worker,
            } => {
                self.queued_records -= records;
                let prepared = self.results[worker].recv().map_err(|_| {
                    ProcessorError::Stopped(format!("source worker {worker} ended"))
                })?;
                Ok(Some(Handed::Stream {
                    partition,
                    append_time,
                    to,
                    prepared,
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

fn run(
    work: SourceWork,
    progress: &Progress,
    worker: &WorkerProgress,
    jobs: Receiver<Job>,
    results: Sender<PreparedBatch>,
) {
    while let Ok(job) = jobs.recv() {
        let prepared = work.prepare(&job.batch, progress);
        worker.add_events(prepared.records);
        if results.send(prepared).is_err() {
            return;
        }
    }
}
