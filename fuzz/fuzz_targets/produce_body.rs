//! The produce request body parser (JSON and NDJSON) on arbitrary bytes;
//! the body lives in `kappa_server::fuzzing::produce_body`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    kappa_server::fuzzing::produce_body(data);
});
