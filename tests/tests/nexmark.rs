//! Nexmark (issue 38): the queries in tools/nexmark/kappa/ run over events
//! from `kappa-datagen nexmark`, and each query's rows after all events
//! equal an independent oracle's: DuckDB (in the tests' venv) answering the
//! query's meaning over the same NDJSON files — on one thread, and again
//! with two workers of each kind (`WITH (PARALLELISM=2)`), as the
//! benchmark runs them.
//!
//! Synchronization: each query's served version is polled (bounded) until
//! it has committed its input's end offsets; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use kappa_tests::{
    datagen_bin, eventually, json, run_python, workspace_root, Client, Server, Value,
};

/// Events generated (persons, auctions and bids together).
const EVENTS: u64 = 20_000;
const DEADLINE: Duration = Duration::from_secs(120);

/// Where a query's rows are read.
enum Output {
    /// A derived stream: every record of its topic.
    Stream,
    /// A view: every row.
    View,
}

/// One Nexmark query: its file under tools/nexmark/kappa/, the stream or
/// view it makes, the input whose end it must reach, the columns compared,
/// and the DuckDB query giving those columns in that order (`{watermark}`
/// in it: the watermark the view's rows are as of).
struct Query {
    file: &'static str,
    name: &'static str,
    input: &'static str,
    output: Output,
    columns: &'static [&'static str],
    oracle: &'static str,
}

const QUERIES: &[Query] = &[
    Query {
        file: "q0.sql",
        name: "nexmark_q0",
        input: "bid",
        output: Output::Stream,
        columns: &["auction", "bidder", "price", "date_time", "extra"],
        oracle: "SELECT auction, bidder, price, date_time, extra FROM bid",
    },
    Query {
        file: "q1.sql",
        name: "nexmark_q1",
        input: "bid",
        output: Output::Stream,
        columns: &["auction", "bidder", "price", "date_time", "extra"],
        oracle: "SELECT auction, bidder, 0.908 * price, date_time, extra FROM bid",
    },
    Query {
        file: "q2.sql",
        name: "nexmark_q2",
        input: "bid",
        output: Output::Stream,
        columns: &["auction", "price"],
        oracle: "SELECT auction, price FROM bid WHERE auction % 123 = 0",
    },
    Query {
        file: "q3.sql",
        name: "nexmark_q3",
        // Loaded after person: its end committed, person's is too.
        input: "auction",
        output: Output::Stream,
        columns: &["name", "city", "state", "id"],
        oracle: "SELECT p.name, p.city, p.state, a.id FROM auction a JOIN person p ON a.seller = p.id \
                 WHERE a.category = 10 AND p.state IN ('OR', 'ID', 'CA')",
    },
    Query {
        file: "q4.sql",
        name: "nexmark_q4",
        input: "bid",
        output: Output::View,
        columns: &["category", "avg_final"],
        oracle: "SELECT category, AVG(final) FROM (SELECT a.id, a.category, MAX(b.price) AS final \
                 FROM auction a JOIN bid b ON a.id = b.auction \
                 WHERE b.date_time BETWEEN a.date_time AND a.expires GROUP BY a.id, a.category) \
                 GROUP BY category",
    },
    Query {
        file: "q5.sql",
        name: "nexmark_q5",
        input: "bid",
        output: Output::View,
        columns: &["auction", "num", "starttime", "endtime"],
        // The hopping windows (10 s every 2 s) holding each bid, the
        // auctions with the most bids in each closed one.
        oracle: "WITH w AS (SELECT auction, unnest(range(date_time // 2000 * 2000 - 8000, \
                   date_time // 2000 * 2000 + 1, 2000)) AS starttime FROM bid), \
                 c AS (SELECT auction, starttime, COUNT(*) AS num FROM w GROUP BY auction, starttime), \
                 m AS (SELECT starttime, MAX(num) AS maxn FROM c GROUP BY starttime) \
                 SELECT c.auction, c.num, c.starttime, c.starttime + 10000 FROM c JOIN m USING (starttime) \
                 WHERE c.num = m.maxn AND c.starttime + 10000 <= {watermark}",
    },
    Query {
        file: "q7.sql",
        name: "nexmark_q7",
        input: "bid",
        output: Output::View,
        columns: &["auction", "price", "bidder", "date_time", "extra"],
        // The bids with the highest price of each closed 10 s window.
        oracle: "WITH b AS (SELECT DISTINCT auction, bidder, price, date_time, extra, \
                   date_time // 10000 * 10000 AS starttime FROM bid), \
                 m AS (SELECT starttime, MAX(price) AS maxp FROM b GROUP BY starttime) \
                 SELECT b.auction, b.price, b.bidder, b.date_time, b.extra FROM b JOIN m USING (starttime) \
                 WHERE b.price = m.maxp AND b.starttime + 10000 <= {watermark}",
    },
    Query {
        file: "q8.sql",
        name: "nexmark_q8",
        input: "auction",
        output: Output::View,
        columns: &["id", "name", "starttime"],
        oracle: "SELECT p.id, p.name, p.date_time // 10000 * 10000 FROM person p JOIN auction a \
                 ON p.id = a.seller AND p.date_time // 10000 = a.date_time // 10000 \
                 GROUP BY p.id, p.name, p.date_time // 10000",
    },
    Query {
        file: "q11.sql",
        name: "nexmark_q11",
        input: "bid",
        output: Output::View,
        columns: &["bidder", "bid_count", "starttime", "endtime"],
        // Sessions as gaps and islands: a bid more than 10 s after the
        // bidder's previous one starts a session; a session ends 10 s after
        // its last bid.
        oracle: "WITH b AS (SELECT bidder, date_time, \
                   CASE WHEN date_time - LAG(date_time) OVER (PARTITION BY bidder ORDER BY date_time) <= 10000 \
                   THEN 0 ELSE 1 END AS starts FROM bid), \
                 s AS (SELECT bidder, date_time, SUM(starts) OVER (PARTITION BY bidder ORDER BY date_time \
                   ROWS UNBOUNDED PRECEDING) AS session FROM b) \
                 SELECT bidder, COUNT(*), MIN(date_time), MAX(date_time) + 10000 FROM s GROUP BY bidder, session",
    },
];

