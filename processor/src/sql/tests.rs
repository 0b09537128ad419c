//! Statements that must parse and plan: the product brief's examples
//! verbatim, then each feature of the dialect.

use serde_json::json;

use super::*;
use crate::accumulators::AggregateKind;
use crate::expr::{BinaryOp, DataType, Expr, Function};
use crate::plan::{
    AggregateColumn, AggregateSpec, ColumnSource, DedupSpec, Emit, EventTime, JoinKind, JoinSpec,
    LateHandling, Operation, Plan, Sink, SourceSpec, WindowedSpec,
};
use crate::view::{ViewQuery, ViewRow};
use crate::window::WindowSpec;

use super::brief::{HIGH_VALUE_ALERTS as HIGH_VALUE, PURCHASE_STATS, USER_EVENTS};

const USERS: &str = "CREATE TABLE users (id VARCHAR PRIMARY KEY, name VARCHAR, tier VARCHAR)
  WITH (TOPIC='users');";

fn f(name: &str) -> Expr {
    Expr::Field(vec![name.to_string()])
}

fn lit(v: serde_json::Value) -> Expr {
    Expr::Literal(v)
}

fn bin(op: BinaryOp, l: Expr, r: Expr) -> Expr {
    Expr::Binary(op, Box::new(l), Box::new(r))
}

fn one(sql: &str) -> Statement {
    let mut all = parse(sql).unwrap_or_else(|e| panic!("{sql}\n{e}"));
    assert_eq!(all.len(), 1, "{sql}");
    all.remove(0)
}

fn source(sql: &str) -> SourceDecl {
    match one(sql) {
        Statement::CreateSource(d) => d,
        other => panic!("not a source: {other:?}"),
    }
}

fn create_as(sql: &str) -> CreateAs {
    match one(sql) {
        Statement::CreateAs(c) => c,
        other => panic!("not CREATE AS: {other:?}"),
    }
}

const TIERS: &str = "CREATE TABLE tiers (tier VARCHAR PRIMARY KEY, name VARCHAR, rank BIGINT)
  WITH (TOPIC='tiers');";

const CLICKS: &str = "CREATE STREAM clicks (user_id VARCHAR KEY, page VARCHAR, at BIGINT)
  WITH (TOPIC='clicks', TIMESTAMP='at');";

fn catalog() -> Vec<SourceDecl> {
    vec![
        source(USER_EVENTS),
        source(USERS),
        source(CLICKS),
        source(TIERS),
    ]
}

fn plan_sql(sql: &str) -> Plan {
    let c = create_as(sql);
    let p = plan(&c, &catalog()).unwrap_or_else(|e| panic!("{sql}\n{e}"));
    p.validate().expect("valid plan");
    p
}

fn plan_err(sql: &str) -> SqlError {
    let c = create_as(sql);
    plan(&c, &catalog()).expect_err(sql)
}

fn default_source(topic: &str) -> SourceSpec {
    SourceSpec {
        topic: topic.into(),
        cluster: None,
        event_time: EventTime::RecordTimestamp,
        out_of_orderness_ms: defaults::WATERMARK_DELAY_MS,
        idle_timeout_ms: defaults::IDLE_TIMEOUT_MS,
        max_future_ms: defaults::MAX_FUTURE_MS,
        typed_fields: match topic {
            "user_events" => vec![
                ("user_id".into(), crate::expr::DataType::String),
                ("event_type".into(), crate::expr::DataType::String),
                (
                    "amount".into(),
                    crate::expr::DataType::Decimal {
                        precision: 10,
                        scale: 2,
                    },
                ),
                ("event_time".into(), crate::expr::DataType::Timestamp),
            ],
            _ => Vec::new(),
        },
    }
}

fn project(p: &Plan) -> &[(String, Expr)] {
    match &p.operation {
        Operation::Project { columns } => columns,
        other => panic!("not a projection: {other:?}"),
    }
}

fn aggregate(p: &Plan) -> &AggregateSpec {
    match &p.operation {
        Operation::Aggregate(a) => a,
        other => panic!("not an aggregate: {other:?}"),
    }
}

#[test]
fn brief_user_events_declares_a_stream() {
    let d = source(USER_EVENTS);
    assert_eq!(d.name, "user_events");
    assert_eq!(d.kind, ObjectKind::Stream);
    assert_eq!(d.topic, "user_events");
    assert_eq!(d.value_format, "JSON");
    assert_eq!(d.timestamp, None);
    assert_eq!(d.watermark_delay_ms, defaults::WATERMARK_DELAY_MS);
    assert_eq!(d.partitions, None);
    let cols: Vec<(&str, SqlType)> = d
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.sql_type))
        .collect();
    assert_eq!(
        cols,
        vec![
            ("user_id", SqlType::Varchar),
            ("event_type", SqlType::Varchar),
            (
                "amount",
                SqlType::Decimal {
                    precision: 10,
                    scale: 2
                }
            ),
            ("event_time", SqlType::Timestamp),
        ]
    );
    assert!(d.columns.iter().all(|c| !c.key));
    assert!(
        d.sql.starts_with("CREATE STREAM user_events (") && d.sql.ends_with("VALUE_FORMAT='JSON')")
    );
    let text = serde_json::to_string(&d).unwrap();
    assert_eq!(serde_json::from_str::<SourceDecl>(&text).unwrap(), d);
}

#[test]
fn brief_purchase_stats_plans_a_tumbling_aggregate_into_a_view() {
    let c = create_as(PURCHASE_STATS);
    assert_eq!(
        (c.name.as_str(), c.kind, c.or_replace),
        ("purchase_stats", ObjectKind::Table, false)
    );
    assert_eq!(c.sources, vec!["user_events".to_string()]);
    assert!(c.sql.starts_with("CREATE TABLE purchase_stats AS") && c.sql.ends_with("EMIT CHANGES"));
    let text = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<CreateAs>(&text).unwrap(), c);
    let p = plan_sql(PURCHASE_STATS);
    let want = Plan {
        name: "purchase_stats".into(),
        source: default_source("user_events"),
        dedup: None,
        join: None,
        more_joins: Vec::new(),
        filter: Some(bin(BinaryOp::Eq, f("event_type"), lit(json!("purchase")))),
        operation: Operation::Aggregate(AggregateSpec {
            group_by: vec![f("user_id")],
            window: Some(WindowedSpec {
                window: WindowSpec::Tumbling { size_ms: 300_000 },
                grace_ms: defaults::GRACE_MS,
                retention_ms: None,
                emit: Emit::Changes,
            }),
            aggregates: vec![
                AggregateColumn {
                    name: "purchase_count".into(),
                    kind: AggregateKind::CountAll,
                    input: None,
                },
                AggregateColumn {
                    name: "total_amount".into(),
                    // amount is DECIMAL(10,2): summed exactly.
                    kind: AggregateKind::SumDecimal { scale: 2 },
                    input: Some(f("amount")),
                },
                AggregateColumn {
                    name: "avg_amount".into(),
                    kind: AggregateKind::AvgDecimal { scale: 2 },
                    input: Some(f("amount")),
                },
            ],
            columns: vec![
                ("user_id".into(), ColumnSource::GroupKey(0)),
                ("window_start".into(), ColumnSource::WindowStart),
                ("window_end".into(), ColumnSource::WindowEnd),
                ("purchase_count".into(), ColumnSource::Aggregate(0)),
                ("total_amount".into(), ColumnSource::Aggregate(1)),
                ("avg_amount".into(), ColumnSource::Aggregate(2)),
            ],
            having: None,
        }),
        sink: Sink::View,
        late: LateHandling::Drop,
        sink_cluster: None,
        partition_by: None,
        spread_stage: None,
        then: None,
    };
    assert_eq!(p, want);
}

#[test]
fn brief_high_value_alerts_plans_a_filtered_projection_into_a_topic() {
    let p = plan_sql(HIGH_VALUE);
    let want = Plan {
        name: "high_value_alerts".into(),
        source: default_source("user_events"),
        dedup: None,
        join: None,
        more_joins: Vec::new(),
        filter: Some(bin(
            BinaryOp::And,
            bin(BinaryOp::Eq, f("event_type"), lit(json!("purchase"))),
            bin(BinaryOp::Gt, f("amount"), lit(json!(100000))),
        )),
        operation: Operation::Project {
            columns: ["user_id", "event_type", "amount", "event_time"]
                .iter()
                .map(|c| (c.to_string(), f(c)))
                .collect(),
        },
        sink: Sink::Topic("high_value_alerts".into()),
        late: LateHandling::Drop,
        sink_cluster: None,
        partition_by: None,
        spread_stage: None,
        then: None,
    };
    assert_eq!(p, want);
}

