//! A query over a declared table's rows (issue 38, "FROM a table"):
//! `CREATE TABLE .. AS SELECT .. FROM accounts GROUP BY tier` aggregates
//! the latest row of each key of the table's topic as rows change tier,
//! change credit or are deleted (a record with a null value), each change
//! retracting the row's previous version — as Kafka Streams'
//! `KTable.groupBy(..).aggregate` does. A top-N (`QUALIFY`) over the rows
//! follows them too. Both equal what is computed here from the records,
//! across a `kill -9` and a restart, and a view created after the records
//! (one pass over the whole history) ends with the same rows.
//!
//! Joins of tables: each account with its tier's rate (a foreign-key
//! join: an account's `tier` names a rate's key), shown row by row and
//! aggregated per tier, follow changes on either side — a rate's change
//! reaches every account of its tier, a rate's deletion drops them from the
//! inner join.
//!
//! Synchronization: the view is polled (bounded) until it holds the
//! expected rows; nothing sleeps.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;
use std::time::Duration;

use kappa_tests::{eventually, json, Client, Server, Value};

const ACCOUNTS: &str = "CREATE TABLE accounts (id VARCHAR PRIMARY KEY, tier VARCHAR, credit BIGINT)
  WITH (KAFKA_TOPIC='accounts', PARTITIONS=2);";

/// Accounts, credit and the largest credit per tier, over accounts whose
/// credit is not negative.
fn per_tier_sql(name: &str) -> String {
    format!(
        "CREATE TABLE {name} AS SELECT tier, COUNT(*) AS accounts, SUM(credit) AS credit, MAX(credit) AS top
         FROM accounts WHERE credit >= 0 GROUP BY tier;"
    )
}

/// The two accounts with the most credit per tier (ties by key).
const RICHEST: &str = "CREATE TABLE richest AS SELECT id, tier, credit FROM accounts
  QUALIFY ROW_NUMBER() OVER (PARTITION BY tier ORDER BY credit DESC) <= 2;";

const TIERS: [&str; 3] = ["gold", "silver", "free"];

