//! Pull queries: `SELECT * | cols | aggregates FROM view [WHERE ..]
//! [ORDER BY key [DESC]] [LIMIT n] [OFFSET m]`, read once from a view's
//! rows.
//!
//! `WHERE` is conditions joined with `AND`. Bounds on `WINDOWSTART` and
//! `WINDOWEND` (epoch milliseconds or RFC 3339 strings) are applied inside
//! the read. Every other condition is an expression over a row's columns
//! ([`PullQuery::conditions`]); those on the view's key that a read in key
//! order can answer — `= v`, `IN (..)`, a prefix `LIKE 'abc%'`, and `<`,
//! `<=`, `>`, `>=`, `BETWEEN` with string bounds — are noted too
//! ([`PullQuery::key_conditions`]), and once the key column is known
//! ([`PullQuery::read`]) the best of them decides which key range is read
//! instead of the whole view ([`ReadHow`], what `EXPLAIN` shows).
//!
//! A key value is turned into the row-key string the aggregate writes
//! (`operator::aggregate::view_key`): a string as itself, anything else as
//! JSON text.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlparser::ast::{self as ast, BinaryOperator, Ident, SelectItem, Spanned};
use sqlparser::tokenizer::{Location, Span};

use super::error::{Result, SqlError};
use super::ksql::extract_query_clauses;
use super::lex::StatementTokens;
use super::query::{known, QueryParts};
use super::statement::parse_sql_query;
use super::translate::{aggregate_call, literal, AggCall, Names, Translator};
use crate::accumulators::AggregateKind;
use crate::expr::{Expr, Row};
use crate::operator::aggregate::view_key;
use crate::time::parse_timestamp;
use crate::view::{RowFilter, ViewQuery, ViewRow};

/// Window bounds; defined beside the view reads that apply them.
pub use crate::view::TimeRange;

/// Most rows a pull query may skip with `OFFSET` (they are read and held
/// before the page after them).
pub const MAX_PULL_OFFSET: usize = 100_000;

/// A pull query on a view.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullQuery {
    /// The view (normalized name).
    pub view: String,
    /// Selected columns (`None` = `*`), as written.
    pub columns: Option<Vec<String>>,
    /// Bounds on window starts.
    pub window_start: TimeRange,
    /// Bounds on window ends.
    pub window_end: TimeRange,
    /// The other conditions of `WHERE` (joined with `AND`), each over a
    /// row's columns; a row is answered if each is `TRUE`.
    pub conditions: Vec<Expr>,
    /// The conditions a read by key could answer.
    pub key_conditions: Vec<KeyCondition>,
    /// `ORDER BY`: the key (or `WINDOWSTART` of one key's windows).
    pub order: Option<PullOrder>,
    /// Rows skipped before the first one answered.
    pub offset: usize,
    /// At most this many rows.
    pub limit: Option<usize>,
    /// Aggregates over the rows (`SELECT COUNT(*), SUM(x) ..`): one row
    /// answered, with these columns.
    pub aggregates: Option<Vec<PullAggregate>>,
}

/// A condition of `WHERE` on one column that a read in key order could
/// answer, when the column is the view's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCondition {
    /// Its place in [`PullQuery::conditions`].
    pub index: usize,
    /// The column, as written.
    pub column: String,
    /// What it asks of the column.
    pub test: KeyTest,
}

/// What a [`KeyCondition`] asks of its column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeyTest {
    /// `= v`.
    Equals(Value),
    /// `IN (v, ..)`.
    AnyOf(Vec<Value>),
    /// `LIKE 'prefix%'`.
    Prefix(String),
    /// `<`, `<=`, `>`, `>=`, `BETWEEN`: bounds and whether each is
    /// included.
    Range {
        /// The lower bound.
        lower: Option<(Value, bool)>,
        /// The upper bound.
        upper: Option<(Value, bool)>,
    },
}

/// `ORDER BY column [ASC | DESC]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullOrder {
    /// The column, as written.
    pub column: String,
    /// `DESC`.
    pub descending: bool,
}

/// One aggregate of a pull query's `SELECT`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullAggregate {
    /// The answer's column: the alias, else the function's name in lower
    /// case (as PostgreSQL names it).
    pub name: String,
    /// Which aggregate.
    pub kind: AggregateKind,
    /// Its argument over a row (`None`: `COUNT(*)`).
    pub arg: Option<Expr>,
    /// The argument's column when it is one (a `DECIMAL` column sums
    /// exactly).
    pub column: Option<String>,
    /// The call as written.
    pub text: String,
}

