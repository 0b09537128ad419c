//! Name resolution: which stream or table column an identifier means.
//!
//! Rules (see `docs/sql.md`): an unquoted identifier matches a declared
//! column case-insensitively, a quoted one exactly; either resolves to the
//! column's declared spelling, the JSON field read. `alias.col` picks the
//! stream or a joined table; a bare name must be unambiguous. Further
//! parts (`col.a.b`) walk into nested JSON, spelled exactly as written.
//! `ROWKEY` and `ROWTIME` are the record key and timestamp unless a column
//! is declared with that name. A source declared without columns is
//! schemaless: any name reads the JSON field spelled as written.

use sqlparser::ast::Ident;
use sqlparser::tokenizer::Span;

use super::error::{Result, SqlError};
use super::lex::normalize;
use super::translate::{AggCall, Names};
use super::types::{ColumnDecl, SourceDecl};
use crate::expr::Expr;

/// A source in scope and how it is qualified.
#[derive(Debug, Clone)]
pub(crate) struct Side {
    /// Names that qualify its columns (alias and/or name, normalized).
    pub qualifiers: Vec<String>,
    /// Its declaration.
    pub decl: SourceDecl,
}

/// A joined table (or stream).
#[derive(Debug, Clone)]
pub(crate) struct TableSide {
    /// The table.
    pub side: Side,
    /// The field its row appears under in events (`JoinSpec::alias`).
    pub field: String,
    /// What its key column means once the `ON` clause is known.
    pub key: Option<Expr>,
}

/// What a name resolved to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Resolved {
    /// A value expression.
    Expr(Expr),
    /// The key column of the joined table at this place in join order
    /// (meaningful in `ON`).
    TableKey(usize),
    /// `WINDOWSTART`.
    WindowStart,
    /// `WINDOWEND`.
    WindowEnd,
}

/// The sources a query reads.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    /// The `FROM` stream.
    pub stream: Side,
    /// The joined tables (or stream), in join order.
    pub tables: Vec<TableSide>,
}

/// True if `id` names the declared column `declared`.
pub(crate) fn ident_matches(id: &Ident, declared: &str) -> bool {
    if id.quote_style.is_some() {
        id.value == declared
    } else {
        id.value.to_lowercase() == declared.to_lowercase()
    }
}

fn is_pseudo(id: &Ident, name: &str) -> bool {
    id.quote_style.is_none() && id.value.eq_ignore_ascii_case(name)
}

fn find<'d>(decl: &'d SourceDecl, id: &Ident) -> Option<&'d ColumnDecl> {
    decl.columns
        .iter()
        .find(|c| c.name == id.value)
        .or_else(|| decl.columns.iter().find(|c| ident_matches(id, &c.name)))
}

fn path(first: &[&str], rest: &[Ident]) -> Expr {
    let mut p: Vec<String> = first.iter().map(|s| s.to_string()).collect();
    p.extend(rest.iter().map(|i| i.value.clone()));
    Expr::Field(p)
}

fn unknown(decl: &SourceDecl, id: &Ident, span: Span) -> SqlError {
    let names: Vec<&str> = decl
        .columns
        .iter()
        .take(12)
        .map(|c| c.name.as_str())
        .collect();
    let more = if decl.columns.len() > names.len() {
        ", .."
    } else {
        ""
    };
    SqlError::span(
        span,
        format!(
            "unknown column '{}': {} '{}' has {}{more}",
            id.value,
            decl.kind,
            decl.name,
            names.join(", ")
        ),
    )
}

impl Scope {
    /// Resolves a column reference.
    pub fn resolve(&self, parts: &[Ident], span: Span) -> Result<Resolved> {
        let Some(first) = parts.first() else {
            return Err(SqlError::span(span, "expected a column name"));
        };
        if parts.len() >= 2 {
            let q = normalize(&first.value, first.quote_style.is_some());
            if self.stream.qualifiers.contains(&q) {
                return self.in_stream(&parts[1..], span, true);
            }
            if let Some(place) = self
                .tables
                .iter()
                .position(|t| t.side.qualifiers.contains(&q))
            {
                return self.in_table(place, &parts[1..], span);
            }
        }
        // Every source declaring the name: the stream's qualifier first.
        let mut holders: Vec<(Option<usize>, &str)> = Vec::new();
        if find(&self.stream.decl, first).is_some() {
            holders.push((None, &self.stream.qualifiers[0]));
        }
        for (place, t) in self.tables.iter().enumerate() {
            if find(&t.side.decl, first).is_some() {
                holders.push((Some(place), &t.side.qualifiers[0]));
            }
        }
        match holders.as_slice() {
            [_, _, ..] => {
                let qualified: Vec<String> = holders
                    .iter()
                    .map(|(_, q)| format!("{q}.{}", first.value))
                    .collect();
                Err(SqlError::span(
                    span,
                    format!(
                        "ambiguous column '{}': qualify it as {}",
                        first.value,
                        qualified.join(" or ")
                    ),
                ))
            }
            [(None, _)] => self.in_stream(parts, span, false),
            [(Some(place), _)] => self.in_table(*place, parts, span),
            [] if parts.len() == 1 && is_pseudo(first, "WINDOWSTART") => Ok(Resolved::WindowStart),
            [] if parts.len() == 1 && is_pseudo(first, "WINDOWEND") => Ok(Resolved::WindowEnd),
            [] => self.in_stream(parts, span, false),
        }
    }

