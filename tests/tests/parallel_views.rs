//! Issue 14 over HTTP: a view created `WITH (PARALLELISM=2)` over a
//! 4-partition stream runs 2 source and 2 key-shard workers, shows them in
//! `GET /v1/views/{view}` (partitions and key groups each owns, events,
//! rate, lag) and in `/metrics`, and serves the same rows as the same view
//! on one thread — also after a restart with another `processor_threads`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::{eventually, json, user_event, Server, Value};

const BASE: i64 = 1_767_225_600_000;

fn stats(name: &str, with: &str) -> String {
    format!(
        "CREATE TABLE {name} {with} AS SELECT user_id, WINDOWSTART AS window_start, \
         COUNT(*) AS purchase_count, SUM(amount) AS total_amount FROM user_events \
         WINDOW TUMBLING (SIZE 5 MINUTES) WHERE event_type = 'purchase' GROUP BY user_id;"
    )
}

/// Every row of `view`, sorted.
fn rows(server: &Server, view: &str) -> Vec<String> {
    let mut rows = server.view_rows_as(view, "", |r| r.to_string());
    rows.sort();
    rows
}

/// The served version once it committed every input record.
fn caught_up(server: &Server, view: &str, ends: &[u64]) -> Value {
    eventually(
        &format!("{view} catches up"),
        Duration::from_secs(60),
        || {
            let served = server.describe_view(view)["served_version"].clone();
            let committed: Vec<u64> = served["partitions"]
                .as_array()?
                .iter()
                .map(|p| p["committed"].as_u64().unwrap_or(0))
                .collect();
            (committed == ends).then_some(served)
        },
    )
}

#[test]
fn a_parallel_view_shows_its_workers_and_serves_the_single_threaded_rows() {
    let mut server = Server::start(&["--processor-threads", "1"]);
    server.sql_ok(
        "CREATE STREAM user_events (user_id VARCHAR, event_type VARCHAR, amount DOUBLE, event_time BIGINT) \
         WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON', PARTITIONS=4, TIMESTAMP='event_time');",
    );
    server.sql_ok(&stats("stats_parallel", "WITH (PARALLELISM=2)"));
    server.sql_ok(&stats("stats_single", ""));
    let kinds = ["purchase", "view", "purchase", "click"];
    let events: Vec<Value> = (0..2_000)
        .map(|i| {
            let user = format!("u{}", i % 37);
            user_event(&user, kinds[i % 4], (i % 90) as f64, BASE + i as i64 * 500)
        })
        .collect();
    for chunk in events.chunks(500) {
        server.produce("user_events", &json!(chunk));
    }
    let ends = server.end_offsets("user_events");
    assert!(
        ends.iter().all(|&e| e > 0),
        "every partition has records: {ends:?}"
    );

    let parallel = caught_up(&server, "stats_parallel", &ends);
    caught_up(&server, "stats_single", &ends);
    assert_eq!(parallel["parallelism"], 2, "{parallel}");
    let workers = parallel["workers"].as_array().expect("workers");
    let names: Vec<&str> = workers
        .iter()
        .map(|w| w["worker"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["shard-0", "shard-1", "source-0", "source-1"],
        "{parallel}"
    );
    for w in workers {
        assert!(w["events"].as_u64().unwrap() > 0, "{w}");
        assert!(w["rate_per_second"].as_f64().unwrap() > 0.0, "{w}");
        match w["role"].as_str().unwrap() {
            "source" => {
                assert_eq!(w["partitions"].as_array().unwrap().len(), 2, "{w}");
                assert_eq!(w["lag"], 0, "{w}");
            }
            "shard" => assert!(w["end_key_group"].as_u64() > w["first_key_group"].as_u64()),
            other => panic!("unknown role {other}"),
        }
    }
    let single = server.describe_view("stats_single")["served_version"].clone();
    assert_eq!(single["parallelism"], 1);
    assert_eq!(single["workers"], json!([]), "one thread has no workers");

    let expected = rows(&server, "stats_single");
    assert!(expected.len() > 30, "{} rows", expected.len());
    assert_eq!(rows(&server, "stats_parallel"), expected);

    let metrics = server
        .client()
        .send("GET", "/metrics", None, &[], None)
        .text;
    assert!(
        metrics.contains(
            r#"kappa_processor_worker_events_total{processor="stats_parallel",version="1",worker="shard-1"}"#
        ),
        "per-worker metrics"
    );

    // A restart with another default: the view keeps its PARALLELISM, the
    // other view now runs on 2 workers; the rows stay.
    server.terminate_ok();
    server = server.restart_with(&["--processor-threads", "2"]);
    let parallel = caught_up(&server, "stats_parallel", &ends);
    let single = caught_up(&server, "stats_single", &ends);
    assert_eq!(
        (
            parallel["parallelism"].clone(),
            single["parallelism"].clone()
        ),
        (json!(2), json!(2))
    );
    assert_eq!(rows(&server, "stats_parallel"), expected);
    assert_eq!(rows(&server, "stats_single"), expected);
}
