//! The node core: what every frontend calls. The HTTP API and console
//! (`http`, `routes`) and the Kafka listener (`kafka`) translate their
//! protocol into calls on the core and its answers back into their
//! protocol; they never call each other. The core is [`AppState`] (the
//! open log, views, settings and token store), topic resolution for
//! producers ([`topics`]), authorization ([`crate::auth::authorize`]), TLS
//! ([`crate::tls`]), statements and views ([`crate::statements`],
//! [`crate::views`]). `server/tests/layers.rs` checks that no frontend
//! imports another and that the core imports none.

pub mod topics;

use std::sync::Arc;

use kappa_log::Log;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::config::ServerConfig;
use crate::views::ViewManager;
use crate::{auth, clusters, history};

/// The node: what every frontend (the HTTP API and console, the Kafka
/// listener) holds and calls — the log, the views, the settings, the
/// authentication, the metrics and the shutdown signal.
#[derive(Clone)]
pub struct AppState {
    /// The log.
    pub log: Arc<Log>,
    /// The views and their processors.
    pub views: Arc<ViewManager>,
    /// The server settings.
    pub config: Arc<ServerConfig>,
    /// Renders the Prometheus registry.
    pub metrics: PrometheusHandle,
    /// Who may call: the auth mode and the token store.
    pub auth: Arc<auth::Auth>,
    /// Becomes true when shutdown starts: long-polls stop waiting.
    pub shutting_down: tokio::sync::watch::Receiver<bool>,
    /// The last 15 minutes of throughput, rates and lag (`GET /v1/history`).
    pub history: history::History,
    /// The Kafka-protocol clusters streams may live on, and whether each
    /// answers.
    pub clusters: clusters::Clusters,
    /// This node's part in a Kappa cluster (`None`: it runs alone).
    pub nodes: Option<Arc<crate::nodes::Nodes>>,
}

impl AppState {
    /// Completes when shutdown starts.
    pub async fn shutdown_started(&self) {
        let mut rx = self.shutting_down.clone();
        let _ = rx.wait_for(|down| *down).await;
    }
}
