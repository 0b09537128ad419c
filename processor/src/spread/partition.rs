//! One partition of a topic as a topic of its own: the input of a task
//! ([`super`]), which owns one partition of its version's stream topic.
//!
//! [`OnePartition`] wraps the version's source: opening the stream topic
//! answers a [`PartitionTopic`] whose only partition, 0, is the topic's
//! partition `partition` — and so does opening a joined table
//! co-partitioned with the stream (same partition count, joined on the
//! record key: as in Kafka Streams, a key's table row is in the partition
//! number of its events); any other topic (a table joined on another
//! column, read whole by every task) is the source's own. The task's
//! runtime then commits its position under partition 0 of its own store.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{ProcessorError, Result};
use crate::expr::Expr;
use crate::plan::Plan;
use crate::source::{PartitionOffsets, Source, SourceFetch, SourceTopic};
use crate::stop::StopSignal;

/// `inner` with its topics `topics` narrowed to partition `partition`.
#[derive(Debug)]
pub struct OnePartition {
    inner: Arc<dyn Source>,
    topics: Vec<String>,
    partition: u32,
}

impl OnePartition {
    /// The source reading only partition `partition` of `topic` of `inner`.
    pub fn shared(inner: Arc<dyn Source>, topic: &str, partition: u32) -> Arc<dyn Source> {
        OnePartition::of_topics(inner, &[topic], partition)
    }

    /// The source reading only partition `partition` of each of `topics`
    /// (co-partitioned) of `inner`.
    pub fn of_topics(inner: Arc<dyn Source>, topics: &[&str], partition: u32) -> Arc<dyn Source> {
        Arc::new(OnePartition {
            inner,
            topics: topics.iter().map(|t| t.to_string()).collect(),
            partition,
        })
    }

    fn narrows(&self, topic: &str) -> bool {
        self.topics.iter().any(|t| t == topic)
    }

    /// Calls `wait` with `inputs` as the inner source knows them
    /// ([`OnePartition::widen`]).
    fn widened(
        inputs: &[(&dyn SourceTopic, &[u64])],
        wait: impl FnOnce(&[(&dyn SourceTopic, &[u64])]),
    ) {
        let wide = Self::widen(inputs);
        let wide: Vec<(&dyn SourceTopic, &[u64])> =
            wide.iter().map(|(t, p)| (*t, p.as_slice())).collect();
        wait(&wide);
    }

    /// `inputs` as the inner source knows them: a narrowed topic becomes
    /// the whole topic, its other partitions at `u64::MAX` (nothing to
    /// wait for there).
    fn widen<'a>(inputs: &[(&'a dyn SourceTopic, &[u64])]) -> Vec<(&'a dyn SourceTopic, Vec<u64>)> {
        inputs
            .iter()
            .map(
                |(topic, positions)| match topic.as_any().downcast_ref::<PartitionTopic>() {
                    Some(narrow) => {
                        let mut wide = vec![u64::MAX; narrow.inner.partition_count() as usize];
                        if let (Some(slot), Some(&at)) =
                            (wide.get_mut(narrow.partition as usize), positions.first())
                        {
                            *slot = at;
                        }
                        (narrow.inner.as_ref(), wide)
                    }
                    None => (*topic, positions.to_vec()),
                },
            )
            .collect()
    }
}

impl Source for OnePartition {
    fn open(&self, topic: &str) -> Result<Arc<dyn SourceTopic>> {
        let inner = self.inner.open(topic)?;
        if !self.narrows(topic) {
            return Ok(inner);
        }
        if self.partition >= inner.partition_count() {
            return Err(ProcessorError::WaitingForSource(format!(
                "topic '{topic}' has {} partitions; partition {} is not one of them",
                inner.partition_count(),
                self.partition
            )));
        }
        Ok(Arc::new(PartitionTopic {
            inner,
            partition: self.partition,
        }))
    }

    fn check_current(&self, topic: &dyn SourceTopic) -> Result<()> {
        match topic.as_any().downcast_ref::<PartitionTopic>() {
            Some(narrow) => self.inner.check_current(narrow.inner.as_ref()),
            None => self.inner.check_current(topic),
        }
    }

    fn complete_up_to(&self) -> i64 {
        self.inner.complete_up_to()
    }

    fn wait_complete(
        &self,
        t: i64,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    ) {
        Self::widened(inputs, |wide| {
            self.inner.wait_complete(t, wide, timeout, stop)
        });
    }

    fn wait_for_input(
        &self,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    ) {
        Self::widened(inputs, |wide| {
            self.inner.wait_for_input(wide, timeout, stop)
        });
    }

    fn describe(&self) -> String {
        format!(
            "{}, topic '{}' partition {}",
            self.inner.describe(),
            self.topics.join("', '"),
            self.partition
        )
    }

    fn topic_offsets(&self, topic: &str) -> Result<Vec<PartitionOffsets>> {
        let all = self.inner.topic_offsets(topic)?;
        if !self.narrows(topic) {
            return Ok(all);
        }
        Ok(all
            .get(self.partition as usize)
            .copied()
            .into_iter()
            .collect())
    }
}