/// How a pull query reads its view.
#[derive(Debug, Clone, PartialEq)]
pub struct PullRead {
    /// The key range read.
    pub query: ViewQuery,
    /// Which kind of read that is.
    pub how: ReadHow,
    /// The conditions each row read must still pass: all but the one the
    /// key range answers exactly.
    pub residual: Vec<Expr>,
}

/// Which kind of read answers a pull query: what `EXPLAIN` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadHow {
    /// One key's rows.
    Lookup,
    /// The rows of a list of keys.
    Lookups(usize),
    /// The keys starting with a prefix.
    Prefix,
    /// The keys between two bounds.
    Range,
    /// Every row of the view (no condition on the key a read could use).
    Scan,
}

impl ReadHow {
    /// A short description (`key lookup`, `full scan`, ..).
    pub fn describe(self) -> String {
        match self {
            ReadHow::Lookup => "key lookup".into(),
            ReadHow::Lookups(n) => format!("key lookups ({n} keys)"),
            ReadHow::Prefix => "key prefix range".into(),
            ReadHow::Range => "key range".into(),
            ReadHow::Scan => "full scan".into(),
        }
    }
}

impl PullQuery {
    /// How the query reads its view when the view's key column is
    /// `key_column` (`None`: a view without one key column: every read is
    /// a scan). The key condition chosen is, in order of preference, an
    /// equality, an `IN` list, a prefix, a range with string bounds (key
    /// order is the keys' byte order: a number key is not in number order).
    pub fn read(&self, key_column: Option<&str>) -> PullRead {
        let on_key =
            |c: &&KeyCondition| key_column.is_some_and(|k| c.column.eq_ignore_ascii_case(k));
        let candidates: Vec<&KeyCondition> = self.key_conditions.iter().filter(on_key).collect();
        let rank = |t: &KeyTest| match t {
            KeyTest::Equals(v) if !v.is_null() => Some(0),
            KeyTest::AnyOf(_) => Some(1),
            KeyTest::Prefix(_) => Some(2),
            KeyTest::Range { lower, upper } => {
                let string =
                    |b: &Option<(Value, bool)>| b.as_ref().is_none_or(|(v, _)| v.is_string());
                (string(lower) && string(upper)).then_some(3)
            }
            KeyTest::Equals(_) => None,
        };
        let chosen = candidates
            .iter()
            .filter_map(|c| rank(&c.test).map(|r| (r, *c)))
            .min_by_key(|(r, c)| (*r, c.index))
            .map(|(_, c)| c);
        let residual = |skip: Option<usize>| {
            self.conditions
                .iter()
                .enumerate()
                .filter(|(i, _)| Some(*i) != skip)
                .map(|(_, e)| e.clone())
                .collect()
        };
        let Some(chosen) = chosen else {
            return PullRead {
                query: ViewQuery::All,
                how: ReadHow::Scan,
                residual: residual(None),
            };
        };
        let text = |v: &Value| view_key(std::slice::from_ref(v));
        let (query, how) = match &chosen.test {
            KeyTest::Equals(v) if self.window_start.is_unbounded() => {
                (ViewQuery::Key(text(v)), ReadHow::Lookup)
            }
            KeyTest::Equals(v) => (
                ViewQuery::KeyWindows {
                    key: text(v),
                    from: self.window_start.from_ms.unwrap_or(i64::MIN),
                    to: self.window_start.to_ms.unwrap_or(i64::MAX),
                },
                ReadHow::Lookup,
            ),
            KeyTest::AnyOf(values) => {
                let mut keys: Vec<String> =
                    values.iter().filter(|v| !v.is_null()).map(text).collect();
                keys.sort();
                keys.dedup();
                let n = keys.len();
                (ViewQuery::Keys(keys), ReadHow::Lookups(n))
            }
            KeyTest::Prefix(p) => (ViewQuery::Prefix(p.clone()), ReadHow::Prefix),
            KeyTest::Range { lower, upper } => {
                let bound = |b: &Option<(Value, bool)>| b.as_ref().map(|(v, inc)| (text(v), *inc));
                (
                    ViewQuery::Range {
                        lower: bound(lower),
                        upper: bound(upper),
                    },
                    ReadHow::Range,
                )
            }
        };
        PullRead {
            query,
            how,
            residual: residual(Some(chosen.index)),
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
}

/// Whether `row` passes every one of `conditions` (each `TRUE`; `NULL`
/// and `FALSE` reject it).
pub fn admits(conditions: &[Expr], row: &ViewRow) -> bool {
    let row = RowColumns(row);
    conditions
        .iter()
        .all(|c| matches!(c.eval(&row), Value::Bool(true)))
}

/// The value of `expr` over `row`'s columns.
pub fn eval_over(expr: &Expr, row: &ViewRow) -> Value {
    expr.eval(&RowColumns(row))
}

/// A view row as an expression reads it: `Field([name])` is its column
/// `name` (exactly, else ignoring case), `WINDOWSTART`/`WINDOWEND` its
/// window bounds.
struct RowColumns<'a>(&'a ViewRow);

impl Row for RowColumns<'_> {
    fn field(&self, path: &[String]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        let object = self.0.row.as_object()?;
        let mut v = object.get(first).or_else(|| {
            object
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(first))
                .map(|(_, v)| v)
        })?;
        for part in rest {
            v = v.get(part)?;
        }
        Some(v)
    }

    fn key(&self) -> Option<&str> {
        Some(&self.0.key)
    }

    fn record_timestamp(&self) -> i64 {
        0
    }

    fn column(&self, _name: &str) -> Option<&Value> {
        None
    }
}

