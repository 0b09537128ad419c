//! Fuzzes the SQL front end: parse + plan on arbitrary input must return
//! `Ok` or `Err`, never panic or overflow the stack. The body lives in
//! `kappa_processor::sql::fuzzing` (replayed by processor/tests/fuzz_corpus.rs).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kappa_processor::sql::fuzzing::fuzz_sql_statement(data);
});
