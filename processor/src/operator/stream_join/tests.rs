#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::expr::{BinaryOp, Expr};

const ALIAS: &str = "b";

fn spec(kind: JoinKind, before_ms: i64, after_ms: i64, grace_ms: i64) -> JoinSpec {
    JoinSpec {
        table_topic: "right".into(),
        stream_key: Expr::Field(vec!["k".into()]),
        alias: ALIAS.into(),
        kind,
        table_time: Some(vec!["t".into()]),
        history_ms: None,
        within: Some(WithinSpec {
            before_ms,
            after_ms,
            grace_ms,
            joined_key: Expr::Field(vec![ALIAS.into(), "k".into()]),
            typed_fields: Vec::new(),
        }),
    }
}

fn join(kind: JoinKind, before_ms: i64, after_ms: i64, grace_ms: i64) -> StreamJoin {
    StreamJoin::new(spec(kind, before_ms, after_ms, grace_ms), "s".into(), None).unwrap()
}

/// A stream event: `{"k", "t", "id"}` at partition 0, offset `id`.
fn left(k: Option<&str>, t: i64, id: u64) -> Event {
    let value = json!({"k": k, "t": t, "id": id});
    Event {
        partition: 0,
        offset: id,
        record_timestamp: t,
        raw_key: k.map(|k| Bytes::from(k.to_string())),
        lossy_key: None,
        raw_value: Bytes::from(value.to_string()),
        value,
        fields: None,
        event_time: t,
        joined: Vec::new(),
        joined_key: None,
    }
}

/// A joined stream's event, decoded as the runtime decodes it.
fn right(j: &StreamJoin, k: Option<&str>, t: i64, id: u64) -> Event {
    match right_record(j, k, t, id) {
        JoinedRecord::Event(e) => *e,
        other => panic!("not an event: {other:?}"),
    }
}

/// A joined stream's record as the runtime decodes it (its filter
/// applied).
fn right_record(j: &StreamJoin, k: Option<&str>, t: i64, id: u64) -> JoinedRecord {
    let value = json!({"k": k, "t": t, "id": id}).to_string();
    let record = JoinedInput {
        partition: 1,
        offset: id,
        timestamp: t,
        key: k.map(str::as_bytes),
        value: value.as_bytes(),
    };
    j.joined_decoder().decode(record, t, i64::MAX / 4)
}

/// (left id, right id) of a joined event; `None` for a side that is null.
fn ids(e: &Event) -> (Option<u64>, Option<u64>) {
    let l = e.value.get("id").and_then(Value::as_u64);
    let r = e
        .joined
        .first()
        .and_then(|(_, v)| v.get("id"))
        .and_then(Value::as_u64);
    (l, r)
}

fn rows(joined: Joined) -> Vec<(Option<u64>, Option<u64>)> {
    match joined {
        Joined::Rows(rows) => rows.iter().map(ids).collect(),
        Joined::Late(_) => panic!("late"),
    }
}

#[test]
fn each_pair_within_the_bound_joins_once_when_its_second_event_comes() {
    let mut j = join(JoinKind::Inner, 1_000, 500, 10_000);
    assert!(rows(j.left_event(left(Some("a"), 10_000, 1), 0)).is_empty());
    // Right events at the bound's edges join; just outside do not.
    let r = right(&j, Some("a"), 9_000, 10);
    assert_eq!(rows(j.right_event_joined(r, 0)), vec![(Some(1), Some(10))]);
    let r = right(&j, Some("a"), 10_500, 11);
    assert_eq!(rows(j.right_event_joined(r, 0)), vec![(Some(1), Some(11))]);
    let r = right(&j, Some("a"), 8_999, 12);
    assert!(rows(j.right_event_joined(r, 0)).is_empty());
    let r = right(&j, Some("a"), 10_501, 13);
    assert!(rows(j.right_event_joined(r, 0)).is_empty());
    let r = right(&j, Some("b"), 10_000, 14);
    assert!(rows(j.right_event_joined(r, 0)).is_empty());
    // A later left event joins the buffered right events in time order.
    // [9_600 - 1_000, 9_600 + 500]: 12 (8_999) and 10 (9_000), in time order.
    assert_eq!(
        rows(j.left_event(left(Some("a"), 9_600, 2), 0)),
        vec![(Some(2), Some(12)), (Some(2), Some(10))]
    );
}

