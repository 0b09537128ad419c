//! The first hour with the `kappa` binary (issue 16): what a newcomer types
//! and what they should get. `--version` names `kappa`; `serve` and `demo`
//! do not offer the client's `--url`, which works before and after the
//! client subcommand; `demo --listen` like `serve --listen`; logs written
//! to a file carry no colour codes; an unknown group is an error; bare JSON
//! lines (what `kappa-datagen` writes) are produced as values; a mistyped
//! view or topic name gets a suggestion; raw SQL posted as JSON gets a hint; `clear`
//! in the SQL shell does not swallow the next statement; `DESCRIBE` of a
//! table shows its columns and `key = value` settings.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{json, kappa_bin, run_cli, Server, Value};

/// Runs `kappa args…` with no `KAPPA_*` client settings from the
/// environment, `stdin` piped in (if any).
fn kappa_raw(args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    let mut command = Command::new(kappa_bin());
    command
        .args(args)
        .env_remove("KAPPA_URL")
        .env_remove("KAPPA_TOKEN")
        .env_remove("KAPPA_CA_CERT")
        .env("KAPPA_HISTORY", "/dev/null")
        .envs(env.iter().copied())
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().expect("spawning kappa");
    if let Some(text) = stdin {
        let mut pipe = child.stdin.take().expect("piped stdin");
        pipe.write_all(text.as_bytes()).expect("writing stdin");
    }
    child.wait_with_output().expect("waiting for kappa")
}

