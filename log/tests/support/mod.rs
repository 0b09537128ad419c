//! What the log's tests share: where the committed fixtures are, copying
//! one so a test opens a copy, never the fixture itself; a runtime to
//! await appends on; the latest value of each key of a history.
#![allow(dead_code, clippy::unwrap_used)] // Each test uses what it needs; a panic reports failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// The package directory, read when the test runs: `cargo test` sets
/// `CARGO_MANIFEST_DIR` for the test process. The compile-time value can be
/// stale — cargo reuses a test binary built from an identical checkout at
/// another path (a CI clone) — so it is only the fallback.
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// A current-thread runtime to await appends on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Key -> value of the latest record of each key of `records` (in offset
/// order), leaving out keys whose latest record is a tombstone (an empty
/// value): what a compacted partition must read as.
pub fn latest(records: impl IntoIterator<Item = (Bytes, Bytes)>) -> BTreeMap<Bytes, Bytes> {
    let mut map = BTreeMap::new();
    for (key, value) in records {
        if value.is_empty() {
            map.remove(&key);
        } else {
            map.insert(key, value);
        }
    }
    map
}
