//! Stream-table joins are temporal (issue 12): a purchase joins the tier
//! its user had when buying. Built live — tiers change between rounds of
//! purchases, with polls in between — and replayed from scratch with the
//! whole table already in the log, the view's rows are the same, and they
//! are the tier-as-of-purchase answer (a replay used to join every
//! purchase with the user's current tier).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use common::{Harness, Step};
use kappa_processor::dsl::{self, Pipeline};
use kappa_processor::expr::Expr;
use kappa_processor::plan::{JoinKind, Plan};
use kappa_processor::runner::RunOptions;
use serde_json::{json, Value};

fn plan() -> Plan {
    Pipeline::from_topic("buys")
        .join_table("tiers", Expr::field("user_id"), "t", JoinKind::Inner)
        .key_by([("tier", Expr::field("t.tier"))])
        .aggregate([dsl::count("n"), dsl::sum("spent", Expr::field("amount"))])
        .to_view("spend_by_tier")
}

fn record(topic: &str, key: &str, value: Value, at: i64) -> Step {
    Step::Produce {
        topic: topic.into(),
        partition: Some(0),
        key: Some(key.into()),
        value,
        timestamp: Some(at),
    }
}

/// Rounds of (tier changes, purchases), in time order.
fn rounds() -> Vec<Vec<Step>> {
    let tier = |user: &str, tier: &str, at| record("tiers", user, json!({"tier": tier}), at);
    let buy = |user: &str, amount: i64, at| {
        record("buys", user, json!({"user_id": user, "amount": amount}), at)
    };
    vec![
        vec![
            tier("u1", "bronze", 1_000),
            tier("u2", "bronze", 1_000),
            buy("u1", 10, 2_000),
            buy("u2", 20, 2_100),
        ],
        vec![
            tier("u1", "silver", 3_000),
            buy("u1", 30, 3_500),
            buy("u2", 40, 3_600),
        ],
        vec![
            tier("u1", "gold", 5_000),
            tier("u2", "gold", 5_000),
            buy("u1", 50, 6_000),
        ],
    ]
}

