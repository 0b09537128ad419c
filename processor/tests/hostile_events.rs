//! Hostile input at the processor: event times far in the future (judged
//! against the record's append time, `MAX_FUTURE`), window definitions
//! that would need unbounded state, and values of the wrong type or that
//! overflow an integer.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::time::Duration;

use common::{Harness, Step};
use kappa_processor::dsl::{self, Hopping, Pipeline, Tumbling};
use kappa_processor::error::ProcessorError;
use kappa_processor::expr::{DataType, Expr};
use kappa_processor::plan::{JoinKind, LateHandling, Plan, WithinSpec};
use kappa_processor::runner::{RunOptions, Runtime};
use serde_json::{json, Value};

fn click(page: &str, ts: i64) -> Step {
    Step::Produce {
        topic: "clicks".into(),
        partition: None,
        key: Some(page.into()),
        value: json!({"page": page, "ts": ts}),
        timestamp: None,
    }
}

fn per_second(max_future: Option<Duration>) -> Plan {
    let mut p = Pipeline::from_topic("clicks").event_time_field("ts");
    if let Some(d) = max_future {
        p = p.max_future(d);
    }
    p.key_by([("page", Expr::field("page"))])
        .window(Tumbling::of(Duration::from_secs(1)))
        .aggregate([dsl::count("n")])
        .to_view("clicks_per_second")
}

/// Window starts and counts of the view, in key and window order.
fn counts(h: &Harness, plan: &Plan) -> Vec<(i64, Value)> {
    h.view_rows(plan)
        .into_iter()
        .map(|r| (r["window_start"].as_i64().unwrap(), r["row"]["n"].clone()))
        .collect()
}

/// A second-aligned time a minute ago (records are appended now).
fn recent() -> i64 {
    (kappa_log::now_ms() - 60_000) / 1000 * 1000
}

#[test]
fn a_far_future_event_time_is_invalid_and_does_not_blind_the_view() {
    let plan = per_second(None);
    let h = Harness::new();
    let t0 = recent();
    for step in [click("a", t0), click("a", i64::MAX), click("a", t0 + 1000)] {
        h.produce(&step);
    }
    let mut rt = h.open_runtime(&plan, RunOptions::default());
    h.run_to_end(&mut rt, &plan);
    let progress = rt.progress().snapshot();
    assert_eq!(progress.invalid, 1, "{progress:?}");
    assert_eq!(progress.late_dropped, 0, "{progress:?}");
    assert!(progress.watermark.unwrap() < t0 + 2000, "{progress:?}");
    assert_eq!(
        counts(&h, &plan),
        vec![(t0, json!(1)), (t0 + 1000, json!(1))]
    );
    drop(rt);

    // A replay judges the same records the same way.
    let h = h.reopen();
    let mut rt = kappa_processor::runner::Runtime::open(
        plan.clone(),
        2,
        h.log.clone(),
        h.store.clone(),
        RunOptions::default(),
    )
    .unwrap();
    h.run_to_end(&mut rt, &plan);
    assert_eq!(rt.progress().snapshot().invalid, 1);
}

#[test]
fn max_future_is_configurable_and_the_late_topic_gets_the_invalid_event() {
    let mut plan = per_second(Some(Duration::from_secs(3600)));
    plan.late = LateHandling::SideOutput("clicks_late".into());
    let h = Harness::new();
    let t0 = recent();
    // 30 minutes ahead is within the hour; two hours ahead is not.
    for step in [
        click("a", t0),
        click("a", t0 + 7_200_000 + 60_000),
        click("a", t0 + 1_800_000),
    ] {
        h.produce(&step);
    }
    let mut rt = h.open_runtime(&plan, RunOptions::default());
    h.run_to_end(&mut rt, &plan);
    assert_eq!(rt.progress().snapshot().invalid, 1);
    assert_eq!(
        counts(&h, &plan),
        vec![(t0, json!(1)), (t0 + 1_800_000, json!(1))]
    );
    let late = h.topic_records("clicks_late");
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(late[0]["value"]["ts"], json!(t0 + 7_200_000 + 60_000));
}

