//! What the format-compatibility tests share: where the committed
//! fixtures are, and copying one so a test opens a copy, never the
//! fixture itself.
#![allow(dead_code, clippy::unwrap_used)] // Each test uses what it needs; a panic reports failure.

use std::path::{Path, PathBuf};

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
