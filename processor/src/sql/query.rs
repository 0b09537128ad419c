//! The one query shape Kappa runs: `SELECT .. FROM stream [alias] [[LEFT |
//! FULL] JOIN table-or-stream [alias] ON ..] [WHERE ..] [GROUP BY ..]
//! [HAVING ..]` (plus
//! `LIMIT` for pull queries). [`QueryParts::of`] checks a `sqlparser` query
//! has it and names its parts; everything else is rejected here, with a
//! position. It also checks the parts' expressions against the depth and
//! node limits (`super::limits`) before any caller recurses over them.

use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, Join, JoinConstraint, JoinOperator, LimitClause, ObjectName,
    ObjectNamePart, Query, Select, SelectItem, SetExpr, Spanned, TableFactor, TableWithJoins,
};
use sqlparser::tokenizer::{Location, Span};

use super::error::{Result, SqlError};
use super::lex::Name;
use super::limits;
use crate::plan::JoinKind;

/// A source named in `FROM` or `JOIN`.
#[derive(Debug, Clone)]
pub(crate) struct Relation {
    /// Its name.
    pub name: Name,
    /// `AS alias`, if given.
    pub alias: Option<Name>,
}

impl Relation {
    /// How columns qualify it: the alias, else the name (normalized).
    pub fn qualifier(&self) -> String {
        self.alias.as_ref().unwrap_or(&self.name).normalized()
    }
}

/// A `JOIN` of a query.
#[derive(Debug, Clone)]
pub(crate) struct JoinParts<'q> {
    /// The joined table or stream.
    pub table: Relation,
    /// Inner, left or full.
    pub kind: JoinKind,
    /// The `ON` condition.
    pub on: &'q Expr,
}

/// The parts of an accepted query.
#[derive(Debug, Clone)]
pub(crate) struct QueryParts<'q> {
    /// The `SELECT` (projection, WHERE, GROUP BY, HAVING).
    pub select: &'q Select,
    /// The `FROM` source.
    pub from: Relation,
    /// The `JOIN`s, in order.
    pub joins: Vec<JoinParts<'q>>,
    /// The `GROUP BY` expressions.
    pub group_by: &'q [Expr],
    /// Where `LIMIT` is, if given.
    pub limit: Option<Span>,
    /// The `LIMIT` expression, if given.
    pub limit_expr: Option<&'q Expr>,
    /// `SELECT DISTINCT`: where `DISTINCT` is.
    pub distinct: Option<Span>,
    /// `QUALIFY`: the top-N of a query over a subquery's rows.
    pub qualify: Option<&'q Expr>,
}

impl QueryParts<'_> {
    /// Refuses `QUALIFY` where it has no meaning (anywhere but a query
    /// over a subquery's rows).
    pub fn refuse_qualify(&self, at: Location) -> Result<()> {
        match self.qualify {
            Some(q) => Err(SqlError::span(
                known(q.span(), at),
                "QUALIFY ranks the rows of a subquery: SELECT .. FROM (SELECT .. GROUP BY ..) q QUALIFY ROW_NUMBER() OVER (..) <= n",
            )),
            None => Ok(()),
        }
    }
}

/// A span, or `fallback` when `sqlparser` could not tell (empty spans).
pub(crate) fn known(span: Span, fallback: Location) -> Span {
    if span.start.line == 0 {
        Span::new(fallback, fallback)
    } else {
        span
    }
}

fn unsupported(span: Span, at: Location, what: &str) -> SqlError {
    SqlError::span(known(span, at), format!("{what} is not supported"))
}

impl<'q> QueryParts<'q> {
    /// Names the parts of `query`, or says what is not supported; `end` is
    /// where the statement ends (for errors without a position).
    pub fn of(query: &'q Query, end: Location) -> Result<QueryParts<'q>> {
        if let Some(with) = &query.with {
            return Err(unsupported(
                with.span(),
                end,
                "WITH (common table expressions)",
            ));
        }
        if let Some(order) = &query.order_by {
            return Err(unsupported(order.span(), end, "ORDER BY"));
        }
        if let Some(fetch) = &query.fetch {
            return Err(unsupported(fetch.span(), end, "FETCH"));
        }
        let select = match query.body.as_ref() {
            SetExpr::Select(s) => s.as_ref(),
            other => {
                return Err(unsupported(
                    other.span(),
                    end,
                    "a query other than one SELECT (UNION, VALUES, subqueries)",
                ))
            }
        };
        let (limit, limit_expr) = match &query.limit_clause {
            None => (None, None),
            Some(
                l @ LimitClause::LimitOffset {
                    limit,
                    offset: None,
                    limit_by,
                },
            ) if limit_by.is_empty() => (Some(known(l.span(), end)), limit.as_ref()),
            Some(l) => return Err(unsupported(l.span(), end, "OFFSET")),
        };
        let at = known(select.select_token.0.span, end).start;
        check_select_extras(select, at)?;
        let (from, joins) = from_clause(&select.from, at)?;
        let group_by = match &select.group_by {
            GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => exprs.as_slice(),
            other => {
                return Err(unsupported(
                    other.span(),
                    at,
                    "GROUP BY ALL / ROLLUP / CUBE",
                ))
            }
        };
        let projection = select.projection.iter().filter_map(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => Some(e),
            _ => None,
        });
        limits::check_exprs(
            projection
                .chain(&select.selection)
                .chain(group_by)
                .chain(&select.having)
                .chain(joins.iter().map(|j| j.on))
                .chain(limit_expr)
                .chain(&select.qualify),
            at,
        )?;
        Ok(QueryParts {
            select,
            from,
            joins,
            group_by,
            limit,
            limit_expr,
            distinct: select
                .distinct
                .as_ref()
                .map(|_| known(select.select_token.0.span, at)),
            qualify: select.qualify.as_ref(),
        })
    }
}