/// Runs the client `kappa --url <server> args…`.
fn kappa(server: &Server, args: &[&str], stdin: Option<&str>) -> Output {
    let url = server.url();
    let mut all = vec!["--url", url.as_str()];
    all.extend_from_slice(args);
    kappa_raw(&all, &[], stdin)
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts `output` is a success and returns its stdout.
fn ok(output: Output) -> String {
    assert!(
        output.status.success(),
        "kappa failed ({}): stdout:\n{}\nstderr:\n{}",
        output.status,
        stdout(&output),
        stderr(&output)
    );
    stdout(&output)
}

/// Asserts `output` is a failure and returns its stderr.
fn failed(output: Output) -> String {
    assert!(
        !output.status.success(),
        "kappa succeeded: stdout:\n{}\nstderr:\n{}",
        stdout(&output),
        stderr(&output)
    );
    stderr(&output)
}

#[test]
fn version_names_the_binary() {
    let text = ok(kappa_raw(&["--version"], &[], None));
    assert_eq!(text, format!("kappa {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn only_client_subcommands_offer_client_options() {
    for command in ["serve", "demo"] {
        let help = ok(kappa_raw(&[command, "--help"], &[], None));
        for option in ["--url", "--server", "--token", "--ca-cert"] {
            assert!(
                !help.contains(option),
                "`kappa {command} --help` offers {option}:\n{help}"
            );
        }
    }
    let help = ok(kappa_raw(&["topics", "list", "--help"], &[], None));
    for option in ["--url", "--token", "--ca-cert"] {
        assert!(help.contains(option), "{help}");
    }
    let error = failed(kappa_raw(
        &["serve", "--url", "http://127.0.0.1:1"],
        &[],
        None,
    ));
    assert!(error.contains("--url"), "{error}");
    let error = failed(kappa_raw(
        &["--url", "http://127.0.0.1:1", "serve"],
        &[],
        None,
    ));
    assert!(error.contains("client subcommands"), "{error}");
}

#[test]
fn client_options_work_before_and_after_the_subcommand() {
    let server = Server::start(&[]);
    server
        .client()
        .create_topic(&serde_json::json!({"name": "orders", "partitions": 1}));
    let url = server.url();
    let unreachable = "http://127.0.0.1:1";
    let placements: [&[&str]; 4] = [
        &["--url", &url, "topics", "list"],
        &["topics", "list", "--url", &url],
        &["topics", "--url", &url, "list"],
        &["--server", &url, "topics", "list"],
    ];
    for args in placements {
        let listed = ok(kappa_raw(args, &[], None));
        assert!(listed.contains("orders"), "{args:?}: {listed}");
        // A flag on the command line wins over KAPPA_URL.
        let listed = ok(kappa_raw(args, &[("KAPPA_URL", unreachable)], None));
        assert!(
            listed.contains("orders"),
            "{args:?} with KAPPA_URL: {listed}"
        );
    }
    let listed = ok(kappa_raw(&["topics", "list"], &[("KAPPA_URL", &url)], None));
    assert!(listed.contains("orders"), "{listed}");
    // After the subcommand wins over before it.
    let listed = ok(kappa_raw(
        &["--url", unreachable, "topics", "list", "--url", &url],
        &[],
        None,
    ));
    assert!(listed.contains("orders"), "{listed}");
}

#[test]
fn demo_listens_with_listen_like_serve() {
    // `--rate 0` stops the demo before it binds: only the parsing is tested.
    for flag in ["--listen", "--addr"] {
        let error = failed(kappa_raw(
            &["demo", flag, "127.0.0.1:0", "--rate", "0"],
            &[],
            None,
        ));
        assert!(error.contains("--rate must be above 0"), "{flag}: {error}");
    }
    let help = ok(kappa_raw(&["demo", "--help"], &[], None));
    assert!(help.contains("--listen"), "{help}");
    assert!(!help.contains("--addr"), "{help}");
}

#[test]
fn logs_to_a_file_have_no_colours() {
    // NO_COLOR empty counts as unset (no-color.org).
    let server = Server::start_env(&[], &[("NO_COLOR", "")]);
    let log = server.stderr_log();
    assert!(log.contains("kappa serving"), "{log}");
    assert!(!log.contains('\x1b'), "ANSI codes in a log file:\n{log:?}");
}

#[test]
fn offsets_of_an_unknown_group_is_an_error() {
    let server = Server::start(&[]);
    for json in [false, true] {
        let mut args = vec!["groups", "offsets", "nosuchgroup"];
        if json {
            args.push("--json");
        }
        let error = failed(kappa(&server, &args, None));
        assert!(
            error.contains("error: unknown group \"nosuchgroup\""),
            "{error}"
        );
    }
    // A group that committed somewhere is known, on any topic.
    let client = server.client();
    client.create_topic(&serde_json::json!({"name": "orders", "partitions": 1}));
    client.create_topic(&serde_json::json!({"name": "other", "partitions": 1}));
    client.produce("orders", &serde_json::json!([{"value": 1}]));
    run_cli(
        &server,
        &[
            "groups", "reset", "g", "--topic", "orders", "--to", "latest",
        ],
    );
    let table = ok(kappa(&server, &["groups", "offsets", "g"], None));
    assert!(table.contains("orders"), "{table}");
    let table = ok(kappa(
        &server,
        &["groups", "offsets", "g", "--topic", "other"],
        None,
    ));
    assert!(table.contains("other"), "{table}");
    let error = failed(kappa(
        &server,
        &["groups", "offsets", "nosuchgroup", "--topic", "orders"],
        None,
    ));
    assert!(
        error.contains("error: unknown group \"nosuchgroup\""),
        "{error}"
    );
}

#[test]
fn produce_takes_bare_json_lines_as_values() {
    let server = Server::start(&[]);
    let client = server.client();
    for topic in ["bare", "raw", "envelope", "bad"] {
        client.create_topic(&serde_json::json!({"name": topic, "partitions": 1}));
    }
    // What kappa-datagen writes: one event object per line.
    let bare = "{\"user_id\":\"u1\",\"amount\":5}\n{\"user_id\":\"u2\",\"value\":7}\n";
    ok(kappa(&server, &["produce", "bare"], Some(bare)));
    assert_eq!(
        server.read_values("bare", 0),
        vec![
            serde_json::json!({"user_id": "u1", "amount": 5}),
            serde_json::json!({"user_id": "u2", "value": 7}),
        ]
    );
    // --raw: every line is a value, even one shaped like an envelope.
    let raw = "{\"value\":1}\n\"text\"\n3\n";
    ok(kappa(&server, &["produce", "raw", "--raw"], Some(raw)));
    assert_eq!(
        server.read_values("raw", 0),
        vec![
            serde_json::json!({"value": 1}),
            serde_json::json!("text"),
            serde_json::json!(3),
        ]
    );
    // A first line with an envelope key: records.
    let envelope = "{\"key\":\"k\",\"value\":{\"n\":1}}\n{\"value\":2}\n";
    ok(kappa(&server, &["produce", "envelope"], Some(envelope)));
    assert_eq!(
        server.read_values("envelope", 0),
        vec![serde_json::json!({"n": 1}), serde_json::json!(2)]
    );
    // Envelopes without a value: the error says what to do.
    let error = failed(kappa(
        &server,
        &["produce", "bad"],
        Some("{\"key\":\"k\"}\n"),
    ));
    assert!(error.contains("line 1"), "{error}");
    assert!(error.contains("--raw"), "{error}");
    assert!(error.contains("{\"key\":..,\"value\":..}"), "{error}");
    let error = failed(kappa(&server, &["produce", "bad"], Some("42\n")));
    assert!(error.contains("--raw"), "{error}");
    assert!(server.read_values("bad", 0).is_empty());
}

#[test]
fn mistyped_view_and_topic_names_get_suggestions() {
    let server = Server::start(&[]);
    server
        .client()
        .sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    let commands: [&[&str]; 5] = [
        &["views", "purchase_stat"],
        &["query", "purchse_stats", "u1"],
        &["replay", "purchase_statz", "--no-wait"],
        &[
            "sql",
            "-e",
            "SELECT * FROM purchase_stat WHERE user_id = 'u1';",
        ],
        &["sql", "-e", "DESCRIBE purchse_stats;"],
    ];
    for args in commands {
        let error = failed(kappa(&server, args, None));
        assert!(error.contains("unknown_view"), "{args:?}: {error}");
        assert!(
            error.contains("did you mean purchase_stats?"),
            "{args:?}: {error}"
        );
    }
    let error = failed(kappa(&server, &["views", "zzzzzzzzzz"], None));
    assert!(!error.contains("did you mean"), "{error}");
    let commands: [&[&str]; 2] = [
        &["topics", "describe", "user_event"],
        &["tail", "usr_events", "--no-follow"],
    ];
    for args in commands {
        let error = failed(kappa(&server, args, None));
        assert!(error.contains("unknown_topic"), "{args:?}: {error}");
        assert!(
            error.contains("did you mean user_events?"),
            "{args:?}: {error}"
        );
    }
}

#[test]
fn raw_sql_posted_as_json_gets_a_hint() {
    let server = Server::start(&[]);
    let reply = server.client().send(
        "POST",
        "/v1/statements",
        Some("application/json"),
        &[],
        Some(b"SHOW TABLES;"),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "the body is not JSON: send {\"sql\": \"...\"} or use Content-Type: application/sql"
        ),
        "{}",
        reply.text
    );
    // A JSON object that does not fit still names the JSON problem.
    let reply = server.client().send(
        "POST",
        "/v1/statements",
        Some("application/json"),
        &[],
        Some(b"{\"query\": \"SHOW TABLES;\"}"),
    );
    assert_eq!(reply.status, 400, "{}", reply.text);
    assert!(reply.text.contains("sql"), "{}", reply.text);
}

#[test]
fn clear_in_the_sql_shell_keeps_the_next_statement() {
    let server = Server::start(&[]);
    let text = ok(kappa(
        &server,
        &["sql"],
        Some("clear\nSHOW TOPICS;\nclear;\nSHOW TABLES;\n"),
    ));
    assert!(text.contains("0 rows"), "{text}");
    assert_eq!(text.matches("0 rows").count(), 2, "{text}");
}

#[test]
fn describe_shows_a_tables_columns_and_settings() {
    let server = Server::start(&[]);
    server
        .client()
        .sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    let text = ok(kappa(
        &server,
        &["sql", "-e", "DESCRIBE purchase_stats;"],
        None,
    ));
    let has_row = |name: &str, ty: &str| {
        text.lines().any(|l| {
            let cells: Vec<&str> = l.split_whitespace().collect();
            cells.first() == Some(&name) && l.contains(ty)
        })
    };
    for (name, ty) in [
        ("user_id", "VARCHAR"),
        ("window_start", "TIMESTAMP"),
        ("window_end", "TIMESTAMP"),
        ("purchase_count", "BIGINT"),
        ("total_amount", "DECIMAL"),
        ("avg_amount", "DECIMAL"),
    ] {
        assert!(has_row(name, ty), "no column {name} {ty}:\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.trim().starts_with("watermark_delay_ms = ")),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.trim().starts_with("emit = ")),
        "{text}"
    );
    assert!(!text.contains('{'), "raw JSON in:\n{text}");
}

#[test]
fn a_client_piped_into_a_reader_that_stops_early_ends_quietly() {
    let server = Server::start(&[]);
    let client = server.client();
    client.create_topic(&json!({"name": "many", "partitions": 1}));
    let records: Vec<Value> = (0..3000)
        .map(|i| json!({"value": {"i": i, "padding": "x".repeat(100)}}))
        .collect();
    client.produce("many", &Value::Array(records));
    // `kappa tail ... | head -1`: the reader closes the pipe after one line,
    // with far more than a pipe buffer still to come.
    let mut child = Command::new(kappa_bin())
        .args([
            "--url",
            &server.url(),
            "tail",
            "many",
            "--from",
            "earliest",
            "--no-follow",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(!first.is_empty());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
