//! One Kafka connection: size-prefixed frames in, one answer per request in
//! order (as a Kafka broker does), until the client closes, shutdown, or a
//! request the listener cannot serve — which closes the connection with
//! the reason logged at warn, never silently.
//!
//! With a certificate configured (`tls_cert`, `tls_key`) the connection
//! first completes a TLS handshake within `first_request_timeout_ms` (the
//! certificate of the HTTPS API; a plaintext client is closed).
//!
//! Limits: a frame over `kafka_max_request_bytes` (before a login: over
//! [`UNAUTHENTICATED_REQUEST_BYTES`]) closes the connection before its body
//! is read; a whole body must arrive within `request_body_timeout_ms`; a
//! frame is decoded by `kappa-kafka-codec`, which never sizes an
//! allocation by a count the frame cannot hold, and a frame that does not
//! decode closes the connection. With `auth = "tokens"` every request but
//! `ApiVersions`, `SaslHandshake` and `SaslAuthenticate` needs a SASL login
//! first; a failed login closes the connection after its answer, and a
//! connection whose token has been revoked is closed at its next request.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::Encodable;
use kappa_kafka_codec::{DecodeError, HEADER_PREFIX_LEN};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;

use super::{admin, fetch, groups, metadata, produce, sasl, versions, Broker};
use crate::auth::Principal;
use crate::config::AuthMode;
use crate::tls::Plaintext;

/// The largest frame a connection may send before it has logged in (under
/// `auth = "tokens"`): what a SASL exchange needs, as Kafka's
/// `sasl.server.max.receive.size` (512 KiB).
pub const UNAUTHENTICATED_REQUEST_BYTES: usize = 512 << 10;

/// What a connection knows about its client.
pub struct Session {
    /// Who is logged in (`None` until SASL succeeds under `auth = "tokens"`).
    pub principal: Option<Principal>,
    /// A PLAIN handshake was accepted; `SaslAuthenticate` may follow.
    pub sasl_started: bool,
    /// A login failed: the connection closes after its answer.
    pub login_failed: bool,
    /// The client's address.
    pub peer: SocketAddr,
    /// The address the client reached (advertised back in `Metadata`).
    pub local: SocketAddr,
    /// The client id of the last request.
    pub client_id: String,
}

impl Session {
    /// The logged-in principal, if any.
    pub fn principal(&self) -> Option<&Principal> {
        self.principal.as_ref()
    }

    /// Whether the logged-in principal may do what `need` names: the
    /// node's one authorization decision ([`crate::auth::authorize`]);
    /// nobody logged in may do nothing.
    pub fn allows(&self, need: &crate::auth::Need) -> bool {
        crate::auth::authorize(self.principal(), need).is_ok()
    }

    /// The host clients should connect to: the address this connection
    /// reached.
    pub fn advertised_host(&self) -> String {
        self.local.ip().to_string()
    }
}

