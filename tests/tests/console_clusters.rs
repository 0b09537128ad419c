//! The console shows a view's cluster and lag (issue 36), in a real
//! headless browser: a table over a topic of a Kafka cluster (Tansu) says
//! where its source lives — `user_events on cluster prod`, not a link to
//! the topic page, which reads the built-in log — with the committed
//! offset, end and lag of each of the cluster topic's partitions; DESCRIBE
//! in the SQL page says `user_events @ prod`; and once the cluster is
//! gone, the page says the view waits for its source, and why.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod browser;

use std::time::Duration;

use browser::Browser;
use kappa_tests::{eventually, json, Server, Tansu, Value};

/// The cells of `#view-partitions`' rows, header left out.
fn partition_rows(browser: &Browser) -> Value {
    browser.execute(
        "const rows = [...document.querySelectorAll('#view-partitions tr')].slice(1);
         return rows.map((tr) => [...tr.cells].map((c) => c.textContent));",
        vec![],
    )
}

#[test]
fn the_view_page_shows_a_cluster_source_its_partitions_lag_and_a_wait_for_the_cluster() {
    let tansu = Tansu::start();
    tansu.create_topic("user_events", 2);
    let server = Server::start(&["--cluster", &format!("prod={}", tansu.bootstrap())]);
    server.sql_ok(
        "CREATE STREAM user_events (user_id VARCHAR, event_type VARCHAR, amount DOUBLE)
           WITH (KAFKA_TOPIC='user_events', CLUSTER='prod');",
    );
    server.sql_ok(
        "CREATE TABLE totals AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id;",
    );
    // The API's answer the page shows: both partitions, empty (lag 0).
    let view = eventually(
        "totals to know its two partitions",
        Duration::from_secs(60),
        || {
            let view = server.describe_view("totals");
            let partitions = view["served_version"]["partitions"].as_array()?;
            (partitions.len() == 2).then_some(view)
        },
    );
    assert_eq!(view["source_cluster"], "prod", "{view}");
    assert!(view.get("output_cluster").is_none(), "{view}");

    let browser = Browser::start();
    browser.goto(&format!("{}/#/view/totals", server.url()));
    browser.text_until("#view-title", |t| t == "Table totals");
    browser.text_until("#view-details", |t| {
        t.contains("source topic user_events on cluster prod")
    });
    // The topic page reads the built-in log, which has no user_events.
    let topic_links = browser.execute(
        "return document.querySelectorAll('#view-details a[href^=\"#/topic/\"]').length;",
        vec![],
    );
    assert_eq!(topic_links, json!(0), "the cluster's topic is not linked");
    let headers = browser.text_until("#view-partitions tr", |t| !t.is_empty());
    assert_eq!(headers, "partition committed end lag");
    let want = json!([["0", "0", "0", "0"], ["1", "0", "0", "0"]]);
    let rows = browser.until("a lag row per partition", || {
        let rows = partition_rows(&browser);
        (rows == want).then_some(rows)
    });
    assert_eq!(rows, want);
    browser.text_until("#view-details", |t| t.contains("lag 0 records"));

    // DESCRIBE in the SQL page names the cluster with the topic.
    browser.goto(&format!("{}/#/sql", server.url()));
    browser.type_into("#sql", "DESCRIBE totals;");
    browser.click("#run");
    browser.text_until("#sql-result", |t| t.contains("user_events @ prod"));

    // The cluster goes away: the view waits for it, and the page says so.
    drop(tansu);
    let view = eventually(
        "totals to wait for its cluster",
        Duration::from_secs(120),
        || {
            let view = server.describe_view("totals");
            (view["status"] == "waiting_for_source").then_some(view)
        },
    );
    let reason = view["failure"]["reason"].as_str().unwrap();
    assert!(reason.contains("cluster 'prod'"), "{view}");
    browser.goto(&format!("{}/#/view/totals", server.url()));
    let warning = browser.text_until("#view-warning", |t| {
        t.starts_with("Waiting for the source: v1 stopped because cluster prod cannot be read")
    });
    assert!(warning.contains("cluster 'prod'"), "{warning}");
    assert!(browser.shown("#view-warning"), "the warning is shown");
    browser.text_until("#view-details", |t| {
        t.contains("status waiting for source") && t.contains("cluster 'prod'")
    });
}
