//! A query over another query's rows (issue 38): `FROM (SELECT ..)` and
//! `WITH .. AS`, aggregating the rows of an aggregate as they change — a
//! user's row moves from one group to the next as it grows, its old
//! version retracted — or keeping their top-N (`QUALIFY RANK() ..`), equal
//! to what is computed here from the events, across a `kill -9` and a
//! restart; `EXPLAIN` shows the operators; what cannot be run is refused
//! with the reason.
//!
//! Synchronization: the view is polled (bounded) until it holds the
//! expected rows; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::Duration;

use kappa_tests::brief::USER_EVENTS;
use kappa_tests::{eventually, json, Client, Server, Value};

/// How many users made each number of purchases, and what they spent.
const HISTOGRAM: &str = "CREATE TABLE purchase_histogram AS
SELECT purchases, COUNT(*) AS users, SUM(spent) AS spent, MAX(spent) AS top
FROM (SELECT user_id, COUNT(*) AS purchases, SUM(amount) AS spent
      FROM user_events WHERE event_type = 'purchase' GROUP BY user_id) AS per_user
GROUP BY purchases;";

/// The same through a CTE, over users who spent more than 5.
const BIG_SPENDERS: &str = "CREATE TABLE big_spenders AS
WITH per_user AS (SELECT user_id, SUM(amount) AS spent FROM user_events
                  WHERE event_type = 'purchase' GROUP BY user_id)
SELECT COUNT(*) AS users, AVG(spent) AS mean FROM per_user WHERE spent > 5;";

fn event(i: u64) -> (String, &'static str, f64) {
    let user = format!("u{}", (i * 7) % 11);
    let kind = if i.is_multiple_of(4) {
        "view"
    } else {
        "purchase"
    };
    (user, kind, (i % 5) as f64 + 0.25)
}

fn produce(client: &Client, from: u64, to: u64) {
    let records: Vec<Value> = (from..to)
        .map(|i| {
            let (user, kind, amount) = event(i);
            json!({"key": user, "value": {"user_id": user, "event_type": kind,
                   "amount": amount, "event_time": 1_767_225_600_000i64 + i as i64}})
        })
        .collect();
    client.produce("user_events", &json!(records));
}

/// Per user of events `0..to`: purchases and amount spent.
fn per_user(to: u64) -> BTreeMap<String, (u64, f64)> {
    let mut users: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for i in 0..to {
        let (user, kind, amount) = event(i);
        if kind == "purchase" {
            let u = users.entry(user).or_default();
            u.0 += 1;
            u.1 += amount;
        }
    }
    users
}

/// The histogram of events `0..to`: purchases → (users, spent, top).
fn histogram(to: u64) -> BTreeMap<u64, (u64, f64, f64)> {
    let mut out: BTreeMap<u64, (u64, f64, f64)> = BTreeMap::new();
    for (n, spent) in per_user(to).into_values() {
        let h = out.entry(n).or_insert((0, 0.0, f64::MIN));
        h.0 += 1;
        h.1 += spent;
        h.2 = h.2.max(spent);
    }
    out
}

fn close(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-6)
}

fn wait_for_histogram(client: &Client, to: u64) {
    let want = histogram(to);
    eventually(
        "purchase_histogram holds every user's group",
        Duration::from_secs(60),
        || {
            let rows = client.view_rows("purchase_histogram", "limit=1000")["rows"].clone();
            let rows = rows.as_array().unwrap();
            let matches = rows.len() == want.len()
                && rows.iter().all(|r| {
                    let row = &r["row"];
                    let Some((users, spent, top)) =
                        row["purchases"].as_u64().and_then(|n| want.get(&n))
                    else {
                        return false;
                    };
                    row["users"] == json!(users)
                        && close(&row["spent"], *spent)
                        && close(&row["top"], *top)
                });
            matches.then_some(())
        },
    );
}

fn wait_for_big_spenders(client: &Client, to: u64) {
    let spent: Vec<f64> = per_user(to)
        .into_values()
        .map(|(_, s)| s)
        .filter(|s| *s > 5.0)
        .collect();
    assert!(!spent.is_empty(), "some user spent more than 5");
    let mean = spent.iter().sum::<f64>() / spent.len() as f64;
    eventually(
        "big_spenders counts the users over 5",
        Duration::from_secs(60),
        || {
            let rows = client.view_rows("big_spenders", "limit=10")["rows"].clone();
            let row = &rows[0]["row"];
            (rows.as_array().unwrap().len() == 1
                && row["users"] == json!(spent.len())
                && close(&row["mean"], mean))
            .then_some(())
        },
    );
}

#[test]
fn an_aggregate_over_an_aggregates_rows_follows_each_row_as_it_changes() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(HISTOGRAM);
    client.sql_ok(BIG_SPENDERS);
    produce(&client, 0, 40);
    wait_for_histogram(&client, 40);
    wait_for_big_spenders(&client, 40);
    explain(&client);
    // Rows keep moving between groups after a crash and a restart.
    server.kill9();
    let server = server.restart();
    let client = server.client();
    produce(&client, 40, 150);
    wait_for_histogram(&client, 150);
    wait_for_big_spenders(&client, 150);
}

