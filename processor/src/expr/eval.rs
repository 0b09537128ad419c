//! Evaluation: [`Expr::eval`] against a [`Row`], the operators and
//! predicates with SQL's NULL and number rules (see the module docs of
//! [`crate::expr`]), and the walk over sub-expressions.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Number, Value};

use super::cast::cast;
use super::functions::first_non_null;
use super::{BinaryOp, Expr, Function, Row, UnaryOp};

impl Expr {
    /// Evaluates against one row. Never panics: type errors, division by
    /// zero and failed casts give NULL (see the module docs).
    pub fn eval(&self, row: &dyn Row) -> Value {
        match self {
            Expr::Field(path) => row.field(path).cloned().unwrap_or(Value::Null),
            Expr::Column(name) => row.column(name).cloned().unwrap_or(Value::Null),
            Expr::Key => row
                .key()
                .map_or(Value::Null, |k| Value::String(k.to_owned())),
            Expr::RecordTimestamp => Value::from(row.record_timestamp()),
            Expr::Literal(v) => v.clone(),
            Expr::Unary(op, e) => unary(*op, &e.eval_ref(row)),
            Expr::Binary(op, l, r) => eval_binary(*op, l, r, row),
            Expr::IsNull { expr, negated } => Value::Bool(expr.eval_ref(row).is_null() != *negated),
            Expr::InList {
                expr,
                list,
                negated,
            } => in_list(&expr.eval_ref(row), list, *negated, row),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => between(
                &expr.eval_ref(row),
                &low.eval_ref(row),
                &high.eval_ref(row),
                *negated,
            ),
            Expr::Like {
                expr,
                pattern,
                negated,
            } => like(&expr.eval_ref(row), &pattern.eval_ref(row), *negated),
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => eval_case(operand.as_deref(), branches, otherwise.as_deref(), row),
            Expr::Cast(e, ty) => cast(&e.eval_ref(row), *ty),
            Expr::Function(f, args) => eval_function(*f, args, row),
        }
    }

    /// [`Expr::eval`], borrowing a field's, column's or literal's value
    /// instead of copying it (an operand of a comparison is only read).
    pub fn eval_ref<'a>(&'a self, row: &'a dyn Row) -> Cow<'a, Value> {
        match self {
            Expr::Field(path) => Cow::Borrowed(row.field(path).unwrap_or(&NULL)),
            Expr::Column(name) => Cow::Borrowed(row.column(name).unwrap_or(&NULL)),
            Expr::Literal(v) => Cow::Borrowed(v),
            other => Cow::Owned(other.eval(row)),
        }
    }

    /// WHERE semantics: true only when [`Expr::eval`] gives `true`; NULL,
    /// `false` and non-booleans are false.
    pub fn is_true(&self, row: &dyn Row) -> bool {
        matches!(*self.eval_ref(row), Value::Bool(true))
    }

    /// Every field path the expression reads, once each, in first-read order
    /// (so the decoder can decode only those).
    pub fn fields(&self) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Field(path) = e {
                if !out.contains(path) {
                    out.push(path.clone());
                }
            }
        });
        out
    }

    /// Calls `f` on this expression and then on every sub-expression,
    /// depth-first, parents before children.
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Field(_)
            | Expr::Column(_)
            | Expr::Key
            | Expr::RecordTimestamp
            | Expr::Literal(_) => {}
            Expr::Unary(_, e) | Expr::Cast(e, _) | Expr::IsNull { expr: e, .. } => e.walk(f),
            Expr::Binary(_, l, r)
            | Expr::Like {
                expr: l,
                pattern: r,
                ..
            } => {
                l.walk(f);
                r.walk(f);
            }
            Expr::InList { expr, list, .. } => {
                expr.walk(f);
                list.iter().for_each(|e| e.walk(f));
            }
            Expr::Between {
                expr, low, high, ..
            } => {
                expr.walk(f);
                low.walk(f);
                high.walk(f);
            }
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => {
                operand.iter().for_each(|e| e.walk(f));
                for (when, then) in branches {
                    when.walk(f);
                    then.walk(f);
                }
                otherwise.iter().for_each(|e| e.walk(f));
            }
            Expr::Function(_, args) => args.iter().for_each(|e| e.walk(f)),
        }
    }
}

