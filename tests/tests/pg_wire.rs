//! Views over the PostgreSQL wire protocol (issue 39), with a client
//! written by others: Debian's `psql` against the real binary started with
//! `--pg-listen`. A pull query answers the rows the HTTP rows API answers;
//! `SHOW`, `DESCRIBE` and `EXPLAIN` answer rows; statements run; errors
//! come with their SQLSTATE and do not end the connection; with tokens, a
//! token is the password and its grants decide what runs.
//!
//! Synchronization: the view is polled over HTTP (bounded) until it holds
//! every event; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{json, psql, Server, Value};

fn produce(server: &Server) -> usize {
    let events: Vec<Value> = (0..30)
        .map(|i| {
            json!({"key": format!("u{}", i % 4), "value": {
                "user_id": format!("u{}", i % 4),
                "event_type": if i % 3 == 0 { "view" } else { "purchase" },
                "amount": (i % 7) as f64 * 10.5,
                "event_time": 1_767_225_600_000_i64 + i * 1_000}})
        })
        .collect();
    server.client().produce("user_events", &json!(events));
    events.len()
}

/// The view's rows over HTTP once it has read `n` events.
fn http_rows(server: &Server, n: usize) -> Vec<Value> {
    server
        .client()
        .wait_view_committed("purchase_stats", n as u64, Duration::from_secs(60));
    let body = server.client().view_rows("purchase_stats", "limit=1000");
    body["rows"].as_array().unwrap().clone()
}

