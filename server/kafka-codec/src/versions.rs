//! The APIs the listener serves and at which versions: what `ApiVersions`
//! answers, and what a request is checked against before it is decoded.
//! Maximums stop before versions that need what Kappa does not have (topic
//! ids in Fetch v13+, batched coordinator lookups in FindCoordinator v4+,
//! the KIP-848 consumer protocol); clients negotiate down to them.

use kafka_protocol::messages::ApiKey;

/// (API, lowest version, highest version) served.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 9),
    (ApiKey::Fetch, 4, 12),
    (ApiKey::ListOffsets, 1, 6),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::OffsetCommit, 2, 8),
    (ApiKey::OffsetFetch, 1, 7),
    (ApiKey::FindCoordinator, 0, 3),
    (ApiKey::JoinGroup, 0, 7),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 4),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::ListGroups, 0, 4),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::ApiVersions, 0, 3),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 5),
    (ApiKey::InitProducerId, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    // Last: the fuzz corpus names an API by its place in this list.
    (ApiKey::AlterConfigs, 0, 2),
];

/// Whether `key` is served at `version`.
pub fn supports(key: ApiKey, version: i16) -> bool {
    SUPPORTED
        .iter()
        .any(|(k, min, max)| *k == key && (*min..=*max).contains(&version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_served_range_is_within_what_the_codec_can_decode() {
        for (key, min, max) in SUPPORTED {
            let codec = key.valid_versions();
            assert!(
                codec.min <= *min && *max <= codec.max && min <= max,
                "{key:?} {min}..={max} outside the codec's {}..={}",
                codec.min,
                codec.max
            );
        }
    }

    #[test]
    fn a_version_outside_the_range_is_not_served() {
        assert!(supports(ApiKey::Fetch, 12));
        assert!(!supports(ApiKey::Fetch, 13));
        assert!(!supports(ApiKey::Produce, 2));
        assert!(!supports(ApiKey::DeleteRecords, 0));
    }
}
