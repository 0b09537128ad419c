//! Hostile input to the stream processor, over HTTP: an event time at the
//! end of time must not blind a windowed view (it is invalid beyond
//! `MAX_FUTURE` of its append time, counted, and the view keeps counting
//! later events), and a window definition that would put one event in
//! millions of windows is refused with a clear 400 before it can exhaust
//! memory.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{after_param, assert_error, json, Client, Server, Value};

const CLICKS: &str = "CREATE STREAM clicks (page VARCHAR, ts BIGINT)
WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', TIMESTAMP='ts', PARTITIONS=1);";

fn click(page: &str, ts: i64) -> Value {
    json!({"key": page, "value": {"page": page, "ts": ts}})
}

/// A minute-aligned time ten minutes ago (records are appended now).
fn recent() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    (now - 600_000) / 60_000 * 60_000
}

/// The view's rows as (window start, count), after the view processed
/// everything produced.
fn counts(client: &Client, view: &str, after: &str) -> Vec<(i64, u64)> {
    let page = client.view_rows(view, &format!("after={after}&limit=100"));
    page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["window_start"].as_i64().unwrap(),
                r["row"]["n"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn an_event_time_at_the_end_of_time_is_invalid_and_the_view_keeps_counting() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(&format!(
        "{CLICKS}
         CREATE TABLE clicks_per_minute AS SELECT page, COUNT(*) AS n FROM clicks
         WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY page EMIT CHANGES;"
    ));
    let t0 = recent();
    let produced = client.produce(
        "clicks",
        &json!([
            click("a", t0),
            click("a", i64::MAX),
            click("a", t0 + 60_000)
        ]),
    );
    let rows = counts(&client, "clicks_per_minute", &after_param(&produced));
    assert_eq!(rows, vec![(t0, 1), (t0 + 60_000, 1)]);
    let view = client.describe_view("clicks_per_minute");
    let served = &view["served_version"];
    assert_eq!(served["invalid"], 1, "{view}");
    assert_eq!(served["late"], 0, "{view}");
    // DESCRIBE names the setting and its default.
    let results = client.sql_ok("DESCRIBE clicks_per_minute;");
    assert_eq!(
        results[0]["defaults"]["MAX_FUTURE"], "86400000 ms",
        "{results:?}"
    );
    assert_eq!(
        results[0]["settings"]["max_future_ms"], 86_400_000,
        "{results:?}"
    );
}

#[test]
fn max_future_is_a_view_option() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(&format!(
        "{CLICKS}
         CREATE TABLE clicks_per_minute WITH (MAX_FUTURE='1 HOUR') AS
         SELECT page, COUNT(*) AS n FROM clicks
         WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY page EMIT CHANGES;"
    ));
    let t0 = recent();
    let produced = client.produce(
        "clicks",
        &json!([
            click("a", t0),
            click("a", t0 + 3 * 3_600_000),
            click("a", t0 + 1_800_000)
        ]),
    );
    let rows = counts(&client, "clicks_per_minute", &after_param(&produced));
    assert_eq!(rows, vec![(t0, 1), (t0 + 1_800_000, 1)]);
    let view = client.describe_view("clicks_per_minute");
    assert_eq!(view["served_version"]["invalid"], 1, "{view}");
    let (status, body) = client.sql(
        "CREATE TABLE bad WITH (MAX_FUTURE='soon') AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;",
    );
    assert_error("bad MAX_FUTURE", status, &body, 400, "sql_error");
}

#[test]
fn a_hopping_window_of_a_day_every_millisecond_is_refused_with_the_limit() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(CLICKS);
    let (status, body) = client.sql(
        "CREATE TABLE greedy AS SELECT page, COUNT(*) AS n FROM clicks
         WINDOW HOPPING (SIZE 1 DAYS, ADVANCE BY 1 MILLISECOND) GROUP BY page;",
    );
    assert_error("hopping", status, &body, 400, "sql_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("10000"), "{message}");
    assert!(message.contains("ADVANCE"), "{message}");
    let (status, body) = client.get("/v1/views/greedy");
    assert_error("not created", status, &body, 404, "unknown_view");
    // The server is fine, and a definition within the limit runs.
    client.sql_ok(
        "CREATE TABLE fine AS SELECT page, COUNT(*) AS n FROM clicks
         WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 1 MILLISECOND) GROUP BY page;",
    );
    let t0 = recent();
    let produced = client.produce(
        "clicks",
        &json!([click("a", t0), click("b", t0 + 3_600_000)]),
    );
    // The jump closes a's 10,000 windows; the view keeps up and answers.
    let page = client.view_rows(
        "fine",
        &format!("after={}&key=a&limit=1", after_param(&produced)),
    );
    assert_eq!(page["rows"].as_array().unwrap().len(), 1, "{page}");
    let (status, _) = client.get("/health");
    assert_eq!(status, 200);
}
