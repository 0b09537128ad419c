//! The coordinator's poll when a version runs in parallel: batches in log
//! order handed to the source pool, taken back in that order and processed
//! ([`Runtime::process_prepared`]).

use super::shard::Mark;
use super::source::{Handed, PreparedBatch};
use super::Item;
use crate::error::Result;
use crate::order::{BatchEnds, Side};
use crate::runner::Runtime;

impl Runtime {
    /// Processes the input the log holds up to `complete`, as
    /// [`Runtime::poll_once`] does, with source workers decoding ahead;
    /// returns the stream records processed and whether the input was
    /// drained (not stopped by the poll's budget).
    ///
    /// Batches read ahead stay in the pool when a poll ends on its budget
    /// (or a stop): the next poll starts with them, so the workers keep
    /// working between polls instead of emptying their queues at every
    /// poll's end. A commit covers only batches processed; one still in
    /// the pool is read again after a crash, from the committed offsets.
    pub(crate) fn poll_parallel(&mut self, complete: i64) -> Result<(u64, bool)> {
        let mut sources = self.sources.take().expect("a parallel version has sources");
        let result = self.poll_with(&mut sources, complete);
        self.sources = Some(sources);
        result
    }

    fn poll_with(&mut self, sources: &mut super::SourcePool, complete: i64) -> Result<(u64, bool)> {
        let max_records = self.options.max_poll_records;
        let budget = max_records.saturating_mul(self.order.input_count() as u64);
        self.order.start_poll();
        let (mut processed, mut taken) = (0u64, 0u64);
        let mut exhausted = false;
        loop {
            while !exhausted && sources.has_room() {
                match self.order.next(complete, max_records, BatchEnds::Whole)? {
                    Some(next) => {
                        let joined = self.is_joined_stream(&next);
                        sources.push(next, joined)?
                    }
                    None => exhausted = true,
                }
            }
            if taken >= budget || self.signal.is_set() {
                break;
            }
            let Some(handed) = sources.pop()? else {
                break;
            };
            match handed {
                Handed::Table(next) => {
                    self.enter_batch(next.batch.append_time())?;
                    taken += self.apply_table_batch(&next)?;
                    self.order
                        .processed_to(Side::Table, next.partition, next.to);
                }
                Handed::Joined {
                    partition,
                    append_time,
                    to,
                    prepared,
                } => {
                    self.stop_at_damage(Side::Table, partition, &prepared)?;
                    self.enter_batch(append_time)?;
                    // Each record counts in the processing order and the
                    // commit's records where the engine on one thread
                    // counts it: those before a valid one, with it.
                    let from = to - prepared.records;
                    let mut counted = from;
                    for (offset, decoded) in prepared.joined {
                        self.uncommitted_records += offset + 1 - counted;
                        self.event_seq += offset + 1 - counted;
                        counted = offset + 1;
                        self.join_joined(partition, offset, decoded, append_time)?;
                    }
                    self.uncommitted_records += to - counted;
                    self.event_seq += to - counted;
                    taken += prepared.records;
                    self.order.processed_to(Side::Table, partition, to);
                }
                Handed::Stream {
                    partition,
                    append_time,
                    to,
                    prepared,
                } => {
                    self.stop_at_damage(Side::Stream, partition, &prepared)?;
                    self.enter_batch(append_time)?;
                    let records = prepared.records;
                    let mut parts = prepared.into_parts();
                    // The marks of each shard's grouped events, in order.
                    let mut marks: Vec<Vec<Mark>> = parts
                        .grouped
                        .iter()
                        .map(|events| Vec::with_capacity(events.len()))
                        .collect();
                    // Where the next projected row's texts start.
                    let mut row_at = 0;
                    for item in parts.items {
                        match item {
                            Item::FilteredRun {
                                max_event_time,
                                records,
                            } => self.process_filtered_run(
                                partition,
                                max_event_time,
                                records,
                                append_time,
                            )?,
                            Item::Grouped { shard, event_time } => {
                                let mark =
                                    self.process_grouped(partition, event_time, append_time)?;
                                marks[shard as usize].push(mark);
                            }
                            Item::Kept => {
                                let record =
                                    parts.kept.next().expect("one kept record per kept item");
                                self.process_prepared(partition, record, append_time)?
                            }
                            Item::Projected => {
                                let row = parts.projected.next().expect("one row per item");
                                let texts = row.texts(&parts.rows, &mut row_at);
                                self.process_projected(partition, row, texts, append_time)?
                            }
                        }
                    }
                    // The events go to their shards as the source filled
                    // them; only the marks are the coordinator's.
                    self.route_grouped(parts.grouped, marks)?;
                    processed += records;
                    taken += records;
                    self.uncommitted_records += records;
                    self.order.processed_to(Side::Stream, partition, to);
                    if self.pending_entries() > self.options.pending_entries_max {
                        self.commit()?;
                    }
                }
            }
        }
        Ok((processed, exhausted && sources.queued() == 0))
    }

    /// Stops the version at `prepared`, a batch of `side`'s `partition`,
    /// if it is damaged: the error the log's read of it reports.
    fn stop_at_damage(&self, side: Side, partition: u32, prepared: &PreparedBatch) -> Result<()> {
        match &prepared.damage {
            Some((first_offset, reason)) => {
                Err(self.order.damaged(side, partition, *first_offset, reason))
            }
            None => Ok(()),
        }
    }
}
