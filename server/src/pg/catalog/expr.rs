//! Evaluating expressions of a catalog query: columns (qualified or not,
//! of the enclosing queries too), literals, comparisons with SQL's `NULL`
//! logic, `AND`/`OR`/`NOT`, `IN` lists and subqueries, `EXISTS`,
//! `ANY`/`ALL` over arrays, `LIKE`/`ILIKE`, regular expressions (`~`,
//! `~*`, `!~`, `OPERATOR(pg_catalog.~)`), casts, `CASE`, `COLLATE`
//! (ignored), scalar subqueries, arrays and subscripts, arithmetic and
//! `||`, function calls and aggregates.

use std::cmp::Ordering;

use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Expr, Function, FunctionArguments, InTarget, UnaryOperator,
};

use super::eval::{call_args, deeper, ident_name, object_parts, Col, Env, Evaluator};
use super::functions;
use super::value::{compare, Ty, Value};
use super::CatalogError;

/// The aggregate functions catalog queries may call.
const AGGREGATES: [&str; 9] = [
    "count",
    "string_agg",
    "array_agg",
    "min",
    "max",
    "sum",
    "bool_and",
    "bool_or",
    "avg",
];

/// Most bytes of a regular expression's compiled program.
const REGEX_SIZE_BYTES: usize = 1 << 20;

