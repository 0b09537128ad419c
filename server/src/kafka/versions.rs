//! The `ApiVersions` answer: the APIs and versions served
//! (`kappa_kafka_codec::versions::SUPPORTED`, which also decides what is
//! decoded).

use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::ApiVersionsResponse;

use super::errors;

pub use kappa_kafka_codec::versions::SUPPORTED;

/// The `ApiVersions` answer: every API served with its range, or
/// `UNSUPPORTED_VERSION` (still with the list, as Kafka does, so the client
/// can retry at a version served) when `requested` is above ours.
pub fn api_versions(requested_supported: bool) -> ApiVersionsResponse {
    let mut response = ApiVersionsResponse::default();
    response.error_code = if requested_supported {
        errors::NONE
    } else {
        errors::UNSUPPORTED_VERSION
    };
    response.api_keys = SUPPORTED
        .iter()
        .map(|(key, min, max)| {
            let mut v = ApiVersion::default();
            v.api_key = *key as i16;
            v.min_version = *min;
            v.max_version = *max;
            v
        })
        .collect();
    response
}
