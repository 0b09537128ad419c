//! `EXPLAIN`: a plan as the graph of operators an event meets, in order,
//! each with where it runs, what it does, and what state it keeps and what
//! bounds that state — so a user can see why a query is costly. A running
//! version adds how much each keeps now ([`crate::progress::Progress`]'s
//! operator state, by [`OperatorInfo::gauge`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::accumulators::AggregateKind;
use crate::operator::table_aggregate::ROWS_AGGREGATE;
use crate::plan::{
    AggregateSpec, ColumnSource, EventTime, JoinKind, JoinSpec, LateHandling, Operation, Plan,
    RowsAggregate, RowsJoin, Sink,
};
use crate::window::WindowSpec;

/// The gauge a stream-stream join reports its buffered events under.
pub const STREAM_JOIN_GAUGE: &str = "stream_join";
/// The gauge a stream-table join reports its table's keys under.
pub const TABLE_JOIN_GAUGE: &str = "table_join";
/// The gauge deduplication reports its remembered ids under.
pub const DEDUP_GAUGE: &str = "dedup";
/// The gauge an aggregate over a subquery's rows reports its groups in
/// memory under.
pub const ROWS_AGGREGATE_GAUGE: &str = "aggregate_rows";

/// One operator of a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OperatorInfo {
    /// `source`, `dedup`, `join`, `filter`, `aggregate`,
    /// `aggregate_rows`, `top_n`, `project` or `sink`.
    pub operator: &'static str,
    /// What it does.
    pub detail: String,
    /// Where it runs when the version has several workers.
    pub runs_on: &'static str,
    /// The state it keeps and what bounds it; `None`: none.
    pub state: Option<String>,
    /// The name its state's size is reported under while it runs
    /// (entries in memory), if it reports one.
    pub gauge: Option<&'static str>,
}

fn op(
    operator: &'static str,
    detail: String,
    runs_on: &'static str,
    state: Option<String>,
    gauge: Option<&'static str>,
) -> OperatorInfo {
    OperatorInfo {
        operator,
        detail,
        runs_on,
        state,
        gauge,
    }
}

/// A duration in the largest unit that divides it (`90 s`, `1 h`).
pub fn duration(ms: i64) -> String {
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("min", 60_000),
        ("s", 1_000),
    ] {
        if ms != 0 && ms % size == 0 {
            return format!("{} {unit}", ms / size);
        }
    }
    format!("{ms} ms")
}

/// The operators of `plan`, in the order an event meets them.
pub fn operators(plan: &Plan) -> Vec<OperatorInfo> {
    let mut ops = vec![source(plan)];
    if let Some(d) = &plan.dedup {
        ops.push(op(
            "dedup",
            format!(
                "drops an event whose {} was seen within {}",
                d.id,
                duration(d.ttl_ms)
            ),
            "coordinator",
            Some(format!(
                "one entry per id seen in the last {} of event time",
                duration(d.ttl_ms)
            )),
            Some(DEDUP_GAUGE),
        ));
    }
    if let Some(j) = &plan.join {
        ops.push(join(j, plan));
    }
    for j in &plan.more_joins {
        ops.push(join(j, plan));
    }
    if let Some(f) = &plan.filter {
        let early = plan.dedup.is_none() && plan.join.is_none();
        ops.push(op(
            "filter",
            format!("WHERE {f}"),
            if early {
                "source workers"
            } else {
                "coordinator"
            },
            None,
            None,
        ));
    }
    match &plan.operation {
        Operation::Aggregate(spec) => {
            ops.push(aggregate(spec, plan));
            if let Some(rows) = &plan.then {
                ops.push(rows_aggregate(
                    rows,
                    RowsAggregate::inner_rows_are_final(spec),
                ));
            }
        }
        Operation::Project { columns } if plan.then.is_some() => {
            let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
            ops.push(op(
                "table_rows",
                format!(
                    "each record replaces its key's row of {} column(s): {}; a record with a null value deletes it",
                    columns.len(),
                    names.join(", ")
                ),
                "coordinator",
                Some(
                    "the latest row per key, in state (the stage column family); each commit's changed rows handed to the next operator"
                        .into(),
                ),
                None,
            ));
            if let Some(rows) = &plan.then {
                if let Some(j) = &rows.join {
                    ops.push(tables_join(j));
                }
                ops.push(rows_aggregate(rows, false));
            }
        }
        Operation::Project { columns } => {
            let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
            let mut detail = format!("{} column(s): {}", columns.len(), names.join(", "));
            if let Some(by) = &plan.partition_by {
                let _ = write!(detail, "; records keyed by {by} (PARTITION BY)");
            }
            ops.push(op("project", detail, "coordinator", None, None));
        }
    }
    ops.push(sink(plan));
    ops
}

