//! The PostgreSQL wire protocol listener (`--pg-listen ADDR`, off unless
//! set): `psql` and PostgreSQL drivers query views and run statements
//! over protocol 3.0, through the `pgwire` crate.
//!
//! - [`session`]: one connection's handlers — the startup (a token as the
//!   password) and the simple query protocol.
//! - [`extended`]: the extended query protocol (parse, bind, describe,
//!   execute), its parameters bound into the statement's text.
//! - [`catalog`]: `pg_catalog` and `information_schema`, as clients read
//!   them to discover views and their columns.
//! - [`binary`]: the binary format of values and parameters.
//! - [`cancel`]: cancel requests for running statements.
//! - [`answer`]: a statement's result as PostgreSQL rows or a command
//!   tag, an error as an `ErrorResponse` with its SQLSTATE, and the
//!   session statements clients send on their own (`SET`, `SHOW`,
//!   `SELECT version()`, transactions), answered without running.
//!
//! Statements run as over HTTP (`POST /v1/statements`): the same parser,
//! grants and executor, on a statement thread. A connection counts toward
//! `max_connections` like the other listeners'.

mod answer;
mod binary;
mod cancel;
mod catalog;
mod extended;
mod session;
mod split;

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
    let cancels = cancel::Cancels::new();
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
            crate::metrics::count_pg_refused("connection_limit");
            drop(stream);
            continue;
        }
        open.fetch_add(1, Ordering::AcqRel);
        crate::metrics::pg_connections(1.0);
        let handlers = Arc::new(session::Session::new(app.clone(), peer, cancels.clone()));
        let acceptor = tls.as_ref().map(|t| t.pg_acceptor());
        let open = open.clone();
        connections.spawn(async move {
            let mut stream = stream;
            if refused_protocol(&mut stream).await {
                open.fetch_sub(1, Ordering::AcqRel);
                crate::metrics::pg_connections(-1.0);
                return;
            }
            if let Err(e) = pgwire::tokio::process_socket(stream, acceptor, handlers).await {
                tracing::debug!(%peer, error = %e, "PostgreSQL connection ended");
            }
            open.fetch_sub(1, Ordering::AcqRel);
            crate::metrics::pg_connections(-1.0);
        });
        while connections.try_join_next().is_some() {}
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
    tracing::info!("PostgreSQL listener stopped");
}

/// The first message's code for an SSL request, a GSSAPI encryption
/// request and a cancel request (in place of a protocol version).
const SPECIAL_CODES: [u32; 3] = [80_877_103, 80_877_104, 80_877_102];

/// How long a new connection may take to send its first bytes before it
/// is handed on as it is (pgwire's own startup deadline then applies).
const FIRST_BYTES_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Answers a first message asking for a protocol version other than 3.x
/// with PostgreSQL's `FATAL` error (`0A000`, naming the version) and
/// closes the connection; `true` if it did. pgwire would close it without
/// a word.
async fn refused_protocol(stream: &mut tokio::net::TcpStream) -> bool {
    use pgwire::messages::response::ErrorResponse;
    use pgwire::messages::Message;
    use tokio::io::AsyncWriteExt;

    // One look at what has arrived: a client sends its first message in
    // one piece; one that sends fewer than eight bytes is left to pgwire.
    let mut first = [0u8; 8];
    let peeked = tokio::time::timeout(FIRST_BYTES_WAIT, stream.peek(&mut first)).await;
    if !matches!(peeked, Ok(Ok(n)) if n == first.len()) {
        return false;
    }
    let code = u32::from_be_bytes([first[4], first[5], first[6], first[7]]);
    if code >> 16 == 3 || SPECIAL_CODES.contains(&code) {
        return false;
    }
    let info = pgwire::error::ErrorInfo::new(
        "FATAL".into(),
        "0A000".into(),
        format!(
            "unsupported frontend protocol {}.{}: the server supports 3.0 to 3.2",
            code >> 16,
            code & 0xffff
        ),
    );
    let mut bytes = bytes::BytesMut::new();
    if ErrorResponse::from(info).encode(&mut bytes).is_ok() {
        let _ = stream.write_all(&bytes).await;
    }
    let _ = stream.shutdown().await;
    true
}
