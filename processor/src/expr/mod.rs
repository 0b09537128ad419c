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
//!   [`crate::time::parse_timestamp`] reads integers, doubles (truncated)
//!   and RFC 3339 strings; [`crate::time::format_timestamp`] writes
//!   `YYYY-MM-DDTHH:MM:SS.sssZ`.
//!
//! # Where things are
//! The types (this file), the Rust-DSL constructors (`build`),
//! evaluation with the operators and predicates (`eval`), arithmetic
//! compiled against a row's fields by index (`arithmetic`), `CAST` and
//! decimal rounding (`cast`), and the built-in functions (`functions`).
//! Timestamp parsing and formatting is [`crate::time`]'s.

mod arithmetic;
mod build;
mod cast;
mod display;
mod eval;
mod functions;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Timestamp parsing and formatting, kept here for callers of the old
/// path; they belong to [`crate::time`].
pub use crate::time::{format_timestamp, parse_timestamp};
pub(crate) use arithmetic::Arithmetic;
pub use cast::conforms;
pub(crate) use cast::f64_to_i64;
pub use eval::stringify;
pub(crate) use eval::{num, Num};

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
}
