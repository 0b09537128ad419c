//! `CREATE .. AS SELECT` into a [`Plan`]: resolves the sources through the
//! catalog, then builds the operators in plan order (source and event time
//! → dedup → join → filter → aggregate or projection → sink).
//!
//! `CREATE STREAM .. AS` is a per-event projection sunk to a topic; `CREATE
//! TABLE .. AS` is an aggregate (windowed or running) sunk to a view.

use sqlparser::ast::{self as ast, SelectItem, SelectItemQualifiedWildcardKind, Spanned};
use sqlparser::parser::Parser;
use sqlparser::tokenizer::{Location, Span, Token, TokenWithSpan};

use super::aggregate::aggregate_spec;
use super::defaults;
use super::error::{Result, SqlError};
use super::ksql::{QueryTokens, WithinClause};
use super::lex::{self, normalize, DIALECT};
use super::limits;
use super::query::{known, object_name, JoinParts, QueryParts, Relation};
use super::resolve::{Resolved, Scope, Side, TableSide};
use super::statement::{self, parse_sql_expr};
use super::translate::{aggregate_call, Translator};
use super::types::{ColumnDecl, CreateAs, ObjectKind, SourceDecl, SqlType};
use super::SourceCatalog;
use crate::accumulators::AggregateKind;
use crate::event::JOINED_KEY_COLUMN;
use crate::expr::{DataType, Expr};
use crate::operator::table_aggregate::ROWS_AGGREGATE;
use crate::plan::{
    AggregateColumn, DedupSpec, EventTime, InnerRows, JoinKind, JoinSpec, LateHandling, Operation,
    Plan, RowsAggregate, RowsJoin, Sink, SourceSpec, WindowedSpec, WithinSpec,
};

/// Plans `stmt`; error positions are in the text it was parsed from.
pub(crate) fn plan(stmt: &CreateAs, catalog: &dyn SourceCatalog) -> Result<Plan> {
    build(stmt, catalog).map_err(|e| e.shifted(stmt.line, stmt.column))
}

fn build(stmt: &CreateAs, catalog: &dyn SourceCatalog) -> Result<Plan> {
    let statements = lex::split(&stmt.sql)?;
    let [st] = statements.as_slice() else {
        return Err(SqlError::new(
            "expected exactly one CREATE .. AS statement",
            1,
            1,
        ));
    };
    let (decl, parsed) = statement::parse_create_as(st)?;
    if parsed.inner.is_none() {
        let parts = QueryParts::of(&parsed.query, st.end)?;
        let name = parts.from.name.normalized();
        if catalog.source(&name).is_none() {
            if let Some(sql) = catalog.table_query(&name) {
                let inlined = super::view_ref::inline(
                    st,
                    parts.from.name.span,
                    &name,
                    &sql,
                    parts.from.alias.is_some(),
                    catalog,
                )?;
                let (decl, parsed) = statement::parse_create_as(&inlined)?;
                return build_parsed(&inlined, decl, parsed, catalog);
            }
        }
    }
    build_parsed(st, decl, parsed, catalog)
}

/// Plans a parsed `CREATE .. AS` (`st`'s).
fn build_parsed(
    st: &lex::StatementTokens,
    decl: CreateAs,
    parsed: statement::ParsedCreateAs,
    catalog: &dyn SourceCatalog,
) -> Result<Plan> {
    let at = st.start;
    let dedup_span = parsed.dedup_span;
    match &parsed.inner {
        None => {
            let parts = QueryParts::of(&parsed.query, st.end)?;
            match catalog.source(&parts.from.name.normalized()) {
                Some(table) if table.kind == ObjectKind::Table => {
                    plan_table_rows(&decl, &parsed, parts, table, dedup_span, catalog, at)
                }
                _ => plan_select(
                    &decl,
                    &parsed.query,
                    &parsed.clauses,
                    dedup_span,
                    catalog,
                    at,
                    st.end,
                ),
            }
        }
        Some(inner) => {
            let inner_parts = QueryParts::of(&inner.query, st.end)?;
            if !is_aggregated(&inner_parts, inner.span.start)? {
                return Err(SqlError::span(
                    inner.span,
                    "the subquery must aggregate (GROUP BY or an aggregate): the query over it aggregates its rows",
                ));
            }
            let mut plan = match decl.kind {
                ObjectKind::Table => plan_select(
                    &decl,
                    &inner.query,
                    &inner.clauses,
                    dedup_span,
                    catalog,
                    inner.span.start,
                    st.end,
                )?,
                ObjectKind::Stream => {
                    return Err(SqlError::span(
                        inner.span,
                        "CREATE STREAM .. AS cannot read a subquery: a query over another query's rows aggregates them into a table; use CREATE TABLE .. AS",
                    ))
                }
            };
            // A windowed subquery hands over its windows' final rows unless
            // it says EMIT CHANGES, as Flink's window aggregates do.
            if let (Operation::Aggregate(spec), None) = (&mut plan.operation, inner.clauses.emit) {
                if let Some(w) = &mut spec.window {
                    w.emit = crate::plan::Emit::Final;
                }
            }
            plan.then = Some(rows_aggregate(&plan, &parsed, inner, at, st.end)?);
            plan.validate().map_err(|reason| SqlError::at(at, reason))?;
            Ok(plan)
        }
    }
}

