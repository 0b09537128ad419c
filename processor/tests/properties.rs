//! Property tests: for random event sequences with bounded disorder, random
//! late events and duplicates, a deduplicated tumbling or hopping COUNT/SUM
//! view (open hopping windows are computed from slices when read) equals
//! a naive recomputation over exactly the events that were neither late nor
//! duplicates; so does a session-window view; with EMIT FINAL, rows exist
//! only for closed windows. Runs with and without random crashes (crash runs
//! keep one state entry cached, so state is read back from the store), on
//! one thread and with 2 and 4 workers (issue 14).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use common::{run_steps_with, Step};
use kappa_processor::dsl::{self, Hopping, Pipeline, Session, Tumbling};
use kappa_processor::expr::Expr;
use proptest::prelude::*;
use serde_json::{json, Value};

const SIZE: i64 = 1000;

#[derive(Debug, Clone)]
struct Input {
    id: String,
    user: u8,
    amount: i64,
    ts: i64,
}

fn inputs() -> impl Strategy<Value = Vec<Input>> {
    // Times are multiples of 100 so that events land exactly on window
    // boundaries and watermark thresholds often.
    proptest::collection::vec((0u8..3, 0i64..100, -3i64..4, 0u8..10, 0usize..1000), 1..60).prop_map(
        |specs| {
            let mut out: Vec<Input> = Vec::new();
            for (i, (user, amount, jitter, kind, pick)) in specs.into_iter().enumerate() {
                let (base, jitter) = (i as i64 * 100, jitter * 100);
                match kind {
                    // A duplicate of an earlier event.
                    0 if !out.is_empty() => {
                        let earlier = out[pick % out.len()].clone();
                        out.push(earlier);
                    }
                    // A very late event.
                    1 => out.push(Input {
                        id: format!("e{i}"),
                        user,
                        amount,
                        ts: base - 5000 + jitter,
                    }),
                    _ => out.push(Input {
                        id: format!("e{i}"),
                        user,
                        amount,
                        ts: base + jitter,
                    }),
                }
            }
            out
        },
    )
}

/// The inputs as records of topic `events`, keyed by user.
fn produce_steps(inputs: &[Input]) -> Vec<Step> {
    inputs
        .iter()
        .map(|e| Step::Produce {
            topic: "events".into(),
            partition: None,
            key: Some(format!("u{}", e.user)),
            value: json!({"id": e.id, "user": format!("u{}", e.user), "amount": e.amount, "ts": e.ts}),
            timestamp: None,
        })
        .collect()
}

