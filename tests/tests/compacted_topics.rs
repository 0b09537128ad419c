//! Compacted topics over the real server (issue 40, log/FORMAT.md §8.3):
//!
//! - A topic created over HTTP with `cleanup_policy: compact` is compacted
//!   by the server's own background pass: a read from the start then holds
//!   the latest value of each key, at the offsets they were produced at,
//!   and far fewer records than were produced; a table declared over it
//!   answers the latest row of each key. Records without a key are refused
//!   with `400 key_required`; `PATCH` changes the policy.
//! - Over Kafka, confluent-kafka creates a topic with `cleanup.policy =
//!   compact`, DescribeConfigs answers it, a record without a key is
//!   refused with `INVALID_RECORD`, and IncrementalAlterConfigs changes
//!   the policy and the compaction settings (a setting fixed at creation
//!   is refused with `INVALID_CONFIG`).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::Duration;

use kappa_tests::{assert_error, eventually, json, run_python, temp_file, Server, Value};

#[test]
fn the_server_compacts_a_topic_to_the_latest_value_of_each_key() {
    // Passes every 20 ms; nothing waits for the 15-minute idempotency
    // window.
    let (_conf_dir, conf) = temp_file(
        "kappa.toml",
        "retention_check_interval_ms = 20\nidempotency_window_ms = 1\nmin_cleanable_dirty_ratio = 0.0\n",
    );
    let server = Server::start(&["--config", conf.to_str().unwrap()]);
    let created = server.create_topic(&json!({
        "name": "balances", "segment_bytes": 1024, "cleanup_policy": "compact",
        "delete_retention_ms": 1
    }));
    assert_eq!(created["config"]["cleanup_policy"], "compact", "{created}");
    assert_eq!(created["config"]["delete_retention_ms"], 1, "{created}");

    let (status, body) = server.client().post_json(
        "/v1/topics/balances/records",
        &json!({"records": [{"value": {"balance": 1}}]}),
    );
    assert_error("a keyless record", status, &body, 400, "key_required");

    // 20 rounds of 30 accounts; account 7 is deleted (a null value: an
    // empty record) in the last round.
    let mut expected: BTreeMap<String, Value> = BTreeMap::new();
    let mut produced = 0;
    for round in 0..20 {
        let records: Vec<Value> = (0..30)
            .map(|a| {
                let key = format!("acct-{a}");
                let value = json!({"account": key, "balance": round * 100 + a, "round": round});
                expected.insert(key.clone(), value.clone());
                json!({"key": key, "value": value})
            })
            .collect();
        server.produce("balances", &Value::Array(records));
        produced += 30;
    }
    let (status, body) = server.client().post_json(
        "/v1/topics/balances/records",
        &json!({"records": [{"key": "acct-7", "value": null}]}),
    );
    assert_eq!(status, 200, "{body}");
    expected.remove("acct-7");
    produced += 1;

    // The background pass runs every 20 ms: wait for the topic to shrink.
    let records = eventually("the topic to be compacted", Duration::from_secs(60), || {
        let records = server.client().read_all("balances", 0);
        (records.len() < produced / 4).then_some(records)
    });
    let mut latest: BTreeMap<String, Value> = BTreeMap::new();
    let mut last_offset = None;
    for r in &records {
        let offset = r["offset"].as_u64().unwrap();
        assert!(last_offset < Some(offset), "offsets go up: {r}");
        last_offset = Some(offset);
        let key = r["key"].as_str().unwrap().to_string();
        match &r["value"] {
            Value::Null => {
                latest.remove(&key);
            }
            Value::String(s) if s.is_empty() => {
                latest.remove(&key);
            }
            value => {
                // A record keeps its offset: round r of account a was
                // produced at 30r + a.
                let (round, a) = (
                    value["round"].as_u64().unwrap(),
                    value["balance"].as_u64().unwrap() % 100,
                );
                assert_eq!(offset, round * 30 + a, "{r}");
                latest.insert(key, value.clone());
            }
        }
    }
    assert_eq!(latest, expected);
    let described = server.describe("balances");
    assert_eq!(described["partitions"][0]["end_offset"], produced as u64);

    // A table over the compacted topic: the latest row of each key.
    server.sql_ok(
        "CREATE TABLE balances (account VARCHAR PRIMARY KEY, balance BIGINT)
           WITH (KAFKA_TOPIC='balances', VALUE_FORMAT='JSON');
         CREATE TABLE rich AS SELECT account, balance FROM balances WHERE balance >= 1900;",
    );
    let rows = eventually("the view's rows", Duration::from_secs(60), || {
        let (status, body) = server.client().get("/v1/views/rich/rows?limit=100");
        let rows = body["rows"].as_array().cloned().unwrap_or_default();
        (status == 200 && rows.len() == 29).then_some(rows)
    });
    assert!(
        rows.iter()
            .all(|r| r["row"]["balance"].as_u64() >= Some(1900)),
        "{rows:?}"
    );

    let (status, changed) = server.client().patch_json(
        "/v1/topics/balances",
        &json!({"cleanup_policy": "compact,delete", "min_compaction_lag_ms": 60000}),
    );
    assert_eq!(status, 200, "{changed}");
    assert_eq!(changed["config"]["cleanup_policy"], "compact,delete");
    assert_eq!(changed["config"]["min_compaction_lag_ms"], 60000);
    let (status, body) = server
        .client()
        .patch_json("/v1/topics/balances", &json!({"cleanup_policy": "shred"}));
    assert_eq!(status, 400, "{body}");
}

#[test]
fn kafka_clients_create_and_describe_a_compacted_topic_and_keyless_records_are_refused() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let broker = server.kafka_addr().to_string();
    let script = format!(
        r#"
import json
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                  NewTopic)

