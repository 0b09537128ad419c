//! Compression at rest over the real server (issue 40, log/FORMAT.md
//! §2.8):
//!
//! - The same seed events produced over HTTP to an uncompressed topic and
//!   to a zstd topic read back the same, the zstd topic takes at least 3×
//!   less disk, and the brief's `purchase_stats` over each has the same
//!   rows; a PATCH to lz4 applies to the next batches and every record
//!   still reads; an unknown codec is a 400 naming the codecs.
//! - Over Kafka: confluent-kafka creates a topic with `compression.type =
//!   zstd` (DescribeConfigs answers it) and produces lz4 batches into it;
//!   kcat produces zstd batches; kcat and confluent-kafka consume what
//!   was produced, as the HTTP API reads it. An unknown codec is refused
//!   with `INVALID_CONFIG`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{after_param, brief, json, kcat_output, run_python, user_event, Server, Value};

/// Bytes the topic's partitions take on disk, as described.
fn disk_bytes(server: &Server, topic: &str) -> u64 {
    server.describe(topic)["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["bytes"].as_u64().unwrap())
        .sum()
}

#[test]
fn a_zstd_topic_reads_back_what_was_produced_takes_3x_less_disk_and_feeds_the_same_view() {
    let server = Server::start(&[]);
    for (name, codec) in [("plain", "none"), ("packed", "zstd")] {
        let created = server.create_topic(&json!({"name": name, "compression_type": codec}));
        assert_eq!(created["config"]["compression_type"], codec, "{created}");
    }
    let events: Vec<Value> = (0..20_000)
        .map(|i| {
            let kind = ["page_view", "add_to_cart", "purchase"][i % 3];
            user_event(
                &format!("user-{}", i % 97),
                kind,
                (i % 500) as f64 + 0.25,
                1_767_225_600_000 + i as i64 * 250,
            )
        })
        .collect();
    let mut last = Vec::new();
    for topic in ["plain", "packed"] {
        for chunk in events.chunks(1_000) {
            last = server.produce(topic, &Value::Array(chunk.to_vec()));
        }
    }
    let plain = server.read_values("plain", 0);
    assert_eq!(plain.len(), 20_000);
    assert_eq!(server.read_values("packed", 0), plain);
    let (plain_bytes, packed_bytes) = (disk_bytes(&server, "plain"), disk_bytes(&server, "packed"));
    assert!(
        packed_bytes * 3 <= plain_bytes,
        "zstd: {packed_bytes} bytes against {plain_bytes} uncompressed"
    );

    // The brief's view over each topic: the same rows.
    for topic in ["plain", "packed"] {
        server.sql_ok(&brief::purchase_stats_over(topic));
    }
    let rows = |view: &str| {
        server.view_rows(view, &format!("after={}", after_param(&last)))["rows"].clone()
    };
    // Read-your-writes on packed's last produce; plain was produced first.
    let packed_rows = rows("stats_packed");
    server
        .client()
        .wait_view_committed("stats_plain", 20_000, std::time::Duration::from_secs(60));
    assert!(packed_rows.as_array().unwrap().len() > 10, "{packed_rows}");
    assert_eq!(server.view_rows("stats_plain", "")["rows"], packed_rows);

    // lz4 from now on: the old batches stay zstd, every record reads.
    let (status, body) =
        server.patch_json("/v1/topics/packed", &json!({"compression_type": "lz4"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["config"]["compression_type"], "lz4", "{body}");
    server.produce("packed", &Value::Array(events[..500].to_vec()));
    let after = server.read_values("packed", 0);
    assert_eq!(after.len(), 20_500);
    assert_eq!(after[20_000..], plain[..500]);
    // An unknown codec names the problem.
    let (status, body) =
        server.patch_json("/v1/topics/packed", &json!({"compression_type": "brotli"}));
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("brotli") && message.contains("zstd"),
        "{body}"
    );
}

#[test]
fn kafka_clients_create_describe_produce_and_consume_a_zstd_topic() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let broker = server.kafka_addr().to_string();
    let script = format!(
        r#"
import json
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

admin = AdminClient({{"bootstrap.servers": "{broker}"}})
futures = admin.create_topics([NewTopic("packed", num_partitions=1, replication_factor=1,
                                        config={{"compression.type": "zstd"}})])
futures["packed"].result(30)
refused = None
try:
    admin.create_topics([NewTopic("odd", num_partitions=1, replication_factor=1,
                                  config={{"compression.type": "brotli"}})])["odd"].result(30)
except KafkaException as e:
    refused = e.args[0].name()
described = admin.describe_configs([ConfigResource("topic", "packed")])
configs = list(described.values())[0].result(30)
producer = Producer({{"bootstrap.servers": "{broker}", "compression.type": "lz4", "linger.ms": 20}})
for i in range(3000):
    producer.produce("packed", key=b"k%d" % (i % 10), value=json.dumps({{"i": i, "pad": "x" * 40}}).encode())
producer.flush(30)
consumer = Consumer({{"bootstrap.servers": "{broker}", "group.id": "reader",
                      "auto.offset.reset": "earliest", "enable.auto.commit": False}})
consumer.subscribe(["packed"])
seen = []
while len(seen) < 3000:
    m = consumer.poll(10)
    if m is None:
        break
    if m.error():
        raise SystemExit(str(m.error()))
    seen.append(json.loads(m.value())["i"])
consumer.close()
print(json.dumps({{"refused": refused, "compression": configs["compression.type"].value,
                   "consumed": seen}}))
"#
    );
    let out: Value =
        serde_json::from_slice(&run_python(&script, "confluent-kafka on a zstd topic")).unwrap();
    assert_eq!(out["compression"], "zstd", "{out}");
    assert_eq!(out["refused"], "INVALID_CONFIG", "{out}");
    let consumed: Vec<u64> = out["consumed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(consumed, (0..3000).collect::<Vec<u64>>());
    assert_eq!(
        server.describe("packed")["config"]["compression_type"],
        "zstd"
    );

    // kcat produces zstd batches; kcat reads every record back.
    let lines: String = (0..2000).map(|i| format!("{{\"k\":{i}}}\n")).collect();
    let produced = kcat_output(
        &["-b", &broker, "-P", "-t", "packed", "-z", "zstd"],
        lines.as_bytes(),
    );
    assert!(
        produced.status.success(),
        "{}",
        String::from_utf8_lossy(&produced.stderr)
    );
    let consumed = kcat_output(
        &[
            "-b", &broker, "-C", "-t", "packed", "-o", "3000", "-e", "-q",
        ],
        b"",
    );
    assert!(
        consumed.status.success(),
        "{}",
        String::from_utf8_lossy(&consumed.stderr)
    );
    assert_eq!(String::from_utf8(consumed.stdout).unwrap(), lines);
    let http = server.read_values("packed", 0);
    assert_eq!(http.len(), 5000);
    assert_eq!(http[3000], json!({"k": 0}));
    assert_eq!(http[1234]["i"], 1234);
}
