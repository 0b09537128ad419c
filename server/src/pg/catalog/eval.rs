//! Evaluating a catalog query: `WITH`, `FROM` (tables, derived tables,
//! table functions; comma, `INNER`, `LEFT`, `RIGHT`, `FULL`, `CROSS`
//! joins), `WHERE`, `GROUP BY` with aggregates, `HAVING`, `row_number()`
//! windows, `DISTINCT`, `UNION`/`INTERSECT`/`EXCEPT`, `ORDER BY` (by
//! position, output name or expression), `LIMIT`/`OFFSET`.
//!
//! Joins are nested loops over small relations; every intermediate result
//! is held to [`MAX_ROWS`] rows and every nesting to [`MAX_DEPTH`].

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;

use pgwire::api::Type;
use sqlparser::ast::{
    Distinct, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, Ident,
    LimitClause, ObjectName, OrderByExpr, OrderByKind, OrderBySort, Query, Select, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, SetOperator, SetQuantifier,
};

use super::from::{missing_table, rename};
use super::relations::Catalog;
use super::value::{same, sort_order, Ty, Value};
use super::{CatalogError, MAX_DEPTH, MAX_ROWS};
use crate::pg::answer::Answer;

/// A column of an intermediate result: the relation (alias) it belongs
/// to, its name and, when known, its declared type.
#[derive(Debug, Clone)]
pub struct Col {
    /// The alias or relation name qualifying it (`c` in `c.relname`).
    pub table: Option<String>,
    /// Its name.
    pub name: String,
    /// Its declared type (`None`: the values' own).
    pub ty: Option<Ty>,
}

/// Rows under columns: a relation, a join, a query's result.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    /// The columns.
    pub cols: Vec<Col>,
    /// The rows, each as long as `cols`.
    pub rows: Vec<Vec<Value>>,
}

impl Frame {
    /// The answer sending these rows, each column typed by its declared
    /// type or else by its first non-`NULL` value.
    pub fn into_answer(self) -> Answer {
        let columns: Vec<(String, Type)> = self
            .cols
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let ty = c.ty.unwrap_or_else(|| {
                    self.rows
                        .iter()
                        .map(|r| &r[i])
                        .find(|v| !v.is_null())
                        .map_or(Ty::Text, Value::natural_ty)
                });
                (c.name.clone(), ty.pg_type())
            })
            .collect();
        let rows = self
            .rows
            .iter()
            .map(|r| r.iter().map(Value::to_text).collect())
            .collect();
        Answer::Rows {
            columns,
            rows,
            command: "SELECT",
        }
    }
}

/// What an expression sees: the current row under its columns, the
/// enclosing queries' rows (correlated subqueries), the group of an
/// aggregate and the row's window-function values.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    /// The columns of `row`.
    pub cols: &'a [Col],
    /// The current row.
    pub row: &'a [Value],
    /// The enclosing query's environment.
    pub outer: Option<&'a Env<'a>>,
    /// The rows of the current group, when aggregating.
    pub group: Option<&'a [Vec<Value>]>,
    /// Window-function calls of the projection and their values here.
    pub windows: &'a [(&'a Expr, Value)],
}

impl<'a> Env<'a> {
    /// An environment of one row.
    pub fn of(cols: &'a [Col], row: &'a [Value], outer: Option<&'a Env<'a>>) -> Env<'a> {
        Env {
            cols,
            row,
            outer,
            group: None,
            windows: &[],
        }
    }
}

/// Evaluates the queries of one statement over one catalog.
pub struct Evaluator<'c> {
    /// What the query reads.
    pub catalog: &'c Catalog,
    /// `WITH` queries in scope, innermost last.
    pub(super) ctes: RefCell<Vec<(String, Frame)>>,
    /// Regular expressions compiled so far (pattern, case-insensitive).
    pub regexes: RefCell<HashMap<(String, bool), regex::Regex>>,
}

/// The lower-case name of an unquoted identifier, the exact one of a
/// quoted one.
pub fn ident_name(id: &Ident) -> String {
    match id.quote_style {
        Some(_) => id.value.clone(),
        None => id.value.to_lowercase(),
    }
}