/// Why a connection is closed: a metric label and the message logged.
type Close = (&'static str, String);

/// Serves one connection until it ends: over TLS when the broker has a
/// certificate, else plaintext.
pub async fn serve_connection(broker: &Broker, stream: TcpStream, peer: SocketAddr) {
    let local = stream.local_addr().unwrap_or(peer);
    let _ = stream.set_nodelay(true);
    let Some(tls) = &broker.tls else {
        return serve_stream(broker, stream, peer, local).await;
    };
    let deadline = Duration::from_millis(broker.app.config.first_request_timeout_ms);
    let accepted = tokio::select! {
        accepted = tokio::time::timeout(deadline, tls.accept(stream, peer, Plaintext::Close)) => accepted,
        _ = broker.app.shutdown_started() => return,
    };
    match accepted {
        Ok(Some(session)) => serve_stream(broker, session, peer, local).await,
        Ok(None) => {}
        Err(_) => {
            crate::tls::count_handshake_timeout();
            tracing::debug!(%peer, "Kafka connection closed: no TLS handshake within first_request_timeout_ms");
        }
    }
}

/// Serves the requests of one (plaintext or TLS) connection until it ends.
async fn serve_stream<S>(broker: &Broker, stream: S, peer: SocketAddr, local: SocketAddr)
where
    S: AsyncRead + AsyncWrite + Send,
{
    let (reader, writer) = tokio::io::split(stream);
    let mut reader = BufReader::with_capacity(64 << 10, reader);
    let mut writer = BufWriter::with_capacity(64 << 10, writer);
    let mut session = Session {
        principal: match broker.app.auth.mode {
            AuthMode::None => Some(Principal::anonymous()),
            AuthMode::Tokens => None,
        },
        sasl_started: false,
        login_failed: false,
        peer,
        local,
        client_id: String::new(),
    };
    let body_timeout = Duration::from_millis(broker.app.config.request_body_timeout_ms);
    loop {
        let mut size = [0u8; 4];
        let read = tokio::select! {
            read = reader.read_exact(&mut size) => read,
            _ = broker.app.shutdown_started() => return,
        };
        if read.is_err() {
            // The client closed (or the connection broke) between requests.
            return;
        }
        let size = i32::from_be_bytes(size);
        // Before a login a frame may be at most UNAUTHENTICATED_REQUEST_BYTES
        // (a SASL exchange is small), whatever kafka_max_request_bytes says.
        let max = match session.principal {
            Some(_) => broker.app.config.kafka_max_request_bytes,
            None => UNAUTHENTICATED_REQUEST_BYTES.min(broker.app.config.kafka_max_request_bytes),
        };
        if size < HEADER_PREFIX_LEN as i32 || size as usize > max {
            crate::metrics::count_kafka_closed("request_size");
            tracing::warn!(%peer, size, max, logged_in = session.principal.is_some(), "closing Kafka connection: request size out of range (kafka_max_request_bytes; before a login 512 KiB)");
            return;
        }
        let mut body = vec![0u8; size as usize];
        match tokio::time::timeout(body_timeout, reader.read_exact(&mut body)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::debug!(%peer, error = %e, "Kafka connection ended mid-request");
                return;
            }
            Err(_) => {
                crate::metrics::count_kafka_closed("body_timeout");
                tracing::warn!(%peer, "closing Kafka connection: request body not received within request_body_timeout_ms");
                return;
            }
        }
        match handle(broker, &mut session, Bytes::from(body)).await {
            Ok(Some(frame)) if session.login_failed => {
                close_after_failed_login(broker, &session, &mut writer, frame).await;
                return;
            }
            Ok(Some(frame)) => {
                if writer.write_all(&frame).await.is_err() || writer.flush().await.is_err() {
                    return;
                }
            }
            Ok(None) => {}
            Err((label, reason)) => {
                crate::metrics::count_kafka_closed(label);
                tracing::warn!(%peer, client_id = %session.client_id, %reason, "closing Kafka connection");
                let _ = writer.flush().await;
                return;
            }
        }
    }
}

/// Answers a failed SASL login after [`sasl::FAILED_LOGIN_DELAY`], then
/// closes the connection; logs the failure with the address's count.
async fn close_after_failed_login<W: AsyncWrite + Unpin>(
    broker: &Broker,
    session: &Session,
    writer: &mut W,
    answer: BytesMut,
) {
    let failures = broker.failed_logins.count(session.peer.ip());
    crate::metrics::count_kafka_closed("login_failed");
    tracing::warn!(
        peer = %session.peer,
        client_id = %session.client_id,
        failures_from_address = failures,
        "Kafka SASL login failed; closing the connection"
    );
    tokio::select! {
        _ = tokio::time::sleep(sasl::FAILED_LOGIN_DELAY) => {}
        _ = broker.app.shutdown_started() => return,
    }
    if writer.write_all(&answer).await.is_ok() {
        let _ = writer.flush().await;
    }
}

/// Decodes, checks and serves one request; the answer frame, none (a
/// produce with `acks = 0`), or why the connection must close.
async fn handle(
    broker: &Broker,
    session: &mut Session,
    body: Bytes,
) -> Result<Option<BytesMut>, Close> {
    let request = match kappa_kafka_codec::decode_request(body) {
        Ok(request) => request,
        Err(DecodeError::UnsupportedVersion {
            api: ApiKey::ApiVersions,
            correlation_id,
            ..
        }) => {
            // Kafka answers at v0 with the list, so the client can pick.
            let answer = ResponseKind::ApiVersions(versions::api_versions(false));
            return frame(correlation_id, ApiKey::ApiVersions, 0, answer).map(Some);
        }
        Err(e) => return Err((e.label(), e.to_string())),
    };
    let (api, version) = (request.api, request.version);
    if let Some(id) = &request.header.client_id {
        if session.client_id.as_str() != id.as_str() {
            session.client_id = id.to_string();
        }
    }
    let open = matches!(
        api,
        ApiKey::ApiVersions | ApiKey::SaslHandshake | ApiKey::SaslAuthenticate
    );
    if !open {
        check_login(broker, session, api)?;
    }
    crate::metrics::count_kafka_request(format!("{api:?}"));
    let answer = serve(broker, session, request.body, version).await?;
    match answer {
        Some(answer) => frame(request.correlation_id, api, version, answer).map(Some),
        None => Ok(None),
    }
}

