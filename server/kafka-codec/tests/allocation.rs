//! No count or length a peer claims sizes an allocation beyond what its
//! frame can hold: the outside probe's 19-byte Metadata frame (which
//! aborted the server, `memory allocation of 154618822584 bytes failed`),
//! the same claim in every API it named, and — the class — every position
//! of a well-formed frame of every API and version served overwritten with
//! the largest counts each encoding can claim.

mod support;

use bytes::Bytes;
use kafka_protocol::messages::{ApiKey, RequestKind};
use kappa_kafka_codec::{decode_record_batches, decode_request};
use support::largest_allocation::{bound_for, largest_during, LargestAllocation};
use support::samples::{every_served_request, record_batch};

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

/// Decodes `frame` (and a Produce's record batches) and checks the largest
/// allocation it made; `what` names the frame in a failure.
fn decode_within_bound(frame: Bytes, what: &str) {
    let len = frame.len();
    let largest = largest_during(|| {
        if let Ok(request) = decode_request(frame) {
            if let RequestKind::Produce(produce) = &request.body {
                for topic in &produce.topic_data {
                    for partition in &topic.partition_data {
                        if let Some(records) = &partition.records {
                            let _ = decode_record_batches(records.clone(), 1 << 20);
                        }
                    }
                }
            }
        }
    });
    assert!(
        largest <= bound_for(len),
        "{what}: decoding {len} bytes allocated {largest} bytes at once (bound {})",
        bound_for(len)
    );
}

/// Encodings of the largest count: i32 big-endian (classic arrays, record
/// counts), unsigned varint (compact arrays) and zigzag varint (record
/// header counts).
const HUGE_COUNTS: [&[u8]; 3] = [
    &[0x7f, 0xff, 0xff, 0xff],
    &[0xff, 0xff, 0xff, 0xff, 0x07],
    &[0xfe, 0xff, 0xff, 0xff, 0x0f],
];

#[test]
fn the_probes_19_byte_metadata_frame_is_refused_without_allocating_its_claim() {
    let mut b = Vec::new();
    b.extend_from_slice(&3i16.to_be_bytes());
    b.extend_from_slice(&1i16.to_be_bytes());
    b.extend_from_slice(&1i32.to_be_bytes());
    b.extend_from_slice(&1i16.to_be_bytes());
    b.push(b'x');
    b.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
    assert_eq!(b.len(), 15, "19 bytes with the size prefix");
    let frame = Bytes::from(b);
    decode_within_bound(frame.clone(), "Metadata v1");
    let error = decode_request(frame).unwrap_err();
    assert!(error.to_string().contains("exceeds"), "{error}");
}

#[test]
fn a_huge_first_array_count_is_refused_in_every_api_the_probe_named() {
    let named = [
        (ApiKey::Produce, 3),
        (ApiKey::Fetch, 4),
        (ApiKey::OffsetCommit, 2),
        (ApiKey::OffsetFetch, 1),
        (ApiKey::JoinGroup, 0),
        (ApiKey::DescribeGroups, 0),
        (ApiKey::CreateTopics, 2),
        (ApiKey::DeleteTopics, 1),
        (ApiKey::DescribeConfigs, 1),
    ];
    let requests = every_served_request();
    for (api, version) in named {
        let (_, _, frame) = requests
            .iter()
            .find(|(a, v, _)| (*a, *v) == (api, version))
            .expect("served");
        let mut hits = 0;
        for at in 8..frame.len().saturating_sub(3) {
            let mut mutated = frame.to_vec();
            mutated[at..at + 4].copy_from_slice(HUGE_COUNTS[0]);
            decode_within_bound(
                Bytes::from(mutated.clone()),
                &format!("{api:?} v{version} @{at}"),
            );
            if decode_request(Bytes::from(mutated))
                .is_err_and(|e| e.to_string().contains("exceeds"))
            {
                hits += 1;
            }
        }
        assert!(hits > 0, "{api:?} v{version}: no array count was reached");
    }
}

#[test]
fn no_position_of_any_served_request_can_claim_an_unbounded_allocation() {
    let mut decoded = 0;
    for (api, version, frame) in every_served_request() {
        assert!(
            decode_request(frame.clone()).is_ok(),
            "{api:?} v{version}: the sample itself does not decode"
        );
        for huge in HUGE_COUNTS {
            for at in 8..=frame.len().saturating_sub(huge.len()) {
                let mut mutated = frame.to_vec();
                mutated[at..at + huge.len()].copy_from_slice(huge);
                decode_within_bound(Bytes::from(mutated), &format!("{api:?} v{version} @{at}"));
                decoded += 1;
            }
        }
    }
    assert!(decoded > 9_000, "only {decoded} frames tried");
}

/// A v2 record batch's CRC-32C covers everything from its attributes
/// (byte 21) on; the CRC sits at bytes 17..21.
fn with_fixed_crc(mut batch: Vec<u8>) -> Bytes {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}

#[test]
fn record_and_header_counts_cannot_claim_an_unbounded_allocation() {
    let batch = record_batch();
    assert_eq!(
        decode_record_batches(batch.clone(), 1 << 20).unwrap()[0]
            .records
            .len(),
        2
    );
    let mut refused = 0;
    for huge in HUGE_COUNTS {
        for at in 21..=batch.len() - huge.len() {
            let mut mutated = batch.to_vec();
            mutated[at..at + huge.len()].copy_from_slice(huge);
            let mutated = with_fixed_crc(mutated);
            let len = mutated.len();
            let largest = largest_during(|| {
                if decode_record_batches(mutated, 1 << 20).is_err() {
                    refused += 1;
                }
            });
            assert!(
                largest <= bound_for(len),
                "record batch @{at}: {largest} bytes allocated at once"
            );
        }
    }
    assert!(refused > 0);
}