#[test]
fn a_joined_event_has_the_later_time_and_the_joined_key() {
    let mut j = join(JoinKind::Inner, 1_000, 1_000, 0);
    j.left_event(left(Some("a"), 5_000, 1), 0);
    let r = right(&j, Some("a"), 5_400, 2);
    let Joined::Rows(out) = j.right_event_joined(r, 0) else {
        panic!("late")
    };
    assert_eq!(out[0].event_time, 5_400);
    assert_eq!(out[0].key_text(), Some("a"));
    use crate::expr::Row;
    assert_eq!(
        out[0].column(crate::event::JOINED_KEY_COLUMN),
        Some(&json!("a"))
    );
}

#[test]
fn events_behind_the_watermark_by_more_than_the_grace_are_late() {
    let mut j = join(JoinKind::Inner, 1_000, 1_000, 2_000);
    assert!(matches!(
        j.left_event(left(Some("a"), 7_999, 1), 10_000),
        Joined::Late(_)
    ));
    assert!(matches!(
        j.left_event(left(Some("a"), 8_000, 2), 10_000),
        Joined::Rows(_)
    ));
    let r = right(&j, Some("a"), 7_000, 3);
    assert!(matches!(j.right_event_joined(r, 10_000), Joined::Late(_)));
}

#[test]
fn buffered_events_leave_once_no_later_event_can_join_them() {
    // Left at t joins right up to t + after; right at r joins left up to r + before.
    let mut j = join(JoinKind::Inner, 3_000, 1_000, 500);
    j.left_event(left(Some("a"), 10_000, 1), 0);
    let r = right(&j, Some("a"), 10_000, 2);
    j.right_event_joined(r, 0);
    // Horizon 11_000 - 500: the left event (10_000 + 1_000 >= 10_500) stays.
    j.expire(11_000);
    assert_eq!(j.left.by_time.len(), 1);
    j.expire(11_501);
    assert_eq!(j.left.by_time.len(), 0);
    assert_eq!(j.right.by_time.len(), 1);
    j.expire(13_500);
    assert_eq!(j.right.by_time.len(), 1);
    j.expire(13_501);
    assert_eq!(j.right.by_time.len(), 0);
}

#[test]
fn a_left_join_emits_an_unmatched_event_when_it_leaves_the_buffer() {
    let mut j = join(JoinKind::Left, 1_000, 1_000, 0);
    assert!(rows(j.left_event(left(Some("a"), 1_000, 1), 0)).is_empty());
    assert!(rows(j.left_event(left(Some("b"), 1_000, 2), 0)).is_empty());
    let r = right(&j, Some("a"), 1_500, 3);
    assert_eq!(rows(j.right_event_joined(r, 0)), vec![(Some(1), Some(3))]);
    let out: Vec<_> = j.expire(5_000).iter().map(ids).collect();
    assert_eq!(out, vec![(Some(2), None)]);
    // A NULL key matches nothing: out at once.
    assert_eq!(
        rows(j.left_event(left(None, 6_000, 4), 5_000)),
        vec![(Some(4), None)]
    );
}

#[test]
fn a_full_join_also_emits_unmatched_joined_events() {
    let mut j = join(JoinKind::Full, 1_000, 1_000, 0);
    j.left_event(left(Some("a"), 1_000, 1), 0);
    let r = right(&j, Some("b"), 1_000, 2);
    assert!(rows(j.right_event_joined(r, 0)).is_empty());
    let r = right(&j, Some("a"), 900, 3);
    assert_eq!(rows(j.right_event_joined(r, 0)), vec![(Some(1), Some(3))]);
    let out: Vec<_> = j.expire(5_000).iter().map(ids).collect();
    assert_eq!(out, vec![(None, Some(2))]);
}

fn temp_store() -> (tempfile::TempDir, Store, String) {
    let (dir, store, scope) = crate::state::store::temp_store("j");
    (dir, store, scope.state_cf())
}

