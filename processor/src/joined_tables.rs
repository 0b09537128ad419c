//! The tables a query joins after its first join, read as one input: the
//! topics of all its joined tables, their partitions numbered one after
//! the other in join order. So the processing order ([`crate::order`]),
//! the commit's `table_offset/{p}` entries ([`crate::state::key::Meta`])
//! and the parallel engine see one table side whatever the number of
//! tables, and a plan with one joined table reads it exactly as before
//! (its partitions keep their numbers).
//!
//! ```text
//! tables (join order):   products (2 partitions)   suppliers (3 partitions)
//! table-side partition:  0  1                      2  3  4
//! ```
//!
//! Ties in the processing order (batches of equal append time) go by
//! these numbers: an earlier joined table's records first.

use std::any::Any;
use std::sync::Arc;

use crate::error::{ProcessorError, Result};
use crate::source::{SourceFetch, SourceTopic};

/// Several topics as one, their partitions concatenated.
#[derive(Debug)]
pub struct JoinedTables {
    /// The topics in join order, each with its first partition's number.
    parts: Vec<(Arc<dyn SourceTopic>, u32)>,
    /// Their names, for messages: `a, b`.
    name: String,
    partitions: u32,
}

impl JoinedTables {
    /// The tables `topics` (in join order) as one table side: the topic
    /// itself when there is one.
    pub fn of(topics: Vec<Arc<dyn SourceTopic>>) -> Arc<dyn SourceTopic> {
        if topics.len() == 1 {
            return topics.into_iter().next().expect("one topic");
        }
        let mut parts = Vec::with_capacity(topics.len());
        let mut partitions = 0;
        for topic in topics {
            let count = topic.partition_count();
            parts.push((topic, partitions));
            partitions += count;
        }
        let name = parts
            .iter()
            .map(|(t, _)| t.name())
            .collect::<Vec<_>>()
            .join(", ");
        Arc::new(JoinedTables {
            parts,
            name,
            partitions,
        })
    }

    /// The place in join order of the table that table-side partition
    /// `partition` belongs to (0 for a single table), and its partition
    /// there.
    pub fn table_of(topic: &dyn SourceTopic, partition: u32) -> (usize, u32) {
        match topic.as_any().downcast_ref::<JoinedTables>() {
            Some(joined) => {
                let (place, first) = joined.locate(partition);
                (place, partition - first)
            }
            None => (0, partition),
        }
    }

    /// `topic` with `positions` (one per table-side partition) as the
    /// topics it is made of, each with its own partitions' positions.
    pub fn split<'a>(
        topic: &'a dyn SourceTopic,
        positions: &'a [u64],
    ) -> Vec<(&'a dyn SourceTopic, &'a [u64])> {
        match topic.as_any().downcast_ref::<JoinedTables>() {
            Some(joined) => joined
                .parts
                .iter()
                .map(|(t, first)| {
                    let first = *first as usize;
                    let end = (first + t.partition_count() as usize).min(positions.len());
                    (t.as_ref(), &positions[first.min(end)..end])
                })
                .collect(),
            None => vec![(topic, positions)],
        }
    }

    /// The place of the table holding `partition`, and that table's first
    /// partition number.
    fn locate(&self, partition: u32) -> (usize, u32) {
        let place = self
            .parts
            .partition_point(|(_, first)| *first <= partition)
            .saturating_sub(1);
        (place, self.parts[place].1)
    }

    /// The topic and its own partition number for table-side `partition`.
    fn part(&self, partition: u32) -> Result<(&dyn SourceTopic, u32)> {
        if partition >= self.partitions {
            return Err(ProcessorError::InvalidPlan(format!(
                "joined tables {} have {} partitions, not {}",
                self.name,
                self.partitions,
                partition + 1
            )));
        }
        let (place, first) = self.locate(partition);
        Ok((self.parts[place].0.as_ref(), partition - first))
    }
}

impl SourceTopic for JoinedTables {
    fn name(&self) -> &str {
        &self.name
    }

    fn partition_count(&self) -> u32 {
        self.partitions
    }

