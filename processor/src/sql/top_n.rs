//! Top-N per partition of a subquery's rows: the outer query's
//! `QUALIFY ROW_NUMBER() OVER (PARTITION BY .. ORDER BY x [DESC]) <= n`
//! (or `RANK()`, keeping ties of the last rank), as Flink writes its
//! Top-N with `ROW_NUMBER` in a subquery, and Snowflake, DuckDB and
//! BigQuery with `QUALIFY`. The outer `SELECT` lists the subquery's
//! columns (or expressions over them) each kept row shows.

use sqlparser::ast::{
    self as ast, BinaryOperator, FunctionArguments, OrderBySort, Spanned, WindowType,
};
use sqlparser::tokenizer::Location;

use super::error::{Result, SqlError};
use super::planner::{is_aggregated, projection};
use super::query::{known, QueryParts};
use super::resolve::Scope;
use super::translate::Translator;
use crate::accumulators::AggregateKind;
use crate::expr::Expr;
use crate::plan::{AggregateColumn, AggregateSpec, ColumnSource, TopSpec, MAX_TOP_N};

const SHAPE: &str =
    "expected QUALIFY ROW_NUMBER() OVER (PARTITION BY .. ORDER BY ..) <= n (or RANK())";

/// The top-N of `parts` (a query over a subquery's rows) from its
/// `QUALIFY` condition `qualify`, and the view's columns.
pub(crate) fn top_n(
    parts: &QueryParts<'_>,
    qualify: &ast::Expr,
    scope: &Scope,
    at: Location,
) -> Result<(TopSpec, AggregateSpec)> {
    if is_aggregated(parts, at)? || parts.distinct.is_some() {
        return Err(SqlError::span(
            known(qualify.span(), at),
            "a top-N keeps rows of the subquery: it takes no GROUP BY, aggregates or DISTINCT",
        ));
    }
    let span = known(qualify.span(), at);
    let (call, op, bound) = match qualify {
        ast::Expr::BinaryOp { left, op, right } => (left.as_ref(), op, right.as_ref()),
        _ => return Err(SqlError::span(span, SHAPE)),
    };
    let limit = match bound {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<u64>().ok(),
            _ => None,
        },
        _ => None,
    };
    let limit = match (op, limit) {
        (BinaryOperator::LtEq, Some(n)) => n,
        (BinaryOperator::Lt, Some(n)) => n.saturating_sub(1),
        (BinaryOperator::Eq, Some(1)) => 1,
        _ => return Err(SqlError::span(span, SHAPE)),
    };
    if limit == 0 || limit > MAX_TOP_N {
        return Err(SqlError::span(
            known(bound.span(), at),
            format!("a top-N keeps 1 to {MAX_TOP_N} ranks per partition"),
        ));
    }
    let ast::Expr::Function(f) = call else {
        return Err(SqlError::span(span, SHAPE));
    };
    let ties = match f.name.to_string().to_ascii_uppercase().as_str() {
        "ROW_NUMBER" => false,
        "RANK" => true,
        _ => return Err(SqlError::span(known(f.span(), at), SHAPE)),
    };
    let no_args = match &f.args {
        FunctionArguments::None => true,
        FunctionArguments::List(l) => l.args.is_empty(),
        FunctionArguments::Subquery(_) => false,
    };
    let Some(WindowType::WindowSpec(window)) = &f.over else {
        return Err(SqlError::span(known(f.span(), at), SHAPE));
    };
    if !no_args || window.window_frame.is_some() || window.window_name.is_some() {
        return Err(SqlError::span(known(f.span(), at), SHAPE));
    }
    let [order] = window.order_by.as_slice() else {
        return Err(SqlError::span(
            known(f.span(), at),
            "a top-N ranks by one ORDER BY expression",
        ));
    };
    let descending = match &order.options.sort {
        None | Some(OrderBySort::Asc) => false,
        Some(OrderBySort::Desc) => true,
        Some(OrderBySort::Using(_)) => {
            return Err(SqlError::span(known(order.span(), at), SHAPE));
        }
    };
    let names = scope.names("QUALIFY", "rank the subquery's rows by its columns");
    let tr = Translator { names: &names, at };
    let partition_by = window
        .partition_by
        .iter()
        .map(|e| tr.expr(e))
        .collect::<Result<Vec<_>>>()?;
    let order_by = tr.expr(&order.expr)?;
    let spec = values_spec(projection(parts, scope, at)?);
    Ok((
        TopSpec {
            partition_by,
            order_by,
            descending,
            limit,
            ties,
        },
        spec,
    ))
}

/// The view columns of rows shown as they are (a top-N's kept rows, each
/// row of a table): each column a `LATEST_BY_OFFSET` of its expression
/// over the row, how a view stores a row's values; no group.
pub(crate) fn values_spec(columns: Vec<(String, Expr)>) -> AggregateSpec {
    let aggregates = columns
        .iter()
        .map(|(name, e)| AggregateColumn {
            name: name.clone(),
            kind: AggregateKind::Latest,
            input: Some(e.clone()),
        })
        .collect();
    AggregateSpec {
        group_by: Vec::new(),
        window: None,
        aggregates,
        columns: columns
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), ColumnSource::Aggregate(i)))
            .collect(),
        having: None,
    }
}
