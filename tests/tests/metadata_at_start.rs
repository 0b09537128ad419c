//! A start never goes on silently over lost or damaged metadata (finding 6
//! of the outside probe, "metadata lost silently at start"), end to end
//! with the real binary on a prepared data directory:
//! - `groups/offsets.log` cut to 0 bytes, beside an empty
//!   `offsets.log.bak` (the probe's case) or a good one: the start refuses,
//!   naming the file and the recovery, and changes nothing; the recovery it
//!   names works (start with no commits, or restore the backup);
//! - 100 random bytes as `offsets.log`: the start refuses and the bytes
//!   stay where they are; the backup restores the commits;
//! - a removed partition directory (`topics/plain/1`): the start refuses,
//!   naming the directory and `kappa-inspect repair-partition`; after the
//!   repair, new records get offsets after every one handed out before.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use kappa_tests::{inspect_bin, json, refused_start, Client, Rng, Server, Value};

/// A server with topic `plain` (2 partitions: 3 records in partition 0, 5
/// in partition 1) and group `g` committed at the end of both.
fn server_with_commits() -> Server {
    let server = Server::start(&[]);
    let c = server.client();
    c.create_topic(&json!({"name": "plain", "partitions": 2}));
    let records: Vec<Value> = (0..8)
        .map(|i| json!({"partition": u32::from(i >= 3), "value": {"i": i}}))
        .collect();
    c.produce("plain", &json!(records));
    assert_eq!(c.end_offsets("plain"), vec![3, 5]);
    let (status, body) = c.post_json(
        "/v1/groups/g/offsets",
        &json!({"topic": "plain", "offsets": [
            {"partition": 0, "offset": 3},
            {"partition": 1, "offset": 5},
        ]}),
    );
    assert_eq!(status, 200, "{body}");
    server
}

/// [`server_with_commits`] stopped, started again (every start writes the
/// last good copy, `offsets.log.bak`) and stopped again.
fn stopped_with_commits_backed_up() -> Server {
    let mut server = server_with_commits();
    server.terminate_ok();
    let mut server = server.restart();
    assert_eq!(committed(&server.client()), vec![Some(3), Some(5)]);
    // SIGKILL: a SIGTERM this soon after the start can come before the
    // server has installed its handler, and nothing here needs a clean stop.
    server.kill9();
    server
}

/// Group `g`'s committed offsets on `plain`, by partition.
fn committed(c: &Client) -> Vec<Option<u64>> {
    let (status, body) = c.get("/v1/groups/g/offsets?topic=plain");
    assert_eq!(status, 200, "{body}");
    body["topics"][0]["partitions"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|p| p["committed"].as_u64())
        .collect()
}

/// Every file of `dir` (not recursive), with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// `groups/offsets.log` and `groups/offsets.log.bak` of `data`.
fn offsets_files(data: &Path) -> (PathBuf, PathBuf) {
    let groups = data.join("groups");
    (groups.join("offsets.log"), groups.join("offsets.log.bak"))
}

fn cut_to_zero(path: &Path) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(0)
        .unwrap();
}

#[test]
fn an_offsets_file_cut_to_zero_bytes_beside_an_empty_backup_refuses_the_start() {
    let mut server = server_with_commits();
    server.terminate_ok();
    let data = server.data_dir().to_path_buf();
    let (file, backup) = offsets_files(&data);
    cut_to_zero(&file);
    std::fs::write(&backup, b"").unwrap();
    let before = files(&data.join("groups"));

    let stderr = refused_start(&data);
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(stderr.contains("empty (0 bytes)"), "{stderr}");
    assert!(stderr.contains("Nothing was changed"), "{stderr}");
    // The empty backup is no way back, and the error does not offer it.
    assert!(!stderr.contains("cp "), "{stderr}");
    assert_eq!(files(&data.join("groups")), before, "nothing changed");

    // The operator chooses, as the error says, to start with no commits.
    let kept = data.join("kept-by-the-operator");
    std::fs::create_dir(&kept).unwrap();
    std::fs::rename(&file, kept.join("offsets.log")).unwrap();
    std::fs::rename(&backup, kept.join("offsets.log.bak")).unwrap();
    let server = server.restart();
    assert_eq!(committed(&server.client()), vec![None, None]);
}