/// Record `i` of the history: an account's new row, or its deletion.
fn record(i: u64) -> (String, Option<(&'static str, i64)>) {
    let id = format!("a{}", (i * 5) % 13);
    if i % 9 == 8 {
        return (id, None);
    }
    let tier = TIERS[((i * 7) % 3) as usize];
    (id, Some((tier, ((i * 37) % 50) as i64 - 5)))
}

fn produce(client: &Client, from: u64, to: u64) {
    let records: Vec<Value> = (from..to)
        .map(|i| match record(i) {
            (id, Some((tier, credit))) => {
                json!({"key": id, "value": {"tier": tier, "credit": credit}})
            }
            (id, None) => json!({"key": id, "value": null}),
        })
        .collect();
    client.produce("accounts", &json!(records));
}

/// Each account's latest row after records `0..to`.
fn latest(to: u64) -> BTreeMap<String, (&'static str, i64)> {
    let mut rows = BTreeMap::new();
    for i in 0..to {
        match record(i) {
            (id, Some(row)) => rows.insert(id, row),
            (id, None) => rows.remove(&id),
        };
    }
    rows
}

/// Per tier: accounts, credit, top — over rows with credit >= 0.
fn per_tier(to: u64) -> BTreeMap<String, (u64, i64, i64)> {
    let mut tiers: BTreeMap<String, (u64, i64, i64)> = BTreeMap::new();
    for (tier, credit) in latest(to).into_values().filter(|(_, c)| *c >= 0) {
        let t = tiers.entry(tier.to_string()).or_insert((0, 0, i64::MIN));
        t.0 += 1;
        t.1 += credit;
        t.2 = t.2.max(credit);
    }
    tiers
}

/// Per tier, the two accounts with the most credit (ties by id).
fn richest(to: u64) -> BTreeMap<String, (String, i64)> {
    let mut by_tier: BTreeMap<&str, Vec<(i64, String)>> = BTreeMap::new();
    for (id, (tier, credit)) in latest(to) {
        by_tier.entry(tier).or_default().push((credit, id));
    }
    let mut kept = BTreeMap::new();
    for (tier, mut rows) in by_tier {
        rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (credit, id) in rows.into_iter().take(2) {
            kept.insert(id, (tier.to_string(), credit));
        }
    }
    kept
}

fn wait_for_per_tier(client: &Client, view: &str, to: u64) {
    let want = per_tier(to);
    eventually(
        &format!("{view} holds each tier's accounts after {to} records"),
        Duration::from_secs(60),
        || {
            let rows = client.view_rows(view, "limit=100")["rows"].clone();
            let got: BTreeMap<String, (u64, i64, i64)> = rows
                .as_array()?
                .iter()
                .map(|r| {
                    let r = &r["row"];
                    let tier = r["tier"].as_str().unwrap_or_default().to_string();
                    let n = r["accounts"].as_u64().unwrap_or_default();
                    let credit = r["credit"].as_i64().unwrap_or_default();
                    (tier, (n, credit, r["top"].as_i64().unwrap_or_default()))
                })
                .collect();
            (got == want).then_some(())
        },
    );
}

fn wait_for_richest(client: &Client, to: u64) {
    let want = richest(to);
    eventually(
        &format!("richest holds the two richest accounts per tier after {to} records"),
        Duration::from_secs(60),
        || {
            let rows = client.view_rows("richest", "limit=100")["rows"].clone();
            let got: BTreeMap<String, (String, i64)> = rows
                .as_array()?
                .iter()
                .map(|r| {
                    let r = &r["row"];
                    let id = r["id"].as_str().unwrap_or_default().to_string();
                    let tier = r["tier"].as_str().unwrap_or_default().to_string();
                    (id, (tier, r["credit"].as_i64().unwrap_or_default()))
                })
                .collect();
            (got == want).then_some(())
        },
    );
}

#[test]
fn an_aggregate_over_a_tables_rows_follows_updates_and_deletions() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(ACCOUNTS);
    client.sql_ok(&per_tier_sql("per_tier"));
    client.sql_ok(RICHEST);
    produce(&client, 0, 60);
    wait_for_per_tier(&client, "per_tier", 60);
    wait_for_richest(&client, 60);

    let described = &client.sql_ok("DESCRIBE per_tier")[0];
    let columns: Vec<&str> = described["columns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        columns,
        ["tier", "accounts", "credit", "top"],
        "{described}"
    );
    let (operators, explained) = client.explain_operators("per_tier");
    assert_eq!(
        operators,
        ["source", "table_rows", "aggregate_rows", "sink"],
        "{explained}"
    );

    // Rows keep changing groups after a crash and a restart.
    server.kill9();
    let server = server.restart();
    let client = server.client();
    produce(&client, 60, 150);
    wait_for_per_tier(&client, "per_tier", 150);
    wait_for_richest(&client, 150);

    // One pass over the whole history ends with the same rows.
    client.sql_ok(&per_tier_sql("per_tier_again"));
    wait_for_per_tier(&client, "per_tier_again", 150);
}

#[test]
fn what_a_query_over_a_table_cannot_do_is_refused_with_the_reason() {
    let server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(ACCOUNTS);
    for (sql, wanted) in [
        (
            "CREATE STREAM s AS SELECT id FROM accounts;",
            "'accounts' is a table, not a stream",
        ),
        (
            "CREATE TABLE t AS SELECT a.id FROM accounts a FULL JOIN accounts b ON a.tier = b.id;",
            "a table is joined with JOIN or LEFT JOIN",
        ),
        (
            "CREATE TABLE t AS SELECT a.id FROM accounts a JOIN accounts b ON a.tier = b.tier;",
            "a table is joined on its PRIMARY KEY",
        ),
        (
            "CREATE TABLE t AS SELECT tier, COUNT(*) AS n FROM accounts WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY tier;",
            "WINDOW does not apply to a table's rows",
        ),
    ] {
        let message = client.sql_refused(sql);
        assert!(message.contains(wanted), "{sql}: {message}");
    }
}

const RATES: &str = "CREATE TABLE rates (tier VARCHAR PRIMARY KEY, rate BIGINT)
  WITH (KAFKA_TOPIC='rates', PARTITIONS=1);";

/// Each account with its tier's rate (only accounts whose tier has one).
const ACCOUNT_RATES: &str = "CREATE TABLE account_rates AS
  SELECT a.id, a.tier, r.rate, a.credit * r.rate AS weighted
  FROM accounts a JOIN rates r ON a.tier = r.tier;";

