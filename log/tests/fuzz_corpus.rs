//! Replays the committed corpora of the log's fuzz targets (fuzz/corpus/)
//! through the same functions the targets call, so every input the fuzzer
//! kept — crashers included — is checked on stable in every CI run.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

fn replay(target: &str, check: fn(&[u8])) {
    // The manifest directory at run time (cargo sets it), not the one
    // compiled in: a test binary built in another clone must read this one.
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .join("../fuzz/corpus")
        .join(target);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| check(&data));
        assert!(outcome.is_ok(), "{} fails {target}", path.display());
        inputs += 1;
    }
    assert!(inputs > 0, "no corpus in {}", dir.display());
}

#[test]
fn batch_decode_corpus_replays() {
    replay("batch_decode", kappa_log::fuzzing::batch_decode);
}

#[test]
fn offsets_replay_corpus_replays() {
    replay("offsets_replay", kappa_log::fuzzing::offsets_replay);
}