/// The table `plan` joins when it is co-partitioned with the plan's
/// stream: joined on the stream's record key, with as many partitions as
/// the stream. A key's table row is then in the partition number of the
/// key's events (both written with one partitioner, as Kafka Streams
/// requires), and a task reads that one partition of the table too.
pub fn co_partitioned_table<'a>(plan: &'a Plan, source: &dyn Source) -> Result<Option<&'a str>> {
    let Some(join) = &plan.join else {
        return Ok(None);
    };
    if join.stream_key != Expr::Key {
        return Ok(None);
    }
    let stream = source.open(&plan.source.topic)?.partition_count();
    let table = source.open(&join.table_topic)?.partition_count();
    Ok((stream == table).then_some(join.table_topic.as_str()))
}

/// Partition `partition` of `inner`, as partition 0 of a topic of one.
#[derive(Debug)]
pub struct PartitionTopic {
    inner: Arc<dyn SourceTopic>,
    partition: u32,
}

impl PartitionTopic {
    /// The partition of the whole topic that `partition` (which must be 0)
    /// names.
    fn whole(&self, partition: u32) -> Result<u32> {
        match partition {
            0 => Ok(self.partition),
            p => Err(ProcessorError::InvalidPlan(format!(
                "partition {p} of a one-partition view of topic '{}'",
                self.inner.name()
            ))),
        }
    }
}

impl SourceTopic for PartitionTopic {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn partition_count(&self) -> u32 {
        1
    }

    fn start_offset(&self, partition: u32) -> Result<u64> {
        self.inner.start_offset(self.whole(partition)?)
    }

    fn end_offset(&self, partition: u32) -> Result<u64> {
        self.inner.end_offset(self.whole(partition)?)
    }

    fn offset_for_timestamp(&self, partition: u32, timestamp: i64) -> Result<u64> {
        self.inner
            .offset_for_timestamp(self.whole(partition)?, timestamp)
    }

    fn start_reading(&self, positions: &[u64]) -> Result<()> {
        let at = positions.first().copied().unwrap_or(0);
        self.inner.start_reading_partitions(&[(self.partition, at)])
    }

    fn read(
        &self,
        partition: u32,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<SourceFetch> {
        self.inner
            .read(self.whole(partition)?, offset, max_records, max_bytes)
    }

    fn bounds_partitions(&self) -> bool {
        self.inner.bounds_partitions()
    }

    fn bound(&self, partition: u32) -> i64 {
        match self.whole(partition) {
            Ok(p) => self.inner.bound(p),
            Err(_) => i64::MAX,
        }
    }

    fn damaged(&self, partition: u32, first_offset: u64, reason: &str) -> ProcessorError {
        match self.whole(partition) {
            Ok(p) => self.inner.damaged(p, first_offset, reason),
            Err(e) => e,
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::LogSource;
    use bytes::Bytes;
    use kappa_log::batch::Crc;
    use kappa_log::{Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};

    #[test]
    fn reads_only_its_partition_as_partition_zero() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(LogConfig::new(dir.path().join("log"))).unwrap());
        let config = TopicConfig {
            partitions: 3,
            ..TopicConfig::default()
        };
        log.create_topic("t", config.clone()).unwrap();
        log.create_topic("u", config).unwrap();
        let topic = log.topic("t").unwrap();
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        for p in 0..3u32 {
            let records = (0..=p)
                .map(|i| ProduceRecord {
                    partition: Some(p),
                    record: NewRecord {
                        key: None,
                        value: Bytes::from(format!("{p}-{i}")),
                        timestamp: None,
                        headers: vec![],
                    },
                })
                .collect();
            io.block_on(topic.produce(records, None)).unwrap();
        }
        let source = OnePartition::shared(LogSource::shared(log.clone()), "t", 2);
        let narrow = source.open("t").unwrap();
        assert_eq!(narrow.partition_count(), 1);
        assert_eq!(narrow.end_offset(0).unwrap(), 3);
        assert!(narrow.end_offset(1).is_err());
        narrow.start_reading(&[1]).unwrap();
        let fetch = narrow.read(0, 0, 100, 1 << 20).unwrap();
        let mut values = Vec::new();
        for batch in &fetch.batches {
            batch
                .read_checked(Crc::Check, |r| {
                    values.push(String::from_utf8(r.value.to_vec()).unwrap())
                })
                .unwrap();
        }
        assert_eq!(values, ["2-0", "2-1", "2-2"]);
        assert_eq!(source.topic_offsets("t").unwrap().len(), 1);
        assert!(OnePartition::shared(LogSource::shared(log.clone()), "t", 3)
            .open("t")
            .is_err());
        // Co-partitioned topics narrow together; any other is whole.
        let both = OnePartition::of_topics(LogSource::shared(log.clone()), &["t", "u"], 1);
        assert_eq!(both.open("t").unwrap().partition_count(), 1);
        assert_eq!(both.open("u").unwrap().partition_count(), 1);
        assert_eq!(both.topic_offsets("u").unwrap().len(), 1);
        assert_eq!(source.open("u").unwrap().partition_count(), 3);
    }
}