/// The naive answer: replays the events one by one with the same rules;
/// windows of `SIZE` start every `advance` (tumbling when equal). An event
/// counts in each of its windows still open before it; it is late when
/// none is.
fn naive(inputs: &[Input], delay: i64, grace: i64, emit_final: bool, advance: i64) -> Vec<Value> {
    let mut watermark = i64::MIN;
    let mut seen = HashSet::new();
    let mut windows: BTreeMap<(String, i64), (u64, i64)> = BTreeMap::new();
    for e in inputs {
        let before = watermark;
        watermark = watermark.max(e.ts - delay);
        if !seen.insert(e.id.clone()) {
            continue;
        }
        let last_start = e.ts.div_euclid(advance) * advance;
        let mut start = last_start;
        while start > e.ts - SIZE {
            if start + SIZE + grace > before {
                let w = windows.entry((format!("u{}", e.user), start)).or_default();
                w.0 += 1;
                w.1 += e.amount;
            }
            start -= advance;
        }
    }
    windows
        .into_iter()
        .filter(|((_, start), _)| !emit_final || start + SIZE + grace <= watermark)
        .map(|((user, start), (count, sum))| {
            json!({"key": user, "window_start": start, "window_end": start + SIZE,
                   "row": {"user": user, "window_start": start, "window_end": start + SIZE, "n": count, "total": sum}})
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn views_equal_a_naive_recomputation(
        inputs in inputs(),
        delay in (0i64..5).prop_map(|d| d * 100),
        grace in (0i64..5).prop_map(|g| g * 100),
        emit_final in any::<bool>(),
        crash in proptest::option::of(0u64..1000),
        advance in prop_oneof![Just(SIZE), Just(SIZE / 2), Just(SIZE / 4)],
    ) {
        let grouped = Pipeline::from_topic("events")
            .event_time_field("ts")
            .max_out_of_orderness(Duration::from_millis(delay as u64))
            .dedup_by(Expr::field("id"), Duration::from_secs(3600))
            .key_by([("user", Expr::field("user"))])
            .window(if advance == SIZE {
                Tumbling::of(Duration::from_millis(SIZE as u64))
            } else {
                Hopping::of(Duration::from_millis(SIZE as u64), Duration::from_millis(advance as u64))
            })
            .grace(Duration::from_millis(grace as u64));
        let grouped = if emit_final { grouped.emit_final() } else { grouped };
        let plan = grouped.aggregate([dsl::count("n"), dsl::sum("total", Expr::field("amount"))]).to_view("v");
        let expected = naive(&inputs, delay, grace, emit_final, advance);
        for workers in [1, 2, 4] {
            let h = run_steps_with(&plan, &produce_steps(&inputs), crash, workers);
            prop_assert_eq!(h.view_rows(&plan), expected.clone(), "{} workers", workers);
        }
    }
}

/// The naive session answer: per user, sessions `[t, t + gap)` that merge
/// when they overlap or touch, replayed event by event with the runtime's
/// order: the watermark moves (including the event), sessions whose end +
/// grace it reached close (and never merge again), then the event is late
/// if its own session would already be closed, else it joins or bridges
/// the open sessions.
fn naive_sessions(
    inputs: &[Input],
    delay: i64,
    grace: i64,
    gap: i64,
    emit_final: bool,
) -> Vec<Value> {
    #[derive(Clone, Copy)]
    struct S {
        start: i64,
        end: i64,
        n: u64,
        total: i64,
        closed: bool,
    }
    let mut watermark = i64::MIN;
    let mut users: BTreeMap<String, Vec<S>> = BTreeMap::new();
    for e in inputs {
        watermark = watermark.max(e.ts - delay);
        for s in users.values_mut().flatten() {
            s.closed |= s.end + grace <= watermark;
        }
        if e.ts + gap + grace <= watermark {
            continue;
        }
        let sessions = users.entry(format!("u{}", e.user)).or_default();
        let mut merged = S {
            start: e.ts,
            end: e.ts + gap,
            n: 1,
            total: e.amount,
            closed: false,
        };
        while let Some(i) = sessions
            .iter()
            .position(|s| !s.closed && s.start <= merged.end && merged.start <= s.end)
        {
            let s = sessions.remove(i);
            merged.start = merged.start.min(s.start);
            merged.end = merged.end.max(s.end);
            merged.n += s.n;
            merged.total += s.total;
        }
        sessions.push(merged);
    }
    let mut rows = Vec::new();
    for (user, sessions) in users {
        let mut sessions = sessions;
        sessions.sort_by_key(|s| s.start);
        for s in sessions {
            if emit_final && s.end + grace > watermark {
                continue;
            }
            rows.push(json!({"key": user, "window_start": s.start, "window_end": s.end,
                "row": {"user": user, "window_start": s.start, "window_end": s.end, "n": s.n, "total": s.total}}));
        }
    }
    rows
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn session_views_equal_a_naive_recomputation(
        inputs in inputs(),
        delay in (0i64..5).prop_map(|d| d * 100),
        grace in (0i64..5).prop_map(|g| g * 100),
        gap in prop_oneof![Just(100i64), Just(300), Just(1000)],
        emit_final in any::<bool>(),
        crash in proptest::option::of(0u64..1000),
    ) {
        let grouped = Pipeline::from_topic("events")
            .event_time_field("ts")
            .max_out_of_orderness(Duration::from_millis(delay as u64))
            .key_by([("user", Expr::field("user"))])
            .window(Session::with_gap(Duration::from_millis(gap as u64)))
            .grace(Duration::from_millis(grace as u64));
        let grouped = if emit_final { grouped.emit_final() } else { grouped };
        let plan = grouped.aggregate([dsl::count("n"), dsl::sum("total", Expr::field("amount"))]).to_view("v");
        let expected = naive_sessions(&inputs, delay, grace, gap, emit_final);
        for workers in [1, 2, 4] {
            let h = run_steps_with(&plan, &produce_steps(&inputs), crash, workers);
            prop_assert_eq!(h.view_rows(&plan), expected.clone(), "{} workers", workers);
        }
    }
}