#[test]
fn a_negative_max_future_is_refused() {
    let mut plan = per_second(None);
    plan.source.max_future_ms = -1;
    let err = plan.validate().unwrap_err();
    assert!(err.contains("MAX_FUTURE"), "{err}");
}

#[test]
fn a_stored_plan_without_max_future_gets_the_default() {
    let plan = per_second(None);
    let mut json = serde_json::to_value(&plan).unwrap();
    json["source"]
        .as_object_mut()
        .unwrap()
        .remove("max_future_ms");
    let back: Plan = serde_json::from_value(json).unwrap();
    assert_eq!(back.source.max_future_ms, 86_400_000);
}

// ---------------------------------------------------------------------------
// Window definitions and state bounded (item 6)
// ---------------------------------------------------------------------------

fn hopping(size: Duration, advance: Duration) -> Plan {
    Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .key_by([("page", Expr::field("page"))])
        .window(Hopping::of(size, advance))
        .aggregate([dsl::count("n")])
        .to_view("clicks_hopping")
}

#[test]
fn a_hopping_window_of_a_day_every_millisecond_is_refused_by_plan_and_runtime() {
    let plan = hopping(Duration::from_secs(86_400), Duration::from_millis(1));
    let err = plan.validate().unwrap_err();
    assert!(err.contains("10000"), "{err}");
    assert!(err.contains("86400000"), "{err}");
    // A stored plan cannot bypass the check: the runtime validates too.
    let h = Harness::new();
    h.create_topic("clicks", 1);
    let opened = Runtime::open(
        plan,
        1,
        h.log.clone(),
        h.store.clone(),
        RunOptions::default(),
    );
    assert!(
        matches!(opened, Err(ProcessorError::InvalidPlan(ref m)) if m.contains("10000")),
        "{:?}",
        opened.err()
    );
    // At the limit it is accepted.
    hopping(Duration::from_secs(10), Duration::from_millis(1))
        .validate()
        .unwrap();
}

#[test]
fn a_jump_in_time_that_closes_many_windows_commits_early_instead_of_piling_up() {
    // 10,000 windows per event (the limit): a jump closes 10,000 windows of
    // each of three groups at once.
    let plan = hopping(Duration::from_secs(10), Duration::from_millis(1));
    let h = Harness::new();
    let t0 = recent();
    for step in [
        click("a", t0),
        click("b", t0),
        click("c", t0),
        click("z", t0 + 3_600_000),
    ] {
        h.produce(&step);
    }
    let options = RunOptions {
        pending_entries_max: 1_000,
        ..RunOptions::default()
    };
    let mut rt = h.open_runtime(&plan, options);
    rt.poll_once().unwrap();
    assert_eq!(rt.positions(), &[4]);
    // The poll committed by itself once the closed windows' rows piled up.
    assert!(rt.pending_entries() <= 1_000, "{}", rt.pending_entries());
    assert_eq!(rt.progress().snapshot().committed_offsets, vec![4]);
    rt.commit().unwrap();
    let rows = h.view_rows(&plan);
    // Every closed window of a, b and c holds one event; z's are open.
    let closed = rows.iter().filter(|r| r["key"] != json!("z")).count();
    assert_eq!(closed, 30_000);
}

#[test]
fn state_beyond_the_memory_limit_fails_the_version_with_a_reason() {
    // Every event opens its own window and the watermark never closes one.
    let plan = Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_secs(86_400))
        .key_by([("page", Expr::field("page"))])
        .window(Tumbling::of(Duration::from_millis(1)))
        .aggregate([dsl::count("n")])
        .to_view("clicks_per_ms");
    let h = Harness::new();
    let t0 = recent();
    for i in 0..300 {
        h.produce(&click("a", t0 + i));
    }
    let options = RunOptions {
        state_entries_max: 100,
        state_cache_entries: 10,
        ..RunOptions::default()
    };
    let mut rt = h.open_runtime(&plan, options);
    rt.poll_once().unwrap();
    let err = rt.commit().unwrap_err();
    assert!(matches!(err, ProcessorError::StateLimit(_)), "{err}");
    let text = err.to_string();
    assert!(text.contains("limit of 100"), "{text}");
    assert!(text.contains("clicks_per_ms"), "{text}");
}

