//! `kappa-bench` against a real server, with tiny sizes: `produce`
//! (twice, the second with `--compare`), `replay` (consumer group re-read),
//! `e2e` (produce → visible in a view, read-your-writes probes, the view's
//! counts checked against the topic afterwards),
//! `rebuild` (a view replayed from earliest), `build` (issue 14's view
//! built from an NDJSON file, with two workers), and `kafka-produce` and
//! `kafka-consume` (the same over the Kafka protocol; every counted record
//! must be in the topic and read back). Each writes `--json`; the test
//! checks the fields a results file promises, zero failures, and that the
//! scenarios clean up what they created.
//!
//! The `kappa-bench` binary is found next to the `kappa` binary under test
//! (`target/<profile>/`) and built with `cargo build -p kappa-tools --bin
//! kappa-bench` when it is missing or older than its sources, by the
//! harness's `workspace_bin` (`$KAPPA_BENCH_BIN` overrides). Nothing sleeps to
//! synchronize: the server's address comes from its stdout line, each
//! kappa-bench run is awaited (bounded), and the views' progress is waited
//! for by kappa-bench itself (`after=` probes, bounded polls).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{mpsc, OnceLock};
use std::time::Duration;

use kappa_tests::{Server, Value};

/// Longest a tiny kappa-bench run may take.
const BENCH_TIMEOUT: Duration = Duration::from_secs(180);

/// The kappa-bench binary, built once per test process when needed.
fn bench_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("KAPPA_BENCH_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => {
            kappa_tests::workspace_bin("kappa-tools", "kappa-bench", kappa_tests::TOOLS_SOURCES)
        }
    })
}

