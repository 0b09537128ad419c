//! Expressions evaluated against one event, with SQL (ksqlDB-like) semantics.
//!
//! An [`Expr`] is plain data (a SQL front end compiles into it; it derives
//! serde) evaluated against anything that implements [`Row`]: the event's
//! JSON value, its key, its timestamp and columns computed earlier (aggregate
//! outputs, window bounds). Filters (`WHERE`/`HAVING`) call
//! [`Expr::is_true`]; projections, `GROUP BY` keys and aggregate inputs call
//! [`Expr::eval`]. [`Expr::fields`] lists the JSON paths an expression reads.
//!
//! # NULL rules
//! - A missing field, an unknown column, an absent key, a type error
//!   (`'a' + 1`, `'a' < 1`, `UPPER(1)`), a wrong number of function
//!   arguments, division by zero and a failed `CAST` all evaluate to `NULL`:
//!   evaluation never fails and never panics.
//! - `NULL` propagates through arithmetic, comparisons (`NULL = NULL` is
//!   `NULL`; use `IS NULL`), `||`, `LIKE`, `BETWEEN`, `CAST` and most
//!   functions. The exceptions: `COALESCE`/`IFNULL`; `CONCAT(...)`, which
//!   skips `NULL` arguments; `GREATEST`/`LEAST`, which ignore `NULL`
//!   arguments (all three as in ksqlDB).
//! - `AND`/`OR`/`NOT` use three-valued logic: `NULL AND false` is `false`,
//!   `NULL OR true` is `true`, any other combination with `NULL` is `NULL`.
//!   A non-boolean operand counts as `NULL`.
//! - `WHERE` semantics ([`Expr::is_true`]): only `true` passes, `NULL` fails.
//! - `x IN (...)` is `true` if an item equals `x`; otherwise `NULL` if `x` is
//!   `NULL` or some comparison was `NULL` (including a type mismatch), else
//!   `false`. `NOT IN` negates that, so it is `NULL` in the same cases.
//!
//! # Number rules
//! - A JSON number is an integer (`i64`) or a double (`f64`); an integer
//!   above `i64::MAX` is taken as a double.
//! - integer op integer stays an integer; on overflow it saturates at
//!   `i64::MIN` / `i64::MAX` (it never silently becomes a double). Anything
//!   involving a double is a double.
//! - `/` of two integers is integer division truncating toward zero, and `%`
//!   takes the sign of the dividend, as in ksqlDB (Java): `7 / 2 = 3`,
//!   `-7 % 2 = -1`. Write `7 / 2.0` or `CAST(x AS DOUBLE) / 2` for `3.5`.
//! - Division or modulo by zero (integer or double) is `NULL`, and so is any
//!   result that is not finite (JSON holds no NaN or infinity).
//! - Numbers compare by value across integers and doubles (`1 = 1.0`, exact
//!   even beyond 2^53); strings compare by code point; `false < true`.
//!   Values of different types (`'1' = 1`) compare as `NULL`: there is no
//!   implicit cast. `=`/`<>` compare arrays and objects structurally;
//!   ordering them is `NULL`.
//!
//! # Strings and timestamps
//! - Strings are sequences of Unicode characters: `LENGTH('héllo') = 5`, and
//!   `SUBSTRING` positions are 1-based characters (negative = from the end).
//! - `||` stringifies non-string scalars (`'a' || 1 = 'a1'`; arrays and
//!   objects as JSON text) and propagates `NULL`.
//! - `LIKE` is case-sensitive, `%` matches any run of characters and `_`
//!   exactly one; there is no escape character.
//! - Timestamps are `i64` milliseconds since the Unix epoch, UTC.
//!   [`parse_timestamp`] reads integers, doubles (truncated) and RFC 3339
//!   strings; [`format_timestamp`] writes `YYYY-MM-DDTHH:MM:SS.sssZ`.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::{Number, Value};

/// What an expression can read.
pub trait Row {
    /// A field of the event's JSON value by path (`["a","b"]` = value.a.b); None if absent.
    fn field(&self, path: &[String]) -> Option<&Value>;
    /// The record key as a string, if any.
    fn key(&self) -> Option<&str>;
    /// The record timestamp (ms).
    fn record_timestamp(&self) -> i64;
    /// A named column computed earlier (aggregate outputs, window bounds:
    /// "WINDOWSTART"/"WINDOWEND"); None if unknown.
    fn column(&self, _name: &str) -> Option<&Value> {
        None
    }
}

/// Walks `path` into `value`, for [`Row::field`] implementations: each
/// segment names an object member (case-sensitive), or indexes an array when
/// it is a decimal number. The empty path is `value` itself.
pub fn get_path<'a>(value: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(value, |v, seg| match v {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

/// A prefix operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum UnaryOp {
    /// Logical `NOT` (three-valued: `NOT NULL` is `NULL`).
    Not,
    /// Arithmetic negation `-x`.
    Neg,
}

/// An infix operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/`: integer division for two integers (ksqlDB), else double division.
    Div,
    /// `%`: remainder with the sign of the dividend.
    Mod,
    /// `=`
    Eq,
    /// `<>` / `!=`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND` (three-valued).
    And,
    /// `OR` (three-valued).
    Or,
    /// `||` string concatenation.
    Concat,
}

/// A target type of `CAST`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// `BOOLEAN`: from booleans and the strings `true`/`false` (any case).
    Boolean,
    /// `INTEGER`/`BIGINT` (`i64`): from numbers (doubles truncated toward
    /// zero) and integer strings.
    Integer,
    /// `DOUBLE` (`f64`): from numbers and numeric strings.
    Double,
    /// `DECIMAL(precision, scale)`: evaluated as an `f64` rounded half away
    /// from zero to `scale` places; `NULL` if more than `precision - scale`
    /// integer digits remain.
    Decimal {
        /// Total number of significant digits (at least 1).
        precision: u32,
        /// Digits after the decimal point (at most `precision`).
        scale: u32,
    },
    /// `STRING`/`VARCHAR`: any non-null value, arrays and objects as JSON text.
    String,
    /// `TIMESTAMP` (ms since the epoch): from numbers and RFC 3339 strings.
    Timestamp,
}

/// A built-in scalar function; see [`Function::from_name`] for SQL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Function {
    /// `UPPER(s)`
    Upper,
    /// `LOWER(s)`
    Lower,
    /// `LENGTH(s)`: number of characters.
    Length,
    /// `TRIM(s)`: strips leading and trailing whitespace.
    Trim,
    /// `SUBSTRING(s, start[, len])`: 1-based; a negative start counts from the end.
    Substring,
    /// `CONCAT(a, ...)`: stringifies and joins its arguments, skipping NULLs.
    Concat,
    /// `REPLACE(s, from, to)`: replaces every occurrence of `from`.
    Replace,
    /// `ABS(x)`
    Abs,
    /// `ROUND(x[, digits])`: half away from zero; `ROUND(double)` gives an integer.
    Round,
    /// `FLOOR(x)`
    Floor,
    /// `CEIL(x)`
    Ceil,
    /// `SQRT(x)`: `NULL` for negative `x`.
    Sqrt,
    /// `COALESCE(a, ...)`: the first non-NULL argument.
    Coalesce,
    /// `IFNULL(a, b)`: `a` unless it is NULL, else `b`.
    IfNull,
    /// `GREATEST(a, ...)`: the largest non-NULL argument.
    Greatest,
    /// `LEAST(a, ...)`: the smallest non-NULL argument.
    Least,
    /// `TO_TIMESTAMP(s)`: an RFC 3339 string (or a number) to ms.
    ToTimestamp,
    /// `FORMAT_TIMESTAMP(ms)`: ms to an RFC 3339 UTC string.
    FormatTimestamp,
    /// `DATE_TRUNC(unit, ms)`: truncates to a `millisecond`, `second`,
    /// `minute`, `hour`, `day`, `week` (Monday), `month`, `quarter` or `year`
    /// (UTC).
    DateTrunc,
}

/// An expression over one event; see the module docs for its semantics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expr {
    /// A JSON path into the event's value; case-sensitive; missing = NULL.
    Field(Vec<String>),
    /// A named computed column (see [`Row::column`]), e.g. an aggregate's
    /// output in `HAVING`; unknown = NULL.
    Column(String),
    /// `ROWKEY`: the record key as a string; absent = NULL.
    Key,
    /// `ROWTIME`: the record timestamp in ms.
    RecordTimestamp,
    /// A constant.
    Literal(Value),
    /// A prefix operator applied to an operand.
    Unary(UnaryOp, Box<Expr>),
    /// An infix operator applied to two operands.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// `expr IS [NOT] NULL`: never NULL itself.
    IsNull {
        /// The tested expression.
        expr: Box<Expr>,
        /// `IS NOT NULL` when true.
        negated: bool,
    },
    /// `expr [NOT] IN (list...)`.
    InList {
        /// The tested expression.
        expr: Box<Expr>,
        /// The candidates.
        list: Vec<Expr>,
        /// `NOT IN` when true.
        negated: bool,
    },
    /// `expr [NOT] BETWEEN low AND high` (inclusive).
    Between {
        /// The tested expression.
        expr: Box<Expr>,
        /// Inclusive lower bound.
        low: Box<Expr>,
        /// Inclusive upper bound.
        high: Box<Expr>,
        /// `NOT BETWEEN` when true.
        negated: bool,
    },
    /// `expr [NOT] LIKE pattern` with `%` and `_` wildcards.
    Like {
        /// The matched string.
        expr: Box<Expr>,
        /// The pattern string.
        pattern: Box<Expr>,
        /// `NOT LIKE` when true.
        negated: bool,
    },
    /// `CASE [operand] WHEN .. THEN .. [ELSE ..] END`.
    Case {
        /// With an operand, a branch is taken when `operand = WHEN` is true;
        /// without, when `WHEN` is true.
        operand: Option<Box<Expr>>,
        /// `(WHEN, THEN)` pairs, tried in order.
        branches: Vec<(Expr, Expr)>,
        /// The `ELSE` value; NULL when absent.
        otherwise: Option<Box<Expr>>,
    },
    /// `CAST(expr AS type)`; a failed cast is NULL.
    Cast(Box<Expr>, DataType),
    /// A function call; a wrong number of arguments gives NULL.
    Function(Function, Vec<Expr>),
}