#[test]
fn brief_statements_parse_together_in_one_request() {
    let all = parse(&format!(
        "{USER_EVENTS}\n\n{PURCHASE_STATS}\n\n{HIGH_VALUE}"
    ))
    .unwrap();
    assert_eq!(all.len(), 3);
    assert!(matches!(all[0], Statement::CreateSource(_)));
    let Statement::CreateAs(c) = &all[2] else {
        panic!()
    };
    // The third statement starts on line 14 of the combined text.
    assert_eq!((c.line, c.column), (14, 1));
    assert!(plan(c, &catalog()).is_ok());
}

#[test]
fn brief_sql_is_the_three_statements_in_order() {
    let all = parse(super::brief::SQL).unwrap();
    let texts: Vec<String> = all
        .iter()
        .map(|s| match s {
            Statement::CreateSource(d) => d.sql.clone(),
            Statement::CreateAs(c) => c.sql.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    let want: Vec<&str> = [USER_EVENTS, PURCHASE_STATS, HIGH_VALUE]
        .iter()
        .map(|s| s.strip_suffix(';').unwrap())
        .collect();
    assert_eq!(texts, want);
}

#[test]
fn compression_names_how_a_derived_streams_topic_is_stored() {
    let c = create_as("CREATE STREAM c WITH (COMPRESSION='ZSTD') AS SELECT id FROM clicks");
    assert_eq!(c.compression, Some(kappa_log::Compression::Zstd));
    let c = create_as("CREATE STREAM c WITH (compression='none') AS SELECT id FROM clicks");
    assert_eq!(c.compression, Some(kappa_log::Compression::None));
    // Unsaid, the topic gets the server's topic defaults.
    let c = create_as("CREATE STREAM c AS SELECT id FROM clicks");
    assert_eq!(c.compression, None);
}

#[test]
fn with_properties_timestamp_watermark_idle_partitions() {
    let d = source(
        "create stream Clicks (Ts BIGINT, url STRING, id VARCHAR KEY) with (topic='clicks', timestamp='ts', \
         watermark_delay='2 seconds', idle_timeout='1 MINUTE', partitions=4, replicas=1, key_format='KAFKA')",
    );
    assert_eq!(d.name, "clicks");
    assert_eq!(d.timestamp.as_deref(), Some("Ts"));
    assert_eq!(d.watermark_delay_ms, 2_000);
    assert_eq!(d.idle_timeout_ms, 60_000);
    assert_eq!(d.partitions, Some(4));
    assert_eq!(d.key_column().map(|c| c.name.as_str()), Some("id"));
    let cat = vec![d];
    let c = create_as("CREATE STREAM c2 WITH (KAFKA_TOPIC='out', WATERMARK_DELAY=250) AS SELECT id, URL FROM clicks");
    let p = plan(&c, &cat).unwrap();
    assert_eq!(p.source.event_time, EventTime::Field(vec!["Ts".into()]));
    assert_eq!(p.source.out_of_orderness_ms, 250);
    assert_eq!(p.source.idle_timeout_ms, 60_000);
    assert_eq!(p.sink, Sink::Topic("out".into()));
    assert_eq!(
        project(&p),
        &[("id".to_string(), Expr::Key), ("url".to_string(), f("url"))]
    );
}

#[test]
fn durations_take_every_unit_singular_or_plural() {
    for (text, ms) in [
        ("1 MILLISECOND", 1),
        ("7 milliseconds", 7),
        ("1 second", 1_000),
        ("3 SECONDS", 3_000),
        ("1 minute", 60_000),
        ("2 Minutes", 120_000),
        ("1 HOUR", 3_600_000),
        ("2 hours", 7_200_000),
        ("1 DAY", 86_400_000),
        ("2 days", 172_800_000),
    ] {
        assert_eq!(ksql::parse_duration_text(text), Some(ms), "{text}");
    }
    assert_eq!(ksql::parse_duration_text("5 FORTNIGHTS"), None);
    assert_eq!(ksql::parse_duration_text("-5 SECONDS"), None);
    assert_eq!(ksql::parse_duration_text("99999999999999 DAYS"), None);
}

#[test]
fn hopping_and_session_windows_with_grace_and_emit_final() {
    let p = plan_sql(
        "CREATE TABLE h AS SELECT user_id, COUNT(*) AS n FROM user_events \
         WINDOW HOPPING (SIZE 10 MINUTES, ADVANCE BY 1 MINUTE, GRACE PERIOD 30 SECONDS) \
         GROUP BY user_id EMIT FINAL",
    );
    let w = aggregate(&p).window.clone().unwrap();
    assert_eq!(
        w.window,
        WindowSpec::Hopping {
            size_ms: 600_000,
            advance_ms: 60_000
        }
    );
    assert_eq!((w.grace_ms, w.emit), (30_000, Emit::Final));
    let p = plan_sql(
        "CREATE TABLE s AS SELECT user_id, WINDOWSTART, WINDOWEND, MAX(amount) AS top \
         FROM user_events WINDOW SESSION (5 MINUTES) GROUP BY user_id",
    );
    let a = aggregate(&p);
    assert_eq!(
        a.window.as_ref().unwrap().window,
        WindowSpec::Session { gap_ms: 300_000 }
    );
    assert_eq!(a.window.as_ref().unwrap().emit, Emit::Changes);
    let names: Vec<&str> = a.columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["user_id", "WINDOWSTART", "WINDOWEND", "top"]);
    let p = plan_sql(
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS n FROM user_events \
         WINDOW TUMBLING (SIZE 1 HOUR, GRACE PERIOD 10 MINUTES) GROUP BY user_id",
    );
    assert_eq!(aggregate(&p).window.as_ref().unwrap().grace_ms, 600_000);
    assert_eq!(aggregate(&p).window.as_ref().unwrap().retention_ms, None);
    let p = plan_sql(
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS n FROM user_events \
         WINDOW TUMBLING (SIZE 1 HOUR, RETENTION 7 DAYS, GRACE PERIOD 10 MINUTES) GROUP BY user_id",
    );
    let w = aggregate(&p).window.clone().unwrap();
    assert_eq!(
        (w.grace_ms, w.retention_ms),
        (600_000, Some(7 * 86_400_000))
    );
}

#[test]
fn every_aggregate_kind_and_running_aggregates() {
    let p = plan_sql(
        "CREATE TABLE k AS SELECT event_type, COUNT(*) AS a, COUNT(user_id) AS b, SUM(amount) AS c, \
         AVG(amount) AS d, MIN(amount) AS e, MAX(amount) AS f, COUNT_DISTINCT(user_id) AS g, \
         COUNT(DISTINCT user_id) AS h, LATEST_BY_OFFSET(amount) AS i, EARLIEST_BY_OFFSET(amount) AS j \
         FROM user_events GROUP BY event_type",
    );
    let a = aggregate(&p);
    assert!(a.window.is_none());
    let kinds: Vec<AggregateKind> = a.aggregates.iter().map(|x| x.kind).collect();
    use AggregateKind::*;
    assert_eq!(
        kinds,
        [
            CountAll,
            Count,
            SumDecimal { scale: 2 },
            AvgDecimal { scale: 2 },
            Min,
            Max,
            CountDistinct,
            CountDistinct,
            Latest,
            Earliest
        ]
    );
    // A global aggregate: no GROUP BY.
    let p = plan_sql("CREATE TABLE total AS SELECT COUNT(*) FROM user_events");
    let a = aggregate(&p);
    assert!(a.group_by.is_empty());
    assert_eq!(
        a.columns,
        vec![("KSQL_COL_0".to_string(), ColumnSource::Aggregate(0))]
    );
}

#[test]
fn expressions_over_aggregates_read_hidden_and_selected_aggregates() {
    let p = plan_sql(
        "CREATE TABLE x AS SELECT user_id, SUM(amount) / COUNT(*) AS mean, \
           COUNT(*) AS n, UPPER(user_id) || ':' || WINDOWSTART AS label, MAX(amount) - MIN(amount) AS spread \
         FROM user_events WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user_id",
    );
    let a = aggregate(&p);
    let names: Vec<&str> = a.aggregates.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["#agg0", "#agg1", "#agg2", "#agg3"]);
    let col = |n: &str| Expr::Column(n.to_string());
    assert_eq!(
        a.columns,
        vec![
            ("user_id".to_string(), ColumnSource::GroupKey(0)),
            (
                "mean".to_string(),
                ColumnSource::Computed(bin(BinaryOp::Div, col("#agg0"), col("#agg1")))
            ),
            // The hidden COUNT(*) the expression made, selected.
            ("n".to_string(), ColumnSource::Aggregate(1)),
            (
                "label".to_string(),
                ColumnSource::Computed(bin(
                    BinaryOp::Concat,
                    bin(
                        BinaryOp::Concat,
                        Expr::Function(Function::Upper, vec![col("#key0")]),
                        lit(json!(":"))
                    ),
                    col("#window_start")
                ))
            ),
            (
                "spread".to_string(),
                ColumnSource::Computed(bin(BinaryOp::Sub, col("#agg2"), col("#agg3")))
            ),
        ]
    );
    p.validate().unwrap();
}

