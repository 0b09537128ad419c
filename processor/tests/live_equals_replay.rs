//! A replay reproduces the live run (issue 12): for random interleavings
//! of appends to 2–4 stream partitions and a table topic, with random gaps
//! in log time (some longer than the idle timeout), a version built live —
//! polled between appends, committing at random — has exactly the rows and
//! late/duplicate/invalid counts of the same definition replayed from the
//! earliest offsets afterwards — also when the live version crashes and
//! resumes from its last commit in between (rows only then: counters are
//! kept in memory). Tumbling (filtered), hopping and session aggregates,
//! a deduplicated aggregate, stream-table joins (non-windowed and
//! windowed), and joins of two streams (`tiers` read as a stream: inner
//! and windowed, left and running).
//!
//! Issue 14: the live run, every restart and the replay each use 1, 2 or
//! 4 workers (source and key-shard workers, `processor/src/parallel/`),
//! drawn at random, and a replay on one thread must give the same rows and
//! counts: a parallel version's results are the single-threaded engine's.
//!
//! Issue 38: queries with several joins (a table joined on a key another
//! joined row gives; a join of two streams whose pairs join a table), and
//! aggregates and top-Ns over an aggregate's rows (subqueries) are among
//! the plans, and their rows also equal a naive aggregate (or
//! ranking) over the rows the inner aggregate has alone.
//!
//! Log time is a manual clock, so the gaps take no wall time.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kappa_log::{
    AppendClock, FsyncPolicy, Log, LogConfig, ManualTime, NewRecord, ProduceRecord, TopicConfig,
};
use kappa_processor::dsl::{self, Hopping, Pipeline, Session, Tumbling};
use kappa_processor::event::JOINED_KEY_COLUMN;
use kappa_processor::expr::Expr;
use kappa_processor::plan::{JoinKind, Plan, WithinSpec};
use kappa_processor::runner::{RunOptions, Runtime};
use kappa_processor::state::store::{Scope, Store};
use kappa_processor::view::{self, ViewQuery};
use proptest::prelude::*;
use serde_json::{json, Value};

const IDLE_MS: u64 = 1_000;

/// One step of a live run.
#[derive(Debug, Clone)]
enum Op {
    /// A purchase on a stream partition at event time `clock + skew`.
    Event {
        partition: u32,
        /// Records in its batch (ids `id..id + count`).
        count: u8,
        /// Its id (few ids: duplicates are frequent).
        id: u8,
        user: u8,
        amount: i64,
        skew: i64,
    },
    /// A tier change of a user, effective at `clock + skew`; tier 3 is a
    /// deletion (a record with a null value).
    Tier { user: u8, tier: u8, skew: i64 },
    /// Log time passes.
    Gap(i64),
    /// The live version polls (and commits when `commit`).
    Poll { commit: bool },
    /// The live version crashes (what it did since its last commit is
    /// lost) and is opened again from its last commit, with this many
    /// workers.
    Restart { workers: usize },
}

/// Worker counts tried.
fn workers() -> impl Strategy<Value = usize> {
    prop_oneof![Just(1usize), Just(2), Just(4)]
}

fn ops(partitions: u32) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        5 => (0..partitions, 1u8..=4, 0u8..24, 0u8..4, 1i64..50, -3_000i64..500)
            .prop_map(|(partition, count, id, user, amount, skew)| Op::Event { partition, count, id, user, amount, skew }),
        2 => (0u8..4, 0u8..4, -2_000i64..200).prop_map(|(user, tier, skew)| Op::Tier { user, tier, skew }),
        3 => prop_oneof![0i64..50, 200i64..1_500, Just(IDLE_MS as i64), 2_000i64..5_000].prop_map(Op::Gap),
        3 => any::<bool>().prop_map(|commit| Op::Poll { commit }),
        1 => workers().prop_map(|workers| Op::Restart { workers }),
    ];
    proptest::collection::vec(op, 1..80)
}

