//! Key-shard workers: each owns the aggregate state of its key groups
//! ([`crate::state::key::Shard`]) and applies, in the order the
//! coordinator sent them, the events of its groups — each with the
//! watermark the single-threaded engine would have applied it with.
//!
//! A shard advances its own windows lazily: before an event, to the
//! watermark that came with it, and before a flush, to the commit's. That
//! closes exactly what the single-threaded engine closed for the shard's
//! groups: closing up to `w1` and then `w2` equals closing up to `w2`, and
//! no event of the shard's groups came in between.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::commit::{LateRecord, OutRecord};
use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::operator::aggregate::{AggregateOp, GroupedEvent, Outcome};
use crate::operator::RowChange;
use crate::plan::{AggregateSpec, LateHandling};
use crate::progress::{Progress, WorkerProgress, WorkerRole};
use crate::state::key::Shard;
use crate::state::store::{Batch, Store};

/// Events gathered for a shard before they are sent (amortizes the
/// channel).
const CHUNK: usize = 512;
/// Messages queued per shard before the coordinator waits (backpressure).
const QUEUE: usize = 8;

/// An event for a key shard: what its aggregate reads of it and, when
/// late events go to a side output, the record to send if it is late —
/// not the event itself (see [`GroupedEvent`]).
#[derive(Debug)]
pub(crate) struct ShardEvent {
    /// The event as the aggregate applies it.
    pub(crate) grouped: GroupedEvent<'static>,
    /// Its record, kept for a late side output (boxed: most views have
    /// none, and the event stays a few words).
    pub(crate) late: Option<Box<LateRecord>>,
}

impl ShardEvent {
    /// `event` for a shard of `spec`'s aggregate, keeping its record when
    /// `late_side_output`.
    pub(crate) fn of(spec: &AggregateSpec, event: &Event, late_side_output: bool) -> ShardEvent {
        ShardEvent {
            grouped: GroupedEvent::of(spec, event).into_owned(),
            late: late_side_output.then(|| Box::new(LateRecord::of(event))),
        }
    }

    /// The key shard, of `shards`, its group belongs to.
    pub(crate) fn shard(&self, shards: usize) -> usize {
        Shard::of_key(self.grouped.key_bytes(), shards)
    }
}

/// How a shard applies one event: with the watermark the single-threaded
/// engine applies it with, at its place in the processing order.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mark {
    /// The watermark the event is applied with.
    pub(crate) watermark: i64,
    /// Its place in the version's processing order (orders side outputs).
    pub(crate) seq: u64,
}

/// Events for one shard, in the order it applies them, and the mark of
/// each. A source worker's events come as the vector it filled, which
/// the coordinator passes on without touching them: it only adds the marks.
#[derive(Debug)]
struct Run {
    events: Vec<ShardEvent>,
    marks: Vec<Mark>,
}

/// A message to a shard, handled in the order sent.
enum ToShard {
    /// Events to apply, run after run.
    Events(Vec<Run>),
    /// Start (or stop) computing row changes.
    EmitChanges(bool),
    /// Close windows up to this watermark, hand out row changes and flush
    /// dirty state into a batch; answer on the channel.
    Flush(i64, SyncSender<Result<Flushed>>),
}

/// What a shard hands to a commit.
pub(crate) struct Flushed {
    /// Its dirty state and rows.
    pub(crate) batch: Batch,
    /// Its row changes, in row-key order.
    pub(crate) changes: Vec<RowChange>,
    /// Rows written.
    pub(crate) rows: u64,
    /// Late events for the side output, each with its processing order.
    pub(crate) late: Vec<OutRecord>,
}

/// The coordinator's handle on the key-shard workers of one version.
pub(crate) struct ShardPool {
    senders: Vec<SyncSender<ToShard>>,
    /// Per shard: the runs not yet sent.
    unsent: Vec<Vec<Run>>,
    /// Entries each shard holds for the next commit.
    pending: Vec<Arc<AtomicUsize>>,
    /// State entries each shard held in memory after its last flush.
    memory: Vec<Arc<AtomicUsize>>,
    threads: Vec<JoinHandle<()>>,
    emit_changes: bool,
    /// The watermark the coordinator is at (shards catch up lazily).
    watermark: i64,
}

/// What every shard of a version shares.
pub(crate) struct ShardContext {
    /// The store the state is in.
    pub(crate) store: Arc<Store>,
    /// Counters of the version.
    pub(crate) progress: Arc<Progress>,
    /// What happens to late events.
    pub(crate) late: LateHandling,
}

