//! `GET /v1/clusters`: the Kafka clusters the server knows and what the
//! last probe of each found (see `crate::clusters`); answered from memory,
//! never waiting on a cluster. Administrators only: it names brokers and
//! their topics.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;

use crate::clusters::Cluster;
use crate::dto::clusters::{
    ClusterBrokerOut, ClusterOut, ClusterTopicOut, ClustersOut, KappaClusterOut, KappaNodeOut,
};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// `GET /v1/cluster`: the Kappa cluster this node is part of — its nodes,
/// where they are and what each owns.
pub async fn kappa_cluster(State(state): State<AppState>) -> ApiResult<Json<KappaClusterOut>> {
    let Some(nodes) = &state.nodes else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_in_a_cluster",
            "this node runs alone: start it with --cluster-id and --advertise-url to join a Kappa cluster",
        ));
    };
    let (known, owners) = nodes.overview();
    let now = kappa_log::now_ms();
    let out = known
        .into_iter()
        .map(|(node, info)| {
            let views = owners
                .iter()
                .map(|(version, partitions)| {
                    let mine: Vec<u32> = partitions
                        .iter()
                        .filter(|(_, owner)| **owner == node)
                        .map(|(p, _)| *p)
                        .collect();
                    (version.clone(), mine)
                })
                .filter(|(_, mine)| !mine.is_empty())
                .collect();
            KappaNodeOut {
                up: now.saturating_sub(info.at_ms)
                    < crate::nodes::NODE_SILENT_FOR.as_millis() as i64,
                node,
                url: info.url,
                last_seen_ms: info.at_ms,
                views,
            }
        })
        .collect();
    Ok(Json(KappaClusterOut {
        cluster_id: nodes.cluster_id().to_string(),
        node: nodes.node().to_string(),
        nodes: out,
    }))
}

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
