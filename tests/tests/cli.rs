//! The client subcommands against a real server: create a topic, produce a
//! file, describe, tail from the start without following, read and commit
//! as a group, list offsets and reset — the same binary in both roles.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::process::{Command, Output};

use kappa_tests::{kappa_bin, run_cli, Server};
use serde_json::Value;

fn kappa(server: &Server, args: &[&str]) -> Output {
    run_cli(server, args)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `kappa groups offsets GROUP --json` and the lag it reports over the
/// partitions of its first topic.
fn group_lag(server: &Server, group: &str) -> (Value, u64) {
    let offsets: Value = serde_json::from_str(&stdout(&kappa(
        server,
        &["groups", "offsets", group, "--json"],
    )))
    .unwrap();
    let lag: u64 = offsets["topics"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["lag"].as_u64().unwrap())
        .sum();
    (offsets, lag)
}

#[test]
fn the_cli_produces_tails_and_manages_groups() {
    let server = Server::start(&[]);
    kappa(
        &server,
        &["topics", "create", "events", "--partitions", "2"],
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("events.ndjson");
    let lines: Vec<String> = (0..250)
        .map(|i| format!(r#"{{"key":"k{}","value":{{"n":{i}}}}}"#, i % 10))
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    kappa(
        &server,
        &[
            "produce",
            "events",
            "--file",
            file.to_str().unwrap(),
            "--batch",
            "100",
        ],
    );

    let described: Value = serde_json::from_str(&stdout(&kappa(
        &server,
        &["topics", "describe", "events", "--json"],
    )))
    .unwrap();
    let total: u64 = described["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["end_offset"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 250);
    assert_eq!(
        described["config"]["retention_ms"],
        Value::Null,
        "kept forever"
    );

    let altered = stdout(&kappa(
        &server,
        &["topics", "alter", "events", "--retention-ms", "86400000"],
    ));
    assert!(altered.contains("retention_ms=86400000"), "{altered}");
    let altered = stdout(&kappa(
        &server,
        &["topics", "alter", "events", "--retention-ms", "none"],
    ));
    assert!(altered.contains("retention_ms=null"), "{altered}");

    let tail = stdout(&kappa(
        &server,
        &["tail", "events", "--from", "earliest", "--no-follow"],
    ));
    let mut values: Vec<u64> = tail
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["value"]["n"]
                .as_u64()
                .unwrap()
        })
        .collect();
    values.sort_unstable();
    assert_eq!(values, (0..250).collect::<Vec<_>>());

    let group_tail = stdout(&kappa(
        &server,
        &["tail", "events", "--group", "g", "--no-follow"],
    ));
    assert_eq!(group_tail.lines().count(), 250);
    let (offsets, lag) = group_lag(&server, "g");
    assert_eq!(lag, 0, "{offsets}");

    kappa(
        &server,
        &[
            "groups", "reset", "g", "--topic", "events", "--to", "earliest",
        ],
    );
    let (_, lag) = group_lag(&server, "g");
    assert_eq!(lag, 250);

    let listed = stdout(&kappa(&server, &["topics", "list"]));
    assert!(listed.contains("events"), "{listed}");
    kappa(&server, &["topics", "delete", "events"]);
    let (status, _) = server.client().get("/v1/topics/events");
    assert_eq!(status, 404);
}

#[test]
fn the_cli_reports_server_errors_and_exits_non_zero() {
    let server = Server::start(&[]);
    let output = Command::new(kappa_bin())
        .args(["--url", &server.url(), "topics", "describe", "missing"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown_topic"), "{stderr}");
}
