//! One request frame (the bytes after the 4-byte size) to a typed
//! [`Request`]: the API key, version and correlation id are read first
//! (the first [`HEADER_PREFIX_LEN`] bytes of every request header), the
//! version is checked against what is served, then the header and body are
//! decoded by `kafka-protocol` — whose array decoders never reserve more
//! than the bytes left (the workspace's patch).

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;

use crate::versions;

/// Bytes every request header starts with: API key (i16), API version
/// (i16) and correlation id (i32), big-endian.
pub const HEADER_PREFIX_LEN: usize = 8;

/// A decoded request.
#[derive(Debug)]
pub struct Request {
    /// The API called.
    pub api: ApiKey,
    /// Its version (one served: [`versions::supports`]).
    pub version: i16,
    /// The id the answer carries back.
    pub correlation_id: i32,
    /// The request header (client id, tagged fields).
    pub header: RequestHeader,
    /// The request itself.
    pub body: RequestKind,
}

/// Why a frame is not a request this listener serves. Every case closes
/// the connection except [`DecodeError::UnsupportedVersion`] of
/// `ApiVersions`, which Kafka answers at v0 so the client can pick.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the header prefix.
    #[error("a request of {len} bytes is shorter than the {HEADER_PREFIX_LEN}-byte header prefix")]
    TooShort {
        /// The frame's length.
        len: usize,
    },
    /// An API key Kafka does not define.
    #[error("unknown API key {key}")]
    UnknownApi {
        /// The key sent.
        key: i16,
    },
    /// A known API at a version not served.
    #[error("{api:?} v{version} is not supported (ApiVersions lists what is)")]
    UnsupportedVersion {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// The id an answer would carry.
        correlation_id: i32,
    },
    /// The request header does not decode.
    #[error("malformed {api:?} v{version} request header: {reason}")]
    MalformedHeader {
        /// The API.
        api: ApiKey,
        /// Its version.
        version: i16,
        /// What the decoder said.
        reason: String,
    },
    /// The request body does not decode.
    #[error("malformed {api:?} v{version} request: {reason}")]
    Malformed {
        /// The API.
        api: ApiKey,
        /// Its version.
        version: i16,
        /// What the decoder said.
        reason: String,
    },
}

impl DecodeError {
    /// The reason's metric label (`kappa_kafka_connections_closed_total`).
    pub fn label(&self) -> &'static str {
        match self {
            DecodeError::UnknownApi { .. } | DecodeError::UnsupportedVersion { .. } => {
                "unsupported"
            }
            DecodeError::TooShort { .. }
            | DecodeError::MalformedHeader { .. }
            | DecodeError::Malformed { .. } => "malformed",
        }
    }
}

/// Decodes one request frame (without its size prefix).
pub fn decode_request(mut frame: Bytes) -> Result<Request, DecodeError> {
    if frame.len() < HEADER_PREFIX_LEN {
        return Err(DecodeError::TooShort { len: frame.len() });
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let api = ApiKey::try_from(key).map_err(|_| DecodeError::UnknownApi { key })?;
    if !versions::supports(api, version) {
        return Err(DecodeError::UnsupportedVersion {
            api,
            version,
            correlation_id,
        });
    }
    let header =
        RequestHeader::decode(&mut frame, api.request_header_version(version)).map_err(|e| {
            DecodeError::MalformedHeader {
                api,
                version,
                reason: format!("{e:#}"),
            }
        })?;
    let body =
        RequestKind::decode(api, &mut frame, version).map_err(|e| DecodeError::Malformed {
            api,
            version,
            reason: format!("{e:#}"),
        })?;
    Ok(Request {
        api,
        version,
        correlation_id,
        header,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_checked_before_anything_is_decoded() {
        assert!(matches!(
            decode_request(Bytes::from_static(&[0, 3, 0])),
            Err(DecodeError::TooShort { len: 3 })
        ));
        assert!(matches!(
            decode_request(Bytes::from_static(&[0x7f, 0, 0, 0, 0, 0, 0, 1])),
            Err(DecodeError::UnknownApi { key: 0x7f00 })
        ));
        let error = decode_request(Bytes::from_static(&[0, 1, 0, 13, 0, 0, 0, 9])).unwrap_err();
        assert!(matches!(
            error,
            DecodeError::UnsupportedVersion {
                api: ApiKey::Fetch,
                version: 13,
                correlation_id: 9
            }
        ));
        assert_eq!(error.label(), "unsupported");
    }
}
