//! The aggregate part of a plan: `GROUP BY` keys, the SELECT list as group
//! keys, window bounds and aggregates ([`ColumnSource`]), and `HAVING`
//! rewritten to read output columns by name.

use std::cell::RefCell;

use sqlparser::ast::{self as ast, Ident, SelectItem, Spanned};
use sqlparser::tokenizer::{Location, Span};

use super::error::{Result, SqlError};
use super::planner::default_name;
use super::query::{known, QueryParts};
use super::resolve::{ident_matches, Resolved, Scope};
use super::translate::{aggregate_call, AggCall, Names, Translator};
use super::types::SqlType;
use crate::accumulators::AggregateKind;
use crate::expr::{DataType, Expr};
use crate::plan::{
    group_key_input, hidden_aggregate, AggregateColumn, AggregateSpec, ColumnSource, WindowedSpec,
    WINDOW_END_INPUT, WINDOW_START_INPUT,
};

const NESTED: &str = "aggregates cannot be nested";

/// Builds the aggregate of a grouped query.
pub(crate) fn aggregate_spec(
    parts: &QueryParts<'_>,
    scope: &Scope,
    window: Option<WindowedSpec>,
    at: Location,
) -> Result<AggregateSpec> {
    let names = scope.names("GROUP BY", "group by columns or expressions over them");
    let tr = Translator { names: &names, at };
    let mut group_by = Vec::with_capacity(parts.group_by.len());
    for g in parts.group_by {
        if let ast::Expr::Value(v) = g {
            if matches!(v.value, ast::Value::Number(..)) {
                return Err(SqlError::span(
                    known(g.span(), at),
                    "positional GROUP BY is not supported; name the column",
                ));
            }
        }
        group_by.push(tr.expr(g)?);
    }
    let mut spec = AggregateSpec {
        group_by,
        window,
        aggregates: Vec::new(),
        columns: Vec::new(),
        having: None,
    };
    for (i, item) in parts.select.projection.iter().enumerate() {
        let (e, alias) = match item {
            SelectItem::UnnamedExpr(e) => (e, None),
            SelectItem::ExprWithAlias { expr, alias } => (expr, Some(alias)),
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                return Err(SqlError::span(
                    known(item.span(), at),
                    "SELECT * cannot be used with GROUP BY: list the group columns and aggregates",
                ))
            }
            _ => {
                return Err(SqlError::span(
                    known(item.span(), at),
                    "this kind of SELECT item is not supported",
                ))
            }
        };
        let span = known(e.span(), at);
        let name = alias.map_or_else(|| default_name(e, i, scope), |a| a.value.clone());
        if name.starts_with('#') {
            return Err(SqlError::span(
                alias.map_or(span, |a| known(a.span, at)),
                format!("output column '{name}' must not start with '#' (the names of an expression's hidden inputs)"),
            ));
        }
        if spec
            .columns
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(&name))
        {
            return Err(SqlError::span(
                span,
                format!("duplicate output column '{name}'; give it another name with AS"),
            ));
        }
        let source = column_source(e, &name, &mut spec, scope, at)?;
        spec.columns.push((name, source));
    }
    if let Some(h) = &parts.select.having {
        let names = HavingNames {
            scope,
            spec: RefCell::new(&mut spec),
        };
        let having = Translator { names: &names, at }.expr(h)?;
        spec.having = Some(having);
    }
    Ok(spec)
}

fn strip(e: &ast::Expr) -> &ast::Expr {
    match e {
        ast::Expr::Nested(inner) => strip(inner),
        other => other,
    }
}

fn column_ref(e: &ast::Expr) -> Option<&[Ident]> {
    match strip(e) {
        ast::Expr::Identifier(id) => Some(std::slice::from_ref(id)),
        ast::Expr::CompoundIdentifier(ids) => Some(ids.as_slice()),
        _ => None,
    }
}

