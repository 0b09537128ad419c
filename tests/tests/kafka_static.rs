//! A static group member (confluent-kafka with `group.instance.id`)
//! restarts: it gets its partitions back at once, without a rebalance, and
//! resumes from its commits.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::process::Command;
use std::time::Duration;

use kappa_tests::{json, kafka_script, python, run_for_json, Client, Server, Value};

/// Runs `static_member.py` for `instance`, reading `count` records.
fn run_static_member(server: &Server, instance: &str, count: usize) -> Value {
    let mut script = Command::new(python());
    script
        .arg("-B")
        .arg(kafka_script("static_member.py"))
        .args([
            &server.kafka_addr().to_string(),
            "orders",
            "static",
            instance,
        ])
        .arg(count.to_string());
    run_for_json(script, Duration::from_secs(60))
}

/// `kappa_kafka_group_rebalances_total{group="static"}`.
fn rebalances(client: &Client) -> u64 {
    let text = client.send("GET", "/metrics", None, &[], None).text;
    text.lines()
        .find_map(|l| l.strip_prefix("kappa_kafka_group_rebalances_total{group=\"static\"} "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[test]
fn a_restarted_static_member_gets_its_partitions_back_without_a_rebalance() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    client.create_topic(&json!({"name": "orders", "partitions": 3}));
    let records: Vec<Value> = (0..30)
        .map(|i| json!({"partition": i % 3, "value": {"n": i}}))
        .collect();
    client.produce("orders", &json!(records));

    let first = run_static_member(&server, "worker-1", 30);
    assert_eq!(first["assigned"], json!([0, 1, 2]), "{first}");
    let after_first = rebalances(&client);
    assert!(after_first >= 1, "the first join rebalanced the group");

    // The restart: same instance id, within the session timeout. Its old
    // self never left (static members do not on close), yet it is given
    // the same partitions at once and the group does not rebalance.
    client.produce("orders", &json!([{"partition": 1, "value": {"n": 30}}]));
    let second = run_static_member(&server, "worker-1", 1);
    assert_eq!(second["assigned"], json!([0, 1, 2]), "{second}");
    assert_eq!(
        second["consumed"],
        json!([[1, 10]]),
        "resumes from its commits"
    );
    assert_eq!(rebalances(&client), after_first, "no rebalance");
    let (status, body) = client.get("/v1/groups/static/offsets?topic=orders");
    assert_eq!(status, 200, "{body}");
    let committed: Vec<_> = body["topics"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["committed"].clone())
        .collect();
    assert_eq!(committed, vec![json!(10), json!(11), json!(10)], "{body}");
}