impl Evaluator<'_> {
    /// The value of `e` in `env`.
    pub fn expr(&self, e: &Expr, env: &Env, depth: usize) -> Result<Value, CatalogError> {
        let depth = deeper(depth)?;
        match e {
            Expr::Identifier(id) => column(env, None, &ident_name(id)),
            Expr::CompoundIdentifier(parts) => {
                let names: Vec<String> = parts.iter().map(ident_name).collect();
                match names.as_slice() {
                    [table, name] => column(env, Some(table), name),
                    [_schema, table, name] => column(env, Some(table), name),
                    _ => Err(CatalogError::unsupported(format!("the name {e}"))),
                }
            }
            Expr::Value(v) => literal(&v.value),
            Expr::TypedString(t) => {
                let v = literal(&t.value.value)?;
                self.cast(v, &t.data_type)
            }
            Expr::Nested(inner) => self.expr(inner, env, depth),
            Expr::Collate { expr, .. } => self.expr(expr, env, depth),
            Expr::BinaryOp { left, op, right } => self.binary(left, op, right, env, depth),
            Expr::UnaryOp { op, expr } => {
                let v = self.expr(expr, env, depth)?;
                match op {
                    UnaryOperator::Not => Ok(v.truth()?.map_or(Value::Null, |b| Value::Bool(!b))),
                    UnaryOperator::Minus => match v {
                        Value::Null => Ok(Value::Null),
                        Value::Float(f) => Ok(Value::Float(-f)),
                        other => Ok(other.as_int()?.map_or(Value::Null, |i| Value::Int(-i))),
                    },
                    UnaryOperator::Plus => Ok(v),
                    _ => Err(CatalogError::unsupported(format!("the operator {op}"))),
                }
            }
            Expr::IsNull(x) => Ok(Value::Bool(self.expr(x, env, depth)?.is_null())),
            Expr::IsNotNull(x) => Ok(Value::Bool(!self.expr(x, env, depth)?.is_null())),
            Expr::IsTrue(x) => Ok(Value::Bool(
                self.expr(x, env, depth)?.truth()? == Some(true),
            )),
            Expr::IsFalse(x) => Ok(Value::Bool(
                self.expr(x, env, depth)?.truth()? == Some(false),
            )),
            Expr::IsNotTrue(x) => Ok(Value::Bool(
                self.expr(x, env, depth)?.truth()? != Some(true),
            )),
            Expr::IsNotFalse(x) => Ok(Value::Bool(
                self.expr(x, env, depth)?.truth()? != Some(false),
            )),
            Expr::IsDistinctFrom(a, b) | Expr::IsNotDistinctFrom(a, b) => {
                let (a, b) = (self.expr(a, env, depth)?, self.expr(b, env, depth)?);
                let distinct = !super::value::same(&a, &b);
                Ok(Value::Bool(
                    distinct == matches!(e, Expr::IsDistinctFrom(..)),
                ))
            }
            Expr::In {
                expr,
                target,
                negated,
                ..
            } => {
                let v = self.expr(expr, env, depth)?;
                let items: Vec<Value> = match target {
                    InTarget::List(list) => list
                        .iter()
                        .map(|x| self.expr(x, env, depth))
                        .collect::<Result<_, _>>()?,
                    InTarget::Subquery(q) => self.first_column(q, env, depth)?,
                    _ => return Err(CatalogError::unsupported("IN UNNEST and IN a table")),
                };
                Ok(negate(in_values(&v, &items)?, *negated))
            }
            Expr::Exists { subquery, negated } => {
                let found = !self.query(subquery, Some(env), depth)?.rows.is_empty();
                Ok(Value::Bool(found != *negated))
            }
            Expr::Subquery(q) => {
                let frame = self.query(q, Some(env), depth)?;
                if frame.cols.len() != 1 {
                    return Err(CatalogError::new(
                        "42601",
                        "subquery must return only one column",
                    ));
                }
                match frame.rows.as_slice() {
                    [] => Ok(Value::Null),
                    [row] => Ok(row[0].clone()),
                    _ => Err(CatalogError::new(
                        "21000",
                        "more than one row returned by a subquery used as an expression",
                    )),
                }
            }
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => {
                let v = self.expr(expr, env, depth)?;
                let lo = compare(&v, &self.expr(low, env, depth)?)?;
                let hi = compare(&v, &self.expr(high, env, depth)?)?;
                let inside = match (lo, hi) {
                    (Some(l), Some(h)) => Some(l != Ordering::Less && h != Ordering::Greater),
                    _ => None,
                };
                Ok(negate(inside, *negated))
            }
            Expr::Like {
                negated,
                expr,
                pattern,
                escape_char,
                any: false,
            } => self.like(
                expr,
                pattern,
                escape_char.as_deref(),
                false,
                *negated,
                env,
                depth,
            ),
            Expr::ILike {
                negated,
                expr,
                pattern,
                escape_char,
                any: false,
            } => self.like(
                expr,
                pattern,
                escape_char.as_deref(),
                true,
                *negated,
                env,
                depth,
            ),
            Expr::Cast {
                kind,
                expr,
                data_type,
                format: None,
            } => {
                let v = self.expr(expr, env, depth)?;
                match kind {
                    CastKind::Cast | CastKind::DoubleColon => self.cast(v, data_type),
                    _ => Err(CatalogError::unsupported("TRY_CAST and SAFE_CAST")),
                }
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => {
                let subject = match operand {
                    Some(o) => Some(self.expr(o, env, depth)?),
                    None => None,
                };
                for when in conditions {
                    let hit = match &subject {
                        Some(s) => {
                            compare(s, &self.expr(&when.condition, env, depth)?)?
                                == Some(Ordering::Equal)
                        }
                        None => self.expr(&when.condition, env, depth)?.truth()? == Some(true),
                    };
                    if hit {
                        return self.expr(&when.result, env, depth);
                    }
                }
                match else_result {
                    Some(x) => self.expr(x, env, depth),
                    None => Ok(Value::Null),
                }
            }
            Expr::AnyOp {
                left,
                compare_op,
                right,
                ..
            }
            | Expr::AllOp {
                left,
                compare_op,
                right,
            } => {
                let any = matches!(e, Expr::AnyOp { .. });
                let v = self.expr(left, env, depth)?;
                let items = match right.as_ref() {
                    Expr::Subquery(q) => self.first_column(q, env, depth)?,
                    other => match self.expr(other, env, depth)? {
                        Value::Null => return Ok(Value::Null),
                        Value::Array(items) => items,
                        Value::Text(t) => super::value::parse_array(&t)?,
                        x => {
                            return Err(CatalogError::mismatch(format!(
                                "ANY/ALL needs an array, not {x:?}"
                            )))
                        }
                    },
                };
                let mut saw_null = false;
                for item in &items {
                    match comparison(compare_op, &v, item)? {
                        Some(b) if b == any => return Ok(Value::Bool(any)),
                        Some(_) => {}
                        None => saw_null = true,
                    }
                }
                Ok(if saw_null {
                    Value::Null
                } else {
                    Value::Bool(!any)
                })
            }
            Expr::Array(a) => Ok(Value::Array(
                a.elem
                    .iter()
                    .map(|x| self.expr(x, env, depth))
                    .collect::<Result<_, _>>()?,
            )),
            Expr::CompoundFieldAccess { root, access_chain } => {
                let mut v = self.expr(root, env, depth)?;
                for access in access_chain {
                    let sqlparser::ast::AccessExpr::Subscript(sqlparser::ast::Subscript::Index {
                        index,
                    }) = access
                    else {
                        return Err(CatalogError::unsupported("array slices and field access"));
                    };
                    let i = self.expr(index, env, depth)?.as_int()?;
                    v = match (v, i) {
                        (Value::Array(items), Some(i)) if i >= 1 => {
                            items.get((i - 1) as usize).cloned().unwrap_or(Value::Null)
                        }
                        (Value::Text(t), Some(i)) if i >= 1 => super::value::parse_array(&t)?
                            .get((i - 1) as usize)
                            .cloned()
                            .unwrap_or(Value::Null),
                        _ => Value::Null,
                    };
                }
                Ok(v)
            }
            Expr::Trim {
                expr,
                trim_where,
                trim_what,
                trim_characters: None,
            } => {
                let v = self.expr(expr, env, depth)?;
                let what = match trim_what {
                    Some(w) => self.expr(w, env, depth)?,
                    None => Value::text(" "),
                };
                let side = match trim_where {
                    Some(sqlparser::ast::TrimWhereField::Leading) => "ltrim",
                    Some(sqlparser::ast::TrimWhereField::Trailing) => "rtrim",
                    _ => "btrim",
                };
                functions::call(self, side, vec![v, what])
            }
            Expr::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.expr(expr, env, depth)?];
                args.push(match substring_from {
                    Some(f) => self.expr(f, env, depth)?,
                    None => Value::Int(1),
                });
                if let Some(f) = substring_for {
                    args.push(self.expr(f, env, depth)?);
                }
                functions::call(self, "substring", args)
            }
            Expr::Function(f) => self.function(f, env, depth),
            other => Err(CatalogError::unsupported(format!("the expression {other}"))),
        }
    }

    /// The values of the first column of `q`'s rows, evaluated with
    /// `env` as the enclosing row.
    fn first_column(
        &self,
        q: &sqlparser::ast::Query,
        env: &Env,
        depth: usize,
    ) -> Result<Vec<Value>, CatalogError> {
        let frame = self.query(q, Some(env), depth)?;
        if frame.cols.len() != 1 {
            return Err(CatalogError::new("42601", "subquery has too many columns"));
        }
        Ok(frame
            .rows
            .into_iter()
            .filter_map(|r| r.into_iter().next())
            .collect())
    }

    fn binary(
        &self,
        left: &Expr,
        op: &BinaryOperator,
        right: &Expr,
        env: &Env,
        depth: usize,
    ) -> Result<Value, CatalogError> {
        match op {
            BinaryOperator::And | BinaryOperator::Or => {
                let and = matches!(op, BinaryOperator::And);
                let l = self.expr(left, env, depth)?.truth()?;
                if l == Some(!and) {
                    return Ok(Value::Bool(!and));
                }
                let r = self.expr(right, env, depth)?.truth()?;
                return Ok(match (l, r) {
                    (_, Some(b)) if b != and => Value::Bool(b),
                    (Some(_), Some(_)) => Value::Bool(and),
                    _ => Value::Null,
                });
            }
            _ => {}
        }
        let l = self.expr(left, env, depth)?;
        let r = self.expr(right, env, depth)?;
        if let Some(b) = comparison_op(op) {
            return Ok(comparison(&b, &l, &r)?.map_or(Value::Null, Value::Bool));
        }
        let regex = match op {
            BinaryOperator::PGRegexMatch => Some((false, false)),
            BinaryOperator::PGRegexIMatch => Some((true, false)),
            BinaryOperator::PGRegexNotMatch => Some((false, true)),
            BinaryOperator::PGRegexNotIMatch => Some((true, true)),
            BinaryOperator::PGCustomBinaryOperator(parts) => match parts.last().map(String::as_str)
            {
                Some("~") => Some((false, false)),
                Some("~*") => Some((true, false)),
                Some("!~") => Some((false, true)),
                Some("!~*") => Some((true, true)),
                Some("=" | "<>" | "<" | ">" | "<=" | ">=") => {
                    let b = match parts.last().map(String::as_str) {
                        Some("=") => BinaryOperator::Eq,
                        Some("<>") => BinaryOperator::NotEq,
                        Some("<") => BinaryOperator::Lt,
                        Some(">") => BinaryOperator::Gt,
                        Some("<=") => BinaryOperator::LtEq,
                        _ => BinaryOperator::GtEq,
                    };
                    return Ok(comparison(&b, &l, &r)?.map_or(Value::Null, Value::Bool));
                }
                _ => {
                    return Err(CatalogError::new(
                        "42883",
                        format!("operator does not exist: {op}"),
                    ))
                }
            },
            _ => None,
        };
        if let Some((insensitive, negated)) = regex {
            let (Some(text), Some(pattern)) = (l.as_string(), r.as_string()) else {
                return Ok(Value::Null);
            };
            let matched = self.regex(&pattern, insensitive)?.is_match(&text);
            return Ok(Value::Bool(matched != negated));
        }
        match op {
            BinaryOperator::PGLikeMatch
            | BinaryOperator::PGNotLikeMatch
            | BinaryOperator::PGILikeMatch
            | BinaryOperator::PGNotILikeMatch => {
                let insensitive = matches!(
                    op,
                    BinaryOperator::PGILikeMatch | BinaryOperator::PGNotILikeMatch
                );
                let negated = matches!(
                    op,
                    BinaryOperator::PGNotLikeMatch | BinaryOperator::PGNotILikeMatch
                );
                self.like_values(&l, &r, None, insensitive, negated)
            }
            BinaryOperator::StringConcat => Ok(match (&l, &r) {
                (Value::Null, _) | (_, Value::Null) => Value::Null,
                (Value::Array(a), Value::Array(b)) => {
                    Value::Array(a.iter().chain(b).cloned().collect())
                }
                (Value::Array(a), x) => Value::Array(a.iter().chain([x]).cloned().collect()),
                _ => Value::text(format!(
                    "{}{}",
                    l.as_string().unwrap_or_default(),
                    r.as_string().unwrap_or_default()
                )),
            }),
            BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo => functions::arithmetic(op, &l, &r),
            _ => Err(CatalogError::new(
                "42883",
                format!("operator does not exist: {op}"),
            )),
        }
    }

    /// A compiled, size-limited regular expression (cached per query).
    pub fn regex(&self, pattern: &str, insensitive: bool) -> Result<regex::Regex, CatalogError> {
        let key = (pattern.to_string(), insensitive);
        if let Some(r) = self.regexes.borrow().get(&key) {
            return Ok(r.clone());
        }
        let compiled = regex::RegexBuilder::new(pattern)
            .case_insensitive(insensitive)
            .size_limit(REGEX_SIZE_BYTES)
            .dfa_size_limit(REGEX_SIZE_BYTES)
            .nest_limit(64)
            .build()
            .map_err(|e| CatalogError::new("2201B", format!("invalid regular expression: {e}")))?;
        self.regexes.borrow_mut().insert(key, compiled.clone());
        Ok(compiled)
    }

    #[allow(clippy::too_many_arguments)]
    fn like(
        &self,
        expr: &Expr,
        pattern: &Expr,
        escape: Option<&Expr>,
        insensitive: bool,
        negated: bool,
        env: &Env,
        depth: usize,
    ) -> Result<Value, CatalogError> {
        let v = self.expr(expr, env, depth)?;
        let p = self.expr(pattern, env, depth)?;
        let escape = match escape {
            Some(e) => self.expr(e, env, depth)?.as_string(),
            None => None,
        };
        self.like_values(&v, &p, escape.as_deref(), insensitive, negated)
    }

    fn like_values(
        &self,
        v: &Value,
        p: &Value,
        escape: Option<&str>,
        insensitive: bool,
        negated: bool,
    ) -> Result<Value, CatalogError> {
        let (Some(text), Some(pattern)) = (v.as_string(), p.as_string()) else {
            return Ok(Value::Null);
        };
        let escape = match escape {
            None => Some('\\'),
            Some(e) => e.chars().next(),
        };
        let mut re = String::from("(?s)^");
        let mut chars = pattern.chars();
        while let Some(c) = chars.next() {
            match c {
                c if Some(c) == escape => {
                    if let Some(n) = chars.next() {
                        re.push_str(&regex::escape(&n.to_string()));
                    }
                }
                '%' => re.push_str(".*"),
                '_' => re.push('.'),
                c => re.push_str(&regex::escape(&c.to_string())),
            }
        }
        re.push('$');
        let matched = self.regex(&re, insensitive)?.is_match(&text);
        Ok(Value::Bool(matched != negated))
    }

    /// `v` cast to `t`.
    pub fn cast(&self, v: Value, t: &DataType) -> Result<Value, CatalogError> {
        let name = type_name(t);
        let ty = Ty::named(&name).ok_or_else(|| {
            CatalogError::new(
                "42704",
                format!("type \"{name}\" is not supported in catalog queries"),
            )
        })?;
        functions::cast(self, v, ty)
    }

    fn function(&self, f: &Function, env: &Env, depth: usize) -> Result<Value, CatalogError> {
        let parts = object_parts(&f.name);
        let name = parts.last().cloned().unwrap_or_default();
        if parts.len() > 2
            || (parts.len() == 2 && parts[0] != "pg_catalog" && parts[0] != "information_schema")
        {
            return Err(unknown_function(&parts.join(".")));
        }
        if f.over.is_some() {
            return env
                .windows
                .iter()
                .find(|(w, _)| matches!(w, Expr::Function(g) if std::ptr::eq(g, f)))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| {
                    CatalogError::unsupported("a window function outside the select list")
                });
        }
        if f.filter.is_some() || !f.within_group.is_empty() {
            return Err(CatalogError::unsupported("FILTER and WITHIN GROUP"));
        }
        if name == "array" {
            if let FunctionArguments::Subquery(q) = &f.args {
                return Ok(Value::Array(self.first_column(q, env, depth)?));
            }
        }
        if AGGREGATES.contains(&name.as_str()) {
            return self.aggregate(&name, f, env, depth);
        }
        let args: Vec<Value> = call_args(&f.args)?
            .into_iter()
            .map(|a| match a {
                Some(e) => self.expr(e, env, depth),
                None => Err(CatalogError::unsupported(format!("{name}(*)"))),
            })
            .collect::<Result<_, _>>()?;
        functions::call(self, &name, args)
    }

    fn aggregate(
        &self,
        name: &str,
        f: &Function,
        env: &Env,
        depth: usize,
    ) -> Result<Value, CatalogError> {
        let Some(group) = env.group else {
            return Err(CatalogError::new(
                "42803",
                format!("aggregate function {name}() is not allowed here"),
            ));
        };
        let distinct = matches!(&f.args, FunctionArguments::List(l) if l.duplicate_treatment == Some(sqlparser::ast::DuplicateTreatment::Distinct));
        let args = call_args(&f.args)?;
        let mut values: Vec<Vec<Value>> = Vec::new();
        for row in group {
            let row_env = Env {
                group: None,
                row,
                ..*env
            };
            let vals: Vec<Value> = args
                .iter()
                .map(|a| match a {
                    Some(e) => self.expr(e, &row_env, depth),
                    None => Ok(Value::Bool(true)),
                })
                .collect::<Result<_, _>>()?;
            if distinct
                && values
                    .iter()
                    .any(|v| v.iter().zip(&vals).all(|(a, b)| super::value::same(a, b)))
            {
                continue;
            }
            values.push(vals);
        }
        functions::aggregate(name, values)
    }
}