#[test]
fn having_reads_aggregates_and_group_columns_not_selected_as_hidden_inputs() {
    let p = plan_sql(
        "CREATE TABLE x AS SELECT COUNT(*) AS n FROM user_events \
         GROUP BY user_id HAVING SUM(amount) > 10 AND user_id <> 'bot' AND COUNT(*) > 1",
    );
    let a = aggregate(&p);
    let names: Vec<&str> = a.aggregates.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["n", "#agg1"]);
    let col = |n: &str| Expr::Column(n.to_string());
    assert_eq!(
        a.having,
        Some(bin(
            BinaryOp::And,
            bin(
                BinaryOp::And,
                bin(BinaryOp::Gt, col("#agg1"), lit(json!(10))),
                bin(BinaryOp::NotEq, col("#key0"), lit(json!("bot")))
            ),
            bin(BinaryOp::Gt, col("n"), lit(json!(1)))
        ))
    );
    assert_eq!(
        a.columns,
        vec![("n".to_string(), ColumnSource::Aggregate(0))]
    );
    p.validate().unwrap();
}

#[test]
fn partition_by_keys_a_derived_streams_records() {
    let p = plan_sql(
        "CREATE STREAM by_kind AS SELECT user_id, amount FROM user_events \
         WHERE amount > 1 PARTITION BY UPPER(event_type) EMIT CHANGES",
    );
    assert_eq!(
        p.partition_by,
        Some(Expr::Function(Function::Upper, vec![f("event_type")]))
    );
    assert_eq!(
        p.filter,
        Some(bin(BinaryOp::Gt, f("amount"), lit(json!(1))))
    );
    let p = plan_sql("CREATE STREAM same AS SELECT * FROM user_events");
    assert_eq!(p.partition_by, None);
}

#[test]
fn having_reads_output_columns() {
    let p = plan_sql(
        "CREATE TABLE big AS SELECT user_id, COUNT(*) AS n, SUM(amount) AS total FROM user_events \
         GROUP BY user_id HAVING COUNT(*) > 2 AND total >= 10 AND user_id <> 'bot'",
    );
    let want = bin(
        BinaryOp::And,
        bin(
            BinaryOp::And,
            bin(BinaryOp::Gt, Expr::Column("n".into()), lit(json!(2))),
            bin(BinaryOp::GtEq, Expr::Column("total".into()), lit(json!(10))),
        ),
        bin(
            BinaryOp::NotEq,
            Expr::Column("user_id".into()),
            lit(json!("bot")),
        ),
    );
    assert_eq!(aggregate(&p).having, Some(want));
}

#[test]
fn expressions_translate_to_expr_trees() {
    let p = plan_sql(
        "CREATE STREAM x AS SELECT \
           amount * 2 + 1 AS a, \
           CASE WHEN amount > 10 THEN 'big' ELSE 'small' END AS b, \
           CAST(amount AS DOUBLE) AS c, \
           UPPER(user_id) AS d, \
           user_id || '-' || event_type AS e, \
           COALESCE(amount, 0) AS g, \
           -5 AS h, \
           SUBSTRING(user_id, 2, 3) AS i, \
           ROWKEY AS k, ROWTIME AS t, MOD(amount, 123) AS m \
         FROM user_events \
         WHERE NOT (user_id IS NULL) AND event_type IN ('a', 'b') AND amount BETWEEN 1 AND 5 \
           AND user_id LIKE 'u%' AND event_type NOT IN ('c') AND amount IS NOT NULL OR amount <= 0",
    );
    let cols = project(&p);
    assert_eq!(
        cols[0].1,
        bin(
            BinaryOp::Add,
            bin(BinaryOp::Mul, f("amount"), lit(json!(2))),
            lit(json!(1))
        )
    );
    assert_eq!(
        cols[1].1,
        Expr::Case {
            operand: None,
            branches: vec![(
                bin(BinaryOp::Gt, f("amount"), lit(json!(10))),
                lit(json!("big"))
            )],
            otherwise: Some(Box::new(lit(json!("small")))),
        }
    );
    assert_eq!(
        cols[2].1,
        Expr::Cast(Box::new(f("amount")), DataType::Double)
    );
    assert_eq!(
        cols[3].1,
        Expr::Function(Function::Upper, vec![f("user_id")])
    );
    assert_eq!(
        cols[10],
        (
            "m".to_string(),
            bin(BinaryOp::Mod, f("amount"), lit(json!(123)))
        )
    );
    assert_eq!(
        cols[4].1,
        bin(
            BinaryOp::Concat,
            bin(BinaryOp::Concat, f("user_id"), lit(json!("-"))),
            f("event_type")
        )
    );
    assert_eq!(
        cols[5].1,
        Expr::Function(Function::Coalesce, vec![f("amount"), lit(json!(0))])
    );
    assert_eq!(cols[6].1, lit(json!(-5)));
    assert_eq!(
        cols[7].1,
        Expr::Function(
            Function::Substring,
            vec![f("user_id"), lit(json!(2)), lit(json!(3))]
        )
    );
    assert_eq!(cols[8].1, Expr::Key);
    assert_eq!(cols[9].1, Expr::RecordTimestamp);
    let filter = p.filter.unwrap();
    let fields = filter.fields();
    assert!(
        fields.contains(&vec!["user_id".to_string()])
            && fields.contains(&vec!["amount".to_string()])
    );
    let Expr::Binary(BinaryOp::Or, _, _) = filter else {
        panic!("OR binds loosest: {filter:?}")
    };
}

#[test]
fn identifiers_are_case_insensitive_unless_quoted() {
    let p = plan_sql("create stream Loud as select USER_ID, Amount AS \"Amt\" from USER_EVENTS where EVENT_TYPE = 'x'");
    assert_eq!(p.name, "loud");
    assert_eq!(p.sink, Sink::Topic("loud".into()));
    assert_eq!(
        project(&p),
        &[
            ("user_id".to_string(), f("user_id")),
            ("Amt".to_string(), f("amount"))
        ]
    );
    let quoted = plan_err("CREATE STREAM q AS SELECT \"USER_ID\" FROM user_events");
    assert!(
        quoted.message.contains("unknown column 'USER_ID'"),
        "{quoted}"
    );
    let ok = plan_sql("CREATE STREAM q AS SELECT \"user_id\", `event_type` FROM user_events");
    assert_eq!(project(&ok).len(), 2);
}

#[test]
fn schemaless_streams_read_fields_as_written_and_reject_star() {
    let raw = source("CREATE STREAM raw WITH (KAFKA_TOPIC='raw')");
    assert!(raw.columns.is_empty());
    let cat = vec![raw];
    let c = create_as("CREATE STREAM r2 AS SELECT userId, payload.items.first_item AS first FROM raw WHERE Kind = 'x'");
    let p = plan(&c, &cat).unwrap();
    assert_eq!(project(&p)[0], ("userId".to_string(), f("userId")));
    assert_eq!(
        project(&p)[1].1,
        Expr::Field(vec!["payload".into(), "items".into(), "first_item".into()])
    );
    let c = create_as("CREATE STREAM r3 AS SELECT * FROM raw");
    let e = plan(&c, &cat).unwrap_err();
    assert!(e.message.contains("SELECT * needs declared columns"), "{e}");
}

