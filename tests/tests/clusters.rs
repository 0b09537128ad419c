//! Kafka clusters the server knows (issue 36, first part): configured with
//! `--cluster NAME=host:port` or `[clusters.NAME]`, probed for their
//! metadata at start and then periodically, and shown by `GET
//! /v1/clusters`, `SHOW CLUSTERS` and the `kappa_cluster_*` gauges — against
//! two broker implementations not this server: Tansu 0.6 (Rust, in memory)
//! and another Kappa node's Kafka listener. An unreachable cluster is named
//! with its brokers, never a crash or a stall of the answers.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::*;

/// Waits until `GET /v1/clusters` shows every cluster checked once, and
/// returns them by name.
fn checked_clusters(server: &Server) -> Vec<Value> {
    eventually("every cluster probed once", Duration::from_secs(30), || {
        let (status, body) = server.get("/v1/clusters");
        assert_eq!(status, 200, "{body}");
        let clusters = body["clusters"].as_array().unwrap().clone();
        clusters
            .iter()
            .all(|c| !c["reachable"].is_null())
            .then_some(clusters)
    })
}

#[test]
fn a_tansu_cluster_is_reachable_and_an_unreachable_one_is_named() {
    let tansu = Tansu::start();
    tansu.create_topic("orders", 4);
    let down = format!("127.0.0.1:{}", free_port());
    let prod_flag = format!("prod={}", tansu.bootstrap());
    let down_flag = format!("down={down}");
    let server = Server::start(&["--cluster", &prod_flag, "--cluster", &down_flag]);

    let clusters = checked_clusters(&server);
    assert_eq!(clusters.len(), 2, "{clusters:?}");
    let (down_c, prod) = (&clusters[0], &clusters[1]);
    assert_eq!(prod["name"], "prod");
    assert_eq!(prod["bootstrap_servers"], tansu.bootstrap());
    assert_eq!(prod["security_protocol"], "plaintext");
    assert_eq!(prod["reachable"], true, "{prod}\n{}", tansu.log());
    assert!(prod["error"].is_null(), "{prod}");
    assert_eq!(prod["brokers"].as_array().unwrap().len(), 1, "{prod}");
    assert_eq!(
        prod["topics"],
        json!([{"name": "orders", "partitions": 4}]),
        "{prod}"
    );
    assert_eq!(down_c["name"], "down");
    assert_eq!(down_c["reachable"], false, "{down_c}");
    let error = down_c["error"].as_str().unwrap();
    assert!(
        error.contains("\"down\"") && error.contains(&down),
        "the error names the cluster and its brokers: {error}"
    );
    assert_eq!(down_c["topics"], json!([]));

    // SHOW CLUSTERS says the same.
    let results = server.sql_ok("SHOW CLUSTERS;");
    assert_eq!(results[0]["statement"], "SHOW CLUSTERS");
    let rows = results[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(
        (
            &rows[1]["name"],
            &rows[1]["reachable"],
            &rows[1]["topics"],
            &rows[1]["brokers"]
        ),
        (&json!("prod"), &json!(true), &json!(1), &json!(1)),
        "{rows:?}"
    );
    assert_eq!(
        (&rows[0]["name"], &rows[0]["reachable"]),
        (&json!("down"), &json!(false))
    );

    // The gauges follow the probes.
    let metrics = server.send("GET", "/metrics", None, &[], None).text;
    for line in [
        "kappa_cluster_reachable{cluster=\"prod\"} 1",
        "kappa_cluster_reachable{cluster=\"down\"} 0",
        "kappa_cluster_brokers{cluster=\"prod\"} 1",
    ] {
        assert!(metrics.contains(line), "missing {line:?} in:\n{metrics}");
    }

    // A stream may live on it: its topic is the cluster's, not created here.
    let declared =
        server.sql_ok("CREATE STREAM o (n INT) WITH (KAFKA_TOPIC='orders', CLUSTER='prod');");
    assert_eq!(declared[0]["topic_created"], false, "{declared:?}");
    assert_eq!(server.client().get("/v1/topics/orders").0, 404);
}

#[test]
fn another_kappa_nodes_kafka_listener_is_a_cluster() {
    let upstream = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    upstream.create_topic(&json!({"name": "payments", "partitions": 3}));
    let flag = format!("upstream={}", upstream.kafka_addr());
    let server = Server::start(&["--cluster", &flag]);
    let clusters = checked_clusters(&server);
    assert_eq!(clusters[0]["reachable"], true, "{:?}", clusters[0]);
    assert_eq!(
        clusters[0]["topics"],
        json!([{"name": "payments", "partitions": 3}])
    );
}

/// Runs `kappa serve` with `args` on a fresh data directory, expecting it
/// to refuse to start; returns what it printed on stderr.
fn refused_with(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(kappa_bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = eventually("kappa serve to exit", Duration::from_secs(30), || {
        child.try_wait().unwrap()
    });
    assert!(!status.success(), "kappa serve {args:?} started");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    stderr
}

#[test]
fn bad_cluster_settings_stop_the_start_with_their_name() {
    for (args, expected) in [
        (vec!["--cluster", "prod"], "expected NAME=host:port"),
        (vec!["--cluster", "prod=localhost"], "is not host:port"),
        (vec!["--cluster", "bad name=h:1"], "cluster name"),
    ] {
        let stderr = refused_with(&args);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("kappa.toml");
    std::fs::write(
        &config,
        "[clusters.prod]\nbootstrap_servers = \"b:9093\"\nsecurity_protocol = \"sasl_ssl\"\n",
    )
    .unwrap();
    let stderr = refused_with(&["--config", config.to_str().unwrap()]);
    assert!(
        stderr.contains("cluster \"prod\"") && stderr.contains("sasl_mechanism"),
        "{stderr}"
    );
}