fn source(plan: &Plan) -> OperatorInfo {
    let s = &plan.source;
    let time = match &s.event_time {
        EventTime::RecordTimestamp => "the record timestamp".to_string(),
        EventTime::Field(path) => path.join("."),
    };
    let place = match &s.cluster {
        Some(c) => format!(" on cluster '{c}'"),
        None => String::new(),
    };
    op(
        "source",
        format!(
            "reads topic '{}'{place} in log order; event time: {time}; watermark {} behind the newest event time, a partition idle after {}",
            s.topic,
            duration(s.out_of_orderness_ms),
            duration(s.idle_timeout_ms)
        ),
        "coordinator orders, source workers decode",
        None,
        None,
    )
}

fn join(j: &JoinSpec, plan: &Plan) -> OperatorInfo {
    let kind = match j.kind {
        JoinKind::Inner => "JOIN",
        JoinKind::Left => "LEFT JOIN",
        JoinKind::Full => "FULL JOIN",
    };
    match &j.within {
        Some(w) => {
            // As the runtime: not before tables joined after it.
            let filter = plan.filter.as_ref().filter(|_| plan.more_joins.is_empty());
            let (left, right) =
                crate::operator::stream_join::side_filters(filter, &j.alias, j.kind);
            let mut detail = format!(
                "{kind} stream '{}' AS {} WITHIN ({} before, {} after) GRACE PERIOD {} ON {} = {}",
                j.table_topic,
                j.alias,
                duration(w.before_ms),
                duration(w.after_ms),
                duration(w.grace_ms),
                j.stream_key,
                w.joined_key
            );
            if let Some(f) = left {
                let _ = write!(detail, "; before the join, the stream's events pass {f}");
            }
            if let Some(f) = right {
                let _ = write!(detail, "; before the join, the joined events pass {f}");
            }
            let span = w.before_ms.max(w.after_ms).saturating_add(w.grace_ms);
            op(
                "join",
                detail,
                "coordinator",
                Some(format!(
                    "the events of both streams (passing their filters) of about the last {} of event time: each until its bound plus the grace period is behind the watermark",
                    duration(span)
                )),
                Some(STREAM_JOIN_GAUGE),
            )
        }
        None => {
            let history = j.history_ms.map_or_else(
                || "the window's grace period, else 1 d".to_string(),
                duration,
            );
            // One gauge counts the keys of every joined table.
            let first_table = plan
                .join
                .iter()
                .chain(&plan.more_joins)
                .find(|j| j.within.is_none());
            let gauge = first_table.is_some_and(|t| std::ptr::eq(t, j));
            let state = match (gauge, plan.more_joins.is_empty()) {
                (true, false) => " (the gauge counts the keys of every joined table)",
                _ => "",
            };
            op(
                "join",
                format!(
                    "{kind} table '{}' AS {} as of each event's time ON {} = the table's key",
                    j.table_topic, j.alias, j.stream_key
                ),
                "coordinator",
                Some(format!(
                    "every key of the table, with its values of the last {history} behind the watermark{state}"
                )),
                gauge.then_some(TABLE_JOIN_GAUGE),
            )
        }
    }
}