    /// `parts` inside the stream (`qualified`: it was written `s.parts`).
    fn in_stream(&self, parts: &[Ident], span: Span, qualified: bool) -> Result<Resolved> {
        let decl = &self.stream.decl;
        let first = &parts[0];
        if let Some(c) = find(decl, first) {
            return if c.key {
                no_nested(parts, span)?;
                Ok(Resolved::Expr(Expr::Key))
            } else {
                Ok(Resolved::Expr(path(&[&c.name], &parts[1..])))
            };
        }
        if parts.len() == 1 && is_pseudo(first, "ROWKEY") {
            return Ok(Resolved::Expr(Expr::Key));
        }
        if parts.len() == 1 && is_pseudo(first, "ROWTIME") {
            return Ok(Resolved::Expr(Expr::RecordTimestamp));
        }
        if decl.columns.is_empty() {
            return Ok(Resolved::Expr(path(&[], parts)));
        }
        if !qualified && self.tables.is_empty() && parts.len() >= 2 {
            return Err(SqlError::span(
                span,
                format!("unknown source or column '{}'", first.value),
            ));
        }
        Err(unknown(decl, first, span))
    }

    fn in_table(&self, place: usize, parts: &[Ident], span: Span) -> Result<Resolved> {
        let t = &self.tables[place];
        let first = &parts[0];
        if let Some(c) = find(&t.side.decl, first) {
            return if c.key {
                no_nested(parts, span)?;
                Ok(Resolved::TableKey(place))
            } else {
                Ok(Resolved::Expr(path(&[&t.field, &c.name], &parts[1..])))
            };
        }
        if parts.len() == 1 && is_pseudo(first, "ROWKEY") {
            return Ok(Resolved::TableKey(place));
        }
        if t.side.decl.columns.is_empty() {
            return Ok(Resolved::Expr(path(&[&t.field], parts)));
        }
        Err(unknown(&t.side.decl, first, span))
    }

    /// The expression reading a declared column of the stream.
    pub fn stream_column(&self, c: &ColumnDecl) -> Expr {
        if c.key {
            Expr::Key
        } else {
            Expr::Field(vec![c.name.clone()])
        }
    }

    /// The expression reading a declared column of the joined table.
    pub fn table_column(&self, t: &TableSide, c: &ColumnDecl) -> Expr {
        if c.key {
            t.key
                .clone()
                .unwrap_or(Expr::Literal(serde_json::Value::Null))
        } else {
            Expr::Field(vec![t.field.clone(), c.name.clone()])
        }
    }

    /// Name resolution for a clause: `context` names it in messages and
    /// `aggregates` says why an aggregate is not allowed there.
    pub fn names<'s>(&'s self, context: &'static str, aggregates: &'static str) -> RowNames<'s> {
        RowNames {
            scope: self,
            context,
            aggregates,
        }
    }
}

fn no_nested(parts: &[Ident], span: Span) -> Result<()> {
    if parts.len() > 1 {
        return Err(SqlError::span(span, "a key column has no nested fields"));
    }
    Ok(())
}

/// Names over one event (WHERE, GROUP BY, per-event SELECT, aggregate
/// inputs): aggregates are not allowed.
pub(crate) struct RowNames<'s> {
    scope: &'s Scope,
    context: &'static str,
    aggregates: &'static str,
}

impl Names for RowNames<'_> {
    fn column(&self, parts: &[Ident], span: Span) -> Result<Expr> {
        match self.scope.resolve(parts, span)? {
            Resolved::Expr(e) => Ok(e),
            Resolved::TableKey(place) => match self.scope.tables[place].key.clone() {
                Some(k) => Ok(k),
                None => Err(SqlError::span(
                    span,
                    "the table's key can only be compared with a stream column in ON",
                )),
            },
            Resolved::WindowStart | Resolved::WindowEnd => Err(SqlError::span(
                span,
                format!(
                    "WINDOWSTART and WINDOWEND are not allowed in {}: select them as columns of a windowed aggregate",
                    self.context
                ),
            )),
        }
    }

    fn aggregate(&self, call: &AggCall<'_>, span: Span) -> Result<Expr> {
        Err(SqlError::span(
            span,
            format!(
                "aggregate {} in {}: {}",
                call.text, self.context, self.aggregates
            ),
        ))
    }
}