fn rows(h: &Harness, plan: &Plan) -> Vec<(String, i64, i64)> {
    h.view_rows(plan)
        .into_iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap().to_string(),
                r["row"]["n"].as_i64().unwrap(),
                r["row"]["spent"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_replay_joins_the_tier_each_user_had_when_buying_as_the_live_run_did() {
    let plan = plan();
    let want = vec![
        // u1 at 2,000 and u2 at 2,100 and 3,600 (still bronze then).
        ("bronze".to_string(), 3, 70),
        ("gold".to_string(), 1, 50),
        ("silver".to_string(), 1, 30),
    ];

    // Live: each round is produced, then processed.
    let live = Harness::new();
    live.create_topic("buys", 1);
    live.create_topic("tiers", 1);
    let mut rt = live.open_runtime(&plan, RunOptions::default());
    for round in rounds() {
        for step in &round {
            live.produce(step);
        }
        live.run_to_end(&mut rt, &plan);
    }
    drop(rt);
    assert_eq!(rows(&live, &plan), want, "live");

    // Replay: everything is in the log before the first poll.
    let replay = Harness::new();
    replay.create_topic("buys", 1);
    replay.create_topic("tiers", 1);
    for step in rounds().iter().flatten() {
        replay.produce(step);
    }
    let mut rt = replay.open_runtime(&plan, RunOptions::default());
    replay.run_to_end(&mut rt, &plan);
    drop(rt);
    assert_eq!(rows(&replay, &plan), want, "replay");

    // The table's history survives a restart: a purchase at 3,550 (silver)
    // processed after reopening still joins as of its time.
    let live = live.reopen();
    live.produce(&record(
        "buys",
        "u1",
        json!({"user_id": "u1", "amount": 1}),
        3_550,
    ));
    let mut rt = live.open_runtime(&plan, RunOptions::default());
    live.run_to_end(&mut rt, &plan);
    drop(rt);
    assert!(
        rows(&live, &plan).contains(&("silver".to_string(), 2, 31)),
        "{:?}",
        rows(&live, &plan)
    );
}

#[test]
fn a_table_with_a_time_column_takes_each_rows_time_from_it() {
    let mut plan = plan();
    plan.join.as_mut().unwrap().table_time = Some(vec!["since".into()]);
    let h = Harness::new();
    h.create_topic("buys", 1);
    h.create_topic("tiers", 1);
    // Table records stamped by the log (now), valid from their `since`.
    let tier = |user: &str, tier: &str, since: i64| Step::Produce {
        topic: "tiers".into(),
        partition: Some(0),
        key: Some(user.into()),
        value: json!({"tier": tier, "since": since}),
        timestamp: None,
    };
    let buy =
        |amount: i64, at: i64| record("buys", "u1", json!({"user_id": "u1", "amount": amount}), at);
    for step in [
        tier("u1", "bronze", 1_000),
        tier("u1", "gold", 5_000),
        buy(10, 2_000),
        buy(20, 6_000),
    ] {
        h.produce(&step);
    }
    let mut rt = h.open_runtime(&plan, RunOptions::default());
    h.run_to_end(&mut rt, &plan);
    assert_eq!(
        rows(&h, &plan),
        [("bronze".to_string(), 1, 10), ("gold".to_string(), 1, 20)]
    );
}

/// `JOIN_HISTORY` bounds the table history kept behind the watermark: a
/// purchase older than that horizon joins the row that held at the
/// horizon (it stands for all earlier time). With the default (a day) the
/// same purchase joins the tier its user had then.
#[test]
fn join_history_bounds_how_far_back_a_purchase_finds_its_tier() {
    let run = |history_ms: Option<i64>| {
        let mut plan = Pipeline::from_topic("buys")
            .max_out_of_orderness(std::time::Duration::ZERO)
            .join_table("tiers", Expr::field("user_id"), "t", JoinKind::Inner)
            .key_by([("tier", Expr::field("t.tier"))])
            .aggregate([dsl::count("n"), dsl::sum("spent", Expr::field("amount"))])
            .to_view("spend_by_tier");
        plan.join.as_mut().unwrap().history_ms = history_ms;
        let h = Harness::new();
        h.create_topic("buys", 1);
        h.create_topic("tiers", 1);
        let tier = |tier: &str, at| record("tiers", "u1", json!({"tier": tier}), at);
        let buy =
            |amount: i64, at| record("buys", "u1", json!({"user_id": "u1", "amount": amount}), at);
        for step in [
            tier("bronze", 1_000),
            tier("gold", 5_000),
            buy(1, 10_000),
            // Behind the watermark (10,000) by 8 s.
            buy(10, 2_000),
        ] {
            h.produce(&step);
        }
        let mut rt = h.open_runtime(&plan, RunOptions::default());
        h.run_to_end(&mut rt, &plan);
        rows(&h, &plan)
    };
    assert_eq!(
        run(None),
        [("bronze".to_string(), 1, 10), ("gold".to_string(), 1, 1)]
    );
    // One second of history: bronze was pruned when the watermark reached
    // 10,000; gold, the tier at the horizon, stands for all earlier time.
    assert_eq!(run(Some(1_000)), [("gold".to_string(), 2, 11)]);
}

/// Several joins (issue 38): each purchase joins its user's tier, its
/// product and the product's supplier — the supplier's key read from the
/// product row joined before it — each as of the purchase's time; the
/// inner join of suppliers drops a purchase whose product has none. Live
/// (round by round, restarted in between: the further tables' histories
/// are kept in state) and replayed, the rows are the same and are the
/// as-of answer.
#[test]
fn a_purchase_joins_tier_product_and_supplier_each_as_of_its_time() {
    let plan = Pipeline::from_topic("buys")
        .join_table("tiers", Expr::field("user_id"), "t", JoinKind::Left)
        .join_table("products", Expr::field("product"), "p", JoinKind::Left)
        .join_table("suppliers", Expr::field("p.supplier"), "s", JoinKind::Inner)
        .key_by([
            ("tier", Expr::field("t.tier")),
            ("country", Expr::field("s.country")),
        ])
        .aggregate([dsl::count("n"), dsl::sum("spent", Expr::field("amount"))])
        .to_view("spend_by_tier_and_country");
    let row = |topic: &str, key: &str, value: Value, at| record(topic, key, value, at);
    let buy = |user: &str, product: &str, amount: i64, at| {
        record(
            "buys",
            user,
            json!({"user_id": user, "product": product, "amount": amount}),
            at,
        )
    };
    let rounds = vec![
        vec![
            row("tiers", "u1", json!({"tier": "bronze"}), 1_000),
            row("products", "pa", json!({"supplier": "s1"}), 1_000),
            row("products", "pb", json!({"supplier": "s2"}), 1_000),
            row("suppliers", "s1", json!({"country": "JP"}), 1_000),
            row("suppliers", "s2", json!({"country": "DE"}), 1_000),
            buy("u1", "pa", 10, 2_000),
            buy("u1", "pb", 20, 2_100),
            // No such product: the supplier's inner join drops it.
            buy("u1", "px", 99, 2_200),
        ],
        vec![
            // pa changes supplier; u2 has no tier (a left join: null).
            row("products", "pa", json!({"supplier": "s2"}), 3_000),
            row("tiers", "u1", json!({"tier": "gold"}), 3_000),
            buy("u1", "pa", 30, 3_500),
            buy("u2", "pa", 40, 3_600),
        ],
        vec![
            // s2 moves: purchases from then on join FR.
            row("suppliers", "s2", json!({"country": "FR"}), 5_000),
            buy("u1", "pb", 50, 6_000),
            buy("u1", "pa", 60, 6_100),
        ],
    ];
    let want = vec![
        json!({"key": "[\"bronze\",\"DE\"]", "n": 1, "spent": 20}),
        json!({"key": "[\"bronze\",\"JP\"]", "n": 1, "spent": 10}),
        json!({"key": "[\"gold\",\"DE\"]", "n": 1, "spent": 30}),
        json!({"key": "[\"gold\",\"FR\"]", "n": 2, "spent": 110}),
        json!({"key": "[null,\"DE\"]", "n": 1, "spent": 40}),
    ];
    let got = |h: &Harness| -> Vec<Value> {
        h.view_rows(&plan)
            .into_iter()
            .map(|r| json!({"key": r["key"], "n": r["row"]["n"], "spent": r["row"]["spent"]}))
            .collect()
    };
    let topics = |h: &Harness| {
        for topic in ["buys", "tiers", "products", "suppliers"] {
            h.create_topic(topic, 1);
        }
    };

    // Live: each round produced, then processed, by a reopened runtime.
    let mut live = Harness::new();
    topics(&live);
    for round in &rounds {
        for step in round {
            live.produce(step);
        }
        let mut rt = live.open_runtime(&plan, RunOptions::default());
        live.run_to_end(&mut rt, &plan);
        drop(rt);
        live = live.reopen();
    }
    assert_eq!(got(&live), want, "live");

    // Replay: every record in the log before the first poll.
    let replay = Harness::new();
    topics(&replay);
    for step in rounds.iter().flatten() {
        replay.produce(step);
    }
    let mut rt = replay.open_runtime(&plan, RunOptions::default());
    replay.run_to_end(&mut rt, &plan);
    drop(rt);
    assert_eq!(got(&replay), want, "replay");
}
