//! The accept loop. `axum::serve` installs no hyper timer, so its header
//! timeout never fires; this loop builds each HTTP/1.1 connection itself
//! with a header-read deadline, caps open connections, and on shutdown
//! stops accepting and lets in-flight requests finish within a grace period.
//!
//! Slow clients (slowloris): a new connection must send its first request
//! head within `first_request_timeout_ms` (shorter than the
//! `header_read_timeout_ms` later requests get). Until it does it is a
//! *newcomer* ([`newcomers`]): one address keeps at most
//! `max_new_connections_per_ip` of them (a further one closes its oldest),
//! and at `max_connections` the oldest newcomer of any address is closed to
//! make room. Connections that sent a request are never closed for this.

mod newcomers;

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::ServerConfig;
pub use newcomers::Newcomers;

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let connections = Arc::new(Semaphore::new(config.max_connections));
    let newcomers = Arc::new(Newcomers::new(config.max_new_connections_per_ip));
    let first_request = Duration::from_millis(config.first_request_timeout_ms);
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.header_read_timeout_ms))
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // At the limit, close the oldest connection that never sent a
        // request; if every connection is busy, this client waits (and
        // further ones wait in the kernel's backlog) until a slot frees.
        let permit = match connections.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                newcomers.evict_oldest();
                tokio::select! {
                    permit = connections.clone().acquire_owned() => permit.expect("never closed"),
                    () = &mut shutdown => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let (id, eviction) = newcomers.add(peer.ip());
        let proven = Arc::new(AtomicBool::new(false));
        let service = FirstRequest {
            inner: TowerToHyperService::new(router.clone()),
            newcomers: newcomers.clone(),
            id,
            proven: proven.clone(),
        };
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        let newcomers = newcomers.clone();
        tokio::spawn(async move {
            let guard = Slot {
                newcomers,
                id,
                _permit: permit,
            };
            drive(connection, eviction, proven, first_request, peer).await;
            drop(guard);
        });
    }
    tracing::info!("shutting down: no new connections; finishing in-flight requests");
    drop(listener);
    let grace = Duration::from_millis(config.shutdown_grace_ms);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("in-flight requests did not finish within {grace:?}; closing them");
    }
    Ok(())
}

/// Runs a connection until it ends, or until it is closed for making room
/// or for sending no request head within `first_request`.
async fn drive<E: std::fmt::Display>(
    connection: impl Future<Output = Result<(), E>>,
    mut eviction: newcomers::Eviction,
    proven: Arc<AtomicBool>,
    first_request: Duration,
    peer: std::net::SocketAddr,
) {
    tokio::pin!(connection);
    let deadline = tokio::time::sleep(first_request);
    tokio::pin!(deadline);
    let (mut may_evict, mut deadline_armed) = (true, true);
    loop {
        tokio::select! {
            ended = &mut connection => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return;
            }
            evicted = &mut eviction, if may_evict => match evicted {
                Ok(()) => {
                    tracing::debug!(%peer, "closed a connection that sent no request, to make room");
                    return;
                }
                // Proven or ended: nobody will close it for making room.
                Err(_) => may_evict = false,
            },
            () = &mut deadline, if deadline_armed => {
                if !proven.load(Ordering::SeqCst) {
                    crate::metrics::count_connection_closed("first_request_timeout");
                    tracing::debug!(%peer, "closed a connection that sent no request in time");
                    return;
                }
                deadline_armed = false;
            }
        }
    }
}

/// A connection's slot: its permit, and its newcomer entry (removed when the
/// connection ends, whatever the reason).
struct Slot {
    newcomers: Arc<Newcomers>,
    id: u64,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.newcomers.remove(self.id);
    }
}

/// The router as a hyper service that marks its connection proven when the
/// first request head arrives.
#[derive(Clone)]
struct FirstRequest {
    inner: TowerToHyperService<Router>,
    newcomers: Arc<Newcomers>,
    id: u64,
    proven: Arc<AtomicBool>,
}

impl Service<hyper::Request<Incoming>> for FirstRequest {
    type Response = <TowerToHyperService<Router> as Service<hyper::Request<Incoming>>>::Response;
    type Error = <TowerToHyperService<Router> as Service<hyper::Request<Incoming>>>::Error;
    type Future = <TowerToHyperService<Router> as Service<hyper::Request<Incoming>>>::Future;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        if !self.proven.swap(true, Ordering::SeqCst) {
            self.newcomers.remove(self.id);
        }
        self.inner.call(request)
    }
}
