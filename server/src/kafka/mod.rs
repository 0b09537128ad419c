//! The Kafka-protocol listener (`kafka_listen`): Kafka clients — librdkafka
//! and everything built on it (kcat, confluent-kafka), kafka-python,
//! KafkaJS — produce to and consume from Kappa's log, and their
//! consumer groups commit to the same offsets store the HTTP API reads.
//!
//! Requests and produced record batches are decoded, bounded, by
//! `kappa-kafka-codec` (no claimed count or length sizes an allocation
//! beyond its frame; compressed batches expand to at most
//! `max_batch_bytes`); answers are encoded by `kafka-protocol`. This module
//! maps them onto the log. One node (id 0) leads every partition.
//!
//! Module map: `conn` (one connection: TLS handshake when a certificate
//! is configured, framing, limits, dispatch, SASL state) · `versions` (the APIs and versions served) · `metadata` ·
//! `produce` (Produce, InitProducerId, Kafka records in; `sequences` checks
//! idempotent producers' sequence numbers) · `fetch` (Fetch,
//! ListOffsets, Kafka record batches out) · `admin` (CreateTopics,
//! DeleteTopics, DescribeConfigs) · `groups` (FindCoordinator, the group
//! membership APIs over [`group::Coordinator`], OffsetCommit/OffsetFetch) ·
//! `sasl` (SASL/PLAIN: the password is a Kappa token) · `errors` (Kafka
//! error codes).
//!
//! What is stored: a Kafka record becomes a Kappa record with the same key,
//! value, headers and timestamp (create time), byte for byte; a null value
//! is stored as an empty one and a null header value as an empty one
//! (Kappa has no nulls there). docs/kafka.md says what is supported.

mod admin;
mod conn;
mod errors;
mod fetch;
pub mod group;
mod groups;
mod metadata;
mod produce;
mod sasl;
mod sequences;
mod versions;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::tls::Tls;
use crate::AppState;

/// What every Kafka connection shares.
pub struct Broker {
    /// The server's state: log, views, config, auth.
    pub app: AppState,
    /// Consumer groups of the classic protocol.
    pub groups: Arc<group::Coordinator>,
    /// Producer ids handed out by `InitProducerId`.
    pub producer_ids: produce::ProducerIds,
    /// The sequence each idempotent producer continues on each partition.
    pub sequences: sequences::ProducerSequences,
    /// The certificate of a TLS-only listener (that of the HTTPS API).
    pub tls: Option<Arc<Tls>>,
    /// Failed SASL logins per client address.
    pub failed_logins: sasl::FailedLogins,
    /// Connections open now (bounded by `max_connections`).
    open: AtomicUsize,
}

/// A protocol string from text.
fn text(s: impl Into<String>) -> kafka_protocol::protocol::StrBytes {
    kafka_protocol::protocol::StrBytes::from_string(s.into())
}

/// Binds the Kafka listener at `addr` (before the server reports ready, so a
/// taken port stops the start).
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for Kafka clients on {addr}: {e}"))
}

/// Serves Kafka clients on `listener` until shutdown starts; then stops
/// accepting and ends each connection after its request in hand. With
/// `tls`, only TLS clients are served (SSL / SASL_SSL).
pub async fn serve(listener: TcpListener, app: AppState, tls: Option<Arc<Tls>>) {
    let groups = Arc::new(group::Coordinator::new(
        group::GroupConfig::default(),
        group::Clock::System,
    ));
    let broker = Arc::new(Broker {
        app,
        groups: groups.clone(),
        producer_ids: produce::ProducerIds::new(),
        sequences: sequences::ProducerSequences::new(sequences::MAX_PRODUCERS),
        tls,
        failed_logins: sasl::FailedLogins::default(),
        open: AtomicUsize::new(0),
    });
    if let Ok(addr) = listener.local_addr() {
        let tls = broker.tls.is_some();
        tracing::info!(%addr, tls, "serving Kafka clients");
    }
    let ticker = tokio::spawn({
        let groups = groups.clone();
        let app = broker.app.clone();
        async move {
            let mut every = tokio::time::interval(std::time::Duration::from_millis(100));
            loop {
                tokio::select! {
                    _ = every.tick() => groups.tick(),
                    _ = app.shutdown_started() => break,
                }
            }
        }
    });
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = broker.app.shutdown_started() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "Kafka accept failed");
                continue;
            }
        };
        let max = broker.app.config.max_connections;
        if broker.open.load(Ordering::Acquire) >= max {
            crate::metrics::count_kafka_closed("connection_limit");
            tracing::warn!(%peer, max, "Kafka connection refused: max_connections reached");
            drop(stream);
            continue;
        }
        broker.open.fetch_add(1, Ordering::AcqRel);
        crate::metrics::kafka_connections(1.0);
        let broker = broker.clone();
        connections.spawn(async move {
            conn::serve_connection(&broker, stream, peer).await;
            broker.open.fetch_sub(1, Ordering::AcqRel);
            crate::metrics::kafka_connections(-1.0);
        });
        // Reap finished connection tasks as we go.
        while connections.try_join_next().is_some() {}
    }
    groups.close();
    while connections.join_next().await.is_some() {}
    let _ = ticker.await;
    tracing::info!("Kafka listener stopped");
}
