//! Pull queries: `SELECT * | cols FROM view [WHERE key_col = 'k' [AND
//! WINDOWSTART >= t ..]] [LIMIT n]`, read once from a view's rows.
//!
//! The key value is turned into the row-key string the aggregate writes
//! (`operator::aggregate::view_key`): a string as itself, anything else as
//! JSON text. Window bounds accept epoch milliseconds or RFC 3339 strings.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlparser::ast::{self as ast, BinaryOperator, SelectItem, Spanned};
use sqlparser::tokenizer::{Location, Span};

use super::error::{Result, SqlError};
use super::ksql::extract_query_clauses;
use super::lex::StatementTokens;
use super::query::{known, QueryParts};
use super::statement::parse_sql_query;
use super::translate::literal;
use crate::operator::aggregate::view_key;
use crate::time::parse_timestamp;
use crate::view::{RowFilter, ViewQuery, ViewRow};

/// Window bounds; defined beside the view reads that apply them.
pub use crate::view::TimeRange;

/// A pull query on a view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullQuery {
    /// The view (normalized name).
    pub view: String,
    /// Selected columns (`None` = `*`), as written.
    pub columns: Option<Vec<String>>,
    /// The column compared with the key, as written (the server may check
    /// it is the view's GROUP BY column).
    pub key_column: Option<String>,
    /// The row key, as the view stores it.
    pub key: Option<String>,
    /// Bounds on window starts.
    pub window_start: TimeRange,
    /// Bounds on window ends.
    pub window_end: TimeRange,
    /// At most this many rows.
    pub limit: Option<usize>,
}

impl PullQuery {
    /// The view read this query maps to; rows must still pass
    /// [`PullQuery::row_filter`] (window-end bounds, and start bounds when
    /// no key is given).
    pub fn view_query(&self) -> ViewQuery {
        match &self.key {
            None => ViewQuery::All,
            Some(k) if self.window_start.is_unbounded() => ViewQuery::Key(k.clone()),
            Some(k) => ViewQuery::KeyWindows {
                key: k.clone(),
                from: self.window_start.from_ms.unwrap_or(i64::MIN),
                to: self.window_start.to_ms.unwrap_or(i64::MAX),
            },
        }
    }

    /// The window bounds as a filter the view read applies
    /// ([`crate::view::query_page_as_of`]), examining at most
    /// `max_scanned` rows per page.
    pub fn row_filter(&self, max_scanned: Option<usize>) -> RowFilter {
        RowFilter {
            window_start: self.window_start,
            window_end: self.window_end,
            max_scanned,
        }
    }

    /// True if `row` satisfies the key and window bounds. Unwindowed rows
    /// pass window bounds only when there are none.
    pub fn matches(&self, row: &ViewRow) -> bool {
        self.key.as_ref().is_none_or(|k| *k == row.key) && self.row_filter(None).admits(row)
    }
}

/// Parses a pull query statement.
pub(crate) fn parse(st: &StatementTokens) -> Result<PullQuery> {
    let clauses = extract_query_clauses(&st.tokens, st.end)?;
    if let Some(w) = &clauses.window {
        return Err(SqlError::span(
            w.span,
            "a pull query reads a view: WINDOW is not allowed",
        ));
    }
    if let Some((_, span)) = clauses.emit {
        return Err(SqlError::span(
            span,
            "push queries (SELECT .. EMIT) are not supported: follow a view with GET /v1/views/{view}/changes",
        ));
    }
    let query = parse_sql_query(clauses.tokens, st.end)?;
    let parts = QueryParts::of(&query, st.end)?;
    parts.refuse_qualify(st.start)?;
    let at = st.start;
    if parts.join.is_some() {
        return Err(SqlError::at(
            at,
            "a pull query reads one view: JOIN is not allowed",
        ));
    }
    if let Some(span) = parts.distinct {
        return Err(SqlError::span(
            span,
            "SELECT DISTINCT in a pull query is not supported: a view has one row per key",
        ));
    }
    if let Some(g) = parts.group_by.first() {
        return Err(SqlError::span(
            known(g.span(), at),
            "a pull query reads a view: GROUP BY is not allowed",
        ));
    }
    if let Some(h) = &parts.select.having {
        return Err(SqlError::span(
            known(h.span(), at),
            "a pull query reads a view: HAVING is not allowed",
        ));
    }
    if let Some(alias) = &parts.from.alias {
        return Err(SqlError::span(
            alias.span,
            "a pull query's view takes no alias",
        ));
    }
    let mut q = PullQuery {
        view: parts.from.name.normalized(),
        columns: columns(&parts.select.projection, at)?,
        key_column: None,
        key: None,
        window_start: TimeRange::default(),
        window_end: TimeRange::default(),
        limit: None,
    };
    if let Some(w) = &parts.select.selection {
        conditions(w, &mut q, at)?;
    }
    if let (Some(span), Some(e)) = (parts.limit, parts.limit_expr) {
        q.limit = Some(limit(e, span)?);
    }
    Ok(q)
}