/// What a missing field or column reads as.
static NULL: Value = Value::Null;

/// A JSON number as SQL sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(super) fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

pub(crate) fn num(v: &Value) -> Option<Num> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(Num::Int)
            .or_else(|| n.as_f64().map(Num::Float)),
        _ => None,
    }
}

/// The JSON value of a number; NULL for NaN and infinities.
pub(super) fn num_value(n: Num) -> Value {
    match n {
        Num::Int(i) => Value::from(i),
        Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
    }
}

fn truth(v: &Value) -> Option<bool> {
    v.as_bool()
}

pub(super) fn bool_value(b: Option<bool>) -> Value {
    b.map_or(Value::Null, Value::Bool)
}

/// Three-valued AND.
fn and3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Three-valued OR.
fn or3(a: Option<bool>, b: Option<bool>) -> Option<bool> {
    match (a, b) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn unary(op: UnaryOp, v: &Value) -> Value {
    match op {
        UnaryOp::Not => bool_value(truth(v).map(|b| !b)),
        UnaryOp::Neg => num(v).map_or(Value::Null, |n| num_value(negate(n))),
    }
}

/// `-n`: an integer saturates (`-i64::MIN` is `i64::MAX`).
pub(super) fn negate(n: Num) -> Num {
    match n {
        Num::Int(i) => Num::Int(i.saturating_neg()),
        Num::Float(f) => Num::Float(-f),
    }
}

fn eval_binary(op: BinaryOp, l: &Expr, r: &Expr, row: &dyn Row) -> Value {
    match op {
        // Short-circuit where the left side decides.
        BinaryOp::And => match truth(&l.eval_ref(row)) {
            Some(false) => Value::Bool(false),
            a => bool_value(and3(a, truth(&r.eval_ref(row)))),
        },
        BinaryOp::Or => match truth(&l.eval_ref(row)) {
            Some(true) => Value::Bool(true),
            a => bool_value(or3(a, truth(&r.eval_ref(row)))),
        },
        _ => binary_values(op, &l.eval_ref(row), &r.eval_ref(row)),
    }
}

/// Applies a binary operator to two evaluated operands.
fn binary_values(op: BinaryOp, a: &Value, b: &Value) -> Value {
    match op {
        BinaryOp::And => bool_value(and3(truth(a), truth(b))),
        BinaryOp::Or => bool_value(or3(truth(a), truth(b))),
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
            match (num(a), num(b)) {
                (Some(x), Some(y)) => arith(op, x, y).map_or(Value::Null, num_value),
                _ => Value::Null,
            }
        }
        BinaryOp::Concat => match (stringify(a), stringify(b)) {
            (Some(x), Some(y)) => Value::String(x + &y),
            _ => Value::Null,
        },
        BinaryOp::Eq => bool_value(sql_eq(a, b)),
        BinaryOp::NotEq => bool_value(sql_eq(a, b).map(|e| !e)),
        BinaryOp::Lt => bool_value(sql_cmp(a, b).map(|o| o == Ordering::Less)),
        BinaryOp::LtEq => bool_value(sql_cmp(a, b).map(|o| o != Ordering::Greater)),
        BinaryOp::Gt => bool_value(sql_cmp(a, b).map(|o| o == Ordering::Greater)),
        BinaryOp::GtEq => bool_value(sql_cmp(a, b).map(|o| o != Ordering::Less)),
    }
}

/// Arithmetic: integers stay integers, saturating on overflow; None = NULL.
pub(super) fn arith(op: BinaryOp, x: Num, y: Num) -> Option<Num> {
    if let (Num::Int(a), Num::Int(b)) = (x, y) {
        return Some(Num::Int(match op {
            BinaryOp::Add => a.saturating_add(b),
            BinaryOp::Sub => a.saturating_sub(b),
            BinaryOp::Mul => a.saturating_mul(b),
            BinaryOp::Div if b == 0 => return None,
            // Integer division truncates toward zero; only MIN / -1 overflows.
            BinaryOp::Div => a.saturating_div(b),
            BinaryOp::Mod if b == 0 => return None,
            // wrapping_rem: MIN % -1 is 0, which is right.
            BinaryOp::Mod => a.wrapping_rem(b),
            _ => return None,
        }));
    }
    let (a, b) = (x.to_f64(), y.to_f64());
    let r = match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div if b == 0.0 => return None,
        BinaryOp::Div => a / b,
        BinaryOp::Mod if b == 0.0 => return None,
        BinaryOp::Mod => a % b,
        _ => return None,
    };
    Some(Num::Float(r))
}