/// Where one SELECT item of a grouped query comes from.
fn column_source(
    e: &ast::Expr,
    name: &str,
    spec: &mut AggregateSpec,
    scope: &Scope,
    at: Location,
) -> Result<ColumnSource> {
    let span = known(e.span(), at);
    if let Some(parts) = column_ref(e) {
        let bound = match scope.resolve(parts, span)? {
            Resolved::WindowStart => Some(ColumnSource::WindowStart),
            Resolved::WindowEnd => Some(ColumnSource::WindowEnd),
            _ => None,
        };
        if let Some(bound) = bound {
            if spec.window.is_none() {
                return Err(SqlError::span(
                    span,
                    "WINDOWSTART and WINDOWEND need a WINDOW clause",
                ));
            }
            return Ok(bound);
        }
    }
    if let ast::Expr::Function(f) = strip(e) {
        if let Some(call) = aggregate_call(f, at)? {
            let input = aggregate_input(&call, scope, at)?;
            let kind = typed_kind(call.kind, input.as_ref(), scope);
            // An expression before this item may have made the same
            // aggregate, hidden: select that one.
            let hidden = spec
                .aggregates
                .iter()
                .position(|a| a.name.starts_with('#') && a.kind == kind && a.input == input);
            if let Some(i) = hidden {
                return Ok(ColumnSource::Aggregate(i));
            }
            spec.aggregates.push(AggregateColumn {
                name: name.to_string(),
                kind,
                input,
            });
            return Ok(ColumnSource::Aggregate(spec.aggregates.len() - 1));
        }
    }
    // A GROUP BY expression itself.
    let names = scope.names("this SELECT item", "");
    if let Ok(expr) = (Translator { names: &names, at }.expr(e)) {
        if let Some(i) = spec.group_by.iter().position(|g| *g == expr) {
            return Ok(ColumnSource::GroupKey(i));
        }
    }
    // Else an expression over aggregates, GROUP BY columns and window
    // bounds.
    let names = ComputedNames {
        scope,
        spec: RefCell::new(spec),
        item: e,
    };
    let expr = Translator { names: &names, at }.expr(e)?;
    Ok(ColumnSource::Computed(expr))
}

/// The index of the aggregate `call` in `spec`: the one already there
/// (selected or hidden), else a new hidden one ([`hidden_aggregate`]).
fn aggregate_or_hidden(
    spec: &mut AggregateSpec,
    call: &AggCall<'_>,
    scope: &Scope,
    span: Span,
) -> Result<usize> {
    let input = aggregate_input(call, scope, span.start)?;
    let kind = typed_kind(call.kind, input.as_ref(), scope);
    if let Some(i) = spec
        .aggregates
        .iter()
        .position(|a| a.kind == kind && a.input == input)
    {
        return Ok(i);
    }
    let name = hidden_aggregate(spec.aggregates.len());
    spec.aggregates.push(AggregateColumn { name, kind, input });
    Ok(spec.aggregates.len() - 1)
}

/// Names in an expression over aggregates (`SUM(x) / COUNT(*)`): a GROUP
/// BY column or window bound reads as its input ([`AggregateSpec::inputs`]),
/// an aggregate as the one the SELECT list already has or a new, hidden
/// one ([`hidden_aggregate`]).
struct ComputedNames<'a, 'e> {
    scope: &'a Scope,
    spec: RefCell<&'a mut AggregateSpec>,
    /// The SELECT item, for messages.
    item: &'e ast::Expr,
}

impl Names for ComputedNames<'_, '_> {
    fn column(&self, parts: &[Ident], span: Span) -> Result<Expr> {
        let spec = self.spec.borrow();
        let input = match self.scope.resolve(parts, span)? {
            Resolved::WindowStart | Resolved::WindowEnd if spec.window.is_none() => {
                return Err(SqlError::span(
                    span,
                    "WINDOWSTART and WINDOWEND need a WINDOW clause",
                ))
            }
            Resolved::WindowStart => Some(WINDOW_START_INPUT.to_string()),
            Resolved::WindowEnd => Some(WINDOW_END_INPUT.to_string()),
            Resolved::Expr(e) => spec
                .group_by
                .iter()
                .position(|g| *g == e)
                .map(group_key_input),
            Resolved::TableKey(_) => None,
        };
        input.map(Expr::Column).ok_or_else(|| {
            let text: Vec<&str> = parts.iter().map(|p| p.value.as_str()).collect();
            let text = text.join(".");
            let item = self.item.to_string();
            let within = match item == text {
                true => String::new(),
                false => format!(" in '{item}'"),
            };
            SqlError::span(
                span,
                format!(
                    "expected a GROUP BY column, a window bound or an aggregate, found '{text}'{within}: add it to GROUP BY or aggregate it"
                ),
            )
        })
    }