fn columns(items: &[SelectItem], at: Location) -> Result<Option<Vec<String>>> {
    if let [SelectItem::Wildcard(_)] = items {
        return Ok(None);
    }
    items
        .iter()
        .map(|item| match item {
            SelectItem::UnnamedExpr(ast::Expr::Identifier(id)) => Ok(id.value.clone()),
            other => Err(SqlError::span(
                known(other.span(), at),
                "a pull query selects * or column names",
            )),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

fn limit(e: &ast::Expr, span: Span) -> Result<usize> {
    let bad = || {
        SqlError::span(
            known(e.span(), span.start),
            "LIMIT needs a positive whole number",
        )
    };
    match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(bad),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

const WHERE_SHAPE: &str = "a pull query's WHERE takes <key column> = value and WINDOWSTART/WINDOWEND bounds, joined with AND";

#[derive(Clone, Copy, PartialEq)]
enum Bound {
    Start,
    End,
}

fn bound_of(e: &ast::Expr) -> Option<Bound> {
    match e {
        ast::Expr::Identifier(id) if id.quote_style.is_none() => {
            if id.value.eq_ignore_ascii_case("WINDOWSTART") {
                Some(Bound::Start)
            } else if id.value.eq_ignore_ascii_case("WINDOWEND") {
                Some(Bound::End)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A constant: a literal, or `-` a number.
fn constant(e: &ast::Expr, at: Location) -> Option<Result<Value>> {
    match e {
        ast::Expr::Value(v) => Some(literal(&v.value, false, known(v.span, at))),
        ast::Expr::UnaryOp {
            op: ast::UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                Some(literal(&v.value, true, known(v.span, at)))
            }
            _ => None,
        },
        _ => None,
    }
}

fn timestamp(e: &ast::Expr, at: Location) -> Result<i64> {
    let span = known(e.span(), at);
    let v = match constant(e, at) {
        Some(v) => v?,
        None => {
            return Err(SqlError::span(
                span,
                "expected a timestamp: epoch milliseconds or an RFC 3339 string",
            ))
        }
    };
    let ms = match &v {
        Value::Number(n) => n.as_i64(),
        Value::String(_) => parse_timestamp(&v),
        _ => None,
    };
    ms.ok_or_else(|| {
        SqlError::span(
            span,
            format!("expected a timestamp (epoch milliseconds or RFC 3339), found {v}"),
        )
    })
}

fn conditions(e: &ast::Expr, q: &mut PullQuery, at: Location) -> Result<()> {
    let span = known(e.span(), at);
    match e {
        ast::Expr::Nested(inner) => conditions(inner, q, at),
        ast::Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conditions(left, q, at)?;
            conditions(right, q, at)
        }
        ast::Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } => {
            let Some(b) = bound_of(expr) else {
                return Err(SqlError::span(span, WHERE_SHAPE));
            };
            let range = if b == Bound::Start {
                &mut q.window_start
            } else {
                &mut q.window_end
            };
            range.lower(timestamp(low, at)?);
            range.upper(timestamp(high, at)?.saturating_add(1));
            Ok(())
        }
        ast::Expr::BinaryOp { left, op, right } => comparison(left, op, right, q, span, at),
        _ => Err(SqlError::span(span, WHERE_SHAPE)),
    }
}

fn comparison(
    left: &ast::Expr,
    op: &BinaryOperator,
    right: &ast::Expr,
    q: &mut PullQuery,
    span: Span,
    at: Location,
) -> Result<()> {
    use BinaryOperator as B;
    // Put the column on the left: `5 < WINDOWSTART` is `WINDOWSTART > 5`.
    let (col, op, value) = if constant(left, at).is_some() {
        let flipped = match op {
            B::Lt => B::Gt,
            B::LtEq => B::GtEq,
            B::Gt => B::Lt,
            B::GtEq => B::LtEq,
            other => other.clone(),
        };
        (right, flipped, left)
    } else {
        (left, op.clone(), right)
    };
    if let Some(b) = bound_of(col) {
        let t = timestamp(value, at)?;
        let range = if b == Bound::Start {
            &mut q.window_start
        } else {
            &mut q.window_end
        };
        match op {
            B::Eq => {
                range.lower(t);
                range.upper(t.saturating_add(1));
            }
            B::Gt => range.lower(t.saturating_add(1)),
            B::GtEq => range.lower(t),
            B::Lt => range.upper(t),
            B::LtEq => range.upper(t.saturating_add(1)),
            _ => return Err(SqlError::span(span, WHERE_SHAPE)),
        }
        return Ok(());
    }
    let (ast::Expr::Identifier(id), B::Eq, Some(v)) = (col, &op, constant(value, at)) else {
        return Err(SqlError::span(span, WHERE_SHAPE));
    };
    let v = v?;
    if q.key.is_some() {
        return Err(SqlError::span(span, "a pull query takes one key equality"));
    }
    if v.is_null() {
        return Err(SqlError::span(
            span,
            "a key is never NULL: compare with a value",
        ));
    }
    q.key_column = Some(id.value.clone());
    q.key = Some(view_key(&[v]));
    Ok(())
}
