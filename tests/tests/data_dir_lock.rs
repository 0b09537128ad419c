//! One server per data directory (issue 16): a second `kappa serve` on a
//! directory in use stops at once, naming the directory and the other
//! process, and changes nothing; the lock goes with its process, even after
//! `kill -9`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::process::Command;

use kappa_tests::{json, kappa_bin, Server};

/// Runs a second `kappa serve` on `dir` and returns its exit status and stderr.
fn second_server(dir: &std::path::Path) -> (bool, String) {
    let output = Command::new(kappa_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_second_server_on_a_data_dir_in_use_stops_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Server::start_on(dir.path(), &[]);
    first.create_topic(&json!({"name": "t", "partitions": 1}));
    first.produce("t", &json!([{"value": 1}]));
    let (ok, stderr) = second_server(dir.path());
    assert!(!ok, "the second server must not run");
    assert!(stderr.contains("in use"), "{stderr}");
    assert!(
        stderr.contains(&dir.path().display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains(&first.pid().unwrap().to_string()),
        "{stderr}"
    );
    assert!(!stderr.to_lowercase().contains("rocksdb"), "{stderr}");
    // The first one goes on as if nothing happened.
    first.produce("t", &json!([{"value": 2}]));
    assert_eq!(first.end_offsets("t"), vec![2]);
    // The lock goes with its process, however it ends.
    first.kill9();
    let again = Server::restart_on(dir.path(), &[]);
    assert_eq!(again.end_offsets("t"), vec![2]);
}
