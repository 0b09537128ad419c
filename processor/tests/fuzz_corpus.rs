//! Replays the committed seed corpus of the `sql_statement` fuzz target
//! (fuzz/corpus/sql_statement/, which includes issue 11's crashers: long
//! chains of `+`, `AND` and `OR`) through the target's body, on stable
//! Rust: every input must give `Ok` or `Err`, never a panic or a stack
//! overflow.

use kappa_processor::sql::fuzzing::fuzz_sql_statement;

#[test]
fn sql_statement_corpus_replays() {
    // The manifest directory at run time (cargo sets it), not the one
    // compiled in: a test binary built in another clone must read this one.
    let dir = &std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../fuzz/corpus/sql_statement");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus has its seeds");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        eprintln!("{}", file.display());
        fuzz_sql_statement(&data);
    }
}

/// Replays the seed corpus of the `event_decode` fuzz target
/// (fuzz/corpus/event_decode/): the record decoder never panics and agrees
/// with serde_json wherever it answers.
#[test]
fn event_decode_corpus_replays() {
    let dir = &std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../fuzz/corpus/event_decode");
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the corpus has its seeds");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        eprintln!("{}", file.display());
        kappa_processor::event::fuzzing::fuzz_event_decode(&data);
    }
}