/// Names in a pull query's `WHERE` and aggregates: a view's columns (a
/// name is a field of the row; `WINDOWSTART`/`WINDOWEND` compare as the
/// window bounds only at the top of `WHERE`).
struct ViewColumns;

impl Names for ViewColumns {
    fn column(&self, parts: &[Ident], span: Span) -> Result<Expr> {
        if parts.iter().any(|p| {
            p.quote_style.is_none()
                && (p.value.eq_ignore_ascii_case("WINDOWSTART")
                    || p.value.eq_ignore_ascii_case("WINDOWEND"))
        }) {
            return Err(SqlError::span(span, WHERE_SHAPE));
        }
        Ok(Expr::Field(parts.iter().map(|p| p.value.clone()).collect()))
    }

    fn aggregate(&self, call: &AggCall<'_>, span: Span) -> Result<Expr> {
        Err(SqlError::span(
            span,
            format!(
                "aggregate {} inside an expression: a pull query selects aggregates of a view's columns",
                call.text
            ),
        ))
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
    let mut query = parse_sql_query(clauses.tokens, st.end)?;
    // ORDER BY and OFFSET belong to pull queries only: taken off before
    // the parts every query shares are named.
    let order_by = query.order_by.take();
    let offset = match &mut query.limit_clause {
        Some(ast::LimitClause::LimitOffset { offset, .. }) => offset.take(),
        _ => None,
    };
    if let Some(ast::LimitClause::LimitOffset {
        limit: None,
        limit_by,
        ..
    }) = &query.limit_clause
    {
        if limit_by.is_empty() {
            query.limit_clause = None;
        }
    }
    let parts = QueryParts::of(&query, st.end)?;
    parts.refuse_qualify(st.start)?;
    let at = st.start;
    if !parts.joins.is_empty() {
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
    let mut q = select(
        parts.from.name.normalized(),
        &parts.select.projection,
        parts.select.selection.as_ref(),
        at,
    )?;
    if let (Some(span), Some(e)) = (parts.limit, parts.limit_expr) {
        q.limit = Some(limit(e, span)?);
    }
    if let Some(offset) = offset {
        q.offset = whole_offset(&offset.value, at)?;
    }
    if let Some(order_by) = order_by {
        q.order = Some(order(&order_by, &q, at)?);
    }
    Ok(q)
}

/// The query `SELECT projection FROM view [WHERE selection]` asks of view
/// `view` (normalized), before any order, limit or offset.
pub(super) fn select(
    view: String,
    projection: &[SelectItem],
    selection: Option<&ast::Expr>,
    at: Location,
) -> Result<PullQuery> {
    let aggregates = aggregates(projection, at)?;
    let mut q = PullQuery {
        view,
        columns: match aggregates {
            Some(_) => None,
            None => columns(projection, at)?,
        },
        window_start: TimeRange::default(),
        window_end: TimeRange::default(),
        conditions: Vec::new(),
        key_conditions: Vec::new(),
        order: None,
        offset: 0,
        limit: None,
        aggregates,
    };
    if let Some(w) = selection {
        conditions(w, &mut q, at)?;
    }
    Ok(q)
}

/// The aggregates of a `SELECT` whose items are all aggregate calls;
/// `None` if none is one.
fn aggregates(items: &[SelectItem], at: Location) -> Result<Option<Vec<PullAggregate>>> {
    fn call(e: &ast::Expr, at: Location) -> Result<Option<(&ast::Function, AggCall<'_>)>> {
        match e {
            ast::Expr::Function(f) => aggregate_call(f, at).map(|c| c.map(|c| (f, c))),
            _ => Ok(None),
        }
    }
    let mut out = Vec::new();
    let mut plain = None;
    for item in items {
        let (e, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias.value.clone())),
            other => {
                plain.get_or_insert(known(other.span(), at));
                continue;
            }
        };
        let Some((f, c)) = call(e, at)? else {
            plain.get_or_insert(known(e.span(), at));
            continue;
        };
        let name = alias.unwrap_or_else(|| f.name.to_string().to_ascii_lowercase());
        let arg = c
            .arg
            .map(|a| {
                Translator {
                    names: &ViewColumns,
                    at,
                }
                .expr(a)
            })
            .transpose()?;
        let column = match c.arg {
            Some(ast::Expr::Identifier(id)) => Some(id.value.clone()),
            _ => None,
        };
        out.push(PullAggregate {
            name,
            kind: c.kind,
            arg,
            column,
            text: c.text,
        });
    }
    match (out.is_empty(), plain) {
        (true, _) => Ok(None),
        (false, None) => Ok(Some(out)),
        (false, Some(span)) => Err(SqlError::span(
            span,
            "a pull query selects either columns or aggregates over the rows, not both (there is no GROUP BY)",
        )),
    }
}

