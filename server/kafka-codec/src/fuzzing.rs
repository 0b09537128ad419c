//! The body of the `kafka_request` fuzz target (`fuzz/fuzz_targets/`),
//! shared with the test that replays its corpus on stable
//! (`tests/fuzz_corpus.rs`) so the target and its replay cannot drift.

use bytes::Bytes;
use kafka_protocol::messages::RequestKind;

use crate::{decode_record_batches, decode_request, versions, DecodeError, HEADER_PREFIX_LEN};

/// The largest batch a decompressed fuzz input may expand to.
pub const FUZZ_MAX_BATCH_BYTES: usize = 1 << 20;

/// Request decoding on arbitrary bytes, aimed at every API and version
/// served: the first byte picks the API of [`versions::SUPPORTED`], the
/// second its version within the served range, the rest follows an 8-byte
/// header prefix (correlation id 7) as the header and body. A decoded
/// Produce also has every partition's record batches decoded. `data` is
/// then decoded once more as a raw frame (any key, any version). Never
/// panics; a decoded request has the API and version of its prefix.
pub fn kafka_request(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Some((&version_pick, rest)) = rest.split_first() else {
        return;
    };
    let (api, min, max) = versions::SUPPORTED[pick as usize % versions::SUPPORTED.len()];
    let version = min + (version_pick as i16 % (max - min + 1));
    let mut frame = Vec::with_capacity(HEADER_PREFIX_LEN + rest.len());
    frame.extend_from_slice(&(api as i16).to_be_bytes());
    frame.extend_from_slice(&version.to_be_bytes());
    frame.extend_from_slice(&7i32.to_be_bytes());
    frame.extend_from_slice(rest);
    match decode_request(Bytes::from(frame)) {
        Ok(request) => {
            assert_eq!((request.api, request.version), (api, version));
            assert_eq!(request.correlation_id, 7);
            decode_produced_records(&request.body);
        }
        Err(DecodeError::MalformedHeader { .. } | DecodeError::Malformed { .. }) => {}
        Err(other) => panic!("{api:?} v{version} is served, yet: {other}"),
    }
    if let Ok(request) = decode_request(Bytes::copy_from_slice(data)) {
        decode_produced_records(&request.body);
    }
}

/// Decodes the record batches of a Produce request's every partition.
fn decode_produced_records(body: &RequestKind) {
    let RequestKind::Produce(produce) = body else {
        return;
    };
    for topic in &produce.topic_data {
        for partition in &topic.partition_data {
            if let Some(records) = &partition.records {
                // Errors are expected; a panic or an unbounded allocation is not.
                let _ = decode_record_batches(records.clone(), FUZZ_MAX_BATCH_BYTES);
            }
        }
    }
}