/// The value of column `name` (of `table` if given) in `env` or the
/// environments enclosing it.
fn column(env: &Env, table: Option<&String>, name: &str) -> Result<Value, CatalogError> {
    let mut scope = Some(env);
    while let Some(e) = scope {
        if let Some(i) = e
            .cols
            .iter()
            .position(|c| c.name == name && (table.is_none() || c.table.as_ref() == table))
        {
            return Ok(e.row.get(i).cloned().unwrap_or(Value::Null));
        }
        scope = e.outer;
    }
    if table.is_none() {
        if let Some(v) = functions::keyword_value(name) {
            return Ok(v);
        }
    }
    Err(CatalogError::new(
        "42703",
        match table {
            Some(t) => format!("column {t}.{name} does not exist"),
            None => format!("column \"{name}\" does not exist"),
        },
    ))
}

fn literal(v: &sqlparser::ast::Value) -> Result<Value, CatalogError> {
    use sqlparser::ast::Value as V;
    Ok(match v {
        V::Number(n, _) => match n.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => Value::Float(
                n.parse::<f64>()
                    .map_err(|_| CatalogError::invalid_text("number", n))?,
            ),
        },
        V::SingleQuotedString(s) | V::EscapedStringLiteral(s) | V::NationalStringLiteral(s) => {
            Value::text(s.clone())
        }
        V::DollarQuotedString(d) => Value::text(d.value.clone()),
        V::Boolean(b) => Value::Bool(*b),
        V::Null => Value::Null,
        V::Placeholder(p) => return Err(CatalogError::unsupported(format!("the parameter {p}"))),
        other => return Err(CatalogError::unsupported(format!("the literal {other}"))),
    })
}

