//! Fuzzes the decoding of input records' JSON: the hand-written decoder
//! must never panic and must agree with serde_json wherever it answers.
//! The body lives in `kappa_processor::event::fuzzing` (replayed by
//! processor/tests/fuzz_corpus.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kappa_processor::event::fuzzing::fuzz_event_decode(data);
});
