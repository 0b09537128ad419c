//! Fuzzes the catalog loader on arbitrary bytes: it never panics, and what
//! it decodes encodes and decodes again. The body lives in
//! `kappa_server::views::catalog` (replayed by server/tests/fuzz_corpus.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kappa_server::views::catalog::fuzz_catalog_load(data);
});