fn commit(j: &mut StreamJoin, store: &Store) {
    let mut batch = Batch::default();
    j.flush(&mut batch);
    store.write(batch).unwrap();
}

#[test]
fn the_buffers_and_matched_flags_survive_a_restart() {
    let (_dir, store, cf) = temp_store();
    let spec = spec(JoinKind::Full, 1_000, 1_000, 0);
    let mut j = StreamJoin::new(spec.clone(), cf.clone(), None).unwrap();
    j.left_event(left(Some("a"), 1_000, 1), 0);
    j.left_event(left(Some("c"), 1_000, 2), 0);
    let r = right(&j, Some("a"), 1_200, 3);
    j.right_event_joined(r, 0);
    let r = right(&j, Some("z"), 1_200, 4);
    j.right_event_joined(r, 0);
    commit(&mut j, &store);

    let mut restored = StreamJoin::new(spec, cf, None).unwrap();
    restored.restore(&store).unwrap();
    let r = right(&restored, Some("a"), 1_100, 5);
    let Joined::Rows(out) = restored.right_event_joined(r, 0) else {
        panic!("late")
    };
    assert_eq!(
        out.iter().map(ids).collect::<Vec<_>>(),
        vec![(Some(1), Some(5))]
    );
    assert_eq!(out[0].key_text(), Some("a"));
    // Left 1 and right 3 matched before the restart: only 2 and 4 come out.
    let out: Vec<_> = restored.expire(10_000).iter().map(ids).collect();
    assert_eq!(out, vec![(Some(2), None), (None, Some(4))]);
    commit(&mut restored, &store);
    let (lower, upper) = key::namespace(ns::STREAM_JOIN);
    assert!(store
        .scan(&restored.state_cf, &lower, Some(&upper), 10)
        .unwrap()
        .is_empty());
}

/// A joined row by its sides' ids (`None`: that side is null).
type Pair = (Option<u64>, Option<u64>);

/// The rows of a run in order, and the ids of the late events.
type Outcome = (Vec<Pair>, BTreeSet<u64>);

/// One input of a random history.
#[derive(Debug, Clone)]
struct Input {
    right: bool,
    key: u8,
    time: i64,
}

fn history() -> impl Strategy<Value = (Vec<Input>, Vec<usize>)> {
    let input = (any::<bool>(), 0u8..4, 0i64..20_000).prop_map(|(right, key, time)| Input {
        right,
        key,
        time,
    });
    (
        proptest::collection::vec(input, 0..60),
        proptest::collection::vec(0usize..60, 0..4),
    )
}

/// Runs `inputs` through a join, committing and restarting from the store
/// before the inputs numbered in `restarts`; the watermark trails the
/// largest time by `disorder` (inputs behind it by more than the grace
/// are late). Returns the joined pairs and the late ids.
fn run(
    kind: JoinKind,
    inputs: &[Input],
    restarts: &[usize],
    within: (i64, i64),
    grace: i64,
) -> Outcome {
    run_filtered(kind, inputs, restarts, within, grace, None)
}

