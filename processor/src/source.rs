//! Where a version's input topics live: the one interface the processor
//! reads its inputs through, with two implementations — the built-in log
//! ([`LogSource`], here) and a Kafka cluster (`kappa-cluster`'s source,
//! which the server hands in).
//!
//! A source opens topics ([`Source::open`]); a [`SourceTopic`] reads one
//! partition's batches from an offset, as the built-in log stores them
//! (`kappa_log::batch`): a cluster's source encodes the records it fetched
//! into such batches, the record's Kafka offset as its offset and the
//! record's timestamp as the batch's append time. The processing order
//! ([`crate::order`]) merges the partitions by append time and asks the
//! source when a partition's next record can no longer come before one at
//! hand ([`Source::complete_up_to`], [`SourceTopic::bound`]).

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use kappa_log::batch::FramedBatch;
use kappa_log::{Log, Topic};

use crate::error::{ProcessorError, Result};
use crate::stop::StopSignal;

/// One partition's read: whole batches, the first and the last of which
/// may reach outside `[offset, next_offset)`.
#[derive(Debug, Default)]
pub struct SourceFetch {
    /// The batches read, in offset order.
    pub batches: Vec<FramedBatch>,
    /// Where to read next: after the last record returned.
    pub next_offset: u64,
    /// The partition's end when read (its high watermark): every record
    /// of a batch that ends at or before it can be read.
    pub readable_to: u64,
    /// Whether the read reached the partition's end as the source knows it
    /// (nothing more to read now).
    pub at_end: bool,
}

/// Where a version's inputs live.
pub trait Source: Send + Sync + fmt::Debug {
    /// Opens `topic`: an error names it when the source does not have it
    /// (or, for a cluster, when the cluster cannot be reached:
    /// [`ProcessorError::WaitingForSource`]).
    fn open(&self, topic: &str) -> Result<Arc<dyn SourceTopic>>;

    /// Fails if `topic`, opened earlier, no longer names the same records
    /// (deleted, or deleted and created again).
    fn check_current(&self, topic: &dyn SourceTopic) -> Result<()>;

    /// The append time up to which every partition is complete, read
    /// before a poll's first fetch: no record at or before it can still
    /// come. A source that decides per partition answers `i64::MAX` and
    /// bounds each partition ([`SourceTopic::bound`]).
    fn complete_up_to(&self) -> i64;

    /// Waits (at most `timeout`, or until `stop` is asked) until the
    /// source may be complete up to `t`: for a source deciding per
    /// partition, until one of `inputs` (as for
    /// [`Source::wait_for_input`]) gets a record.
    fn wait_complete(
        &self,
        t: i64,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    );

    /// Waits (at most `timeout`, or until `stop` is asked) until one of
    /// `inputs` — a topic this source opened and the next offset to
    /// process in each of its partitions — has records past it.
    fn wait_for_input(
        &self,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    );

    /// What the source is, for messages: "the built-in log",
    /// "cluster 'prod'".
    fn describe(&self) -> String;

    /// The first offset still stored and the end offset of each partition
    /// of `topic`, for lag, build targets and the replay horizon (a
    /// cluster is asked, so this may wait a few seconds for one that does
    /// not answer).
    fn topic_offsets(&self, topic: &str) -> Result<Vec<PartitionOffsets>>;
}

/// A partition's stored range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// The first offset still stored.
    pub start: u64,
    /// The offset after the last record.
    pub end: u64,
}

/// The Kafka clusters a server knows, each a [`Source`] by its name.
pub trait Clusters: Send + Sync + fmt::Debug {
    /// The source of the cluster `name`: an error names it when no such
    /// cluster is configured.
    fn source(&self, name: &str) -> Result<Arc<dyn Source>>;

    /// The sink of `topic` on the cluster `name`, written by `writer` (a
    /// version, `view@version`: one writer per topic and version).
    fn sink(
        &self,
        name: &str,
        writer: &str,
        topic: &str,
    ) -> Result<Arc<dyn crate::sink::OutputSink>>;
}

/// One input topic of a [`Source`].
pub trait SourceTopic: Send + Sync + fmt::Debug {
    /// The topic's name.
    fn name(&self) -> &str;

    /// Its number of partitions.
    fn partition_count(&self) -> u32;

    /// First offset still stored in `partition`.
    fn start_offset(&self, partition: u32) -> Result<u64>;

    /// Offset after the last record of `partition`.
    fn end_offset(&self, partition: u32) -> Result<u64>;

    /// The first offset of `partition` whose record timestamp is at or
    /// after `timestamp` (the end offset if there is none).
    fn offset_for_timestamp(&self, partition: u32, timestamp: i64) -> Result<u64>;

    /// Called once before the first read, with where each partition is to
    /// be read from (a cluster's consumer is assigned there).
    fn start_reading(&self, positions: &[u64]) -> Result<()>;

    /// [`SourceTopic::start_reading`] for some of the partitions only
    /// (`(partition, offset)`): the others are not read. A version that
    /// owns one partition of a topic shared by several nodes reads so
    /// ([`crate::spread`]).
    fn start_reading_partitions(&self, positions: &[(u32, u64)]) -> Result<()> {
        let _ = positions;
        Err(ProcessorError::InvalidPlan(format!(
            "topic '{}' cannot be read one partition at a time",
            self.name()
        )))
    }

