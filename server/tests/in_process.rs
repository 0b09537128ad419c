//! Server behaviour checked with servers running in this process:
//!
//! - every topic a server creates gets the server's topic defaults — a
//!   processor's `LATE_TOPIC` as much as a statement's or a `POST
//!   /v1/topics` without settings (issue 13: one topic-defaults policy) —
//!   but for a derived stream's partitions, its source's unless
//!   `PARTITIONS` is given, and its compression where `COMPRESSION` is
//!   given;
//! - a derived stream stored lz4-compressed reads back the records an
//!   uncompressed one holds;
//! - two servers in one process both serve their metrics (the second used
//!   to get a recorder that was never installed: an empty `/metrics`);
//! - a catalog write on a full disk answers `507 disk_full`, not 500.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod support;

use std::time::{Duration, Instant};

use kappa_log::FsyncPolicy;
use kappa_server::ServerConfig;
use serde_json::{json, Value};
use support::InProcess;

/// Waits until `GET path` answers 200 and returns the body.
fn wait_for(server: &InProcess, path: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = server.get(path);
        if status == 200 {
            return body;
        }
        assert!(Instant::now() < deadline, "GET {path}: {status} {body}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_late_topic_a_view_creates_gets_the_server_topic_defaults() {
    let config = ServerConfig {
        default_partitions: 3,
        default_fsync: FsyncPolicy::Never,
        ..ServerConfig::default()
    };
    let server = InProcess::start(config, |_| {});
    let (status, body) = server.sql(
        "CREATE STREAM clicks (user_id VARCHAR) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE TABLE per_user WITH (LATE_TOPIC='late_clicks') AS
           SELECT user_id, COUNT(*) AS n FROM clicks
           WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user_id;
         CREATE STREAM copies AS SELECT user_id FROM clicks;
         CREATE STREAM spread WITH (PARTITIONS=2) AS SELECT user_id FROM clicks;
         CREATE STREAM fast_copies WITH (COMPRESSION='lz4') AS SELECT user_id FROM clicks;
         CREATE STREAM dense_copies WITH (COMPRESSION='zstd') AS SELECT user_id FROM clicks;",
    );
    assert_eq!(status, 200, "{body}");
    let clicks = wait_for(&server, "/v1/topics/clicks");
    assert_eq!(clicks["config"]["partitions"], json!(1), "PARTITIONS wins");
    assert_eq!(clicks["config"]["fsync"], json!("never"));
    assert_eq!(clicks["config"]["compression_type"], json!("none"));
    // The processor creates its late topic; the statement the streams'.
    // A derived stream's topic has its source's partitions (as ksqlDB's
    // does) unless PARTITIONS says otherwise, and is stored as COMPRESSION
    // says, keeping only its newest 8 MiB in the page cache; the rest is
    // the defaults.
    let tail = json!(8 << 20);
    for (topic, partitions, compression, cached_tail) in [
        ("late_clicks", 3, "none", Value::Null),
        ("copies", 1, "none", tail.clone()),
        ("spread", 2, "none", tail.clone()),
        ("fast_copies", 1, "lz4", tail.clone()),
        ("dense_copies", 1, "zstd", tail.clone()),
    ] {
        let described = wait_for(&server, &format!("/v1/topics/{topic}"));
        assert_eq!(
            described["config"]["partitions"],
            json!(partitions),
            "{described}"
        );
        assert_eq!(
            described["config"]["compression_type"],
            json!(compression),
            "{described}"
        );
        assert_eq!(
            described["config"]["cached_tail_bytes"], cached_tail,
            "{described}"
        );
        assert_eq!(described["config"]["fsync"], json!("never"), "{described}");
        assert_eq!(described["config"]["retention_ms"], Value::Null);
    }
    assert_eq!(clicks["config"]["cached_tail_bytes"], Value::Null);
    // And a topic created over HTTP without settings.
    let (status, created) = server.post("/v1/topics", &json!({"name": "plain"}), None);
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["config"]["partitions"], json!(3));
    assert_eq!(created["config"]["fsync"], json!("never"));
    assert_eq!(created["config"]["compression_type"], json!("none"));
    assert_eq!(created["config"]["cached_tail_bytes"], Value::Null);
    // A derived stream's page cache tail can be lifted, and set again.
    for value in [Value::Null, json!(1 << 20)] {
        let (status, altered) =
            server.patch("/v1/topics/copies", &json!({ "cached_tail_bytes": value }));
        assert_eq!(status, 200, "{altered}");
        assert_eq!(altered["config"]["cached_tail_bytes"], value);
    }
}