#[test]
fn a_join_of_two_streams_keeping_too_many_events_fails_with_a_reason() {
    // Clicks joined with themselves within a day: every click is kept on
    // both sides, and none leaves before the watermark passes a day.
    let mut plan = Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .join_table("clicks", Expr::field("page"), "c", JoinKind::Inner)
        .key_by([("page", Expr::field("page"))])
        .aggregate([dsl::count("n")])
        .to_view("click_pairs");
    let join = plan.join.as_mut().expect("a join");
    join.table_time = Some(vec!["ts".into()]);
    join.within = Some(WithinSpec {
        before_ms: 86_400_000,
        after_ms: 86_400_000,
        grace_ms: 0,
        joined_key: Expr::field("c.page"),
        typed_fields: Vec::new(),
    });
    let h = Harness::new();
    let t0 = recent();
    for i in 0..300 {
        h.produce(&click(&format!("p{}", i % 3), t0 + i));
    }
    let options = RunOptions {
        state_entries_max: 100,
        ..RunOptions::default()
    };
    let mut rt = h.open_runtime(&plan, options);
    rt.poll_once().unwrap();
    let err = rt.commit().unwrap_err();
    assert!(matches!(err, ProcessorError::StateLimit(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("limit of 100") && text.contains("WITHIN"),
        "{text}"
    );
}

// ---------------------------------------------------------------------------
// Declared types and integer overflow (item 11)
// ---------------------------------------------------------------------------

fn purchase(user: &str, amount: Value) -> Step {
    Step::Produce {
        topic: "purchases".into(),
        partition: None,
        key: Some(user.into()),
        value: json!({"user": user, "amount": amount}),
        timestamp: None,
    }
}

fn totals(ty: DataType) -> Plan {
    Pipeline::from_topic("purchases")
        .typed_field("amount", ty)
        .key_by([("user", Expr::field("user"))])
        .aggregate([
            dsl::max("max_amount", Expr::field("amount")),
            dsl::sum("total", Expr::field("amount")),
            dsl::count("n"),
        ])
        .to_view("totals")
}

fn run(plan: &Plan, steps: &[Step]) -> (Harness, Vec<Value>, u64) {
    let h = Harness::new();
    for step in steps {
        h.produce(step);
    }
    let mut rt = h.open_runtime(plan, RunOptions::default());
    h.run_to_end(&mut rt, plan);
    let invalid = rt.progress().snapshot().invalid;
    drop(rt);
    let rows = h
        .view_rows(plan)
        .into_iter()
        .map(|r| r["row"].clone())
        .collect();
    (h, rows, invalid)
}

#[test]
fn a_value_of_the_wrong_type_is_invalid_and_skipped() {
    let plan = totals(DataType::Double);
    let (_h, rows, invalid) = run(
        &plan,
        &[
            purchase("u1", json!(5.5)),
            purchase("u1", json!("abc")),
            purchase("u1", json!(true)),
            purchase("u1", json!(2)),
            purchase("u1", Value::Null),
        ],
    );
    assert_eq!(invalid, 2);
    assert_eq!(
        rows,
        vec![json!({"user": "u1", "max_amount": 5.5, "total": 7.5, "n": 3})]
    );
}

#[test]
fn bigint_columns_take_only_integers_and_their_sum_saturates() {
    let plan = totals(DataType::Integer);
    let (_h, rows, invalid) = run(
        &plan,
        &[
            purchase("u1", json!(i64::MAX)),
            purchase("u1", json!(1.5)),
            purchase("u1", json!("7")),
            purchase("u1", json!(1)),
        ],
    );
    assert_eq!(invalid, 2);
    assert_eq!(
        rows,
        vec![json!({"user": "u1", "max_amount": i64::MAX, "total": i64::MAX, "n": 2})]
    );
    assert!(rows[0]["total"].is_i64(), "never a double: {}", rows[0]);
}
