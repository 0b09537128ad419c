//! `sqlparser` expressions into [`crate::expr::Expr`]. Name resolution and
//! what an aggregate call means depend on where the expression is (WHERE,
//! SELECT, HAVING..): the caller passes a [`Names`] for that.

use serde_json::{Number, Value};
use sqlparser::ast::{
    self as ast, BinaryOperator, CeilFloorKind, DateTimeField, DuplicateTreatment, ExactNumberInfo,
    Function as SqlFunction, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, InTarget,
    ObjectNamePart, Spanned, UnaryOperator,
};
use sqlparser::tokenizer::{Location, Span};

use super::error::{Result, SqlError};
use super::query::known;
use crate::accumulators::AggregateKind;
use crate::expr::{BinaryOp, DataType, Expr, Function, UnaryOp};
use crate::time::parse_timestamp;

/// How names and aggregate calls resolve where an expression appears.
pub(crate) trait Names {
    /// A column reference (`col`, `alias.col`, `col.nested`).
    fn column(&self, parts: &[Ident], span: Span) -> Result<Expr>;
    /// An aggregate call inside an expression.
    fn aggregate(&self, call: &AggCall<'_>, span: Span) -> Result<Expr>;
}

/// A recognized aggregate call.
#[derive(Debug, Clone)]
pub(crate) struct AggCall<'a> {
    /// Which aggregate.
    pub kind: AggregateKind,
    /// Its argument (`None` for `COUNT(*)`).
    pub arg: Option<&'a ast::Expr>,
    /// The call as written, for messages.
    pub text: String,
}

/// Translates expressions; `at` stands in for positions `sqlparser` lost.
pub(crate) struct Translator<'n> {
    /// Name resolution.
    pub names: &'n dyn Names,
    /// Fallback position (the statement's start).
    pub at: Location,
}

fn unsupported(span: Span, what: impl std::fmt::Display) -> SqlError {
    SqlError::span(span, format!("{what} is not supported"))
}

/// The single name of a function, upper-cased.
fn function_name(f: &SqlFunction) -> Option<String> {
    match f.name.0.as_slice() {
        [ObjectNamePart::Identifier(id)] => Some(id.value.to_ascii_uppercase()),
        _ => None,
    }
}

/// The plain argument list of a call (no DISTINCT, clauses or named args):
/// `Ok(None)` for `f(*)`.
fn plain_args(f: &SqlFunction, span: Span) -> Result<Option<Vec<&ast::Expr>>> {
    let list = match &f.args {
        FunctionArguments::List(l) => l,
        FunctionArguments::None => return Ok(Some(Vec::new())),
        FunctionArguments::Subquery(_) => return Err(unsupported(span, "a subquery argument")),
    };
    if !list.clauses.is_empty() {
        return Err(unsupported(
            span,
            "ORDER BY, LIMIT or other clauses in a function call",
        ));
    }
    if let [FunctionArg::Unnamed(FunctionArgExpr::Wildcard)] = list.args.as_slice() {
        return Ok(None);
    }
    list.args
        .iter()
        .map(|a| match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
            _ => Err(unsupported(
                known(a.span(), span.start),
                "this kind of function argument",
            )),
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Recognizes an aggregate call: `COUNT(*)`, `COUNT(x)`, `COUNT(DISTINCT
/// x)`, `SUM`, `AVG`, `MIN`, `MAX`, `COUNT_DISTINCT`, `LATEST_BY_OFFSET`,
/// `EARLIEST_BY_OFFSET`. `Ok(None)` for anything else.
pub(crate) fn aggregate_call(f: &SqlFunction, at: Location) -> Result<Option<AggCall<'_>>> {
    let span = known(f.span(), at);
    let Some(name) = function_name(f) else {
        return Ok(None);
    };
    if AggregateKind::from_sql(&name, false).is_none() {
        return Ok(None);
    }
    if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
        return Err(unsupported(
            span,
            "OVER, FILTER and WITHIN GROUP on an aggregate",
        ));
    }
    let distinct = matches!(
        &f.args,
        FunctionArguments::List(l) if l.duplicate_treatment == Some(DuplicateTreatment::Distinct)
    );
    let args = plain_args(f, span)?;
    let text = f.to_string();
    let (kind, arg) = match (name.as_str(), args.as_deref(), distinct) {
        ("COUNT", None, false) => (AggregateKind::CountAll, None),
        (_, None, _) => {
            return Err(SqlError::span(
                span,
                format!("{name}(*) is not supported; only COUNT(*)"),
            ))
        }
        ("COUNT", Some([arg]), true) => (AggregateKind::CountDistinct, Some(*arg)),
        (_, Some(_), true) => {
            return Err(SqlError::span(
                span,
                format!("{name}(DISTINCT ..) is not supported; only COUNT(DISTINCT x)"),
            ))
        }
        (_, Some([arg]), false) => {
            let kind = AggregateKind::from_sql(&name, false).expect("checked above");
            (kind, Some(*arg))
        }
        (_, Some(args), _) => {
            return Err(SqlError::span(
                span,
                format!("aggregate {name} takes 1 argument, got {}", args.len()),
            ))
        }
    };
    Ok(Some(AggCall { kind, arg, text }))
}