impl ShardPool {
    /// Starts one worker per operator in `ops` (worker `i` is shard `i` of
    /// `ops.len()`), each restoring its groups' state as of the committed
    /// `watermark`; fails if any restore does.
    pub(crate) fn start(
        ops: Vec<AggregateOp>,
        watermark: i64,
        context: ShardContext,
        thread_name: &str,
    ) -> Result<ShardPool> {
        let count = ops.len();
        let context = Arc::new(context);
        let mut pool = ShardPool {
            senders: Vec::new(),
            unsent: (0..count).map(|_| Vec::new()).collect(),
            pending: Vec::new(),
            memory: Vec::new(),
            threads: Vec::new(),
            emit_changes: false,
            watermark,
        };
        let mut restored = Vec::new();
        for (index, op) in ops.into_iter().enumerate() {
            let shard = Shard { index, count };
            let groups = shard.key_groups();
            let progress = context.progress.add_worker(
                format!("shard-{index}"),
                WorkerRole::Shard {
                    first_key_group: groups.start,
                    end_key_group: groups.end,
                },
            );
            let (tx, rx) = mpsc::sync_channel(QUEUE);
            let (ready_tx, ready_rx) = mpsc::sync_channel(1);
            let pending = Arc::new(AtomicUsize::new(0));
            let memory = Arc::new(AtomicUsize::new(0));
            let worker = ShardWorker {
                op: op.for_shard(shard),
                context: context.clone(),
                progress,
                pending: pending.clone(),
                memory: memory.clone(),
                failed: None,
                late: Vec::new(),
            };
            let thread = std::thread::Builder::new()
                .name(format!("{thread_name}-shard-{index}"))
                .spawn(move || worker.run(watermark, rx, ready_tx))
                .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?;
            pool.senders.push(tx);
            pool.pending.push(pending);
            pool.memory.push(memory);
            pool.threads.push(thread);
            restored.push(ready_rx);
        }
        for ready in restored {
            ready.recv().map_err(|_| {
                ProcessorError::Stopped("a shard worker ended at its start".into())
            })??;
        }
        Ok(pool)
    }

    /// Number of shards.
    pub(crate) fn count(&self) -> usize {
        self.senders.len()
    }

    /// Sends `event` to `shard`, to be applied as `mark` says, after
    /// everything sent to it before.
    pub(crate) fn apply(&mut self, shard: usize, event: ShardEvent, mark: Mark) -> Result<()> {
        let runs = &mut self.unsent[shard];
        match runs.last_mut() {
            Some(run) => {
                run.events.push(event);
                run.marks.push(mark);
            }
            None => runs.push(Run {
                events: vec![event],
                marks: vec![mark],
            }),
        }
        self.send_if_full(shard)
    }

    /// Sends `events` to `shard`, each to be applied as its mark in
    /// `marks` says, after everything sent to it before.
    pub(crate) fn apply_run(
        &mut self,
        shard: usize,
        events: Vec<ShardEvent>,
        marks: Vec<Mark>,
    ) -> Result<()> {
        debug_assert_eq!(events.len(), marks.len(), "one mark per event");
        if events.is_empty() {
            return Ok(());
        }
        self.unsent[shard].push(Run { events, marks });
        self.send_if_full(shard)
    }

    /// Events gathered for `shard` and not yet sent.
    fn unsent_events(&self, shard: usize) -> usize {
        self.unsent[shard].iter().map(|run| run.events.len()).sum()
    }

    fn send_if_full(&mut self, shard: usize) -> Result<()> {
        if self.unsent_events(shard) >= CHUNK {
            self.send_buffer(shard)?;
        }
        Ok(())
    }

    /// The coordinator's watermark moved to `watermark`.
    pub(crate) fn advance(&mut self, watermark: i64) {
        self.watermark = self.watermark.max(watermark);
    }

    fn send_buffer(&mut self, shard: usize) -> Result<()> {
        if self.unsent_events(shard) == 0 {
            return Ok(());
        }
        let runs = std::mem::take(&mut self.unsent[shard]);
        self.send(shard, ToShard::Events(runs))
    }

    fn send(&self, shard: usize, message: ToShard) -> Result<()> {
        self.senders[shard]
            .send(message)
            .map_err(|_| ProcessorError::Stopped(format!("key-shard worker {shard} ended")))
    }

    /// Starts (or stops) computing row changes in every shard, from this
    /// point of the event order on.
    pub(crate) fn set_emit_changes(&mut self, on: bool) -> Result<()> {
        self.emit_changes = on;
        for shard in 0..self.count() {
            self.send_buffer(shard)?;
            self.send(shard, ToShard::EmitChanges(on))?;
        }
        Ok(())
    }

    /// True if row changes are computed.
    pub(crate) fn emits_changes(&self) -> bool {
        self.emit_changes
    }