fn aggregate(spec: &AggregateSpec, plan: &Plan) -> OperatorInfo {
    let keys: Vec<String> = spec.group_by.iter().map(ToString::to_string).collect();
    let aggregates: Vec<String> = spec
        .aggregates
        .iter()
        .map(|a| match &a.input {
            Some(input) => format!("{:?}({input})", a.kind),
            None => format!("{:?}", a.kind),
        })
        .collect();
    let mut detail = match keys.is_empty() {
        true => "one global group".to_string(),
        false => format!("GROUP BY {}", keys.join(", ")),
    };
    let _ = write!(detail, "; {}", aggregates.join(", "));
    let computed = spec
        .columns
        .iter()
        .filter(|(_, c)| matches!(c, ColumnSource::Computed(_)))
        .count();
    if computed > 0 {
        let _ = write!(detail, "; {computed} column(s) computed over them");
    }
    if let Some(h) = &spec.having {
        let _ = write!(detail, "; HAVING {h}");
    }
    // A subquery's rows feed the outer aggregate, not the view.
    let place = match plan.then {
        Some(_) => "in state (the stage column family), each change handed to the next operator at the commit",
        None => "in the view",
    };
    let state = match &spec.window {
        None => format!("one row per group {place}, kept"),
        Some(w) => {
            let kept = match w.retention_ms {
                Some(r) => format!("deleted {} after its window ends", duration(r)),
                None => "kept".to_string(),
            };
            let (kind, extra) = match w.window {
                WindowSpec::Tumbling { size_ms } => {
                    (format!("TUMBLING {}", duration(size_ms)), String::new())
                }
                WindowSpec::Hopping {
                    size_ms,
                    advance_ms,
                } => (
                    format!(
                        "HOPPING {} every {}",
                        duration(size_ms),
                        duration(advance_ms)
                    ),
                    "; open windows are kept as slices of the advance, each event in one".into(),
                ),
                WindowSpec::Session { gap_ms } => (
                    format!("SESSION gap {}", duration(gap_ms)),
                    "; sessions merge as events bridge them".into(),
                ),
            };
            let _ = write!(
                detail,
                "; WINDOW {kind}, GRACE PERIOD {}, EMIT {:?}",
                duration(w.grace_ms),
                w.emit
            );
            if let LateHandling::SideOutput(t) = &plan.late {
                let _ = write!(detail, "; late events to '{t}'");
            }
            format!(
                "one row per group and window {place}, {kept}; a window is open until its end plus {} is behind the watermark{extra}",
                duration(w.grace_ms)
            )
        }
    };
    op("aggregate", detail, "key-shard workers", Some(state), None)
}

/// A join of the table's rows with another table's.
fn tables_join(j: &RowsJoin) -> OperatorInfo {
    op(
        "join_tables",
        format!(
            "{} the latest row of table topic '{}' whose key is {}, as {}; a joined row changes when either row does",
            match j.kind {
                JoinKind::Left => "LEFT JOIN:",
                _ => "JOIN:",
            },
            j.topic,
            j.on,
            j.alias
        ),
        "coordinator, at each commit",
        Some(
            "the joined table's latest row per key, and an index of the rows by the key they join, in state"
                .into(),
        ),
        None,
    )
}

/// The operator of a query over rows: `final_rows` when they are windows'
/// final rows (what a top-N then holds).
fn rows_aggregate(rows: &RowsAggregate, final_rows: bool) -> OperatorInfo {
    let spec = &rows.aggregate;
    if rows.each_row {
        let names: Vec<&str> = spec.columns.iter().map(|(n, _)| n.as_str()).collect();
        let mut detail = format!(
            "each row a view row of {} column(s): {}",
            names.len(),
            names.join(", ")
        );
        if let Some(f) = &rows.filter {
            let _ = write!(detail, "; WHERE {f}");
        }
        return op(
            "each_row",
            detail,
            "coordinator, at each commit",
            None,
            None,
        );
    }
    if let Some(top) = &rows.top {
        let mut detail = "the rows as they change".to_string();
        if let Some(f) = &rows.filter {
            let _ = write!(detail, "; WHERE {f}");
        }
        let parts: Vec<String> = top.partition_by.iter().map(ToString::to_string).collect();
        let _ = write!(
            detail,
            "; keeps the first {} by {} {} {}, {}",
            top.limit,
            top.order_by,
            if top.descending { "DESC" } else { "ASC" },
            match parts.is_empty() {
                true => "of all rows".to_string(),
                false => format!("in each partition of {}", parts.join(", ")),
            },
            match top.ties {
                true => "with ties (RANK)",
                false => "ties broken by the row's key (ROW_NUMBER)",
            }
        );
        return op(
            "top_n",
            detail,
            "coordinator, at each commit",
            Some(match final_rows {
                // Windows' final rows never change: one not kept never will be.
                true => "the kept rows of each partition in state and in the view (a window's row ranked after the last kept one is dropped as it comes); partitions touched recently in memory".into(),
                false => "every row of each partition in state (the kept ones in the view); partitions touched recently in memory".into(),
            }),
            Some(ROWS_AGGREGATE_GAUGE),
        );
    }
    let keys: Vec<String> = spec.group_by.iter().map(ToString::to_string).collect();
    let aggregates: Vec<String> = spec
        .aggregates
        .iter()
        .filter(|a| a.name != ROWS_AGGREGATE)
        .map(|a| match &a.input {
            Some(input) => format!("{:?}({input})", a.kind),
            None => format!("{:?}", a.kind),
        })
        .collect();
    let mut detail = "the rows as they change, each change retracting the row's previous version and adding its new one".to_string();
    if let Some(f) = &rows.filter {
        let _ = write!(detail, "; WHERE {f}");
    }
    match keys.is_empty() {
        true => detail.push_str("; one global group"),
        false => {
            let _ = write!(detail, "; GROUP BY {}", keys.join(", "));
        }
    }
    let _ = write!(detail, "; {}", aggregates.join(", "));
    if let Some(h) = &spec.having {
        let _ = write!(detail, "; HAVING {h}");
    }
    let multisets = spec.aggregates.iter().any(|a| {
        matches!(
            a.kind,
            AggregateKind::Min | AggregateKind::Max | AggregateKind::CountDistinct
        )
    });
    let mut state = "one row per group in the view, deleted when the group holds no subquery row; the subquery's rows are its own state".to_string();
    if multisets {
        state.push_str("; MIN, MAX and COUNT_DISTINCT keep every distinct value of their group");
    }
    op(
        "aggregate_rows",
        detail,
        "coordinator, at each commit",
        Some(state),
        Some(ROWS_AGGREGATE_GAUGE),
    )
}