/// The outer query of `parsed`, aggregating the rows of `inner` (planned
/// as `plan`): `GROUP BY` and aggregates over the inner query's output
/// columns, its `WHERE` over its rows; no window, join or other clause.
fn rows_aggregate(
    plan: &Plan,
    parsed: &statement::ParsedCreateAs,
    inner: &statement::InnerQuery,
    at: Location,
    end: Location,
) -> Result<RowsAggregate> {
    let Operation::Aggregate(inner_spec) = &plan.operation else {
        return Err(SqlError::at(at, "the subquery must aggregate (GROUP BY)"));
    };
    let parts = QueryParts::of(&parsed.query, end)?;
    if let Some(j) = parts.joins.first() {
        return Err(SqlError::span(
            j.table.name.span,
            "a query over a subquery's rows cannot JOIN (join inside the subquery)",
        ));
    }
    if parts.from.name.normalized() != inner.name.normalized() {
        return Err(SqlError::span(
            parts.from.name.span,
            format!(
                "a query with a common table expression reads it: FROM {}",
                inner.name.value
            ),
        ));
    }
    let reads = RowsRead {
        scope: Scope {
            stream: Side {
                qualifiers: qualifiers(&parts.from),
                decl: rows_table(inner, inner_spec),
            },
            tables: Vec::new(),
        },
        join: None,
        inner: InnerRows::Aggregate(inner_spec),
        inner_span: inner.span,
        refusal: |what| {
            format!("{what} applies to the subquery: the query over its rows aggregates a table")
        },
    };
    aggregate_rows(parts, &parsed.clauses, reads, at)
}

/// What a query over rows reads: the rows, and how to word a refusal.
struct RowsRead<'a> {
    /// The rows' columns (and a joined table's) in scope.
    scope: Scope,
    /// The join of a declared table's rows with another table's.
    join: Option<RowsJoin>,
    /// Where they come from.
    inner: InnerRows<'a>,
    /// Where the rows' query or table is named, for errors about them.
    inner_span: Span,
    /// Why a clause of a query over them is refused (`WINDOW`, ..).
    refusal: fn(&str) -> String,
}

/// The query `parts` over the rows `reads` describes: `GROUP BY` and
/// aggregates over their columns (the last a hidden row count), or a
/// top-N (`QUALIFY`); its `WHERE` over the rows.
fn aggregate_rows(
    parts: QueryParts<'_>,
    clauses: &QueryTokens,
    reads: RowsRead<'_>,
    at: Location,
) -> Result<RowsAggregate> {
    let refused = |span: Span, what: &str| Err(SqlError::span(span, (reads.refusal)(what)));
    if let Some(w) = &clauses.window {
        return refused(w.span, "WINDOW");
    }
    if let Some(w) = &clauses.within {
        return refused(w.span, "WITHIN");
    }
    if let Some((_, span)) = &clauses.emit {
        return refused(*span, "EMIT");
    }
    if let Some((_, span)) = &clauses.partition_by {
        return refused(*span, "PARTITION BY");
    }
    let scope = reads.scope;
    let filter = where_filter(&parts, &scope, at)?;
    let validated = |rows: RowsAggregate| {
        rows.validate(reads.inner)
            .map_err(|reason| SqlError::span(reads.inner_span, reason))?;
        Ok(rows)
    };
    if let Some(q) = parts.qualify {
        let (top, aggregate) = super::top_n::top_n(&parts, q, &scope, at)?;
        return validated(RowsAggregate {
            filter,
            aggregate,
            top: Some(top),
            each_row: false,
            join: reads.join,
        });
    }
    let distinct_items = distinct_items(&parts, ObjectKind::Table, at)?;
    let parts = match &distinct_items {
        Some(items) => QueryParts {
            group_by: items,
            ..parts
        },
        None => parts,
    };
    if !is_aggregated(&parts, at)? {
        if let InnerRows::Aggregate(_) = reads.inner {
            return Err(SqlError::at(
                at,
                "a query over a subquery's rows must aggregate them (GROUP BY or an aggregate); to filter the subquery's rows, give it a HAVING",
            ));
        }
        // Each row of the table (or of the join) is a view row.
        let columns = projection(&parts, &scope, at)?;
        return validated(RowsAggregate {
            filter,
            aggregate: super::top_n::values_spec(columns),
            top: None,
            each_row: true,
            join: reads.join,
        });
    }
    let mut aggregate = aggregate_spec(&parts, &scope, None, at)?;
    aggregate.aggregates.push(AggregateColumn {
        name: ROWS_AGGREGATE.to_string(),
        kind: AggregateKind::CountAll,
        input: None,
    });
    validated(RowsAggregate {
        filter,
        aggregate,
        top: None,
        each_row: false,
        join: reads.join,
    })
}

