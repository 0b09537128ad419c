//! Runs the `kappa-inspect` binary on a sample data directory written by
//! kappa-log: exit codes, text and JSON output, and the first problem of a
//! damaged segment named precisely.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::os::unix::fs::FileExt;
use std::process::{Command, Output};

use kappa_tools::inspect::{layout, sample, walk};

fn inspect(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kappa-inspect"))
        .args(args)
        .output()
        .expect("run kappa-inspect")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn kappa_inspect_verifies_dumps_and_reports_corruption() {
    let dir = tempfile::tempdir().unwrap();
    sample::write(dir.path()).unwrap();
    let data = dir.path().to_str().unwrap();

    let clean = inspect(&["verify", data]);
    assert_eq!(clean.status.code(), Some(0), "{}", stdout(&clean));
    assert!(stdout(&clean).ends_with("clean\n"));

    let segments = inspect(&["segments", data, "--topic", "orders", "--json"]);
    assert_eq!(segments.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&segments.stdout).unwrap();
    assert_eq!(json[0]["segments"][0]["base_offset"], 0);

    let dump = inspect(&[
        "dump",
        data,
        "--topic",
        "orders",
        "--partition",
        "1",
        "--records",
    ]);
    assert!(stdout(&dump).contains("value p1-2"), "{}", stdout(&dump));

    let groups = inspect(&["groups", data]);
    assert!(stdout(&groups).contains("billing"), "{}", stdout(&groups));

    // Damage a byte in the middle of the first sealed segment's 3rd batch.
    let p0 = dir.path().join("topics/orders/0");
    let seg = layout::segments(&p0).unwrap().remove(0);
    let w = walk::walk(&seg.paths.log, 0, false).unwrap();
    let b = &w.batches[2];
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&seg.paths.log)
        .unwrap();
    let at = b.position + b.len / 2;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0x01], at).unwrap();

    let bad = inspect(&["verify", data]);
    assert_eq!(bad.status.code(), Some(1));
    let expected = format!(
        "first problem: {} at byte {} (batch base offset {}): CRC mismatch",
        seg.paths.log.display(),
        b.position,
        b.base_offset
    );
    assert!(stdout(&bad).contains(&expected), "{}", stdout(&bad));

    let json = inspect(&["verify", data, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["clean"], false);
    assert_eq!(report["partitions"][0]["problem"]["position"], b.position);

    let missing = inspect(&["verify", "/nonexistent/kappa-data"]);
    assert_eq!(missing.status.code(), Some(2));
}
