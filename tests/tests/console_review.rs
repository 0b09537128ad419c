//! The console's review panel in a real headless browser (issue 12): a
//! replacement that waits for approval (`SWAP='MANUAL'`) shows what it
//! changes — the same counts the diff API answers — and the console's
//! buttons promote it, then roll back to the version served before.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod browser;

use std::time::Duration;

use browser::Browser;
use kappa_tests::{eventually, json, Server, Value};

fn clicks(server: &Server) {
    let records: Vec<Value> = ["a", "b", "a", "c", "a", "b"]
        .iter()
        .map(|k| json!({"key": k, "value": {"page": k}}))
        .collect();
    server.produce("clicks", &Value::Array(records));
}

#[test]
fn the_console_shows_a_waiting_versions_diff_and_promotes_and_rolls_back() {
    let server = Server::start(&[]);
    server.sql_ok(
        "CREATE STREAM clicks (page VARCHAR) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE TABLE per_page AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;",
    );
    clicks(&server);
    // Version 2 leaves page c out and waits for approval.
    server.sql_ok(
        "CREATE OR REPLACE TABLE per_page WITH (SWAP='MANUAL') AS
           SELECT page, COUNT(*) AS n FROM clicks WHERE page <> 'c' GROUP BY page;",
    );
    eventually("version 2 is ready", Duration::from_secs(60), || {
        (server.describe_view("per_page")["status"] == "ready").then_some(())
    });
    let (status, diff) = server.get("/v1/views/per_page/diff");
    assert_eq!(status, 200, "{diff}");
    assert_eq!(
        (&diff["added"], &diff["removed"], &diff["changed"]),
        (&json!(0), &json!(1), &json!(0))
    );

    let browser = Browser::start();
    browser.goto(&server.url());
    browser.select("#view-pick", "per_page");
    browser.text_until("#review-state", |t| {
        t.contains("v1 served") && t.contains("v2 ready")
    });
    browser.click("#diff");
    let counts = browser.text_until("#diff-counts", |t| !t.is_empty());
    let want = format!(
        "{} {} {} {}",
        diff["added"], diff["removed"], diff["changed"], diff["unchanged"]
    );
    assert!(
        counts
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .ends_with(&want),
        "the console's counts {counts:?} are the API's {want}"
    );
    let examples = browser.text("#diff-examples");
    assert!(
        examples.contains("removed") && examples.contains('c'),
        "{examples}"
    );

    browser.click("#promote");
    browser.text_until("#review-result", |t| t.contains("v2 served"));
    eventually("version 2 is served", Duration::from_secs(30), || {
        (server.describe_view("per_page")["served_version"]["version"] == 2).then_some(())
    });
    browser.text_until("#review-result", |t| t.contains("v2 served"));
    browser.text_until("#review-state", |t| t.contains("kept: v1"));

    browser.click("#rollback");
    eventually("version 1 is served again", Duration::from_secs(30), || {
        (server.describe_view("per_page")["served_version"]["version"] == 1).then_some(())
    });
    browser.text_until("#review-result", |t| t.contains("v1 served"));
    let rows = server.view_rows("per_page", "key=c");
    assert_eq!(rows["rows"][0]["row"]["n"], 1, "{rows}");
}