#[test]
fn an_offsets_file_cut_to_zero_bytes_is_refused_and_its_backup_restores_every_commit() {
    let server = stopped_with_commits_backed_up();
    let data = server.data_dir().to_path_buf();
    let (file, backup) = offsets_files(&data);
    cut_to_zero(&file);

    let stderr = refused_start(&data);
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    let restore = format!("cp {} {}", backup.display(), file.display());
    assert!(stderr.contains(&restore), "{stderr}");
    assert!(std::fs::read(&file).unwrap().is_empty(), "nothing changed");

    std::fs::copy(&backup, &file).unwrap();
    let server = server.restart();
    assert_eq!(committed(&server.client()), vec![Some(3), Some(5)]);
}

#[test]
fn random_bytes_as_the_offsets_file_refuse_the_start_and_stay_where_they_are() {
    let server = stopped_with_commits_backed_up();
    let data = server.data_dir().to_path_buf();
    let (file, backup) = offsets_files(&data);
    let mut rng = Rng::new(6);
    let garbage: Vec<u8> = (0..100).map(|_| rng.next_u64() as u8).collect();
    std::fs::write(&file, &garbage).unwrap();
    let before = files(&data.join("groups"));

    let stderr = refused_start(&data);
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert!(stderr.contains("not one valid frame"), "{stderr}");
    assert!(stderr.contains("Nothing was changed"), "{stderr}");
    assert_eq!(files(&data.join("groups")), before, "the bytes stay");

    // The recovery it names: keep the damaged file, restore the copy.
    let keep = format!("mv {} {}.damaged-", file.display(), file.display());
    assert!(stderr.contains(&keep), "{stderr}");
    let damaged = file.with_extension("log.damaged-by-the-probe");
    std::fs::rename(&file, &damaged).unwrap();
    std::fs::copy(&backup, &file).unwrap();
    let server = server.restart();
    assert_eq!(committed(&server.client()), vec![Some(3), Some(5)]);
    assert_eq!(std::fs::read(&damaged).unwrap(), garbage);
}

#[test]
fn a_removed_partition_directory_refuses_the_start_and_its_repair_reuses_no_offset() {
    let mut server = server_with_commits();
    server.terminate_ok();
    let data = server.data_dir().to_path_buf();
    let partition = data.join("topics/plain/1");
    std::fs::remove_dir_all(&partition).unwrap();

    let stderr = refused_start(&data);
    assert!(
        stderr.contains(&partition.display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains("kappa-inspect repair-partition"),
        "{stderr}"
    );
    assert!(stderr.contains("--start-offset"), "{stderr}");
    assert!(!partition.exists(), "nothing was recreated");

    // The records are gone for good: the repair recreates the partition
    // past every offset it handed out (the group's commit shows 5).
    let repair = Command::new(inspect_bin())
        .arg("repair-partition")
        .arg(&data)
        .args([
            "--topic",
            "plain",
            "--partition",
            "1",
            "--start-offset",
            "5",
        ])
        .output()
        .unwrap();
    assert!(
        repair.status.success(),
        "{}",
        String::from_utf8_lossy(&repair.stderr)
    );
    let server = server.restart();
    let c = server.client();
    assert_eq!(c.end_offsets("plain"), vec![3, 5]);
    let produced = c.produce("plain", &json!([{"partition": 1, "value": {"new": 1}}]));
    assert_eq!(produced[0].offset, 5, "offset 0 is not handed out again");
    // The group positioned at 5 sees the new record.
    let (status, body) = c.get("/v1/groups/g/topics/plain/records?max_records=10");
    assert_eq!(status, 200, "{body}");
    let values: Vec<&Value> = body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(values, vec![&json!({"new": 1})]);
}