    /// Every shard applies what it was sent, closes windows up to the
    /// coordinator's watermark and flushes into `batch`; returns the row
    /// changes (in row-key order, as one operator would), the rows written
    /// and the late events for the side output.
    pub(crate) fn flush(
        &mut self,
        batch: &mut Batch,
    ) -> Result<(Vec<RowChange>, u64, Vec<OutRecord>)> {
        let mut answers = Vec::with_capacity(self.count());
        for shard in 0..self.count() {
            self.send_buffer(shard)?;
            let (tx, rx) = mpsc::sync_channel(1);
            self.send(shard, ToShard::Flush(self.watermark, tx))?;
            answers.push(rx);
        }
        let (mut changes, mut rows, mut late) = (Vec::new(), 0, Vec::new());
        for (shard, answer) in answers.into_iter().enumerate() {
            let flushed = answer.recv().map_err(|_| {
                ProcessorError::Stopped(format!("key-shard worker {shard} ended"))
            })??;
            batch.append(flushed.batch);
            changes.extend(flushed.changes);
            rows += flushed.rows;
            late.extend(flushed.late);
        }
        // Shards own disjoint keys, each list in row-key order: sorting by
        // (key, window) gives the order one operator hands them out in
        // (`state::key` encodes keys so bytes order like the logical key).
        changes.sort_by(|a, b| (a.key.as_bytes(), a.window).cmp(&(b.key.as_bytes(), b.window)));
        Ok((changes, rows, late))
    }

    /// Entries the shards hold for the next commit (as of their last
    /// message), plus events not yet sent.
    pub(crate) fn pending_entries(&self) -> usize {
        self.pending
            .iter()
            .map(|p| p.load(Ordering::Relaxed))
            .sum::<usize>()
            + (0..self.count())
                .map(|shard| self.unsent_events(shard))
                .sum::<usize>()
    }

    /// State entries the shards held in memory after their last flush.
    pub(crate) fn memory_entries(&self) -> usize {
        self.memory.iter().map(|m| m.load(Ordering::Relaxed)).sum()
    }
}

impl Drop for ShardPool {
    fn drop(&mut self) {
        self.senders.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One key-shard worker's thread state.
struct ShardWorker {
    op: AggregateOp,
    context: Arc<ShardContext>,
    progress: Arc<WorkerProgress>,
    pending: Arc<AtomicUsize>,
    memory: Arc<AtomicUsize>,
    /// The first error; answered at the next flush (the coordinator then
    /// fails the version).
    failed: Option<ProcessorError>,
    late: Vec<OutRecord>,
}

impl ShardWorker {
    fn run(mut self, watermark: i64, rx: Receiver<ToShard>, ready: SyncSender<Result<()>>) {
        let restored = self.op.restore(&self.context.store, watermark);
        let ok = restored.is_ok();
        let _ = ready.send(restored);
        if !ok {
            return;
        }
        while let Ok(message) = rx.recv() {
            match message {
                ToShard::Events(runs) => {
                    if self.failed.is_none() {
                        let n = runs.iter().map(|run| run.events.len() as u64).sum();
                        if let Err(e) = self.apply_all(runs) {
                            self.failed = Some(e);
                        }
                        self.progress.add_events(n);
                        self.pending
                            .store(self.op.pending_entries(), Ordering::Relaxed);
                    }
                }
                ToShard::EmitChanges(on) => self.op.set_emit_changes(on),
                ToShard::Flush(watermark, answer) => {
                    let _ = answer.send(self.flush(watermark));
                }
            }
        }
    }

    fn apply_all(&mut self, runs: Vec<Run>) -> Result<()> {
        let context = self.context.clone();
        // By reference: the events stay where their source put them.
        for run in &runs {
            for (event, mark) in run.events.iter().zip(&run.marks) {
                self.op.advance(&context.store, mark.watermark)?;
                if self
                    .op
                    .apply_grouped(&context.store, &event.grouped, mark.watermark)?
                    == Outcome::Late
                {
                    self.late(event.late.as_deref(), mark.seq);
                }
            }
        }
        Ok(())
    }

    /// A late event: dropped, or its `record` (kept when there is a side
    /// output) sent there.
    fn late(&mut self, record: Option<&LateRecord>, seq: u64) {
        let progress = &self.context.progress;
        match &self.context.late {
            LateHandling::Drop => progress.count_late_dropped(),
            LateHandling::SideOutput(topic) => {
                progress.count_late_side_output();
                let record = record.expect("events of a view with a side output keep their record");
                self.late.push(record.side_output(topic, seq));
            }
        }
    }

    fn flush(&mut self, watermark: i64) -> Result<Flushed> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let store = &self.context.store;
        self.op.advance(store, watermark)?;
        let changes = self.op.take_changes(store)?;
        let mut batch = Batch::default();
        let rows = self.op.flush(&mut batch);
        self.pending.store(0, Ordering::Relaxed);
        self.memory
            .store(self.op.memory_entries(), Ordering::Relaxed);
        Ok(Flushed {
            batch,
            changes,
            rows,
            late: std::mem::take(&mut self.late),
        })
    }
}