admin = AdminClient({{"bootstrap.servers": "{broker}"}})
admin.create_topics([NewTopic("changelog", num_partitions=1, replication_factor=1,
                              config={{"cleanup.policy": "compact", "delete.retention.ms": "1000"}})])["changelog"].result(30)
configs = list(admin.describe_configs([ConfigResource("topic", "changelog")]).values())[0].result(30)
altered = ConfigResource("topic", "changelog", incremental_configs=[
    ConfigEntry("cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET),
    ConfigEntry("delete.retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
    ConfigEntry("min.compaction.lag.ms", "5000", incremental_operation=AlterConfigOpType.SET)])
list(admin.incremental_alter_configs([altered]).values())[0].result(30)
refused = None
try:
    bad = ConfigResource("topic", "changelog", incremental_configs=[
        ConfigEntry("segment.bytes", "4096", incremental_operation=AlterConfigOpType.SET)])
    list(admin.incremental_alter_configs([bad]).values())[0].result(30)
except KafkaException as e:
    refused = e.args[0].name()
after = list(admin.describe_configs([ConfigResource("topic", "changelog")]).values())[0].result(30)
errors = []
producer = Producer({{"bootstrap.servers": "{broker}", "linger.ms": 5, "retries": 0}})
def report(err, msg):
    errors.append(err.name() if err else None)
producer.produce("changelog", key=b"k1", value=b'{{"v":1}}', on_delivery=report)
producer.flush(30)
producer.produce("changelog", value=b'{{"v":2}}', on_delivery=report)
producer.flush(30)
print(json.dumps({{"policy": configs["cleanup.policy"].value,
                   "delete_retention": configs["delete.retention.ms"].value,
                   "delivered": errors, "refused": refused,
                   "after": {{k: after[k].value for k in ["cleanup.policy", "delete.retention.ms",
                                                        "min.compaction.lag.ms"]}}}}))
"#
    );
    let out: Value =
        serde_json::from_slice(&run_python(&script, "confluent-kafka on a compacted topic"))
            .unwrap();
    assert_eq!(out["policy"], "compact", "{out}");
    assert_eq!(out["delete_retention"], "1000", "{out}");
    assert_eq!(out["delivered"], json!([null, "INVALID_RECORD"]), "{out}");
    assert_eq!(out["refused"], "INVALID_CONFIG", "{out}");
    assert_eq!(
        out["after"],
        json!({"cleanup.policy": "compact,delete", "delete.retention.ms": "86400000",
               "min.compaction.lag.ms": "5000"}),
        "{out}"
    );
    let config = server.describe("changelog")["config"].clone();
    assert_eq!(config["cleanup_policy"], "compact,delete", "{config}");
    assert_eq!(config["min_compaction_lag_ms"], 5000, "{config}");
}

#[test]
fn the_legacy_alter_configs_replaces_a_topics_configs() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let broker = server.kafka_addr().to_string();
    let script = format!(
        r#"
import json
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

admin = AdminClient({{"bootstrap.servers": "{broker}"}})
admin.create_topics([NewTopic("changelog", num_partitions=1, replication_factor=1,
                              config={{"cleanup.policy": "compact", "delete.retention.ms": "1000",
                                       "segment.bytes": "65536"}})])["changelog"].result(30)
def describe():
    described = list(admin.describe_configs([ConfigResource("topic", "changelog")]).values())[0].result(30)
    return {{k: described[k].value for k in ["cleanup.policy", "delete.retention.ms",
                                           "retention.ms", "segment.bytes"]}}
def alter(configs, validate_only=False):
    try:
        list(admin.alter_configs([ConfigResource("topic", "changelog", set_config=configs)],
                                 validate_only=validate_only).values())[0].result(30)
        return None
    except KafkaException as e:
        return e.args[0].name()
out = {{"created": describe()}}
# Validated only: nothing changes.
out["validated"] = alter({{"retention.ms": "60000"}}, validate_only=True)
out["after_validation"] = describe()
# Replaced: retention set, the compaction settings not named back to their
# defaults, segment.bytes named at its value left alone.
out["replaced"] = alter({{"retention.ms": "60000", "segment.bytes": "65536"}})
out["after"] = describe()
out["fixed"] = alter({{"segment.bytes": "4096"}})
out["unknown"] = alter({{"no.such.config": "1"}})
out["bad_value"] = alter({{"retention.ms": "soon"}})
out["last"] = describe()
print(json.dumps(out))
"#
    );
    let out: Value =
        serde_json::from_slice(&run_python(&script, "confluent-kafka alter_configs")).unwrap();
    assert_eq!(
        out["created"],
        json!({"cleanup.policy": "compact", "delete.retention.ms": "1000",
               "retention.ms": "-1", "segment.bytes": "65536"}),
        "{out}"
    );
    assert_eq!(out["validated"], Value::Null, "{out}");
    assert_eq!(out["after_validation"], out["created"], "{out}");
    assert_eq!(out["replaced"], Value::Null, "{out}");
    let replaced = json!({"cleanup.policy": "delete", "delete.retention.ms": "86400000",
                          "retention.ms": "60000", "segment.bytes": "65536"});
    assert_eq!(out["after"], replaced, "{out}");
    for refused in ["fixed", "unknown", "bad_value"] {
        assert_eq!(out[refused], "INVALID_CONFIG", "{refused}: {out}");
    }
    assert_eq!(out["last"], replaced, "{out}");
    let config = server.describe("changelog")["config"].clone();
    assert_eq!(config["cleanup_policy"], "delete", "{config}");
    assert_eq!(config["retention_ms"], 60000, "{config}");
}
