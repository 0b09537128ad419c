//! The issue-12 join scenario over HTTP: `spend_by_tier` joins purchases
//! with the tier each user had when buying. Tiers change between rounds of
//! purchases; the live view reads, after each round, the tier-as-of-purchase
//! answer, and a replay of the unchanged definition (which finds the whole
//! `tiers` topic in the log before the first purchase) serves the same rows.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::time::Duration;

use kappa_tests::{after_param, eventually, json, Server, Value};

const BASE: i64 = 1_767_225_600_000;

/// (tier, purchases, spent) rows of the view.
type Rows = Vec<(String, i64, i64)>;

/// One round: tier records, purchase records, the rows after them.
type Round = (Vec<Value>, Vec<Value>, Rows);

fn rows(server: &Server, query: &str) -> Rows {
    let mut rows: Rows = server.view_rows_as("spend_by_tier", query, |r| {
        (
            r["key"].as_str().unwrap().to_string(),
            r["row"]["n"].as_i64().unwrap(),
            r["row"]["spent"].as_i64().unwrap(),
        )
    });
    rows.sort();
    rows
}

#[test]
fn live_rows_are_the_tier_as_of_each_purchase_and_a_replay_serves_the_same() {
    let server = Server::start(&[]);
    server.sql_ok(
        "CREATE TABLE tiers (user_id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (KAFKA_TOPIC='tiers', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE STREAM buys (user_id VARCHAR, amount BIGINT) WITH (KAFKA_TOPIC='buys', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE TABLE spend_by_tier AS SELECT t.tier, COUNT(*) AS n, SUM(b.amount) AS spent
           FROM buys b JOIN tiers t ON b.user_id = t.user_id GROUP BY t.tier;",
    );
    let tier = |user: &str, tier: &str, at: i64| json!({"key": user, "value": {"user_id": user, "tier": tier}, "timestamp": BASE + at});
    let buy = |user: &str, amount: i64, at: i64| json!({"key": user, "value": {"user_id": user, "amount": amount}, "timestamp": BASE + at});
    let rounds: Vec<Round> = vec![
        (
            vec![tier("u1", "bronze", 0), tier("u2", "bronze", 0)],
            vec![buy("u1", 10, 1_000), buy("u2", 20, 1_100)],
            vec![("bronze".into(), 2, 30)],
        ),
        (
            vec![tier("u1", "gold", 2_000)],
            vec![buy("u1", 30, 3_000), buy("u2", 40, 3_100)],
            vec![("bronze".into(), 3, 70), ("gold".into(), 1, 30)],
        ),
        (
            vec![tier("u2", "gold", 4_000)],
            vec![buy("u2", 50, 5_000)],
            vec![("bronze".into(), 3, 70), ("gold".into(), 2, 80)],
        ),
    ];
    for (tiers, buys, want) in &rounds {
        server.produce("tiers", &Value::Array(tiers.clone()));
        let produced = server.produce("buys", &Value::Array(buys.clone()));
        let after = after_param(&produced);
        assert_eq!(&rows(&server, &format!("after={after}")), want, "live");
    }
    let live = rows(&server, "");

    let (status, body) = server.post_json(
        "/v1/views/spend_by_tier/replay",
        &json!({"from": "earliest"}),
    );
    assert_eq!(status, 202, "{body}");
    eventually("the replay is served", Duration::from_secs(60), || {
        (server.describe_view("spend_by_tier")["served_version"]["version"] == 2).then_some(())
    });
    assert_eq!(rows(&server, ""), live, "replay = live");
}
