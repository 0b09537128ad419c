//! A derived stream's output topic on a Kafka cluster
//! ([`kappa_processor::sink::OutputSink`]), written exactly once.
//!
//! One transactional producer per writing version (`transactional.id` =
//! `kappa-<view>@<version>`). Each outbox entry is appended in one Kafka
//! transaction, every record carrying the header
//! [`OUTBOX_HEADER`]` = "<view>@<version>:<entry>"`. When the sink opens,
//! `init_transactions` fences and aborts a transaction an earlier run of
//! the same version left open, then the tail of each partition is read
//! (`read_committed`) for the newest entry of this version the topic
//! holds: a restart that re-appends a pending outbox skips the entries
//! already there. Read-committed consumers therefore see every output
//! record once. The topic is assumed written by this stream only (the
//! tail read looks at the last [`TAIL_RECORDS`] records of a partition).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use kappa_processor::error::{ProcessorError, Result};
use kappa_processor::sink::{OutputRecord, OutputSink};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
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

/// Records read back from the end of each partition when the sink opens.
pub const TAIL_RECORDS: i64 = 1_000;

/// How long a transaction's start, commit or the tail read may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// A topic of a cluster written by one version.
pub struct ClusterSink {
    cluster: String,
    topic: String,
    writer: String,
    producer: ThreadedProducer<DefaultProducerContext>,
    /// The newest entry the topic holds from this writer.
    committed: Mutex<Option<u64>>,
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
    /// starts its transactional producer and finds the newest entry of
    /// `writer` the topic holds.
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
        let committed = newest_entry(name, config, writer, topic, partitions)
            .map_err(|e| waiting(format!("reading the topic's end: {e}")))?;
        Ok(ClusterSink {
            cluster: name.to_string(),
            topic: topic.to_string(),
            writer: writer.to_string(),
            producer,
            committed: Mutex::new(committed),
        })
    }

    fn failed(&self, what: &str, e: KafkaError) -> ProcessorError {
        ProcessorError::WaitingForSource(format!(
            "cluster '{}', output topic '{}': {what}: {e}",
            self.cluster, self.topic
        ))
    }

    fn transaction(&self, seq: u64, records: &[OutputRecord<'_>]) -> Result<()> {
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
        self.producer
            .commit_transaction(TIMEOUT)
            .map_err(|e| self.failed("committing a transaction", e))
    }
}

impl OutputSink for ClusterSink {
    fn append(&self, seq: u64, records: &[OutputRecord<'_>]) -> Result<()> {
        let mut committed = self.committed.lock().unwrap_or_else(|e| e.into_inner());
        if committed.is_some_and(|c| seq <= c) {
            return Ok(());
        }
        if let Err(e) = self.transaction(seq, records) {
            metrics::counter!(PRODUCER_ERRORS, "cluster" => self.cluster.clone(), "topic" => self.topic.clone())
                .increment(1);
            let _ = self.producer.abort_transaction(TIMEOUT);
            return Err(e);
        }
        metrics::counter!(PRODUCED_RECORDS, "cluster" => self.cluster.clone(), "topic" => self.topic.clone())
            .increment(records.len() as u64);
        *committed = Some(seq);
        Ok(())
    }

    fn describe(&self) -> String {
        format!("topic '{}' of cluster '{}'", self.topic, self.cluster)
    }
}

/// The newest outbox entry of `writer` in the last [`TAIL_RECORDS`]
/// committed records of each partition of `topic`.
fn newest_entry(
    name: &str,
    config: &ClusterConfig,
    writer: &str,
    topic: &str,
    partitions: i32,
) -> std::result::Result<Option<u64>, KafkaError> {
    let mut consumer_config =
        client_config(name, config).map_err(|e| KafkaError::ClientCreation(e.to_string()))?;
    consumer_config
        .set("group.id", format!("kappa-{writer}-tail"))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer = consumer_config.create()?;
    let mut tpl = TopicPartitionList::new();
    let mut open = std::collections::HashSet::new();
    for p in 0..partitions {
        let (low, high) = consumer.fetch_watermarks(topic, p, Duration::from_secs(5))?;
        if high > low {
            tpl.add_partition_offset(topic, p, Offset::Offset(low.max(high - TAIL_RECORDS)))?;
            open.insert(p);
        }
    }
    if open.is_empty() {
        return Ok(None);
    }
    consumer.assign(&tpl)?;
    let prefix = format!("{writer}:");
    let mut newest: Option<u64> = None;
    let deadline = Instant::now() + TIMEOUT;
    while !open.is_empty() {
        if Instant::now() >= deadline {
            return Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::RequestTimedOut,
            ));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => tracing::debug!(error = %e, "reading an output topic's end"),
            Some(Ok(m)) => {
                let seq = m.headers().and_then(|hs| {
                    hs.iter()
                        .find(|h| h.key == OUTBOX_HEADER)
                        .and_then(|h| std::str::from_utf8(h.value?).ok())
                        .and_then(|v| v.strip_prefix(&prefix))
                        .and_then(|s| s.parse::<u64>().ok())
                });
                if let Some(seq) = seq {
                    newest = Some(newest.map_or(seq, |n| n.max(seq)));
                }
            }
        }
    }
    Ok(newest)
}