/// `CREATE TABLE .. AS SELECT .. FROM table ..`: the query `parts` over
/// the rows of the declared table `table` — the latest row per record key
/// of its topic — aggregating (or ranking) them as they change.
fn plan_table_rows(
    decl: &CreateAs,
    parsed: &statement::ParsedCreateAs,
    parts: QueryParts<'_>,
    table: SourceDecl,
    dedup_span: Option<Span>,
    catalog: &dyn SourceCatalog,
    at: Location,
) -> Result<Plan> {
    let from = parts.from.name.span;
    if decl.kind == ObjectKind::Stream {
        return Err(SqlError::span(
            from,
            format!(
                "'{}' is a table, not a stream: CREATE STREAM .. AS reads a stream; aggregate a table's rows with CREATE TABLE .. AS, or JOIN it to a stream",
                table.name
            ),
        ));
    }
    if let Some(span) = dedup_span {
        return Err(SqlError::span(
            span,
            "DEDUP_BY drops repeated events of a stream; a table holds one row per key",
        ));
    }
    if table.columns.is_empty() {
        return Err(SqlError::span(
            from,
            format!(
                "a query over table '{}' reads its declared columns, and it declares none",
                table.name
            ),
        ));
    }
    let reading = Scope {
        stream: Side {
            qualifiers: qualifiers(&parts.from),
            decl: table.clone(),
        },
        tables: Vec::new(),
    };
    // Each record becomes the row of its key: the table's columns, the
    // key column read from the record key.
    let columns = table
        .columns
        .iter()
        .map(|c| (c.name.clone(), reading.stream_column(c)))
        .collect();
    let rows_decl = SourceDecl {
        columns: table
            .columns
            .iter()
            .map(|c| ColumnDecl {
                key: false,
                ..c.clone()
            })
            .collect(),
        ..table.clone()
    };
    let mut scope = Scope {
        stream: Side {
            qualifiers: qualifiers(&parts.from),
            decl: rows_decl,
        },
        tables: Vec::new(),
    };
    let join = match parts.joins.as_slice() {
        [] => None,
        [j] => Some(tables_join(catalog, j, &parsed.clauses, &mut scope, at)?),
        [_, second, ..] => {
            return Err(SqlError::span(
                second.table.name.span,
                "a join of tables joins two tables: join a third from a stream (FROM the stream JOIN .. JOIN ..)",
            ))
        }
    };
    let reads = RowsRead {
        scope,
        join,
        inner: InnerRows::Table,
        inner_span: from,
        refusal: |what| {
            format!("{what} does not apply to a table's rows: a query over them follows each row's latest version")
        },
    };
    let then = aggregate_rows(parts, &parsed.clauses, reads, at)?;
    let late = match &decl.late_topic {
        Some(_) => {
            return Err(SqlError::at(
                at,
                "LATE_TOPIC needs a WINDOW clause: only windowed aggregates have late events",
            ))
        }
        None => LateHandling::Drop,
    };
    if decl.join_history_ms.is_some() {
        return Err(SqlError::at(
            at,
            "JOIN_HISTORY needs a JOIN: it says how long a joined table's history is kept",
        ));
    }
    let plan = Plan {
        name: decl.name.clone(),
        source: source_spec(decl, &table),
        dedup: None,
        join: None,
        more_joins: Vec::new(),
        filter: None,
        operation: Operation::Project { columns },
        sink: Sink::View,
        late,
        sink_cluster: None,
        partition_by: None,
        spread_stage: None,
        then: Some(then),
    };
    plan.validate().map_err(|reason| SqlError::at(at, reason))?;
    Ok(plan)
}

/// The join of the declared table in `scope` with the table `j` names
/// (put in scope): `ON` an expression over the first table's columns `=`
/// the joined table's key column.
fn tables_join(
    catalog: &dyn SourceCatalog,
    j: &JoinParts<'_>,
    clauses: &QueryTokens,
    scope: &mut Scope,
    at: Location,
) -> Result<RowsJoin> {
    let joined_name = j.table.name.normalized();
    let joined = catalog.source(&joined_name);
    if let Some(s) = joined.as_ref().filter(|s| s.kind == ObjectKind::Stream) {
        return Err(SqlError::span(
            j.table.name.span,
            format!(
                "'{}' is a stream: a table joins a table here; to enrich a stream's events from a table, write FROM the stream JOIN the table",
                s.name
            ),
        ));
    }
    let spec = join_spec(catalog, j, clauses.within.as_ref(), scope, at)?;
    let key_column = joined
        .and_then(|t| t.columns.into_iter().find(|c| c.key))
        .map(|c| c.name);
    Ok(RowsJoin {
        topic: spec.table_topic,
        on: spec.stream_key,
        alias: spec.alias,
        kind: spec.kind,
        key_column,
    })
}

/// The query's `WHERE`, translated over `scope`.
fn where_filter(parts: &QueryParts<'_>, scope: &Scope, at: Location) -> Result<Option<Expr>> {
    parts
        .select
        .selection
        .as_ref()
        .map(|w| {
            Translator {
                names: &scope.names("WHERE", "filter aggregated rows with HAVING"),
                at,
            }
            .expr(w)
        })
        .transpose()
}

