//! `GET /v1/clusters`: the Kafka clusters the server knows and what the
//! last probe of each found (see `crate::clusters`); answered from memory,
//! never waiting on a cluster. Administrators only: it names brokers and
//! their topics.

use axum::extract::State;
use axum::Json;

use crate::clusters::Cluster;
use crate::dto::clusters::{ClusterBrokerOut, ClusterOut, ClusterTopicOut, ClustersOut};
use crate::AppState;

/// `GET /v1/clusters`.
pub async fn list(State(state): State<AppState>) -> Json<ClustersOut> {
    Json(ClustersOut {
        clusters: state.clusters.all().map(|c| cluster_out(c)).collect(),
    })
}

fn cluster_out(cluster: &Cluster) -> ClusterOut {
    let status = cluster.status();
    let metadata = status.metadata.unwrap_or_default();
    ClusterOut {
        name: cluster.name.clone(),
        bootstrap_servers: cluster.config.bootstrap_servers.clone(),
        security_protocol: cluster.config.security_protocol.as_kafka().to_string(),
        reachable: status.checked_at_ms.map(|_| status.error.is_none()),
        checked_at_ms: status.checked_at_ms,
        error: status.error,
        brokers: metadata
            .brokers
            .into_iter()
            .map(|b| ClusterBrokerOut {
                id: b.id,
                host: b.host,
                port: b.port,
            })
            .collect(),
        topics: metadata
            .topics
            .into_iter()
            .map(|t| ClusterTopicOut {
                name: t.name,
                partitions: t.partitions,
            })
            .collect(),
    }
}