/// The definitions compared (all read `buys`; joins read `tiers`).
fn plans() -> Vec<Plan> {
    let source = || {
        Pipeline::from_topic("buys")
            .event_time_field("ts")
            .max_out_of_orderness(Duration::from_millis(300))
            .idle_timeout(Duration::from_millis(IDLE_MS))
    };
    let per_user = || source().key_by([("user", Expr::field("user"))]);
    let sums = || [dsl::count("n"), dsl::sum("spent", Expr::field("amount"))];
    let joined = || source().join_table("tiers", Expr::field("user"), "t", JoinKind::Left);
    vec![
        source()
            .filter(Expr::field("amount").gt(Expr::lit(5)))
            .key_by([("user", Expr::field("user"))])
            .window(Tumbling::of(Duration::from_secs(2)))
            .grace(Duration::from_millis(500))
            .aggregate(sums())
            .to_view("tumbling"),
        per_user()
            .window(Hopping::of(
                Duration::from_secs(2),
                Duration::from_millis(500),
            ))
            .grace(Duration::from_millis(200))
            .emit_final()
            .aggregate(sums())
            .to_view("hopping"),
        per_user()
            .window(Session::with_gap(Duration::from_millis(1_500)))
            .aggregate(sums())
            .to_view("sessions"),
        source()
            .dedup_by(Expr::field("id"), Duration::from_secs(2))
            .key_by([("user", Expr::field("user"))])
            .window(Tumbling::of(Duration::from_secs(2)))
            .aggregate(sums())
            .to_view("dedup"),
        joined()
            .key_by([("tier", Expr::field("t.tier"))])
            .aggregate(sums())
            .to_view("by_tier"),
        {
            // Tier rows hold from their `since` column, not their append.
            let mut plan = joined()
                .key_by([("tier", Expr::field("t.tier"))])
                .window(Tumbling::of(Duration::from_secs(3)))
                .grace(Duration::from_millis(400))
                .aggregate(sums())
                .to_view("by_tier_windowed");
            plan.join.as_mut().expect("a join").table_time = Some(vec!["since".into()]);
            plan
        },
        // `tiers` as a stream: a buy joins the tier changes of its user
        // from 1 s before it to 0.5 s after it (by their `since`).
        stream_join(
            source()
                .join_table("tiers", Expr::field("user"), "t", JoinKind::Inner)
                .key_by([("tier", Expr::field("t.tier"))])
                .window(Tumbling::of(Duration::from_secs(2)))
                .grace(Duration::from_millis(500))
                .aggregate(sums())
                .to_view("stream_join_windowed"),
        ),
        stream_join(
            joined()
                .key_by([("tier", Expr::field("t.tier"))])
                .aggregate(sums())
                .to_view("stream_join_left"),
        ),
        // Several joins: `tiers` joined twice, the second on a key the
        // first's row gives (a mentor named by `since`).
        sql_plan(
            "CREATE TABLE by_mentor_tier AS SELECT t.tier, m.tier AS mentor_tier, COUNT(*) AS n, SUM(b.amount) AS spent
             FROM buys b LEFT JOIN tiers t ON b.\"user\" = t.\"user\"
               JOIN tiers m ON 'u' || CAST(t.since % 4 AS VARCHAR) = m.\"user\"
             GROUP BY t.tier, m.tier;",
        ),
        // A join of two streams, its pairs then joined with a table.
        stream_join(
            joined()
                .join_table("tiers", Expr::field("user"), "now", JoinKind::Left)
                .key_by([
                    ("tier", Expr::field("t.tier")),
                    ("now", Expr::field("now.tier")),
                ])
                .window(Tumbling::of(Duration::from_secs(2)))
                .grace(Duration::from_millis(500))
                .aggregate(sums())
                .to_view("stream_join_then_table"),
        ),
    ]
}

