//! One version on several threads: source workers and key-shard workers
//! around a coordinating thread, with results identical to the
//! single-threaded engine.
//!
//! ```text
//!              batches in log order               events with their watermark
//!  InputOrder ──────────────► source workers ──► coordinator ──────────────► shard 0
//!  (coordinator)  (dealt out)  check, decode,     watermark,    by key group  shard 1
//!                              filter, key shard  dedup, join,                 ...
//!                                                 sequence, commit
//! ```
//!
//! * **Order.** The coordinator reads batches in the deterministic log
//!   order ([`crate::order`]) and deals them to source workers (by
//!   partition when there are as many partitions as workers, else in
//!   turn), keeping a bounded number in flight — each batch whole, where
//!   a fetch stops inside it too ([`crate::order::BatchEnds::Whole`]:
//!   two workers would each read its framing, one from memory its core
//!   never touched); it takes the prepared records back in the order it
//!   dealt them. So the coordinator sees
//!   exactly the record sequence the single-threaded engine processes.
//!   Batches in flight stay with the workers from one poll to the next
//!   (a poll's budget counts records processed), so the workers do not
//!   run dry at every poll's end.
//! * **Checks.** The coordinator reads batches by their frame (offsets,
//!   length, format: [`kappa_log::Partition::read_framed`]), which is all
//!   the order needs; the source worker that decodes a batch checks its
//!   CRC and records as it reads them, on the core that then decodes the
//!   bytes (the CRC a stretch ahead of the records decoded, so the bytes
//!   come from memory once:
//!   [`kappa_log::batch::FramedBatch::read_checked`]). A damaged batch
//!   comes back as its damage, and the coordinator stops the version
//!   there, as a checked read would have.
//! * **Source workers** decode ([`crate::decoder`]), and when no dedup or
//!   join comes first, apply the filter, group each event for the
//!   aggregate — its view key, event time and aggregate inputs
//!   ([`crate::operator::aggregate::GroupedEvent`]) — and compute its key
//!   shard ([`crate::state::key::Shard`]): the per-record work that needs
//!   no state. The event's own memory is freed there; what goes on to a
//!   shard is that small grouped form ([`ShardEvent`]), with the record
//!   only when late events go to a side output, in one vector per shard
//!   and batch that the coordinator passes on untouched — it sees only
//!   each event's key shard and event time, and adds the watermark and
//!   place in the order each is applied with ([`Mark`]). With a dedup or
//!   join, the coordinator groups the events it keeps. With a join of two
//!   streams, source workers also decode the joined stream's records and
//!   apply the conditions of `WHERE` that read it alone
//!   ([`crate::operator::stream_join::JoinedDecoder`]); the coordinator
//!   gets each record's event, or its time alone when it failed them.
//! * **The coordinator** does what needs the whole sequence and is cheap:
//!   it moves the watermark per record (every record, filtered or not, as
//!   before — a run of records the early filter dropped in one step, to
//!   the run's largest event time, which gives the same watermark:
//!   [`crate::runner::Runtime::process_filtered_run`]), drops duplicates,
//!   joins the table (and then filters and routes), and sends each event
//!   to the shard owning its group together with the watermark the
//!   single-threaded engine applies it with.
//! * **Key-shard workers** ([`shard`]) own disjoint key groups of the
//!   aggregate state and apply their events in the order sent; a shard
//!   closes windows up to the watermark that came with each event, and up
//!   to the commit's watermark before a flush. Per group, a shard sees the
//!   same events with the same watermarks, in the same order, as the one
//!   operator of the single-threaded engine — and a group's rows depend on
//!   nothing else — so its rows are the same.
//! * **Exactly once.** A commit is a barrier: every shard applies what it
//!   was sent and flushes its dirty state into its own batch; the
//!   coordinator appends the shards' batches to one RocksDB write together
//!   with the input offsets, watermark, log time, dedup and table state and
//!   the outbox ([`crate::commit`]). A crash before that write loses only
//!   uncommitted work, replayed from the committed offsets; after it, the
//!   commit holds every shard. Restarting (with any number of shards),
//!   each shard restores the groups of its key groups.
//! * **Outputs.** Row changes of a commit are handed out in row-key order
//!   as one operator does; late events sent to a side output carry their
//!   place in the processing order and are put back in it.
//!
//! Derived streams (no aggregate) use the source workers only; their
//! output keeps the input's order.

mod handoff;
pub(crate) mod shard;
pub(crate) mod source;

pub(crate) use shard::{Mark, ShardContext, ShardEvent, ShardPool};
pub(crate) use source::{
    Item, Prepared, Projected, ProjectedRow, SourcePool, SourceProjection, SourceWork,
};

/// Most workers of each kind a version runs with (a shard needs at least
/// one key group).
pub const MAX_WORKERS: usize = crate::state::key::KEY_GROUPS as usize;

use crate::commit::OutRecord;
use crate::error::Result;
use crate::operator::aggregate::AggregateOp;
use crate::operator::RowChange;
use crate::state::store::{Batch, Store};

mod coordinator;

/// A version's aggregate state: one operator on the version's thread, or
/// key-shard workers.
pub(crate) enum Aggregation {
    /// One operator holding every group (boxed: it is large, and the
    /// enum is matched per event only through a reference).
    Local(Box<AggregateOp>),
    /// Key-shard workers, each holding its key groups.
    Sharded(ShardPool),
}

impl Aggregation {
    /// True if row changes are computed.
    pub(crate) fn emits_changes(&self) -> bool {
        match self {
            Aggregation::Local(op) => op.emits_changes(),
            Aggregation::Sharded(pool) => pool.emits_changes(),
        }
    }

    /// Starts (or stops) computing row changes.
    pub(crate) fn set_emit_changes(&mut self, on: bool) -> Result<()> {
        match self {
            Aggregation::Local(op) => op.set_emit_changes(on),
            Aggregation::Sharded(pool) => pool.set_emit_changes(on)?,
        }
        Ok(())
    }

    /// The watermark moved to `watermark`: closes windows (shards do it
    /// when they next apply or flush).
    pub(crate) fn advance(&mut self, store: &Store, watermark: i64) -> Result<()> {
        match self {
            Aggregation::Local(op) => op.advance(store, watermark),
            Aggregation::Sharded(pool) => {
                pool.advance(watermark);
                Ok(())
            }
        }
    }

    /// Hands out the row changes since the last flush (in row-key order)
    /// and flushes dirty state into `batch`; returns them, the rows written
    /// and late events for the side output (shards only; one operator's
    /// are handled as they happen).
    pub(crate) fn flush(
        &mut self,
        store: &Store,
        batch: &mut Batch,
    ) -> Result<(Vec<RowChange>, u64, Vec<OutRecord>)> {
        match self {
            Aggregation::Local(op) => {
                let changes = op.take_changes(store)?;
                let rows = op.flush(batch);
                Ok((changes, rows, Vec::new()))
            }
            Aggregation::Sharded(pool) => pool.flush(batch),
        }
    }

    /// Entries held in memory for the next commit.
    pub(crate) fn pending_entries(&self) -> usize {
        match self {
            Aggregation::Local(op) => op.pending_entries(),
            Aggregation::Sharded(pool) => pool.pending_entries(),
        }
    }

    /// State entries in memory.
    pub(crate) fn memory_entries(&self) -> usize {
        match self {
            Aggregation::Local(op) => op.memory_entries(),
            Aggregation::Sharded(pool) => pool.memory_entries(),
        }
    }
}
