//! `INSERT INTO` an existing stream (issue 38): two queries append web and
//! app clicks to one declared stream's topic, and a table over that
//! stream counts both; the queries keep appending after a restart. Bad
//! targets are refused with a reason: a table, a stream reading itself,
//! a column the target does not declare, an unknown stream.
//!
//! Synchronization: the view is polled (bounded) until it holds the
//! expected rows; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::Duration;

use kappa_tests::{eventually, json, Client, Server, Value};

const STREAMS: &str = "
CREATE STREAM web (user_id VARCHAR, page VARCHAR) WITH (KAFKA_TOPIC='web');
CREATE STREAM app (user_id VARCHAR, screen VARCHAR) WITH (KAFKA_TOPIC='app');
CREATE STREAM clicks (user_id VARCHAR, place VARCHAR, via VARCHAR) WITH (KAFKA_TOPIC='clicks');
CREATE TABLE users (user_id VARCHAR PRIMARY KEY, name VARCHAR) WITH (KAFKA_TOPIC='users');
CREATE TABLE clicks_per_via AS SELECT via, COUNT(*) AS n FROM clicks GROUP BY via;";

const INSERTS: &str = "
INSERT INTO clicks SELECT user_id, page AS place, 'web' AS via FROM web;
INSERT INTO clicks WITH (QUERY_ID='app_clicks')
SELECT user_id, screen AS place, 'app' AS via FROM app WHERE screen <> 'splash';";

fn produce(client: &Client, topic: &str, field: &str, from: u64, to: u64) {
    let records: Vec<Value> = (from..to)
        .map(|i| {
            let place = if i % 4 == 0 { "splash" } else { "home" };
            json!({"key": format!("u{}", i % 3), "value": {"user_id": format!("u{}", i % 3), field: place}})
        })
        .collect();
    client.produce(topic, &json!(records));
}

fn counts(client: &Client) -> BTreeMap<String, u64> {
    client.view_rows("clicks_per_via", "limit=10")["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["row"]["via"].as_str().unwrap().to_string(),
                r["row"]["n"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn wait_counts(client: &Client, web: u64, app: u64) {
    let want: BTreeMap<String, u64> = [("web".to_string(), web), ("app".to_string(), app)].into();
    eventually(
        "clicks_per_via counts both",
        Duration::from_secs(60),
        || (counts(client) == want).then_some(()),
    );
}

/// Runs `sql`, asserting it is refused with 400 and a message holding
/// `reason`.
fn refused(client: &Client, sql: &str, reason: &str) {
    let (status, body) = client.sql(sql);
    assert_eq!(status, 400, "{sql}: {body}");
    assert!(body.to_string().contains(reason), "{sql}: {body}");
}

#[test]
fn insert_into_appends_several_queries_to_one_stream() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(STREAMS);
    let results = client.sql_ok(INSERTS);
    assert_eq!(results[0]["statement"], "INSERT INTO", "{results:?}");
    assert_eq!(results[0]["name"], "insert_into_clicks", "{results:?}");
    assert_eq!(results[1]["name"], "app_clicks", "{results:?}");
    produce(&client, "web", "page", 0, 20);
    produce(&client, "app", "screen", 0, 20);
    // App clicks on the splash screen (1 in 4) are filtered out.
    wait_counts(&client, 20, 15);

    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    produce(&client, "web", "page", 20, 30);
    produce(&client, "app", "screen", 20, 40);
    wait_counts(&client, 30, 30);

    refused(
        &client,
        "INSERT INTO users SELECT user_id, page AS name FROM web",
        "'users' is a table",
    );
    refused(
        &client,
        "INSERT INTO clicks WITH (QUERY_ID='loop') SELECT * FROM clicks",
        "it would read what it writes",
    );
    refused(
        &client,
        "INSERT INTO clicks WITH (QUERY_ID='odd') SELECT user_id, page FROM web",
        "column 'page' is not a column of 'clicks'",
    );
    let (status, body) = client.sql("INSERT INTO nowhere SELECT * FROM web");
    assert_eq!(status, 404, "{body}");
    // The same query id twice is a conflict.
    let (status, body) = client.sql(
        "INSERT INTO clicks WITH (QUERY_ID='app_clicks') SELECT user_id, screen AS place FROM app",
    );
    assert_eq!(status, 409, "{body}");
}
