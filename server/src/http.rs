//! The accept loop. `axum::serve` installs no hyper timer, so its header
//! timeout never fires; this loop builds each HTTP/1.1 connection itself
//! with a header-read deadline, caps open connections, and on shutdown
//! stops accepting and lets in-flight requests finish within a grace period.
//!
//! Slow and unauthenticated clients ([`standing`]): a new connection must
//! send its first request head within `first_request_timeout_ms` (shorter
//! than the `header_read_timeout_ms` later requests get); one address keeps
//! at most `max_new_connections_per_ip` connections that have not sent a
//! head; a body must arrive whole within `request_body_timeout_ms` and at
//! `request_body_min_bytes_per_s` ([`body_deadline`]). At
//! `max_connections` the oldest *evictable* connection — no head yet, a
//! body still arriving, or no authenticated request made — is closed to
//! make room.
//!
//! Probes stay answerable: beyond `max_connections`,
//! [`RESERVED_CONNECTIONS`] more connections are accepted. A reserved
//! connection's `/health`, `/ready` and `/metrics` requests are answered
//! at once; any other request is authenticated (a refusal answered at
//! once), then waits for a regular slot (as a client in the listen backlog
//! did before), so long-polls or slow clients holding every regular slot
//! never make the health check wait.
//!
//! HTTPS ([`crate::tls`]): with `tls_cert` and `tls_key` configured the port
//! serves TLS only. The handshake runs in the connection's task, inside the
//! same first-request deadline and eviction, so a client that connects and
//! never handshakes is closed like one that never sends a request. Without
//! them, connections are served exactly as plain HTTP.

mod body_deadline;
mod standing;

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::Service;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

pub use body_deadline::{BodyLimits, BodyTooSlow};
pub use standing::{Standing, Standings};

use crate::config::ServerConfig;
use crate::tls::{self, Plaintext, Tls};

/// Connections accepted beyond `max_connections` so that `/health`,
/// `/ready` and `/metrics` are answered while every regular slot is held.
pub const RESERVED_CONNECTIONS: usize = 32;

/// The routes a reserved connection serves without a regular slot.
const PROBES: [&str; 3] = ["/health", "/ready", "/metrics"];

/// Serves `router` on `listener` until `shutdown` completes: over HTTPS
/// with `tls` (see [`tls::start`]), plain HTTP without.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    tls: Option<Arc<Tls>>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let regular = Arc::new(Semaphore::new(config.max_connections));
    let reserved = Arc::new(Semaphore::new(RESERVED_CONNECTIONS));
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.header_read_timeout_ms))
        .keep_alive(true);
    let kit = ConnectionKit {
        router,
        standings: Arc::new(Standings::new(config.max_new_connections_per_ip)),
        builder,
        first_request: Duration::from_millis(config.first_request_timeout_ms),
        body_limits: BodyLimits {
            total: Duration::from_millis(config.request_body_timeout_ms),
            min_bytes_per_s: config.request_body_min_bytes_per_s,
        },
        regular: regular.clone(),
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
        // At the limit, close the oldest evictable connection on a regular
        // slot (its slot goes to the first one waiting for it) and serve
        // this one on a reserved slot; with none free either, close the
        // oldest evictable one there, and this client waits (and further
        // ones wait in the kernel's backlog).
        let slot = match regular.clone().try_acquire_owned() {
            Ok(permit) => Slot::regular(permit),
            Err(_) => {
                kit.standings.evict_oldest(true);
                match reserved.clone().try_acquire_owned() {
                    Ok(permit) => Slot::reserved(permit),
                    Err(_) => {
                        kit.standings.evict_oldest(false);
                        tokio::select! {
                            permit = regular.clone().acquire_owned() => Slot::regular(permit.expect("never closed")),
                            permit = reserved.clone().acquire_owned() => Slot::reserved(permit.expect("never closed")),
                            () = &mut shutdown => break,
                        }
                    }
                }
            }
        };
        kit.spawn(stream, peer, slot, &graceful);
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

/// Inside authentication (so a refused request is answered without
/// waiting), before a route is served: on a reserved slot, a request other
/// than a probe waits for a regular slot first.
pub fn take_regular_slot(request: &Request) -> impl Future<Output = ()> + Send + 'static {
    let wanted = !PROBES.contains(&request.uri().path());
    let slot = wanted
        .then(|| request.extensions().get::<Arc<SlotCell>>().cloned())
        .flatten();
    let conn = wanted
        .then(|| request.extensions().get::<ConnectionHandle>().cloned())
        .flatten();
    async move {
        if let Some(slot) = slot {
            slot.make_regular().await;
        }
        if let Some(conn) = conn {
            conn.standings.now_regular(&conn.standing);
        }
    }
}

/// Inside authentication, before a route is served: a request that
/// carries an authenticated principal makes its connection one that is not
/// closed to make room (while no body of it is arriving).
pub fn mark_authenticated(request: &Request) {
    if request
        .extensions()
        .get::<crate::auth::Principal>()
        .is_some()
    {
        if let Some(conn) = request.extensions().get::<ConnectionHandle>() {
            conn.standings.authenticated(&conn.standing);
        }
    }
}

/// The connection a request came on, in the request's extensions.
#[derive(Clone)]
pub struct ConnectionHandle {
    standings: Arc<Standings>,
    standing: Arc<Standing>,
}

/// A connection's permit: a regular slot, or a reserved one (probes at
/// once, other requests after taking a regular slot).
struct Slot {
    regular: bool,
    _permit: OwnedSemaphorePermit,
}

