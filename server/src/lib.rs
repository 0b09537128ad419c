//! `kappa-server`: the `kappa` binary's library. [`run`] serves the HTTP API
//! over a [`Log`] on a listener until a shutdown signal, then finishes
//! in-flight requests and closes the log (syncing what was written).
//!
//! Module map: `config` (layered settings) · `http` (accept loop: connection
//! limit, header and body deadlines, graceful shutdown) · `routes/*` (one
//! file per resource) · `dto` (wire types) · `error` (the one status map) ·
//! `metrics` (Prometheus names) · `cli/` (client subcommands).

pub mod cli;
pub mod config;
pub mod dto;
pub mod error;
pub mod http;
pub mod metrics;
pub mod routes;

use std::future::Future;
use std::sync::Arc;

use kappa_log::Log;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::net::TcpListener;

pub use config::ServerConfig;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// The log.
    pub log: Arc<Log>,
    /// The server settings.
    pub config: Arc<ServerConfig>,
    /// Renders the Prometheus registry.
    pub metrics: PrometheusHandle,
    /// Becomes true when shutdown starts: long-polls stop waiting.
    pub shutting_down: tokio::sync::watch::Receiver<bool>,
}

impl AppState {
    /// Completes when shutdown starts.
    pub async fn shutdown_started(&self) {
        let mut rx = self.shutting_down.clone();
        let _ = rx.wait_for(|down| *down).await;
    }
}

/// Opens the log in `config.data_dir` (running recovery), serves the API on
/// `listener` until `shutdown` completes, then drains and closes.
pub async fn run(
    config: ServerConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let log_config = config.log_config();
    let log = tokio::task::spawn_blocking(move || Log::open(log_config)).await??;
    let (shutdown_tx, shutting_down) = tokio::sync::watch::channel(false);
    let state = AppState {
        log: Arc::new(log),
        config: Arc::new(config),
        metrics: metrics::install(),
        shutting_down,
    };
    let router = routes::router(state.clone());
    let shutdown = async move {
        shutdown.await;
        let _ = shutdown_tx.send(true);
    };
    http::serve(listener, router, &state.config, shutdown).await?;
    let log = state.log.clone();
    tokio::task::spawn_blocking(move || log.close()).await?;
    tracing::info!("log closed; bye");
    Ok(())
}
