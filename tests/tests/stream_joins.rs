//! Joins of two streams within a time bound (`JOIN .. WITHIN`, issue 38)
//! through the HTTP API: orders joined with their payments, a payment
//! counting when it comes at most a minute after its order. A derived
//! stream (`LEFT JOIN`: every order, with its payments or alone) and a
//! table aggregating the inner join per user both equal a join computed
//! here naively, across a `kill -9` of the server in the middle: nothing
//! is lost or joined twice. An order no payment can join any more comes
//! out alone once the watermark passes its bound and grace period.
//!
//! Synchronization: the output topic and the view are polled (bounded)
//! until they hold what is expected; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kappa_tests::{eventually, json, Client, Server, Value};

const STREAMS: &str = "
CREATE STREAM orders (order_id VARCHAR, user_id VARCHAR, amount BIGINT, at BIGINT)
  WITH (KAFKA_TOPIC='orders', TIMESTAMP='at');
CREATE STREAM payments (order_id VARCHAR, paid BIGINT, at BIGINT)
  WITH (KAFKA_TOPIC='payments', TIMESTAMP='at');";

const PAID_ORDERS: &str = "
CREATE STREAM paid_orders WITH (PARTITIONS=1) AS
SELECT o.order_id AS order_id, o.amount AS amount, p.paid AS paid
FROM orders o LEFT JOIN payments p WITHIN (0 SECONDS, 1 MINUTE) GRACE PERIOD 1 HOUR
  ON o.order_id = p.order_id;";

const PAID_PER_USER: &str = "
CREATE TABLE paid_per_user AS
SELECT o.user_id AS user_id, COUNT(*) AS payments, SUM(p.paid) AS total
FROM payments p JOIN orders o WITHIN (1 MINUTE, 0 SECONDS) GRACE PERIOD 1 HOUR
  ON p.order_id = o.order_id
WHERE o.amount > 3
GROUP BY o.user_id;";

/// 2026-01-01T00:00:00Z.
const BASE: i64 = 1_767_225_600_000;
const ORDERS: u64 = 60;

struct Order {
    at: i64,
}

struct Payment {
    order: u64,
    paid: i64,
    at: i64,
}

fn order(i: u64) -> Order {
    Order {
        at: BASE + i as i64 * 1_000,
    }
}

/// Order `i`'s payments: most orders one, some two, some none; some come
/// before the order or more than a minute after it (and join nothing).
fn payments(i: u64) -> Vec<Payment> {
    let o = order(i);
    let mut out = Vec::new();
    if !i.is_multiple_of(3) {
        let delta = (i as i64 * 7_919) % 90_000 - 10_000;
        out.push(Payment {
            order: i,
            paid: i as i64 * 10,
            at: o.at + delta,
        });
    }
    if i % 10 == 1 {
        out.push(Payment {
            order: i,
            paid: i as i64 * 10 + 1,
            at: o.at + 5_000,
        });
    }
    out
}

fn user(i: u64) -> String {
    format!("u{}", i % 5)
}

/// Produces orders `from..to` (to both partitions of `orders`) and their
/// payments.
fn produce(client: &Client, from: u64, to: u64) {
    let orders: Vec<Value> = (from..to)
        .map(|i| {
            let o = order(i);
            json!({"key": format!("o{i}"), "partition": i % 2,
                   "value": {"order_id": format!("o{i}"), "user_id": user(i), "amount": i, "at": o.at}})
        })
        .collect();
    client.produce("orders", &json!(orders));
    let payments: Vec<Value> = (from..to)
        .flat_map(payments)
        .map(|p| {
            json!({"key": format!("o{}", p.order), "partition": 0,
                   "value": {"order_id": format!("o{}", p.order), "paid": p.paid, "at": p.at}})
        })
        .collect();
    client.produce("payments", &json!(payments));
}

/// Events three days later in every partition: the watermark passes every
/// order's bound and grace period (and these join nothing).
fn push_watermark(client: &Client) {
    let at = BASE + 3 * 86_400_000;
    let orders: Vec<Value> = (0..2)
        .map(|p| json!({"partition": p, "value": {"order_id": format!("end{p}"), "user_id": "x", "amount": 0, "at": at}}))
        .collect();
    client.produce("orders", &json!(orders));
    client.produce(
        "payments",
        &json!([{"partition": 0, "value": {"order_id": "endp", "paid": 0, "at": at}}]),
    );
}

/// The joined pairs, computed naively: (order, paid).
fn pairs() -> Vec<(u64, i64)> {
    let mut out = Vec::new();
    for i in 0..ORDERS {
        let o = order(i);
        for p in payments(i) {
            if o.at <= p.at && p.at <= o.at + 60_000 {
                out.push((p.order, p.paid));
            }
        }
    }
    out
}

