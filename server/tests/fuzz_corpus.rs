//! Replays the committed fuzz corpora (`fuzz/corpus/<target>/`) through the
//! same functions the cargo-fuzz targets call, on stable Rust: no input
//! panics, and the targets' invariants hold (one test per target).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

/// Every file of `fuzz/corpus/<target>`, sorted (name, bytes).
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    // The manifest directory at run time (cargo sets it), not the one
    // compiled in: a test binary built in another clone must read this one.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../fuzz/corpus")
        .join(target);
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

/// `catalog_load`: the catalog loader on every seed (valid catalogs from a
/// real server, one with the issue-11 61-term plan and one at the depth
/// limit, truncated, deeply nested and wrong-format ones) never panics,
/// and what it decodes encodes and decodes again.
#[test]
fn catalog_load_corpus_replays() {
    let files = corpus("catalog_load");
    assert!(files.len() >= 5, "the corpus has its seeds");
    for (name, data) in files {
        let outcome =
            std::panic::catch_unwind(|| kappa_server::views::catalog::fuzz_catalog_load(&data));
        assert!(outcome.is_ok(), "catalog_load corpus file {name} panicked");
    }
}

/// `produce_body`: the produce body parser (JSON and NDJSON) never panics.
#[test]
fn produce_body_corpus_replays_without_panics() {
    for (name, data) in corpus("produce_body") {
        let outcome = std::panic::catch_unwind(|| kappa_server::fuzzing::produce_body(&data));
        assert!(outcome.is_ok(), "produce_body corpus file {name} panicked");
    }
}