/// Runs kappa-bench against `server` with `--json <dir>/<name>.json`;
/// asserts success within [`BENCH_TIMEOUT`]; answers stdout and the JSON.
fn bench(server: &Server, dir: &Path, name: &str, args: &[&str]) -> (String, Value) {
    let json_path = dir.join(format!("{name}.json"));
    let child = Command::new(bench_bin())
        .arg("--server")
        .arg(server.url())
        .arg("--json")
        .arg(&json_path)
        .args(args)
        .env_remove("KAPPA_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kappa-bench");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out: Output = match rx.recv_timeout(BENCH_TIMEOUT) {
        Ok(out) => out.expect("waiting for kappa-bench"),
        Err(_) => {
            // SAFETY: kill(2) on our own child, not yet reaped (the waiting
            // thread has not returned), so the PID cannot have been reused.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("kappa-bench {args:?} did not finish within {BENCH_TIMEOUT:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kappa-bench {args:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&json_path).expect("kappa-bench wrote --json");
    let json: Value = serde_json::from_str(&text).expect("the results file is JSON");
    (stdout, json)
}

/// The value of figure `name` of the only run.
fn figure(report: &Value, name: &str) -> f64 {
    report["runs"][0]["metrics"]
        .as_array()
        .expect("runs[0].metrics")
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| panic!("no figure {name:?} in {report}"))["value"]
        .as_f64()
        .expect("a number")
}

/// The fields every results file has, and no non-2xx answer.
fn assert_report_shape(report: &Value, scenario: &str) {
    assert_eq!(report["scenario"], scenario, "{report}");
    for field in ["title", "command"] {
        assert!(report[field].is_string(), "{field} in {report}");
    }
    assert!(report["params"].is_object(), "{report}");
    let runs = report["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{report}");
    for field in [
        "elapsed_s",
        "ok_requests",
        "records",
        "bytes",
        "transport_errors",
        "started_unix_ms",
        "finished_unix_ms",
    ] {
        assert!(runs[0][field].is_number(), "{field} in {report}");
    }
    assert_eq!(runs[0]["statuses"], serde_json::json!({}), "{report}");
    assert_eq!(runs[0]["transport_errors"], 0, "{report}");
    let summary = report["summary"].as_array().expect("summary");
    assert!(!summary.is_empty(), "{report}");
    for row in summary {
        assert!(row["spread"]["median"].is_number(), "{row}");
    }
}

#[test]
fn kappa_bench_scenarios_run_against_a_real_server() {
    let mut server = Server::start(&[]);
    let dir = tempfile::tempdir().expect("results dir");

    // produce: 4 counted requests of 50 records.
    let produce_args = [
        "produce",
        "--topic",
        "bench_t",
        "--create",
        "--partitions",
        "2",
        "--fsync",
        "never",
        "--connections",
        "2",
        "--batch",
        "50",
        "--requests",
        "4",
        "--warmup",
        "0",
    ];
    let (stdout, produce) = bench(&server, dir.path(), "produce", &produce_args);
    assert!(stdout.contains("| records/s |"), "{stdout}");
    assert_report_shape(&produce, "produce");
    assert_eq!(produce["runs"][0]["records"], 200, "{produce}");
    assert_eq!(figure(&produce, "failed requests"), 0.0);
    assert!(figure(&produce, "records/s") > 0.0);
    assert!(produce["runs"][0]["latency"]["p99_ms"].as_f64().unwrap() > 0.0);

    // The same again (the topic exists now), compared with the first.
    let previous = dir.path().join("produce.json");
    let mut again: Vec<&str> = produce_args
        .iter()
        .copied()
        .filter(|a| *a != "--create")
        .collect();
    again.splice(0..0, ["--compare", previous.to_str().unwrap()]);
    let (stdout, _) = bench(&server, dir.path(), "produce2", &again);
    assert!(
        stdout.contains("#### Change against the previous result"),
        "{stdout}"
    );

    // replay: the group re-reads everything produced so far.
    let stored: u64 = server.end_offsets("bench_t").iter().sum();
    let (_, replay) = bench(
        &server,
        dir.path(),
        "replay",
        &["replay", "--topic", "bench_t", "--max-records", "64"],
    );
    assert_report_shape(&replay, "replay");
    assert_eq!(replay["runs"][0]["records"], stored, "{replay}");
    assert_eq!(figure(&replay, "failed requests"), 0.0);

    // e2e: 200 events at 1000/s, every 2nd request of 10 records sampled.
    let (stdout, e2e) = bench(
        &server,
        dir.path(),
        "e2e",
        &[
            "e2e",
            "--rate",
            "1000",
            "--events",
            "200",
            "--batch",
            "10",
            "--connections",
            "2",
            "--sample-every",
            "2",
            "--warmup",
            "0",
            "--fsync",
            "never",
            "--max-wait-ms",
            "30000",
        ],
    );
    assert!(stdout.contains("latency e2e p99 (ms)"), "{stdout}");
    assert_report_shape(&e2e, "e2e");
    assert_eq!(e2e["runs"][0]["records"], 200, "{e2e}");
    for failure in [
        "failed requests",
        "failed probes",
        "view_behind",
        "skipped samples",
    ] {
        assert_eq!(figure(&e2e, failure), 0.0, "{failure} in {e2e}");
    }
    let samples = figure(&e2e, "e2e samples");
    assert!(samples >= 1.0, "{e2e}");
    assert_eq!(e2e["runs"][0]["latency"]["count"].as_f64(), Some(samples));
    assert!(figure(&e2e, "e2e p50") > 0.0, "{e2e}");
    assert!(figure(&e2e, "e2e max") >= figure(&e2e, "e2e p50"), "{e2e}");
    // Afterwards the view's counts were checked against the topic.
    assert!(
        e2e["notes"]
            .to_string()
            .contains("added up to the 200 records in the topic"),
        "{e2e}"
    );
    // Cleaned up: no view, no stream, no topic.
    let (status, views) = server.get("/v1/views");
    assert_eq!((status, &views["views"]), (200, &serde_json::json!([])));
    assert_eq!(server.get("/v1/topics/bench_e2e_events").0, 404);

    // rebuild: 1000 events, a view over them, one replay.
    let (_, rebuild) = bench(
        &server,
        dir.path(),
        "rebuild",
        &[
            "rebuild",
            "--events",
            "1000",
            "--batch",
            "100",
            "--poll-ms",
            "20",
        ],
    );
    assert_report_shape(&rebuild, "rebuild");
    assert_eq!(rebuild["runs"][0]["records"], 1000, "{rebuild}");
    assert!(figure(&rebuild, "rebuild time") > 0.0, "{rebuild}");
    assert!(figure(&rebuild, "events/s") > 0.0, "{rebuild}");
    let details = &rebuild["runs"][0]["details"];
    assert_eq!(details["version"], 2, "{rebuild}");
    assert!(details["progress"].is_array(), "{rebuild}");
    assert_eq!(server.get("/v1/topics/bench_rebuild_events").0, 404);

    // build: 300 user events (every third a purchase) over 35 minutes,
    // loaded into 2 partitions, the seed's view built with two workers;
    // its rows and purchase counts are what the events say.
    let file = dir.path().join("events.ndjson");
    let mut lines = String::new();
    let mut groups = std::collections::BTreeSet::new();
    let mut purchases = 0u64;
    for i in 0..300u64 {
        let (user, seconds) = (format!("u{}", i % 7), i * 7);
        let event_type = ["view", "cart", "purchase"][(i % 3) as usize];
        if event_type == "purchase" {
            purchases += 1;
            groups.insert((user.clone(), seconds / 300));
        }
        lines.push_str(&format!(
            "{{\"user_id\":\"{user}\",\"event_type\":\"{event_type}\",\"amount\":{i}.5,\"event_time\":\"2026-01-01T{:02}:{:02}:{:02}.000Z\"}}\n",
            seconds / 3600,
            seconds / 60 % 60,
            seconds % 60
        ));
    }
    std::fs::write(&file, lines).expect("writing the events file");
    let (_, build) = bench(
        &server,
        dir.path(),
        "build",
        &[
            "build",
            "--file",
            file.to_str().unwrap(),
            "--partitions",
            "2",
            "--parallelism",
            "2",
            "--runs",
            "1",
        ],
    );
    assert_report_shape(&build, "build");
    assert!(figure(&build, "build time") > 0.0, "{build}");
    assert_eq!(
        figure(&build, "purchases counted"),
        purchases as f64,
        "{build}"
    );
    assert_eq!(figure(&build, "view rows"), groups.len() as f64, "{build}");
    assert_eq!(server.get("/v1/views/purchase_stats").0, 404, "dropped");

    server.terminate_ok();
}

#[test]
fn kappa_bench_kafka_produce_lands_every_record_it_counts_and_kafka_consume_reads_them() {
    let mut server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let dir = tempfile::tempdir().expect("results dir");
    let kafka = server.kafka_addr().to_string();

    // 20 requests of 1000 keyed records over 2 connections, 3 in flight
    // each, into 2 partitions (so requests carry a batch per partition);
    // no warm-up, so everything sent is counted.
    let (stdout, report) = bench(
        &server,
        dir.path(),
        "kafka-produce",
        &[
            "kafka-produce",
            "--kafka",
            &kafka,
            "--topic",
            "bench_k",
            "--create",
            "--partitions",
            "2",
            "--connections",
            "2",
            "--in-flight",
            "3",
            "--records",
            "20000",
            "--warmup",
            "0",
        ],
    );
    assert!(stdout.contains("| records/s |"), "{stdout}");
    assert_report_shape(&report, "kafka-produce");
    assert_eq!(report["runs"][0]["records"], 20_000, "{report}");
    assert_eq!(report["runs"][0]["ok_requests"], 20, "{report}");
    assert_eq!(figure(&report, "failed requests"), 0.0);
    assert!(figure(&report, "records/s") > 0.0);
    let ends = server.end_offsets("bench_k");
    assert_eq!(ends.len(), 2);
    assert!(
        ends.iter().all(|&n| n > 0),
        "keys spread over both: {ends:?}"
    );
    assert_eq!(ends.iter().sum::<u64>(), 20_000, "{ends:?}");

    // kafka-consume reads them all back, a fetch of at most 64 KiB at a time.
    let (stdout, report) = bench(
        &server,
        dir.path(),
        "kafka-consume",
        &[
            "kafka-consume",
            "--kafka",
            &kafka,
            "--topic",
            "bench_k",
            "--max-bytes",
            "65536",
        ],
    );
    assert!(stdout.contains("| records/s |"), "{stdout}");
    assert_report_shape(&report, "kafka-consume");
    assert_eq!(report["runs"][0]["records"], 20_000, "{report}");
    let fetches = report["runs"][0]["ok_requests"].as_u64().unwrap();
    assert!(fetches > 1, "{report}");
    assert_eq!(figure(&report, "failed requests"), 0.0);

    server.terminate_ok();
}