impl Function {
    /// Every function, in declaration order.
    pub const ALL: &'static [Function] = &[
        Function::Upper,
        Function::Lower,
        Function::Length,
        Function::Trim,
        Function::Substring,
        Function::Concat,
        Function::Replace,
        Function::Abs,
        Function::Round,
        Function::Floor,
        Function::Ceil,
        Function::Sqrt,
        Function::Coalesce,
        Function::IfNull,
        Function::Greatest,
        Function::Least,
        Function::ToTimestamp,
        Function::FormatTimestamp,
        Function::DateTrunc,
    ];

    /// The function a SQL name denotes, case-insensitively; aliases:
    /// `UCASE`, `LCASE`, `LEN`/`CHAR_LENGTH`, `SUBSTR`, `CEILING`.
    pub fn from_name(name: &str) -> Option<Function> {
        let f = match name.to_ascii_uppercase().as_str() {
            "UPPER" | "UCASE" => Function::Upper,
            "LOWER" | "LCASE" => Function::Lower,
            "LENGTH" | "LEN" | "CHAR_LENGTH" => Function::Length,
            "TRIM" => Function::Trim,
            "SUBSTRING" | "SUBSTR" => Function::Substring,
            "CONCAT" => Function::Concat,
            "REPLACE" => Function::Replace,
            "ABS" => Function::Abs,
            "ROUND" => Function::Round,
            "FLOOR" => Function::Floor,
            "CEIL" | "CEILING" => Function::Ceil,
            "SQRT" => Function::Sqrt,
            "COALESCE" => Function::Coalesce,
            "IFNULL" => Function::IfNull,
            "GREATEST" => Function::Greatest,
            "LEAST" => Function::Least,
            "TO_TIMESTAMP" => Function::ToTimestamp,
            "FORMAT_TIMESTAMP" => Function::FormatTimestamp,
            "DATE_TRUNC" => Function::DateTrunc,
            _ => return None,
        };
        Some(f)
    }

    /// The canonical SQL name (upper case); [`Function::from_name`] maps it back.
    pub fn name(&self) -> &'static str {
        match self {
            Function::Upper => "UPPER",
            Function::Lower => "LOWER",
            Function::Length => "LENGTH",
            Function::Trim => "TRIM",
            Function::Substring => "SUBSTRING",
            Function::Concat => "CONCAT",
            Function::Replace => "REPLACE",
            Function::Abs => "ABS",
            Function::Round => "ROUND",
            Function::Floor => "FLOOR",
            Function::Ceil => "CEIL",
            Function::Sqrt => "SQRT",
            Function::Coalesce => "COALESCE",
            Function::IfNull => "IFNULL",
            Function::Greatest => "GREATEST",
            Function::Least => "LEAST",
            Function::ToTimestamp => "TO_TIMESTAMP",
            Function::FormatTimestamp => "FORMAT_TIMESTAMP",
            Function::DateTrunc => "DATE_TRUNC",
        }
    }

    /// The number of arguments accepted: (min, max); max None = unbounded.
    pub fn arity(&self) -> (usize, Option<usize>) {
        match self {
            Function::Upper
            | Function::Lower
            | Function::Length
            | Function::Trim
            | Function::Abs
            | Function::Floor
            | Function::Ceil
            | Function::Sqrt
            | Function::ToTimestamp
            | Function::FormatTimestamp => (1, Some(1)),
            Function::Round => (1, Some(2)),
            Function::Substring => (2, Some(3)),
            Function::IfNull | Function::DateTrunc => (2, Some(2)),
            Function::Replace => (3, Some(3)),
            Function::Concat | Function::Coalesce | Function::Greatest | Function::Least => {
                (1, None)
            }
        }
    }

    /// Whether `n` arguments fit [`Function::arity`].
    pub fn accepts(&self, n: usize) -> bool {
        let (min, max) = self.arity();
        n >= min && max.is_none_or(|max| n <= max)
    }

    /// Applies the function to evaluated arguments (NULL on a wrong count or
    /// a type error), e.g. for constant folding.
    pub fn apply(&self, args: &[Value]) -> Value {
        if !self.accepts(args.len()) {
            return Value::Null;
        }
        match self {
            Function::Concat => Value::String(args.iter().filter_map(stringify).collect()),
            Function::Coalesce | Function::IfNull => first_non_null(args.iter().cloned()),
            Function::Greatest => extreme(args, Ordering::Greater).unwrap_or(Value::Null),
            Function::Least => extreme(args, Ordering::Less).unwrap_or(Value::Null),
            _ if args.iter().any(Value::is_null) => Value::Null,
            Function::Abs | Function::Round | Function::Floor | Function::Ceil | Function::Sqrt => {
                math_fn(*self, args)
            }
            Function::ToTimestamp | Function::FormatTimestamp | Function::DateTrunc => {
                time_fn(*self, args)
            }
            _ => string_fn(*self, args),
        }
    }
}

/// Rust-DSL constructors. `add`, `sub`, `mul`, `div` and `not` build
/// expressions rather than compute, so they are methods by design; the
/// operator traits (`+ - * / % ! -`) are implemented too.
#[allow(clippy::should_implement_trait)]
impl Expr {
    /// A field by dotted path: `Expr::field("a.b")` reads value.a.b.
    pub fn field(path: &str) -> Expr {
        Expr::Field(path.split('.').map(str::to_owned).collect())
    }

    /// A named computed column (see [`Row::column`]).
    pub fn column(name: &str) -> Expr {
        Expr::Column(name.to_owned())
    }

    /// A literal: `Expr::lit(5)`, `Expr::lit("x")`, `Expr::lit(serde_json::Value::Null)`.
    pub fn lit(v: impl Into<Value>) -> Expr {
        Expr::Literal(v.into())
    }

    fn binary(op: BinaryOp, l: Expr, r: Expr) -> Expr {
        Expr::Binary(op, Box::new(l), Box::new(r))
    }

    /// `self = other`
    pub fn eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Eq, self, other)
    }

    /// `self <> other`
    pub fn not_eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::NotEq, self, other)
    }

    /// `self < other`
    pub fn lt(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Lt, self, other)
    }

    /// `self <= other`
    pub fn lt_eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::LtEq, self, other)
    }

    /// `self > other`
    pub fn gt(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Gt, self, other)
    }

    /// `self >= other`
    pub fn gt_eq(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::GtEq, self, other)
    }

    /// `self AND other`
    pub fn and(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::And, self, other)
    }

    /// `self OR other`
    pub fn or(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Or, self, other)
    }

    /// `self + other`
    pub fn add(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Add, self, other)
    }

    /// `self - other`
    pub fn sub(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Sub, self, other)
    }

    /// `self * other`
    pub fn mul(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Mul, self, other)
    }

    /// `self / other`
    pub fn div(self, other: Expr) -> Expr {
        Expr::binary(BinaryOp::Div, self, other)
    }

    /// `NOT self`
    pub fn not(self) -> Expr {
        Expr::Unary(UnaryOp::Not, Box::new(self))
    }
}

impl std::ops::Add for Expr {
    type Output = Expr;
    fn add(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Add, self, rhs)
    }
}

impl std::ops::Sub for Expr {
    type Output = Expr;
    fn sub(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Sub, self, rhs)
    }
}

impl std::ops::Mul for Expr {
    type Output = Expr;
    fn mul(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Mul, self, rhs)
    }
}

impl std::ops::Div for Expr {
    type Output = Expr;
    fn div(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Div, self, rhs)
    }
}

impl std::ops::Rem for Expr {
    type Output = Expr;
    fn rem(self, rhs: Expr) -> Expr {
        Expr::binary(BinaryOp::Mod, self, rhs)
    }
}

impl std::ops::Not for Expr {
    type Output = Expr;
    fn not(self) -> Expr {
        Expr::Unary(UnaryOp::Not, Box::new(self))
    }
}

impl std::ops::Neg for Expr {
    type Output = Expr;
    fn neg(self) -> Expr {
        Expr::Unary(UnaryOp::Neg, Box::new(self))
    }
}

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
            Expr::Unary(op, e) => unary(*op, &e.eval(row)),
            Expr::Binary(op, l, r) => eval_binary(*op, l, r, row),
            Expr::IsNull { expr, negated } => Value::Bool(expr.eval(row).is_null() != *negated),
            Expr::InList {
                expr,
                list,
                negated,
            } => in_list(&expr.eval(row), list, *negated, row),
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => between(&expr.eval(row), &low.eval(row), &high.eval(row), *negated),
            Expr::Like {
                expr,
                pattern,
                negated,
            } => like(&expr.eval(row), &pattern.eval(row), *negated),
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => eval_case(operand.as_deref(), branches, otherwise.as_deref(), row),
            Expr::Cast(e, ty) => cast(&e.eval(row), *ty),
            Expr::Function(f, args) => eval_function(*f, args, row),
        }
    }

    /// WHERE semantics: true only when [`Expr::eval`] gives `true`; NULL,
    /// `false` and non-booleans are false.
    pub fn is_true(&self, row: &dyn Row) -> bool {
        matches!(self.eval(row), Value::Bool(true))
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

// ---------------------------------------------------------------------------
// Operators and predicates
// ---------------------------------------------------------------------------

/// A JSON number as SQL sees it.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

fn num(v: &Value) -> Option<Num> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .map(Num::Int)
            .or_else(|| n.as_f64().map(Num::Float)),
        _ => None,
    }
}

