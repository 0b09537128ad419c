//! Replays the committed seed corpora of the processor's fuzz targets.
//!
//! `sql_statement`: the seed corpus
//! (fuzz/corpus/sql_statement/, which includes issue 11's crashers: long
//! chains of `+`, `AND` and `OR`) through the target's body, on stable
//! Rust: every input must give `Ok` or `Err`, never a panic or a stack
//! overflow.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_processor::sql::fuzzing::fuzz_sql_statement;

#[test]
fn sql_statement_corpus_replays() {
    replay("sql_statement", fuzz_sql_statement);
}

/// Runs `body` on every file of fuzz/corpus/`target`/, in name order.
fn replay(target: &str, body: fn(&[u8])) {
    // The manifest directory at run time (cargo sets it), not the one
    // compiled in: a test binary built in another clone must read this one.
    let dir = &std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus of {target} has its seeds");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        eprintln!("{}", file.display());
        body(&data);
    }
}

/// Replays the seed corpus of the `event_decode` fuzz target
/// (fuzz/corpus/event_decode/): the record decoder never panics and agrees
/// with serde_json wherever it answers.
#[test]
fn event_decode_corpus_replays() {
    replay(
        "event_decode",
        kappa_processor::event::fuzzing::fuzz_event_decode,
    );
}