fn negate(v: Option<bool>, negated: bool) -> Value {
    v.map_or(Value::Null, |b| Value::Bool(b != negated))
}

/// `v IN (items)` with SQL's `NULL` logic.
fn in_values(v: &Value, items: &[Value]) -> Result<Option<bool>, CatalogError> {
    if v.is_null() {
        return Ok(None);
    }
    let mut saw_null = false;
    for item in items {
        match compare(v, item)? {
            Some(Ordering::Equal) => return Ok(Some(true)),
            Some(_) => {}
            None => saw_null = true,
        }
    }
    Ok(if saw_null { None } else { Some(false) })
}

fn comparison_op(op: &BinaryOperator) -> Option<BinaryOperator> {
    match op {
        BinaryOperator::Eq
        | BinaryOperator::NotEq
        | BinaryOperator::Lt
        | BinaryOperator::Gt
        | BinaryOperator::LtEq
        | BinaryOperator::GtEq => Some(op.clone()),
        _ => None,
    }
}

/// `l op r` for a comparison operator (`None`: `NULL`).
fn comparison(op: &BinaryOperator, l: &Value, r: &Value) -> Result<Option<bool>, CatalogError> {
    let Some(o) = compare(l, r)? else {
        return Ok(None);
    };
    Ok(Some(match op {
        BinaryOperator::Eq => o == Ordering::Equal,
        BinaryOperator::NotEq => o != Ordering::Equal,
        BinaryOperator::Lt => o == Ordering::Less,
        BinaryOperator::Gt => o == Ordering::Greater,
        BinaryOperator::LtEq => o != Ordering::Greater,
        BinaryOperator::GtEq => o != Ordering::Less,
        other => {
            return Err(CatalogError::new(
                "42883",
                format!("operator does not exist: {other}"),
            ))
        }
    }))
}

