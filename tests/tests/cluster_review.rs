//! Review and undo over a Kafka cluster's topic (issue 36), as over the
//! built-in log: a `SWAP='MANUAL'` replacement built from the cluster waits
//! in `ready`, both versions read side by side, `diff` counts the
//! difference, `promote` serves the new rows and `rollback` the old ones
//! again — against Tansu, a Kafka broker written by others.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::*;

const CREATE: &str =
    "CREATE STREAM clicks (page VARCHAR, ms BIGINT) WITH (KAFKA_TOPIC='clicks', CLUSTER='prod');
CREATE TABLE page_counts AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;";

/// Only slow clicks count in the new version.
const REPLACE: &str = "CREATE OR REPLACE TABLE page_counts WITH (SWAP='MANUAL') AS
SELECT page, COUNT(*) AS n FROM clicks WHERE ms > 100 GROUP BY page;";

/// `page -> n` of a version (`None`: the served one).
fn counts(server: &Server, version: Option<u64>) -> Vec<(String, i64)> {
    let query = version.map_or(String::new(), |v| format!("version={v}"));
    server.view_rows_as("page_counts", &query, |r| {
        (
            r["key"].as_str().unwrap().to_string(),
            r["row"]["n"].as_i64().unwrap(),
        )
    })
}

/// Produces `clicks` (page, ms) to the cluster with confluent-kafka.
fn produce(bootstrap: &str, clicks: &[(&str, i64)]) {
    let records: Vec<Value> = clicks
        .iter()
        .enumerate()
        .map(|(i, (page, ms))| {
            json!({"key": page, "timestamp": 1_767_225_600_000i64 + i as i64,
                   "value": {"page": page, "ms": ms}})
        })
        .collect();
    produce_records(bootstrap, "clicks", &records);
}

#[test]
fn a_manual_replacement_over_a_cluster_is_reviewed_promoted_and_rolled_back() {
    let tansu = Tansu::start();
    tansu.create_topic("clicks", 2);
    produce(
        &tansu.bootstrap(),
        &[("a", 50), ("a", 150), ("b", 500), ("c", 20)],
    );
    let server = Server::start(&["--cluster", &format!("prod={}", tansu.bootstrap())]);
    server.sql_ok(CREATE);
    let all = || {
        vec![
            ("a".to_string(), 2),
            ("b".to_string(), 1),
            ("c".to_string(), 1),
        ]
    };
    let slow = || vec![("a".to_string(), 1), ("b".to_string(), 1)];
    eventually("version 1 counted", Duration::from_secs(60), || {
        (counts(&server, None) == all()).then_some(())
    });

    let answer = server.sql_ok(REPLACE);
    assert_eq!(answer[0]["status"], "building", "{answer:?}");
    eventually("the build is ready", Duration::from_secs(60), || {
        (server.describe_view("page_counts")["status"] == "ready").then_some(())
    });
    assert_eq!(counts(&server, None), all());
    assert_eq!(counts(&server, Some(2)), slow());

    let (code, diff) = server.get("/v1/views/page_counts/diff");
    assert_eq!(code, 200, "{diff}");
    assert_eq!(
        (
            &diff["added"],
            &diff["removed"],
            &diff["changed"],
            &diff["unchanged"]
        ),
        (&json!(0), &json!(1), &json!(1), &json!(1)),
        "{diff}"
    );

    let (code, body) = server.post_json("/v1/views/page_counts/promote", &json!({}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(counts(&server, None), slow());
    let (code, body) = server.post_json("/v1/views/page_counts/rollback", &json!({}));
    assert_eq!(code, 200, "{body}");
    assert_eq!(counts(&server, None), all());
}