    /// Up to `max_records` records (and about `max_bytes`) of `partition`
    /// from `offset` on, each batch's frame checked (its CRC and records
    /// are checked where it is processed).
    fn read(
        &self,
        partition: u32,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<SourceFetch>;

    /// Whether the topic bounds its partitions one by one
    /// ([`SourceTopic::bound`]); the built-in log's do not (its bound is
    /// [`Source::complete_up_to`]), and the processing order then skips
    /// asking.
    fn bounds_partitions(&self) -> bool {
        false
    }

    /// For a partition with nothing read ahead: the latest append time at
    /// or before which it can get no more records, so a record of another
    /// partition appended at or before it can be processed now and is
    /// processed in the same place by a replay. The built-in log answers
    /// `i64::MAX` (its bound is [`Source::complete_up_to`]).
    fn bound(&self, partition: u32) -> i64;

    /// The error the processing stops with when the batch of `partition`
    /// at `first_offset` failed its check (`reason`).
    fn damaged(&self, partition: u32, first_offset: u64, reason: &str) -> ProcessorError;

    /// The implementation, for its own source's downcasts.
    fn as_any(&self) -> &dyn Any;
}

/// The built-in log as a source.
#[derive(Debug, Clone)]
pub struct LogSource {
    log: Arc<Log>,
}

impl LogSource {
    /// The built-in `log` as a source.
    pub fn shared(log: Arc<Log>) -> Arc<dyn Source> {
        Arc::new(LogSource { log })
    }
}

/// A topic of the built-in log.
#[derive(Debug)]
struct LogTopic(Arc<Topic>);

impl LogTopic {
    fn of(topic: &dyn SourceTopic) -> Option<&Arc<Topic>> {
        topic.as_any().downcast_ref::<LogTopic>().map(|t| &t.0)
    }
}

impl Source for LogSource {
    fn open(&self, topic: &str) -> Result<Arc<dyn SourceTopic>> {
        Ok(Arc::new(LogTopic(self.log.topic(topic)?)))
    }

    fn check_current(&self, topic: &dyn SourceTopic) -> Result<()> {
        let current = self.log.topic(topic.name())?;
        match LogTopic::of(topic) {
            Some(opened) if Arc::ptr_eq(&current, opened) => Ok(()),
            _ => Err(ProcessorError::Stopped(format!(
                "input topic {} was deleted and created again; its offsets now name other records (replay the view to read it anew)",
                topic.name()
            ))),
        }
    }

    fn complete_up_to(&self) -> i64 {
        self.log.complete_up_to()
    }

    fn wait_complete(
        &self,
        t: i64,
        _inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        _stop: &StopSignal,
    ) {
        // At most a millisecond, or an append in flight finishing.
        self.log.wait_complete(t, timeout);
    }

    fn wait_for_input(
        &self,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    ) {
        let waits: Vec<(&kappa_log::Partition, u64)> = inputs
            .iter()
            .filter_map(|(topic, positions)| Some((LogTopic::of(*topic)?, *positions)))
            .flat_map(|(topic, positions)| topic.partitions().iter().zip(positions.iter().copied()))
            .collect();
        if waits.is_empty() {
            return;
        }
        let waited = crate::blocking::block_on(async {
            let waits = waits
                .into_iter()
                .map(|(p, pos)| Box::pin(p.wait_for(pos, timeout)));
            let input = futures_util::future::select_all(waits);
            // A stop ends the wait: a DROP or shutdown does not wait it out.
            let stop = std::pin::pin!(stop.asked());
            let _ = futures_util::future::select(input, stop).await;
        });
        if waited.is_err() {
            std::thread::sleep(timeout);
        }
    }

    fn describe(&self) -> String {
        "the built-in log".into()
    }

    fn topic_offsets(&self, topic: &str) -> Result<Vec<PartitionOffsets>> {
        Ok(self
            .log
            .topic(topic)?
            .partitions()
            .iter()
            .map(|p| PartitionOffsets {
                start: p.start_offset(),
                end: p.end_offset(),
            })
            .collect())
    }
}

impl SourceTopic for LogTopic {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn partition_count(&self) -> u32 {
        self.0.partition_count()
    }

    fn start_offset(&self, partition: u32) -> Result<u64> {
        Ok(self.0.partition(partition)?.start_offset())
    }

    fn end_offset(&self, partition: u32) -> Result<u64> {
        Ok(self.0.partition(partition)?.end_offset())
    }

    fn offset_for_timestamp(&self, partition: u32, timestamp: i64) -> Result<u64> {
        Ok(self
            .0
            .partition(partition)?
            .offset_for_timestamp(timestamp)?)
    }

    fn start_reading(&self, _positions: &[u64]) -> Result<()> {
        Ok(())
    }

    fn start_reading_partitions(&self, _positions: &[(u32, u64)]) -> Result<()> {
        Ok(())
    }

    fn read(
        &self,
        partition: u32,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<SourceFetch> {
        let partition = self.0.partition(partition)?;
        let offset = offset.max(partition.start_offset());
        let fetch = partition.read_framed(offset, max_records, max_bytes)?;
        Ok(SourceFetch {
            at_end: fetch.next_offset >= fetch.high_watermark,
            next_offset: fetch.next_offset,
            readable_to: fetch.high_watermark,
            batches: fetch.batches,
        })
    }

    fn bound(&self, _partition: u32) -> i64 {
        i64::MAX
    }

    fn damaged(&self, partition: u32, first_offset: u64, reason: &str) -> ProcessorError {
        // What the log's read at that offset reports: the damaged offsets
        // and the next readable one, logged and counted as every damage
        // the log finds.
        match self
            .0
            .partition(partition)
            .and_then(|p| p.read(first_offset, 1, 1))
        {
            Err(e) => e.into(),
            Ok(_) => ProcessorError::Stopped(format!(
                "the batch at offset {first_offset} of {}/{partition} failed its check ({reason}) but read back whole",
                self.0.name()
            )),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