/// The rows of the subquery `inner` (planned as `spec`) as a table of its
/// output columns, for the outer query to read.
fn rows_table(inner: &statement::InnerQuery, spec: &crate::plan::AggregateSpec) -> SourceDecl {
    SourceDecl {
        name: inner.name.normalized(),
        kind: ObjectKind::Table,
        columns: spec
            .columns
            .iter()
            .map(|(name, _)| ColumnDecl {
                name: name.clone(),
                sql_type: SqlType::Json,
                key: false,
            })
            .collect(),
        topic: String::new(),
        cluster: None,
        value_format: "JSON".into(),
        timestamp: None,
        watermark_delay_ms: 0,
        idle_timeout_ms: 1,
        partitions: None,
        sql: String::new(),
    }
}

/// Plans one `SELECT` reading a stream (the whole query, or the inner one
/// of a subquery or CTE, which is planned as a table).
#[allow(clippy::too_many_arguments)]
fn plan_select(
    decl: &CreateAs,
    query: &ast::Query,
    clauses: &QueryTokens,
    dedup_span: Option<Span>,
    catalog: &dyn SourceCatalog,
    at: Location,
    end: Location,
) -> Result<Plan> {
    let parts = QueryParts::of(query, end)?;
    parts.refuse_qualify(at)?;
    let distinct_items = distinct_items(&parts, decl.kind, at)?;
    // `SELECT DISTINCT items` groups by its items: one row per distinct value.
    let parts = match &distinct_items {
        Some(items) => QueryParts {
            group_by: items,
            ..parts
        },
        None => parts,
    };
    let stream = lookup(catalog, &parts.from, ObjectKind::Stream)?;
    let mut scope = Scope {
        stream: Side {
            qualifiers: qualifiers(&parts.from),
            decl: stream,
        },
        tables: Vec::new(),
    };
    let mut joins = parts.joins.iter();
    let join = match joins.next() {
        Some(j) => Some(join_spec(
            catalog,
            j,
            clauses.within.as_ref(),
            &mut scope,
            at,
        )?),
        None => match &clauses.within {
            Some(w) => {
                return Err(SqlError::span(
                    w.span,
                    "WITHIN bounds a JOIN of two streams, and the query has no JOIN",
                ))
            }
            None => None,
        },
    };
    // The tables joined after the first join: as of each event's time.
    let more_joins = joins
        .map(|j| further_join_spec(catalog, j, &mut scope, at))
        .collect::<Result<Vec<_>>>()?;
    let dedup = match (&decl.dedup, dedup_span) {
        (Some(d), Some(span)) => Some(dedup_spec(&d.by, d.ttl_ms, span, &scope)?),
        _ => None,
    };
    let filter = where_filter(&parts, &scope, at)?;
    let window = clauses.window.as_ref().map(|w| WindowedSpec {
        window: w.spec,
        grace_ms: w.grace_ms.unwrap_or(defaults::GRACE_MS),
        emit: clauses.emit.map_or(defaults::EMIT, |(emit, _)| emit),
        retention_ms: w.retention_ms,
    });
    if let (None, Some((crate::plan::Emit::Final, span))) = (&window, clauses.emit) {
        return Err(SqlError::span(
            span,
            "EMIT FINAL needs a WINDOW clause: a row is final when its window closes",
        ));
    }
    let aggregated = is_aggregated(&parts, at)?;
    let operation = if aggregated {
        if decl.kind == ObjectKind::Stream {
            return Err(SqlError::at(
                at,
                "CREATE STREAM .. AS cannot aggregate (GROUP BY, aggregates): an aggregate is a table; use CREATE TABLE .. AS",
            ));
        }
        Operation::Aggregate(aggregate_spec(&parts, &scope, window, at)?)
    } else {
        if decl.kind == ObjectKind::Table {
            return Err(SqlError::at(
                at,
                "CREATE TABLE .. AS needs GROUP BY or an aggregate; use CREATE STREAM .. AS for a per-event projection",
            ));
        }
        if let Some(w) = &clauses.window {
            return Err(SqlError::span(
                w.span,
                "a WINDOW clause needs GROUP BY or an aggregate",
            ));
        }
        Operation::Project {
            columns: projection(&parts, &scope, at)?,
        }
    };
    let late = match &decl.late_topic {
        Some(t) if clauses.window.is_some() => LateHandling::SideOutput(t.clone()),
        Some(_) => {
            return Err(SqlError::at(
                at,
                "LATE_TOPIC needs a WINDOW clause: only windowed aggregates have late events",
            ))
        }
        None => LateHandling::Drop,
    };
    // JOIN_HISTORY: how long every joined table's history is kept.
    let more_joins: Vec<JoinSpec> = more_joins
        .into_iter()
        .map(|j| JoinSpec {
            history_ms: decl.join_history_ms,
            ..j
        })
        .collect();
    let join = match (join, decl.join_history_ms) {
        (Some(join), Some(_)) if join.joins_stream() && !more_joins.is_empty() => Some(join),
        (Some(join), Some(_)) if join.joins_stream() => {
            return Err(SqlError::at(
                at,
                "JOIN_HISTORY applies to a table join: a join of two streams keeps events for its WITHIN bound and GRACE PERIOD",
            ))
        }
        (Some(join), history_ms) => Some(JoinSpec { history_ms, ..join }),
        (None, Some(_)) => {
            return Err(SqlError::at(
                at,
                "JOIN_HISTORY needs a JOIN: it says how long a joined table's history is kept",
            ))
        }
        (None, None) => None,
    };
    let partition_by = match &clauses.partition_by {
        Some((tokens, span)) => {
            if decl.kind == ObjectKind::Table {
                return Err(SqlError::span(
                    *span,
                    "PARTITION BY applies to CREATE STREAM .. AS: a table's rows are keyed by its GROUP BY",
                ));
            }
            Some(partition_by(tokens, *span, &scope, at)?)
        }
        None => None,
    };
    let plan = Plan {
        name: decl.name.clone(),
        source: source_spec(decl, &scope.stream.decl),
        dedup,
        join,
        more_joins,
        filter,
        operation,
        sink: match decl.kind {
            ObjectKind::Stream => {
                Sink::Topic(decl.topic.clone().unwrap_or_else(|| decl.name.clone()))
            }
            ObjectKind::Table => Sink::View,
        },
        late,
        sink_cluster: match decl.kind {
            ObjectKind::Stream => decl.cluster.clone(),
            ObjectKind::Table => None,
        },
        partition_by,
        spread_stage: None,
        then: None,
    };
    plan.validate().map_err(|reason| SqlError::at(at, reason))?;
    Ok(plan)
}