/// [`run`] with `filter` as the plan's `WHERE`: the join applies its
/// one-sided conjuncts first, and the rows are those passing it whole.
fn run_filtered(
    kind: JoinKind,
    inputs: &[Input],
    restarts: &[usize],
    within: (i64, i64),
    grace: i64,
    filter: Option<&Expr>,
) -> Outcome {
    let (_dir, store, cf) = temp_store();
    let spec = spec(kind, within.0, within.1, grace);
    let mut j = StreamJoin::new(spec.clone(), cf.clone(), filter).unwrap();
    let passes = |e: &Event| filter.is_none_or(|f| f.is_true(e));
    let (mut out, mut late) = (Vec::new(), BTreeSet::new());
    let mut max_time = i64::MIN;
    let mut watermark = i64::MIN;
    for (i, input) in inputs.iter().enumerate() {
        if restarts.contains(&i) {
            commit(&mut j, &store);
            j = StreamJoin::new(spec.clone(), cf.clone(), filter).unwrap();
            j.restore(&store).unwrap();
        }
        max_time = max_time.max(input.time);
        let advanced = max_time - 2_000;
        if advanced > watermark {
            watermark = advanced;
            out.extend(j.expire(watermark).iter().filter(|e| passes(e)).map(ids));
        }
        let key = input.key.to_string();
        let id = i as u64;
        let joined = match input.right {
            false => j.left_event(left(Some(&key), input.time, id), watermark),
            true => match right_record(&j, Some(&key), input.time, id) {
                JoinedRecord::Event(r) => j.right_event_joined(*r, watermark),
                // Failed the filter: late or not, it joins nothing.
                JoinedRecord::Filtered(t) if j.is_late(t, watermark) => {
                    Joined::Late(Box::new(left(None, t, id)))
                }
                JoinedRecord::Filtered(_) => Joined::Rows(Vec::new()),
                other => panic!("not an event: {other:?}"),
            },
        };
        match joined {
            Joined::Rows(rows) => out.extend(rows.iter().filter(|e| passes(e)).map(ids)),
            Joined::Late(_) => {
                late.insert(id);
            }
        }
    }
    out.extend(j.expire(i64::MAX).iter().filter(|e| passes(e)).map(ids));
    (out, late)
}

/// The join computed naively: every pair of on-time events of one key
/// within the bound, and for outer joins each on-time event that has none.
fn naive(
    kind: JoinKind,
    inputs: &[Input],
    late: &BTreeSet<u64>,
    (before, after): (i64, i64),
) -> BTreeSet<(Option<u64>, Option<u64>)> {
    let on_time: Vec<(u64, &Input)> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| (i as u64, input))
        .filter(|(i, _)| !late.contains(i))
        .collect();
    let mut pairs = BTreeSet::new();
    for (l, li) in on_time.iter().filter(|(_, x)| !x.right) {
        let mut matched = false;
        for (r, ri) in on_time.iter().filter(|(_, x)| x.right) {
            if li.key == ri.key && li.time - before <= ri.time && ri.time <= li.time + after {
                pairs.insert((Some(*l), Some(*r)));
                matched = true;
            }
        }
        if !matched && kind != JoinKind::Inner {
            pairs.insert((Some(*l), None));
        }
    }
    if kind == JoinKind::Full {
        for (r, _) in on_time.iter().filter(|(_, x)| x.right) {
            if !pairs.iter().any(|(_, pr)| *pr == Some(*r)) {
                pairs.insert((None, Some(*r)));
            }
        }
    }
    pairs
}

proptest! {
    /// For random histories of both streams (out of order, some late),
    /// with restarts from the committed buffers in between, the join's
    /// output is the naive join of the events that were not late, each
    /// row once; and a run without restarts gives the same rows in the
    /// same order.
    #[test]
    fn the_join_equals_a_naive_join_also_across_restarts(
        (inputs, restarts) in history(),
        kind in prop_oneof![Just(JoinKind::Inner), Just(JoinKind::Left), Just(JoinKind::Full)],
        before in 0i64..3_000,
        after in 0i64..3_000,
        grace in prop_oneof![Just(0i64), 0i64..3_000, Just(1_000_000)],
    ) {
        let (out, late) = run(kind, &inputs, &restarts, (before, after), grace);
        let unique: BTreeSet<_> = out.iter().copied().collect();
        prop_assert_eq!(unique.len(), out.len(), "a row came out twice: {:?}", out);
        prop_assert_eq!(unique, naive(kind, &inputs, &late, (before, after)));
        let (straight, straight_late) = run(kind, &inputs, &[], (before, after), grace);
        prop_assert_eq!(straight, out);
        prop_assert_eq!(straight_late, late);
    }
}

