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
    let state = AppState {
        log: Arc::new(log),
        config: Arc::new(config),
        metrics: metrics::install(),
    };
    let router = routes::router(state.clone());
    http::serve(listener, router, &state.config, shutdown).await?;
    let log = state.log.clone();
    tokio::task::spawn_blocking(move || log.close()).await?;
    tracing::info!("log closed; bye");
    Ok(())
}
