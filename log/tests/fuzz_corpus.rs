//! Replays the committed corpora of the log's fuzz targets (fuzz/corpus/)
//! through the same functions the targets call, so every input the fuzzer
//! kept — crashers included — is checked on stable in every CI run.

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
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
