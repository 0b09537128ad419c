//! The SQL and view subcommands against a real server: `kappa sql -e` with
//! the product brief's statements, `kappa views`, `kappa query` (waiting for
//! the produced records with `--after`, the read-your-writes parameter),
//! `kappa replay --from earliest` following the build until version 2 is
//! served, SQL piped to `kappa sql` (a multi-line statement), and SQL errors
//! that exit non-zero naming the line and column.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use kappa_tests::brief::{HIGH_VALUE_ALERTS, PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{after_param, kappa_bin, user_event, Produced, Server, Value};

/// 2026-01-01T00:00:00Z, a multiple of five minutes.
const BASE: i64 = 1_767_225_600_000;

/// The brief's three statements, as one text.
fn brief() -> String {
    format!("{USER_EVENTS}\n\n{PURCHASE_STATS}\n\n{HIGH_VALUE_ALERTS}")
}

/// Runs `kappa --url <server> args…` with `stdin` piped in (if any).
fn kappa_with(server: &Server, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(kappa_bin())
        .arg("--url")
        .arg(server.url())
        .args(args)
        .env_remove("KAPPA_URL")
        .env("KAPPA_HISTORY", "/dev/null")
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning kappa");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(text.as_bytes()).expect("writing stdin");
    }
    child.wait_with_output().expect("waiting for kappa")
}