    fn aggregate(&self, call: &AggCall<'_>, span: Span) -> Result<Expr> {
        let mut spec = self.spec.borrow_mut();
        let i = aggregate_or_hidden(&mut spec, call, self.scope, span)?;
        Ok(Expr::Column(spec.aggregates[i].name.clone()))
    }
}

/// `SUM`/`AVG` over a `DECIMAL(p, s)` input — a stream column declared so,
/// or a `CAST(.. AS DECIMAL(p, s))` — sum exactly ([`AggregateKind::for_decimal`]).
fn typed_kind(kind: AggregateKind, input: Option<&Expr>, scope: &Scope) -> AggregateKind {
    let scale = match input {
        Some(Expr::Cast(_, DataType::Decimal { scale, .. })) => Some(*scale),
        Some(Expr::Field(path)) => match path.as_slice() {
            [column] => scope
                .stream
                .decl
                .columns
                .iter()
                .find(|c| c.name == *column && !c.key)
                .and_then(|c| match c.sql_type {
                    SqlType::Decimal { scale, .. } => Some(scale),
                    _ => None,
                }),
            _ => None,
        },
        _ => None,
    };
    scale.map_or(kind, |s| kind.for_decimal(s))
}

fn aggregate_input(call: &AggCall<'_>, scope: &Scope, at: Location) -> Result<Option<Expr>> {
    let names = scope.names("an aggregate's argument", NESTED);
    call.arg
        .map(|a| Translator { names: &names, at }.expr(a))
        .transpose()
}

/// `HAVING` reads the output row: output column names, selected GROUP BY
/// columns and window bounds, and selected aggregates; a GROUP BY column,
/// window bound or aggregate not selected reads as a hidden input
/// ([`AggregateSpec::inputs`]), an aggregate made for it if need be.
struct HavingNames<'a> {
    scope: &'a Scope,
    spec: RefCell<&'a mut AggregateSpec>,
}

impl HavingNames<'_> {
    /// The output column of `want`, else the hidden input `hidden`.
    fn output_or(&self, want: &ColumnSource, hidden: impl FnOnce() -> String) -> Expr {
        let spec = self.spec.borrow();
        let output = spec.columns.iter().find(|(_, s)| s == want);
        Expr::Column(output.map_or_else(hidden, |(n, _)| n.clone()))
    }
}

impl Names for HavingNames<'_> {
    fn column(&self, parts: &[Ident], span: Span) -> Result<Expr> {
        if let [id] = parts {
            let spec = self.spec.borrow();
            if let Some((n, _)) = spec.columns.iter().find(|(n, _)| ident_matches(id, n)) {
                return Ok(Expr::Column(n.clone()));
            }
        }
        let text = parts
            .iter()
            .map(|p| p.value.as_str())
            .collect::<Vec<_>>()
            .join(".");
        let windowed = self.spec.borrow().window.is_some();
        match self.scope.resolve(parts, span)? {
            Resolved::WindowStart if windowed => Ok(self
                .output_or(&ColumnSource::WindowStart, || {
                    WINDOW_START_INPUT.to_string()
                })),
            Resolved::WindowEnd if windowed => {
                Ok(self.output_or(&ColumnSource::WindowEnd, || WINDOW_END_INPUT.to_string()))
            }
            Resolved::Expr(e) => {
                let group = self.spec.borrow().group_by.iter().position(|g| *g == e);
                match group {
                    Some(i) => Ok(self.output_or(&ColumnSource::GroupKey(i), || group_key_input(i))),
                    None => Err(SqlError::span(
                        span,
                        format!("HAVING reads GROUP BY columns, window bounds, aggregates and output columns, and '{text}' is none of them: add it to GROUP BY or aggregate it"),
                    )),
                }
            }
            _ => Err(SqlError::span(
                span,
                format!("HAVING cannot read '{text}' here"),
            )),
        }
    }

    fn aggregate(&self, call: &AggCall<'_>, span: Span) -> Result<Expr> {
        let i = aggregate_or_hidden(&mut self.spec.borrow_mut(), call, self.scope, span)?;
        let hidden = self.spec.borrow().aggregates[i].name.clone();
        Ok(self.output_or(&ColumnSource::Aggregate(i), || hidden))
    }
}