#[test]
fn stream_stream_joins_within_a_time_bound() {
    let p = plan_sql(
        "CREATE STREAM x AS SELECT e.user_id, c.page, c.user_id AS clicker \
         FROM user_events e LEFT JOIN clicks c WITHIN (1 HOUR, 10 MINUTES) GRACE PERIOD 5 MINUTES \
         ON e.user_id = c.user_id WHERE c.page <> 'home'",
    );
    let joined_key = Expr::Column(crate::event::JOINED_KEY_COLUMN.into());
    assert_eq!(
        p.join,
        Some(JoinSpec {
            table_topic: "clicks".into(),
            stream_key: f("user_id"),
            alias: "c".into(),
            kind: JoinKind::Left,
            table_time: Some(vec!["at".into()]),
            history_ms: None,
            within: Some(crate::plan::WithinSpec {
                before_ms: 3_600_000,
                after_ms: 600_000,
                grace_ms: 300_000,
                joined_key: joined_key.clone(),
                typed_fields: vec![
                    ("page".into(), DataType::String),
                    ("at".into(), DataType::Integer),
                ],
            }),
        })
    );
    let cols = project(&p);
    assert_eq!(cols[1].1, Expr::Field(vec!["c".into(), "page".into()]));
    assert_eq!(cols[2].1, joined_key);
    // The joined stream's values are decoded for its time and the column read.
    assert_eq!(
        p.joined_fields(),
        Some(vec!["at".to_string(), "page".to_string()])
    );
    // Either side of ON may come first; FULL joins two streams; WITHIN d
    // is both bounds, and the grace defaults to a window's.
    let p = plan_sql(
        "CREATE STREAM x AS SELECT * FROM user_events e FULL OUTER JOIN clicks c WITHIN 2 SECONDS \
         ON c.page = e.event_type",
    );
    let j = p.join.unwrap();
    assert_eq!((j.kind, j.stream_key), (JoinKind::Full, f("event_type")));
    let w = j.within.unwrap();
    assert_eq!(w.joined_key, Expr::Field(vec!["c".into(), "page".into()]));
    assert_eq!(
        (w.before_ms, w.after_ms, w.grace_ms),
        (2_000, 2_000, defaults::GRACE_MS)
    );
}

#[test]
fn stream_table_joins_inner_and_left() {
    let p = plan_sql(
        "CREATE STREAM enriched AS SELECT e.user_id, u.name, u.id AS uid, amount \
         FROM user_events e LEFT JOIN users u ON e.user_id = u.id WHERE u.tier = 'gold'",
    );
    assert_eq!(
        p.join,
        Some(JoinSpec {
            table_topic: "users".into(),
            stream_key: f("user_id"),
            alias: "u".into(),
            kind: JoinKind::Left,
            table_time: None,
            history_ms: None,
            within: None,
        })
    );
    let cols = project(&p);
    assert_eq!(
        cols[1],
        (
            "name".to_string(),
            Expr::Field(vec!["u".into(), "name".into()])
        )
    );
    assert!(
        matches!(cols[2].1, Expr::Case { .. }),
        "a LEFT JOIN's table key is null when unmatched"
    );
    assert_eq!(
        p.filter,
        Some(bin(
            BinaryOp::Eq,
            Expr::Field(vec!["u".into(), "tier".into()]),
            lit(json!("gold"))
        ))
    );
    let p = plan_sql(
        "CREATE STREAM j AS SELECT * FROM user_events JOIN users ON users.id = UPPER(user_id)",
    );
    let j = p.join.clone().unwrap();
    assert_eq!((j.kind, j.alias.as_str()), (JoinKind::Inner, "users"));
    assert_eq!(
        j.stream_key,
        Expr::Function(Function::Upper, vec![f("user_id")])
    );
    let names: Vec<&str> = project(&p).iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "user_id",
            "event_type",
            "amount",
            "event_time",
            "users_id",
            "users_name",
            "users_tier"
        ]
    );
    // Table columns in an aggregate over a join.
    let p = plan_sql(
        "CREATE TABLE by_tier AS SELECT u.tier, COUNT(*) AS n FROM user_events s JOIN users u ON s.user_id = u.id GROUP BY u.tier",
    );
    assert_eq!(
        aggregate(&p).group_by,
        vec![Expr::Field(vec!["u".into(), "tier".into()])]
    );
}

#[test]
fn dedup_late_topic_and_create_or_replace() {
    let c = create_as(
        "CREATE OR REPLACE TABLE d WITH (DEDUP_BY='user_id', DEDUP_TTL='10 MINUTES', LATE_TOPIC='late') AS \
         SELECT user_id, COUNT(*) AS n FROM user_events WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY user_id",
    );
    assert!(c.or_replace);
    assert_eq!(c.late_topic.as_deref(), Some("late"));
    assert_eq!(
        c.dedup.as_ref().map(|d| (d.by.as_str(), d.ttl_ms)),
        Some(("user_id", 600_000))
    );
    let p = plan(&c, &catalog()).unwrap();
    assert_eq!(
        p.dedup,
        Some(DedupSpec {
            id: f("user_id"),
            ttl_ms: 600_000
        })
    );
    assert_eq!(p.late, LateHandling::SideOutput("late".into()));
    let p = plan_sql("CREATE STREAM d2 WITH (DEDUP_BY='user_id') AS SELECT * FROM user_events");
    assert_eq!(p.dedup.unwrap().ttl_ms, defaults::DEDUP_TTL_MS);
}

#[test]
fn drop_show_describe() {
    assert_eq!(
        one("DROP STREAM IF EXISTS Foo"),
        Statement::Drop {
            kind: ObjectKind::Stream,
            name: "foo".into(),
            if_exists: true
        }
    );
    assert_eq!(
        one("drop table \"Bar\";"),
        Statement::Drop {
            kind: ObjectKind::Table,
            name: "Bar".into(),
            if_exists: false
        }
    );
    assert_eq!(one("SHOW STREAMS"), Statement::Show(ShowWhat::Streams));
    assert_eq!(one("show tables;"), Statement::Show(ShowWhat::Tables));
    assert_eq!(one("SHOW VIEWS"), Statement::Show(ShowWhat::Views));
    assert_eq!(one("LIST TOPICS"), Statement::Show(ShowWhat::Topics));
    assert_eq!(one("SHOW CLUSTERS"), Statement::Show(ShowWhat::Clusters));
    assert_eq!(
        one("DESCRIBE Purchase_Stats"),
        Statement::Describe("purchase_stats".into())
    );
    let all = parse("-- comment\nSHOW STREAMS; SHOW TABLES;;").unwrap();
    assert_eq!(all.len(), 2);
}

/// The brief's catalog plus one table defined by a query, `per_user`.
struct WithTable(Vec<SourceDecl>);

impl SourceCatalog for WithTable {
    fn source(&self, name: &str) -> Option<SourceDecl> {
        self.0.source(name)
    }

    fn table_query(&self, name: &str) -> Option<String> {
        (name == "per_user").then(|| {
            "CREATE TABLE per_user WITH (KEEP_VERSIONS = 2) AS\n  SELECT user_id, COUNT(*) AS n, SUM(amount) AS spent\n  FROM user_events GROUP BY user_id".to_string()
        })
    }
}

#[test]
fn from_a_table_by_name_plans_as_its_query_in_a_subquery() {
    let catalog = WithTable(catalog());
    let planned = |sql: &str| plan(&create_as(sql), &catalog);
    let by_name = planned(
        "CREATE TABLE h AS SELECT n, COUNT(*) AS users, MAX(spent) AS top FROM per_user GROUP BY n",
    )
    .unwrap();
    let inlined = planned("CREATE TABLE h AS SELECT n, COUNT(*) AS users, MAX(spent) AS top FROM (SELECT user_id, COUNT(*) AS n, SUM(amount) AS spent FROM user_events GROUP BY user_id) AS per_user GROUP BY n").unwrap();
    assert_eq!(by_name, inlined);
    // Under an alias.
    let aliased = planned("CREATE TABLE h AS SELECT p.n, COUNT(*) AS users, MAX(p.spent) AS top FROM per_user p GROUP BY p.n").unwrap();
    assert_eq!(aliased.then, inlined.then);
    // An error after the name keeps its position in this statement.
    let e = planned("CREATE TABLE h AS SELECT n, COUNT(*) AS c FROM per_user GROUP BY nope")
        .unwrap_err();
    assert_eq!(
        (e.line, e.column, e.message.contains("nope")),
        (1, 66, true),
        "{e}"
    );
}

