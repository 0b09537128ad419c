//! Views over a compacted topic (issue 40): a table's rows are the latest
//! record of each key, which is exactly what compaction keeps, so a view
//! over a table — its rows aggregated, ranked, or joined with another
//! table's — is the same whether its topic was compacted or not: built
//! live across compaction passes, replayed from scratch over the
//! compacted topic, and built over the uncompacted history. (A reader
//! that falls further behind than `delete_retention_ms` may miss a
//! deletion whose tombstone went meanwhile, as in Kafka.)
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use bytes::Bytes;
use common::{Harness, Lcg};
use kappa_log::{AppendRequest, CleanupPolicy, FsyncPolicy, NewRecord, TopicConfig};
use kappa_processor::plan::Plan;
use kappa_processor::runner::RunOptions;

const DAY: i64 = 24 * 3_600_000;

/// A plan from SQL over the table `tiers`.
fn sql_plan(sql: &str) -> Plan {
    common::sql_plan_over(
        "CREATE TABLE tiers (\"user\" VARCHAR PRIMARY KEY, tier VARCHAR, since BIGINT)
           WITH (KAFKA_TOPIC='tiers');",
        sql,
    )
}

fn plans() -> Vec<Plan> {
    vec![
        sql_plan(
            "CREATE TABLE users_per_tier AS SELECT tier, COUNT(*) AS users, SUM(since) AS since,
               MAX(since) AS latest FROM tiers GROUP BY tier;",
        ),
        sql_plan(
            "CREATE TABLE latest_per_tier AS SELECT \"user\", tier, since FROM tiers
             QUALIFY RANK() OVER (PARTITION BY tier ORDER BY since DESC) <= 1;",
        ),
        sql_plan(
            "CREATE TABLE mentors AS SELECT a.\"user\", a.tier, m.tier AS mentor_tier
             FROM tiers a LEFT JOIN tiers m ON 'u' || CAST(a.since % 4 AS VARCHAR) = m.\"user\";",
        ),
    ]
}

/// Tier changes of 30 users, one in nine a deletion (an empty value),
/// from `seed`.
fn history(seed: u64, n: usize) -> Vec<NewRecord> {
    let mut rng = Lcg(seed);
    (0..n)
        .map(|i| {
            let user = format!("u{}", rng.next(30));
            let value = if rng.next(9) == 0 {
                Bytes::new()
            } else {
                Bytes::from(format!(r#"{{"tier":"t{}","since":{i}}}"#, rng.next(5)))
            };
            NewRecord {
                key: Some(Bytes::from(user)),
                value,
                timestamp: Some(1_000 + i as i64),
                headers: vec![],
            }
        })
        .collect()
}

fn harness(policy: CleanupPolicy) -> Harness {
    let h = Harness::new();
    let config = TopicConfig {
        segment_bytes: 1024,
        fsync: FsyncPolicy::Never,
        cleanup_policy: policy,
        ..Default::default()
    };
    h.log.create_topic("tiers", config).unwrap();
    h
}

fn append(h: &Harness, records: &[NewRecord]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let topic = h.log.topic("tiers").unwrap();
    for chunk in records.chunks(4) {
        rt.block_on(topic.partition(0).unwrap().append(AppendRequest {
            records: chunk.to_vec(),
            idempotency_key: None,
            as_sent: None,
        }))
        .unwrap();
    }
}

/// Records stored in `tiers`.
fn stored(h: &Harness) -> u64 {
    let p = h.log.topic("tiers").unwrap();
    let p = p.partition(0).unwrap();
    p.read(p.start_offset(), u64::MAX, u64::MAX)
        .unwrap()
        .records()
        .count() as u64
}

fn build(h: &Harness, plan: &Plan) {
    let mut rt = h.open_runtime(plan, RunOptions::default());
    h.run_to_end(&mut rt, plan);
}

#[test]
fn a_view_over_a_compacted_table_equals_one_over_its_whole_history() {
    let records = history(7, 600);
    let (first, rest) = records.split_at(400);

    let full = harness(CleanupPolicy::Delete);
    append(&full, &records);

    let compacted = harness(CleanupPolicy::Compact);
    append(&compacted, first);
    let plans = plans();
    for plan in &plans {
        build(&compacted, plan);
    }
    // Past the idempotency window and every tombstone's day.
    let outcome = compacted
        .log
        .compact(kappa_log::now_ms() + 2 * DAY)
        .unwrap();
    assert!(outcome.records_removed > 200, "{outcome:?}");
    append(&compacted, rest);
    // Live across the passes: the rest read after the first one, before
    // the second (a reader must keep within `delete_retention_ms` of the
    // head to see every deletion, as in Kafka).
    for plan in &plans {
        build(&compacted, plan);
    }
    compacted
        .log
        .compact(kappa_log::now_ms() + 4 * DAY)
        .unwrap();
    let (kept, all) = (stored(&compacted), stored(&full));
    assert!(kept < all / 2, "compaction kept {kept} of {all} records");

    for plan in &plans {
        build(&full, plan);
        let replay = Plan {
            name: format!("{}_replayed", plan.name),
            ..plan.clone()
        };
        build(&compacted, &replay);
        let expected = full.view_rows(plan);
        assert!(!expected.is_empty(), "{}", plan.name);
        assert_eq!(
            compacted.view_rows(plan),
            expected,
            "{}: built live across compaction",
            plan.name
        );
        assert_eq!(
            compacted.view_rows(&replay),
            expected,
            "{}: replayed over the compacted topic",
            plan.name
        );
    }
}
