//! The Kafka wire protocol as the `kafka-*` scenarios speak it: a frame is
//! a 4-byte big-endian length, then a request (or response) header, then
//! the body, all encoded with the `kafka-protocol` crate. No ApiVersions
//! exchange: the scenarios send the versions server/src/kafka/versions.rs
//! serves, and the server needs no handshake.

use anyhow::{ensure, Context};
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncReadExt;

/// Largest answer frame read (Fetch answers hold up to `max_bytes` of records).
pub const MAX_ANSWER_BYTES: usize = 64 << 20;

/// The client id the scenarios send.
const CLIENT_ID: &str = "kappa-bench";

/// The length prefix and request header of an `api` request at `version`
/// whose body is `body_len` bytes; the body follows it on the wire.
pub fn frame_head(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body_len: usize,
) -> anyhow::Result<BytesMut> {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str(CLIENT_ID)));
    let mut head = BytesMut::with_capacity(32);
    head.put_i32(0);
    header.encode(&mut head, api.request_header_version(version))?;
    let len = i32::try_from(head.len() - 4 + body_len).context("request too large")?;
    head[..4].copy_from_slice(&len.to_be_bytes());
    Ok(head)
}

/// A whole request frame: head and the encoded `body`.
pub fn frame<M: Encodable>(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &M,
) -> anyhow::Result<BytesMut> {
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded, version)
        .with_context(|| format!("encoding a {api:?} v{version} request"))?;
    let mut out = frame_head(api, version, correlation_id, encoded.len())?;
    out.extend_from_slice(&encoded);
    Ok(out)
}

/// Reads one answer frame to an `api` request at `version` and decodes it,
/// checking that it answers `correlation_id` (answers come in order).
pub async fn read_answer<M: Decodable, R: AsyncReadExt + Unpin>(
    reader: &mut R,
    api: ApiKey,
    version: i16,
    correlation_id: i32,
) -> anyhow::Result<M> {
    let size = reader.read_i32().await.context("reading an answer")?;
    ensure!(
        (4..=MAX_ANSWER_BYTES as i32).contains(&size),
        "{api:?} answer size {size} out of range"
    );
    let mut frame = vec![0u8; size as usize];
    reader.read_exact(&mut frame).await?;
    let mut frame = Bytes::from(frame);
    let header = ResponseHeader::decode(&mut frame, api.response_header_version(version))?;
    ensure!(
        header.correlation_id == correlation_id,
        "{api:?} answer to request {} where {correlation_id} was due",
        header.correlation_id
    );
    M::decode(&mut frame, version).with_context(|| format!("decoding a {api:?} v{version} answer"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::ProduceRequest;

    #[test]
    fn frame_length_covers_header_and_body() {
        let request = ProduceRequest::default().with_acks(-1);
        let f = frame(ApiKey::Produce, 9, 7, &request).unwrap();
        let len = i32::from_be_bytes(f[..4].try_into().unwrap());
        assert_eq!(len as usize, f.len() - 4);
        let mut rest = Bytes::copy_from_slice(&f[4..]);
        let header = RequestHeader::decode(&mut rest, 2).unwrap();
        assert_eq!((header.request_api_key, header.correlation_id), (0, 7));
        assert_eq!(ProduceRequest::decode(&mut rest, 9).unwrap(), request);
    }
}