#[test]
fn replay_promote_rollback() {
    use crate::runner::StartFrom;
    let replay = |sql: &str| match one(sql) {
        Statement::ChangeVersion(VersionChange::Replay {
            name,
            from,
            swap_manual,
            allow_truncated,
        }) => (name, from, swap_manual, allow_truncated),
        other => panic!("{sql}: {other:?}"),
    };
    assert_eq!(
        replay("REPLAY TABLE Purchase_Stats"),
        ("purchase_stats".into(), StartFrom::Earliest, false, false)
    );
    assert_eq!(
        replay("replay v from latest with (swap = 'manual')"),
        ("v".into(), StartFrom::Latest, true, false)
    );
    assert_eq!(
        replay("REPLAY STREAM s FROM OFFSETS (3, 0, 17) WITH (ALLOW_TRUNCATED = TRUE)"),
        ("s".into(), StartFrom::Offsets(vec![3, 0, 17]), false, true)
    );
    assert_eq!(
        replay("REPLAY v FROM TIMESTAMP 1000").1,
        StartFrom::Timestamp(1000)
    );
    assert_eq!(
        replay("REPLAY v FROM TIMESTAMP '1970-01-01T00:00:01Z'").1,
        StartFrom::Timestamp(1000)
    );
    // A view named like a kind word.
    assert_eq!(replay("REPLAY table").0, "table");
    assert_eq!(
        one("PROMOTE TABLE v"),
        Statement::ChangeVersion(VersionChange::Promote { name: "v".into() })
    );
    assert_eq!(
        one("rollback \"V\""),
        Statement::ChangeVersion(VersionChange::Rollback { name: "V".into() })
    );
}

#[test]
fn pull_queries_map_to_view_queries() {
    let Statement::Select(q) = one("SELECT * FROM purchase_stats WHERE user_id = 'u1'") else {
        panic!()
    };
    assert_eq!(q.view, "purchase_stats");
    let read = q.read(Some("user_id"));
    assert_eq!(read.query, ViewQuery::Key("u1".into()));
    assert_eq!(read.how, ReadHow::Lookup);
    assert!(read.residual.is_empty());
    // Not the key: a condition on a value, over every row.
    let read = q.read(Some("other"));
    assert_eq!((read.query, read.how), (ViewQuery::All, ReadHow::Scan));
    assert_eq!(read.residual.len(), 1);
    let Statement::Select(q) = one(
        "SELECT user_id, total_amount FROM purchase_stats WHERE user_id = 'u1' \
         AND WINDOWSTART >= '2024-01-01T00:00:00Z' AND WINDOWSTART < 1704067500000 AND WINDOWEND <= 1704067800000 LIMIT 10",
    ) else {
        panic!()
    };
    assert_eq!(
        q.columns,
        Some(vec!["user_id".into(), "total_amount".into()])
    );
    assert_eq!(
        q.window_start,
        TimeRange {
            from_ms: Some(1_704_067_200_000),
            to_ms: Some(1_704_067_500_000)
        }
    );
    assert_eq!(
        q.window_end,
        TimeRange {
            from_ms: None,
            to_ms: Some(1_704_067_800_001)
        }
    );
    assert_eq!(q.limit, Some(10));
    assert_eq!(
        q.read(Some("USER_ID")).query,
        ViewQuery::KeyWindows {
            key: "u1".into(),
            from: 1_704_067_200_000,
            to: 1_704_067_500_000
        }
    );
    let row = |ws: i64, we: i64| ViewRow {
        key: "u1".into(),
        window_start: Some(ws),
        window_end: Some(we),
        row: json!({}),
    };
    assert!(q
        .row_filter(None)
        .admits(&row(1_704_067_200_000, 1_704_067_500_000)));
    assert!(!q
        .row_filter(None)
        .admits(&row(1_704_067_500_000, 1_704_067_800_000)));
    let Statement::Select(q) =
        one("SELECT * FROM counts WHERE id = 42 AND WINDOWSTART BETWEEN 0 AND 10")
    else {
        panic!()
    };
    assert_eq!(
        q.read(Some("id")).query,
        ViewQuery::KeyWindows {
            key: "42".into(),
            from: 0,
            to: 11
        }
    );
    let Statement::Select(q) = one("SELECT * FROM counts") else {
        panic!()
    };
    assert_eq!(q.read(Some("id")).query, ViewQuery::All);
}

#[test]
fn pull_queries_read_key_lists_prefixes_and_ranges_and_filter_the_rest() {
    let read = |sql: &str| {
        let Statement::Select(q) = one(sql) else {
            panic!("{sql}")
        };
        q.read(Some("k"))
    };
    let r = read("SELECT * FROM v WHERE k IN ('b', 'a', 'b') AND n > 1");
    assert_eq!(r.query, ViewQuery::Keys(vec!["a".into(), "b".into()]));
    assert_eq!((r.how, r.residual.len()), (ReadHow::Lookups(2), 1));
    let r = read("SELECT * FROM v WHERE k LIKE 'ab%'");
    assert_eq!(
        (r.query, r.how),
        (ViewQuery::Prefix("ab".into()), ReadHow::Prefix)
    );
    // Not a prefix: every row is tested.
    let r = read("SELECT * FROM v WHERE k LIKE 'a_%'");
    assert_eq!((r.how, r.residual.len()), (ReadHow::Scan, 1));
    let r = read("SELECT * FROM v WHERE k >= 'b' AND k < 'd'");
    assert_eq!(
        r.query,
        ViewQuery::Range {
            lower: Some(("b".into(), true)),
            upper: None
        }
    );
    assert_eq!((r.how, r.residual.len()), (ReadHow::Range, 1));
    let r = read("SELECT * FROM v WHERE k BETWEEN 'b' AND 'd'");
    assert_eq!(
        r.query,
        ViewQuery::Range {
            lower: Some(("b".into(), true)),
            upper: Some(("d".into(), true))
        }
    );
    // A number key is not in number order: its range is a scan.
    let r = read("SELECT * FROM v WHERE k > 5");
    assert_eq!((r.how, r.residual.len()), (ReadHow::Scan, 1));
    // An equality wins over a range; the range is still tested.
    let r = read("SELECT * FROM v WHERE k > 'a' AND k = 'b'");
    assert_eq!((r.query, r.residual.len()), (ViewQuery::Key("b".into()), 1));
    // OR is a condition over every row.
    let r = read("SELECT * FROM v WHERE k = 'a' OR k = 'b'");
    assert_eq!(r.how, ReadHow::Scan);
    let Statement::Select(q) = one(
        "SELECT * FROM v WHERE amount >= 10.5 AND (tier = 'gold' OR tier IS NULL) ORDER BY k DESC LIMIT 5 OFFSET 10",
    ) else {
        panic!()
    };
    assert_eq!(q.offset, 10);
    assert_eq!(
        q.order,
        Some(PullOrder {
            column: "k".into(),
            descending: true
        })
    );
    let row = |v: serde_json::Value| ViewRow {
        key: "x".into(),
        window_start: None,
        window_end: None,
        row: v,
    };
    assert!(admits(
        &q.conditions,
        &row(json!({"amount": 11, "tier": "gold"}))
    ));
    assert!(admits(&q.conditions, &row(json!({"AMOUNT": 11}))));
    assert!(!admits(
        &q.conditions,
        &row(json!({"amount": 10, "tier": "gold"}))
    ));
    assert!(!admits(
        &q.conditions,
        &row(json!({"amount": 11, "tier": "silver"}))
    ));
}

#[test]
fn pull_query_aggregates_are_named_as_postgresql_names_them() {
    let Statement::Select(q) =
        one("SELECT COUNT(*), SUM(total) AS spent, max(total) FROM v WHERE k LIKE 'u%'")
    else {
        panic!()
    };
    let aggs = q.aggregates.unwrap();
    let names: Vec<&str> = aggs.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["count", "spent", "max"]);
    assert_eq!(aggs[0].kind, AggregateKind::CountAll);
    assert_eq!(aggs[1].column.as_deref(), Some("total"));
}

#[test]
fn plan_positions_point_into_the_submitted_text() {
    let text = format!("{USER_EVENTS}\nCREATE STREAM x AS\n  SELECT nope FROM user_events;");
    let all = parse(&text).unwrap();
    let Statement::CreateAs(c) = &all[1] else {
        panic!()
    };
    let e = plan(c, &catalog()).unwrap_err();
    assert_eq!((e.line, e.column), (5, 10), "{e}");
    assert!(e.message.contains("unknown column 'nope'"), "{e}");
    assert!(
        e.to_string()
            .starts_with("line 5, column 10: unknown column"),
        "{e}"
    );
}

