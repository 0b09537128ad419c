//! State larger than memory: views computed with a state cache far smaller
//! than the state (so slots and hopping slices are evicted at every commit
//! and read back, one by one or, for many hopping groups closing at once,
//! in one pass) equal the views computed with everything in memory.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::time::Duration;

use common::{Harness, Step};
use kappa_processor::dsl::{self, Hopping, Pipeline, Session, Tumbling};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::runner::RunOptions;
use serde_json::{json, Value};

const USERS: u64 = 300;

/// 3,000 events of 300 users, 10 ms apart with a little disorder.
fn steps() -> Vec<Step> {
    (0..3000u64)
        .map(|i| {
            let user = (i * 7919) % USERS;
            let ts = (i * 10) as i64 - ((i % 7) * 5) as i64;
            Step::Produce {
                topic: "events".into(),
                partition: None,
                key: Some(format!("u{user}")),
                value: json!({"user": format!("u{user}"), "amount": i % 100, "ts": ts}),
                timestamp: None,
            }
        })
        .collect()
}

/// The view after processing every event, committing after each poll of
/// 50 records, with at most `cache` cached state entries.
fn view_with_cache(plan: &Plan, steps: &[Step], cache: usize) -> Vec<Value> {
    let h = Harness::new();
    h.create_topic("events", 1);
    for step in steps {
        h.produce(step);
    }
    let options = RunOptions {
        state_cache_entries: cache,
        max_poll_records: 50,
        ..RunOptions::default()
    };
    let mut rt = h.open_runtime(plan, options);
    let end = [steps.len() as u64];
    while rt.positions() != end.as_slice() {
        rt.poll_once().unwrap();
        rt.commit().unwrap();
    }
    h.view_rows(plan)
}

fn check(plan: Plan) {
    let steps = steps();
    let in_memory = view_with_cache(&plan, &steps, 1_000_000);
    assert!(in_memory.len() > USERS as usize, "{}", in_memory.len());
    assert_eq!(view_with_cache(&plan, &steps, 10), in_memory);
}

fn grouped() -> dsl::Grouped {
    Pipeline::from_topic("events")
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_millis(40))
        .key_by([("user", Expr::field("user"))])
}

fn aggregates() -> [dsl::Agg; 2] {
    [dsl::count("n"), dsl::sum("total", Expr::field("amount"))]
}

#[test]
fn hopping_views_do_not_depend_on_the_cache_size() {
    check(
        grouped()
            .window(Hopping::of(
                Duration::from_secs(2),
                Duration::from_millis(500),
            ))
            .aggregate(aggregates())
            .to_view("hops"),
    );
}

#[test]
fn tumbling_views_do_not_depend_on_the_cache_size() {
    check(
        grouped()
            .window(Tumbling::of(Duration::from_secs(1)))
            .aggregate(aggregates())
            .to_view("tumbles"),
    );
}

#[test]
fn session_views_do_not_depend_on_the_cache_size() {
    check(
        grouped()
            .window(Session::with_gap(Duration::from_millis(500)))
            .aggregate(aggregates())
            .to_view("sessions"),
    );
}

#[test]
fn a_numeric_group_keeps_its_type_across_restarts_and_evictions() {
    let plan = Pipeline::from_topic("events")
        .event_time_field("ts")
        .key_by([("shop", Expr::field("shop"))])
        .window(Hopping::of(
            Duration::from_millis(400),
            Duration::from_millis(100),
        ))
        .aggregate([dsl::count("n")])
        .to_view("shops");
    let steps: Vec<Step> = (0..200i64)
        .map(|i| Step::Produce {
            topic: "events".into(),
            partition: None,
            key: None,
            value: json!({"shop": i % 3, "ts": i * 10}),
            timestamp: None,
        })
        .collect();
    for seed in 0..8 {
        let h = common::run_steps(&plan, &steps, Some(seed));
        let rows = h.view_rows(&plan);
        assert!(!rows.is_empty());
        for row in rows {
            assert!(row["row"]["shop"].is_i64(), "seed {seed}: {row}");
        }
    }
}
