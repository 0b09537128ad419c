//! `kappa-cluster`: Kafka-protocol clusters as places a stream's topic may
//! live — Apache Kafka, Redpanda, Amazon MSK, Tansu, or another Kappa
//! node's Kafka listener.
//!
//! [`ClusterConfig`] is a cluster's settings (brokers, TLS, SASL; secrets
//! by reference, never held); [`probe`] asks a cluster for its brokers and
//! topics through librdkafka (the `rdkafka` crate, built from the source it
//! ships); [`ClusterSource`] reads a cluster's topics as a view's input
//! (the processor's source interface). [`CheckpointStore`] keeps tasks'
//! RocksDB checkpoints in object storage (S3 or a local directory), and
//! [`ObjectSegmentStore`] the log's tiered segments there. No HTTP
//! server.

mod checkpoint;
mod client;
mod config;
mod control;
mod group;
mod segment_store;
mod sink;
mod source;

pub use checkpoint::{
    CheckpointInfo, CheckpointStore, SavedCheckpoint, CHECKPOINT_FORMAT, KEEP_CHECKPOINTS,
};
pub use client::{client_config, probe, Broker, ClusterMetadata, ClusterTopic};
pub use config::{validate_name, ClusterConfig, SaslMechanism, SecurityProtocol, MAX_NAME_LEN};
pub use control::{control_topic_name, create_topic, ControlTopic};
pub use group::{GroupAssignment, OnChange, SESSION_TIMEOUT_MS};
pub use segment_store::ObjectSegmentStore;
pub use sink::{ClusterSink, OUTBOX_HEADER, PRODUCED_RECORDS, PRODUCER_ERRORS};
pub use source::{ClusterSource, BROKER_RTT, FETCHED_RECORDS};

/// Why a cluster could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// Its settings are wrong or incomplete (names the setting).
    #[error("{0}")]
    Config(String),
    /// No broker answered.
    #[error(
        "cluster {cluster:?} is unreachable (bootstrap_servers {bootstrap_servers}): {reason}"
    )]
    Unreachable {
        /// The cluster's name.
        cluster: String,
        /// The brokers tried.
        bootstrap_servers: String,
        /// What the client said.
        reason: String,
    },
}
