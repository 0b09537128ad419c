//! KafkaJS — a third Kafka client implementation, in JavaScript, sharing
//! no code with librdkafka or kafka-python — against Kappa's Kafka
//! listener: its admin client creates a topic and lists and describes
//! groups, its idempotent producer writes plain and gzip batches, its
//! consumer group reads them back and commits; the HTTP API reads and
//! writes the same records and sees the same committed offsets. Its admin
//! client also creates a topic with a config, describes its configs, looks
//! offsets up by timestamp and deletes it; acks=0 and acks=1 store.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use kappa_tests::{json, kafka_script, kafkajs_modules, run_for_json, Server, Value};

const KAFKAJS_COUNT: u64 = 1_000;
const HTTP_COUNT: u64 = 30;

/// Runs `kafkajs_roundtrip.js` with `args` (bounded: a minute); returns
/// the JSON line it printed.
fn run_kafkajs(args: &[&str]) -> Value {
    let mut node = Command::new("node");
    node.arg(kafka_script("kafkajs_roundtrip.js"))
        .args(args)
        .env("KAFKAJS_MODULES", kafkajs_modules());
    run_for_json(node, Duration::from_secs(60))
}

#[test]
fn kafkajs_produces_and_consumes_what_http_reads_and_writes() {
    let server = Server::start(&[
        "--kafka-listen",
        "127.0.0.1:0",
        "--auto-create-topics",
        "false",
    ]);
    let client = server.client();
    let kafka = server.kafka_addr().to_string();
    let topic = "jsclients";

    let produced = run_kafkajs(&["produce", &kafka, topic, &KAFKAJS_COUNT.to_string()]);
    assert_eq!(produced["partitions"], json!([0, 1, 2]), "{produced}");
    let mut stored_ns = BTreeSet::new();
    for p in 0..3 {
        for r in client.read_all(topic, p) {
            let n = r["value"]["n"].as_u64().expect("value {n}");
            assert!(stored_ns.insert(n), "record {n} stored twice");
            assert_eq!(r["key"], json!(format!("key-{n}")), "{r}");
            assert_eq!(
                r["headers"],
                json!({"seq": n.to_string(), "source": "kafkajs"}),
                "{r}"
            );
            assert_eq!(r["timestamp"], json!(1_767_225_600_000u64 + n), "{r}");
        }
    }
    assert_eq!(
        stored_ns,
        (0..KAFKAJS_COUNT).collect(),
        "every record stored once"
    );

    // Records produced over HTTP are consumed by KafkaJS as well.
    let http: Vec<Value> = (0..HTTP_COUNT)
        .map(|i| {
            json!({"key": format!("http-{i}"), "partition": i % 3,
                   "timestamp": 1_767_300_000_000i64 + i as i64,
                   "headers": {"via": "http"},
                   "value": {"http": i, "nested": {"list": [1, 2, i]}}})
        })
        .collect();
    client.produce(topic, &json!(http));

    let group = "jsreaders";
    let total = KAFKAJS_COUNT + HTTP_COUNT;
    let answer = run_kafkajs(&["consume", &kafka, topic, &total.to_string(), group]);
    let consumed = answer["consumed"].as_array().expect("consumed");
    let stored: Vec<Vec<Value>> = (0..3).map(|p| client.read_all(topic, p)).collect();
    let mut seen = BTreeSet::new();
    for c in consumed {
        let (p, o) = (
            c["partition"].as_u64().unwrap(),
            c["offset"].as_u64().unwrap(),
        );
        assert!(seen.insert((p, o)), "{p}/{o} consumed twice");
        let r = &stored[p as usize][o as usize];
        assert_eq!(r["offset"], json!(o));
        assert_eq!(c["key"], r["key"], "{c} vs {r}");
        assert_eq!(c["timestamp"], r["timestamp"], "{c} vs {r}");
        assert_eq!(c["headers"], r["headers"], "{c} vs {r}");
        let value: Value = serde_json::from_str(c["value"].as_str().unwrap()).unwrap();
        assert_eq!(value, r["value"], "{c} vs {r}");
    }
    assert_eq!(seen.len() as u64, total, "every record consumed");

    // The commits are the offsets the HTTP groups API shows, lag 0.
    let ends = client.end_offsets(topic);
    let mut committed = answer["offsets"].as_array().unwrap().clone();
    committed.sort_by_key(|p| p[0].as_u64());
    assert_eq!(
        committed,
        (0..3).map(|p| json!([p, ends[p]])).collect::<Vec<_>>(),
        "{answer}"
    );
    client.assert_group_caught_up(group, topic);
    assert_eq!(answer["groups"], json!([group]), "{answer}");
    // Every member left: the group is empty.
    assert_eq!(answer["state"], json!("Empty"), "{answer}");
}

#[test]
fn kafkajs_admin_creates_describes_looks_up_by_time_and_deletes_and_acks_0_and_1_store() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    let kafka = server.kafka_addr().to_string();
    let topic = "jsadmin";
    let answer = run_kafkajs(&["admin", &kafka, topic]);
    assert_eq!(
        answer["configs"]["retention.ms"],
        json!("60000"),
        "{answer}"
    );
    assert_eq!(
        answer["configs"]["cleanup.policy"],
        json!("delete"),
        "{answer}"
    );
    assert!(answer["configs"]["segment.bytes"].is_string(), "{answer}");
    // Two records with acks=1 on partition 0, one with acks=0 on 1.
    assert_eq!(answer["offsets"], json!([[0, 0, 2], [1, 0, 1]]), "{answer}");
    // The first record at or after 1767225601000 in each partition.
    assert_eq!(answer["by_time"], json!([[0, 1], [1, 0]]), "{answer}");
    assert_eq!(answer["topics"], json!([]), "{answer}");
    let (status, body) = client.get(&format!("/v1/topics/{topic}"));
    assert_eq!(status, 404, "deleted over Kafka: {body}");
}
