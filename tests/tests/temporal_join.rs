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

/// Several joins over HTTP (issue 38): each order joins its customer and
/// the customer's country (the country's key read from the customer row),
/// each as of the order's time — in a derived stream and in an aggregate.
/// A customer who moves changes later orders only; a replay serves the
/// same rows; EXPLAIN shows both joins; the joined tables cannot be
/// dropped while the views read them.
#[test]
fn an_order_joins_its_customer_and_the_customers_country_each_as_of_its_time() {
    let server = Server::start(&[]);
    server.sql_ok(
        "CREATE TABLE customers (id VARCHAR PRIMARY KEY, name VARCHAR, country VARCHAR) WITH (KAFKA_TOPIC='customers', PARTITIONS=1);
         CREATE TABLE countries (code VARCHAR PRIMARY KEY, region VARCHAR) WITH (KAFKA_TOPIC='countries', PARTITIONS=2);
         CREATE STREAM orders (order_id VARCHAR, user_id VARCHAR, amount BIGINT) WITH (KAFKA_TOPIC='orders', PARTITIONS=1);
         CREATE STREAM orders_enriched AS SELECT o.order_id, o.amount, c.name, r.region
           FROM orders o JOIN customers c ON o.user_id = c.id LEFT JOIN countries r ON c.country = r.code;
         CREATE TABLE amount_per_region AS SELECT r.region, COUNT(*) AS n, SUM(o.amount) AS amount
           FROM orders o JOIN customers c ON o.user_id = c.id JOIN countries r ON c.country = r.code
           GROUP BY r.region;",
    );
    let customer = |id: &str, country: &str, at: i64| json!({"key": id, "value": {"name": id.to_uppercase(), "country": country}, "timestamp": BASE + at});
    let country = |code: &str, region: &str, at: i64| json!({"key": code, "value": {"region": region}, "timestamp": BASE + at});
    let order = |id: &str, user: &str, amount: i64, at: i64| json!({"key": id, "value": {"order_id": id, "user_id": user, "amount": amount}, "timestamp": BASE + at});
    let regions = |query: &str| {
        let mut rows: Rows = server.view_rows_as("amount_per_region", query, |r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["row"]["n"].as_i64().unwrap(),
                r["row"]["amount"].as_i64().unwrap(),
            )
        });
        rows.sort();
        rows
    };
    server.produce(
        "countries",
        &json!([country("JP", "APAC", 0), country("DE", "EMEA", 0)]),
    );
    server.produce(
        "customers",
        &json!([customer("u1", "JP", 0), customer("u2", "XX", 0)]),
    );
    // u2's country is unknown: its order is in the stream (LEFT JOIN), not
    // in the aggregate (JOIN); u3 has no customer row: in neither.
    let produced = server.produce(
        "orders",
        &json!([
            order("o1", "u1", 10, 1_000),
            order("o2", "u2", 20, 1_100),
            order("o3", "u3", 30, 1_200)
        ]),
    );
    assert_eq!(
        regions(&format!("after={}", after_param(&produced))),
        [("APAC".to_string(), 1, 10)]
    );
    // u1 moves to DE: o4 (after the move) joins EMEA, o1 stays APAC.
    server.produce("customers", &json!([customer("u1", "DE", 2_000)]));
    let produced = server.produce("orders", &json!([order("o4", "u1", 40, 3_000)]));
    let live = regions(&format!("after={}", after_param(&produced)));
    assert_eq!(
        live,
        [("APAC".to_string(), 1, 10), ("EMEA".to_string(), 1, 40)]
    );

    server.wait_view_committed("orders_enriched", 4, Duration::from_secs(60));
    let enriched: Vec<Value> = server
        .read_all("orders_enriched", 0)
        .into_iter()
        .map(|r| r["value"].clone())
        .collect();
    assert_eq!(
        enriched,
        [
            json!({"order_id": "o1", "amount": 10, "name": "U1", "region": "APAC"}),
            json!({"order_id": "o2", "amount": 20, "name": "U2", "region": null}),
            json!({"order_id": "o4", "amount": 40, "name": "U1", "region": "EMEA"}),
        ]
    );

    let (operators, _) = server.explain_operators("amount_per_region");
    assert_eq!(
        operators.iter().filter(|o| *o == "join").count(),
        2,
        "{operators:?}"
    );
    let (status, body) = server.sql("DROP TABLE countries");
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "has_dependents", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("amount_per_region") && message.contains("orders_enriched"),
        "{body}"
    );

    server.sql_ok("REPLAY TABLE amount_per_region FROM EARLIEST");
    eventually("the replay is served", Duration::from_secs(60), || {
        (server.describe_view("amount_per_region")["served_version"]["version"] == 2).then_some(())
    });
    server.wait_view_committed("amount_per_region", 4, Duration::from_secs(60));
    assert_eq!(regions(""), live, "replay = live");
}