#[test]
fn a_joined_tables_timestamp_column_is_when_its_rows_hold() {
    let tiers = source(
        "CREATE TABLE tiers (id VARCHAR PRIMARY KEY, tier VARCHAR, since BIGINT)
           WITH (TOPIC='tiers', TIMESTAMP='since');",
    );
    let c = create_as(
        "CREATE TABLE by_tier AS SELECT t.tier, COUNT(*) AS n FROM user_events s JOIN tiers t ON s.user_id = t.id GROUP BY t.tier",
    );
    let decls = vec![source(USER_EVENTS), tiers];
    let p = plan(&c, &decls).unwrap();
    assert_eq!(p.join.unwrap().table_time, Some(vec!["since".to_string()]));
    assert_eq!(
        plan_sql("CREATE STREAM j AS SELECT * FROM user_events JOIN users ON users.id = user_id")
            .join
            .unwrap()
            .table_time,
        None
    );
}

#[test]
fn join_history_and_version_retention_are_properties_of_create_as() {
    let c = create_as(
        "CREATE TABLE t WITH (JOIN_HISTORY='2 HOURS', KEEP_VERSIONS=3, VERSION_GRACE='10 MINUTES') AS \
         SELECT u.name, COUNT(*) AS n FROM user_events e JOIN users u ON e.user_id = u.id GROUP BY u.name",
    );
    assert_eq!(
        (c.join_history_ms, c.keep_versions, c.version_grace_ms),
        (Some(7_200_000), Some(3), Some(600_000))
    );
    let p = plan(&c, &catalog()).unwrap();
    assert_eq!(p.join.unwrap().history_ms, Some(7_200_000));
    // Unset: the defaults (the window's grace or a day; the server's).
    let c = create_as(
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id",
    );
    assert_eq!(
        (c.join_history_ms, c.keep_versions, c.version_grace_ms),
        (None, None, None)
    );
    assert_eq!(
        create_as("CREATE TABLE t WITH (KEEP_VERSIONS=0) AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id")
            .keep_versions,
        Some(0)
    );

    let e = plan_err(
        "CREATE TABLE t WITH (JOIN_HISTORY='1 HOUR') AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id",
    );
    assert!(e.message.contains("JOIN_HISTORY needs a JOIN"), "{e}");
    let e = parse(
        "CREATE TABLE t WITH (KEEP_VERSIONS=17) AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id",
    )
    .unwrap_err();
    assert!(
        e.message
            .contains("KEEP_VERSIONS must be a whole number from 0 to 16"),
        "{e}"
    );
}

#[test]
fn parallelism_is_a_property_of_create_as_from_1_to_the_key_groups() {
    let c = create_as(
        "CREATE TABLE t WITH (PARALLELISM=4) AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id",
    );
    assert_eq!(c.parallelism, Some(4));
    let c = create_as(
        "CREATE TABLE t AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id",
    );
    assert_eq!(c.parallelism, None, "unset: the server's processor_threads");
    for bad in ["0", "129", "'two'"] {
        let e = parse(&format!(
            "CREATE TABLE t WITH (PARALLELISM={bad}) AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id"
        ))
        .unwrap_err();
        assert!(
            e.message
                .contains("PARALLELISM must be a whole number from 1 to 128"),
            "{bad}: {e}"
        );
    }
}

#[test]
fn a_stream_over_a_cluster_keeps_its_cluster_into_the_plan() {
    let orders = source(
        "CREATE STREAM orders (user_id VARCHAR, amount DOUBLE) WITH (KAFKA_TOPIC='orders', CLUSTER='prod')",
    );
    assert_eq!(orders.cluster.as_deref(), Some("prod"));
    assert_eq!(source(USER_EVENTS).cluster, None);
    let catalog = vec![orders, source(USERS)];
    let c = create_as(
        "CREATE TABLE totals AS SELECT user_id, SUM(amount) AS total FROM orders GROUP BY user_id",
    );
    let p = plan(&c, &catalog).expect("plans");
    assert_eq!(p.source.cluster.as_deref(), Some("prod"));
    assert_eq!(p.source.topic, "orders");
    // A join reads its stream and its table from the same place.
    let c = create_as(
        "CREATE TABLE t AS SELECT o.user_id, COUNT(*) AS n FROM orders o JOIN users u ON o.user_id = u.id GROUP BY o.user_id",
    );
    let e = plan(&c, &catalog).expect_err("a join across places");
    assert!(
        e.to_string()
            .contains("lives on the built-in log and stream 'orders' on cluster 'prod'"),
        "{e}"
    );
}

#[test]
fn explain_lists_the_operators_an_event_meets_with_their_state() {
    let p = plan_sql(
        "CREATE TABLE x WITH (DEDUP_BY='event_type') AS SELECT e.user_id, COUNT(*) AS n \
         FROM user_events e JOIN clicks c WITHIN 10 MINUTES GRACE PERIOD 1 MINUTE \
         ON e.user_id = c.user_id WINDOW TUMBLING (SIZE 1 HOUR) \
         WHERE e.event_type = 'purchase' AND c.page <> 'home' AND e.amount > c.at GROUP BY e.user_id",
    );
    let ops = explain::operators(&p);
    let names: Vec<&str> = ops.iter().map(|o| o.operator).collect();
    assert_eq!(
        names,
        ["source", "dedup", "join", "filter", "aggregate", "sink"]
    );
    let join = &ops[2];
    assert!(
        join.detail
            .contains("WITHIN (10 min before, 10 min after) GRACE PERIOD 1 min")
            && join
                .detail
                .contains("the stream's events pass (event_type = 'purchase')")
            && join
                .detail
                .contains("the joined events pass (c.page <> 'home')")
            && !join.detail.contains("amount"),
        "{}",
        join.detail
    );
    assert!(
        join.state.as_deref().unwrap().contains("11 min"),
        "{join:?}"
    );
    assert_eq!(join.gauge, Some(explain::STREAM_JOIN_GAUGE));
    assert!(
        ops[4].detail.contains("WINDOW TUMBLING 1 h"),
        "{:?}",
        ops[4]
    );
    let live = [(explain::STREAM_JOIN_GAUGE.to_string(), 7u64)].into();
    let text = explain::render(&ops, &live, Some(123));
    assert!(text.contains("(now 7 entries in memory)"), "{text}");
    assert!(text.contains("-> aggregate [key-shard workers]"), "{text}");
}

#[test]
fn select_distinct_makes_a_table_grouped_by_its_items() {
    let p = plan_sql(
        "CREATE TABLE kinds AS SELECT DISTINCT user_id, UPPER(event_type) AS kind \
         FROM user_events WHERE amount > 1",
    );
    let Operation::Aggregate(spec) = &p.operation else {
        panic!("not an aggregate: {p:?}")
    };
    assert_eq!(
        spec.group_by,
        vec![
            f("user_id"),
            Expr::Function(Function::Upper, vec![f("event_type")])
        ]
    );
    assert!(spec.aggregates.is_empty(), "{spec:?}");
    let names: Vec<&str> = spec.columns.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["user_id", "kind"]);
}

#[test]
fn subqueries_and_ctes_plan_an_aggregate_over_an_aggregates_rows() {
    let sub = plan_sql(
        "CREATE TABLE pages_per_count AS SELECT n, COUNT(*) AS pages, SUM(n) AS clicks
         FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) AS per_page
         WHERE n > 1 GROUP BY n;",
    );
    let cte = plan_sql(
        "CREATE TABLE pages_per_count AS WITH per_page AS (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page)
         SELECT n, COUNT(*) AS pages, SUM(n) AS clicks FROM per_page WHERE n > 1 GROUP BY n;",
    );
    assert_eq!(sub, cte);
    let inner = aggregate(&sub);
    assert_eq!(inner.group_by, vec![f("page")]);
    let rows = sub.then.as_ref().expect("an aggregate over rows");
    assert_eq!(rows.aggregate.group_by, vec![f("n")]);
    assert_eq!(rows.filter, Some(bin(BinaryOp::Gt, f("n"), lit(json!(1)))));
    let names: Vec<&str> = rows
        .aggregate
        .aggregates
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["pages", "clicks", "#rows"]);
    assert_eq!(sub.sink, Sink::View);

    // A windowed subquery hands over final rows unless it says otherwise.
    let windowed = plan_sql(
        "CREATE TABLE busiest AS SELECT MAX(n) AS most FROM (
           SELECT page, COUNT(*) AS n FROM clicks WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY page) q;",
    );
    let w = aggregate(&windowed).window.as_ref().unwrap();
    assert_eq!(w.emit, Emit::Final);
    assert!(windowed
        .then
        .as_ref()
        .unwrap()
        .aggregate
        .group_by
        .is_empty());
}

