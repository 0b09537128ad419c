//! The built-in functions: strings, math, `COALESCE`/`IFNULL`,
//! `GREATEST`/`LEAST` and time (`TO_TIMESTAMP`, `FORMAT_TIMESTAMP`,
//! `DATE_TRUNC`), applied to evaluated arguments.

use std::cmp::Ordering;

use serde_json::Value;

use super::cast::{f64_to_i64, round_decimal, MAX_SCALE};
use super::eval::{num, num_value, sql_cmp, stringify, Num};
use super::Function;
use crate::time::{civil_from_days, days_from_civil, format_timestamp, parse_timestamp, DAY_MS};

impl Function {
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

pub(super) fn first_non_null(mut values: impl Iterator<Item = Value>) -> Value {
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