impl Translator<'_> {
    fn span(&self, e: &impl Spanned) -> Span {
        known(e.span(), self.at)
    }

    fn boxed(&self, e: &ast::Expr) -> Result<Box<Expr>> {
        self.expr(e).map(Box::new)
    }

    /// Translates one expression.
    pub fn expr(&self, e: &ast::Expr) -> Result<Expr> {
        use ast::Expr as S;
        let span = self.span(e);
        Ok(match e {
            S::Identifier(id) => self.names.column(std::slice::from_ref(id), span)?,
            S::CompoundIdentifier(ids) => self.names.column(ids, span)?,
            S::Nested(inner) => self.expr(inner)?,
            S::Value(v) => Expr::Literal(literal(&v.value, false, span)?),
            S::TypedString(t) => typed_string(t, span)?,
            S::UnaryOp { op, expr } => self.unary(*op, expr, span)?,
            S::BinaryOp { left, op, right } => {
                Expr::Binary(binary_op(op, span)?, self.boxed(left)?, self.boxed(right)?)
            }
            S::IsNull(x) | S::IsNotNull(x) => Expr::IsNull {
                expr: self.boxed(x)?,
                negated: matches!(e, S::IsNotNull(_)),
            },
            S::In {
                expr,
                target: InTarget::List(list),
                negated,
                ..
            } => Expr::InList {
                expr: self.boxed(expr)?,
                list: list.iter().map(|x| self.expr(x)).collect::<Result<_>>()?,
                negated: *negated,
            },
            S::Between {
                expr,
                negated,
                low,
                high,
            } => Expr::Between {
                expr: self.boxed(expr)?,
                low: self.boxed(low)?,
                high: self.boxed(high)?,
                negated: *negated,
            },
            S::Like {
                negated,
                any: false,
                expr,
                pattern,
                escape_char: None,
            } => Expr::Like {
                expr: self.boxed(expr)?,
                pattern: self.boxed(pattern)?,
                negated: *negated,
            },
            S::Like { .. } => return Err(unsupported(span, "LIKE ANY / LIKE .. ESCAPE")),
            S::Case {
                operand,
                conditions,
                else_result,
                ..
            } => Expr::Case {
                operand: operand.as_deref().map(|o| self.boxed(o)).transpose()?,
                branches: conditions
                    .iter()
                    .map(|w| Ok((self.expr(&w.condition)?, self.expr(&w.result)?)))
                    .collect::<Result<_>>()?,
                otherwise: else_result.as_deref().map(|o| self.boxed(o)).transpose()?,
            },
            S::Cast {
                expr,
                data_type,
                format: None,
                ..
            } => Expr::Cast(self.boxed(expr)?, cast_type(data_type, span)?),
            S::Function(f) => self.function(f, span)?,
            S::Substring {
                expr,
                substring_from,
                substring_for,
                ..
            } => {
                let mut args = vec![self.expr(expr)?];
                match substring_from {
                    Some(from) => args.push(self.expr(from)?),
                    None => args.push(Expr::Literal(Value::from(1))),
                }
                if let Some(len) = substring_for {
                    args.push(self.expr(len)?);
                }
                Expr::Function(Function::Substring, args)
            }
            S::Trim {
                trim_where: None,
                trim_what: None,
                expr,
                trim_characters: None,
            } => Expr::Function(Function::Trim, vec![self.expr(expr)?]),
            S::Ceil {
                expr,
                field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime),
            } => Expr::Function(Function::Ceil, vec![self.expr(expr)?]),
            S::Floor {
                expr,
                field: CeilFloorKind::DateTimeField(DateTimeField::NoDateTime),
            } => Expr::Function(Function::Floor, vec![self.expr(expr)?]),
            other => {
                return Err(unsupported(
                    span,
                    format!("the expression '{}'", short(other)),
                ))
            }
        })
    }

    fn unary(&self, op: UnaryOperator, x: &ast::Expr, span: Span) -> Result<Expr> {
        match op {
            UnaryOperator::Not => Ok(Expr::Unary(UnaryOp::Not, self.boxed(x)?)),
            UnaryOperator::Plus => self.expr(x),
            UnaryOperator::Minus => match x {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => {
                    Ok(Expr::Literal(literal(&v.value, true, span)?))
                }
                _ => Ok(Expr::Unary(UnaryOp::Neg, self.boxed(x)?)),
            },
            other => Err(unsupported(span, format!("the operator {other}"))),
        }
    }

    fn function(&self, f: &SqlFunction, span: Span) -> Result<Expr> {
        if let Some(call) = aggregate_call(f, self.at)? {
            return self.names.aggregate(&call, span);
        }
        let name = function_name(f).unwrap_or_else(|| f.name.to_string());
        if name.eq_ignore_ascii_case("MOD") {
            return self.modulo(f, span);
        }
        let Some(func) = Function::from_name(&name) else {
            return Err(SqlError::span(span, format!("unknown function '{name}'")));
        };
        if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
            return Err(unsupported(span, "OVER, FILTER and WITHIN GROUP"));
        }
        if let FunctionArguments::List(l) = &f.args {
            if l.duplicate_treatment.is_some() {
                return Err(unsupported(span, format!("DISTINCT in {name}(..)")));
            }
        }
        let Some(args) = plain_args(f, span)? else {
            return Err(SqlError::span(span, format!("{name}(*) is not supported")));
        };
        if !func.accepts(args.len()) {
            let (min, max) = func.arity();
            let want = match max {
                Some(max) if max == min => format!("{min}"),
                Some(max) => format!("{min} to {max}"),
                None => format!("at least {min}"),
            };
            return Err(SqlError::span(
                span,
                format!(
                    "function {} takes {want} argument(s), got {}",
                    func.name(),
                    args.len()
                ),
            ));
        }
        let args = args
            .into_iter()
            .map(|a| self.expr(a))
            .collect::<Result<_>>()?;
        Ok(Expr::Function(func, args))
    }

    /// `MOD(a, b)` (Flink's and PostgreSQL's spelling) is `a % b`.
    fn modulo(&self, f: &SqlFunction, span: Span) -> Result<Expr> {
        match plain_args(f, span)?.as_deref() {
            Some([a, b]) if f.over.is_none() && f.filter.is_none() => {
                Ok(Expr::Binary(BinaryOp::Mod, self.boxed(a)?, self.boxed(b)?))
            }
            _ => Err(SqlError::span(span, "function MOD takes 2 arguments")),
        }
    }
}

