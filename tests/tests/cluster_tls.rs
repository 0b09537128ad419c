//! A cluster reached over SASL_SSL (issue 36): a view reads a topic of
//! another Kappa node's Kafka listener that asks for TLS and a SASL/PLAIN
//! login, with the CA from `ssl_ca_location` and the password from the
//! environment variable `sasl_password_env` names — never written in the
//! settings, never logged. A wrong password is a named `waiting_for_source`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::{eventually, json, Server};

mod tls_support;
use tls_support::{https_client, Files};

const BOOTSTRAP: &str = "bootstrap-secret-for-the-cluster-tls-test";

/// `[clusters.up]` over SASL_SSL to `broker`, trusting `ca`, the password
/// in `$UP_PASSWORD`; written to a config file in `files`.
fn config(files: &Files, broker: &str) -> String {
    let path = files.dir.path().join("kappa.toml");
    std::fs::write(
        &path,
        format!(
            "[clusters.up]\n\
             bootstrap_servers = \"{broker}\"\n\
             security_protocol = \"sasl_ssl\"\n\
             sasl_mechanism = \"PLAIN\"\n\
             sasl_username = \"kappa\"\n\
             sasl_password_env = \"UP_PASSWORD\"\n\
             ssl_ca_location = \"{}\"\n",
            files.arg("ca.pem")
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_string()
}

const VIEW: &str = "CREATE STREAM payments (user_id VARCHAR, amount DOUBLE) WITH (KAFKA_TOPIC='payments', CLUSTER='up');
CREATE TABLE totals AS SELECT user_id, SUM(amount) AS total FROM payments GROUP BY user_id;";

#[test]
fn a_view_reads_a_cluster_over_sasl_ssl_with_the_password_from_the_environment() {
    let files = Files::new();
    let upstream = files.start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = https_client(upstream.addr(), files.ca.der()).with_token(BOOTSTRAP);
    admin.create_topic(&json!({"name": "payments", "partitions": 2}));
    admin.produce(
        "payments",
        &json!([
            {"key": "a", "value": {"user_id": "a", "amount": 1.5}},
            {"key": "b", "value": {"user_id": "b", "amount": 2.0}},
            {"key": "a", "value": {"user_id": "a", "amount": 3.0}}
        ]),
    );
    let cfg = config(&files, &upstream.kafka_addr().to_string());
    let server = Server::start_env(&["--config", &cfg], &[("UP_PASSWORD", BOOTSTRAP)]);
    server.sql_ok(VIEW);
    let client = server.client();
    let totals = eventually("the view over SASL_SSL", Duration::from_secs(60), || {
        let mut rows = client.view_rows_as("totals", "", |r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["row"]["total"].as_f64().unwrap(),
            )
        });
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        (rows.len() == 2 && rows[0].1 == 4.5).then_some(rows)
    });
    assert_eq!(totals, vec![("a".into(), 4.5), ("b".into(), 2.0)]);
    let log = server.stderr_log();
    assert!(!log.contains(BOOTSTRAP), "the password was logged:\n{log}");
}

#[test]
fn a_wrong_password_is_refused_naming_the_cluster() {
    let files = Files::new();
    let upstream = files.start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = https_client(upstream.addr(), files.ca.der()).with_token(BOOTSTRAP);
    admin.create_topic(&json!({"name": "payments", "partitions": 1}));
    let cfg = config(&files, &upstream.kafka_addr().to_string());
    let server = Server::start_env(&["--config", &cfg], &[("UP_PASSWORD", "not-the-token")]);
    let statements: Vec<&str> = VIEW.split_inclusive(';').collect();
    server.sql_ok(statements[0]);
    let (status, body) = server.sql(statements[1]);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "source_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cluster 'up'"),
        "{body}"
    );
    assert!(!server.stderr_log().contains("not-the-token"));
}
