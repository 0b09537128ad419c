//! Wire types of `GET /v1/clusters`: the Kafka clusters a server knows and
//! what their last metadata request found.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/clusters`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClustersOut {
    /// Every configured cluster, by name.
    pub clusters: Vec<ClusterOut>,
}

/// One configured Kafka cluster and its last probe.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterOut {
    /// Its name (`[clusters.NAME]`, `--cluster NAME=..`).
    pub name: String,
    /// Where its clients start (`host:port`, comma-separated).
    pub bootstrap_servers: String,
    /// `plaintext`, `ssl`, `sasl_plaintext` or `sasl_ssl`.
    pub security_protocol: String,
    /// Whether it answered its last metadata request; null before the
    /// first answer.
    pub reachable: Option<bool>,
    /// When it was asked last (ms since the epoch); null before.
    pub checked_at_ms: Option<i64>,
    /// Why it did not answer (names the cluster and the brokers tried).
    pub error: Option<String>,
    /// The brokers its last answer named, by id (empty when unreachable).
    pub brokers: Vec<ClusterBrokerOut>,
    /// Its topics, by name (internal `__` topics left out; empty when
    /// unreachable).
    pub topics: Vec<ClusterTopicOut>,
}

/// A broker of a cluster.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterBrokerOut {
    /// The broker's id.
    pub id: i32,
    /// The host it advertises.
    pub host: String,
    /// The port it advertises.
    pub port: u16,
}

/// A topic of a cluster.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterTopicOut {
    /// The topic's name.
    pub name: String,
    /// Its number of partitions.
    pub partitions: u32,
}

/// `GET /v1/cluster`: the Kappa cluster this node belongs to (nodes
/// started with one `--cluster-id`), as its control topic says.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KappaClusterOut {
    /// The cluster id.
    pub cluster_id: String,
    /// This node's id (its advertised URL).
    pub node: String,
    /// Every node the control topic names, by id.
    pub nodes: Vec<KappaNodeOut>,
}

/// One node of a Kappa cluster.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KappaNodeOut {
    /// Its id.
    pub node: String,
    /// Where its HTTP API is.
    pub url: String,
    /// When it last said it is up (ms since the epoch, its clock).
    pub last_seen_ms: i64,
    /// Whether it said so recently (within 35 s).
    pub up: bool,
    /// Per view version (`view@version`), the input partitions it owns.
    pub views: std::collections::BTreeMap<String, Vec<u32>>,
    /// What the node says of its work now, asked of it when this answer
    /// was made (null when it did not answer within 2 s).
    pub stats: Option<KappaNodeStatsOut>,
}

/// A node's work now, per view version spread over the cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct KappaNodeStatsOut {
    /// Per view version (`view@version`) running on the node.
    pub views: std::collections::BTreeMap<String, KappaNodeViewOut>,
}

/// One view version's work on one node.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct KappaNodeViewOut {
    /// The partitions whose tasks run on the node.
    pub partitions: Vec<u32>,
    /// Input records of those partitions not yet processed and committed.
    pub lag_records: u64,
    /// Records processed per second by its tasks (since each started).
    pub records_per_second: f64,
    /// How old the oldest of its tasks' newest checkpoints is (ms; null
    /// without checkpoints, or before a task's first).
    pub checkpoint_age_ms: Option<i64>,
    /// The partitions whose standby runs on the node (`standby_replicas =
    /// 1`), each with how far behind its input it is (ms; null until it
    /// has caught up once).
    #[serde(default)]
    pub standbys: Vec<StandbyOut>,
}

/// A standby on a node of a Kappa cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct StandbyOut {
    /// The input partition.
    pub partition: u32,
    /// How far behind its input the standby's rows are (ms): 0 while it
    /// has read everything; null until it first has.
    pub staleness_ms: Option<u64>,
}