/// The items of `SELECT DISTINCT items` (the `GROUP BY` they make), or
/// `None` without `DISTINCT`; refuses what `DISTINCT` does not fit: a
/// stream (its events are not rows of a key), `GROUP BY`, aggregates,
/// `HAVING` and `*`.
fn distinct_items(
    parts: &QueryParts<'_>,
    kind: ObjectKind,
    at: Location,
) -> Result<Option<Vec<ast::Expr>>> {
    let Some(span) = parts.distinct else {
        return Ok(None);
    };
    if kind == ObjectKind::Stream {
        return Err(SqlError::span(
            span,
            "SELECT DISTINCT makes a table of the distinct rows: use CREATE TABLE .. AS SELECT DISTINCT, or DEDUP_BY to drop repeated events from a stream",
        ));
    }
    if !parts.group_by.is_empty() || parts.select.having.is_some() || is_aggregated(parts, at)? {
        return Err(SqlError::span(
            span,
            "SELECT DISTINCT with GROUP BY, HAVING or aggregates: the rows are already one per group",
        ));
    }
    parts
        .select
        .projection
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Ok(e.clone()),
            other => Err(SqlError::span(
                known(other.span(), at),
                "SELECT DISTINCT needs its columns listed, not *",
            )),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// `PARTITION BY expr`: the expression, read over the event (after the
/// join) as a SELECT item is.
fn partition_by(tokens: &[TokenWithSpan], span: Span, scope: &Scope, at: Location) -> Result<Expr> {
    if tokens.is_empty() {
        return Err(SqlError::span(
            span,
            "expected an expression after PARTITION BY",
        ));
    }
    limits::check_nesting(tokens)?;
    let mut p = Parser::new(&DIALECT)
        .with_recursion_limit(limits::PARSER_RECURSION_LIMIT)
        .with_tokens_with_locations(tokens.to_vec());
    let expr = p
        .parse_expr()
        .map_err(|e| SqlError::span(span, format!("PARTITION BY: {e}")))?;
    let next = p.peek_token();
    if next.token != Token::EOF {
        return Err(SqlError::span(
            next.span,
            format!(
                "expected end of the PARTITION BY expression, found {}",
                lex::describe(Some(&next))
            ),
        ));
    }
    let names = scope.names("PARTITION BY", "a stream's records are keyed per event");
    Translator { names: &names, at }.expr(&expr)
}

fn source_spec(decl: &CreateAs, stream: &SourceDecl) -> SourceSpec {
    SourceSpec {
        topic: stream.topic.clone(),
        cluster: stream.cluster.clone(),
        event_time: match &stream.timestamp {
            Some(col) => EventTime::Field(vec![col.clone()]),
            None => EventTime::RecordTimestamp,
        },
        out_of_orderness_ms: decl.watermark_delay_ms.unwrap_or(stream.watermark_delay_ms),
        idle_timeout_ms: decl.idle_timeout_ms.unwrap_or(stream.idle_timeout_ms),
        max_future_ms: decl.max_future_ms.unwrap_or(defaults::MAX_FUTURE_MS),
        typed_fields: typed_fields(stream),
    }
}

/// The stream's declared value columns with a checkable type: a record
/// whose field holds a value of another type is invalid.
fn typed_fields(stream: &SourceDecl) -> Vec<(String, DataType)> {
    use super::types::SqlType;
    let typed = |t: SqlType| match t {
        SqlType::Boolean => Some(DataType::Boolean),
        SqlType::Integer | SqlType::BigInt => Some(DataType::Integer),
        SqlType::Double => Some(DataType::Double),
        SqlType::Decimal { precision, scale } => Some(DataType::Decimal { precision, scale }),
        SqlType::Varchar => Some(DataType::String),
        SqlType::Timestamp => Some(DataType::Timestamp),
        SqlType::Json => None,
    };
    stream
        .columns
        .iter()
        .filter(|c| !c.key)
        .filter_map(|c| Some((c.name.clone(), typed(c.sql_type)?)))
        .collect()
}

fn qualifiers(r: &Relation) -> Vec<String> {
    let mut q = vec![r.qualifier()];
    let name = r.name.normalized();
    if !q.contains(&name) {
        q.push(name);
    }
    q
}

/// Looks `r` up and checks it is a `want`.
fn lookup(catalog: &dyn SourceCatalog, r: &Relation, want: ObjectKind) -> Result<SourceDecl> {
    let name = r.name.normalized();
    let Some(decl) = catalog.source(&name) else {
        return Err(SqlError::span(
            r.name.span,
            format!("unknown {want} '{name}'"),
        ));
    };
    if decl.kind != want {
        let hint = match want {
            ObjectKind::Stream => "FROM reads a stream; join tables with JOIN .. ON",
            ObjectKind::Table => "JOIN enriches a stream from a table (the latest row per key)",
        };
        return Err(SqlError::span(
            r.name.span,
            format!("'{name}' is a {}, not a {want}: {hint}", decl.kind),
        ));
    }
    Ok(decl)
}

/// Builds the join and puts the joined table or stream in scope.
fn join_spec(
    catalog: &dyn SourceCatalog,
    j: &JoinParts<'_>,
    within: Option<&WithinClause>,
    scope: &mut Scope,
    at: Location,
) -> Result<JoinSpec> {
    let joined_name = j.table.name.normalized();
    let Some(joined) = catalog.source(&joined_name) else {
        return Err(SqlError::span(
            j.table.name.span,
            format!("unknown table or stream '{joined_name}'"),
        ));
    };
    let field = j.table.qualifier();
    let name_span = j.table.alias.as_ref().unwrap_or(&j.table.name).span;
    if scope.stream.qualifiers.contains(&field) {
        return Err(SqlError::span(
            name_span,
            format!(
                "the stream and the joined {} need different names or aliases",
                joined.kind
            ),
        ));
    }
    if scope
        .tables
        .iter()
        .any(|t| t.side.qualifiers.contains(&field))
    {
        return Err(SqlError::span(
            name_span,
            format!("'{field}' is joined twice: give each join its own alias"),
        ));
    }
    if joined.cluster != scope.stream.decl.cluster {
        let place = |c: &Option<String>| match c {
            Some(c) => format!("cluster '{c}'"),
            None => "the built-in log".to_string(),
        };
        return Err(SqlError::span(
            j.table.name.span,
            format!(
                "{} '{}' lives on {} and stream '{}' on {}: a join reads both from the same place",
                joined.kind,
                joined.name,
                place(&joined.cluster),
                scope.stream.decl.name,
                place(&scope.stream.decl.cluster)
            ),
        ));
    }
    if let Some(c) = scope
        .stream
        .decl
        .columns
        .iter()
        .find(|c| normalize(&c.name, false) == field)
    {
        return Err(SqlError::span(
            name_span,
            format!(
                "the {}'s alias '{field}' would hide stream column '{}'; choose another alias",
                joined.kind, c.name
            ),
        ));
    }
    scope.tables.push(TableSide {
        side: Side {
            qualifiers: qualifiers(&j.table),
            decl: joined.clone(),
        },
        field: field.clone(),
        key: None,
    });
    match (joined.kind, within) {
        (ObjectKind::Stream, Some(w)) => stream_join_spec(joined, j, w, scope, at),
        (ObjectKind::Stream, None) => Err(SqlError::span(
            j.table.name.span,
            format!(
                "'{joined_name}' is a stream: a join of two streams needs a time bound, e.g. JOIN {joined_name} WITHIN 10 MINUTES ON .."
            ),
        )),
        (ObjectKind::Table, Some(w)) => Err(SqlError::span(
            w.span,
            "WITHIN bounds a join of two streams; a table is joined as of each event's time",
        )),
        (ObjectKind::Table, None) if j.kind == JoinKind::Full => Err(SqlError::span(
            j.table.name.span,
            "FULL JOIN joins two streams (JOIN .. WITHIN); a table is joined with JOIN or LEFT JOIN",
        )),
        (ObjectKind::Table, None) => table_join_spec(joined, j, field, scope, at),
    }
}

/// A join after the query's first: a table, as of each event's time (a
/// query joins at most one stream, with its first JOIN). Its `ON` may read
/// the tables joined before it.
fn further_join_spec(
    catalog: &dyn SourceCatalog,
    j: &JoinParts<'_>,
    scope: &mut Scope,
    at: Location,
) -> Result<JoinSpec> {
    let name = j.table.name.normalized();
    if let Some(s) = catalog
        .source(&name)
        .filter(|s| s.kind == ObjectKind::Stream)
    {
        return Err(SqlError::span(
            j.table.name.span,
            format!(
                "'{}' is a stream: a query joins at most one stream, with its first JOIN; the joins after it join tables",
                s.name
            ),
        ));
    }
    join_spec(catalog, j, None, scope, at)
}

/// The join of a table, in scope as `field`.
fn table_join_spec(
    table: SourceDecl,
    j: &JoinParts<'_>,
    field: String,
    scope: &mut Scope,
    at: Location,
) -> Result<JoinSpec> {
    let stream_key = join_key(j.on, scope, at)?;
    if let Some(t) = scope.tables.last_mut() {
        t.key = Some(match j.kind {
            JoinKind::Inner => stream_key.clone(),
            JoinKind::Left | JoinKind::Full => Expr::Case {
                operand: None,
                branches: vec![(
                    Expr::IsNull {
                        expr: Box::new(Expr::Field(vec![field.clone()])),
                        negated: true,
                    },
                    stream_key.clone(),
                )],
                otherwise: None,
            },
        });
    }
    Ok(JoinSpec {
        table_time: table.timestamp.clone().map(|c| vec![c]),
        history_ms: None,
        table_topic: table.topic,
        stream_key,
        alias: field,
        kind: j.kind,
        within: None,
    })
}

/// The join of a stream within `within`, in scope: `ON` compares an
/// expression over the stream with one over the joined stream (its key
/// column reads the joined event's record key).
fn stream_join_spec(
    joined: SourceDecl,
    j: &JoinParts<'_>,
    within: &WithinClause,
    scope: &mut Scope,
    at: Location,
) -> Result<JoinSpec> {
    if let Some(t) = scope.tables.last_mut() {
        t.key = Some(Expr::Column(JOINED_KEY_COLUMN.to_string()));
    }
    let span = known(j.on.span(), at);
    let expected = "expected ON <stream expression> = <joined stream expression>";
    let ast::Expr::BinaryOp {
        left,
        op: ast::BinaryOperator::Eq,
        right,
    } = strip(j.on)
    else {
        return Err(SqlError::span(span, expected));
    };
    let names = scope.names("ON", "join on columns, not aggregates");
    let translate = |e: &ast::Expr| Translator { names: &names, at }.expr(e);
    let (l, r) = (translate(left)?, translate(right)?);
    let alias = scope
        .tables
        .last()
        .map(|t| t.field.clone())
        .unwrap_or_default();
    let reads = |e: &Expr| crate::operator::stream_join::sides_read(e, &alias);
    let (stream_key, joined_key) = match (reads(&l), reads(&r)) {
        ((true, false), (false, true)) => (l, r),
        ((false, true), (true, false)) => (r, l),
        _ => {
            return Err(SqlError::span(
                span,
                format!("{expected}: each side reads one of the two streams"),
            ))
        }
    };
    Ok(JoinSpec {
        table_time: joined.timestamp.clone().map(|c| vec![c]),
        history_ms: None,
        table_topic: joined.topic.clone(),
        stream_key,
        alias,
        kind: j.kind,
        within: Some(WithinSpec {
            before_ms: within.before_ms,
            after_ms: within.after_ms,
            grace_ms: within.grace_ms.unwrap_or(defaults::GRACE_MS),
            joined_key,
            typed_fields: typed_fields(&joined),
        }),
    })
}

/// `ON a = b`: one side is the table's key, the other a stream expression.
fn join_key(on: &ast::Expr, scope: &Scope, at: Location) -> Result<Expr> {
    let span = known(on.span(), at);
    let expected = "expected ON <stream expression> = <table key column> (a table is joined on its PRIMARY KEY)";
    let ast::Expr::BinaryOp {
        left,
        op: ast::BinaryOperator::Eq,
        right,
    } = strip(on)
    else {
        return Err(SqlError::span(span, expected));
    };
    let is_key = |e: &ast::Expr| -> Result<bool> {
        let (parts, span) = match strip(e) {
            ast::Expr::Identifier(id) => (std::slice::from_ref(id), known(id.span, at)),
            ast::Expr::CompoundIdentifier(ids) => (ids.as_slice(), known(e.span(), at)),
            _ => return Ok(false),
        };
        // The key of the table this ON joins: the last one in scope.
        let resolved = scope.resolve(parts, span)?;
        let joined = scope.tables.len().checked_sub(1);
        Ok(joined.is_some_and(|place| resolved == Resolved::TableKey(place)))
    };
    let stream_side = match (is_key(left)?, is_key(right)?) {
        (true, false) => right,
        (false, true) => left,
        _ => return Err(SqlError::span(span, expected)),
    };
    let names = scope.names("ON", "join on columns, not aggregates");
    let key = Translator { names: &names, at }.expr(stream_side)?;
    let table_field = scope.tables.last().map(|t| t.field.clone());
    if key
        .fields()
        .iter()
        .any(|p| p.first() == table_field.as_ref())
    {
        return Err(SqlError::span(
            known(stream_side.span(), at),
            "the stream side of ON must not read the table",
        ));
    }
    Ok(key)
}

fn strip(e: &ast::Expr) -> &ast::Expr {
    match e {
        ast::Expr::Nested(inner) => strip(inner),
        other => other,
    }
}

fn dedup_spec(by: &str, ttl_ms: i64, span: Span, scope: &Scope) -> Result<DedupSpec> {
    let expr = parse_sql_expr(by)
        .map_err(|e| SqlError::span(span, format!("DEDUP_BY '{by}': {}", e.message)))?;
    let stream_only = Scope {
        stream: scope.stream.clone(),
        tables: Vec::new(),
    };
    let names = stream_only.names("DEDUP_BY", "deduplicate by an event's id");
    let id = Translator {
        names: &names,
        at: span.start,
    }
    .expr(&expr)
    .map_err(|e| SqlError::span(span, format!("DEDUP_BY '{by}': {}", e.message)))?;
    Ok(DedupSpec { id, ttl_ms })
}

/// True if the query groups: GROUP BY, HAVING, or an aggregate at the top
/// of a SELECT item.
pub(super) fn is_aggregated(parts: &QueryParts<'_>, at: Location) -> Result<bool> {
    if !parts.group_by.is_empty() || parts.select.having.is_some() {
        return Ok(true);
    }
    for item in &parts.select.projection {
        let expr = match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            _ => continue,
        };
        if let ast::Expr::Function(f) = strip(expr) {
            if aggregate_call(f, at)?.is_some() {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The output name of an unaliased item: a column's name, else
/// `KSQL_COL_<position>` as in ksqlDB.
pub(crate) fn default_name(e: &ast::Expr, position: usize, scope: &Scope) -> String {
    let last = match strip(e) {
        ast::Expr::Identifier(id) => Some(std::slice::from_ref(id)),
        ast::Expr::CompoundIdentifier(ids) => Some(ids.as_slice()),
        _ => None,
    };
    match last {
        Some(parts) => {
            let id = &parts[parts.len() - 1];
            // The declared spelling when it is a declared column.
            let decls = std::iter::once(&scope.stream.decl)
                .chain(scope.tables.iter().map(|t| &t.side.decl));
            decls
                .flat_map(|d| d.columns.iter())
                .find(|c| super::resolve::ident_matches(id, &c.name))
                .map_or_else(|| id.value.clone(), |c| c.name.clone())
        }
        None => format!("KSQL_COL_{position}"),
    }
}

/// Output columns of a per-event projection.
pub(super) fn projection(
    parts: &QueryParts<'_>,
    scope: &Scope,
    at: Location,
) -> Result<Vec<(String, Expr)>> {
    let names = scope.names(
        "SELECT",
        "an aggregate needs CREATE TABLE .. AS (with GROUP BY)",
    );
    let tr = Translator { names: &names, at };
    let mut columns: Vec<(String, Expr)> = Vec::new();
    let mut push = |name: String, e: Expr, span: Span| -> Result<()> {
        if columns.iter().any(|(n, _)| n.eq_ignore_ascii_case(&name)) {
            return Err(SqlError::span(
                span,
                format!("duplicate output column '{name}'; give it another name with AS"),
            ));
        }
        columns.push((name, e));
        Ok(())
    };
    for (i, item) in parts.select.projection.iter().enumerate() {
        let span = known(item.span(), at);
        match item {
            SelectItem::Wildcard(_) => {
                for (name, e) in star(scope, None, span)? {
                    push(name, e, span)?;
                }
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                let q = object_name(n, at)?;
                for (name, e) in star(scope, Some(&q.normalized()), span)? {
                    push(name, e, span)?;
                }
            }
            SelectItem::UnnamedExpr(e) => push(default_name(e, i, scope), tr.expr(e)?, span)?,
            SelectItem::ExprWithAlias { expr, alias } => {
                push(alias.value.clone(), tr.expr(expr)?, span)?
            }
            _ => {
                return Err(SqlError::span(
                    span,
                    "this kind of SELECT item is not supported",
                ))
            }
        }
    }
    Ok(columns)
}

/// `*` (or `q.*`): the declared columns; with joins, `*` adds each joined
/// table's columns prefixed `<table>_`.
fn star(scope: &Scope, only: Option<&str>, span: Span) -> Result<Vec<(String, Expr)>> {
    let mut out = Vec::new();
    let want_stream = only.is_none_or(|q| scope.stream.qualifiers.iter().any(|s| s == q));
    let want_tables: Vec<&TableSide> = scope
        .tables
        .iter()
        .filter(|t| only.is_none_or(|q| t.side.qualifiers.iter().any(|s| s == q)))
        .collect();
    if !want_stream && want_tables.is_empty() {
        return Err(SqlError::span(
            span,
            format!(
                "unknown source '{}' in {}.*",
                only.unwrap_or(""),
                only.unwrap_or("")
            ),
        ));
    }
    if want_stream {
        if scope.stream.decl.columns.is_empty() {
            return Err(SqlError::span(
                span,
                format!(
                    "SELECT * needs declared columns, and stream '{}' declares none: list the fields to select",
                    scope.stream.decl.name
                ),
            ));
        }
        out.extend(
            scope
                .stream
                .decl
                .columns
                .iter()
                .map(|c| (c.name.clone(), scope.stream_column(c))),
        );
    }
    for t in want_tables {
        if t.side.decl.columns.is_empty() {
            return Err(SqlError::span(
                span,
                format!(
                    "SELECT * needs declared columns, and table '{}' declares none",
                    t.side.decl.name
                ),
            ));
        }
        let prefix = if only.is_some() {
            String::new()
        } else {
            format!("{}_", t.field)
        };
        out.extend(
            t.side
                .decl
                .columns
                .iter()
                .map(|c| (format!("{prefix}{}", c.name), scope.table_column(t, c))),
        );
    }
    Ok(out)
}
