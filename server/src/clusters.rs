//! The Kafka-protocol clusters this node knows (`[clusters.NAME]` in the
//! config, `--cluster NAME=host:port,...`), and whether each answers.
//!
//! A monitor task asks every cluster for its metadata (brokers, topics)
//! at start and then every [`PROBE_INTERVAL`], on the blocking pool (the
//! client blocks up to [`PROBE_TIMEOUT`]), and keeps the last answer:
//! `GET /v1/clusters` and `SHOW CLUSTERS` read it without waiting on a
//! slow or unreachable cluster. The gauges `kappa_cluster_reachable` and
//! `kappa_cluster_brokers` follow it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kappa_cluster::{ClusterConfig, ClusterMetadata};

/// How long one metadata request may take before the cluster counts as
/// unreachable.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often each cluster is asked again.
pub const PROBE_INTERVAL: Duration = Duration::from_secs(10);

/// What the last probe of a cluster found.
#[derive(Debug, Clone, Default)]
pub struct ClusterStatus {
    /// When it was asked last (ms since the epoch); `None` before the
    /// first answer or timeout.
    pub checked_at_ms: Option<i64>,
    /// Its brokers and topics, when it answered.
    pub metadata: Option<ClusterMetadata>,
    /// Why it did not answer (names the cluster and the brokers tried).
    pub error: Option<String>,
}

/// One configured cluster.
#[derive(Debug)]
pub struct Cluster {
    /// Its name in the config and in `CLUSTER='...'`.
    pub name: String,
    /// Its settings (secrets by reference only).
    pub config: ClusterConfig,
    /// The cluster as views' source (one, so its client for offsets is
    /// made once).
    source: Arc<dyn kappa_processor::source::Source>,
    status: Mutex<ClusterStatus>,
}

impl Cluster {
    /// What the last probe found.
    pub fn status(&self) -> ClusterStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Every configured cluster, by name.
#[derive(Debug, Clone, Default)]
pub struct Clusters {
    by_name: Arc<BTreeMap<String, Arc<Cluster>>>,
}

impl Clusters {
    /// The clusters of `configs`, none probed yet.
    pub fn new(configs: &BTreeMap<String, ClusterConfig>) -> Clusters {
        let by_name = configs
            .iter()
            .map(|(name, config)| {
                let cluster = Cluster {
                    name: name.clone(),
                    config: config.clone(),
                    source: kappa_cluster::ClusterSource::shared(name, config.clone()),
                    status: Mutex::new(ClusterStatus::default()),
                };
                (name.clone(), Arc::new(cluster))
            })
            .collect();
        Clusters {
            by_name: Arc::new(by_name),
        }
    }

    /// Every cluster, by name.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Cluster>> {
        self.by_name.values()
    }

    /// The cluster called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<Cluster>> {
        self.by_name.get(name)
    }

    /// What to say when `name` names no configured cluster.
    pub fn not_configured(&self, name: &str) -> String {
        let known: Vec<&str> = self.by_name.keys().map(String::as_str).collect();
        match known.is_empty() {
            true => format!(
                "cluster '{name}' is not configured on this server (none is: add [clusters.{name}] to the config or --cluster {name}=host:port; see docs/clusters.md)"
            ),
            false => format!(
                "cluster '{name}' is not configured on this server (configured: {})",
                known.join(", ")
            ),
        }
    }

    /// Probes every cluster now, each on the blocking pool, and records
    /// what each answered.
    pub async fn probe_all(&self) {
        let probes = self.all().cloned().map(|cluster| {
            tokio::task::spawn_blocking(move || {
                let answer = kappa_cluster::probe(&cluster.name, &cluster.config, PROBE_TIMEOUT);
                record(&cluster, answer);
            })
        });
        for probe in probes.collect::<Vec<_>>() {
            let _ = probe.await;
        }
    }

    /// Probes every cluster now and then every [`PROBE_INTERVAL`] until
    /// `shutting_down` turns true. Nothing to do without clusters.
    pub fn spawn_monitor(
        &self,
        mut shutting_down: tokio::sync::watch::Receiver<bool>,
    ) -> Option<tokio::task::JoinHandle<()>> {
        if self.by_name.is_empty() {
            return None;
        }
        let clusters = self.clone();
        Some(tokio::spawn(async move {
            loop {
                clusters.probe_all().await;
                tokio::select! {
                    _ = tokio::time::sleep(PROBE_INTERVAL) => {}
                    _ = shutting_down.wait_for(|down| *down) => return,
                }
            }
        }))
    }
}

/// Keeps a probe's answer and sets the cluster's gauges.
fn record(cluster: &Cluster, answer: Result<ClusterMetadata, kappa_cluster::ClusterError>) {
    let brokers = answer.as_ref().map_or(0, |m| m.brokers.len());
    crate::metrics::set_cluster(&cluster.name, answer.is_ok(), brokers);
    let mut status = cluster
        .status
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let was_reachable = status.metadata.is_some();
    status.checked_at_ms = Some(kappa_log::now_ms());
    match answer {
        Ok(metadata) => {
            if !was_reachable {
                tracing::info!(cluster = %cluster.name, brokers, "cluster reachable");
            }
            status.metadata = Some(metadata);
            status.error = None;
        }
        Err(e) => {
            if was_reachable || status.error.is_none() {
                tracing::warn!(cluster = %cluster.name, error = %e, "cluster unreachable");
            }
            status.metadata = None;
            status.error = Some(e.to_string());
        }
    }
}

impl kappa_processor::source::Clusters for Clusters {
    fn source(
        &self,
        name: &str,
    ) -> kappa_processor::error::Result<Arc<dyn kappa_processor::source::Source>> {
        match self.by_name.get(name) {
            Some(cluster) => Ok(cluster.source.clone()),
            None => Err(kappa_processor::error::ProcessorError::InvalidPlan(
                self.not_configured(name),
            )),
        }
    }

    fn sink(
        &self,
        name: &str,
        writer: &str,
        topic: &str,
    ) -> kappa_processor::error::Result<Arc<dyn kappa_processor::sink::OutputSink>> {
        match self.by_name.get(name) {
            Some(cluster) => Ok(Arc::new(kappa_cluster::ClusterSink::open(
                name,
                &cluster.config,
                writer,
                topic,
            )?)),
            None => Err(kappa_processor::error::ProcessorError::InvalidPlan(
                self.not_configured(name),
            )),
        }
    }
}