/// `OFFSET n`: a whole number up to [`MAX_PULL_OFFSET`].
fn whole_offset(e: &ast::Expr, at: Location) -> Result<usize> {
    let span = known(e.span(), at);
    let n = match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<usize>().ok(),
            _ => None,
        },
        _ => None,
    };
    match n {
        Some(n) if n <= MAX_PULL_OFFSET => Ok(n),
        Some(_) => Err(SqlError::span(
            span,
            format!("OFFSET is at most {MAX_PULL_OFFSET}: narrow the key range instead"),
        )),
        None => Err(SqlError::span(span, "OFFSET needs a whole number")),
    }
}

/// `ORDER BY column [ASC | DESC]`: one column (which one the server
/// checks, knowing the view's key).
fn order(order_by: &ast::OrderBy, q: &PullQuery, at: Location) -> Result<PullOrder> {
    let span = known(order_by.span(), at);
    let shape = "a pull query is ordered by one column: ORDER BY <key column> [DESC] (or WINDOWSTART [DESC] of one key's windows)";
    let ast::OrderByKind::Expressions(items) = &order_by.kind else {
        return Err(SqlError::span(span, shape));
    };
    let [item] = items.as_slice() else {
        return Err(SqlError::span(span, shape));
    };
    if q.aggregates.is_some() {
        return Err(SqlError::span(
            span,
            "ORDER BY has nothing to order: an aggregate answers one row",
        ));
    }
    let ast::Expr::Identifier(id) = &item.expr else {
        return Err(SqlError::span(known(item.expr.span(), at), shape));
    };
    let descending = match item.options.sort {
        None | Some(ast::OrderBySort::Asc) => false,
        Some(ast::OrderBySort::Desc) => true,
        Some(_) => return Err(SqlError::span(span, shape)),
    };
    if item.options.nulls_first.is_some() || item.with_fill.is_some() {
        return Err(SqlError::span(span, shape));
    }
    Ok(PullOrder {
        column: id.value.clone(),
        descending,
    })
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

const WHERE_SHAPE: &str = "WINDOWSTART and WINDOWEND are compared with timestamps (=, <, <=, >, >=, BETWEEN) at the top of a pull query's WHERE, joined with AND";

#[derive(Clone, Copy, PartialEq)]
enum Bound {
    Start,
    End,
}

impl Bound {
    /// The query's range this bound narrows.
    fn range(self, q: &mut PullQuery) -> &mut TimeRange {
        match self {
            Bound::Start => &mut q.window_start,
            Bound::End => &mut q.window_end,
        }
    }
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

/// Splits `WHERE` at its `AND`s: window bounds into the query's ranges,
/// every other condition into [`PullQuery::conditions`].
fn conditions(e: &ast::Expr, q: &mut PullQuery, at: Location) -> Result<()> {
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
        _ if is_window_bound(e) => window_bound(e, q, at),
        _ => {
            let expr = Translator {
                names: &ViewColumns,
                at,
            }
            .expr(e)?;
            if let Some((column, test)) = key_test(e, at)? {
                q.key_conditions.push(KeyCondition {
                    index: q.conditions.len(),
                    column,
                    test,
                });
            }
            q.conditions.push(expr);
            Ok(())
        }
    }
}

/// Whether `e` compares `WINDOWSTART` or `WINDOWEND`.
fn is_window_bound(e: &ast::Expr) -> bool {
    match e {
        ast::Expr::Between { expr, .. } => bound_of(expr).is_some(),
        ast::Expr::BinaryOp { left, op, right } => {
            !matches!(op, BinaryOperator::And | BinaryOperator::Or)
                && (bound_of(left).is_some() || bound_of(right).is_some())
        }
        _ => false,
    }
}

/// `op` with its operands swapped: `5 < x` is `x > 5`.
fn flipped(op: &BinaryOperator) -> BinaryOperator {
    use BinaryOperator as B;
    match op {
        B::Lt => B::Gt,
        B::LtEq => B::GtEq,
        B::Gt => B::Lt,
        B::GtEq => B::LtEq,
        other => other.clone(),
    }
}

/// Puts a window bound into the query's ranges.
fn window_bound(e: &ast::Expr, q: &mut PullQuery, at: Location) -> Result<()> {
    use BinaryOperator as B;
    let span = known(e.span(), at);
    match e {
        ast::Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } => {
            let b = bound_of(expr).ok_or_else(|| SqlError::span(span, WHERE_SHAPE))?;
            let (low, high) = (timestamp(low, at)?, timestamp(high, at)?);
            let range = b.range(q);
            range.lower(low);
            range.upper(high.saturating_add(1));
            Ok(())
        }
        ast::Expr::BinaryOp { left, op, right } => {
            // Put the bound on the left: `5 < WINDOWSTART` is `WINDOWSTART > 5`.
            let (col, op, value) = if bound_of(left).is_none() {
                (right, flipped(op), left)
            } else {
                (left, op.clone(), right)
            };
            let b = bound_of(col).ok_or_else(|| SqlError::span(span, WHERE_SHAPE))?;
            let t = timestamp(value, at)?;
            let range = b.range(q);
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
            Ok(())
        }
        _ => Err(SqlError::span(span, WHERE_SHAPE)),
    }
}

