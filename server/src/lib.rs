//! `kappa-server`: the `kappa` binary's library. [`run`] serves the HTTP API
//! over a [`Log`] on a listener until a shutdown signal, then finishes
//! in-flight requests and closes the log (syncing what was written).
//!
//! Module map: `config` (layered settings) · `datadir` (the data
//! directory's lock) · `auth` (tokens, grants, the
//! check every request passes, audit) · `http` (accept loop: connection
//! limit, header and body deadlines, graceful shutdown) · `routes/*` (one
//! file per resource: parse the request, map the answer) · `statements`
//! (the SQL statement executor) · `dto` (wire types) · `error` (the one
//! status map) · `metrics` (Prometheus names) · `history` (the console's
//! 15-minute metrics ring) · `views/` (catalog,
//! processors, blue/green builds) · `cli/` (client subcommands) · `kafka`
//! (the Kafka listener) · `node` (what every frontend holds) · `nodes`
//! (the Kappa cluster: nodes sharing the catalog and the views' partitions) · `tls`.
//!
//! Public: [`run`] and its variants, [`ServerConfig`], and the modules the
//! binary and the tests name (`cli`, `config`, `kafka`, `routes` for the
//! OpenAPI document, `tls`, `views` for the view manager and its catalog);
//! the rest is private. ARCHITECTURE.md has the layers.

#![warn(missing_docs)]

mod auth;
pub mod cli;
mod clusters;
pub mod config;
mod datadir;
mod dto;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod history;
mod http;
pub mod kafka;
mod metrics;
mod node;
mod nodes;
pub mod pg;
pub mod routes;
mod statements;
pub mod tls;
pub mod views;

use std::future::Future;
use std::sync::Arc;

use kappa_log::Log;
use tokio::net::TcpListener;

pub use config::ServerConfig;
pub use node::AppState;
use views::ViewManager;

/// Opens the log in `config.data_dir` (running recovery) and the views
/// (resuming every processor), serves the API on `listener` until
/// `shutdown` completes, then drains, stops the processors and closes the log.
pub async fn run(
    config: ServerConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let log_config = config.log_config()?;
    run_with_log_config(config, log_config, listener, shutdown).await
}

/// The protocol listeners besides HTTP, each on when its address is set.
#[derive(Default)]
pub struct Listeners {
    /// The Kafka protocol's (`kafka_listen`).
    pub kafka: Option<TcpListener>,
    /// The PostgreSQL protocol's (`pg_listen`).
    pub pg: Option<TcpListener>,
}

impl Listeners {
    /// Binds the listeners `config` sets.
    pub async fn bind(config: &ServerConfig) -> anyhow::Result<Listeners> {
        Ok(Listeners {
            kafka: match config.kafka_listen {
                Some(addr) => Some(kafka::bind(addr).await?),
                None => None,
            },
            pg: match config.pg_listen {
                Some(addr) => Some(pg::bind(addr).await?),
                None => None,
            },
        })
    }
}

/// [`run`] with the Kafka and PostgreSQL listeners (those set) bound by
/// the caller, so it can report their addresses first.
pub async fn run_listening(
    config: ServerConfig,
    listener: TcpListener,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let log_config = config.log_config()?;
    serve_all(config, log_config, listener, listeners, shutdown).await
}

/// [`run`] with the log configured by `log_config` instead of
/// `config.log_config()` — tests use it to inject I/O faults through the
/// log's `faults` seam.
pub async fn run_with_log_config(
    config: ServerConfig,
    log_config: kappa_log::LogConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let listeners = Listeners::bind(&config).await?;
    serve_all(config, log_config, listener, listeners, shutdown).await
}

/// Opens the data directory and serves HTTP (and Kafka and PostgreSQL,
/// with their listeners) until `shutdown`.
async fn serve_all(
    config: ServerConfig,
    log_config: kappa_log::LogConfig,
    listener: TcpListener,
    listeners: Listeners,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    // Before anything is opened: one server per data directory.
    let _lock = datadir::DataDirLock::acquire(&config.data_dir)?;
    if config.tls_cert.is_some() {
        // From here on SIGHUP no longer ends the process (tokio keeps its
        // handler installed): one sent during recovery, before the HTTPS
        // server listens for reloads, is ignored rather than fatal.
        drop(tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::hangup(),
        )?);
    }
    let auth = auth::open(&config)?;
    let log = Arc::new(tokio::task::spawn_blocking(move || Log::open(log_config)).await??);
    let clusters = clusters::Clusters::new(&config.clusters);
    let nodes = {
        let config = config.clone();
        tokio::task::spawn_blocking(move || nodes::Nodes::open(&config)).await??
    };
    let manager_config = views::ManagerConfig {
        clusters: Some(Arc::new(clusters.clone())),
        assignments: nodes
            .clone()
            .map(|n| n as Arc<dyn kappa_processor::spread::Assignments>),
        checkpoints: match &config.checkpoint_url {
            Some(url) => Some((
                Arc::new(nodes::checkpoints::TaskCheckpoints::open(url)?)
                    as Arc<dyn kappa_processor::spread::Checkpoints>,
                std::time::Duration::from_millis(config.checkpoint_interval_ms),
            )),
            None => None,
        },
        ..config.manager_config()
    };
    let views = {
        let log = log.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<Arc<ViewManager>> {
            let manager = ViewManager::open(log, manager_config)?;
            manager.spawn_supervisor()?;
            Ok(manager)
        })
        .await??
    };
    let (shutdown_tx, shutting_down) = tokio::sync::watch::channel(false);
    let state = AppState {
        log,
        views,
        config: Arc::new(config),
        metrics: metrics::install(),
        auth,
        shutting_down,
        history: history::History::default(),
        clusters,
        nodes,
    };
    if let Some(nodes) = &state.nodes {
        nodes.follow(state.clone())?;
    }
    let sampler = state.history.spawn_sampler(state.clone());
    let cluster_monitor = state.clusters.spawn_monitor(state.shutting_down.clone());
    // One certificate for the HTTPS API and the Kafka listener.
    let (tls, reloads) = tls::start(&state.config)?.unzip();
    let kafka = listeners
        .kafka
        .map(|listener| tokio::spawn(kafka::serve(listener, state.clone(), tls.clone())));
    let pg = listeners
        .pg
        .map(|listener| tokio::spawn(pg::serve(listener, state.clone(), tls.clone())));
    let router = routes::router(state.clone());
    let shutdown = async move {
        shutdown.await;
        let _ = shutdown_tx.send(true);
    };
    http::serve(listener, router, &state.config, tls, shutdown).await?;
    if let Some(reloads) = reloads {
        reloads.abort();
    }
    // It stops at shutdown, after the reading in hand (if any).
    let _ = sampler.await;
    if let Some(monitor) = cluster_monitor {
        let _ = monitor.await;
    }
    if let Some(kafka) = kafka {
        let _ = kafka.await;
    }
    if let Some(pg) = pg {
        let _ = pg.await;
    }

    let views = state.views.clone();
    tokio::task::spawn_blocking(move || views.close()).await?;
    if let Some(nodes) = state.nodes.clone() {
        tokio::task::spawn_blocking(move || nodes.close()).await?;
    }
    let log = state.log.clone();
    tokio::task::spawn_blocking(move || log.close()).await?;
    tracing::info!("log closed; bye");
    Ok(())
}
