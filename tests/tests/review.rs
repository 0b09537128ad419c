//! Review before serving, undo after (issue 12): `CREATE OR REPLACE TABLE
//! .. WITH (SWAP='MANUAL')` builds the new version, which waits in status
//! `ready` while following its input; both versions are readable side by
//! side; `kappa promote` serves it; `kappa rollback` serves the old rows
//! again; a restart keeps each state.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::{assert_error, eventually, json, run_cli, Server, Value};

const CREATE: &str = "CREATE STREAM clicks (page VARCHAR, ms BIGINT) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON');
CREATE TABLE page_counts AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;";

/// Only slow clicks count in the new version.
const REPLACE: &str = "CREATE OR REPLACE TABLE page_counts WITH (SWAP='MANUAL') AS
SELECT page, COUNT(*) AS n FROM clicks WHERE ms > 100 GROUP BY page;";

fn kappa(server: &Server, args: &[&str]) -> String {
    String::from_utf8_lossy(&run_cli(server, args).stdout).into_owned()
}

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

fn status(server: &Server) -> Value {
    server.describe_view("page_counts")
}

#[test]
fn a_manual_replacement_waits_for_promote_and_a_rollback_serves_the_old_rows_again() {
    let mut server = Server::start(&[]);
    server.create_topic(&json!({"name": "clicks"}));
    let clicks: Vec<Value> = [("a", 50), ("a", 150), ("b", 500), ("c", 20)]
        .iter()
        .map(|(page, ms)| json!({"key": page, "value": {"page": page, "ms": ms}}))
        .collect();
    server.produce("clicks", &Value::Array(clicks));
    server.sql_ok(CREATE);
    let all = || {
        vec![
            ("a".to_string(), 2),
            ("b".to_string(), 1),
            ("c".to_string(), 1),
        ]
    };
    let slow = || vec![("a".to_string(), 1), ("b".to_string(), 1)];
    eventually("version 1 counted", Duration::from_secs(30), || {
        (counts(&server, None) == all()).then_some(())
    });

    let answer = server.sql_ok(REPLACE);
    assert_eq!(answer[0]["status"], "building", "{answer:?}");
    assert_eq!(answer[0]["version"], 2);
    eventually("the build is ready", Duration::from_secs(30), || {
        (status(&server)["status"] == "ready").then_some(())
    });
    let view = status(&server);
    assert_eq!(view["served_version"]["version"], 1, "{view}");
    assert_eq!(view["building_version"]["swap"], "manual");
    assert_eq!(view["building_version"]["ready"], true);
    // Reviewable: both versions read side by side.
    assert_eq!(counts(&server, None), all());
    assert_eq!(counts(&server, Some(2)), slow());

    // The difference, counted: a 2 -> 1, b unchanged, c gone.
    let (code, diff) = server.get("/v1/views/page_counts/diff");
    assert_eq!(code, 200, "{diff}");
    assert_eq!(diff["base"]["version"], 1);
    assert_eq!(diff["candidate"]["version"], 2);
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
    assert_eq!(diff["examples"][0]["key"], "a");
    assert_eq!(diff["examples"][0]["change"], "changed");
    assert_eq!(diff["examples"][0]["base"]["n"], 2);
    assert_eq!(diff["examples"][0]["candidate"]["n"], 1);
    assert_eq!(diff["examples"][1]["change"], "removed");
    assert!(diff["examples"][1]["candidate"].is_null());
    let printed = kappa(&server, &["diff", "page_counts"]);
    assert!(
        printed.contains("0 added, 1 removed, 1 changed, 1 unchanged"),
        "{printed}"
    );
    let (code, body) = server.get("/v1/views/page_counts/diff?limit=5000");
    assert_error("limit", code, &body, 400, "bad_request");

    // A restart keeps it waiting.
    server.terminate_ok();
    let server = server.restart();
    eventually("ready after the restart", Duration::from_secs(30), || {
        (status(&server)["status"] == "ready").then_some(())
    });
    assert_eq!(status(&server)["served_version"]["version"], 1);

    let promoted = kappa(&server, &["promote", "page_counts"]);
    assert!(promoted.contains("version 2 is served"), "{promoted}");
    assert_eq!(counts(&server, None), slow());
    let view = status(&server);
    assert_eq!(view["status"], "running");
    assert_eq!(view["grace_versions"][0]["version"], 1, "{view}");
    let (status_code, body) = server.post_json("/v1/views/page_counts/promote", &json!({}));
    assert_error(
        "promote again",
        status_code,
        &body,
        409,
        "nothing_to_promote",
    );

    let rolled = kappa(&server, &["rollback", "page_counts"]);
    assert!(rolled.contains("version 1 is served"), "{rolled}");
    assert_eq!(counts(&server, None), all());
    assert_eq!(status(&server)["grace_versions"][0]["version"], 2);

    // Not for streams, and not without a kept version.
    let (code, body) = server.post_json("/v1/views/nope/rollback", &json!({}));
    assert_error("unknown view", code, &body, 404, "unknown_view");
}