/// The parts of an object name (`pg_catalog.pg_class`).
pub fn object_parts(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|p| match p.as_ident() {
            Some(id) => ident_name(id),
            None => p.to_string().to_lowercase(),
        })
        .collect()
}

impl<'c> Evaluator<'c> {
    /// An evaluator over `catalog`.
    pub fn new(catalog: &'c Catalog) -> Evaluator<'c> {
        Evaluator {
            catalog,
            ctes: RefCell::new(Vec::new()),
            regexes: RefCell::new(HashMap::new()),
        }
    }

    /// The rows of the top-level query `q`.
    pub fn run(&self, q: &Query) -> Result<Frame, CatalogError> {
        self.query(q, None, 0)
    }

    /// The rows of `q`, which may refer to `outer`'s columns.
    pub fn query(
        &self,
        q: &Query,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let depth = deeper(depth)?;
        if q.fetch.is_some() || !q.locks.is_empty() || !q.pipe_operators.is_empty() {
            return Err(CatalogError::unsupported("FETCH, FOR UPDATE or pipes"));
        }
        let scoped = self.ctes.borrow().len();
        let result = self.query_in_scope(q, outer, depth);
        self.ctes.borrow_mut().truncate(scoped);
        result
    }

    fn query_in_scope(
        &self,
        q: &Query,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        if let Some(with) = &q.with {
            if with.recursive {
                return Err(CatalogError::unsupported("WITH RECURSIVE"));
            }
            for cte in &with.cte_tables {
                let mut frame = self.query(&cte.query, outer, depth)?;
                let name = ident_name(&cte.alias.name);
                rename(&mut frame, &cte.alias);
                self.ctes.borrow_mut().push((name, frame));
            }
        }
        let order: &[OrderByExpr] = match &q.order_by {
            None => &[],
            Some(o) => match &o.kind {
                OrderByKind::Expressions(e) => e,
                OrderByKind::All(_) => return Err(CatalogError::unsupported("ORDER BY ALL")),
            },
        };
        let (mut frame, keys) = match q.body.as_ref() {
            SetExpr::Select(s) => self.select(s, order, outer, depth)?,
            body => {
                let frame = self.set_expr(body, outer, depth)?;
                let keys = output_keys(&frame, order, |e| {
                    self.output_key_expr(e, &frame, outer, depth)
                })?;
                (frame, keys)
            }
        };
        if !order.is_empty() {
            let mut indexed: Vec<(Vec<Value>, Vec<Value>)> =
                keys.into_iter().zip(frame.rows).collect();
            indexed.sort_by(|(a, _), (b, _)| compare_keys(a, b, order));
            frame.rows = indexed.into_iter().map(|(_, r)| r).collect();
        }
        self.limit(&mut frame, q.limit_clause.as_ref(), outer, depth)?;
        Ok(frame)
    }

    fn output_key_expr(
        &self,
        e: &Expr,
        frame: &Frame,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Vec<Value>, CatalogError> {
        frame
            .rows
            .iter()
            .map(|row| self.expr(e, &Env::of(&frame.cols, row, outer), depth))
            .collect()
    }

    fn limit(
        &self,
        frame: &mut Frame,
        limit: Option<&LimitClause>,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<(), CatalogError> {
        let Some(limit) = limit else { return Ok(()) };
        let (limit, offset) = match limit {
            LimitClause::LimitOffset {
                limit,
                offset,
                limit_by,
            } => {
                if !limit_by.is_empty() {
                    return Err(CatalogError::unsupported("LIMIT BY"));
                }
                (limit.as_ref(), offset.as_ref().map(|o| &o.value))
            }
            LimitClause::OffsetCommaLimit { offset, limit } => (Some(limit), Some(offset)),
        };
        let none: [Value; 0] = [];
        let env = Env::of(&[], &none, outer);
        let count = |e: Option<&Expr>| -> Result<Option<usize>, CatalogError> {
            match e {
                None => Ok(None),
                Some(e) => Ok(self
                    .expr(e, &env, depth)?
                    .as_int()?
                    .map(|n| usize::try_from(n.max(0)).unwrap_or(usize::MAX))),
            }
        };
        let offset = count(offset)?.unwrap_or(0);
        let limit = count(limit)?;
        let rows = std::mem::take(&mut frame.rows);
        frame.rows = rows
            .into_iter()
            .skip(offset)
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        Ok(())
    }

    fn set_expr(
        &self,
        body: &SetExpr,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let depth = deeper(depth)?;
        match body {
            SetExpr::Select(s) => Ok(self.select(s, &[], outer, depth)?.0),
            SetExpr::Query(q) => self.query(q, outer, depth),
            SetExpr::SetOperation {
                left,
                op,
                set_quantifier,
                right,
            } => {
                let mut l = self.set_expr(left, outer, depth)?;
                let r = self.set_expr(right, outer, depth)?;
                if l.cols.len() != r.cols.len() {
                    return Err(CatalogError::new(
                        "42601",
                        "each UNION query must have the same number of columns",
                    ));
                }
                let all = matches!(set_quantifier, SetQuantifier::All);
                for (lc, rc) in l.cols.iter_mut().zip(&r.cols) {
                    if lc.ty.is_none() {
                        lc.ty = rc.ty;
                    }
                }
                let contains = |rows: &[Vec<Value>], row: &[Value]| {
                    rows.iter()
                        .any(|x| x.iter().zip(row).all(|(a, b)| same(a, b)))
                };
                match op {
                    SetOperator::Union => {
                        l.rows.extend(r.rows);
                        check_rows(l.rows.len())?;
                        if !all {
                            l.rows = distinct(l.rows);
                        }
                    }
                    SetOperator::Intersect => {
                        l.rows.retain(|row| contains(&r.rows, row));
                        if !all {
                            l.rows = distinct(l.rows);
                        }
                    }
                    SetOperator::Except | SetOperator::Minus => {
                        l.rows.retain(|row| !contains(&r.rows, row));
                        if !all {
                            l.rows = distinct(l.rows);
                        }
                    }
                }
                Ok(l)
            }
            SetExpr::Values(values) => {
                let none: [Value; 0] = [];
                let env = Env::of(&[], &none, outer);
                let mut frame = Frame::default();
                for row in &values.rows {
                    let row: Vec<Value> = row
                        .iter()
                        .map(|e| self.expr(e, &env, depth))
                        .collect::<Result<_, _>>()?;
                    if frame.cols.is_empty() {
                        frame.cols = (1..=row.len())
                            .map(|i| Col {
                                table: None,
                                name: format!("column{i}"),
                                ty: None,
                            })
                            .collect();
                    }
                    frame.rows.push(row);
                }
                Ok(frame)
            }
            _ => Err(CatalogError::unsupported("this kind of query")),
        }
    }

    /// The rows of one `SELECT` and, for each, its `ORDER BY` keys.
    fn select(
        &self,
        s: &Select,
        order: &[OrderByExpr],
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<(Frame, Vec<Vec<Value>>), CatalogError> {
        if s.having.is_some() && !has_grouping(s) {
            return Err(CatalogError::unsupported("HAVING without GROUP BY"));
        }
        let input = self.from(&s.from, outer, depth)?;
        let mut rows = Vec::new();
        for row in input.rows {
            let env = Env::of(&input.cols, &row, outer);
            let keep = match &s.selection {
                None => true,
                Some(w) => self.expr(w, &env, depth)?.truth()? == Some(true),
            };
            if keep {
                rows.push(row);
            }
        }
        let input = Frame {
            cols: input.cols,
            rows,
        };
        let cols = self.output_cols(s, &input.cols)?;
        let (mut out, mut keys) = if has_grouping(s) || self.aggregates_in(s) {
            self.grouped(s, order, &input, &cols, outer, depth)?
        } else {
            self.projected(s, order, &input, &cols, outer, depth)?
        };
        match &s.distinct {
            None | Some(Distinct::All) => {}
            Some(Distinct::Distinct) => {
                let mut seen: Vec<Vec<Value>> = Vec::new();
                let mut kept = Vec::new();
                for (row, key) in out.into_iter().zip(keys) {
                    if !seen
                        .iter()
                        .any(|x| x.iter().zip(&row).all(|(a, b)| same(a, b)))
                    {
                        seen.push(row.clone());
                        kept.push((row, key));
                    }
                }
                (out, keys) = kept.into_iter().unzip();
            }
            Some(Distinct::On(_)) => return Err(CatalogError::unsupported("DISTINCT ON")),
        }
        Ok((Frame { cols, rows: out }, keys))
    }

    /// The output columns of `s`'s projection over `input`'s columns.
    fn output_cols(&self, s: &Select, input: &[Col]) -> Result<Vec<Col>, CatalogError> {
        let mut cols = Vec::new();
        for item in &s.projection {
            match item {
                SelectItem::UnnamedExpr(e) => cols.push(Col {
                    table: None,
                    name: super::expr::output_name(e),
                    ty: super::expr::static_ty(e, input),
                }),
                SelectItem::ExprWithAlias { expr, alias } => cols.push(Col {
                    table: None,
                    name: ident_name(alias),
                    ty: super::expr::static_ty(expr, input),
                }),
                SelectItem::Wildcard(_) => cols.extend(input.iter().cloned()),
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) => {
                    let parts = object_parts(n);
                    let table = parts.last().cloned();
                    let matching: Vec<Col> =
                        input.iter().filter(|c| c.table == table).cloned().collect();
                    if matching.is_empty() {
                        return Err(missing_table(&parts.join(".")));
                    }
                    cols.extend(matching);
                }
                _ => return Err(CatalogError::unsupported("this select item")),
            }
        }
        for c in &mut cols {
            c.table = None;
        }
        Ok(cols)
    }

    /// The values of `s`'s projection for one row (or group).
    fn project(&self, s: &Select, env: &Env, depth: usize) -> Result<Vec<Value>, CatalogError> {
        let mut out = Vec::new();
        for item in &s.projection {
            match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                    out.push(self.expr(e, env, depth)?)
                }
                SelectItem::Wildcard(_) => out.extend(env.row.iter().cloned()),
                SelectItem::QualifiedWildcard(
                    SelectItemQualifiedWildcardKind::ObjectName(n),
                    _,
                ) => {
                    let table = object_parts(n).last().cloned();
                    for (c, v) in env.cols.iter().zip(env.row) {
                        if c.table == table {
                            out.push(v.clone());
                        }
                    }
                }
                _ => return Err(CatalogError::unsupported("this select item")),
            }
        }
        Ok(out)
    }

    fn projected(
        &self,
        s: &Select,
        order: &[OrderByExpr],
        input: &Frame,
        cols: &[Col],
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Projected, CatalogError> {
        let windows = self.windows(s, input, outer, depth)?;
        let mut out = Vec::with_capacity(input.rows.len());
        let mut keys = Vec::with_capacity(input.rows.len());
        for (i, row) in input.rows.iter().enumerate() {
            let these: Vec<(&Expr, Value)> = windows
                .iter()
                .map(|(e, values)| (*e, values[i].clone()))
                .collect();
            let env = Env {
                windows: &these,
                ..Env::of(&input.cols, row, outer)
            };
            let values = self.project(s, &env, depth)?;
            keys.push(self.order_keys(order, cols, &values, &env, depth)?);
            out.push(values);
        }
        Ok((out, keys))
    }

    fn grouped(
        &self,
        s: &Select,
        order: &[OrderByExpr],
        input: &Frame,
        cols: &[Col],
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Projected, CatalogError> {
        let by = match &s.group_by {
            GroupByExpr::Expressions(e, modifiers) if modifiers.is_empty() => e.as_slice(),
            _ => return Err(CatalogError::unsupported("this GROUP BY")),
        };
        let mut groups: Vec<(Vec<Value>, Vec<Vec<Value>>)> = Vec::new();
        for row in &input.rows {
            let env = Env::of(&input.cols, row, outer);
            let key: Vec<Value> = by
                .iter()
                .map(|e| self.group_key(e, s, &env, depth))
                .collect::<Result<_, _>>()?;
            match groups
                .iter_mut()
                .find(|(k, _)| k.iter().zip(&key).all(|(a, b)| same(a, b)))
            {
                Some((_, rows)) => rows.push(row.clone()),
                None => groups.push((key, vec![row.clone()])),
            }
        }
        if groups.is_empty() && by.is_empty() {
            groups.push((Vec::new(), Vec::new()));
        }
        let nulls: Vec<Value> = vec![Value::Null; input.cols.len()];
        let mut out = Vec::new();
        let mut keys = Vec::new();
        for (_, rows) in &groups {
            let first = rows.first().unwrap_or(&nulls);
            let env = Env {
                group: Some(rows),
                ..Env::of(&input.cols, first, outer)
            };
            if let Some(h) = &s.having {
                if self.expr(h, &env, depth)?.truth()? != Some(true) {
                    continue;
                }
            }
            let values = self.project(s, &env, depth)?;
            keys.push(self.order_keys(order, cols, &values, &env, depth)?);
            out.push(values);
        }
        Ok((out, keys))
    }

    /// A `GROUP BY` item's value: a position or output name picks that
    /// projection item.
    fn group_key(
        &self,
        e: &Expr,
        s: &Select,
        env: &Env,
        depth: usize,
    ) -> Result<Value, CatalogError> {
        if let Some(i) = position(e) {
            return match s.projection.get(i) {
                Some(SelectItem::UnnamedExpr(p) | SelectItem::ExprWithAlias { expr: p, .. }) => {
                    self.expr(p, env, depth)
                }
                _ => Err(CatalogError::new(
                    "42P10",
                    "GROUP BY position is not in select list",
                )),
            };
        }
        self.expr(e, env, depth)
    }

    /// The `ORDER BY` keys of one output row: a position or an output
    /// column's name picks that column, anything else is evaluated over
    /// the input row.
    fn order_keys(
        &self,
        order: &[OrderByExpr],
        cols: &[Col],
        values: &[Value],
        env: &Env,
        depth: usize,
    ) -> Result<Vec<Value>, CatalogError> {
        order
            .iter()
            .map(|o| match output_index(&o.expr, cols)? {
                Some(i) => Ok(values[i].clone()),
                None => self.expr(&o.expr, env, depth),
            })
            .collect()
    }

    /// The values of the projection's `row_number()` calls, per row.
    fn windows<'s>(
        &self,
        s: &'s Select,
        input: &Frame,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Vec<(&'s Expr, Vec<Value>)>, CatalogError> {
        let mut out = Vec::new();
        for item in &s.projection {
            let e = match item {
                SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                _ => continue,
            };
            let Expr::Function(f) = e else { continue };
            let Some(over) = &f.over else { continue };
            let sqlparser::ast::WindowType::WindowSpec(spec) = over else {
                return Err(CatalogError::unsupported("named windows"));
            };
            let name = object_parts(&f.name).last().cloned().unwrap_or_default();
            if name != "row_number" {
                return Err(CatalogError::new(
                    "42883",
                    format!("window function {name}() is not supported"),
                ));
            }
            let mut keyed = Vec::with_capacity(input.rows.len());
            for (i, row) in input.rows.iter().enumerate() {
                let env = Env::of(&input.cols, row, outer);
                let part: Vec<Value> = spec
                    .partition_by
                    .iter()
                    .map(|p| self.expr(p, &env, depth))
                    .collect::<Result<_, _>>()?;
                let ord: Vec<Value> = spec
                    .order_by
                    .iter()
                    .map(|o| self.expr(&o.expr, &env, depth))
                    .collect::<Result<_, _>>()?;
                keyed.push((part, ord, i));
            }
            keyed.sort_by(|a, b| {
                compare_keys(&a.0, &b.0, &[])
                    .then_with(|| compare_keys(&a.1, &b.1, &spec.order_by))
                    .then(a.2.cmp(&b.2))
            });
            let mut values = vec![Value::Null; input.rows.len()];
            let mut n = 0;
            for (k, (part, _, i)) in keyed.iter().enumerate() {
                let same_part = k > 0 && keyed[k - 1].0.iter().zip(part).all(|(a, b)| same(a, b));
                n = if same_part { n + 1 } else { 1 };
                values[*i] = Value::Int(n);
            }
            out.push((e, values));
        }
        Ok(out)
    }

    /// Whether `s`'s projection or `HAVING` calls an aggregate.
    fn aggregates_in(&self, s: &Select) -> bool {
        s.projection.iter().any(|item| match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                super::expr::has_aggregate(e)
            }
            _ => false,
        })
    }
}

/// Output rows and, for each, its `ORDER BY` keys.
type Projected = (Vec<Vec<Value>>, Vec<Vec<Value>>);

/// One level deeper, or [`CatalogError::too_deep`].
pub fn deeper(depth: usize) -> Result<usize, CatalogError> {
    if depth >= MAX_DEPTH {
        return Err(CatalogError::too_deep());
    }
    Ok(depth + 1)
}

/// Checks a row count against [`MAX_ROWS`].
pub fn check_rows(n: usize) -> Result<(), CatalogError> {
    if n > MAX_ROWS {
        return Err(CatalogError::too_many_rows());
    }
    Ok(())
}

fn has_grouping(s: &Select) -> bool {
    matches!(&s.group_by, GroupByExpr::Expressions(e, _) if !e.is_empty())
        || matches!(&s.group_by, GroupByExpr::All(_))
}

fn distinct(rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    let mut out: Vec<Vec<Value>> = Vec::new();
    for row in rows {
        if !out
            .iter()
            .any(|x| x.iter().zip(&row).all(|(a, b)| same(a, b)))
        {
            out.push(row);
        }
    }
    out
}

/// A 1-based integer literal's 0-based index.
fn position(e: &Expr) -> Option<usize> {
    match e {
        Expr::Value(v) => match &v.value {
            sqlparser::ast::Value::Number(n, _) => n.parse::<usize>().ok()?.checked_sub(1),
            _ => None,
        },
        _ => None,
    }
}

/// The output column an `ORDER BY` item names: by position, or by the
/// output name a bare identifier spells.
fn output_index(e: &Expr, cols: &[Col]) -> Result<Option<usize>, CatalogError> {
    if let Some(i) = position(e) {
        if i >= cols.len() {
            return Err(CatalogError::new(
                "42P10",
                format!("ORDER BY position {} is not in select list", i + 1),
            ));
        }
        return Ok(Some(i));
    }
    if let Expr::Identifier(id) = e {
        let name = ident_name(id);
        return Ok(cols.iter().position(|c| c.name == name));
    }
    Ok(None)
}

/// The `ORDER BY` keys of a set operation's rows: output columns only
/// (by position, name, or an expression over them).
fn output_keys(
    frame: &Frame,
    order: &[OrderByExpr],
    mut eval: impl FnMut(&Expr) -> Result<Vec<Value>, CatalogError>,
) -> Result<Vec<Vec<Value>>, CatalogError> {
    let mut keys: Vec<Vec<Value>> = vec![Vec::new(); frame.rows.len()];
    for o in order {
        let column: Vec<Value> = match output_index(&o.expr, &frame.cols)? {
            Some(i) => frame.rows.iter().map(|r| r[i].clone()).collect(),
            None => eval(&o.expr)?,
        };
        for (k, v) in keys.iter_mut().zip(column) {
            k.push(v);
        }
    }
    Ok(keys)
}

/// Compares two rows of `ORDER BY` keys (`order` gives each key's
/// direction; missing entries sort ascending).
fn compare_keys(a: &[Value], b: &[Value], order: &[OrderByExpr]) -> Ordering {
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        let options = order.get(i).map(|o| &o.options);
        let desc = matches!(
            options.and_then(|o| o.sort.as_ref()),
            Some(OrderBySort::Desc)
        );
        let nulls_first = options.and_then(|o| o.nulls_first).unwrap_or(desc);
        let o = match (x.is_null(), y.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => {
                if nulls_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (false, true) => {
                if nulls_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            _ => {
                let o = sort_order(x, y);
                if desc {
                    o.reverse()
                } else {
                    o
                }
            }
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

/// The arguments of a function call as expressions (`*` as `None`).
pub fn call_args(args: &FunctionArguments) -> Result<Vec<Option<&Expr>>, CatalogError> {
    match args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::Subquery(_) => Err(CatalogError::unsupported(
            "a subquery as a function's argument",
        )),
        FunctionArguments::List(list) => list
            .args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(Some(e)),
                FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => Ok(None),
                _ => Err(CatalogError::unsupported(
                    "named or qualified-wildcard arguments",
                )),
            })
            .collect(),
    }
}