/// The JSON value of a number; NULL for NaN and infinities.
fn num_value(n: Num) -> Value {
    match n {
        Num::Int(i) => Value::from(i),
        Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
    }
}

fn truth(v: &Value) -> Option<bool> {
    v.as_bool()
}

fn bool_value(b: Option<bool>) -> Value {
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
        UnaryOp::Neg => match num(v) {
            Some(Num::Int(i)) => num_value(Num::Int(i.saturating_neg())),
            Some(Num::Float(f)) => num_value(Num::Float(-f)),
            None => Value::Null,
        },
    }
}

fn eval_binary(op: BinaryOp, l: &Expr, r: &Expr, row: &dyn Row) -> Value {
    match op {
        // Short-circuit where the left side decides.
        BinaryOp::And => match truth(&l.eval(row)) {
            Some(false) => Value::Bool(false),
            a => bool_value(and3(a, truth(&r.eval(row)))),
        },
        BinaryOp::Or => match truth(&l.eval(row)) {
            Some(true) => Value::Bool(true),
            a => bool_value(or3(a, truth(&r.eval(row)))),
        },
        _ => binary_values(op, &l.eval(row), &r.eval(row)),
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
fn arith(op: BinaryOp, x: Num, y: Num) -> Option<Num> {
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
fn sql_cmp(a: &Value, b: &Value) -> Option<Ordering> {
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
fn stringify(v: &Value) -> Option<String> {
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
        match sql_eq(v, &item.eval(row)) {
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
    let subject = operand.map(|o| o.eval(row));
    for (when, then) in branches {
        let w = when.eval(row);
        let hit = match &subject {
            Some(s) => sql_eq(s, &w) == Some(true),
            None => w == Value::Bool(true),
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

// ---------------------------------------------------------------------------
// CAST
// ---------------------------------------------------------------------------

fn cast(v: &Value, ty: DataType) -> Value {
    if v.is_null() {
        return Value::Null;
    }
    match ty {
        DataType::Boolean => bool_value(cast_bool(v)),
        DataType::Integer => cast_int(v).map_or(Value::Null, Value::from),
        DataType::Double => cast_f64(v).map_or(Value::Null, |f| num_value(Num::Float(f))),
        DataType::Decimal { precision, scale } => cast_decimal(v, precision, scale),
        DataType::String => stringify(v).map_or(Value::Null, Value::String),
        DataType::Timestamp => parse_timestamp(v).map_or(Value::Null, Value::from),
    }
}

/// True if the non-null JSON value `v` is a value of declared column type
/// `ty` as it stands, with no conversion: `BOOLEAN` a boolean, `INTEGER` /
/// `BIGINT` an integer that fits `i64`, `DOUBLE` and `DECIMAL` a number,
/// `TIMESTAMP` epoch milliseconds or an RFC 3339 string, `VARCHAR` a string
/// or another scalar (read as its text, as ksqlDB does). `NULL` fits any.
pub fn conforms(v: &Value, ty: DataType) -> bool {
    match (ty, v) {
        (_, Value::Null) => true,
        (DataType::Boolean, Value::Bool(_)) => true,
        (DataType::Integer, Value::Number(n)) => n.as_i64().is_some(),
        (DataType::Double | DataType::Decimal { .. }, Value::Number(_)) => true,
        (DataType::Timestamp, v) => parse_timestamp(v).is_some(),
        (DataType::String, v) => !v.is_array() && !v.is_object(),
        _ => false,
    }
}

fn cast_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

fn cast_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(f64_to_i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn cast_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok().filter(|f| f.is_finite()),
        _ => None,
    }
}

fn cast_decimal(v: &Value, precision: u32, scale: u32) -> Value {
    if precision == 0 || scale > precision {
        return Value::Null;
    }
    let Some(x) = cast_f64(v) else {
        return Value::Null;
    };
    // Scales beyond f64's range of digits change nothing; clamp to stay cheap.
    let Some(d) = round_decimal(x, scale.min(MAX_SCALE as u32) as i32) else {
        return Value::Null;
    };
    if d.integer_digits() > (precision - scale) as usize {
        return Value::Null;
    }
    d.to_f64().map_or(Value::Null, |f| num_value(Num::Float(f)))
}

/// `f` truncated toward zero, if finite and within `i64`.
fn f64_to_i64(f: f64) -> Option<i64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    (f.is_finite() && (-TWO_63..TWO_63).contains(&f)).then(|| f.trunc() as i64)
}

// ---------------------------------------------------------------------------
// Decimal rounding
// ---------------------------------------------------------------------------

/// Beyond this many places (either way) rounding an `f64` changes nothing
/// or gives zero.
const MAX_SCALE: i32 = 400;

/// A decimal `digits × 10^-scale` (digits: ASCII, no leading zeros but "0").
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    scale: i32,
}

impl Decimal {
    fn integer_digits(&self) -> usize {
        if self.digits == b"0" {
            return 0;
        }
        (self.digits.len() as i64 - i64::from(self.scale)).max(0) as usize
    }

    fn to_f64(&self) -> Option<f64> {
        let sign = if self.negative { "-" } else { "" };
        let digits = std::str::from_utf8(&self.digits).ok()?;
        let f: f64 = format!("{sign}{digits}e{}", -i64::from(self.scale))
            .parse()
            .ok()?;
        // Normalize -0.0 to 0.0.
        Some(if f == 0.0 { 0.0 } else { f })
    }
}

/// Rounds `x` to `scale` decimal places (negative: tens, hundreds...), half
/// away from zero, on its shortest decimal representation — as Java's
/// `BigDecimal.valueOf(x).setScale(scale, HALF_UP)` does — so 1.005 rounds
/// to 1.01 although the binary double is slightly below 1.005.
fn round_decimal(x: f64, scale: i32) -> Option<Decimal> {
    if !x.is_finite() {
        return None;
    }
    let scale = scale.clamp(-MAX_SCALE, MAX_SCALE);
    let sci = format!("{:e}", x.abs()); // shortest round-trip, e.g. "1.005e0"
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i64 = exp.parse().ok()?;
    let all: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    // x = 0.d1d2d3... × 10^(exp+1); keep the digits before place `scale`.
    let keep = exp + 1 + i64::from(scale);
    if keep >= all.len() as i64 {
        let natural = all.len() as i64 - 1 - exp;
        return Some(Decimal {
            negative: x < 0.0,
            digits: all,
            scale: i32::try_from(natural).ok()?,
        });
    }
    let mut digits: Vec<u8> = all[..keep.max(0) as usize].to_vec();
    let next = if keep >= 0 { all[keep as usize] } else { b'0' };
    if next >= b'5' {
        increment(&mut digits);
    }
    while digits.len() > 1 && digits[0] == b'0' {
        digits.remove(0);
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    Some(Decimal {
        negative: x < 0.0 && digits != b"0",
        digits,
        scale,
    })
}

/// Adds one to an ASCII decimal integer (empty = 0).
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

// ---------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------

fn first_non_null(mut values: impl Iterator<Item = Value>) -> Value {
    values.find(|v| !v.is_null()).unwrap_or(Value::Null)
}

/// GREATEST/LEAST: the non-NULL argument furthest in direction `want`;
/// None if all are NULL or two are not comparable.
fn extreme(args: &[Value], want: Ordering) -> Option<Value> {
    let mut best: Option<&Value> = None;
    for v in args.iter().filter(|v| !v.is_null()) {
        best = match best {
            None => Some(v),
            Some(b) if sql_cmp(v, b)? == want => Some(v),
            keep => keep,
        };
    }
    best.cloned()
}

fn string_fn(f: Function, args: &[Value]) -> Value {
    let Some(s) = args[0].as_str() else {
        return Value::Null;
    };
    match f {
        Function::Upper => Value::from(s.to_uppercase()),
        Function::Lower => Value::from(s.to_lowercase()),
        Function::Length => Value::from(s.chars().count() as i64),
        Function::Trim => Value::from(s.trim()),
        Function::Substring => substring(s, args[1].as_i64(), args.get(2)),
        Function::Replace => match (args[1].as_str(), args[2].as_str()) {
            (Some(from), Some(to)) => Value::from(s.replace(from, to)),
            _ => Value::Null,
        },
        _ => Value::Null,
    }
}

/// ksqlDB's SUBSTRING: 1-based `pos` (0 acts as 1, negative counts from the
/// end), optional non-negative `len`; positions past the ends are clamped.
fn substring(s: &str, pos: Option<i64>, len: Option<&Value>) -> Value {
    let Some(pos) = pos else {
        return Value::Null;
    };
    let len = match len.map(Value::as_i64) {
        None => None,
        Some(Some(l)) => Some(l),
        Some(None) => return Value::Null,
    };
    let n = s.chars().count() as i64;
    let start = if pos < 0 { n + pos } else { pos - 1 }.clamp(0, n);
    let end = len.map_or(n, |l| start.saturating_add(l.max(0)).min(n));
    let taken: String = s
        .chars()
        .skip(start as usize)
        .take((end - start) as usize)
        .collect();
    Value::String(taken)
}

fn math_fn(f: Function, args: &[Value]) -> Value {
    let Some(x) = num(&args[0]) else {
        return Value::Null;
    };
    let r = match (f, x) {
        (Function::Round, _) => return round_fn(x, args.get(1)),
        (Function::Sqrt, _) => Num::Float(x.to_f64().sqrt()),
        (Function::Abs, Num::Int(i)) => Num::Int(i.saturating_abs()),
        (Function::Abs, Num::Float(v)) => Num::Float(v.abs()),
        (Function::Floor, Num::Float(v)) => Num::Float(v.floor()),
        (Function::Ceil, Num::Float(v)) => Num::Float(v.ceil()),
        (Function::Floor | Function::Ceil, Num::Int(i)) => Num::Int(i),
        _ => return Value::Null,
    };
    num_value(r)
}

/// ROUND(x[, digits]), half away from zero: ROUND(double) is an integer,
/// ROUND(double, d) a double, ROUND(integer, d) an integer.
fn round_fn(x: Num, digits: Option<&Value>) -> Value {
    let d = match digits.map(Value::as_i64) {
        None => None,
        Some(Some(d)) => Some(d),
        Some(None) => return Value::Null,
    };
    match (x, d) {
        (Num::Int(i), None) => Value::from(i),
        (Num::Int(i), Some(d)) => round_int(i, d),
        (Num::Float(f), d) => {
            let scale = d
                .unwrap_or(0)
                .clamp(-i64::from(MAX_SCALE), i64::from(MAX_SCALE)) as i32;
            let Some(r) = round_decimal(f, scale).and_then(|dec| dec.to_f64()) else {
                return Value::Null;
            };
            match (d, f64_to_i64(r)) {
                (None, Some(i)) => Value::from(i),
                _ => num_value(Num::Float(r)),
            }
        }
    }
}

fn round_int(i: i64, d: i64) -> Value {
    if d >= 0 {
        return Value::from(i);
    }
    let power = u32::try_from(d.unsigned_abs())
        .ok()
        .and_then(|e| 10_i64.checked_pow(e));
    let Some(p) = power else {
        // 10^19 and beyond: only a double can hold the result.
        return round_decimal(i as f64, d.max(-i64::from(MAX_SCALE)) as i32)
            .and_then(|dec| dec.to_f64())
            .map_or(Value::Null, |f| num_value(Num::Float(f)));
    };
    let r = i % p;
    let down = i - r;
    if r.unsigned_abs() * 2 < p.unsigned_abs() {
        return Value::from(down);
    }
    let away = if i < 0 {
        down.checked_sub(p)
    } else {
        down.checked_add(p)
    };
    away.map_or_else(
        || num_value(Num::Float(down as f64 + (i.signum() * p) as f64)),
        Value::from,
    )
}

fn time_fn(f: Function, args: &[Value]) -> Value {
    let ms = match f {
        Function::ToTimestamp => parse_timestamp(&args[0]),
        Function::FormatTimestamp => {
            return parse_timestamp(&args[0])
                .and_then(format_timestamp)
                .map_or(Value::Null, Value::String)
        }
        Function::DateTrunc => match (args[0].as_str(), parse_timestamp(&args[1])) {
            (Some(unit), Some(ms)) => date_trunc(unit, ms),
            _ => None,
        },
        _ => None,
    };
    ms.map_or(Value::Null, Value::from)
}

const DAY_MS: i64 = 86_400_000;

/// Truncates `ms` down to the start of its `unit` (UTC); None for an unknown
/// unit or an out-of-range result.
fn date_trunc(unit: &str, ms: i64) -> Option<i64> {
    let unit = unit.to_ascii_lowercase();
    let step = match unit.as_str() {
        "millisecond" => 1,
        "second" => 1_000,
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => DAY_MS,
        _ => 0,
    };
    if step > 0 {
        return ms.checked_sub(ms.rem_euclid(step));
    }
    let days = ms.div_euclid(DAY_MS);
    let start = match unit.as_str() {
        // 1970-01-01 was a Thursday; weeks start on Monday (ISO).
        "week" => days - (days + 3).rem_euclid(7),
        "month" | "quarter" | "year" => {
            let (y, m, _) = civil_from_days(days);
            let month = match unit.as_str() {
                "month" => m,
                "quarter" => (m - 1) / 3 * 3 + 1,
                _ => 1,
            };
            days_from_civil(y, month, 1)
        }
        _ => return None,
    };
    start.checked_mul(DAY_MS)
}

// ---------------------------------------------------------------------------
// Timestamps
// ---------------------------------------------------------------------------

/// An event time in ms since the epoch from a JSON value: an integer (ms), a
/// double (ms, truncated toward zero) or an RFC 3339 string
/// (`2024-05-01T12:00:00Z`, `...12:00:00.123+02:00`; `T` may be `t` or a
/// space, fractions beyond ms are truncated). None otherwise.
pub fn parse_timestamp(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().and_then(f64_to_i64)),
        Value::String(s) => parse_rfc3339(s.trim()),
        _ => None,
    }
}

/// `ms` since the epoch as an RFC 3339 UTC string with milliseconds,
/// `YYYY-MM-DDTHH:MM:SS.sssZ`; None outside years 0000..=9999.
pub fn format_timestamp(ms: i64) -> Option<String> {
    let (y, mo, d) = civil_from_days(ms.div_euclid(DAY_MS));
    if !(0..=9999).contains(&y) {
        return None;
    }
    let in_day = ms.rem_euclid(DAY_MS);
    let (h, mi) = (in_day / 3_600_000, in_day / 60_000 % 60);
    let (s, milli) = (in_day / 1000 % 60, in_day % 1000);
    Some(format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{milli:03}Z"
    ))
}

/// The number in `b[at..at + n]` if all are ASCII digits.
fn digits_at(b: &[u8], at: usize, n: usize) -> Option<i64> {
    let slice = b.get(at..at + n)?;
    slice.iter().try_fold(0_i64, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0'))
    })
}

fn byte_is(b: &[u8], at: usize, allowed: &[u8]) -> bool {
    b.get(at).is_some_and(|c| allowed.contains(c))
}

fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let separators = byte_is(b, 4, b"-")
        && byte_is(b, 7, b"-")
        && byte_is(b, 10, b"Tt ")
        && byte_is(b, 13, b":")
        && byte_is(b, 16, b":");
    if !separators {
        return None;
    }
    let (year, month, day) = (
        digits_at(b, 0, 4)?,
        digits_at(b, 5, 2)?,
        digits_at(b, 8, 2)?,
    );
    let (hour, minute, second) = (
        digits_at(b, 11, 2)?,
        digits_at(b, 14, 2)?,
        digits_at(b, 17, 2)?,
    );
    let (millis, rest) = parse_fraction(b, 19)?;
    let offset_s = parse_offset(&b[rest..])?;
    let valid = (1..=12).contains(&month)
        && (1..=days_in_month(year, month)).contains(&day)
        && hour < 24
        && minute < 60
        && second <= 60; // 60: a leap second, counted into the next minute
    if !valid {
        return None;
    }
    let days = days_from_civil(year, month, day);
    let secs = ((days * 24 + hour) * 60 + minute) * 60 + second - offset_s;
    Some(secs * 1000 + millis)
}

/// An optional `.fraction` at `at`: (milliseconds, index after it).
fn parse_fraction(b: &[u8], at: usize) -> Option<(i64, usize)> {
    if !byte_is(b, at, b".") {
        return Some((0, at));
    }
    let start = at + 1;
    let len = b[start..].iter().take_while(|c| c.is_ascii_digit()).count();
    if len == 0 {
        return None;
    }
    let millis = b[start..start + len.min(3)]
        .iter()
        .chain(std::iter::repeat(&b'0'))
        .take(3)
        .fold(0, |acc, &c| acc * 10 + i64::from(c - b'0'));
    Some((millis, start + len))
}

/// The whole rest must be `Z`/`z` or `±HH:MM`: the offset in seconds.
fn parse_offset(b: &[u8]) -> Option<i64> {
    match b {
        [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let (h, m) = (digits_at(b, 1, 2)?, digits_at(b, 4, 2)?);
            if h > 23 || m > 59 {
                return None;
            }
            let secs = (h * 60 + m) * 60;
            Some(if *sign == b'-' { -secs } else { secs })
        }
        _ => None,
    }
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Map};

    /// A row over a JSON value with a key, a timestamp and computed columns.
    #[derive(Debug)]
    struct TestRow {
        value: Value,
        key: Option<String>,
        ts: i64,
        columns: Map<String, Value>,
    }

    impl Row for TestRow {
        fn field(&self, path: &[String]) -> Option<&Value> {
            get_path(&self.value, path)
        }
        fn key(&self) -> Option<&str> {
            self.key.as_deref()
        }
        fn record_timestamp(&self) -> i64 {
            self.ts
        }
        fn column(&self, name: &str) -> Option<&Value> {
            self.columns.get(name)
        }
    }

    fn row(value: Value) -> TestRow {
        TestRow {
            value,
            key: None,
            ts: 0,
            columns: Map::new(),
        }
    }

    /// Evaluates against an empty row.
    fn ev(e: Expr) -> Value {
        e.eval(&row(json!({})))
    }

    fn lit(v: Value) -> Expr {
        Expr::Literal(v)
    }

    fn bin(op: BinaryOp, a: Value, b: Value) -> Value {
        ev(Expr::binary(op, lit(a), lit(b)))
    }

    fn call(f: Function, args: Vec<Value>) -> Value {
        ev(Expr::Function(f, args.into_iter().map(lit).collect()))
    }

    fn cast_lit(v: Value, ty: DataType) -> Value {
        ev(Expr::Cast(Box::new(lit(v)), ty))
    }

    fn ts(s: &str) -> Option<i64> {
        parse_timestamp(&json!(s))
    }

    #[test]
    fn null_propagates_through_arithmetic_comparison_concat_and_functions() {
        use BinaryOp::*;
        for op in [
            Add, Sub, Mul, Div, Mod, Eq, NotEq, Lt, LtEq, Gt, GtEq, Concat,
        ] {
            assert_eq!(bin(op, Value::Null, json!(1)), Value::Null, "{op:?}");
            assert_eq!(bin(op, json!("a"), Value::Null), Value::Null, "{op:?}");
        }
        assert_eq!(bin(Eq, Value::Null, Value::Null), Value::Null);
        assert_eq!(ev(-lit(Value::Null)), Value::Null);
        assert_eq!(call(Function::Upper, vec![Value::Null]), Value::Null);
        assert_eq!(
            call(Function::Substring, vec![json!("abc"), Value::Null]),
            Value::Null
        );
        assert_eq!(cast_lit(Value::Null, DataType::String), Value::Null);
        let like = Expr::Like {
            expr: Box::new(lit(Value::Null)),
            pattern: Box::new(Expr::lit("%")),
            negated: false,
        };
        assert_eq!(ev(like), Value::Null);
    }

    #[test]
    fn missing_fields_unknown_columns_and_absent_key_are_null() {
        let r = row(json!({"a": {"b": 1}}));
        assert_eq!(Expr::field("a.c").eval(&r), Value::Null);
        assert_eq!(Expr::field("a.b.c").eval(&r), Value::Null);
        assert_eq!(
            Expr::field("A.b").eval(&r),
            Value::Null,
            "paths are case-sensitive"
        );
        assert_eq!(Expr::column("COUNT").eval(&r), Value::Null);
        assert_eq!(Expr::Key.eval(&r), Value::Null);
        assert!(Expr::IsNull {
            expr: Box::new(Expr::field("zzz")),
            negated: false
        }
        .is_true(&r));
        assert!(!Expr::IsNull {
            expr: Box::new(Expr::field("a.b")),
            negated: false
        }
        .is_true(&r));
    }

    #[test]
    fn three_valued_logic_for_and_or_not() {
        let (t, f, n) = (json!(true), json!(false), Value::Null);
        let and = |a: &Value, b: &Value| bin(BinaryOp::And, a.clone(), b.clone());
        let or = |a: &Value, b: &Value| bin(BinaryOp::Or, a.clone(), b.clone());
        assert_eq!(and(&n, &f), f);
        assert_eq!(and(&f, &n), f);
        assert_eq!(and(&n, &t), n);
        assert_eq!(and(&n, &n), n);
        assert_eq!(and(&t, &t), t);
        assert_eq!(or(&n, &t), t);
        assert_eq!(or(&t, &n), t);
        assert_eq!(or(&n, &f), n);
        assert_eq!(or(&f, &f), f);
        assert_eq!(ev(lit(n.clone()).not()), n);
        assert_eq!(ev(lit(t).not()), f);
        // Non-booleans count as NULL.
        assert_eq!(and(&json!(1), &json!(true)), Value::Null);
        assert_eq!(and(&json!("x"), &json!(false)), json!(false));
    }

    #[test]
    fn is_true_only_accepts_boolean_true() {
        let r = row(json!({"flag": true, "n": 1}));
        assert!(Expr::field("flag").is_true(&r));
        assert!(!Expr::field("n").is_true(&r));
        assert!(!Expr::field("missing").is_true(&r));
        assert!(!Expr::field("missing").eq(Expr::lit(1)).is_true(&r));
        assert!(!Expr::field("missing").eq(Expr::lit(1)).not().is_true(&r));
    }

    #[test]
    fn integer_arithmetic_stays_integer_and_doubles_make_doubles() {
        assert_eq!(bin(BinaryOp::Add, json!(2), json!(3)), json!(5));
        assert!(bin(BinaryOp::Add, json!(2), json!(3)).is_i64());
        assert_eq!(bin(BinaryOp::Mul, json!(2), json!(1.5)), json!(3.0));
        assert!(bin(BinaryOp::Add, json!(2), json!(1.0)).is_f64());
        assert_eq!(bin(BinaryOp::Sub, json!(2.5), json!(3)), json!(-0.5));
        assert_eq!(ev(-Expr::lit(5)), json!(-5));
        assert_eq!(ev(Expr::lit(7) / Expr::lit(2.0)), json!(3.5));
        // No implicit casts.
        assert_eq!(bin(BinaryOp::Add, json!("1"), json!(1)), Value::Null);
        assert_eq!(bin(BinaryOp::Add, json!(true), json!(1)), Value::Null);
    }

    #[test]
    fn integer_overflow_saturates_and_never_becomes_a_double() {
        let max = json!(i64::MAX);
        assert_eq!(bin(BinaryOp::Add, max.clone(), json!(1)), json!(i64::MAX));
        assert_eq!(bin(BinaryOp::Mul, max.clone(), json!(2)), json!(i64::MAX));
        assert_eq!(bin(BinaryOp::Mul, max.clone(), json!(-2)), json!(i64::MIN));
        assert_eq!(
            bin(BinaryOp::Sub, json!(i64::MIN), json!(1)),
            json!(i64::MIN)
        );
        assert_eq!(
            bin(BinaryOp::Div, json!(i64::MIN), json!(-1)),
            json!(i64::MAX)
        );
        assert_eq!(bin(BinaryOp::Mod, json!(i64::MIN), json!(-1)), json!(0));
        assert_eq!(ev(-Expr::lit(i64::MIN)), json!(i64::MAX));
        assert_eq!(call(Function::Abs, vec![json!(i64::MIN)]), json!(i64::MAX));
        // u64 beyond i64 is a double.
        assert_eq!(
            bin(BinaryOp::Add, json!(u64::MAX), json!(0)),
            json!(1.8446744073709552e19)
        );
        // A double overflowing to infinity is NULL.
        assert_eq!(bin(BinaryOp::Mul, json!(1e308), json!(10)), Value::Null);
    }

    #[test]
    fn integer_division_truncates_and_modulo_takes_dividend_sign() {
        assert_eq!(bin(BinaryOp::Div, json!(7), json!(2)), json!(3));
        assert_eq!(bin(BinaryOp::Div, json!(-7), json!(2)), json!(-3));
        assert_eq!(bin(BinaryOp::Mod, json!(7), json!(3)), json!(1));
        assert_eq!(bin(BinaryOp::Mod, json!(-7), json!(2)), json!(-1));
        assert_eq!(bin(BinaryOp::Mod, json!(7), json!(-2)), json!(1));
        assert_eq!(bin(BinaryOp::Mod, json!(7.5), json!(2)), json!(1.5));
        assert_eq!(bin(BinaryOp::Div, json!(7), json!(2.0)), json!(3.5));
    }

    #[test]
    fn division_and_modulo_by_zero_are_null() {
        for (a, b) in [
            (json!(1), json!(0)),
            (json!(1.5), json!(0)),
            (json!(1), json!(0.0)),
        ] {
            assert_eq!(bin(BinaryOp::Div, a.clone(), b.clone()), Value::Null);
            assert_eq!(bin(BinaryOp::Mod, a, b), Value::Null);
        }
        assert_eq!(bin(BinaryOp::Div, json!(0), json!(-0.0)), Value::Null);
    }

    #[test]
    fn comparisons_across_integers_and_doubles() {
        use BinaryOp::*;
        assert_eq!(bin(Eq, json!(1), json!(1.0)), json!(true));
        assert_eq!(bin(Lt, json!(1), json!(1.5)), json!(true));
        assert_eq!(bin(Gt, json!(2.5), json!(2)), json!(true));
        assert_eq!(bin(GtEq, json!(-2), json!(-2.0)), json!(true));
        assert_eq!(bin(LtEq, json!(-2), json!(-2.5)), json!(false));
        assert_eq!(bin(NotEq, json!(3), json!(3.0)), json!(false));
        // Exact beyond 2^53: 2^53 + 1 as f64 rounds to 2^53.
        let big = (1_i64 << 53) + 1;
        assert_eq!(bin(Gt, json!(big), json!(9007199254740992.0)), json!(true));
        assert_eq!(bin(Eq, json!(big), json!(9007199254740992.0)), json!(false));
        assert_eq!(bin(Lt, json!(i64::MAX), json!(1e19)), json!(true));
        assert_eq!(bin(Gt, json!(i64::MIN), json!(-1e19)), json!(true));
        assert_eq!(bin(Lt, json!(i64::MAX), json!(u64::MAX)), json!(true));
    }

    #[test]
    fn strings_and_booleans_compare_and_mixed_types_are_null() {
        use BinaryOp::*;
        assert_eq!(bin(Lt, json!("apple"), json!("banana")), json!(true));
        assert_eq!(bin(Lt, json!("Z"), json!("a")), json!(true));
        assert_eq!(bin(Eq, json!("é"), json!("é")), json!(true));
        assert_eq!(bin(Lt, json!(false), json!(true)), json!(true));
        assert_eq!(bin(Eq, json!("1"), json!(1)), Value::Null);
        assert_eq!(bin(Lt, json!(true), json!(1)), Value::Null);
        assert_eq!(bin(Eq, json!([1, 2]), json!([1.0, 2])), json!(true));
        assert_eq!(bin(Eq, json!({"a": 1}), json!({"a": 2})), json!(false));
        assert_eq!(bin(Lt, json!([1]), json!([2])), Value::Null);
        assert_eq!(bin(Eq, json!([1]), json!("[1]")), Value::Null);
    }

    #[test]
    fn concat_operator_stringifies_scalars_and_propagates_null() {
        assert_eq!(bin(BinaryOp::Concat, json!("a"), json!(1)), json!("a1"));
        assert_eq!(
            bin(BinaryOp::Concat, json!(1.5), json!(true)),
            json!("1.5true")
        );
        assert_eq!(bin(BinaryOp::Concat, json!("x"), json!([1])), json!("x[1]"));
        assert_eq!(bin(BinaryOp::Concat, json!("x"), Value::Null), Value::Null);
        // The CONCAT function skips NULLs, as ksqlDB's does.
        let r = call(Function::Concat, vec![json!("a"), Value::Null, json!(2)]);
        assert_eq!(r, json!("a2"));
        assert_eq!(call(Function::Concat, vec![Value::Null]), json!(""));
    }

    #[test]
    fn string_functions_count_unicode_characters() {
        assert_eq!(call(Function::Length, vec![json!("héllo")]), json!(5));
        assert_eq!(call(Function::Length, vec![json!("日本語")]), json!(3));
        assert_eq!(call(Function::Length, vec![json!("")]), json!(0));
        assert_eq!(
            call(Function::Upper, vec![json!("straße")]),
            json!("STRASSE")
        );
        assert_eq!(call(Function::Lower, vec![json!("ÉCOLE")]), json!("école"));
        assert_eq!(call(Function::Trim, vec![json!("\t hi \n")]), json!("hi"));
        let r = call(
            Function::Replace,
            vec![json!("a.b.c"), json!("."), json!("→")],
        );
        assert_eq!(r, json!("a→b→c"));
        assert_eq!(call(Function::Length, vec![json!(12)]), Value::Null);
        assert_eq!(call(Function::Upper, vec![json!(["a"])]), Value::Null);
    }

    #[test]
    fn substring_is_one_based_over_characters() {
        let sub = |args: Value| {
            let args = args.as_array().unwrap().clone();
            call(Function::Substring, args)
        };
        assert_eq!(sub(json!(["hello", 1, 2])), json!("he"));
        assert_eq!(sub(json!(["hello", 2])), json!("ello"));
        assert_eq!(sub(json!(["héllo", 2, 3])), json!("éll"));
        assert_eq!(sub(json!(["日本語", 3])), json!("語"));
        assert_eq!(sub(json!(["hello", 0, 2])), json!("he"));
        assert_eq!(sub(json!(["hello", -3])), json!("llo"));
        assert_eq!(sub(json!(["hello", -3, 2])), json!("ll"));
        assert_eq!(sub(json!(["hello", -10, 2])), json!("he"));
        assert_eq!(sub(json!(["hello", 9])), json!(""));
        assert_eq!(sub(json!(["hello", 2, -1])), json!(""));
        assert_eq!(sub(json!(["hello", 2, i64::MAX])), json!("ello"));
        assert_eq!(sub(json!(["hello", i64::MIN, i64::MAX])), json!("hello"));
        assert_eq!(sub(json!(["hello", 1.5])), Value::Null);
    }

    fn like_expr(s: &str, p: &str, negated: bool) -> Value {
        ev(Expr::Like {
            expr: Box::new(Expr::lit(s)),
            pattern: Box::new(Expr::lit(p)),
            negated,
        })
    }

    #[test]
    fn like_matches_percent_and_underscore_wildcards() {
        let cases = [
            ("hello", "hello", true),
            ("hello", "h%", true),
            ("hello", "%llo", true),
            ("hello", "%l%", true),
            ("hello", "h_llo", true),
            ("hello", "h_lo", false),
            ("hello", "%", true),
            ("", "%", true),
            ("", "_", false),
            ("héllo", "h_llo", true),
            ("日本語", "_本%", true),
            ("abcabd", "%ab_", true),
            ("aaa", "%a%a%a%", true),
            ("aa", "%a%a%a%", false),
            ("Hello", "hello", false),
            ("a.c", "a.c", true),
            ("abc", "a.c", false),
            ("a*c", "a*c", true),
            ("mississippi", "%issip%i", true),
            ("mississippi", "m%ss%ss%", true),
            ("mississippi", "m%ss%ss%ss%", false),
        ];
        for (s, p, want) in cases {
            assert_eq!(like_expr(s, p, false), json!(want), "{s} LIKE {p}");
            assert_eq!(like_expr(s, p, true), json!(!want), "{s} NOT LIKE {p}");
        }
        let non_string = Expr::Like {
            expr: Box::new(Expr::lit(5)),
            pattern: Box::new(Expr::lit("5")),
            negated: false,
        };
        assert_eq!(ev(non_string), Value::Null);
    }

    #[test]
    fn like_does_not_blow_up_on_many_wildcards() {
        let text = "a".repeat(2000);
        let pattern = format!("{}b", "%a".repeat(50));
        assert_eq!(like_expr(&text, &pattern, false), json!(false));
    }

    #[test]
    fn case_with_operand_compares_for_equality() {
        let e = Expr::Case {
            operand: Some(Box::new(Expr::field("n"))),
            branches: vec![
                (Expr::lit(1), Expr::lit("one")),
                (Expr::lit(2.0), Expr::lit("two")),
            ],
            otherwise: Some(Box::new(Expr::lit("many"))),
        };
        assert_eq!(e.eval(&row(json!({"n": 1}))), json!("one"));
        assert_eq!(e.eval(&row(json!({"n": 2}))), json!("two"));
        assert_eq!(e.eval(&row(json!({"n": 3}))), json!("many"));
        // NULL never equals a WHEN value.
        assert_eq!(e.eval(&row(json!({}))), json!("many"));
    }

    #[test]
    fn case_without_operand_takes_first_true_branch() {
        let e = Expr::Case {
            operand: None,
            branches: vec![
                (Expr::field("n").lt(Expr::lit(0)), Expr::lit("neg")),
                (Expr::field("n").lt(Expr::lit(10)), Expr::lit("small")),
                (
                    Expr::field("n").lt(Expr::lit(100)),
                    Expr::lit("never reached first"),
                ),
            ],
            otherwise: None,
        };
        assert_eq!(e.eval(&row(json!({"n": -1}))), json!("neg"));
        assert_eq!(e.eval(&row(json!({"n": 5}))), json!("small"));
        assert_eq!(e.eval(&row(json!({"n": 500}))), Value::Null);
        assert_eq!(e.eval(&row(json!({"n": "x"}))), Value::Null);
    }

    #[test]
    fn in_list_and_between_follow_sql_null_rules() {
        let in_list = |v: Value, items: Vec<Value>, negated: bool| {
            ev(Expr::InList {
                expr: Box::new(lit(v)),
                list: items.into_iter().map(lit).collect(),
                negated,
            })
        };
        assert_eq!(
            in_list(json!(2), vec![json!(1), json!(2.0)], false),
            json!(true)
        );
        assert_eq!(
            in_list(json!(3), vec![json!(1), json!(2)], false),
            json!(false)
        );
        assert_eq!(
            in_list(json!(3), vec![json!(1), json!(2)], true),
            json!(true)
        );
        assert_eq!(
            in_list(json!(3), vec![json!(1), Value::Null], false),
            Value::Null
        );
        assert_eq!(
            in_list(json!(1), vec![json!(1), Value::Null], false),
            json!(true)
        );
        assert_eq!(
            in_list(json!(3), vec![json!(1), Value::Null], true),
            Value::Null
        );
        assert_eq!(in_list(Value::Null, vec![json!(1)], false), Value::Null);
        assert_eq!(in_list(json!("a"), vec![], false), json!(false));

        let between = |v: Value, lo: Value, hi: Value, negated: bool| {
            ev(Expr::Between {
                expr: Box::new(lit(v)),
                low: Box::new(lit(lo)),
                high: Box::new(lit(hi)),
                negated,
            })
        };
        assert_eq!(between(json!(5), json!(1), json!(5), false), json!(true));
        assert_eq!(between(json!(0.5), json!(1), json!(5), false), json!(false));
        assert_eq!(between(json!(0.5), json!(1), json!(5), true), json!(true));
        assert_eq!(
            between(json!("b"), json!("a"), json!("c"), false),
            json!(true)
        );
        assert_eq!(
            between(json!(0), json!(1), Value::Null, false),
            json!(false)
        );
        assert_eq!(between(json!(3), json!(1), Value::Null, false), Value::Null);
        assert_eq!(between(json!(3), json!("a"), json!(5), false), Value::Null);
    }

    #[test]
    fn cast_to_boolean_integer_double_and_string() {
        use DataType::*;
        assert_eq!(cast_lit(json!(" TRUE "), Boolean), json!(true));
        assert_eq!(cast_lit(json!("false"), Boolean), json!(false));
        assert_eq!(cast_lit(json!("yes"), Boolean), Value::Null);
        assert_eq!(cast_lit(json!(1), Boolean), Value::Null);
        assert_eq!(cast_lit(json!(" 42 "), Integer), json!(42));
        assert_eq!(cast_lit(json!(-3.9), Integer), json!(-3));
        assert_eq!(cast_lit(json!(1e30), Integer), Value::Null);
        assert_eq!(cast_lit(json!("1.5"), Integer), Value::Null);
        assert_eq!(cast_lit(json!("abc"), Integer), Value::Null);
        assert_eq!(cast_lit(json!(true), Integer), Value::Null);
        assert_eq!(cast_lit(json!(3), Double), json!(3.0));
        assert!(cast_lit(json!(3), Double).is_f64());
        assert_eq!(cast_lit(json!("2.5e3"), Double), json!(2500.0));
        assert_eq!(cast_lit(json!("NaN"), Double), Value::Null);
        assert_eq!(cast_lit(json!("inf"), Double), Value::Null);
        assert_eq!(cast_lit(json!(1.5), String), json!("1.5"));
        assert_eq!(cast_lit(json!(7), String), json!("7"));
        assert_eq!(cast_lit(json!(false), String), json!("false"));
        assert_eq!(cast_lit(json!({"a": [1]}), String), json!(r#"{"a":[1]}"#));
        assert_eq!(cast_lit(json!([1]), Integer), Value::Null);
    }

    #[test]
    fn cast_to_decimal_rounds_half_away_from_zero_and_checks_precision() {
        let dec = |v: Value| {
            cast_lit(
                v,
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            )
        };
        assert_eq!(dec(json!(1.005)), json!(1.01));
        assert_eq!(dec(json!(2.345)), json!(2.35));
        assert_eq!(dec(json!(-1.005)), json!(-1.01));
        assert_eq!(dec(json!(1.004)), json!(1.0));
        assert_eq!(dec(json!(0.999)), json!(1.0));
        assert_eq!(dec(json!(-0.001)), json!(0.0));
        assert_eq!(dec(json!(12)), json!(12.0));
        assert_eq!(dec(json!("6.12545")), json!(6.13));
        assert_eq!(dec(json!(12345678.994)), json!(12345678.99));
        // 8 integer digits allowed by DECIMAL(10,2); rounding can push it over.
        assert_eq!(dec(json!(99999999.995)), Value::Null);
        assert_eq!(dec(json!(123456789.1)), Value::Null);
        assert_eq!(dec(json!("abc")), Value::Null);
        assert_eq!(dec(json!(true)), Value::Null);
        let zero_scale = DataType::Decimal {
            precision: 3,
            scale: 0,
        };
        assert_eq!(cast_lit(json!(2.5), zero_scale), json!(3.0));
        assert_eq!(cast_lit(json!(999.5), zero_scale), Value::Null);
        let invalid = DataType::Decimal {
            precision: 2,
            scale: 3,
        };
        assert_eq!(cast_lit(json!(0.1), invalid), Value::Null);
        let huge = DataType::Decimal {
            precision: u32::MAX,
            scale: u32::MAX,
        };
        assert_eq!(cast_lit(json!(0.1), huge), json!(0.1));
    }

    #[test]
    fn cast_to_timestamp_reads_milliseconds_and_rfc3339() {
        use DataType::Timestamp;
        assert_eq!(
            cast_lit(json!(1_700_000_000_000_i64), Timestamp),
            json!(1_700_000_000_000_i64)
        );
        assert_eq!(
            cast_lit(json!("1970-01-01T00:00:01Z"), Timestamp),
            json!(1000)
        );
        assert_eq!(cast_lit(json!("yesterday"), Timestamp), Value::Null);
        assert_eq!(cast_lit(json!(true), Timestamp), Value::Null);
    }

    #[test]
    fn parse_timestamp_reads_rfc3339_with_offsets_and_fractions() {
        assert_eq!(ts("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(ts("2024-02-29T12:34:56Z"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29T12:34:56.789Z"), Some(1_709_210_096_789));
        assert_eq!(ts("2024-02-29T12:34:56.7Z"), Some(1_709_210_096_700));
        assert_eq!(
            ts("2024-02-29T12:34:56.123456789Z"),
            Some(1_709_210_096_123)
        );
        assert_eq!(ts("2024-02-29T14:34:56+02:00"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29T18:04:56.789+05:30"), Some(1_709_210_096_789));
        assert_eq!(ts("2024-02-29T04:34:56-08:00"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29t12:34:56z"), Some(1_709_210_096_000));
        assert_eq!(ts("2024-02-29 12:34:56Z"), Some(1_709_210_096_000));
        assert_eq!(ts(" 1970-01-01T00:00:00Z "), Some(0));
    }

    #[test]
    fn parse_timestamp_handles_dates_before_1970() {
        assert_eq!(ts("1969-12-31T23:59:59.999Z"), Some(-1));
        assert_eq!(ts("1969-12-31T23:59:59Z"), Some(-1000));
        assert_eq!(ts("1900-01-01T00:00:00Z"), Some(-2_208_988_800_000));
        assert_eq!(ts("0000-01-01T00:00:00Z"), Some(-62_167_219_200_000));
        assert_eq!(ts("1970-01-01T00:59:59+01:00"), Some(-1000));
    }

    #[test]
    fn parse_timestamp_reads_numbers_and_rejects_bad_input() {
        assert_eq!(
            parse_timestamp(&json!(1_700_000_000_123_i64)),
            Some(1_700_000_000_123)
        );
        assert_eq!(parse_timestamp(&json!(-5)), Some(-5));
        assert_eq!(parse_timestamp(&json!(1234.9)), Some(1234));
        assert_eq!(parse_timestamp(&json!(-1234.9)), Some(-1234));
        assert_eq!(parse_timestamp(&json!(1e300)), None);
        assert_eq!(parse_timestamp(&json!(u64::MAX)), None);
        assert_eq!(parse_timestamp(&json!(true)), None);
        assert_eq!(parse_timestamp(&Value::Null), None);
        for bad in [
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:00",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00+2:00",
            "2024-01-01T00:00:00+24:00",
            "2024-01-01T00:00:00Zjunk",
            "2024-01-01",
            "1700000000000",
            "2024-1-01T00:00:00Z",
            "",
            "２０２４-01-01T00:00:00Z",
        ] {
            assert_eq!(ts(bad), None, "{bad}");
        }
    }

    #[test]
    fn format_timestamp_writes_utc_rfc3339_and_round_trips() {
        assert_eq!(
            format_timestamp(0).as_deref(),
            Some("1970-01-01T00:00:00.000Z")
        );
        assert_eq!(
            format_timestamp(-1).as_deref(),
            Some("1969-12-31T23:59:59.999Z")
        );
        assert_eq!(
            format_timestamp(1_709_210_096_789).as_deref(),
            Some("2024-02-29T12:34:56.789Z")
        );
        assert_eq!(format_timestamp(i64::MAX), None);
        assert_eq!(format_timestamp(i64::MIN), None);
        for ms in [
            0,
            -1,
            951_782_400_000,
            -62_167_219_200_000,
            253_402_300_799_999,
        ] {
            let s = format_timestamp(ms).unwrap();
            assert_eq!(ts(&s), Some(ms), "{s}");
        }
        let r = call(Function::FormatTimestamp, vec![json!(1000)]);
        assert_eq!(r, json!("1970-01-01T00:00:01.000Z"));
        let r = call(
            Function::ToTimestamp,
            vec![json!("1970-01-01T00:00:01+00:00")],
        );
        assert_eq!(r, json!(1000));
        assert_eq!(
            call(Function::ToTimestamp, vec![json!("nope")]),
            Value::Null
        );
    }

    #[test]
    fn date_trunc_truncates_in_utc() {
        let t = ts("2024-05-15T13:45:30.250Z").unwrap();
        let trunc = |unit: &str| call(Function::DateTrunc, vec![json!(unit), json!(t)]);
        let at = |s: &str| json!(ts(s).unwrap());
        assert_eq!(trunc("second"), at("2024-05-15T13:45:30Z"));
        assert_eq!(trunc("MINUTE"), at("2024-05-15T13:45:00Z"));
        assert_eq!(trunc("hour"), at("2024-05-15T13:00:00Z"));
        assert_eq!(trunc("day"), at("2024-05-15T00:00:00Z"));
        assert_eq!(trunc("week"), at("2024-05-13T00:00:00Z"));
        assert_eq!(trunc("month"), at("2024-05-01T00:00:00Z"));
        assert_eq!(trunc("quarter"), at("2024-04-01T00:00:00Z"));
        assert_eq!(trunc("year"), at("2024-01-01T00:00:00Z"));
        assert_eq!(trunc("fortnight"), Value::Null);
        let before = call(Function::DateTrunc, vec![json!("day"), json!(-1)]);
        assert_eq!(before, json!(-DAY_MS));
        let edge = call(Function::DateTrunc, vec![json!("year"), json!(i64::MIN)]);
        assert_eq!(edge, Value::Null);
    }

    #[test]
    fn math_functions_round_floor_ceil_abs_sqrt() {
        use Function::*;
        assert_eq!(call(Round, vec![json!(2.5)]), json!(3));
        assert!(call(Round, vec![json!(2.5)]).is_i64());
        assert_eq!(call(Round, vec![json!(-2.5)]), json!(-3));
        assert_eq!(call(Round, vec![json!(1.005), json!(2)]), json!(1.01));
        assert_eq!(call(Round, vec![json!(1234.5), json!(-2)]), json!(1200.0));
        assert_eq!(call(Round, vec![json!(1250), json!(-2)]), json!(1300));
        assert_eq!(call(Round, vec![json!(-1250), json!(-2)]), json!(-1300));
        assert_eq!(call(Round, vec![json!(7), json!(2)]), json!(7));
        assert_eq!(
            call(Round, vec![json!(i64::MAX), json!(-1)]),
            json!(9.223372036854776e18)
        );
        assert_eq!(call(Round, vec![json!(i64::MAX), json!(-19)]), json!(1e19));
        assert_eq!(call(Round, vec![json!(5), json!(-30)]), json!(0.0));
        assert_eq!(call(Round, vec![json!(1.5), json!(1.5)]), Value::Null);
        assert_eq!(call(Floor, vec![json!(-1.5)]), json!(-2.0));
        assert_eq!(call(Ceil, vec![json!(1.2)]), json!(2.0));
        assert_eq!(call(Floor, vec![json!(4)]), json!(4));
        assert_eq!(call(Abs, vec![json!(-4)]), json!(4));
        assert_eq!(call(Abs, vec![json!(-4.5)]), json!(4.5));
        assert_eq!(call(Sqrt, vec![json!(9)]), json!(3.0));
        assert_eq!(call(Sqrt, vec![json!(-1)]), Value::Null);
        assert_eq!(call(Sqrt, vec![json!("9")]), Value::Null);
    }

    #[test]
    fn coalesce_ifnull_greatest_least_handle_nulls() {
        use Function::*;
        assert_eq!(
            call(Coalesce, vec![Value::Null, json!(2), json!(3)]),
            json!(2)
        );
        assert_eq!(call(Coalesce, vec![Value::Null]), Value::Null);
        assert_eq!(call(IfNull, vec![Value::Null, json!("d")]), json!("d"));
        assert_eq!(call(IfNull, vec![json!(0), json!("d")]), json!(0));
        assert_eq!(
            call(Greatest, vec![json!(1), Value::Null, json!(2.5)]),
            json!(2.5)
        );
        assert_eq!(
            call(Least, vec![json!(1), Value::Null, json!(2.5)]),
            json!(1)
        );
        assert_eq!(call(Greatest, vec![json!("a"), json!("b")]), json!("b"));
        assert_eq!(call(Greatest, vec![Value::Null, Value::Null]), Value::Null);
        assert_eq!(call(Greatest, vec![json!(1), json!("b")]), Value::Null);
    }

    #[test]
    fn wrong_argument_counts_give_null() {
        assert_eq!(call(Function::Upper, vec![]), Value::Null);
        assert_eq!(
            call(Function::Upper, vec![json!("a"), json!("b")]),
            Value::Null
        );
        assert_eq!(call(Function::Coalesce, vec![]), Value::Null);
        assert_eq!(Function::Replace.apply(&[json!("a")]), Value::Null);
    }

    #[test]
    fn function_names_are_case_insensitive_with_aliases() {
        assert_eq!(Function::from_name("ifnull"), Some(Function::IfNull));
        assert_eq!(Function::from_name("Coalesce"), Some(Function::Coalesce));
        assert_eq!(Function::from_name("len"), Some(Function::Length));
        assert_eq!(Function::from_name("LENGTH"), Some(Function::Length));
        assert_eq!(Function::from_name("substr"), Some(Function::Substring));
        assert_eq!(Function::from_name("SUBSTRING"), Some(Function::Substring));
        assert_eq!(Function::from_name("ceiling"), Some(Function::Ceil));
        assert_eq!(Function::from_name("CEIL"), Some(Function::Ceil));
        assert_eq!(Function::from_name("nope"), None);
        for f in Function::ALL {
            assert_eq!(Function::from_name(f.name()), Some(*f));
            assert_eq!(Function::from_name(&f.name().to_lowercase()), Some(*f));
            let (min, max) = f.arity();
            assert!(min >= 1 && max.is_none_or(|m| m >= min), "{f:?}");
        }
        assert_eq!(Function::Substring.arity(), (2, Some(3)));
        assert_eq!(Function::Coalesce.arity(), (1, None));
    }

    #[test]
    fn key_rowtime_and_columns_are_readable() {
        let mut r = row(json!({}));
        r.key = Some("user-1".into());
        r.ts = 42;
        r.columns.insert("WINDOWSTART".into(), json!(1000));
        assert_eq!(Expr::Key.eval(&r), json!("user-1"));
        assert_eq!(Expr::RecordTimestamp.eval(&r), json!(42));
        assert!(Expr::column("WINDOWSTART")
            .gt_eq(Expr::lit(1000))
            .is_true(&r));
    }

    #[test]
    fn fields_collects_nested_paths_once() {
        let e = Expr::field("a.b")
            .add(Expr::field("c"))
            .gt(Expr::lit(1))
            .and(Expr::Function(
                Function::Coalesce,
                vec![Expr::field("a.b"), Expr::field("d.e.f")],
            ))
            .or(Expr::Case {
                operand: Some(Box::new(Expr::field("g"))),
                branches: vec![(Expr::field("h"), Expr::Key)],
                otherwise: Some(Box::new(Expr::Cast(
                    Box::new(Expr::field("i")),
                    DataType::String,
                ))),
            });
        let path = |s: &str| s.split('.').map(str::to_owned).collect::<Vec<_>>();
        let want: Vec<Vec<String>> = ["a.b", "c", "d.e.f", "g", "h", "i"].map(path).to_vec();
        assert_eq!(e.fields(), want);
        assert!(Expr::column("x").fields().is_empty());
    }

    #[test]
    fn dsl_builds_plain_trees_that_evaluate() {
        let e = Expr::field("a.b").eq(Expr::lit(1));
        let want = Expr::Binary(
            BinaryOp::Eq,
            Box::new(Expr::Field(vec!["a".into(), "b".into()])),
            Box::new(Expr::Literal(json!(1))),
        );
        assert_eq!(e, want);
        let r = row(json!({"x": 10, "y": 4, "items": [5, 6]}));
        let x = || Expr::field("x");
        let y = || Expr::field("y");
        assert_eq!(x().add(y()).eval(&r), json!(14));
        assert_eq!(x().sub(y()).eval(&r), json!(6));
        assert_eq!(x().mul(y()).eval(&r), json!(40));
        assert_eq!(x().div(y()).eval(&r), json!(2));
        assert_eq!((x() % y()).eval(&r), json!(2));
        assert!(x()
            .not_eq(y())
            .and(x().gt(y()))
            .and(y().lt_eq(x()))
            .is_true(&r));
        assert!(y().gt_eq(x()).or(x().lt(y()).not()).is_true(&r));
        assert_eq!(Expr::field("items.1").eval(&r), json!(6));
    }

    #[test]
    fn expressions_round_trip_through_serde() {
        let e = Expr::Case {
            operand: None,
            branches: vec![(
                Expr::field("a").lt(Expr::lit(1.5)),
                Expr::Function(Function::Upper, vec![Expr::lit("x")]),
            )],
            otherwise: Some(Box::new(Expr::Cast(
                Box::new(Expr::RecordTimestamp),
                DataType::Decimal {
                    precision: 10,
                    scale: 2,
                },
            ))),
        };
        let text = serde_json::to_string(&e).unwrap();
        let back: Expr = serde_json::from_str(&text).unwrap();
        assert_eq!(back, e);
    }

    // -- property test: eval never panics ---------------------------------

    fn arb_json() -> impl Strategy<Value = Value> {
        let strings = prop::sample::select(vec![
            "",
            "a",
            "b%",
            "_",
            "héllo",
            "日本語",
            "2024-02-29T12:34:56.789+05:30",
            "1.005",
            " 42 ",
            "true",
            "day",
            "year",
            "week",
            "NaN",
            "-1e400",
        ]);
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            prop::sample::select(vec![i64::MIN, i64::MAX, -1, 0, 1, 2, 3, 60])
                .prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
            strings.prop_map(Value::from),
            any::<String>().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((arb_name(), inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn arb_name() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", "b", "c", "0"]).prop_map(str::to_owned)
    }

    fn arb_type() -> impl Strategy<Value = DataType> {
        prop_oneof![
            Just(DataType::Boolean),
            Just(DataType::Integer),
            Just(DataType::Double),
            Just(DataType::String),
            Just(DataType::Timestamp),
            (any::<u32>(), any::<u32>())
                .prop_map(|(precision, scale)| DataType::Decimal { precision, scale }),
            (0_u32..20, 0_u32..20)
                .prop_map(|(precision, scale)| DataType::Decimal { precision, scale }),
        ]
    }

    fn arb_binop() -> impl Strategy<Value = BinaryOp> {
        use BinaryOp::*;
        prop::sample::select(vec![
            Add, Sub, Mul, Div, Mod, Eq, NotEq, Lt, LtEq, Gt, GtEq, And, Or, Concat,
        ])
    }

    fn arb_expr() -> impl Strategy<Value = Expr> {
        let leaf = prop_oneof![
            prop::collection::vec(arb_name(), 0..3).prop_map(Expr::Field),
            arb_name().prop_map(Expr::Column),
            Just(Expr::Key),
            Just(Expr::RecordTimestamp),
            arb_json().prop_map(Expr::Literal),
        ];
        leaf.prop_recursive(4, 48, 4, |inner| {
            let b = || inner.clone().prop_map(Box::new);
            prop_oneof![
                (prop::sample::select(vec![UnaryOp::Not, UnaryOp::Neg]), b())
                    .prop_map(|(op, e)| Expr::Unary(op, e)),
                (arb_binop(), b(), b()).prop_map(|(op, l, r)| Expr::Binary(op, l, r)),
                (b(), any::<bool>()).prop_map(|(expr, negated)| Expr::IsNull { expr, negated }),
                (
                    b(),
                    prop::collection::vec(inner.clone(), 0..3),
                    any::<bool>()
                )
                    .prop_map(|(expr, list, negated)| Expr::InList {
                        expr,
                        list,
                        negated
                    }),
                (b(), b(), b(), any::<bool>()).prop_map(|(expr, low, high, negated)| {
                    Expr::Between {
                        expr,
                        low,
                        high,
                        negated,
                    }
                }),
                (b(), b(), any::<bool>()).prop_map(|(expr, pattern, negated)| Expr::Like {
                    expr,
                    pattern,
                    negated
                }),
                (
                    prop::option::of(b()),
                    prop::collection::vec((inner.clone(), inner.clone()), 0..3),
                    prop::option::of(b()),
                )
                    .prop_map(|(operand, branches, otherwise)| Expr::Case {
                        operand,
                        branches,
                        otherwise,
                    }),
                (b(), arb_type()).prop_map(|(e, ty)| Expr::Cast(e, ty)),
                (
                    prop::sample::select(Function::ALL.to_vec()),
                    prop::collection::vec(inner.clone(), 0..4)
                )
                    .prop_map(|(f, args)| Expr::Function(f, args)),
            ]
        })
    }

    fn arb_row() -> impl Strategy<Value = TestRow> {
        (
            arb_json(),
            prop::option::of(any::<String>()),
            any::<i64>(),
            prop::collection::vec((arb_name(), arb_json()), 0..3),
        )
            .prop_map(|(value, key, ts, cols)| TestRow {
                value,
                key,
                ts,
                columns: cols.into_iter().collect(),
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn eval_never_panics_on_random_trees_and_rows(e in arb_expr(), r in arb_row()) {
            let v = e.eval(&r);
            prop_assert_eq!(&v, &e.eval(&r), "eval is deterministic");
            prop_assert_eq!(e.is_true(&r), v == Value::Bool(true));
            for path in e.fields() {
                prop_assert!(e.walk_contains_field(&path));
            }
        }

        #[test]
        fn timestamps_format_and_parse_back(ms in -62_167_219_200_000_i64..253_402_300_800_000) {
            let s = format_timestamp(ms).unwrap();
            prop_assert_eq!(parse_timestamp(&Value::String(s)), Some(ms));
        }

        #[test]
        fn decimal_rounding_never_panics(x in any::<f64>(), scale in any::<i32>()) {
            if let Some(d) = round_decimal(x, scale) {
                let _ = d.to_f64();
                let _ = d.integer_digits();
            }
        }
    }

    impl Expr {
        fn walk_contains_field(&self, path: &[String]) -> bool {
            let mut found = false;
            self.walk(&mut |e| found |= matches!(e, Expr::Field(p) if p == path));
            found
        }
    }
}