/// A row as compared: numbers that are not integers are written with three
/// decimals (both engines compute `0.908 * price` in their own types).
fn normalized(values: impl Iterator<Item = Value>) -> String {
    let values: Vec<Value> = values
        .map(|v| match v {
            Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
                json!(format!("{:.3}", n.as_f64().unwrap()))
            }
            v => v,
        })
        .collect();
    serde_json::to_string(&values).unwrap()
}

/// DuckDB's rows for `sql` over the three NDJSON files in `dir`, sorted.
fn oracle_rows(dir: &Path, sql: &str) -> Vec<String> {
    let script = format!(
        r#"
import decimal, duckdb, json
con = duckdb.connect()
for t in ("person", "auction", "bid"):
    con.execute(f"CREATE TABLE {{t}} AS SELECT * FROM read_json('{dir}/{{t}}.ndjson', format='newline_delimited')")
def plain(v):
    return float(v) if isinstance(v, decimal.Decimal) else v
print(json.dumps([[plain(v) for v in row] for row in con.execute({sql:?}).fetchall()]))
"#,
        dir = dir.display(),
        sql = sql,
    );
    let out = run_python(&script, "the DuckDB oracle");
    let rows: Vec<Vec<Value>> = serde_json::from_slice(&out).unwrap();
    let mut rows: Vec<String> = rows
        .into_iter()
        .map(|r| normalized(r.into_iter()))
        .collect();
    rows.sort();
    rows
}

/// `text` (one `CREATE .. AS` of `name`) made `name_w2` with two workers.
fn with_two_workers(text: &str, name: &str) -> String {
    let kind = if text.contains(&format!("CREATE TABLE {name} AS")) {
        "TABLE"
    } else {
        "STREAM"
    };
    let head = format!("CREATE {kind} {name} AS");
    assert!(text.contains(&head), "{name}: expected {head}");
    text.replace(
        &head,
        &format!("CREATE {kind} {name}_w2 WITH (PARALLELISM=2) AS"),
    )
}

