//! The PostgreSQL wire protocol listener (`--pg-listen ADDR`, off unless
//! set): `psql` and PostgreSQL drivers query views and run statements
//! over protocol 3.0, through the `pgwire` crate.
//!
//! - [`session`]: one connection's handlers — the startup (a token as the
//!   password) and the simple query protocol.
//! - [`extended`]: the extended query protocol (parse, bind, describe,
//!   execute), its parameters bound into the statement's text.
//! - [`answer`]: a statement's result as PostgreSQL rows or a command
//!   tag, an error as an `ErrorResponse` with its SQLSTATE, and the
//!   session statements clients send on their own (`SET`, `SHOW`,
//!   `SELECT version()`, transactions), answered without running.
//!
//! Statements run as over HTTP (`POST /v1/statements`): the same parser,
//! grants and executor, on a statement thread. A connection counts toward
//! `max_connections` like the other listeners'.

mod answer;
mod extended;
mod session;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::tls::Tls;
use crate::AppState;

/// Binds the PostgreSQL listener.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for PostgreSQL clients on {addr}: {e}"))
}

/// Serves PostgreSQL clients on `listener` until shutdown starts. With
/// `tls`, a client may ask for TLS (`SSLRequest`); a token is only taken
/// as a password over TLS, or over loopback.
pub async fn serve(listener: TcpListener, app: AppState, tls: Option<Arc<Tls>>) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, tls = tls.is_some(), "serving PostgreSQL clients");
    }
    let open = Arc::new(AtomicUsize::new(0));
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = app.shutdown_started() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "PostgreSQL accept failed");
                continue;
            }
        };
        let max = app.config.max_connections;
        if open.load(Ordering::Acquire) >= max {
            tracing::warn!(%peer, max, "PostgreSQL connection refused: max_connections reached");
            drop(stream);
            continue;
        }
        open.fetch_add(1, Ordering::AcqRel);
        let handlers = Arc::new(session::Session::new(app.clone(), peer));
        let acceptor = tls.as_ref().map(|t| t.pg_acceptor());
        let open = open.clone();
        connections.spawn(async move {
            if let Err(e) = pgwire::tokio::process_socket(stream, acceptor, handlers).await {
                tracing::debug!(%peer, error = %e, "PostgreSQL connection ended");
            }
            open.fetch_sub(1, Ordering::AcqRel);
        });
        while connections.try_join_next().is_some() {}
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    tracing::info!("PostgreSQL listener stopped");
}