/// The first 60 characters of an expression's SQL.
fn short(e: &ast::Expr) -> String {
    let s = e.to_string();
    match s.char_indices().nth(60) {
        Some((i, _)) => format!("{}..", &s[..i]),
        None => s,
    }
}

fn binary_op(op: &BinaryOperator, span: Span) -> Result<BinaryOp> {
    use BinaryOperator as B;
    Ok(match op {
        B::Plus => BinaryOp::Add,
        B::Minus => BinaryOp::Sub,
        B::Multiply => BinaryOp::Mul,
        B::Divide => BinaryOp::Div,
        B::Modulo => BinaryOp::Mod,
        B::Eq => BinaryOp::Eq,
        B::NotEq => BinaryOp::NotEq,
        B::Lt => BinaryOp::Lt,
        B::LtEq => BinaryOp::LtEq,
        B::Gt => BinaryOp::Gt,
        B::GtEq => BinaryOp::GtEq,
        B::And => BinaryOp::And,
        B::Or => BinaryOp::Or,
        B::StringConcat => BinaryOp::Concat,
        other => return Err(unsupported(span, format!("the operator {other}"))),
    })
}

/// A literal value; `negate` for a `-` in front of a number.
pub(crate) fn literal(v: &ast::Value, negate: bool, span: Span) -> Result<Value> {
    match v {
        ast::Value::Number(n, _) => {
            let text = if negate { format!("-{n}") } else { n.clone() };
            if let Ok(i) = text.parse::<i64>() {
                return Ok(Value::from(i));
            }
            text.parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
                .ok_or_else(|| SqlError::span(span, format!("number {text} is out of range")))
        }
        ast::Value::SingleQuotedString(s) => Ok(Value::String(s.clone())),
        ast::Value::Boolean(b) => Ok(Value::Bool(*b)),
        ast::Value::Null => Ok(Value::Null),
        other => Err(unsupported(span, format!("the literal {other}"))),
    }
}