/// A type's name as a cast names it: lower case, without `pg_catalog.`.
pub fn type_name(t: &DataType) -> String {
    let name = t.to_string().to_lowercase();
    name.strip_prefix("pg_catalog.")
        .unwrap_or(&name)
        .to_string()
}

/// An unknown function's error (`42883`).
pub fn unknown_function(name: &str) -> CatalogError {
    CatalogError::new(
        "42883",
        format!("function {name}() does not exist in Kappa's catalogs"),
    )
}

/// The name PostgreSQL gives an unaliased output column.
pub fn output_name(e: &Expr) -> String {
    match e {
        Expr::Identifier(id) => ident_name(id),
        Expr::CompoundIdentifier(parts) => parts.last().map(ident_name).unwrap_or_default(),
        Expr::Function(f) => object_parts(&f.name).last().cloned().unwrap_or_default(),
        Expr::Cast {
            expr, data_type, ..
        } => match output_name(expr).as_str() {
            "?column?" => type_name(data_type)
                .rsplit('.')
                .next()
                .unwrap_or("?column?")
                .to_string(),
            name => name.to_string(),
        },
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => output_name(inner),
        Expr::Case { .. } => "case".to_string(),
        Expr::Exists { .. } => "exists".to_string(),
        Expr::Array(_) => "array".to_string(),
        Expr::Subquery(q) => match q.body.as_ref() {
            sqlparser::ast::SetExpr::Select(s) => match s.projection.first() {
                Some(sqlparser::ast::SelectItem::UnnamedExpr(e)) => output_name(e),
                Some(sqlparser::ast::SelectItem::ExprWithAlias { alias, .. }) => ident_name(alias),
                _ => "?column?".to_string(),
            },
            _ => "?column?".to_string(),
        },
        _ => "?column?".to_string(),
    }
}

