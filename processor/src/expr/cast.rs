//! `CAST(x AS type)`, the declared-type check of source columns
//! ([`conforms`]) and decimal rounding (half away from zero on the
//! shortest decimal form of a double), which `ROUND` shares.

use serde_json::Value;

use super::eval::{bool_value, num_value, stringify, Num};
use super::DataType;
use crate::time::parse_timestamp;

pub(super) fn cast(v: &Value, ty: DataType) -> Value {
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
pub(crate) fn f64_to_i64(f: f64) -> Option<i64> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    (f.is_finite() && (-TWO_63..TWO_63).contains(&f)).then(|| f.trunc() as i64)
}

// ---------------------------------------------------------------------------
// Decimal rounding
// ---------------------------------------------------------------------------

/// Beyond this many places (either way) rounding an `f64` changes nothing
/// or gives zero.
pub(super) const MAX_SCALE: i32 = 400;

/// A decimal `digits × 10^-scale` (digits: ASCII, no leading zeros but "0").
pub(super) struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    scale: i32,
}

impl Decimal {
    pub(super) fn integer_digits(&self) -> usize {
        if self.digits == b"0" {
            return 0;
        }
        (self.digits.len() as i64 - i64::from(self.scale)).max(0) as usize
    }

    pub(super) fn to_f64(&self) -> Option<f64> {
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
pub(super) fn round_decimal(x: f64, scale: i32) -> Option<Decimal> {
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