/// `FROM` a table defined by a query reads that query's rows: the
/// histogram over `per_user` by name equals the one over the same query as
/// a subquery; the definition is copied when the statement is planned, so
/// dropping `per_user` leaves the histogram following the stream.
#[test]
fn from_a_table_by_name_reads_its_querys_rows() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(
        "CREATE TABLE per_user AS SELECT user_id, COUNT(*) AS purchases, SUM(amount) AS spent
         FROM user_events WHERE event_type = 'purchase' GROUP BY user_id;",
    );
    client.sql_ok(
        "CREATE TABLE purchase_histogram AS
         SELECT purchases, COUNT(*) AS users, SUM(spent) AS spent, MAX(spent) AS top
         FROM per_user GROUP BY purchases;",
    );
    produce(&client, 0, 60);
    wait_for_histogram(&client, 60);
    let (operators, _) = client.explain_operators("purchase_histogram");
    assert!(
        operators.iter().any(|o| o == "aggregate_rows"),
        "{operators:?}"
    );
    client.sql_ok("DROP TABLE per_user;");
    produce(&client, 60, 120);
    wait_for_histogram(&client, 120);

    // What a subquery cannot carry is refused, naming the table.
    client.sql_ok(
        "CREATE TABLE late_per_user WITH (WATERMARK_DELAY = '1 MINUTE') AS
         SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id;
         CREATE TABLE accounts (id VARCHAR PRIMARY KEY, tier VARCHAR) WITH (KAFKA_TOPIC = 'accounts');
         CREATE TABLE per_tier AS SELECT tier, COUNT(*) AS n FROM accounts GROUP BY tier;
         CREATE TABLE nested AS SELECT purchases, COUNT(*) AS users FROM
           (SELECT user_id, COUNT(*) AS purchases FROM user_events GROUP BY user_id) AS q
         GROUP BY purchases;",
    );
    for (sql, wanted) in [
        (
            "CREATE TABLE t AS SELECT n, COUNT(*) AS c FROM late_per_user GROUP BY n;",
            "sets WATERMARK_DELAY",
        ),
        (
            "CREATE TABLE t AS SELECT n, COUNT(*) AS c FROM per_tier GROUP BY n;",
            "reads the declared table \"accounts\"",
        ),
        (
            "CREATE TABLE t AS SELECT c, COUNT(*) AS k FROM purchase_histogram GROUP BY c;",
            "reads \"per_user\", which is not a stream",
        ),
        (
            "CREATE TABLE t AS SELECT users, COUNT(*) AS k FROM nested GROUP BY users;",
            "reads a subquery",
        ),
    ] {
        let message = client.sql_refused(sql);
        assert!(message.contains(wanted), "{sql}: {message}");
    }
}

/// `EXPLAIN` shows the inner aggregate feeding the aggregate over its rows.
fn explain(client: &Client) {
    let result = &client.sql_ok("EXPLAIN purchase_histogram")[0];
    let operators = result["operators"].as_array().unwrap();
    let names: Vec<&str> = operators
        .iter()
        .map(|o| o["operator"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["source", "filter", "aggregate", "aggregate_rows", "sink"],
        "{result}"
    );
    let rows = &operators[3];
    assert!(
        rows["detail"]
            .as_str()
            .unwrap()
            .contains("GROUP BY purchases"),
        "{rows}"
    );
    assert!(rows["state_entries"].as_u64().is_some(), "{rows}");
}

/// The three biggest spenders, with ties (`RANK`).
const TOP_SPENDERS: &str = "CREATE TABLE top_spenders AS
SELECT user_id, spent FROM (
  SELECT user_id, SUM(amount) AS spent FROM user_events
  WHERE event_type = 'purchase' GROUP BY user_id) AS per_user
QUALIFY RANK() OVER (ORDER BY spent DESC) <= 3;";

/// The users of events `0..to` ranked third or better by spending, ties
/// kept.
fn top_spenders(to: u64) -> BTreeMap<String, f64> {
    let mut users: Vec<(String, f64)> =
        per_user(to).into_iter().map(|(u, (_, s))| (u, s)).collect();
    users.sort_by(|a, b| b.1.total_cmp(&a.1));
    let third = users[2.min(users.len() - 1)].1;
    users
        .into_iter()
        .filter(|(_, s)| *s >= third - 1e-9)
        .collect()
}

fn wait_for_top(client: &Client, to: u64) {
    let want = top_spenders(to);
    eventually(
        "top_spenders holds the three biggest spenders",
        Duration::from_secs(60),
        || {
            let rows = client.view_rows("top_spenders", "limit=100")["rows"].clone();
            let got: BTreeMap<String, f64> = rows
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["row"]["user_id"].as_str().unwrap().to_string(),
                        r["row"]["spent"].as_f64().unwrap(),
                    )
                })
                .collect();
            (got.len() == want.len()
                && got
                    .iter()
                    .zip(&want)
                    .all(|((a, x), (b, y))| a == b && (x - y).abs() < 1e-6))
            .then_some(())
        },
    );
}

#[test]
fn a_top_n_of_an_aggregates_rows_follows_the_ranking_as_rows_change() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    client.sql_ok(TOP_SPENDERS);
    produce(&client, 0, 40);
    wait_for_top(&client, 40);
    let (names, result) = client.explain_operators("top_spenders");
    assert_eq!(
        names,
        ["source", "filter", "aggregate", "top_n", "sink"],
        "{result}"
    );
    // Users overtake each other after a crash and a restart.
    server.kill9();
    let server = server.restart();
    let client = server.client();
    produce(&client, 40, 150);
    wait_for_top(&client, 150);
}

#[test]
fn what_a_query_over_a_subquery_cannot_do_is_refused_with_the_reason() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(USER_EVENTS);
    for (sql, wanted) in [
        (
            "CREATE STREAM s AS SELECT n FROM (SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id) q;",
            "use CREATE TABLE",
        ),
        (
            "CREATE TABLE t AS SELECT n FROM (SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id) q;",
            "must aggregate them",
        ),
        (
            "CREATE TABLE t AS SELECT COUNT(*) AS c FROM (SELECT user_id FROM user_events) AS q;",
            "the subquery must aggregate",
        ),
    ] {
        let message = client.sql_refused(sql);
        assert!(message.contains(wanted), "{sql}: {message}");
    }
}
