//! `GET /v1/clusters`: the Kafka clusters the server knows and what the
//! last probe of each found (see `crate::clusters`); answered from memory,
//! never waiting on a cluster. Administrators only: it names brokers and
//! their topics.

use std::collections::BTreeMap;

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::http::StatusCode;
use axum::Json;

use crate::clusters::Cluster;
use crate::dto::clusters::{
    ClusterBrokerOut, ClusterOut, ClusterTopicOut, ClustersOut, KappaClusterOut, KappaNodeOut,
    KappaNodeStatsOut, KappaNodeViewOut, StandbyOut,
};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// `GET /v1/cluster`: the Kappa cluster this node is part of — its nodes,
/// where they are, what each owns and how its work goes. Each node's
/// `stats` are asked of it (`?local=true`, the caller's token passed on)
/// when this answers; `local=true` answers this node's only.
pub async fn kappa_cluster(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Json<KappaClusterOut>> {
    let mut params = super::Params::parse(query.as_deref())?;
    let local = match params.take("local").as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "local must be true or false, got {other:?}"
            )))
        }
    };
    params.finish()?;
    let Some(nodes) = state.nodes.clone() else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "not_in_a_cluster",
            "this node runs alone: start it with --cluster-id and --advertise-url to join a Kappa cluster",
        ));
    };
    let authorization = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let (known, owners) = nodes.overview();
    let now = kappa_log::now_ms();
    let me = nodes.node().to_string();
    let views = state.views.clone();
    let mine = super::blocking(move || Ok(own_stats(&views, now))).await?;
    let asked: BTreeMap<String, Option<KappaNodeStatsOut>> = match local {
        true => BTreeMap::new(),
        false => {
            let peers: Vec<(String, String)> = known
                .iter()
                .filter(|(node, _)| **node != me)
                .map(|(node, info)| (node.clone(), info.url.clone()))
                .collect();
            super::blocking(move || {
                Ok(peers
                    .into_iter()
                    .map(|(node, url)| {
                        let stats = ask_stats(&url, &node, authorization.as_deref());
                        (node, stats)
                    })
                    .collect())
            })
            .await?
        }
    };
    let out = known
        .into_iter()
        .map(|(node, info)| {
            let views = owners
                .iter()
                .map(|(version, partitions)| {
                    let theirs: Vec<u32> = partitions
                        .iter()
                        .filter(|(_, owner)| **owner == node)
                        .map(|(p, _)| *p)
                        .collect();
                    (version.clone(), theirs)
                })
                .filter(|(_, theirs)| !theirs.is_empty())
                .collect();
            let stats = match node == me {
                true => Some(mine.clone()),
                false => asked.get(&node).cloned().flatten(),
            };
            KappaNodeOut {
                up: now.saturating_sub(info.at_ms)
                    < crate::nodes::NODE_SILENT_FOR.as_millis() as i64,
                node,
                url: info.url,
                last_seen_ms: info.at_ms,
                views,
                stats,
            }
        })
        .collect();
    Ok(Json(KappaClusterOut {
        cluster_id: nodes.cluster_id().to_string(),
        node: nodes.node().to_string(),
        nodes: out,
    }))
}

/// This node's work now, per view version spread over the cluster.
fn own_stats(views: &crate::views::ViewManager, now: i64) -> KappaNodeStatsOut {
    KappaNodeStatsOut {
        views: views
            .spread_stats()
            .into_iter()
            .map(|s| {
                (
                    s.version,
                    KappaNodeViewOut {
                        partitions: s.partitions,
                        lag_records: s.lag,
                        records_per_second: s.records_per_second,
                        checkpoint_age_ms: s.oldest_checkpoint_ms.map(|at| now.saturating_sub(at)),
                        standbys: s
                            .standbys
                            .into_iter()
                            .map(|(partition, staleness)| StandbyOut {
                                partition,
                                staleness_ms: staleness.map(|s| s.as_millis() as u64),
                            })
                            .collect(),
                    },
                )
            })
            .collect(),
    }
}

/// Asks the node at `url` (id `node`) for its own stats; `None` when it
/// does not answer within 2 s.
fn ask_stats(url: &str, node: &str, authorization: Option<&str>) -> Option<KappaNodeStatsOut> {
    let mut call = ureq::get(&format!(
        "{}/v1/cluster?local=true",
        url.trim_end_matches('/')
    ))
    .timeout(std::time::Duration::from_secs(2));
    if let Some(auth) = authorization {
        call = call.set("authorization", auth);
    }
    let answer: KappaClusterOut = call.call().ok()?.into_json().ok()?;
    answer
        .nodes
        .into_iter()
        .find(|n| n.node == node)
        .and_then(|n| n.stats)
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
