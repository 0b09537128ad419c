//! The coordinator's poll when a version runs in parallel: batches in log
//! order dealt to source workers, their prepared records taken back in that
//! order and processed ([`Runtime::process_prepared`]).

use std::collections::VecDeque;

use super::Item;
use crate::error::Result;
use crate::order::{NextBatch, Side};
use crate::runner::Runtime;

/// A batch of the poll, in log order.
enum Queued {
    /// A table batch (applied by the coordinator).
    Table(NextBatch),
    /// A stream batch handed to a source worker.
    Stream {
        partition: u32,
        append_time: i64,
        /// End (exclusive) of its records.
        to: u64,
    },
}

impl Runtime {
    /// Processes the input the log holds up to `complete`, as
    /// [`Runtime::poll_once`] does, with source workers decoding ahead;
    /// returns the stream records processed and whether the input was
    /// drained (not stopped by the poll's budget).
    pub(crate) fn poll_parallel(&mut self, complete: i64) -> Result<(u64, bool)> {
        let mut sources = self.sources.take().expect("a parallel version has sources");
        let result = self.poll_with(&mut sources, complete);
        self.sources = Some(sources);
        result
    }

    fn poll_with(&mut self, sources: &mut super::SourcePool, complete: i64) -> Result<(u64, bool)> {
        let max_records = self.options.max_poll_records;
        // Enough for every source worker to have batches in flight even
        // with one input partition (a poll's pipeline starts empty).
        let inputs = self.order.input_count().max(sources.capacity()) as u64;
        let budget = max_records.saturating_mul(inputs);
        self.order.start_poll();
        let mut queue = VecDeque::new();
        let (mut processed, mut read) = (0u64, 0u64);
        let (mut exhausted, mut drained) = (false, true);
        loop {
            while !exhausted && sources.in_flight() < sources.capacity() {
                let Some(next) = self.order.next(complete, max_records)? else {
                    exhausted = true;
                    break;
                };
                read += next.to.saturating_sub(next.from);
                if read >= budget || self.signal.is_set() {
                    exhausted = true;
                    drained = false;
                }
                match next.side {
                    Side::Table => queue.push_back(Queued::Table(next)),
                    Side::Stream => {
                        queue.push_back(Queued::Stream {
                            partition: next.partition,
                            append_time: next.batch.append_time(),
                            to: next.to,
                        });
                        sources.dispatch(next)?;
                    }
                }
            }
            let Some(item) = queue.pop_front() else {
                break;
            };
            let append_time = match &item {
                Queued::Table(next) => next.batch.append_time(),
                Queued::Stream { append_time, .. } => *append_time,
            };
            self.enter_batch(append_time)?;
            match item {
                Queued::Table(next) => {
                    self.apply_table_batch(&next);
                    self.order
                        .processed_to(Side::Table, next.partition, next.to);
                }
                Queued::Stream { partition, to, .. } => {
                    let prepared = sources.take()?;
                    let records = prepared.records;
                    for item in prepared.into_items() {
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
                            Item::Record(record) => {
                                self.process_prepared(partition, record, append_time)?
                            }
                        }
                    }
                    processed += records;
                    self.uncommitted_records += records;
                    self.order.processed_to(Side::Stream, partition, to);
                    if self.pending_entries() > self.options.pending_entries_max {
                        self.commit()?;
                    }
                }
            }
        }
        Ok((processed, drained))
    }
}
