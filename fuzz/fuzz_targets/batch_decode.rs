//! Fuzz target: `kappa_log::fuzzing::batch_decode` on arbitrary bytes (its corpus
//! replays on stable in log/tests/fuzz_corpus.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kappa_log::fuzzing::batch_decode(data);
});