fn check_select_extras(select: &Select, at: Location) -> Result<()> {
    if let Some(Distinct::On(_)) = &select.distinct {
        return Err(SqlError::at(at, "DISTINCT ON is not supported"));
    }
    if select.top.is_some() || select.into.is_some() {
        return Err(SqlError::at(at, "TOP and INTO are not supported"));
    }
    if !select.named_window.is_empty() {
        return Err(SqlError::span(
            known(select.named_window[0].span(), at),
            "expected WINDOW TUMBLING, HOPPING or SESSION",
        ));
    }
    if !select.lateral_views.is_empty() || select.prewhere.is_some() {
        return Err(SqlError::at(
            at,
            "LATERAL VIEW and PREWHERE are not supported",
        ));
    }
    if !select.sort_by.is_empty()
        || !select.cluster_by.is_empty()
        || !select.distribute_by.is_empty()
    {
        return Err(SqlError::at(
            at,
            "SORT BY, CLUSTER BY and DISTRIBUTE BY are not supported",
        ));
    }
    Ok(())
}

fn from_clause(from: &[TableWithJoins], at: Location) -> Result<(Relation, Vec<JoinParts<'_>>)> {
    let first = match from {
        [] => return Err(SqlError::at(at, "expected FROM and a stream name")),
        [one] => one,
        [_, second, ..] => {
            return Err(SqlError::span(
                known(second.relation.span(), at),
                "a query reads one stream: use JOIN .. ON to enrich it from a table",
            ))
        }
    };
    let source = relation(&first.relation, at)?;
    if let Some(extra) = first.joins.get(crate::limits::MAX_JOINS) {
        return Err(SqlError::span(
            known(extra.span(), at),
            format!(
                "a query joins at most {} tables and streams, the limit (max_joins)",
                crate::limits::MAX_JOINS
            ),
        ));
    }
    let joins = first
        .joins
        .iter()
        .map(|j| join_parts(j, at))
        .collect::<Result<_>>()?;
    Ok((source, joins))
}

/// One `JOIN .. ON ..`.
fn join_parts(j: &Join, at: Location) -> Result<JoinParts<'_>> {
    let span = known(j.span(), at);
    let (kind, constraint) = match &j.join_operator {
        JoinOperator::Join(c) | JoinOperator::Inner(c) => (JoinKind::Inner, c),
        JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
        JoinOperator::FullOuter(c) => (JoinKind::Full, c),
        JoinOperator::Right(_) | JoinOperator::RightOuter(_) => {
            return Err(SqlError::span(
                span,
                "RIGHT JOIN is not supported: swap the two sources and use LEFT JOIN",
            ))
        }
        _ => {
            return Err(SqlError::span(
                span,
                "only JOIN (inner), LEFT JOIN and FULL JOIN (of two streams) are supported",
            ))
        }
    };
    let on = match constraint {
        JoinConstraint::On(e) => e,
        _ => {
            return Err(SqlError::span(
                span,
                "expected ON <expression> = <expression> in the JOIN (USING is not supported)",
            ))
        }
    };
    Ok(JoinParts {
        table: relation(&j.relation, at)?,
        kind,
        on,
    })
}

fn relation(t: &TableFactor, at: Location) -> Result<Relation> {
    match t {
        TableFactor::Table {
            name, alias, args: None, ..
        } => {
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return Err(unsupported(t.span(), at, "column aliases on a source"));
            }
            Ok(Relation {
                name: object_name(name, at)?,
                alias: alias.as_ref().map(|a| Name {
                    value: a.name.value.clone(),
                    quoted: a.name.quote_style.is_some(),
                    span: known(a.name.span, at),
                }),
            })
        }
        _ => Err(SqlError::span(
            known(t.span(), at),
            "expected the name of a stream or table (subqueries and table functions are not supported)",
        )),
    }
}

/// A one-part object name.
pub(crate) fn object_name(name: &ObjectName, at: Location) -> Result<Name> {
    match name.0.as_slice() {
        [ObjectNamePart::Identifier(id)] => Ok(Name {
            value: id.value.clone(),
            quoted: id.quote_style.is_some(),
            span: known(id.span, at),
        }),
        _ => Err(SqlError::span(
            known(name.span(), at),
            format!("expected a plain name, found '{name}'"),
        )),
    }
}
