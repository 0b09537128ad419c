//! A derived stream's output topic on a Kafka cluster
//! ([`kappa_processor::sink::OutputSink`]), written exactly once.
//!
//! One transactional producer per writing version (`transactional.id` =
//! `kappa-<view>@<version>`). Each outbox entry is appended in one Kafka
//! transaction, every record carrying the header
//! [`OUTBOX_HEADER`]` = "<view>@<version>:<entry>"`. The same transaction
//! commits the consumer-group offset `entry + 1` of partition 0 of the
//! topic for the group `kappa-<view>@<version>-outbox` (Kafka's
//! `sendOffsetsToTransaction`, as Kafka Streams commits its input): that
//! offset is the newest entry the topic holds, committed or rolled back
//! with the entry's records. When the sink opens, `init_transactions`
//! fences and aborts a transaction an earlier run of the same version left
//! open, then the group's offset says which entry came last: a restart
//! that re-appends a pending outbox skips the entries already there.
//! Read-committed consumers therefore see every output record once.
//!
//! The offset's metadata is `{"reach":[…]}`: the writer's input positions
//! at the commit that made the entry. A run whose state is older than the
//! topic (a task taken over from an older checkpoint) numbers its entries
//! past the newest and drops what it makes from inputs before those
//! positions (`kappa_processor`'s runner); where the broker keeps no
//! metadata (Tansu 0.6), it writes those records again instead.
//!
//! The topic's records are not read for this: some brokers (Tansu 0.6)
//! show an aborted transaction's records to read_committed consumers, and
//! an aborted entry taken for a written one would be lost.

use std::sync::Mutex;
use std::time::Duration;

use kappa_processor::error::{ProcessorError, Result};
use kappa_processor::sink::{OutputRecord, OutputSink, Written};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerGroupMetadata};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use crate::{client_config, ClusterConfig};

/// Transactions of an output topic that failed (aborted; the version is
/// retried from its last commit), by cluster and topic.
pub const PRODUCER_ERRORS: &str = "kappa_cluster_producer_errors_total";

/// Records committed to an output topic on a cluster, by cluster and
/// topic.
pub const PRODUCED_RECORDS: &str = "kappa_cluster_produced_records_total";

/// The header naming the outbox entry a record came from.
pub const OUTBOX_HEADER: &str = "kappa-outbox";

/// How long a transaction's start, commit or the offset read may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A topic of a cluster written by one version.
pub struct ClusterSink {
    cluster: String,
    topic: String,
    writer: String,
    producer: ThreadedProducer<DefaultProducerContext>,
    /// The group `kappa-<writer>-outbox`, whose offset each transaction
    /// commits.
    group: ConsumerGroupMetadata,
    /// What the topic holds from this writer.
    committed: Mutex<Option<Written>>,
}

impl std::fmt::Debug for ClusterSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSink")
            .field("cluster", &self.cluster)
            .field("topic", &self.topic)
            .field("writer", &self.writer)
            .finish()
    }
}

impl ClusterSink {
    /// Opens `topic` of the cluster `name` for `writer` (`view@version`):
    /// starts its transactional producer and reads which entry of `writer`
    /// the topic holds last.
    pub fn open(
        name: &str,
        config: &ClusterConfig,
        writer: &str,
        topic: &str,
    ) -> Result<ClusterSink> {
        let waiting = |what: String| {
            ProcessorError::WaitingForSource(format!(
                "cluster '{name}' ({}), output topic '{topic}': {what}",
                config.bootstrap_servers
            ))
        };
        let mut producer_config =
            client_config(name, config).map_err(|e| ProcessorError::InvalidPlan(e.to_string()))?;
        producer_config
            .set("transactional.id", format!("kappa-{writer}"))
            .set("enable.idempotence", "true")
            // A missing output topic is an error to fix, not one to create
            // with the broker's defaults.
            .set("allow.auto.create.topics", "false")
            .set("acks", "all")
            // A keyed record goes where Kafka's Java clients (and Kafka
            // Streams, and Kappa's own log) put it: murmur2 of the key.
            .set("partitioner", "murmur2_random")
            .set("linger.ms", "5");
        let producer: ThreadedProducer<DefaultProducerContext> = producer_config
            .create()
            .map_err(|e| waiting(format!("cannot make a producer: {e}")))?;
        let metadata = producer
            .client()
            .fetch_metadata(Some(topic), Duration::from_secs(5))
            .map_err(|e| waiting(format!("unreachable: {e}")))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len() as i32);
        if partitions == 0 {
            return Err(waiting(
                "the topic does not exist (create it on the cluster first)".into(),
            ));
        }
        producer
            .init_transactions(TIMEOUT)
            .map_err(|e| waiting(format!("starting transactions: {e}")))?;
        let (group, committed) = newest_entry(name, config, writer, topic)
            .map_err(|e| waiting(format!("reading which entry came last: {e}")))?;
        Ok(ClusterSink {
            cluster: name.to_string(),
            topic: topic.to_string(),
            writer: writer.to_string(),
            producer,
            group,
            committed: Mutex::new(committed),
        })
    }

    fn failed(&self, what: &str, e: KafkaError) -> ProcessorError {
        ProcessorError::WaitingForSource(format!(
            "cluster '{}', output topic '{}': {what}: {e}",
            self.cluster, self.topic
        ))
    }

    fn transaction(&self, seq: u64, records: &[OutputRecord<'_>], reach: &[u64]) -> Result<()> {
        self.producer
            .begin_transaction()
            .map_err(|e| self.failed("beginning a transaction", e))?;
        let entry = format!("{}:{seq}", self.writer);
        for r in records {
            let mut headers = OwnedHeaders::new().insert(Header {
                key: OUTBOX_HEADER,
                value: Some(entry.as_bytes()),
            });
            let source = r.source.map(|(p, o)| format!("{p}:{o}"));
            if let Some(source) = &source {
                headers = headers.insert(Header {
                    key: kappa_processor::spread::repartition::SOURCE_HEADER,
                    value: Some(source.as_bytes()),
                });
            }
            if let Some(joined) = r.joined {
                headers = headers.insert(Header {
                    key: kappa_processor::spread::repartition::JOINED_HEADER,
                    value: Some(joined.as_bytes()),
                });
            }
            let mut record = BaseRecord::<str, str>::to(&self.topic)
                .payload(r.value)
                .timestamp(r.timestamp)
                .headers(headers);
            if let Some(key) = r.key {
                record = record.key(key);
            }
            loop {
                match self.producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                        // The producer's queue drains as the broker acks.
                        std::thread::sleep(Duration::from_millis(5));
                        record = back;
                    }
                    Err((e, _)) => return Err(self.failed("producing", e)),
                }
            }
        }
        let mut entry_offset = TopicPartitionList::new();
        let mut entry_element = entry_offset.add_partition(&self.topic, 0);
        entry_element
            .set_offset(Offset::Offset(seq as i64 + 1))
            .map_err(|e| self.failed("naming the entry", e))?;
        entry_element.set_metadata(reach_metadata(reach));
        self.producer
            .send_offsets_to_transaction(&entry_offset, &self.group, TIMEOUT)
            .map_err(|e| self.failed("committing the entry's number", e))?;
        self.producer
            .commit_transaction(TIMEOUT)
            .map_err(|e| self.failed("committing a transaction", e))
    }
}