/// The weighted credit per tier, every account kept (LEFT JOIN).
const WEIGHTED: &str = "CREATE TABLE weighted_per_tier AS
  SELECT a.tier, COUNT(*) AS accounts, SUM(a.credit * COALESCE(r.rate, 0)) AS weighted
  FROM accounts a LEFT JOIN rates r ON a.tier = r.tier GROUP BY a.tier;";

fn set_rates(client: &Client, rates: &[(&str, Option<i64>)]) {
    let records: Vec<Value> = rates
        .iter()
        .map(|(tier, rate)| match rate {
            Some(rate) => json!({"key": tier, "value": {"rate": rate}}),
            None => json!({"key": tier, "value": null}),
        })
        .collect();
    client.produce("rates", &json!(records));
}

fn wait_for_joins(client: &Client, to: u64, rates: &BTreeMap<&str, i64>) {
    let accounts = latest(to);
    let want_rows: BTreeMap<String, (String, i64, i64)> = accounts
        .iter()
        .filter_map(|(id, (tier, credit))| {
            let rate = *rates.get(tier)?;
            Some((id.clone(), (tier.to_string(), rate, credit * rate)))
        })
        .collect();
    let mut want_tiers: BTreeMap<String, (u64, i64)> = BTreeMap::new();
    for (tier, credit) in accounts.values() {
        let t = want_tiers.entry(tier.to_string()).or_default();
        t.0 += 1;
        t.1 += credit * rates.get(tier).copied().unwrap_or(0);
    }
    eventually(
        &format!("account_rates joins each account with its rate after {to} records"),
        Duration::from_secs(60),
        || {
            let rows = client.view_rows("account_rates", "limit=100")["rows"].clone();
            let got: BTreeMap<String, (String, i64, i64)> = rows
                .as_array()?
                .iter()
                .map(|r| {
                    let r = &r["row"];
                    (
                        r["id"].as_str().unwrap_or_default().to_string(),
                        (
                            r["tier"].as_str().unwrap_or_default().to_string(),
                            r["rate"].as_i64().unwrap_or_default(),
                            r["weighted"].as_i64().unwrap_or_default(),
                        ),
                    )
                })
                .collect();
            (got == want_rows).then_some(())
        },
    );
    eventually(
        &format!("weighted_per_tier sums each tier after {to} records"),
        Duration::from_secs(60),
        || {
            let rows = client.view_rows("weighted_per_tier", "limit=100")["rows"].clone();
            let got: BTreeMap<String, (u64, i64)> = rows
                .as_array()?
                .iter()
                .map(|r| {
                    let r = &r["row"];
                    (
                        r["tier"].as_str().unwrap_or_default().to_string(),
                        (
                            r["accounts"].as_u64().unwrap_or_default(),
                            r["weighted"].as_i64().unwrap_or_default(),
                        ),
                    )
                })
                .collect();
            (got == want_tiers).then_some(())
        },
    );
}

#[test]
fn a_join_of_tables_follows_changes_on_either_side() {
    let mut server = Server::start(&[]);
    let client = server.client();
    client.sql_ok(ACCOUNTS);
    client.sql_ok(RATES);
    client.sql_ok(ACCOUNT_RATES);
    client.sql_ok(WEIGHTED);
    set_rates(&client, &[("gold", Some(3)), ("silver", Some(2))]);
    produce(&client, 0, 50);
    let mut rates = BTreeMap::from([("gold", 3), ("silver", 2)]);
    wait_for_joins(&client, 50, &rates);

    let (operators, explained) = client.explain_operators("account_rates");
    assert_eq!(
        operators,
        ["source", "table_rows", "join_tables", "each_row", "sink"],
        "{explained}"
    );

    // A rate's change reaches every account of its tier; a deleted rate
    // drops its accounts from the inner join; a new one brings its own.
    set_rates(
        &client,
        &[("gold", Some(5)), ("silver", None), ("free", Some(1))],
    );
    rates.insert("gold", 5);
    rates.remove("silver");
    rates.insert("free", 1);
    wait_for_joins(&client, 50, &rates);

    // Both sides keep changing across a crash and a restart.
    server.kill9();
    let server = server.restart();
    let client = server.client();
    produce(&client, 50, 120);
    set_rates(&client, &[("silver", Some(7))]);
    rates.insert("silver", 7);
    wait_for_joins(&client, 120, &rates);
}