/// Compares an integer with a double exactly (no rounding of the integer).
fn cmp_int_float(i: i64, f: f64) -> Option<Ordering> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f.is_nan() {
        return None;
    }
    if f >= TWO_63 {
        return Some(Ordering::Less);
    }
    if f < -TWO_63 {
        return Some(Ordering::Greater);
    }
    let whole = f.trunc();
    match i.cmp(&(whole as i64)) {
        Ordering::Equal => 0.0_f64.partial_cmp(&(f - whole)),
        o => Some(o),
    }
}

fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).map(Ordering::reverse),
    }
}

/// SQL ordering: numbers, strings and booleans among themselves; else None.
pub(super) fn sql_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => num_cmp(num(a)?, num(b)?),
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// SQL equality: NULL with NULL or a type mismatch is None.
fn sql_eq(a: &Value, b: &Value) -> Option<bool> {
    match (a, b) {
        (Value::Array(_), Value::Array(_)) | (Value::Object(_), Value::Object(_)) => {
            Some(json_eq(a, b))
        }
        _ => sql_cmp(a, b).map(|o| o == Ordering::Equal),
    }
}

/// Structural equality with numbers compared by value (`[1] = [1.0]`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => sql_cmp(a, b) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// The text of a value for `||`, `CONCAT` and `CAST(.. AS STRING)`; None for NULL.
pub fn stringify(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn in_list(v: &Value, list: &[Expr], negated: bool, row: &dyn Row) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    let mut unknown = false;
    for item in list {
        match sql_eq(v, &item.eval_ref(row)) {
            Some(true) => return Value::Bool(!negated),
            Some(false) => {}
            None => unknown = true,
        }
    }
    if unknown {
        Value::Null
    } else {
        Value::Bool(negated)
    }
}

fn between(v: &Value, low: &Value, high: &Value, negated: bool) -> Value {
    let above = sql_cmp(v, low).map(|o| o != Ordering::Less);
    let below = sql_cmp(v, high).map(|o| o != Ordering::Greater);
    bool_value(and3(above, below).map(|b| b != negated))
}

fn like(v: &Value, pattern: &Value, negated: bool) -> Value {
    match (v.as_str(), pattern.as_str()) {
        (Some(s), Some(p)) => Value::Bool(like_match(s, p) != negated),
        _ => Value::Null,
    }
}

/// `%`/`_` matching over characters, greedy with one backtrack point:
/// O(len(text) * len(pattern)) at worst, never exponential.
fn like_match(text: &str, pattern: &str) -> bool {
    let t: Vec<char> = text.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    let (mut ti, mut pi) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None; // (pattern after %, text position)
    while ti < t.len() {
        if pi < p.len() && p[pi] == '%' {
            pi += 1;
            backtrack = Some((pi, ti));
        } else if pi < p.len() && (p[pi] == '_' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((bp, bt)) = backtrack {
            // Let the last % swallow one more character and retry.
            pi = bp;
            ti = bt + 1;
            backtrack = Some((bp, bt + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '%')
}

fn eval_case(
    operand: Option<&Expr>,
    branches: &[(Expr, Expr)],
    otherwise: Option<&Expr>,
    row: &dyn Row,
) -> Value {
    let subject = operand.map(|o| o.eval_ref(row));
    for (when, then) in branches {
        let w = when.eval_ref(row);
        let hit = match &subject {
            Some(s) => sql_eq(s, &w) == Some(true),
            None => *w == Value::Bool(true),
        };
        if hit {
            return then.eval(row);
        }
    }
    otherwise.map_or(Value::Null, |e| e.eval(row))
}

fn eval_function(f: Function, args: &[Expr], row: &dyn Row) -> Value {
    if !f.accepts(args.len()) {
        return Value::Null;
    }
    match f {
        // Lazy: stop at the first non-NULL argument.
        Function::Coalesce | Function::IfNull => first_non_null(args.iter().map(|a| a.eval(row))),
        _ => {
            let values: Vec<Value> = args.iter().map(|a| a.eval(row)).collect();
            f.apply(&values)
        }
    }
}