impl OutputSink for ClusterSink {
    fn append(&self, seq: u64, records: &[OutputRecord<'_>], reach: &[u64]) -> Result<()> {
        let mut committed = self.committed.lock().unwrap_or_else(|e| e.into_inner());
        if committed.as_ref().is_some_and(|c| seq <= c.entry) {
            return Ok(());
        }
        if let Err(e) = self.transaction(seq, records, reach) {
            metrics::counter!(PRODUCER_ERRORS, "cluster" => self.cluster.clone(), "topic" => self.topic.clone())
                .increment(1);
            let _ = self.producer.abort_transaction(TIMEOUT);
            return Err(e);
        }
        metrics::counter!(PRODUCED_RECORDS, "cluster" => self.cluster.clone(), "topic" => self.topic.clone())
            .increment(records.len() as u64);
        *committed = Some(Written {
            entry: seq,
            reach: Some(reach.to_vec()),
        });
        Ok(())
    }

    fn written(&self) -> Option<Written> {
        self.committed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn describe(&self) -> String {
        format!("topic '{}' of cluster '{}'", self.topic, self.cluster)
    }
}

/// The metadata of an entry's committed offset: the writer's input
/// positions at the commit that made it, `{"reach":[…]}`.
fn reach_metadata(reach: &[u64]) -> String {
    serde_json::json!({ "reach": reach }).to_string()
}

/// The input positions [`reach_metadata`] wrote; `None` for anything else
/// (an entry committed by an older build, or a broker that keeps no
/// metadata).
fn reach_of(metadata: &str) -> Option<Vec<u64>> {
    let value: serde_json::Value = serde_json::from_str(metadata).ok()?;
    value
        .get("reach")?
        .as_array()?
        .iter()
        .map(serde_json::Value::as_u64)
        .collect()
}

/// The group `kappa-<writer>-outbox` and what its offset says the topic
/// holds from `writer` (none before the first commit).
fn newest_entry(
    name: &str,
    config: &ClusterConfig,
    writer: &str,
    topic: &str,
) -> std::result::Result<(ConsumerGroupMetadata, Option<Written>), KafkaError> {
    let mut consumer_config =
        client_config(name, config).map_err(|e| KafkaError::ClientCreation(e.to_string()))?;
    consumer_config
        .set("group.id", format!("kappa-{writer}-outbox"))
        .set("enable.auto.commit", "false");
    let consumer: BaseConsumer = consumer_config.create()?;
    let mut asked = TopicPartitionList::new();
    asked.add_partition(topic, 0);
    let committed = consumer.committed_offsets(asked, TIMEOUT)?;
    let newest = committed
        .find_partition(topic, 0)
        .and_then(|p| match p.offset() {
            Offset::Offset(next) if next > 0 => Some(Written {
                entry: next as u64 - 1,
                reach: reach_of(p.metadata()),
            }),
            _ => None,
        });
    let group = consumer
        .group_metadata()
        .ok_or(KafkaError::MessageConsumption(
            RDKafkaErrorCode::InvalidGroupId,
        ))?;
    Ok((group, newest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entrys_input_positions_round_trip_through_its_metadata() {
        assert_eq!(reach_of(&reach_metadata(&[20, 7])), Some(vec![20, 7]));
        assert_eq!(reach_of(&reach_metadata(&[])), Some(vec![]));
        // What an older build or another writer left.
        assert_eq!(reach_of(""), None);
        assert_eq!(reach_of("{\"reach\":[1,-2]}"), None);
        assert_eq!(reach_of("{\"other\":1}"), None);
    }
}