/// Kappa's rows of `query` (its `columns` in order) as `name` made them,
/// sorted.
fn kappa_rows(client: &Client, query: &Query, name: &str) -> Vec<String> {
    let pick = |row: &Value| {
        normalized(query.columns.iter().map(|c| {
            row.get(*c)
                .cloned()
                .unwrap_or_else(|| panic!("{}: no column {c} in {row}", query.name))
        }))
    };
    let mut rows: Vec<String> = match query.output {
        Output::Stream => {
            let partitions = client.end_offsets(name).len() as u32;
            (0..partitions)
                .flat_map(|p| client.read_all(name, p))
                .map(|record| pick(&record["value"]))
                .collect()
        }
        Output::View => {
            let mut rows = Vec::new();
            let mut page = client.view_rows(name, "limit=10000");
            loop {
                rows.extend(
                    page["rows"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|r| pick(&r["row"])),
                );
                let Some(cursor) = page["next_cursor"].as_str() else {
                    break rows;
                };
                page = client.view_rows(name, &format!("limit=10000&cursor={cursor}"));
            }
        }
    };
    rows.sort();
    rows
}

/// Waits until `name`'s served version has committed the end of `input`.
fn wait_caught_up(client: &Client, name: &str, input: &str) {
    let ends = client.end_offsets(input);
    eventually(&format!("{name} committed {ends:?}"), DEADLINE, || {
        let d = client.describe_view(name);
        let committed: Vec<u64> = d["served_version"]["partitions"]
            .as_array()?
            .iter()
            .map(|p| p["committed"].as_u64().unwrap_or(0))
            .collect();
        (committed == ends).then_some(())
    });
}

/// Produces `dir/{topic}.ndjson` to `topic` (2 partitions), keyed by
/// `key`, in one NDJSON request per 5,000 lines.
fn load(client: &Client, dir: &Path, topic: &str, key: &str) {
    client.create_topic(&json!({"name": topic, "partitions": 2}));
    let text = std::fs::read_to_string(dir.join(format!("{topic}.ndjson"))).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for chunk in lines.chunks(5_000) {
        let body: String = chunk
            .iter()
            .map(|line| {
                let value: Value = serde_json::from_str(line).unwrap();
                let record = json!({
                    "key": value[key].to_string(),
                    "value": value,
                    "timestamp": value["date_time"],
                });
                format!("{record}\n")
            })
            .collect();
        let (status, answer) = client.post_ndjson(&format!("/v1/topics/{topic}/records"), &body);
        assert_eq!(status, 200, "producing to {topic}: {answer}");
    }
}

#[test]
fn nexmark_queries_equal_duckdb_over_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(datagen_bin())
        .args(["nexmark", "--seed", "7", "--count", &EVENTS.to_string()])
        // 100 s of event time: bidders' sessions (q11) end and start again.
        .args(["--event-rate", "200"])
        .arg("--out-dir")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kappa-datagen nexmark: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let server = Server::start(&[]);
    let client = server.client();
    load(&client, dir.path(), "person", "id");
    load(&client, dir.path(), "auction", "id");
    load(&client, dir.path(), "bid", "auction");

    let queries = workspace_root().join("tools/nexmark/kappa");
    let schema = std::fs::read_to_string(queries.join("schema.sql")).unwrap();
    client.sql_ok(&schema);
    for query in QUERIES {
        let text = std::fs::read_to_string(queries.join(query.file)).unwrap();
        client.sql_ok(&text);
        let parallel = format!("{}_w2", query.name);
        client.sql_ok(&with_two_workers(&text, query.name));
        for name in [query.name, parallel.as_str()] {
            wait_caught_up(&client, name, query.input);
            // Windows that emit final rows show those the watermark closed.
            let watermark = match query.output {
                Output::View => client.view_rows(name, "limit=1")["as_of"]["watermark"].clone(),
                Output::Stream => Value::Null,
            };
            let oracle = query.oracle.replace("{watermark}", &watermark.to_string());
            let want = oracle_rows(dir.path(), &oracle);
            assert!(
                !want.is_empty(),
                "{}: the data set gives it rows",
                query.name
            );
            check(query, name, &kappa_rows(&client, query, name), &want);
        }
    }
}

/// Fails naming what differs unless `got` (the rows `name` made of
/// `query`) equals `want`.
fn check(query: &Query, name: &str, got: &[String], want: &[String]) {
    {
        if got != want {
            let (got_set, want_set): (HashSet<&String>, HashSet<&String>) =
                (got.iter().collect(), want.iter().collect());
            let missing: Vec<&&String> = want_set.difference(&got_set).take(5).collect();
            let extra: Vec<&&String> = got_set.difference(&want_set).take(5).collect();
            panic!(
                "{name} ({}): {} rows, DuckDB {}; missing e.g. {missing:?}; extra e.g. {extra:?}",
                query.file,
                got.len(),
                want.len()
            );
        }
    }
}