#[test]
fn psql_reads_views_and_runs_statements() {
    let server = Server::start(&["--pg-listen", "127.0.0.1:0"]);
    psql(&server, None, USER_EVENTS).unwrap();
    psql(&server, None, PURCHASE_STATS).unwrap();
    let n = produce(&server);
    let rows = http_rows(&server, n);
    assert!(!rows.is_empty());

    // The pull query answers the HTTP rows API's rows, column by column.
    let columns: Vec<String> = server.client().view_rows("purchase_stats", "limit=1")["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect();
    let out = psql(&server, None, "SELECT * FROM purchase_stats").unwrap();
    let got: Vec<Vec<String>> = out
        .lines()
        .map(|l| l.split('|').map(str::to_string).collect())
        .collect();
    assert_eq!(got.len(), rows.len(), "{out}");
    for (line, row) in got.iter().zip(&rows) {
        for (value, column) in line.iter().zip(&columns) {
            let want = &row["row"][column];
            let ok = match want {
                // A window bound: a timestamp, written as PostgreSQL writes one.
                Value::Number(n) if column.starts_with("window") => {
                    let iso = kappa_processor::time::format_timestamp(n.as_i64().unwrap()).unwrap();
                    value == &iso.replace('T', " ").replace('Z', "+00")
                }
                Value::Number(n) if n.is_f64() => {
                    (value.parse::<f64>().unwrap() - n.as_f64().unwrap()).abs() < 1e-9
                }
                Value::Number(n) => value == &n.to_string(),
                Value::String(s) => value == s,
                Value::Null => value.is_empty(),
                other => value == &other.to_string(),
            };
            assert!(ok, "{column}: psql {value:?}, HTTP {want}\n{out}");
        }
    }

    // A key lookup answers that key's rows only.
    let one = psql(
        &server,
        None,
        "SELECT * FROM purchase_stats WHERE user_id = 'u1'",
    )
    .unwrap();
    assert!(one.lines().count() >= 1);
    assert!(one.lines().all(|l| l.starts_with("u1|")), "{one}");

    // A key range answers the rows API's rows of those keys, in key order.
    let range = psql(
        &server,
        None,
        "SELECT user_id, purchase_count FROM purchase_stats WHERE user_id >= 'u1' AND user_id < 'u3'",
    )
    .unwrap();
    let want: Vec<String> = rows
        .iter()
        .filter(|r| ("u1".."u3").contains(&r["key"].as_str().unwrap()))
        .map(|r| {
            format!(
                "{}|{}",
                r["row"]["user_id"].as_str().unwrap(),
                r["row"]["purchase_count"]
            )
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(range.lines().collect::<Vec<_>>(), want, "{range}");

    // SHOW, DESCRIBE, EXPLAIN answer rows; session statements answer.
    let tables = psql(&server, None, "SHOW TABLES").unwrap();
    assert!(
        tables.lines().any(|l| l.starts_with("purchase_stats|")),
        "{tables}"
    );
    let described = psql(&server, None, "DESCRIBE purchase_stats").unwrap();
    let described: BTreeMap<&str, &str> = described
        .lines()
        .map(|l| {
            let mut f = l.split('|');
            (f.next().unwrap(), f.next().unwrap_or(""))
        })
        .collect();
    assert_eq!(described.get("user_id"), Some(&"VARCHAR"), "{described:?}");
    let plan = psql(&server, None, "EXPLAIN purchase_stats").unwrap();
    assert!(plan.contains("aggregate"), "{plan}");
    let version = psql(&server, None, "SELECT version()").unwrap();
    assert!(version.contains("Kappa"), "{version}");
    psql(&server, None, "SET extra_float_digits = 3; BEGIN; COMMIT").unwrap();
    // Session statements beside Kappa's in one query: each is answered,
    // in order (the SET used to answer for the whole query).
    let mixed = psql(
        &server,
        None,
        "SET extra_float_digits = 3; SELECT user_id FROM purchase_stats WHERE user_id = 'u1'; SHOW TABLES",
    )
    .unwrap();
    assert!(mixed.lines().any(|l| l == "u1"), "{mixed}");
    assert!(
        mixed.lines().any(|l| l.starts_with("purchase_stats|")),
        "{mixed}"
    );

    // Errors come with their SQLSTATE and position; the server goes on.
    let e = psql(&server, None, "SELECT * FROM nowhere").unwrap_err();
    assert!(e.contains("ERROR:") && e.contains("nowhere"), "{e}");
    let e = psql(&server, None, "SELEKT 1").unwrap_err();
    assert!(e.contains("ERROR:"), "{e}");
    let e = psql(&server, None, "SHOW no_such_setting").unwrap_err();
    assert!(e.contains("unrecognized configuration parameter"), "{e}");
    assert!(psql(&server, None, "SELECT * FROM purchase_stats").is_ok());
}

/// `REPLAY`, `PROMOTE` and `ROLLBACK` over psql run as the HTTP routes
/// do: a version replayed from the input's end with a manual swap waits
/// while queries keep answering the served version's rows (a query during
/// a rebuild), `PROMOTE` serves it, `ROLLBACK` serves the first again.
/// Refusals come with their SQLSTATE; a transaction's own `ROLLBACK` is
/// still one.
#[test]
fn psql_replays_promotes_and_rolls_back_while_queries_read_the_served_version() {
    let server = Server::start(&["--pg-listen", "127.0.0.1:0"]);
    psql(&server, None, USER_EVENTS).unwrap();
    psql(&server, None, PURCHASE_STATS).unwrap();
    let n = produce(&server);
    let all = http_rows(&server, n).len();
    assert!(all > 0);
    let count = || -> usize {
        let out = psql(&server, None, "SELECT COUNT(*) FROM purchase_stats").unwrap();
        out.trim().parse().unwrap()
    };
    assert_eq!(count(), all);

    let e = psql(&server, None, "PROMOTE TABLE purchase_stats").unwrap_err();
    assert!(
        e.contains("55000") && e.contains("no version being built"),
        "{e}"
    );
    let e = psql(
        &server,
        None,
        "REPLAY purchase_stats FROM OFFSETS (1000000)",
    )
    .unwrap_err();
    assert!(e.contains("22023") && e.contains("beyond the end"), "{e}");
    let e = psql(&server, None, "REPLAY TABLE nowhere").unwrap_err();
    assert!(e.contains("42P01") && e.contains("nowhere"), "{e}");

    // A version reading only what comes after now, waiting for PROMOTE.
    let replayed = psql(
        &server,
        None,
        "REPLAY TABLE purchase_stats FROM LATEST WITH (SWAP = 'MANUAL')",
    )
    .unwrap();
    assert_eq!(replayed.trim(), "purchase_stats|2||", "{replayed}");
    kappa_tests::eventually("version 2 ready", Duration::from_secs(60), || {
        let view = server.client().describe_view("purchase_stats");
        (view["status"] == "ready").then_some(())
    });
    // During the rebuild queries answer the served version, as HTTP does.
    assert_eq!(count(), all);
    assert_eq!(
        server.client().view_rows("purchase_stats", "limit=1000")["rows"]
            .as_array()
            .unwrap()
            .len(),
        all
    );

    let promoted = psql(&server, None, "PROMOTE purchase_stats").unwrap();
    assert_eq!(promoted.trim(), "purchase_stats||2|1", "{promoted}");
    assert_eq!(count(), 0, "version 2 read nothing yet");
    let rolled = psql(&server, None, "ROLLBACK TABLE purchase_stats").unwrap();
    assert_eq!(rolled.trim(), "purchase_stats||1|2", "{rolled}");
    assert_eq!(count(), all);

    // A transaction's ROLLBACK ends a transaction, as before.
    psql(&server, None, "ROLLBACK").unwrap();
    psql(&server, None, "ROLLBACK WORK").unwrap();
    // The same statement over HTTP answers the same fields.
    let results = server
        .client()
        .sql_ok("REPLAY purchase_stats FROM EARLIEST");
    assert_eq!(results[0]["statement"], "REPLAY", "{results:?}");
    assert_eq!(results[0]["name"], "purchase_stats");
    assert_eq!(results[0]["from"], "earliest");
    assert!(
        results[0]["building_version"].as_u64().unwrap() > 2,
        "{results:?}"
    );
}

#[test]
fn with_tokens_the_password_is_a_token_and_its_grants_decide() {
    const BOOTSTRAP: &str = "bootstrap-secret-for-the-pg-tests";
    let server = Server::start_env(
        &["--auth", "tokens", "--pg-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    psql(&server, Some(BOOTSTRAP), USER_EVENTS).unwrap();
    psql(&server, Some(BOOTSTRAP), PURCHASE_STATS).unwrap();

    let e = psql(&server, Some("not-a-token"), "SELECT 1").unwrap_err();
    assert!(e.contains("password authentication failed"), "{e}");
    let e = psql(&server, None, "SELECT 1").unwrap_err();
    assert!(e.contains("password"), "{e}");

    let (status, body) = server.client().with_token(BOOTSTRAP).post_json(
        "/v1/tokens",
        &json!({"name": "reader", "grants": ["read-view:purchase_stats"]}),
    );
    assert_eq!(status, 201, "{body}");
    let reader = body["token"].as_str().unwrap().to_string();
    psql(&server, Some(&reader), "SELECT * FROM purchase_stats").unwrap();
    let e = psql(&server, Some(&reader), "DROP TABLE purchase_stats").unwrap_err();
    assert!(e.contains("ERROR:"), "{e}");
    // Replay, promote and rollback need the admin grant, as over HTTP.
    for statement in [
        "REPLAY TABLE purchase_stats",
        "PROMOTE purchase_stats",
        "ROLLBACK TABLE purchase_stats",
    ] {
        let e = psql(&server, Some(&reader), statement).unwrap_err();
        assert!(
            e.contains("42501") && e.contains("admin"),
            "{statement}: {e}"
        );
    }
    // The view is still there.
    psql(&server, Some(BOOTSTRAP), "DESCRIBE purchase_stats").unwrap();
}

/// The rows of `purchase_stats` over HTTP as `[user_id, events, ms of
/// window_start]`, sorted, to compare with what a driver read.
fn http_summary(server: &Server) -> Vec<Value> {
    let mut rows: Vec<Value> = server.client().view_rows("purchase_stats", "limit=1000")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let row = &r["row"];
            json!([row["user_id"], row["purchase_count"], row["window_start"]])
        })
        .collect();
    rows.sort_by_key(|r| r.to_string());
    rows
}

/// A server with `--pg-listen` whose `purchase_stats` has read every
/// event produced.
fn serving_purchase_stats() -> Server {
    let server = Server::start(&["--pg-listen", "127.0.0.1:0"]);
    server.client().sql_ok(USER_EVENTS);
    server.client().sql_ok(PURCHASE_STATS);
    let n = produce(&server);
    http_rows(&server, n);
    server
}

/// psycopg 3 (from the Python registry): the extended protocol with a
/// parameter, a server-side prepared statement run twice, the simple
/// protocol, typed results (int8, timestamptz) and an error that leaves
/// the connection usable; binary results equal the text ones, and a
/// parameter sent in binary binds as one sent as text.
#[test]
fn psycopg_reads_with_parameters_and_prepared_statements() {
    let server = serving_purchase_stats();
    let port = server.pg_addr().port();
    let script = format!(
        r#"
import json, psycopg
conn = psycopg.connect(host="127.0.0.1", port={port}, user="kappa", dbname="kappa",
                       sslmode="disable", autocommit=True)
def rows(cur):
    names = [d.name for d in cur.description]
    out = []
    for r in cur.fetchall():
        row = dict(zip(names, r))
        out.append([row["user_id"], row["purchase_count"],
                    int(row["window_start"].timestamp() * 1000)])
    return sorted(out, key=json.dumps)
every = rows(conn.execute("SELECT * FROM purchase_stats"))
simple = rows(psycopg.ClientCursor(conn).execute("SELECT * FROM purchase_stats"))
one = [rows(conn.execute("SELECT * FROM purchase_stats WHERE user_id = %s", ("u1",), prepare=True))
       for _ in range(2)]
types = [type(v).__name__ for v in conn.execute("SELECT * FROM purchase_stats").fetchone()]
quoted = len(conn.execute("SELECT * FROM purchase_stats WHERE user_id = %s", ("u1' OR 'a'='a",)).fetchall())
try:
    conn.execute("SELECT * FROM nowhere")
    error = None
except psycopg.Error as e:
    error = e.sqlstate
after = len(conn.execute("SELECT * FROM purchase_stats").fetchall())
# Binary results (every column type of the view) and a binary parameter.
as_text = sorted(map(repr, conn.execute("SELECT * FROM purchase_stats").fetchall()))
as_binary = sorted(map(repr, conn.execute("SELECT * FROM purchase_stats", binary=True).fetchall()))
binary_types = sorted({{type(v).__name__ for v in
                       conn.execute("SELECT * FROM purchase_stats", binary=True).fetchone()}})
binary_one = rows(conn.execute("SELECT * FROM purchase_stats WHERE user_id = %b", ("u1",),
                               binary=True, prepare=True))
print(json.dumps({{"every": every, "simple": simple, "one": one, "types": types,
                  "quoted": quoted, "error": error, "after": after,
                  "binary_same": as_text == as_binary, "binary_types": binary_types,
                  "binary_one": binary_one}}))
"#
    );
    let out = kappa_tests::run_python(&script, "the psycopg client");
    let got: Value = serde_json::from_slice(&out).unwrap();
    let want = http_summary(&server);
    assert_eq!(got["every"], json!(want), "{got}");
    assert_eq!(got["simple"], json!(want), "{got}");
    let u1: Vec<&Value> = want.iter().filter(|r| r[0] == "u1").collect();
    assert_eq!(got["one"], json!([u1, u1]), "{got}");
    assert_eq!(got["types"][0], "str", "{got}");
    assert_eq!(got["types"][1], "datetime", "{got}");
    // A parameter is a value, never SQL: a quote in it matches no key.
    assert_eq!(got["quoted"], 0, "{got}");
    assert_eq!(got["error"], "42P01", "{got}");
    assert_eq!(got["after"], json!(want.len()), "{got}");
    assert_eq!(got["binary_same"], true, "{got}");
    assert_eq!(
        got["binary_types"],
        json!(["Decimal", "datetime", "int", "str"]),
        "{got}"
    );
    assert_eq!(got["binary_one"], json!(u1), "{got}");
}

/// node-postgres (`pg` from the npm registry): a parameterized query (the
/// extended protocol) and a plain one (the simple protocol).
#[test]
fn node_postgres_reads_with_parameters() {
    let server = serving_purchase_stats();
    let modules = kappa_tests::kafkajs_modules();
    let script = format!(
        r#"
const {{ Client }} = require(require('path').join({modules:?}, 'pg'));
(async () => {{
  const c = new Client({{ host: '127.0.0.1', port: {port}, user: 'kappa', database: 'kappa' }});
  await c.connect();
  const summary = (r) => r.rows
    .map((row) => [row.user_id, Number(row.purchase_count), row.window_start.getTime()])
    .sort((a, b) => JSON.stringify(a) < JSON.stringify(b) ? -1 : 1);
  const every = summary(await c.query('SELECT * FROM purchase_stats'));
  const one = summary(await c.query('SELECT * FROM purchase_stats WHERE user_id = $1', ['u1']));
  let error = null;
  try {{ await c.query('SELECT * FROM nowhere WHERE user_id = $1', ['x']); }} catch (e) {{ error = e.code; }}
  await c.end();
  console.log(JSON.stringify({{ every, one, error }}));
}})().catch((e) => {{ console.error(e); process.exit(1); }});
"#,
        modules = modules.display().to_string(),
        port = server.pg_addr().port()
    );
    let out = Command::new("node")
        .arg("-e")
        .arg(&script)
        .output()
        .expect("running node");
    assert!(
        out.status.success(),
        "node-postgres failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).unwrap();
    let want = http_summary(&server);
    assert_eq!(got["every"], json!(want), "{got}");
    let u1: Vec<&Value> = want.iter().filter(|r| r[0] == "u1").collect();
    assert_eq!(got["one"], json!(u1), "{got}");
    assert_eq!(got["error"], "42P01", "{got}");
}