    fn start_offset(&self, partition: u32) -> Result<u64> {
        let (topic, p) = self.part(partition)?;
        topic.start_offset(p)
    }

    fn end_offset(&self, partition: u32) -> Result<u64> {
        let (topic, p) = self.part(partition)?;
        topic.end_offset(p)
    }

    fn offset_for_timestamp(&self, partition: u32, timestamp: i64) -> Result<u64> {
        let (topic, p) = self.part(partition)?;
        topic.offset_for_timestamp(p, timestamp)
    }

    fn start_reading(&self, positions: &[u64]) -> Result<()> {
        for (topic, positions) in JoinedTables::split(self, positions) {
            topic.start_reading(positions)?;
        }
        Ok(())
    }

    fn start_reading_partitions(&self, positions: &[(u32, u64)]) -> Result<()> {
        for (place, (topic, first)) in self.parts.iter().enumerate() {
            let own: Vec<(u32, u64)> = positions
                .iter()
                .filter(|(p, _)| self.locate(*p).0 == place)
                .map(|(p, offset)| (p - first, *offset))
                .collect();
            topic.start_reading_partitions(&own)?;
        }
        Ok(())
    }

    fn read(
        &self,
        partition: u32,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<SourceFetch> {
        let (topic, p) = self.part(partition)?;
        topic.read(p, offset, max_records, max_bytes)
    }

    fn bounds_partitions(&self) -> bool {
        self.parts.iter().any(|(t, _)| t.bounds_partitions())
    }

    fn bound(&self, partition: u32) -> i64 {
        match self.part(partition) {
            Ok((topic, p)) => topic.bound(p),
            Err(_) => i64::MIN,
        }
    }

    fn damaged(&self, partition: u32, first_offset: u64, reason: &str) -> ProcessorError {
        match self.part(partition) {
            Ok((topic, p)) => topic.damaged(p, first_offset, reason),
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
    use kappa_log::{Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};

    #[test]
    fn partitions_are_numbered_one_table_after_another() {
        let dir = tempfile::tempdir().unwrap();
        let log = Arc::new(Log::open(LogConfig::new(dir.path().join("log"))).unwrap());
        for (name, partitions) in [("a", 2), ("b", 3)] {
            let config = TopicConfig {
                partitions,
                ..TopicConfig::default()
            };
            log.create_topic(name, config).unwrap();
        }
        let record = ProduceRecord {
            partition: Some(1),
            record: NewRecord {
                key: None,
                value: Bytes::from_static(b"{}"),
                timestamp: None,
                headers: vec![],
            },
        };
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        io.block_on(log.topic("b").unwrap().produce(vec![record], None))
            .unwrap();
        let source = LogSource::shared(log);
        let topics = vec![source.open("a").unwrap(), source.open("b").unwrap()];
        let joined = JoinedTables::of(topics);
        assert_eq!(joined.partition_count(), 5);
        assert_eq!(joined.name(), "a, b");
        assert_eq!(JoinedTables::table_of(joined.as_ref(), 1), (0, 1));
        assert_eq!(JoinedTables::table_of(joined.as_ref(), 3), (1, 1));
        assert_eq!(joined.end_offset(3).unwrap(), 1);
        assert_eq!(joined.end_offset(2).unwrap(), 0);
        assert_eq!(joined.read(3, 0, 10, 1 << 20).unwrap().batches.len(), 1);
        assert!(joined.end_offset(5).is_err());
        let positions = [1, 2, 3, 4, 5];
        let split = JoinedTables::split(joined.as_ref(), &positions);
        assert_eq!(split.len(), 2);
        assert_eq!((split[0].0.name(), split[0].1), ("a", &[1, 2][..]));
        assert_eq!((split[1].0.name(), split[1].1), ("b", &[3, 4, 5][..]));
        // One table is the topic itself.
        let single = JoinedTables::of(vec![source.open("b").unwrap()]);
        assert_eq!(single.name(), "b");
        assert_eq!(JoinedTables::table_of(single.as_ref(), 2), (0, 2));
    }
}
