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
//!
//! HTTPS ([`tls`]): with `tls_cert` and `tls_key` configured the port
//! serves TLS only. The handshake runs in the connection's task, inside the
//! same first-request deadline and newcomer accounting, so a client that
//! connects and never handshakes is closed like one that never sends a
//! request. Without them, connections are served exactly as plain HTTP.

mod newcomers;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
pub use newcomers::Newcomers;
pub use tls::{Plaintext, Tls};

/// Serves `router` on `listener` until `shutdown` completes: over HTTPS
/// with `tls` (see [`start_tls`]), plain HTTP without.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let connections = Arc::new(Semaphore::new(config.max_connections));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.header_read_timeout_ms))
        .keep_alive(true);
    let kit = ConnectionKit {
        router,
        newcomers: Arc::new(Newcomers::new(config.max_new_connections_per_ip)),
        builder,
        first_request: Duration::from_millis(config.first_request_timeout_ms),
        tls,
    };
    let graceful = GracefulShutdown::new();
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
                kit.newcomers.evict_oldest();
                tokio::select! {
                    permit = connections.clone().acquire_owned() => permit.expect("never closed"),
                    () = &mut shutdown => break,
                }
            }
        };
        kit.spawn(stream, peer, permit, &graceful);
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

/// Loads the certificate if `config` names one, and starts reloading it on
/// SIGHUP (the task runs until aborted).
pub fn start_tls(config: &ServerConfig) -> anyhow::Result<Option<(Arc<Tls>, JoinHandle<()>)>> {
    let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) else {
        return Ok(None);
    };
    let tls = Arc::new(Tls::load(cert, key)?);
    Tls::register_metrics();
    let reloads = tls.clone().reload_on_sighup()?;
    tracing::info!(
        cert = %cert.display(),
        key = %key.display(),
        "serving HTTPS only; SIGHUP reloads the certificate"
    );
    Ok(Some((tls, reloads)))
}

/// What the accept loop gives each connection's task.
struct ConnectionKit {
    router: Router,
    newcomers: Arc<Newcomers>,
    builder: http1::Builder,
    first_request: Duration,
    tls: Option<Arc<Tls>>,
}

impl ConnectionKit {
    /// Registers the connection as a newcomer and serves it on its own task
    /// (TLS handshake first, if configured), holding `permit` until it ends.
    fn spawn(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        permit: OwnedSemaphorePermit,
        graceful: &GracefulShutdown,
    ) {
        let _ = stream.set_nodelay(true);
        let (id, eviction) = self.newcomers.add(peer.ip());
        let proven = Arc::new(AtomicBool::new(false));
        let service = FirstRequest {
            inner: TowerToHyperService::new(self.router.clone()),
            newcomers: self.newcomers.clone(),
            id,
            proven: proven.clone(),
        };
        let guard = Slot {
            newcomers: self.newcomers.clone(),
            id,
            _permit: permit,
        };
        let first_request = self.first_request;
        let Some(tls) = &self.tls else {
            let connection =
                graceful.watch(self.builder.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                drive(connection, eviction, proven, first_request, peer).await;
                drop(guard);
            });
            return;
        };
        // The handshake is part of the connection's future, so the
        // first-request deadline and eviction cover it too. The watcher is
        // taken now: shutdown waits for handshakes in progress as well.
        let (tls, builder, watcher) = (tls.clone(), self.builder.clone(), graceful.watcher());
        let handshaken = Arc::new(AtomicBool::new(false));
        let done = handshaken.clone();
        let connection = async move {
            let Some(session) = tls.accept(stream, peer, Plaintext::AnswerHttp).await else {
                return Ok(());
            };
            done.store(true, Ordering::SeqCst);
            watcher
                .watch(builder.serve_connection(TokioIo::new(session), service))
                .await
        };
        tokio::spawn(async move {
            let ended = drive(connection, eviction, proven, first_request, peer).await;
            if ended == Ended::TimedOut && !handshaken.load(Ordering::SeqCst) {
                tls::count_handshake_timeout();
            }
            drop(guard);
        });
    }
}

/// Why [`drive`] stopped a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// The connection finished (or failed) by itself.
    Finished,
    /// It was closed to make room for another.
    Evicted,
    /// It sent no request head within the first-request deadline.
    TimedOut,
}

/// Runs a connection until it ends, or until it is closed for making room
/// or for sending no request head within `first_request`.
async fn drive<E: std::fmt::Display>(
    connection: impl Future<Output = Result<(), E>>,
    mut eviction: newcomers::Eviction,
    proven: Arc<AtomicBool>,
    first_request: Duration,
    peer: SocketAddr,
) -> Ended {
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
                return Ended::Finished;
            }
            evicted = &mut eviction, if may_evict => match evicted {
                Ok(()) => {
                    tracing::debug!(%peer, "closed a connection that sent no request, to make room");
                    return Ended::Evicted;
                }
                // Proven or ended: nobody will close it for making room.
                Err(_) => may_evict = false,
            },
            () = &mut deadline, if deadline_armed => {
                if !proven.load(Ordering::SeqCst) {
                    crate::metrics::count_connection_closed("first_request_timeout");
                    tracing::debug!(%peer, "closed a connection that sent no request in time");
                    return Ended::TimedOut;
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