/// A request other than `ApiVersions` and the SASL login needs a login
/// (under `auth = "tokens"`) whose token is still current: a revoked
/// token's connection is closed at its next request.
fn check_login(broker: &Broker, session: &Session, api: ApiKey) -> Result<(), Close> {
    let Some(principal) = &session.principal else {
        crate::auth::audit::denied("unauthorized", None, "kafka request");
        return Err((
            "unauthenticated",
            format!(
                "{api:?} before a SASL login (auth = \"tokens\": log in with SASL/PLAIN, a token as the password)"
            ),
        ));
    };
    if !broker.app.auth.store.is_current(principal) {
        crate::auth::audit::denied("revoked", Some(&principal.name), "kafka request");
        return Err((
            "revoked",
            format!(
                "token {:?} was revoked after this connection logged in",
                principal.name
            ),
        ));
    }
    Ok(())
}

/// Runs one decoded request.
async fn serve(
    broker: &Broker,
    session: &mut Session,
    request: RequestKind,
    version: i16,
) -> Result<Option<ResponseKind>, Close> {
    use RequestKind as Rq;
    use ResponseKind as Rs;
    Ok(Some(match request {
        Rq::ApiVersions(_) => Rs::ApiVersions(versions::api_versions(true)),
        Rq::Metadata(r) => Rs::Metadata(metadata::metadata(broker, session, r, version).await),
        Rq::Produce(r) => match produce::produce(broker, session, r, version).await {
            Some(answer) => Rs::Produce(answer),
            None => return Ok(None),
        },
        Rq::InitProducerId(r) => Rs::InitProducerId(produce::init_producer_id(broker, r)),
        Rq::Fetch(r) => Rs::Fetch(fetch::fetch(broker, session, r, version).await),
        Rq::ListOffsets(r) => Rs::ListOffsets(fetch::list_offsets(broker, session, r)),
        Rq::CreateTopics(r) => {
            Rs::CreateTopics(admin::create_topics(broker, session, r, version).await)
        }
        Rq::DeleteTopics(r) => {
            Rs::DeleteTopics(admin::delete_topics(broker, session, r, version).await)
        }
        Rq::DescribeConfigs(r) => Rs::DescribeConfigs(admin::describe_configs(broker, session, r)),
        Rq::IncrementalAlterConfigs(r) => {
            Rs::IncrementalAlterConfigs(admin::incremental_alter_configs(broker, session, r).await)
        }
        Rq::AlterConfigs(r) => Rs::AlterConfigs(admin::alter_configs(broker, session, r).await),
        Rq::SaslHandshake(r) => Rs::SaslHandshake(sasl::handshake(session, r)),
        Rq::SaslAuthenticate(r) => Rs::SaslAuthenticate(sasl::authenticate(broker, session, r)),
        Rq::FindCoordinator(r) => {
            Rs::FindCoordinator(groups::find_coordinator(session, r, version))
        }
        Rq::JoinGroup(r) => Rs::JoinGroup(groups::join(broker, session, r, version).await),
        Rq::SyncGroup(r) => Rs::SyncGroup(groups::sync(broker, session, r, version).await),
        Rq::Heartbeat(r) => Rs::Heartbeat(groups::heartbeat(broker, session, r)),
        Rq::LeaveGroup(r) => Rs::LeaveGroup(groups::leave(broker, session, r)),
        Rq::ListGroups(r) => Rs::ListGroups(groups::list(broker, session, r, version)),
        Rq::DescribeGroups(r) => Rs::DescribeGroups(groups::describe(broker, session, r)),
        Rq::OffsetCommit(r) => Rs::OffsetCommit(groups::offset_commit(broker, session, r).await),
        Rq::OffsetFetch(r) => Rs::OffsetFetch(groups::offset_fetch(broker, session, r, version)),
        other => {
            return Err((
                "unsupported",
                format!(
                    "{:?} is not served (ApiVersions lists what is)",
                    std::mem::discriminant(&other)
                ),
            ))
        }
    }))
}

/// A size-prefixed answer frame.
fn frame(
    correlation: i32,
    api: ApiKey,
    version: i16,
    answer: ResponseKind,
) -> Result<BytesMut, Close> {
    let mut out = BytesMut::with_capacity(256);
    out.put_i32(0);
    let mut header = ResponseHeader::default();
    header.correlation_id = correlation;
    header
        .encode(&mut out, api.response_header_version(version))
        .map_err(|e| {
            (
                "encode",
                format!("cannot encode the {api:?} answer header: {e}"),
            )
        })?;
    answer.encode(&mut out, version).map_err(|e| {
        (
            "encode",
            format!("cannot encode the {api:?} v{version} answer: {e}"),
        )
    })?;
    let len = (out.len() - 4) as i32;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(out)
}