/// What a condition asks of one column, when a read in key order could
/// answer it were the column the key: `col = v`, `col IN (v, ..)`,
/// `col BETWEEN a AND b`, `col < v` (and `<=`, `>`, `>=`), `col LIKE
/// 'prefix%'`.
fn key_test(e: &ast::Expr, at: Location) -> Result<Option<(String, KeyTest)>> {
    use BinaryOperator as B;
    let column = |e: &ast::Expr| match e {
        ast::Expr::Identifier(id) => Some(id.value.clone()),
        _ => None,
    };
    let value = |e: &ast::Expr| constant(e, at).transpose();
    Ok(match e {
        ast::Expr::BinaryOp { left, op, right } => {
            let (col, op, v) = match (column(left), column(right)) {
                (Some(c), _) if constant(right, at).is_some() => (c, op.clone(), value(right)?),
                (_, Some(c)) if constant(left, at).is_some() => (c, flipped(op), value(left)?),
                _ => return Ok(None),
            };
            let Some(v) = v else { return Ok(None) };
            let test = match op {
                B::Eq => KeyTest::Equals(v),
                B::Lt => KeyTest::Range {
                    lower: None,
                    upper: Some((v, false)),
                },
                B::LtEq => KeyTest::Range {
                    lower: None,
                    upper: Some((v, true)),
                },
                B::Gt => KeyTest::Range {
                    lower: Some((v, false)),
                    upper: None,
                },
                B::GtEq => KeyTest::Range {
                    lower: Some((v, true)),
                    upper: None,
                },
                _ => return Ok(None),
            };
            Some((col, test))
        }
        ast::Expr::In {
            expr,
            target: ast::InTarget::List(list),
            negated: false,
            ..
        } => {
            let Some(col) = column(expr) else {
                return Ok(None);
            };
            let values: Option<Vec<Value>> = list
                .iter()
                .map(|x| constant(x, at).transpose())
                .collect::<Result<Option<Vec<_>>>>()?;
            values.map(|v| (col, KeyTest::AnyOf(v)))
        }
        ast::Expr::Between {
            expr,
            negated: false,
            low,
            high,
        } => match (column(expr), value(low)?, value(high)?) {
            (Some(col), Some(low), Some(high)) => Some((
                col,
                KeyTest::Range {
                    lower: Some((low, true)),
                    upper: Some((high, true)),
                },
            )),
            _ => None,
        },
        ast::Expr::Like {
            negated: false,
            any: false,
            expr,
            pattern,
            escape_char: None,
        } => match (column(expr), value(pattern)?) {
            (Some(col), Some(Value::String(p))) => {
                let prefix = p
                    .strip_suffix('%')
                    .filter(|head| !head.contains(['%', '_']));
                prefix.map(|head| (col, KeyTest::Prefix(head.to_string())))
            }
            _ => None,
        },
        _ => None,
    })
}