#[test]
fn what_a_query_over_a_subquery_cannot_do_is_refused_with_a_reason() {
    for (sql, wanted) in [
        (
            "CREATE STREAM s2 AS SELECT n FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q;",
            "use CREATE TABLE",
        ),
        (
            "CREATE TABLE t AS SELECT n FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q;",
            "must aggregate them",
        ),
        (
            "CREATE TABLE t AS SELECT COUNT(*) AS c FROM (SELECT page FROM clicks) q GROUP BY page;",
            "the subquery must aggregate",
        ),
        (
            "CREATE TABLE t AS SELECT LATEST_BY_OFFSET(n) AS l FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q;",
            "LATEST_BY_OFFSET cannot aggregate a table's rows",
        ),
        (
            "CREATE TABLE t AS SELECT COUNT(*) AS c FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q WINDOW TUMBLING (SIZE 1 MINUTE);",
            "WINDOW applies to the subquery",
        ),
        (
            "CREATE TABLE t AS SELECT COUNT(*) AS c FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q GROUP BY nope;",
            "unknown column 'nope'",
        ),
        (
            "CREATE TABLE t AS SELECT COUNT(*) AS c FROM (SELECT page, COUNT(*) AS n FROM clicks WINDOW HOPPING (SIZE 1 MINUTE, ADVANCE BY 10 SECONDS) GROUP BY page EMIT CHANGES) q;",
            "write EMIT FINAL",
        ),
        (
            "CREATE TABLE t AS WITH q AS (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) SELECT COUNT(*) AS c FROM clicks;",
            "FROM q",
        ),
    ] {
        let e = plan_err(sql);
        assert!(e.message.contains(wanted), "{sql}\n{e:?}");
    }
}

#[test]
fn qualify_plans_a_top_n_of_a_subquerys_rows() {
    let p = plan_sql(
        "CREATE TABLE top_pages AS SELECT page, n FROM (
           SELECT page, COUNT(*) AS n FROM clicks WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY page) q
         WHERE n > 1
         QUALIFY RANK() OVER (PARTITION BY page ORDER BY n DESC) <= 3;",
    );
    let rows = p.then.as_ref().unwrap();
    let top = rows.top.as_ref().unwrap();
    assert_eq!(top.partition_by, vec![f("page")]);
    assert_eq!(top.order_by, f("n"));
    assert!(top.descending && top.ties);
    assert_eq!(top.limit, 3);
    assert_eq!(rows.filter, Some(bin(BinaryOp::Gt, f("n"), lit(json!(1)))));
    let names: Vec<&str> = rows
        .aggregate
        .columns
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["page", "n"]);

    let one = plan_sql(
        "CREATE TABLE top_page AS SELECT * FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q
         QUALIFY ROW_NUMBER() OVER (ORDER BY n) < 2;",
    );
    let top = one.then.as_ref().unwrap().top.as_ref().unwrap();
    assert!(!top.descending && !top.ties && top.partition_by.is_empty());
    assert_eq!(top.limit, 1);

    for (sql, wanted) in [
        ("CREATE TABLE t AS SELECT page FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY DENSE_RANK() OVER (ORDER BY n) <= 1;", "expected QUALIFY ROW_NUMBER()"),
        ("CREATE TABLE t AS SELECT page FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY ROW_NUMBER() OVER (ORDER BY n) <= 0;", "1 to 10000 ranks"),
        ("CREATE TABLE t AS SELECT page FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY ROW_NUMBER() OVER (PARTITION BY page) <= 1;", "one ORDER BY"),
        ("CREATE TABLE t AS SELECT COUNT(*) AS c FROM (SELECT page, COUNT(*) AS n FROM clicks GROUP BY page) q QUALIFY ROW_NUMBER() OVER (ORDER BY n) <= 1;", "no GROUP BY, aggregates"),
        ("CREATE TABLE t AS SELECT page, COUNT(*) AS c FROM clicks GROUP BY page QUALIFY ROW_NUMBER() OVER (ORDER BY page) <= 1;", "QUALIFY ranks the rows of a subquery"),
    ] {
        let e = plan_err(sql);
        assert!(e.message.contains(wanted), "{sql}\n{e:?}");
    }
}

#[test]
fn a_query_over_a_declared_table_aggregates_or_ranks_its_latest_rows() {
    let p = plan_sql(
        "CREATE TABLE per_tier AS SELECT tier, COUNT(*) AS users, COUNT_DISTINCT(name) AS names
         FROM users WHERE tier <> 'none' GROUP BY tier;",
    );
    assert_eq!(p.source.topic, "users");
    assert_eq!(p.sink, Sink::View);
    assert!(p.reads_table_rows());
    assert_eq!(
        p.filter, None,
        "the WHERE filters the rows, not the records"
    );
    // Each record becomes its key's row: the declared columns, the key
    // column read from the record key.
    assert_eq!(
        project(&p),
        [
            ("id".to_string(), Expr::Key),
            ("name".to_string(), f("name")),
            ("tier".to_string(), f("tier")),
        ]
    );
    let rows = p.then.as_ref().unwrap();
    assert_eq!(rows.aggregate.group_by, vec![f("tier")]);
    assert_eq!(
        rows.filter,
        Some(bin(BinaryOp::NotEq, f("tier"), lit(json!("none"))))
    );
    let names: Vec<&str> = rows
        .aggregate
        .aggregates
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["users", "names", "#rows"]);

    // The key column is a column of the rows.
    let top = plan_sql(
        "CREATE TABLE first_users AS SELECT id, name FROM users u
         QUALIFY ROW_NUMBER() OVER (PARTITION BY tier ORDER BY id) <= 2;",
    );
    let rows = top.then.as_ref().unwrap();
    assert_eq!(rows.top.as_ref().unwrap().order_by, f("id"));

    for (sql, wanted) in [
        ("CREATE STREAM s AS SELECT id FROM users;", "'users' is a table, not a stream: CREATE STREAM .. AS reads a stream"),
        ("CREATE TABLE t AS SELECT tier, COUNT(*) AS n FROM users WINDOW TUMBLING (SIZE 1 MINUTE) GROUP BY tier;", "WINDOW does not apply to a table's rows"),
        ("CREATE TABLE t AS SELECT tier, COUNT(*) AS n FROM users GROUP BY tier EMIT CHANGES;", "EMIT does not apply to a table's rows"),
        ("CREATE TABLE t AS SELECT u.id FROM users u JOIN clicks c ON u.id = c.user_id;", "'clicks' is a stream: a table joins a table here"),
        ("CREATE TABLE t AS SELECT u.id FROM users u JOIN tiers t ON u.tier = t.name;", "a table is joined on its PRIMARY KEY"),
        ("CREATE TABLE t AS SELECT u.id FROM users u FULL JOIN tiers t ON u.tier = t.tier;", "FULL JOIN joins two streams"),
        ("CREATE TABLE t AS SELECT tier, LATEST_BY_OFFSET(name) AS n FROM users GROUP BY tier;", "LATEST_BY_OFFSET cannot aggregate a table's rows"),
        ("CREATE TABLE t AS SELECT tier, COUNT(*) AS n FROM users WHERE ROWTIME > 0 GROUP BY tier;", "reads only the rows' columns"),
        ("CREATE TABLE t WITH (DEDUP_BY='id') AS SELECT tier, COUNT(*) AS n FROM users GROUP BY tier;", "a table holds one row per key"),
    ] {
        let e = plan_err(sql);
        assert!(e.message.contains(wanted), "{sql}\n{e:?}");
    }
}

