//! Golden tests: `golden/<case>.input.jsonl` through a plan must give
//! `golden/<case>.expected.jsonl` — view rows, or records of the output
//! topic — and so must the same input run through random crashes and
//! restarts (crash without commit, crash after the RocksDB commit, crash
//! after the output append) — on one thread and with 2 and 4 workers
//! (issue 14: output topics get the same records in the same order).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::time::Duration;

use common::{parse_steps, run_steps_with};
use kappa_processor::dsl::{self, Hopping, Pipeline, Session, Tumbling};
use kappa_processor::expr::Expr;
use kappa_processor::plan::{JoinKind, Plan, Sink};
use serde_json::Value;

/// The package directory, read when the test runs: `cargo test` sets
/// `CARGO_MANIFEST_DIR` for the test process. The compile-time value can be
/// stale — cargo reuses a test binary built from an identical checkout at
/// another path (a CI clone) — so it is only the fallback.
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

fn golden(name: &str) -> (String, Vec<Value>) {
    let dir = manifest_dir().join("tests/golden");
    let dir = dir.display();
    let input = std::fs::read_to_string(format!("{dir}/{name}.input.jsonl")).unwrap();
    let expected = std::fs::read_to_string(format!("{dir}/{name}.expected.jsonl")).unwrap();
    (
        input,
        expected
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
    )
}

/// Worker counts every case runs with.
const WORKERS: [usize; 3] = [1, 2, 4];

/// Runs the case plainly and with three crash schedules, with each of
/// [`WORKERS`]; all must match.
fn check(name: &str, plan: Plan) {
    let (input, expected) = golden(name);
    let steps = parse_steps(&input, &plan.source.topic);
    for workers in WORKERS {
        for seed in [None, Some(1), Some(2), Some(3)] {
            let h = run_steps_with(&plan, &steps, seed, workers);
            let got = match &plan.sink {
                Sink::View => h.view_rows(&plan),
                Sink::Topic(t) => h.topic_records(t),
            };
            assert_eq!(
                got, expected,
                "case {name}, crash schedule {seed:?}, {workers} workers"
            );
        }
    }
}

fn purchases() -> Pipeline {
    Pipeline::from_topic("purchases").event_time_field("ts")
}

#[test]
fn tumbling_counts_and_sums_per_window_and_drops_late_events() {
    let plan = purchases()
        .key_by([("user", Expr::field("user"))])
        .window(Tumbling::of(Duration::from_secs(1)))
        .aggregate([
            dsl::count("purchases"),
            dsl::sum("total", Expr::field("amount")),
        ])
        .to_view("purchase_stats");
    check("tumbling", plan);
}

#[test]
fn hopping_emit_final_emits_only_closed_windows() {
    let plan = purchases()
        .key_by([("user", Expr::field("user"))])
        .window(Hopping::of(
            Duration::from_millis(1000),
            Duration::from_millis(500),
        ))
        .emit_final()
        .aggregate([dsl::count("hits")])
        .to_view("hops");
    check("hopping", plan);
}

#[test]
fn sessions_merge_when_an_event_bridges_them() {
    let plan = purchases()
        .max_out_of_orderness(Duration::from_secs(1))
        .key_by([("user", Expr::field("user"))])
        .window(Session::with_gap(Duration::from_millis(100)))
        .aggregate([
            dsl::count("events"),
            dsl::max("biggest", Expr::field("amount")),
        ])
        .to_view("sessions");
    check("session", plan);
}

#[test]
fn dedup_drops_repeated_ids_within_the_ttl() {
    let plan = Pipeline::from_topic("events")
        .dedup_by(Expr::field("id"), Duration::from_secs(10))
        .key_by([("user", Expr::field("user"))])
        .aggregate([dsl::count("events")])
        .to_view("unique_events");
    check("dedup", plan);
}

#[test]
fn stream_table_join_enriches_with_the_table_row_as_of_the_event() {
    let plan = Pipeline::from_topic("orders")
        .join_table("users", Expr::field("user"), "users", JoinKind::Inner)
        .select([
            ("user", Expr::field("user")),
            ("amount", Expr::field("amount")),
            ("tier", Expr::field("users.tier")),
        ])
        .to_topic("enriched");
    check("join", plan);
}

#[test]
fn running_aggregates_over_all_time() {
    let plan = Pipeline::from_topic("sales")
        .key_by([("user", Expr::field("user"))])
        .aggregate([
            dsl::count("n"),
            dsl::sum("total", Expr::field("amount")),
            dsl::avg("mean", Expr::field("amount")),
            dsl::min("low", Expr::field("amount")),
            dsl::max("high", Expr::field("amount")),
            dsl::count_distinct("items", Expr::field("item")),
            dsl::latest("last_item", Expr::field("item")),
            dsl::earliest("first_item", Expr::field("item")),
        ])
        .to_view("sales_totals");
    check("running", plan);
}

#[test]
fn late_events_go_to_the_side_output_topic() {
    let plan = purchases()
        .late_events_to("purchases_late")
        .key_by([("user", Expr::field("user"))])
        .window(Tumbling::of(Duration::from_secs(1)))
        .grace(Duration::from_millis(200))
        .aggregate([dsl::count("hits")])
        .to_view("with_late");
    check("late", plan.clone());
    let (input, _) = golden("late");
    let dir = manifest_dir().join("tests/golden");
    let dir = dir.display();
    let expected: Vec<Value> =
        std::fs::read_to_string(format!("{dir}/late.side-output.expected.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    for (workers, seed) in WORKERS
        .into_iter()
        .flat_map(|w| [None, Some(4), Some(5)].map(|seed| (w, seed)))
    {
        let h = run_steps_with(&plan, &parse_steps(&input, "purchases"), seed, workers);
        let got: Vec<Value> = h
            .topic_records("purchases_late")
            .into_iter()
            .map(|r| serde_json::json!({"key": r["key"], "value": r["value"]}))
            .collect();
        assert_eq!(
            got, expected,
            "side output, crash schedule {seed:?}, {workers} workers"
        );
    }
}
