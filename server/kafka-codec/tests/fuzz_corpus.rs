//! Replays the committed corpus of the `kafka_request` fuzz target
//! (`fuzz/corpus/kafka_request/`) through the target's own body on stable,
//! with the allocation bound the target's allocator enforces.

mod support;

use support::largest_allocation::{bound_for, largest_during, LargestAllocation};

#[global_allocator]
static ALLOCATOR: LargestAllocation = LargestAllocation;

#[test]
fn the_kafka_request_corpus_decodes_within_bounds() {
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../fuzz/corpus/kafka_request");
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let largest = largest_during(|| kappa_kafka_codec::fuzzing::kafka_request(&data));
        assert!(
            largest <= bound_for(data.len()) + kappa_kafka_codec::fuzzing::FUZZ_MAX_BATCH_BYTES * 2,
            "{}: {largest} bytes allocated at once",
            path.display()
        );
        inputs += 1;
    }
    assert!(inputs >= 100, "only {inputs} inputs in {}", dir.display());
}

/// Writes the hand-made seeds of the corpus: a well-formed frame of every
/// API and version served (with an element in each array) in the target's
/// input format, and the outside probe's Metadata v1 frame. Run with
/// `cargo test --workspace --test fuzz_corpus -- --ignored` after the
/// served versions change; the fuzzer's own finds sit beside them.
#[test]
#[ignore = "writes the seed corpus"]
fn write_the_seed_corpus() {
    use kappa_kafka_codec::versions::SUPPORTED;
    let dir = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("../../fuzz/corpus/kafka_request");
    std::fs::create_dir_all(&dir).unwrap();
    for (api, version, frame) in support::samples::every_served_request() {
        let pick = SUPPORTED.iter().position(|(a, _, _)| *a == api).unwrap();
        let min = SUPPORTED[pick].1;
        let mut input = vec![pick as u8, (version - min) as u8];
        input.extend_from_slice(&frame[8..]);
        std::fs::write(dir.join(format!("seed-{api:?}-v{version}")), input).unwrap();
    }
    let pick = SUPPORTED
        .iter()
        .position(|(a, _, _)| *a == kafka_protocol::messages::ApiKey::Metadata)
        .unwrap();
    let mut probe = vec![pick as u8, 1, 0, 1, b'x'];
    probe.extend_from_slice(&0x7fff_ffffi32.to_be_bytes());
    std::fs::write(dir.join("probe-metadata-v1-2pow31-topics"), probe).unwrap();
}