#[test]
fn a_query_over_a_table_without_group_by_shows_each_row_and_joins_tables() {
    // A filtered projection of a table's rows.
    let each = plan_sql(
        "CREATE TABLE named AS SELECT id, UPPER(name) AS name FROM users WHERE tier = 'gold';",
    );
    let rows = each.then.as_ref().unwrap();
    assert!(rows.each_row && rows.join.is_none() && rows.top.is_none());
    assert_eq!(
        rows.filter,
        Some(bin(BinaryOp::Eq, f("tier"), lit(json!("gold"))))
    );

    // A foreign-key join: users.tier names a tier's key.
    let fk = plan_sql(
        "CREATE TABLE user_tiers AS SELECT u.id, u.name, t.name AS tier_name, t.tier
         FROM users u LEFT JOIN tiers t ON u.tier = t.tier WHERE t.rank > 1;",
    );
    let rows = fk.then.as_ref().unwrap();
    let join = rows.join.as_ref().unwrap();
    assert_eq!(join.topic, "tiers");
    assert_eq!(join.on, f("tier"));
    assert_eq!(join.alias, "t");
    assert_eq!(join.kind, JoinKind::Left);
    assert_eq!(join.key_column.as_deref(), Some("tier"));
    let inputs: Vec<Expr> = rows
        .aggregate
        .aggregates
        .iter()
        .map(|a| a.input.clone().unwrap())
        .collect();
    assert_eq!(inputs[2], Expr::Field(vec!["t".into(), "name".into()]));
    assert!(rows.each_row);
    assert_eq!(fk.join, None, "the stream-table join is not used");

    // A join of tables aggregated: users per tier name.
    let grouped = plan_sql(
        "CREATE TABLE per_tier_name AS SELECT t.name, COUNT(*) AS users
         FROM users u JOIN tiers t ON u.tier = t.tier GROUP BY t.name;",
    );
    let rows = grouped.then.as_ref().unwrap();
    assert!(!rows.each_row && rows.join.is_some());
    assert_eq!(
        rows.aggregate.group_by,
        vec![Expr::Field(vec!["t".into(), "name".into()])]
    );
}

#[test]
fn several_joins_enrich_a_stream_from_tables_each_on_the_stream_or_an_earlier_row() {
    // users on the stream's user_id, tiers on the users row's tier.
    let p = plan_sql(
        "CREATE STREAM enriched AS SELECT e.user_id, u.name, t.rank, t.tier AS t_key, u.id AS uid \
         FROM user_events e JOIN users u ON e.user_id = u.id LEFT JOIN tiers t ON u.tier = t.tier \
         WHERE t.rank > 1",
    );
    assert_eq!(p.join.as_ref().unwrap().alias, "u");
    assert_eq!(p.join.as_ref().unwrap().stream_key, f("user_id"));
    assert_eq!(
        p.more_joins,
        [JoinSpec {
            table_topic: "tiers".into(),
            stream_key: Expr::Field(vec!["u".into(), "tier".into()]),
            alias: "t".into(),
            kind: JoinKind::Left,
            table_time: None,
            history_ms: None,
            within: None,
        }]
    );
    let cols = project(&p);
    assert_eq!(cols[2].1, Expr::Field(vec!["t".into(), "rank".into()]));
    // The tiers key column is what it was joined on (null when unmatched);
    // the users key, the stream's user_id (an inner join).
    assert!(matches!(cols[3].1, Expr::Case { .. }), "{:?}", cols[3]);
    assert_eq!(cols[4].1, f("user_id"));
    assert_eq!(
        p.filter,
        Some(bin(
            BinaryOp::Gt,
            Expr::Field(vec!["t".into(), "rank".into()]),
            lit(json!(1))
        ))
    );
    // `*` lists the stream's columns, then each table's, prefixed.
    let star = plan_sql(
        "CREATE STREAM s AS SELECT * FROM user_events e JOIN users u ON e.user_id = u.id \
         JOIN tiers t ON u.tier = t.tier",
    );
    let names: Vec<&str> = project(&star).iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.ends_with(&["u_id", "u_name", "u_tier", "t_tier", "t_name", "t_rank"]),
        "{names:?}"
    );
    // A join after a join of two streams; JOIN_HISTORY applies to the table.
    let p = plan_sql(
        "CREATE TABLE x WITH (JOIN_HISTORY='1 HOUR') AS SELECT u.tier, COUNT(*) AS n \
         FROM user_events e JOIN clicks c WITHIN 10 MINUTES ON e.user_id = c.user_id \
         JOIN users u ON c.user_id = u.id GROUP BY u.tier",
    );
    assert!(p.join.as_ref().unwrap().joins_stream());
    assert_eq!(p.more_joins[0].history_ms, Some(3_600_000));
    assert_eq!(
        p.more_joins[0].stream_key,
        Expr::Column(crate::event::JOINED_KEY_COLUMN.into())
    );
    // EXPLAIN shows each join; one gauge counts the tables' keys.
    let ops = explain::operators(&plan_sql(
        "CREATE TABLE x AS SELECT t.rank, COUNT(*) AS n FROM user_events e \
         JOIN users u ON e.user_id = u.id JOIN tiers t ON u.tier = t.tier GROUP BY t.rank",
    ));
    let joins: Vec<&explain::OperatorInfo> = ops.iter().filter(|o| o.operator == "join").collect();
    assert_eq!(joins.len(), 2, "{ops:?}");
    assert!(joins[1].detail.contains("table 'tiers' AS t"), "{joins:?}");
    assert!(joins[1].detail.contains("ON u.tier ="), "{joins:?}");
    assert_eq!(joins[0].gauge, Some(explain::TABLE_JOIN_GAUGE));
    assert_eq!(joins[1].gauge, None);
}

#[test]
fn several_joins_are_refused_where_they_have_no_meaning() {
    let refused = |sql: &str| {
        plan(&create_as(sql), &catalog())
            .expect_err(sql)
            .to_string()
    };
    let e = refused(
        "CREATE TABLE x AS SELECT name, COUNT(*) AS n FROM user_events e \
         JOIN users u ON e.user_id = u.id JOIN tiers t ON u.tier = t.tier GROUP BY name",
    );
    assert!(
        e.contains("ambiguous column 'name': qualify it as u.name or t.name"),
        "{e}"
    );
    let joins: String = (0..=crate::limits::MAX_JOINS)
        .map(|i| format!(" JOIN users u{i} ON e.user_id = u{i}.id"))
        .collect();
    let e = parse(&format!(
        "CREATE STREAM x AS SELECT e.user_id FROM user_events e{joins}"
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("a query joins at most 8 tables and streams"),
        "{e}"
    );
    // A plan over the limit is refused by its check too.
    let mut p = plan_sql(
        "CREATE STREAM x AS SELECT e.user_id FROM user_events e JOIN users u ON e.user_id = u.id",
    );
    p.more_joins = vec![p.join.clone().unwrap(); crate::limits::MAX_JOINS];
    assert!(p.validate().unwrap_err().contains("max_joins"));
}

#[test]
fn a_joined_table_keeps_only_the_fields_the_query_reads() {
    let p = plan_sql(
        "CREATE TABLE x AS SELECT u.name, COUNT(*) AS n FROM user_events e \
         JOIN users u ON e.user_id = u.id GROUP BY u.name",
    );
    assert_eq!(
        p.table_fields(p.join.as_ref().unwrap()),
        Some(vec!["name".into()])
    );
    // A later join's key reads the earlier table's field too.
    let p = plan_sql(
        "CREATE STREAM s AS SELECT e.user_id, t.rank FROM user_events e \
         JOIN users u ON e.user_id = u.id JOIN tiers t ON u.tier = t.tier",
    );
    assert_eq!(
        p.table_fields(p.join.as_ref().unwrap()),
        Some(vec!["tier".into()])
    );
    assert_eq!(p.table_fields(&p.more_joins[0]), Some(vec!["rank".into()]));
    // `*` reads every declared column of the value.
    let p =
        plan_sql("CREATE STREAM s AS SELECT * FROM user_events e JOIN users u ON e.user_id = u.id");
    let mut fields = p.table_fields(p.join.as_ref().unwrap()).unwrap();
    fields.sort();
    assert_eq!(fields, ["name", "tier"]);
    // The row kept of a record: those fields; a deletion stays null.
    let join = crate::operator::join::TableJoin::new(
        p.join.clone().unwrap(),
        "cf".into(),
        crate::state::key::TableSlot::First,
    )
    .reading(Some(vec!["name".into()]));
    assert_eq!(
        join.row_of(br#"{"name":"Ann","tier":"gold","bio":"long text"}"#),
        json!({"name": "Ann"})
    );
    assert_eq!(join.row_of(b"null"), serde_json::Value::Null);
    assert_eq!(join.row_of(b""), serde_json::Value::Null);
    assert_eq!(join.row_of(b"not json"), serde_json::Value::Null);
}