/// Runs a client command and asserts it succeeds; returns its stdout.
fn kappa_ok(server: &Server, args: &[&str], stdin: Option<&str>) -> String {
    let output = kappa_with(server, args, stdin);
    assert!(
        output.status.success(),
        "kappa {args:?} failed ({}): stdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn produce(server: &Server) -> Vec<Produced> {
    let events = [
        ("u1", "purchase", 10.5, 1_000),
        ("u2", "purchase", 20.0, 2_000),
        ("u1", "view", 0.0, 3_000),
        ("u1", "purchase", 5.0, 60_000),
        ("u3", "purchase", 250_000.0, 61_000),
    ];
    let records: Vec<Value> = events
        .iter()
        .map(|&(user, kind, amount, at)| user_event(user, kind, amount, BASE + at))
        .collect();
    server.produce("user_events", &Value::Array(records))
}

#[test]
fn sql_views_query_and_replay_through_the_cli() {
    let server = Server::start(&[]);
    let created = kappa_ok(&server, &["sql", "-e", &brief()], None);
    assert!(
        created.contains("created stream user_events over topic user_events"),
        "{created}"
    );
    assert!(
        created.contains("created table purchase_stats (version 1)"),
        "{created}"
    );
    assert!(
        created.contains("created stream high_value_alerts (version 1)"),
        "{created}"
    );

    let produced = produce(&server);
    let wait = after_param(&produced);
    let rows = kappa_ok(
        &server,
        &["query", "purchase_stats", "u1", "--after", &wait],
        None,
    );
    let line = rows
        .lines()
        .find(|l| l.starts_with("u1 "))
        .unwrap_or_else(|| panic!("no row of u1:\n{rows}"));
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells,
        [
            "u1",
            "2026-01-01T00:00:00.000Z",
            "2026-01-01T00:05:00.000Z",
            "2",
            "15.5",
            "7.75"
        ],
        "columns in SELECT order: {rows}"
    );
    assert!(
        rows.contains("1 row of purchase_stats version 1, as of offsets"),
        "{rows}"
    );

    let json_rows: Value = serde_json::from_str(&kappa_ok(
        &server,
        &["query", "purchase_stats", "--prefix", "u", "--json"],
        None,
    ))
    .unwrap();
    let keys: Vec<&str> = json_rows["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["u1", "u2", "u3"], "{json_rows}");

    let listed = kappa_ok(&server, &["views"], None);
    let row = listed
        .lines()
        .find(|l| l.starts_with("purchase_stats "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(
        row.split_whitespace().take(4).collect::<Vec<_>>(),
        ["purchase_stats", "table", "running", "1"],
        "{listed}"
    );
    let described = kappa_ok(&server, &["views", "purchase_stats"], None);
    assert!(
        described.starts_with("view: purchase_stats (table), status running\n"),
        "{described}"
    );
    assert!(
        described.contains("served: version 1 (running)"),
        "{described}"
    );
    assert!(
        described.contains("WINDOW TUMBLING (SIZE 5 MINUTES)"),
        "{described}"
    );

    let selected = kappa_ok(
        &server,
        &[
            "sql",
            "-e",
            "SELECT * FROM purchase_stats WHERE user_id = 'u2';",
        ],
        None,
    );
    assert!(selected.lines().any(|l| l.starts_with("u2 ")), "{selected}");
    let header: Vec<&str> = selected
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "KEY",
            "WINDOW_START",
            "WINDOW_END",
            "purchase_count",
            "total_amount",
            "avg_amount"
        ],
        "columns in SELECT order: {selected}"
    );

    let replayed = kappa_ok(
        &server,
        &["replay", "purchase_stats", "--from", "earliest"],
        None,
    );
    assert!(
        replayed.contains("purchase_stats: building version 2"),
        "{replayed}"
    );
    assert!(
        replayed.contains("purchase_stats: version 2 is served"),
        "{replayed}"
    );
    let (status, view) = server.client().get("/v1/views/purchase_stats");
    assert_eq!(status, 200, "{view}");
    assert_eq!(view["served_version"]["version"], 2, "{view}");
    let again: Value = serde_json::from_str(&kappa_ok(
        &server,
        &["query", "purchase_stats", "u1", "--json"],
        None,
    ))
    .unwrap();
    assert_eq!(again["version"], 2, "{again}");
    assert_eq!(again["rows"][0]["row"]["purchase_count"], 2, "{again}");

    // A derived stream's replay takes over at once.
    let stream = kappa_ok(&server, &["replay", "high_value_alerts", "--no-wait"], None);
    assert!(stream.contains("took over at once"), "{stream}");
}

#[test]
fn piped_sql_runs_multi_line_statements() {
    let server = Server::start(&[]);
    let input = "-- the brief's stream, over three lines\n\
                 CREATE STREAM user_events (user_id VARCHAR, event_type VARCHAR,\n\
                 \x20 amount DECIMAL(10,2), event_time TIMESTAMP)\n\
                 \x20 WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON'); SHOW\n\
                 STREAMS;\n\
                 \\history\n\
                 DESCRIBE user_events";
    let out = kappa_ok(&server, &["sql"], Some(input));
    assert!(
        out.contains("created stream user_events over topic user_events (topic created)"),
        "{out}"
    );
    let shown = out
        .lines()
        .find(|l| l.starts_with("user_events "))
        .unwrap_or_else(|| panic!("SHOW STREAMS has no user_events:\n{out}"));
    assert!(shown.contains("declaration"), "{shown}");
    // The last statement has no `;`: it runs at the end of the input.
    assert!(out.contains("amount      DECIMAL(10, 2)"), "{out}");
}

#[test]
fn sql_errors_exit_non_zero_with_the_position() {
    let server = Server::start(&[]);
    let text = "SHOW TABLES;\nCREATE TABLE t AS SELECT user_id, COUNT(*) AS n FROM nowhere\n  WINDOW TUMBLING (SIZE 5 FORTNIGHTS) GROUP BY user_id;\nSHOW STREAMS;";
    let output = kappa_with(&server, &["sql", "-e", text], None);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("error: sql_error: -e: line 3, column "),
        "{stderr}"
    );
    assert!(stderr.contains("FORTNIGHTS"), "{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        stdout.matches("0 rows\n").count(),
        1,
        "the first statement ran, none after the error: {stdout}"
    );

    // Piped: positions count lines of the whole input.
    let piped = kappa_with(
        &server,
        &["sql"],
        Some("SHOW TABLES;\n\nSELECT * FROM\n  nowhere;\n"),
    );
    assert!(!piped.status.success());
    let stderr = String::from_utf8_lossy(&piped.stderr);
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.contains("stdin: "), "{stderr}");
    assert!(
        stderr.contains("line 3") || stderr.contains("line 4"),
        "{stderr}"
    );
}