fn typed_string(t: &ast::TypedString, span: Span) -> Result<Expr> {
    let text = match &t.value.value {
        ast::Value::SingleQuotedString(s) => s.clone(),
        _ => return Err(unsupported(span, "this typed literal")),
    };
    match &t.data_type {
        ast::DataType::Timestamp(..) => parse_timestamp(&Value::String(text.clone()))
            .map(|ms| Expr::Literal(Value::from(ms)))
            .ok_or_else(|| {
                SqlError::span(
                    span,
                    format!("expected an RFC 3339 timestamp, found '{text}'"),
                )
            }),
        other => Err(unsupported(span, format!("a {other} literal"))),
    }
}

/// The `CAST` target type.
fn cast_type(t: &ast::DataType, span: Span) -> Result<DataType> {
    use ast::DataType as T;
    Ok(match t {
        T::Bool | T::Boolean => DataType::Boolean,
        T::Int(_) | T::Integer(_) | T::BigInt(_) | T::Int64 | T::SmallInt(_) | T::TinyInt(_) => {
            DataType::Integer
        }
        T::Double(_) | T::DoublePrecision | T::Float64 | T::Real | T::Float(_) => DataType::Double,
        T::Decimal(info) | T::Numeric(info) | T::Dec(info) => {
            let (precision, scale) = match *info {
                ExactNumberInfo::PrecisionAndScale(p, s) => (p, s),
                ExactNumberInfo::Precision(p) => (p, 0),
                ExactNumberInfo::None => {
                    return Err(SqlError::span(span, "DECIMAL needs (precision, scale)"))
                }
            };
            let ok = (1..=1000).contains(&precision) && scale >= 0 && scale as u64 <= precision;
            if !ok {
                return Err(SqlError::span(
                    span,
                    format!("DECIMAL({precision}, {scale}) needs 1 <= precision <= 1000 and 0 <= scale <= precision"),
                ));
            }
            DataType::Decimal {
                precision: precision as u32,
                scale: scale as u32,
            }
        }
        T::Varchar(_) | T::String(_) | T::Text | T::Char(_) | T::CharacterVarying(_) => {
            DataType::String
        }
        T::Timestamp(..) => DataType::Timestamp,
        other => return Err(unsupported(span, format!("CAST to {other}"))),
    })
}