impl Slot {
    fn regular(permit: OwnedSemaphorePermit) -> Slot {
        Slot {
            regular: true,
            _permit: permit,
        }
    }

    fn reserved(permit: OwnedSemaphorePermit) -> Slot {
        Slot {
            regular: false,
            _permit: permit,
        }
    }
}

/// What the accept loop gives each connection's task.
struct ConnectionKit {
    router: Router,
    standings: Arc<Standings>,
    builder: http1::Builder,
    first_request: Duration,
    body_limits: BodyLimits,
    regular: Arc<Semaphore>,
    tls: Option<Arc<Tls>>,
}

impl ConnectionKit {
    /// Registers the connection and serves it on its own task (TLS
    /// handshake first, if configured), holding `slot` until it ends.
    fn spawn(&self, stream: TcpStream, peer: SocketAddr, slot: Slot, graceful: &GracefulShutdown) {
        let _ = stream.set_nodelay(true);
        let standing = self.standings.open(peer.ip(), slot.regular);
        let service = Requests {
            router: self.router.clone(),
            conn: ConnectionHandle {
                standings: self.standings.clone(),
                standing: standing.clone(),
            },
            body_limits: self.body_limits,
            slot: Arc::new(SlotCell {
                slot: Mutex::new(slot),
                regular: self.regular.clone(),
            }),
        };
        let guard = Registered {
            standings: self.standings.clone(),
            standing: standing.clone(),
        };
        let first_request = self.first_request;
        let Some(tls) = &self.tls else {
            let connection =
                graceful.watch(self.builder.serve_connection(TokioIo::new(stream), service));
            tokio::spawn(async move {
                drive(connection, &standing, first_request, peer).await;
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
            let ended = drive(connection, &standing, first_request, peer).await;
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
    standing: &Standing,
    first_request: Duration,
    peer: SocketAddr,
) -> Ended {
    tokio::pin!(connection);
    let deadline = tokio::time::sleep(first_request);
    tokio::pin!(deadline);
    let mut deadline_armed = true;
    loop {
        tokio::select! {
            ended = &mut connection => {
                if let Err(e) = ended {
                    tracing::debug!(%peer, error = %e, "connection ended with an error");
                }
                return Ended::Finished;
            }
            () = standing.evicted() => {
                tracing::debug!(%peer, "closed a connection that may be closed for room, to make room");
                return Ended::Evicted;
            }
            () = &mut deadline, if deadline_armed => {
                if !standing.head_seen() {
                    crate::metrics::count_connection_closed("first_request_timeout");
                    tracing::debug!(%peer, "closed a connection that sent no request in time");
                    return Ended::TimedOut;
                }
                deadline_armed = false;
            }
        }
    }
}

/// A connection's registration, removed when the connection ends,
/// whatever the reason; its slot goes with the service.
struct Registered {
    standings: Arc<Standings>,
    standing: Arc<Standing>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.standings.close(&self.standing);
    }
}

/// A connection's slot; a reserved one is swapped for a regular one
/// before a request other than a probe is served ([`take_regular_slot`]).
pub struct SlotCell {
    slot: Mutex<Slot>,
    regular: Arc<Semaphore>,
}

impl SlotCell {
    /// Waits, if the connection holds a reserved slot, for a regular one.
    async fn make_regular(&self) {
        if self.slot.lock().expect("slot").regular {
            return;
        }
        let permit = self
            .regular
            .clone()
            .acquire_owned()
            .await
            .expect("never closed");
        // The reserved permit is dropped here: another probe may use it.
        *self.slot.lock().expect("slot") = Slot::regular(permit);
    }
}

/// The router as a hyper service: marks the connection's request head,
/// puts each body under its deadline, counts the request under way until
/// its answer is sent, and hands the routes the connection and its slot.
#[derive(Clone)]
struct Requests {
    router: Router,
    conn: ConnectionHandle,
    body_limits: BodyLimits,
    slot: Arc<SlotCell>,
}

impl Service<hyper::Request<Incoming>> for Requests {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Self::Error>> + Send>>;

    fn call(&self, request: hyper::Request<Incoming>) -> Self::Future {
        let conn = self.conn.clone();
        conn.standings.head_arrived(&conn.standing);
        let limits = self.body_limits;
        // A request without a body (most GETs) needs no deadline or timer.
        let mut request = request.map(|incoming| {
            if http_body::Body::is_end_stream(&incoming) {
                return Body::new(incoming);
            }
            Body::new(body_deadline::TimedBody::new(
                incoming,
                limits,
                conn.standings.clone(),
                conn.standing.clone(),
            ))
        });
        request.extensions_mut().insert(conn);
        request.extensions_mut().insert(self.slot.clone());
        let router = self.router.clone();
        let guard = Answering::new(&self.conn);
        Box::pin(async move {
            let response = router.oneshot(request).await?;
            // The request is under way until its answer's body is sent
            // whole (or dropped): a change feed is not an idle connection.
            Ok(response.map(|body| {
                Body::new(AnswerBody {
                    inner: body,
                    _guard: guard,
                })
            }))
        })
    }
}

/// Counts a request as under way on its connection until dropped.
struct Answering {
    conn: ConnectionHandle,
}

impl Answering {
    fn new(conn: &ConnectionHandle) -> Answering {
        conn.standings.request(&conn.standing, true);
        Answering { conn: conn.clone() }
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.conn.standings.request(&self.conn.standing, false);
    }
}

pin_project_lite::pin_project! {
    /// An answer's body, holding its request's [`Answering`] until the body
    /// is dropped.
    struct AnswerBody {
        #[pin]
        inner: Body,
        _guard: Answering,
    }
}

impl http_body::Body for AnswerBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