/// The first `n` records of partition 0 of `topic` as (key, value), read
/// with long polls as the processor writes them.
fn read_records(server: &InProcess, topic: &str, n: usize) -> Vec<(Value, Value)> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut records = Vec::new();
    let mut offset = 0;
    while records.len() < n {
        assert!(
            Instant::now() < deadline,
            "{topic}: {} of {n} records",
            records.len()
        );
        let (status, page) = server.get(&format!(
            "/v1/topics/{topic}/partitions/0/records?offset={offset}&max_records=1000&max_wait_ms=1000"
        ));
        assert_eq!(status, 200, "{page}");
        for record in page["records"].as_array().unwrap() {
            records.push((record["key"].clone(), record["value"].clone()));
        }
        offset = page["next_offset"].as_u64().unwrap();
    }
    records
}

#[test]
fn a_derived_stream_stored_compressed_reads_back_the_same_records() {
    let server = InProcess::start(ServerConfig::default(), |_| {});
    let (status, body) = server.sql(
        "CREATE STREAM clicks (user_id VARCHAR KEY, page VARCHAR, n BIGINT)
           WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE STREAM plain AS SELECT user_id, page, n * 2 AS twice FROM clicks;
         CREATE STREAM packed WITH (COMPRESSION='lz4') AS SELECT user_id, page, n * 2 AS twice FROM clicks;",
    );
    assert_eq!(status, 200, "{body}");
    let records: Vec<Value> = (0..500)
        .map(|i| json!({"key": format!("u-{}", i % 7), "value": {"page": format!("/item/{}", i % 13), "n": i}}))
        .collect();
    let (status, body) = server.post(
        "/v1/topics/clicks/records",
        &json!({"records": records}),
        None,
    );
    assert_eq!(status, 200, "{body}");
    let plain = read_records(&server, "plain", 500);
    let packed = read_records(&server, "packed", 500);
    assert_eq!(plain.len(), 500);
    assert_eq!(packed, plain);
    assert_eq!(
        plain[3],
        (
            json!("u-3"),
            json!({"user_id": "u-3", "page": "/item/3", "twice": 6})
        )
    );
    // And it was stored compressed: in fewer bytes than the plain copy.
    let packed = wait_for(&server, "/v1/topics/packed");
    assert_eq!(
        packed["config"]["compression_type"],
        json!("lz4"),
        "{packed}"
    );
    let plain = wait_for(&server, "/v1/topics/plain");
    let bytes = |topic: &Value| topic["partitions"][0]["bytes"].as_u64().unwrap();
    assert!(bytes(&packed) < bytes(&plain), "{packed} {plain}");
}

#[test]
fn two_servers_in_one_process_both_serve_their_metrics() {
    let servers = [
        InProcess::start(ServerConfig::default(), |_| {}),
        InProcess::start(ServerConfig::default(), |_| {}),
    ];
    for (i, server) in servers.iter().enumerate() {
        let topic = format!("metered_{i}");
        let (status, body) = server.post("/v1/topics", &json!({"name": topic}), None);
        assert_eq!(status, 201, "{body}");
        assert_eq!(server.get("/v1/topics/nope").0, 404);
        let (status, text) = server.get_text("/metrics");
        assert_eq!(status, 200);
        assert!(
            text.contains("kappa_http_errors_total"),
            "server {i}: {text}"
        );
        assert!(
            text.contains(&format!("topic=\"{topic}\"")),
            "server {i}: {text}"
        );
    }
}

#[test]
#[cfg(target_os = "linux")]
fn a_catalog_write_on_a_full_disk_answers_507() {
    let server = InProcess::start(ServerConfig::default(), |_| {});
    // Both catalog files are written through a temporary file beside them:
    // make those /dev/full, where every write fails with ENOSPC.
    for tmp in ["catalog.tmp", "catalog.json.tmp"] {
        std::os::unix::fs::symlink("/dev/full", server.data_dir().join(tmp)).unwrap();
    }
    let (status, body) = server.sql(
        "CREATE STREAM clicks (user_id VARCHAR) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON');",
    );
    assert_eq!(status, 507, "{body}");
    assert_eq!(body["error"]["code"], json!("disk_full"), "{body}");
    assert_eq!(body["error"]["statement"], json!(0), "{body}");
    // Nothing was declared.
    let (status, body) = server.sql("SHOW STREAMS;");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["results"][0]["rows"], json!([]), "{body}");
}
