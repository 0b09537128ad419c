//! The control topic of a Kappa cluster: one partition on the
//! coordination cluster through which the nodes of one cluster id share
//! what they must agree on — the statements that change the catalog, the
//! nodes and their addresses, which node owns which partitions.
//!
//! Records are appended by any node ([`ControlTopic::append`]) and read by
//! every node in the topic's order ([`ControlTopic::follow`]), so every
//! node applies the same statements in the same order. The records' value
//! is the node layer's JSON (the server documents it); this module moves
//! bytes only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;
use rdkafka::{Offset, TopicPartitionList};

use crate::{client_config, ClusterConfig};

/// How long creating the topic or appending a record may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// How long one poll of the follower waits.
const POLL: Duration = Duration::from_millis(100);

/// The control topic's name for cluster id `id`.
pub fn control_topic_name(id: &str) -> String {
    format!("_kappa-{id}-control")
}

/// The offset a delivered record got, or why it was not.
#[derive(Default)]
struct Delivery(Mutex<Option<std::result::Result<u64, String>>>);

impl Delivery {
    fn slot(&self) -> MutexGuard<'_, Option<std::result::Result<u64, String>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ClientContext for Delivery {}

impl ProducerContext for Delivery {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        *self.slot() = Some(match result {
            Ok(m) => u64::try_from(m.offset()).map_err(|_| "no offset".to_string()),
            Err((e, _)) => Err(e.to_string()),
        });
    }
}

/// The control topic of one Kappa cluster.
pub struct ControlTopic {
    cluster: String,
    config: ClusterConfig,
    topic: String,
    /// One append at a time: its delivery is the one awaited.
    producer: Mutex<rdkafka::producer::BaseProducer<Delivery>>,
}

impl std::fmt::Debug for ControlTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlTopic")
            .field("cluster", &self.cluster)
            .field("topic", &self.topic)
            .finish()
    }
}

impl ControlTopic {
    /// The topic `topic` of the cluster `name`, created (one partition) if
    /// missing.
    pub fn open(
        name: &str,
        config: &ClusterConfig,
        topic: &str,
    ) -> std::result::Result<ControlTopic, String> {
        create_topic(name, config, topic, 1).map_err(|e| format!("the control topic: {e}"))?;
        let mut producer_config = client_config(name, config).map_err(|e| e.to_string())?;
        producer_config
            .set("enable.idempotence", "true")
            .set("linger.ms", "0");
        let producer = producer_config
            .create_with_context(Delivery::default())
            .map_err(|e| format!("cannot make a producer: {e}"))?;
        Ok(ControlTopic {
            cluster: name.to_string(),
            config: config.clone(),
            topic: topic.to_string(),
            producer: Mutex::new(producer),
        })
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Appends `value` (keyed `key`); answers its offset once the cluster
    /// has it.
    pub fn append(&self, key: &str, value: &[u8]) -> std::result::Result<u64, String> {
        let producer = self.producer.lock().unwrap_or_else(PoisonError::into_inner);
        *producer.context().slot() = None;
        producer
            .send(
                BaseRecord::to(&self.topic)
                    .key(key)
                    .payload(value)
                    .partition(0),
            )
            .map_err(|(e, _)| format!("cannot append to '{}': {e}", self.topic))?;
        let deadline = Instant::now() + TIMEOUT;
        loop {
            producer.poll(Duration::from_millis(10));
            if let Some(result) = producer.context().slot().take() {
                return result.map_err(|e| format!("cannot append to '{}': {e}", self.topic));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "cannot append to '{}': no answer in {} s",
                    self.topic,
                    TIMEOUT.as_secs()
                ));
            }
        }
    }

    /// Reads the topic from `from` on a thread of its own (of
    /// `stack_bytes` of stack), calling `apply` with each record's offset
    /// and value in order, until `stop` is set.
    pub fn follow(
        &self,
        from: u64,
        mut apply: impl FnMut(u64, &[u8]) + Send + 'static,
        stop: Arc<AtomicBool>,
        stack_bytes: usize,
    ) -> std::result::Result<JoinHandle<()>, String> {
        let mut client = client_config(&self.cluster, &self.config).map_err(|e| e.to_string())?;
        client
            .set("group.id", format!("{}-follower", self.topic))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed");
        let consumer: BaseConsumer = client
            .create()
            .map_err(|e| format!("cannot make a client: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Offset(from as i64))
            .map_err(|e| e.to_string())?;
        consumer.assign(&tpl).map_err(|e| e.to_string())?;
        let topic = self.topic.clone();
        std::thread::Builder::new()
            .name("kappa-control".into())
            .stack_size(stack_bytes)
            .spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    match consumer.poll(POLL) {
                        Some(Ok(m)) => {
                            if let Ok(offset) = u64::try_from(m.offset()) {
                                apply(offset, m.payload().unwrap_or_default());
                            }
                        }
                        Some(Err(KafkaError::MessageConsumption(
                            RDKafkaErrorCode::UnknownTopicOrPartition,
                        ))) => {
                            tracing::warn!(topic = %topic, "the control topic is gone")
                        }
                        Some(Err(e)) => {
                            tracing::debug!(topic = %topic, error = %e, "control topic")
                        }
                        None => {}
                    }
                }
            })
            .map_err(|e| format!("cannot start a thread: {e}"))
    }
}

/// Creates `topic` with `partitions` partitions (the broker's replication
/// factor) on the cluster `name` unless it exists.
pub fn create_topic(
    name: &str,
    config: &ClusterConfig,
    topic: &str,
    partitions: u32,
) -> std::result::Result<(), String> {
    let client = client_config(name, config).map_err(|e| e.to_string())?;
    let admin: AdminClient<DefaultClientContext> = client
        .create()
        .map_err(|e| format!("cannot make a client: {e}"))?;
    let count = i32::try_from(partitions).map_err(|_| format!("{partitions} partitions"))?;
    let new = NewTopic::new(topic, count, TopicReplication::Fixed(-1));
    let options = AdminOptions::new().operation_timeout(Some(TIMEOUT));
    let created = block_on(admin.create_topics([&new], &options))?
        .map_err(|e| format!("cannot create topic '{topic}': {e}"))?;
    for result in created {
        match result {
            Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
            Err((_, code)) => return Err(format!("cannot create topic '{topic}': {code}")),
        }
    }
    Ok(())
}

/// Runs `future` to its end on this thread (the admin client's futures
/// are completed by its own polling thread).
fn block_on<F: std::future::Future>(future: F) -> std::result::Result<F::Output, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot make a runtime: {e}"))?;
    Ok(runtime.block_on(future))
}