/// The declared type of `e`'s values when it is known without
/// evaluating it: a column's, a cast's.
pub fn static_ty(e: &Expr, cols: &[Col]) -> Option<Ty> {
    match e {
        Expr::Identifier(id) => {
            let name = ident_name(id);
            cols.iter().find(|c| c.name == name).and_then(|c| c.ty)
        }
        Expr::CompoundIdentifier(parts) => {
            let names: Vec<String> = parts.iter().map(ident_name).collect();
            let (table, name) = match names.as_slice() {
                [t, n] | [_, t, n] => (t, n),
                _ => return None,
            };
            cols.iter()
                .find(|c| &c.name == name && c.table.as_ref() == Some(table))
                .and_then(|c| c.ty)
        }
        Expr::Cast { data_type, .. } => Ty::named(&type_name(data_type)),
        Expr::Nested(inner) | Expr::Collate { expr: inner, .. } => static_ty(inner, cols),
        Expr::Function(f) => {
            let name = object_parts(&f.name).last().cloned().unwrap_or_default();
            functions::return_ty(&name)
        }
        _ => None,
    }
}

/// Whether `e` calls an aggregate function (outside subqueries).
pub fn has_aggregate(e: &Expr) -> bool {
    match e {
        Expr::Function(f) => {
            let name = object_parts(&f.name).last().cloned().unwrap_or_default();
            (f.over.is_none() && AGGREGATES.contains(&name.as_str()))
                || call_args(&f.args)
                    .is_ok_and(|args| args.into_iter().flatten().any(has_aggregate))
        }
        Expr::BinaryOp { left, right, .. } => has_aggregate(left) || has_aggregate(right),
        Expr::UnaryOp { expr, .. }
        | Expr::Nested(expr)
        | Expr::Cast { expr, .. }
        | Expr::Collate { expr, .. }
        | Expr::IsNull(expr)
        | Expr::IsNotNull(expr) => has_aggregate(expr),
        Expr::Case {
            operand,
            conditions,
            else_result,
            ..
        } => {
            operand.as_deref().is_some_and(has_aggregate)
                || conditions
                    .iter()
                    .any(|w| has_aggregate(&w.condition) || has_aggregate(&w.result))
                || else_result.as_deref().is_some_and(has_aggregate)
        }
        _ => false,
    }
}
