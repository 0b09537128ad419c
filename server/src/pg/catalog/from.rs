//! The `FROM` clause of a catalog query: system relations and `WITH`
//! queries by name, derived tables, functions (`generate_series`,
//! `unnest`, a scalar function as one row), and comma, `INNER`, `LEFT`,
//! `RIGHT`, `FULL` and `CROSS` joins — nested loops over small relations,
//! each result held to [`MAX_ROWS`] rows.

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, JoinConstraint, JoinOperator, TableAlias, TableFactor,
    TableWithJoins,
};

use super::eval::{check_rows, deeper, ident_name, object_parts, Col, Env, Evaluator, Frame};
use super::value::Value;
use super::{CatalogError, MAX_ROWS};

impl Evaluator<'_> {
    /// The rows of a `FROM` list (one empty row without one).
    pub(super) fn from(
        &self,
        items: &[TableWithJoins],
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let mut frame = Frame {
            cols: Vec::new(),
            rows: vec![Vec::new()],
        };
        for item in items {
            let right = self.table_with_joins(item, outer, depth)?;
            frame = self.join(frame, right, JoinKind::Inner, None, outer, depth)?;
        }
        Ok(frame)
    }

    fn table_with_joins(
        &self,
        t: &TableWithJoins,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let mut frame = self.factor(&t.relation, outer, depth)?;
        for j in &t.joins {
            let right = self.factor(&j.relation, outer, depth)?;
            let (kind, constraint) = match &j.join_operator {
                JoinOperator::Join(c) | JoinOperator::Inner(c) => (JoinKind::Inner, c),
                JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
                JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (JoinKind::Right, c),
                JoinOperator::FullOuter(c) => (JoinKind::Full, c),
                JoinOperator::CrossJoin(c) => (JoinKind::Inner, c),
                _ => return Err(CatalogError::unsupported("this kind of join")),
            };
            let on = match constraint {
                JoinConstraint::On(e) => Some(e),
                JoinConstraint::None => None,
                _ => return Err(CatalogError::unsupported("JOIN .. USING and NATURAL JOIN")),
            };
            frame = self.join(frame, right, kind, on, outer, depth)?;
        }
        Ok(frame)
    }

    fn join(
        &self,
        left: Frame,
        right: Frame,
        kind: JoinKind,
        on: Option<&Expr>,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let cols: Vec<Col> = left.cols.iter().chain(&right.cols).cloned().collect();
        let mut rows = Vec::new();
        let mut right_matched = vec![false; right.rows.len()];
        let examined = left.rows.len().saturating_mul(right.rows.len());
        if examined > MAX_ROWS.saturating_mul(10) {
            return Err(CatalogError::too_many_rows());
        }
        for l in &left.rows {
            let mut matched = false;
            for (ri, r) in right.rows.iter().enumerate() {
                let row: Vec<Value> = l.iter().chain(r).cloned().collect();
                let keep = match on {
                    None => true,
                    Some(e) => {
                        self.expr(e, &Env::of(&cols, &row, outer), depth)?.truth()? == Some(true)
                    }
                };
                if keep {
                    matched = true;
                    right_matched[ri] = true;
                    rows.push(row);
                    check_rows(rows.len())?;
                }
            }
            if !matched && matches!(kind, JoinKind::Left | JoinKind::Full) {
                let mut row = l.clone();
                row.extend(std::iter::repeat_n(Value::Null, right.cols.len()));
                rows.push(row);
                check_rows(rows.len())?;
            }
        }
        if matches!(kind, JoinKind::Right | JoinKind::Full) {
            for (r, matched) in right.rows.iter().zip(right_matched) {
                if !matched {
                    let mut row = vec![Value::Null; left.cols.len()];
                    row.extend(r.iter().cloned());
                    rows.push(row);
                    check_rows(rows.len())?;
                }
            }
        }
        Ok(Frame { cols, rows })
    }

    /// The rows of one `FROM` item.
    fn factor(
        &self,
        t: &TableFactor,
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let depth = deeper(depth)?;
        if matches!(
            t,
            TableFactor::Derived { lateral: true, .. }
                | TableFactor::Function { lateral: true, .. }
        ) {
            return Err(CatalogError::unsupported("LATERAL"));
        }
        let (mut frame, alias, default_name) = match t {
            TableFactor::Table {
                name,
                alias,
                args: None,
                ..
            } => {
                let parts = object_parts(name);
                (self.relation(&parts)?, alias, parts.last().cloned())
            }
            TableFactor::Table {
                name,
                alias,
                args: Some(args),
                ..
            } => {
                let parts = object_parts(name);
                (
                    self.table_function(&parts, &args.args, outer, depth)?,
                    alias,
                    parts.last().cloned(),
                )
            }
            TableFactor::Function {
                name, args, alias, ..
            } => {
                let parts = object_parts(name);
                (
                    self.table_function(&parts, args, outer, depth)?,
                    alias,
                    parts.last().cloned(),
                )
            }
            TableFactor::Derived {
                subquery, alias, ..
            } => (self.query(subquery, outer, depth)?, alias, None),
            TableFactor::NestedJoin {
                table_with_joins,
                alias,
            } => (
                self.table_with_joins(table_with_joins, outer, depth)?,
                alias,
                None,
            ),
            _ => return Err(CatalogError::unsupported("this FROM item")),
        };
        let function = matches!(
            t,
            TableFactor::Table { args: Some(_), .. } | TableFactor::Function { .. }
        );
        if let (true, Some(a), [only]) = (function, alias, frame.cols.as_mut_slice()) {
            // A function's one column is named after the alias.
            only.name = ident_name(&a.name);
        }
        let qualifier = alias.as_ref().map(|a| ident_name(&a.name)).or(default_name);
        for c in &mut frame.cols {
            c.table = qualifier.clone();
        }
        if let Some(alias) = alias {
            rename(&mut frame, alias);
        }
        Ok(frame)
    }

    /// The rows of the relation `parts` names: a `WITH` query, or a
    /// system relation.
    fn relation(&self, parts: &[String]) -> Result<Frame, CatalogError> {
        let (schema, name) = match parts {
            [name] => (None, name.as_str()),
            [schema, name] => (Some(schema.as_str()), name.as_str()),
            [_db, schema, name] => (Some(schema.as_str()), name.as_str()),
            _ => return Err(missing_table(&parts.join("."))),
        };
        if schema.is_none() {
            if let Some((_, f)) = self.ctes.borrow().iter().rev().find(|(n, _)| n == name) {
                return Ok(f.clone());
            }
        }
        if let Some(table) = self.catalog.table(schema, name) {
            return Ok(Frame {
                cols: table
                    .columns
                    .into_iter()
                    .map(|(name, ty)| Col {
                        table: None,
                        name,
                        ty: Some(ty),
                    })
                    .collect(),
                rows: table.rows,
            });
        }
        if self.catalog.relation_by_name(schema, name).is_some() {
            return Err(CatalogError::unsupported(format!(
                "reading the rows of view \"{name}\" in a query over the catalogs"
            )));
        }
        Err(missing_table(&parts.join(".")))
    }

    /// The rows of a function in `FROM`: `generate_series`, `unnest`, or
    /// any scalar function (one row).
    fn table_function(
        &self,
        parts: &[String],
        args: &[FunctionArg],
        outer: Option<&Env>,
        depth: usize,
    ) -> Result<Frame, CatalogError> {
        let none: [Value; 0] = [];
        let env = Env::of(&[], &none, outer);
        let values: Vec<Value> = args
            .iter()
            .map(|a| match a {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => self.expr(e, &env, depth),
                _ => Err(CatalogError::unsupported("this function argument")),
            })
            .collect::<Result<_, _>>()?;
        let name = parts.last().cloned().unwrap_or_default();
        let rows: Vec<Vec<Value>> = match name.as_str() {
            "generate_series" => super::functions::generate_series(&values)?
                .into_iter()
                .map(|v| vec![v])
                .collect(),
            "unnest" => match values.as_slice() {
                [Value::Array(items)] => items.iter().map(|v| vec![v.clone()]).collect(),
                [Value::Null] => Vec::new(),
                _ => return Err(CatalogError::new("42883", "unnest() takes one array")),
            },
            _ => vec![vec![super::functions::call(self, &name, values)?]],
        };
        Ok(Frame {
            cols: vec![Col {
                table: None,
                name,
                ty: None,
            }],
            rows,
        })
    }
}

/// The kinds of join.
#[derive(Clone, Copy)]
enum JoinKind {
    Inner,
    Left,
    Right,
    Full,
}

/// A relation that is not there (`42P01`).
pub(super) fn missing_table(name: &str) -> CatalogError {
    CatalogError::new("42P01", format!("relation \"{name}\" does not exist"))
}

/// Renames a frame's columns after an alias's column list.
pub(super) fn rename(frame: &mut Frame, alias: &TableAlias) {
    for (c, a) in frame.cols.iter_mut().zip(&alias.columns) {
        c.name = ident_name(&a.name);
    }
}