fn sink(plan: &Plan) -> OperatorInfo {
    let detail = match (&plan.sink, &plan.sink_cluster) {
        (Sink::View, _) => format!("the view '{}' (queried by key)", plan.name),
        (Sink::Topic(t), None) => {
            format!("topic '{t}' through the commit's outbox (exactly once)")
        }
        (Sink::Topic(t), Some(c)) => {
            format!("topic '{t}' on cluster '{c}', one Kafka transaction per commit")
        }
    };
    op("sink", detail, "coordinator", None, None)
}

/// The operators as text, one per line with its state below it; `live`
/// (operator gauges of a running version) adds the entries each keeps now,
/// and `state_bytes` the version's state on disk.
pub fn render(
    ops: &[OperatorInfo],
    live: &BTreeMap<String, u64>,
    state_bytes: Option<u64>,
) -> String {
    let mut text = String::new();
    for (i, o) in ops.iter().enumerate() {
        let arrow = if i == 0 { "" } else { "-> " };
        let _ = writeln!(text, "{arrow}{} [{}]: {}", o.operator, o.runs_on, o.detail);
        if let Some(state) = &o.state {
            let _ = write!(text, "     state: {state}");
            if let Some(n) = o.gauge.and_then(|g| live.get(g)) {
                let _ = write!(text, " (now {n} entries in memory)");
            }
            text.push('\n');
        }
    }
    if let Some(bytes) = state_bytes {
        let _ = writeln!(
            text,
            "state on disk (view rows and operator state): {bytes} bytes"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

    use super::*;
    use crate::expr::Expr;

    #[test]
    fn durations_use_the_largest_whole_unit() {
        assert_eq!(duration(3_600_000), "1 h");
        assert_eq!(duration(90_000), "90 s");
        assert_eq!(duration(86_400_000 * 2), "2 d");
        assert_eq!(duration(1_500), "1500 ms");
        assert_eq!(duration(0), "0 ms");
    }

    #[test]
    fn expressions_read_back_as_sql() {
        use crate::expr::{BinaryOp, Function};
        use serde_json::json;
        let e = Expr::Binary(
            BinaryOp::And,
            Box::new(Expr::Binary(
                BinaryOp::Eq,
                Box::new(Expr::Field(vec!["a".into(), "category".into()])),
                Box::new(Expr::Literal(json!(10))),
            )),
            Box::new(Expr::InList {
                expr: Box::new(Expr::Function(
                    Function::Upper,
                    vec![Expr::Field(vec!["p".into(), "state".into()])],
                )),
                list: vec![Expr::Literal(json!("O'R")), Expr::Literal(json!("CA"))],
                negated: true,
            }),
        );
        assert_eq!(
            e.to_string(),
            "((a.category = 10) AND (UPPER(p.state) NOT IN ('O''R', 'CA')))"
        );
    }
}
