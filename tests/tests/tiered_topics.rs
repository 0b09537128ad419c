//! Tiered storage over the real server (issue 40, log/FORMAT.md §8.4),
//! with a local directory (`file://`) and with an S3-compatible server
//! (moto, on 127.0.0.1) as the store:
//!
//! - A topic with `local_retention_ms` has its old segments moved to the
//!   store by the server's background pass (`remote_bytes` says so, the
//!   partition directory loses them); the brief's `purchase_stats` built
//!   over it afterwards — a replay from its first offset, through the
//!   store — has the rows of the same view over an untiered topic.
//! - With the S3 server stopped, a restarted Kappa answers a read of the
//!   moved offsets with `503 tiered_storage_unavailable` naming the store,
//!   while produces and reads of recent offsets go on.
//! - A local retention without a store is refused with `400
//!   invalid_config`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::{
    assert_error, brief, eventually, json, temp_file, user_event, Moto, Server, Value,
};

fn events() -> Vec<Value> {
    (0..3_000)
        .map(|i| {
            let kind = ["page_view", "add_to_cart", "purchase"][i % 3];
            user_event(
                &format!("user-{}", i % 41),
                kind,
                (i % 300) as f64 + 0.5,
                1_767_225_600_000 + i as i64 * 100,
            )
        })
        .collect()
}

/// Produces the events to `topic` in requests of 100 (each a batch of
/// about 12 KB: with 1 KiB segments, one segment each).
fn produce(server: &Server, topic: &str, events: &[Value]) {
    for chunk in events.chunks(100) {
        server.produce(topic, &Value::Array(chunk.to_vec()));
    }
}

/// Waits until most of `topic`'s bytes are in tiered storage.
fn wait_tiered(server: &Server, topic: &str) -> Value {
    eventually(
        "the old segments to move to tiered storage",
        Duration::from_secs(120),
        || {
            let p = server.describe(topic)["partitions"][0].clone();
            let (remote, all) = (
                p["remote_bytes"].as_u64().unwrap_or(0),
                p["bytes"].as_u64().unwrap(),
            );
            (remote * 10 >= all * 8).then_some(p)
        },
    )
}

/// `purchase_stats` over `topic`, as view `stats_<topic>`; its rows once
/// it has read all 3,000 events.
fn stats_rows(server: &Server, topic: &str) -> Value {
    server.sql_ok(&brief::purchase_stats_over(topic));
    eventually(
        "the view to read every event",
        Duration::from_secs(120),
        || {
            let rows = server.view_rows(&format!("stats_{topic}"), "limit=1000")["rows"].clone();
            let purchases: u64 = rows
                .as_array()?
                .iter()
                .map(|r| r["row"]["purchase_count"].as_u64().unwrap_or(0))
                .sum();
            (purchases == 1_000).then_some(rows)
        },
    )
}

fn tiered_server(url: &str, env: &[(&str, &str)]) -> (tempfile::TempDir, Server) {
    let (conf_dir, conf) = temp_file(
        "kappa.toml",
        &format!("retention_check_interval_ms = 20\ntiered_storage_url = \"{url}\"\n"),
    );
    let server = Server::start_env(&["--config", conf.to_str().unwrap()], env);
    (conf_dir, server)
}

#[test]
fn a_view_replayed_through_a_directory_store_has_the_rows_of_an_untiered_topic() {
    let store = tempfile::tempdir().unwrap();
    let url = format!("file://{}", store.path().display());
    let (_conf, server) = tiered_server(&url, &[]);
    let created = server.create_topic(&json!({
        "name": "tiered", "segment_bytes": 1024, "local_retention_ms": 1
    }));
    assert_eq!(created["config"]["local_retention_ms"], 1, "{created}");
    server.create_topic(&json!({"name": "plain", "segment_bytes": 1024}));
    let events = events();
    produce(&server, "tiered", &events);
    produce(&server, "plain", &events);
    let partition = wait_tiered(&server, "tiered");
    let local_logs = std::fs::read_dir(server.data_dir().join("topics/tiered/0"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert!(
        local_logs < partition["segment_count"].as_u64().unwrap() as usize / 4,
        "{local_logs} local segments of {partition}"
    );
    assert_eq!(
        server.read_values("tiered", 0),
        server.read_values("plain", 0)
    );
    assert_eq!(stats_rows(&server, "tiered"), stats_rows(&server, "plain"));
}

#[test]
fn through_s3_old_reads_fail_clearly_while_the_store_is_down_and_the_rest_goes_on() {
    let moto = Moto::start();
    moto.create_bucket("kappa");
    let env = moto.client_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let (_conf, server) = tiered_server("s3://kappa/segments", &env);
    server.create_topic(&json!({
        "name": "tiered", "segment_bytes": 1024, "local_retention_ms": 1
    }));
    server.create_topic(&json!({"name": "plain", "segment_bytes": 1024}));
    let events = events();
    produce(&server, "tiered", &events);
    produce(&server, "plain", &events);
    wait_tiered(&server, "tiered");
    assert_eq!(stats_rows(&server, "tiered"), stats_rows(&server, "plain"));

    // The store goes away; a restart forgets the downloads.
    drop(moto);
    let mut server = server;
    server.terminate_ok();
    let server = server.restart();
    let (status, body) = server
        .client()
        .get("/v1/topics/tiered/partitions/0/records?offset=0&max_records=10");
    assert_error(
        "a read of a moved segment",
        status,
        &body,
        503,
        "tiered_storage_unavailable",
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("s3://kappa/segments")),
        "{body}"
    );
    let produced = server.produce("tiered", &json!([{"key": "late", "value": {"n": 1}}]));
    let offset = produced[0].offset;
    let (status, body) = server.client().get(&format!(
        "/v1/topics/tiered/partitions/0/records?offset={offset}&max_records=10"
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["records"][0]["value"], json!({"n": 1}));
}

#[test]
fn a_local_retention_without_a_store_is_refused() {
    let server = Server::start(&[]);
    let (status, body) = server.client().post_json(
        "/v1/topics",
        &json!({"name": "t", "local_retention_ms": 60000}),
    );
    assert_error(
        "local retention without a store",
        status,
        &body,
        400,
        "invalid_config",
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tiered_storage_url")),
        "{body}"
    );
}