/// The definitions over rows (issue 38): aggregates of a
/// table's changes, with retractions, over a running, a tumbling (EMIT
/// CHANGES) and a hopping (final rows) inner aggregate; top-Ns.
fn row_plans() -> Vec<Plan> {
    vec![
        sql_plan(
            "CREATE TABLE nested AS SELECT n, COUNT(*) AS users, SUM(spent) AS spent, MAX(spent) AS top,
               MIN(spent) AS least, AVG(spent) AS mean, COUNT_DISTINCT(spent) AS amounts
             FROM (SELECT \"user\", COUNT(*) AS n, SUM(amount) AS spent FROM buys GROUP BY \"user\") q
             WHERE spent > 20 GROUP BY n;",
        ),
        sql_plan(
            "CREATE TABLE nested_windowed AS WITH q AS (
               SELECT \"user\", COUNT(*) AS n, SUM(amount) AS spent FROM buys
               WINDOW TUMBLING (SIZE 2 SECONDS, GRACE PERIOD 500 MILLISECONDS) GROUP BY \"user\" EMIT CHANGES)
             SELECT COUNT(*) AS users, SUM(spent) AS spent, MAX(spent) AS top, MIN(n) AS least,
               AVG(spent) AS mean, COUNT_DISTINCT(n) AS amounts FROM q;",
        ),
        sql_plan(
            "CREATE TABLE nested_final AS SELECT \"user\", COUNT(*) AS users, SUM(n) AS spent, MAX(spent) AS top,
               MIN(spent) AS least, AVG(n) AS mean, COUNT_DISTINCT(n) AS amounts
             FROM (SELECT \"user\", COUNT(*) AS n, SUM(amount) AS spent FROM buys
               WINDOW HOPPING (SIZE 2 SECONDS, ADVANCE BY 500 MILLISECONDS, GRACE PERIOD 200 MILLISECONDS)
               GROUP BY \"user\") q
             GROUP BY \"user\";",
        ),
        // Top-N of an aggregate's rows: the biggest spenders overall
        // (ties broken by key), and per window with ties.
        sql_plan(
            "CREATE TABLE top_spenders AS SELECT \"user\", spent FROM (
               SELECT \"user\", SUM(amount) AS spent FROM buys GROUP BY \"user\") q
             QUALIFY ROW_NUMBER() OVER (ORDER BY spent DESC) <= 2;",
        ),
        sql_plan(
            "CREATE TABLE top_per_window AS SELECT \"user\", n, ws FROM (
               SELECT \"user\", WINDOWSTART AS ws, COUNT(*) AS n FROM buys
               WINDOW TUMBLING (SIZE 2 SECONDS, GRACE PERIOD 500 MILLISECONDS) GROUP BY \"user\" EMIT CHANGES) q
             WHERE n > 1
             QUALIFY RANK() OVER (PARTITION BY ws ORDER BY n DESC) <= 1;",
        ),
        // Windows' final rows of many groups (ids) per window, most of
        // them dropped as they come: the two smallest sums (ties broken by
        // key).
        sql_plan(
            "CREATE TABLE top_final AS SELECT id, spent, ws FROM (
               SELECT id, WINDOWSTART AS ws, SUM(amount) AS spent FROM buys
               WINDOW HOPPING (SIZE 2 SECONDS, ADVANCE BY 500 MILLISECONDS, GRACE PERIOD 200 MILLISECONDS)
               GROUP BY id) q
             QUALIFY ROW_NUMBER() OVER (PARTITION BY ws ORDER BY spent) <= 2;",
        ),
        // A declared table's latest rows (tier changes and deletions),
        // aggregated and ranked.
        sql_plan(
            "CREATE TABLE users_per_tier AS SELECT tier, COUNT(*) AS users, SUM(since) AS since,
               MAX(since) AS latest, MIN(since) AS first, AVG(since) AS mean, COUNT_DISTINCT(since) AS times
             FROM tiers WHERE tier <> 't0' GROUP BY tier;",
        ),
        sql_plan(
            "CREATE TABLE latest_per_tier AS SELECT \"user\", tier, since FROM tiers
             QUALIFY RANK() OVER (PARTITION BY tier ORDER BY since DESC) <= 1;",
        ),
        // Joins of tables: each user with its mentor (a foreign key: the
        // user `since` names), shown, aggregated and ranked; a mentor's
        // change reaches each of its mentees.
        sql_plan(
            "CREATE TABLE mentors AS SELECT a.\"user\", a.tier, m.tier AS mentor_tier, m.since AS mentor_since
             FROM tiers a LEFT JOIN tiers m ON 'u' || CAST(a.since % 4 AS VARCHAR) = m.\"user\"
             WHERE a.tier <> 't1';",
        ),
        sql_plan(
            "CREATE TABLE mentees_per_tier AS SELECT m.tier, COUNT(*) AS mentees, MAX(a.since) AS latest
             FROM tiers a JOIN tiers m ON 'u' || CAST(a.since % 4 AS VARCHAR) = m.\"user\"
             GROUP BY m.tier;",
        ),
        sql_plan(
            "CREATE TABLE newest_mentee AS SELECT a.\"user\", m.\"user\" AS mentor, a.since
             FROM tiers a JOIN tiers m ON 'u' || CAST(a.since % 4 AS VARCHAR) = m.\"user\"
             QUALIFY ROW_NUMBER() OVER (PARTITION BY m.tier ORDER BY a.since DESC) <= 1;",
        ),
    ]
}

/// What a top-N over `plan`'s inner rows must hold, recomputed naively
/// from `inner`, the rows the inner aggregate has alone as a view: each
/// partition's rows passing the outer `WHERE`, sorted, the first `limit`
/// (and, for `RANK`, those tied with the last), keyed as the inner rows.
fn naive_top(plan: &Plan, inner: &[Value]) -> Vec<Value> {
    use kappa_processor::accumulators::total_order;
    use kappa_processor::event::OutputRow;
    use std::collections::BTreeMap;
    let rows = plan.then.as_ref().unwrap();
    let top = rows.top.as_ref().unwrap();
    let mut partitions: BTreeMap<String, Vec<(Value, String, Value)>> = BTreeMap::new();
    for r in inner {
        let columns = r["row"].as_object().unwrap();
        let row = OutputRow { columns };
        if rows.filter.as_ref().is_some_and(|f| !f.is_true(&row)) {
            continue;
        }
        let part: Vec<Value> = top.partition_by.iter().map(|e| e.eval(&row)).collect();
        let key = match r["start"].as_i64() {
            Some(start) => json!([r["key"], start, r["end"]]).to_string(),
            None => r["key"].as_str().unwrap().to_string(),
        };
        let shown: serde_json::Map<String, Value> = rows
            .aggregate
            .aggregates
            .iter()
            .map(|a| (a.name.clone(), a.input.as_ref().unwrap().eval(&row)))
            .collect();
        partitions
            .entry(Value::Array(part).to_string())
            .or_default()
            .push((top.order_by.eval(&row), key, Value::Object(shown)));
    }
    let mut out = Vec::new();
    for mut members in partitions.into_values() {
        members.sort_by(|a, b| {
            let o = total_order(&a.0, &b.0);
            let o = if top.descending { o.reverse() } else { o };
            o.then_with(|| a.1.cmp(&b.1))
        });
        let limit = (top.limit as usize).min(members.len());
        let mut kept = limit;
        while top.ties
            && kept > 0
            && kept < members.len()
            && total_order(&members[kept].0, &members[limit - 1].0).is_eq()
        {
            kept += 1;
        }
        for (_, key, row) in members.into_iter().take(kept) {
            out.push(json!({"key": key, "start": null, "end": null, "row": row}));
        }
    }
    out.sort_by(|a, b| a["key"].as_str().cmp(&b["key"].as_str()));
    out
}

/// The rows of the table `tiers` (`tiers`: each user's latest record,
/// null when deleted), joined as `then` joins them, as view rows: a naive
/// join of the two tables as they ended.
fn naive_table_rows(
    then: &kappa_processor::plan::RowsAggregate,
    tiers: &std::collections::BTreeMap<String, Value>,
) -> Vec<Value> {
    use kappa_processor::event::OutputRow;
    let rows: std::collections::BTreeMap<&String, Value> = tiers
        .iter()
        .filter(|(_, value)| !value.is_null())
        .map(|(user, value)| {
            let mut row = value.clone();
            row["user"] = json!(user);
            (user, row)
        })
        .collect();
    let mut out = Vec::new();
    for (user, row) in &rows {
        let mut row = row.clone();
        if let Some(j) = &then.join {
            let joined_key = j.on.eval(&OutputRow {
                columns: row.as_object().unwrap(),
            });
            let joined = joined_key
                .as_str()
                .and_then(|k| rows.iter().find(|(u, _)| u.as_str() == k))
                .map(|(_, r)| r.clone());
            if joined.is_none() && j.kind == JoinKind::Inner {
                continue;
            }
            row[&j.alias] = joined.unwrap_or(Value::Null);
        }
        out.push(json!({"key": user, "start": null, "end": null, "row": row}));
    }
    out
}

/// What a query showing each of `plan`'s inner rows must hold: each row
/// passing the `WHERE`, its columns computed from it.
fn naive_each(plan: &Plan, inner: &[Value]) -> Vec<Value> {
    use kappa_processor::event::OutputRow;
    let rows = plan.then.as_ref().unwrap();
    let mut out = Vec::new();
    for r in inner {
        let columns = r["row"].as_object().unwrap();
        let row = OutputRow { columns };
        if rows.filter.as_ref().is_some_and(|f| !f.is_true(&row)) {
            continue;
        }
        let shown: serde_json::Map<String, Value> = rows
            .aggregate
            .aggregates
            .iter()
            .map(|a| (a.name.clone(), a.input.as_ref().unwrap().eval(&row)))
            .collect();
        out.push(json!({"key": r["key"], "start": null, "end": null, "row": shown}));
    }
    out
}

/// A plan from SQL over `buys` (the source the DSL plans read) or the
/// table `tiers`.
fn sql_plan(sql: &str) -> Plan {
    common::sql_plan_over(
        "CREATE STREAM buys (id BIGINT, \"user\" VARCHAR, amount BIGINT, ts BIGINT)
           WITH (KAFKA_TOPIC='buys', TIMESTAMP='ts', WATERMARK_DELAY='300 MILLISECONDS', IDLE_TIMEOUT='1 SECOND');
         CREATE TABLE tiers (\"user\" VARCHAR PRIMARY KEY, tier VARCHAR, since BIGINT)
           WITH (KAFKA_TOPIC='tiers');",
        sql,
    )
}

/// What an aggregate over `plan`'s inner rows (`plan.then`) must hold, by
/// recomputing it naively from `inner`, the rows the inner aggregate alone
/// has as a view: the rows passing the outer `WHERE`, grouped by the
/// outer's `GROUP BY`, each aggregate computed from all of a group's rows.
fn naive_outer(plan: &Plan, inner: &[Value]) -> Vec<Value> {
    use kappa_processor::accumulators::AggregateKind;
    use kappa_processor::event::OutputRow;
    use std::collections::BTreeMap;
    let rows = plan.then.as_ref().unwrap();
    let spec = &rows.aggregate;
    /// A group's values and its rows.
    type Group = (Vec<Value>, Vec<serde_json::Map<String, Value>>);
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for r in inner {
        let columns = r["row"].as_object().unwrap();
        let row = OutputRow { columns };
        if rows.filter.as_ref().is_some_and(|f| !f.is_true(&row)) {
            continue;
        }
        let group: Vec<Value> = spec.group_by.iter().map(|e| e.eval(&row)).collect();
        // The view key: a single string as itself, else JSON text.
        let key = match &group[..] {
            [Value::String(s)] => s.clone(),
            [v] => v.to_string(),
            many => Value::Array(many.to_vec()).to_string(),
        };
        groups
            .entry(key)
            .or_insert_with(|| (group, Vec::new()))
            .1
            .push(columns.clone());
    }
    let mut out = Vec::new();
    for (key, (group, members)) in groups {
        let mut row = serde_json::Map::new();
        for (name, source) in &spec.columns {
            let value = match source {
                kappa_processor::plan::ColumnSource::GroupKey(i) => group[*i].clone(),
                kappa_processor::plan::ColumnSource::Aggregate(i) => {
                    let a = &spec.aggregates[*i];
                    let inputs: Vec<Value> = members
                        .iter()
                        .map(|m| {
                            a.input
                                .as_ref()
                                .map_or(Value::Null, |e| e.eval(&OutputRow { columns: m }))
                        })
                        .filter(|v| a.kind == AggregateKind::CountAll || !v.is_null())
                        .collect();
                    let ints: Vec<i64> = inputs.iter().filter_map(Value::as_i64).collect();
                    match a.kind {
                        AggregateKind::CountAll | AggregateKind::Count => json!(inputs.len()),
                        AggregateKind::Sum => json!(ints.iter().sum::<i64>()),
                        AggregateKind::Max => json!(ints.iter().max()),
                        AggregateKind::Min => json!(ints.iter().min()),
                        AggregateKind::Avg => {
                            json!(ints.iter().sum::<i64>() as f64 / ints.len() as f64)
                        }
                        AggregateKind::CountDistinct => {
                            json!(ints.iter().collect::<std::collections::BTreeSet<_>>().len())
                        }
                        other => panic!("{other:?}"),
                    }
                }
                other => panic!("{other:?}"),
            };
            row.insert(name.clone(), value);
        }
        out.push(json!({"key": key, "start": null, "end": null, "row": row}));
    }
    out
}

/// `plan` with its join of `tiers` made a join of two streams: within
/// (1 s before, 0.5 s after), a grace period of 0.3 s, on the tier
/// change's record key, at its `since`.
fn stream_join(mut plan: Plan) -> Plan {
    let join = plan.join.as_mut().expect("a join");
    join.table_time = Some(vec!["since".into()]);
    join.within = Some(WithinSpec {
        before_ms: 1_000,
        after_ms: 500,
        grace_ms: 300,
        joined_key: Expr::Column(JOINED_KEY_COLUMN.into()),
        typed_fields: Vec::new(),
    });
    plan
}

struct World {
    _dir: tempfile::TempDir,
    time: ManualTime,
    log: Arc<Log>,
    store: Arc<Store>,
    io: tokio::runtime::Runtime,
}

impl World {
    fn new(partitions: u32, table_partitions: u32) -> World {
        let dir = tempfile::tempdir().unwrap();
        let time = ManualTime::new(1_700_000_000_000);
        let mut config = LogConfig::new(dir.path().join("log"));
        config.clock = Arc::new(AppendClock::with_source(time.source()));
        let log = Arc::new(Log::open(config).unwrap());
        let topic = |partitions| TopicConfig {
            partitions,
            fsync: FsyncPolicy::Never,
            retention_ms: None,
            ..Default::default()
        };
        log.create_topic("buys", topic(partitions)).unwrap();
        log.create_topic("tiers", topic(table_partitions)).unwrap();
        let store = Arc::new(Store::open(&dir.path().join("state")).unwrap());
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        World {
            _dir: dir,
            time,
            log,
            store,
            io,
        }
    }

    fn append(&self, topic: &str, partition: Option<u32>, key: String, value: Value) {
        self.append_batch(topic, partition, key, vec![value]);
    }

    /// Appends `values` as one batch (polls of 3 records often stop inside
    /// a batch of several).
    fn append_batch(&self, topic: &str, partition: Option<u32>, key: String, values: Vec<Value>) {
        let records = values
            .into_iter()
            .map(|value| ProduceRecord {
                partition,
                record: NewRecord {
                    key: Some(Bytes::from(key.clone())),
                    value: Bytes::from(value.to_string()),
                    timestamp: None,
                    headers: vec![],
                },
            })
            .collect();
        let t = self.log.topic(topic).unwrap();
        self.io.block_on(t.produce(records, None)).unwrap();
    }

    fn open(&self, plan: &Plan, version: u64, workers: usize) -> Runtime {
        let options = RunOptions {
            // Small polls: live runs stop in the middle of the input often.
            max_poll_records: 3,
            workers,
            ..RunOptions::default()
        };
        Runtime::open(
            plan.clone(),
            version,
            self.log.clone(),
            self.store.clone(),
            options,
        )
        .unwrap()
    }

    /// Polls until every input record the log is complete for is
    /// processed, of the stream and of the joined topic.
    fn drain(&self, rt: &mut Runtime) {
        let ends = |topic: &str| -> Vec<u64> {
            self.log
                .topic(topic)
                .unwrap()
                .partitions()
                .iter()
                .map(|p| p.end_offset())
                .collect()
        };
        let plan = rt.plan();
        let (ends, joined_ends) = (
            ends(&plan.source.topic),
            plan.joined_topics()
                .into_iter()
                .flat_map(ends)
                .collect::<Vec<u64>>(),
        );
        let done = |rt: &Runtime| {
            rt.positions() == ends.as_slice()
                && (rt.joined_positions().is_empty()
                    || rt.joined_positions() == joined_ends.as_slice())
        };
        for _ in 0..100_000 {
            rt.poll_once().unwrap();
            if done(rt) {
                break;
            }
        }
        assert!(done(rt), "did not reach the end");
        // Once more: the poll that reached the end may have stopped on its
        // budget, before moving log time to what the log is complete up to.
        rt.poll_once().unwrap();
        rt.commit().unwrap();
    }

    /// The version's rows and the counts that say what it dropped.
    fn outcome(&self, rt: &Runtime, name: &str, version: u64) -> (Vec<Value>, [u64; 4]) {
        let scope = Scope {
            name: name.to_string(),
            version,
        };
        let (rows, _) =
            view::query(&self.store, &scope, &ViewQuery::All, None, usize::MAX - 1).unwrap();
        let rows = rows
            .into_iter()
            .map(|r| json!({"key": r.key, "start": r.window_start, "end": r.window_end, "row": r.row}))
            .collect();
        let p = rt.progress().snapshot();
        (rows, [p.processed, p.late_dropped, p.duplicates, p.invalid])
    }
}

/// Runs `ops` live against every plan with `workers[0]` workers, then
/// replays each from earliest with `workers[1]` and with one; returns the
/// first disagreement.
fn live_equals_replay(
    partitions: u32,
    table_partitions: u32,
    ops: &[Op],
    workers: [usize; 2],
    plans: &[Plan],
) -> Result<(), String> {
    let world = World::new(partitions, table_partitions);
    let mut live: Vec<Runtime> = plans.iter().map(|p| world.open(p, 1, workers[0])).collect();
    // Each user's latest tier record (null: deleted).
    let mut tiers: std::collections::BTreeMap<String, Value> = Default::default();
    for op in ops {
        let now = world.time.get();
        match *op {
            Op::Event {
                partition,
                count,
                id,
                user,
                amount,
                skew,
            } => world.append_batch(
                "buys",
                Some(partition),
                format!("u{user}"),
                (0..count)
                    .map(|k| json!({"id": id + k, "user": format!("u{user}"), "amount": amount + k as i64, "ts": now + skew - 100 * k as i64}))
                    .collect(),
            ),
            Op::Tier { user, tier, skew } => {
                let value = match tier {
                    3 => Value::Null,
                    _ => json!({"tier": format!("t{tier}"), "since": now + skew}),
                };
                tiers.insert(format!("u{user}"), value.clone());
                world.append("tiers", None, format!("u{user}"), value);
            }
            Op::Gap(ms) => world.time.advance(ms),
            Op::Poll { commit } => {
                for rt in &mut live {
                    rt.poll_once().unwrap();
                    if commit {
                        rt.commit().unwrap();
                    }
                }
            }
            Op::Restart { workers } => {
                drop(live);
                live = plans.iter().map(|p| world.open(p, 1, workers)).collect();
            }
        }
    }
    // Counters are kept in memory: a restart starts them again.
    let restarted = ops.iter().any(|op| matches!(op, Op::Restart { .. }));
    // The last appends are complete once their millisecond has passed.
    world.time.advance(1);
    for (plan, rt) in plans.iter().zip(&mut live) {
        world.drain(rt);
        let mut replay = world.open(plan, 2, workers[1]);
        world.drain(&mut replay);
        let mut single = world.open(plan, 3, 1);
        world.drain(&mut single);
        let (live_rows, live_counts) = world.outcome(rt, &plan.name, 1);
        let (replay_rows, replay_counts) = world.outcome(&replay, &plan.name, 2);
        let (single_rows, single_counts) = world.outcome(&single, &plan.name, 3);
        if live_rows != replay_rows || (!restarted && live_counts != replay_counts) {
            return Err(format!(
                "{}: live ({} workers) {live_counts:?} {live_rows:#?}\nreplay ({} workers) {replay_counts:?} {replay_rows:#?}",
                plan.name, workers[0], workers[1]
            ));
        }
        if let Some(then) = &plan.then {
            // The outer rows equal a naive aggregate over the inner rows:
            // a table's latest rows, or the rows the inner aggregate has
            // alone as a view.
            let inner_rows = match plan.reads_table_rows() {
                true => naive_table_rows(then, &tiers),
                false => {
                    let inner_plan = Plan {
                        name: format!("{}_inner", plan.name),
                        then: None,
                        ..plan.clone()
                    };
                    let mut inner = world.open(&inner_plan, 1, 1);
                    world.drain(&mut inner);
                    world.outcome(&inner, &inner_plan.name, 1).0
                }
            };
            let expected = match then.top {
                Some(_) => naive_top(plan, &inner_rows),
                None if then.each_row => naive_each(plan, &inner_rows),
                None => naive_outer(plan, &inner_rows),
            };
            if replay_rows != expected {
                return Err(format!(
                    "{}: replay {replay_rows:#?}\nnaive over the inner rows {expected:#?}\ninner {inner_rows:#?}",
                    plan.name
                ));
            }
        }
        if replay_rows != single_rows || replay_counts != single_counts {
            return Err(format!(
                "{}: replay ({} workers) {replay_counts:?} {replay_rows:#?}\none thread {single_counts:?} {single_rows:#?}",
                plan.name, workers[1]
            ));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]
    #[test]
    fn a_replay_from_earliest_equals_the_live_run(
        (partitions, ops) in (2u32..=4).prop_flat_map(|p| (Just(p), ops(p))),
        table_partitions in 1u32..=2,
        live_workers in workers(),
        replay_workers in workers(),
    ) {
        if let Err(e) = live_equals_replay(partitions, table_partitions, &ops, [live_workers, replay_workers], &plans()) {
            prop_assert!(false, "{}", e);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]
    #[test]
    fn a_replay_of_a_query_over_rows_equals_the_live_run_and_a_naive_recomputation(
        (partitions, ops) in (2u32..=4).prop_flat_map(|p| (Just(p), ops(p))),
        live_workers in workers(),
        replay_workers in workers(),
    ) {
        if let Err(e) = live_equals_replay(partitions, 1, &ops, [live_workers, replay_workers], &row_plans()) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// The idle scenario, spelled out: partition 1 is silent for
/// seconds of log time while partition 0 moves on, then gets an event
/// older than the watermark partition 0 alone made. Live, partition 1 was
/// idle, so the event is late; the replay judges idleness on the same
/// append times and drops it too (on the wall clock a replay reads both
/// partitions at full speed and counted it).
#[test]
fn an_event_on_a_partition_idle_in_log_time_is_late_in_the_replay_too() {
    let world = World::new(2, 1);
    let plan = plans().remove(0);
    let mut live = world.open(&plan, 1, 1);
    let event = |partition: u32, ts: i64| {
        world.append(
            "buys",
            Some(partition),
            "u1".into(),
            json!({"user": "u1", "amount": 10, "ts": ts}),
        )
    };
    let t0 = world.time.get();
    event(0, t0);
    event(1, t0);
    world.time.advance(3_000);
    event(0, t0 + 10_000);
    world.time.advance(100);
    event(1, t0 + 100);
    world.time.advance(1);
    world.drain(&mut live);
    let mut replay = world.open(&plan, 2, 2);
    world.drain(&mut replay);
    let (live_rows, live_counts) = world.outcome(&live, &plan.name, 1);
    let (replay_rows, replay_counts) = world.outcome(&replay, &plan.name, 2);
    assert_eq!(live_counts, [4, 1, 0, 0], "the last event was late live");
    assert_eq!((replay_rows, replay_counts), (live_rows, live_counts));
}
