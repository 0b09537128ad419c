//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the
//! same functions the cargo-fuzz targets call, on stable Rust: no input
//! panics, and the targets' invariants hold.

use std::path::Path;

/// Every file of `fuzz/corpus/<target>`, sorted (name, bytes).
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/corpus")).join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&path).unwrap())
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
}

#[test]
fn produce_body_corpus_replays_without_panics() {
    for (name, data) in corpus("produce_body") {
        let outcome = std::panic::catch_unwind(|| kappa_server::fuzzing::produce_body(&data));
        assert!(outcome.is_ok(), "produce_body corpus file {name} panicked");
    }
}