/// `paid_orders` as expected: each pair, and each order without one.
fn expected_stream() -> Vec<String> {
    let pairs = pairs();
    let mut rows: Vec<String> = pairs
        .iter()
        .map(|(i, paid)| {
            json!({"order_id": format!("o{i}"), "amount": i, "paid": paid}).to_string()
        })
        .collect();
    for i in 0..ORDERS {
        if !pairs.iter().any(|(o, _)| *o == i) {
            rows.push(json!({"order_id": format!("o{i}"), "amount": i, "paid": null}).to_string());
        }
    }
    rows.sort();
    rows
}

/// `paid_per_user` as expected: (payments, total) per user, orders over 3.
fn expected_table() -> BTreeMap<String, (u64, i64)> {
    let mut rows = BTreeMap::new();
    for (i, paid) in pairs().into_iter().filter(|(i, _)| *i > 3) {
        let row = rows.entry(user(i)).or_insert((0, 0));
        row.0 += 1;
        row.1 += paid;
    }
    rows
}

/// Every record of `paid_orders` once there are `want` (bounded).
fn stream_rows(client: &Client, want: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut rows: Vec<String> = client
            .read_all("paid_orders", 0)
            .iter()
            .map(|r| r["value"].to_string())
            .collect();
        if rows.len() >= want {
            rows.sort();
            return rows;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {want} records",
            rows.len()
        );
        client.read("paid_orders", 0, "offset=0&max_wait_ms=200");
    }
}

fn table_rows(client: &Client) -> BTreeMap<String, (u64, i64)> {
    let page = client.view_rows("paid_per_user", "limit=100");
    page["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let row = &r["row"];
            (
                row["user_id"].as_str().unwrap().to_string(),
                (
                    row["payments"].as_u64().unwrap(),
                    row["total"].as_i64().unwrap(),
                ),
            )
        })
        .collect()
}

/// `EXPLAIN` of the running table shows its operators in order, the
/// filter applied before the join, and how many events the join keeps
/// now; `EXPLAIN CREATE ..` plans without creating anything.
fn explain(client: &Client) {
    let result = &client.sql_ok("EXPLAIN paid_per_user")[0];
    let operators = result["operators"].as_array().unwrap();
    let names: Vec<&str> = operators
        .iter()
        .map(|o| o["operator"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["source", "join", "filter", "aggregate", "sink"],
        "{result}"
    );
    let join = &operators[1];
    let detail = join["detail"].as_str().unwrap();
    assert!(
        detail.contains("WITHIN (1 min before, 0 ms after)")
            && detail.contains("the joined events pass (o.amount > 3)"),
        "{detail}"
    );
    // The last events of each stream wait for a pair.
    assert!(join["state_entries"].as_u64().unwrap() >= 1, "{join}");
    assert!(result["state_bytes"].as_u64().is_some(), "{result}");
    assert!(
        result["text"].as_str().unwrap().contains("-> join"),
        "{result}"
    );

    let planned = &client.sql_ok(&format!(
        "EXPLAIN {}",
        PAID_ORDERS.replace("paid_orders", "not_made")
    ))[0];
    assert_eq!(planned["name"], "not_made", "{planned}");
    assert!(
        planned["operators"][1]["state_entries"].is_null(),
        "{planned}"
    );
    let (status, _) = client.get("/v1/views/not_made");
    assert_eq!(status, 404);
}

#[test]
fn joins_of_two_streams_equal_a_naive_join_across_a_crash() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.create_topic(&json!({"name": "orders", "partitions": 2}));
    client.create_topic(&json!({"name": "payments", "partitions": 1}));
    client.sql_ok(STREAMS);
    client.sql_ok(PAID_ORDERS);
    client.sql_ok(PAID_PER_USER);
    produce(&client, 0, ORDERS / 2);
    // Some joined rows are out before the crash.
    eventually("paid_per_user has rows", Duration::from_secs(60), || {
        (!table_rows(&client).is_empty()).then_some(())
    });

    server.kill9();
    let server = server.restart();
    let client = server.client();
    produce(&client, ORDERS / 2, ORDERS);
    push_watermark(&client);

    let want = expected_stream();
    assert_eq!(stream_rows(&client, want.len()), want);
    let want = expected_table();
    eventually(
        "paid_per_user equals the naive join",
        Duration::from_secs(60),
        || (table_rows(&client) == want).then_some(()),
    );
    explain(&client);
    // Nothing more comes: each row came once.
    assert_eq!(
        client.read_all("paid_orders", 0).len(),
        expected_stream().len()
    );
}
