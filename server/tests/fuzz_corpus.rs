//! Replays committed fuzz seed corpora through the fuzz targets' bodies,
//! on stable Rust (one test per target).

use std::path::{Path, PathBuf};

/// The files of fuzz/corpus/`target`/, sorted.
fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
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
    for file in files {
        let data = std::fs::read(&file).unwrap();
        eprintln!("{}", file.display());
        kappa_server::views::catalog::fuzz_catalog_load(&data);
    }
}