proptest! {
    /// `WHERE` conjuncts reading one side, applied before the join where
    /// the join allows, give the rows of `WHERE` applied after the join
    /// alone.
    #[test]
    fn filters_applied_first_change_no_row(
        (inputs, restarts) in history(),
        kind in prop_oneof![Just(JoinKind::Inner), Just(JoinKind::Left), Just(JoinKind::Full)],
        before in 0i64..3_000,
        after in 0i64..3_000,
    ) {
        let field = |path: &[&str]| Expr::Field(path.iter().map(|s| s.to_string()).collect());
        let lit = |v: Value| Expr::Literal(v);
        let bin = |op, l, r| Expr::Binary(op, Box::new(l), Box::new(r));
        // Stream key not '1', and the joined event's id even.
        let filter = bin(
            BinaryOp::And,
            bin(BinaryOp::NotEq, field(&["k"]), lit(json!("1"))),
            bin(
                BinaryOp::Eq,
                bin(BinaryOp::Mod, field(&[ALIAS, "id"]), lit(json!(2))),
                lit(json!(0)),
            ),
        );
        let pushed = run_filtered(kind, &inputs, &restarts, (before, after), 1_000, Some(&filter));
        // The same WHERE after a join that applies nothing first.
        let (all, late) = run(kind, &inputs, &restarts, (before, after), 1_000);
        let keep: Vec<_> = all
            .into_iter()
            .filter(|(l, r)| {
                let l_ok = l.is_some_and(|l| inputs[l as usize].key != 1);
                let r_ok = r.is_some_and(|r| r % 2 == 0);
                // Three-valued: a null side fails its conjunct.
                l_ok && r_ok
            })
            .collect();
        prop_assert_eq!(pushed.1, late);
        prop_assert_eq!(pushed.0, keep);
    }
}

#[test]
fn buffered_events_keep_only_the_fields_read_and_restore_to_the_same_joins() {
    let (_dir, store, cf) = temp_store();
    let spec = spec(JoinKind::Inner, 1_000, 1_000, 0);
    let read = || vec!["k".to_string(), "t".to_string(), "id".to_string()];
    let new = || {
        StreamJoin::new(spec.clone(), cf.clone(), None)
            .unwrap()
            .reading(Some(read()))
            .keeping_read_fields(true)
    };
    let pad = "x".repeat(500);
    let mut j = new();
    // A stream event decoded by the fields read, its value holding more.
    let mut l = left(Some("a"), 1_000, 1);
    l.raw_value = Bytes::from(json!({"k": "a", "t": 1_000, "id": 1, "pad": pad}).to_string());
    l.fields = Some((Arc::from(read()), vec![json!("a"), json!(1_000), json!(1)]));
    l.value = Value::Null;
    j.left_event(l, 0);
    let value = json!({"k": "b", "t": 1_200, "id": 3, "pad": pad}).to_string();
    let record = JoinedInput {
        partition: 1,
        offset: 3,
        timestamp: 1_200,
        key: Some(b"b"),
        value: value.as_bytes(),
    };
    let JoinedRecord::Event(r) = j.joined_decoder().decode(record, 1_200, i64::MAX / 4) else {
        panic!("not an event")
    };
    j.right_event_joined(*r, 0);
    commit(&mut j, &store);
    let (lower, upper) = key::namespace(ns::STREAM_JOIN);
    let stored = store.scan(&j.state_cf, &lower, Some(&upper), 10).unwrap();
    assert_eq!(stored.len(), 2);
    for (_, v) in &stored {
        let (_, value) = decode(v).unwrap();
        let value: Value = serde_json::from_slice(value).unwrap();
        assert_eq!(value.get("pad"), None, "{value}");
        assert!(value.get("id").is_some(), "{value}");
    }

    let mut restored = new();
    restored.restore(&store).unwrap();
    let r = right(&restored, Some("a"), 1_100, 5);
    let pairs = pair_ids(restored.right_event_joined(r, 0));
    assert_eq!(pairs, vec![(Some(1), Some(5))]);
    let pairs = pair_ids(restored.left_event(left(Some("b"), 1_300, 6), 0));
    assert_eq!(pairs, vec![(Some(6), Some(3))]);
}

/// The (left id, right id) of each pair an event made ([`ids`]); it must
/// not have been late.
fn pair_ids(joined: Joined) -> Vec<(Option<u64>, Option<u64>)> {
    let Joined::Rows(out) = joined else {
        panic!("late")
    };
    out.iter().map(ids).collect()
}
