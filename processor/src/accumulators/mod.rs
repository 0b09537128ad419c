//! Aggregate functions and their accumulators.
//!
//! An accumulator holds the partial result of one aggregate for one group
//! (and window, or window slice). It can take a value, merge another
//! accumulator (for hopping-window slices and session merges) and produce
//! its result. Accumulators serialize into state, so they are plain data.
//!
//! NULL inputs are ignored, as in SQL (except `COUNT(*)`, which counts
//! rows). Integer sums stay integers until they meet a float; on overflow
//! they saturate at `i64::MIN` / `i64::MAX` (never silently a double).
//! `SUM` and `AVG` over a `DECIMAL(p, s)` input are exact: values are read
//! from their JSON text into integers of `10^-s` units (half-up), summed
//! as `i128`, and answered as JSON numbers with at most `s` decimals
//! (`s + 4` for `AVG`, Spark's and Databricks' rule; whole results as
//! integers) — exact while the result has at most 15 significant digits, a
//! string of its exact decimal text beyond. Inputs arrive as JSON numbers
//! read into doubles, so each input is exact up to 15 significant digits.

mod retracting;

pub use retracting::{total_order, ExactSum, Multiset};

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggregateKind {
    /// `COUNT(*)`: rows.
    CountAll,
    /// `COUNT(x)`: non-null values.
    Count,
    /// `SUM(x)`.
    Sum,
    /// `AVG(x)`.
    Avg,
    /// `MIN(x)`.
    Min,
    /// `MAX(x)`.
    Max,
    /// `COUNT_DISTINCT(x)`: distinct non-null values (exact).
    CountDistinct,
    /// `LATEST_BY_OFFSET(x)`: the value of the record with the largest offset.
    Latest,
    /// `EARLIEST_BY_OFFSET(x)`: the value of the record with the smallest offset.
    Earliest,
    /// `SUM(x)` over a `DECIMAL(p, scale)` input: exact.
    SumDecimal {
        /// The input's scale.
        scale: u32,
    },
    /// `AVG(x)` over a `DECIMAL(p, scale)` input: exact sum, result at
    /// `scale + 4` places.
    AvgDecimal {
        /// The input's scale.
        scale: u32,
    },
}

impl AggregateKind {
    /// The SQL function name (case-insensitive), with `COUNT(*)` spelled
    /// `COUNT` plus `star = true`.
    pub fn from_sql(name: &str, star: bool) -> Option<AggregateKind> {
        Some(match name.to_ascii_uppercase().as_str() {
            "COUNT" if star => AggregateKind::CountAll,
            "COUNT" => AggregateKind::Count,
            "SUM" => AggregateKind::Sum,
            "AVG" => AggregateKind::Avg,
            "MIN" => AggregateKind::Min,
            "MAX" => AggregateKind::Max,
            "COUNT_DISTINCT" => AggregateKind::CountDistinct,
            "LATEST_BY_OFFSET" | "LATEST" => AggregateKind::Latest,
            "EARLIEST_BY_OFFSET" | "EARLIEST" => AggregateKind::Earliest,
            _ => return None,
        })
    }

    /// A fresh accumulator.
    pub fn accumulator(self) -> Accumulator {
        match self {
            AggregateKind::CountAll | AggregateKind::Count => Accumulator::Count(0),
            AggregateKind::Sum => Accumulator::Sum(Sum::default()),
            AggregateKind::Avg => Accumulator::Avg { sum: 0.0, count: 0 },
            AggregateKind::Min => Accumulator::Min(None),
            AggregateKind::Max => Accumulator::Max(None),
            AggregateKind::CountDistinct => Accumulator::Distinct(BTreeSet::new()),
            AggregateKind::Latest => Accumulator::Latest(None),
            AggregateKind::Earliest => Accumulator::Earliest(None),
            AggregateKind::SumDecimal { scale } => Accumulator::Decimal(Box::new(DecimalSum {
                units: 0,
                count: 0,
                scale: scale.min(MAX_DECIMAL_SCALE),
                average: false,
            })),
            AggregateKind::AvgDecimal { scale } => Accumulator::Decimal(Box::new(DecimalSum {
                units: 0,
                count: 0,
                scale: scale.min(MAX_DECIMAL_SCALE),
                average: true,
            })),
        }
    }

    /// A fresh accumulator that can take values back
    /// ([`Accumulator::retract`]), for an aggregate over a table's changes;
    /// `None` for `LATEST_BY_OFFSET` and `EARLIEST_BY_OFFSET`, which have
    /// no meaning there (a table's rows have no offsets).
    pub fn retracting(self) -> Option<Accumulator> {
        Some(match self {
            AggregateKind::CountAll | AggregateKind::Count => Accumulator::Count(0),
            AggregateKind::SumDecimal { .. } | AggregateKind::AvgDecimal { .. } => {
                self.accumulator()
            }
            AggregateKind::Sum => Accumulator::Exact(Box::new(ExactSum::new(false))),
            AggregateKind::Avg => Accumulator::Exact(Box::new(ExactSum::new(true))),
            AggregateKind::Min => {
                Accumulator::Values(Box::new(Multiset::new(retracting::Reduce::Min)))
            }
            AggregateKind::Max => {
                Accumulator::Values(Box::new(Multiset::new(retracting::Reduce::Max)))
            }
            AggregateKind::CountDistinct => {
                Accumulator::Values(Box::new(Multiset::new(retracting::Reduce::Distinct)))
            }
            AggregateKind::Latest | AggregateKind::Earliest => return None,
        })
    }

    /// The exact form of `SUM`/`AVG` for an input of `DECIMAL(p, scale)`;
    /// any other aggregate unchanged.
    pub fn for_decimal(self, scale: u32) -> AggregateKind {
        match self {
            AggregateKind::Sum => AggregateKind::SumDecimal { scale },
            AggregateKind::Avg => AggregateKind::AvgDecimal { scale },
            other => other,
        }
    }
}

/// A running sum: exact while every input is an integer and it fits.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sum {
    int: i64,
    float: f64,
    is_float: bool,
    seen: bool,
}

impl Sum {
    fn add_number(&mut self, n: &serde_json::Number) {
        match n.as_i64() {
            Some(i) => self.add_int(i),
            None => {
                self.seen = true;
                self.promote_to_float(n.as_f64().unwrap_or(0.0));
            }
        }
    }

    fn add_int(&mut self, i: i64) {
        self.seen = true;
        if self.is_float {
            self.float += i as f64;
            return;
        }
        self.int = self.int.saturating_add(i);
    }

    fn promote_to_float(&mut self, add: f64) {
        if !self.is_float {
            self.float = self.int as f64;
            self.is_float = true;
        }
        self.float += add;
    }

    fn merge(&mut self, other: &Sum) {
        if !other.seen {
            return;
        }
        if other.is_float {
            self.seen = true;
            self.promote_to_float(other.float);
        } else {
            self.add_int(other.int);
        }
    }

    fn result(&self) -> Value {
        match (self.seen, self.is_float) {
            (false, _) => Value::Null,
            (true, false) => self.int.into(),
            (true, true) => float(self.float),
        }
    }
}

/// Most decimal places an exact sum keeps (`10^24` units still leave
/// `i128` room for sums of 10^14).
pub const MAX_DECIMAL_SCALE: u32 = 24;

/// An exact `SUM` or `AVG` of decimals: integer units of `10^-scale`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecimalSum {
    units: i128,
    count: u64,
    scale: u32,
    /// `AVG` (else `SUM`).
    average: bool,
}

impl DecimalSum {
    fn add(&mut self, n: &serde_json::Number) {
        if let Some(units) = number_units(n, self.scale) {
            self.units = self.units.saturating_add(units);
            self.count += 1;
        }
    }

    /// Takes back a value [`DecimalSum::add`] took.
    fn retract(&mut self, n: &serde_json::Number) {
        if let Some(units) = number_units(n, self.scale) {
            self.units = self.units.saturating_sub(units);
            self.count = self.count.saturating_sub(1);
        }
    }

    fn merge(&mut self, other: &DecimalSum) {
        self.units = self.units.saturating_add(other.units);
        self.count += other.count;
    }

    fn result(&self) -> Value {
        if self.count == 0 {
            return Value::Null;
        }
        if !self.average {
            return decimal_value(self.units, self.scale);
        }
        // AVG at scale + 4 places, half away from zero.
        const EXTRA: u32 = 4;
        let scaled = self.units.saturating_mul(10_i128.pow(EXTRA));
        let count = i128::from(self.count);
        let (q, r) = (scaled / count, scaled % count);
        let rounded = if r.abs() * 2 >= count {
            q + scaled.signum()
        } else {
            q
        };
        decimal_value(rounded, self.scale + EXTRA)
    }
}

/// The JSON number `n` in units of `10^-scale` (half away from zero);
/// `None` if it does not fit.
pub(crate) fn number_units(n: &serde_json::Number, scale: u32) -> Option<i128> {
    // Whole numbers need no text (this runs for every event).
    match n.as_i64() {
        Some(i) => 10_i128
            .checked_pow(scale)
            .and_then(|unit| i128::from(i).checked_mul(unit)),
        // The number's text as serde_json writes it, on the stack (no
        // allocation): itoa for a large integer, zmij for a double.
        None => match n.as_u64() {
            Some(u) => decimal_units(itoa::Buffer::new().format(u), scale),
            None => n.as_f64().and_then(|f| {
                float_units(f, scale)
                    .or_else(|| decimal_units(zmij::Buffer::new().format_finite(f), scale))
            }),
        },
    }
}

/// The units of `10^-scale` of the double `f` when it is the double
/// nearest a decimal of at most `scale` places — what JSON numbers such as
/// `13.05` read as — without writing its text; `None` when the text must
/// decide ([`decimal_units`] of its shortest text).
///
/// Why it equals [`decimal_units`] of any text that reads back as `f` (so
/// of its shortest): with `r` an integer of magnitude below 2^51, `r /
/// 10^scale` in doubles is the double nearest the decimal `d = r ×
/// 10^-scale` (both operands are exact and IEEE division rounds
/// correctly). If that is `f`, then `d` and the text both lie among the
/// reals that round to `f`, a stretch no longer than the spacing of
/// doubles at `f`, which is below `10^-scale / 2` there. So the text times
/// `10^scale` is within less than one half of the integer `r`, and rounds
/// to it.
fn float_units(f: f64, scale: u32) -> Option<i128> {
    // The powers of ten a double holds exactly (up to 10^22), as far as
    // a decimal of 2^51 units still has a whole part.
    const POWERS: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let power = *POWERS.get(scale as usize)?;
    let units = (f * power).round();
    // Also false for NaN and the infinities.
    let below_2_51 = units.abs() < (1u64 << 51) as f64;
    (below_2_51 && units / power == f).then_some(units as i128)
}

/// The value of the decimal text `text` (as JSON writes numbers: `-12.5`,
/// `3e-2`) in units of `10^-scale`, rounded half away from zero; `None` if
/// it is not a number or does not fit.
pub fn decimal_units(text: &str, scale: u32) -> Option<i128> {
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (&text[..i], text[i + 1..].parse::<i32>().ok()?),
        None => (text, 0),
    };
    let (negative, digits) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty()
        || !int_part
            .bytes()
            .chain(frac_part.bytes())
            .all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // digits × 10^(exponent - fraction length) in units of 10^-scale: the
    // digits of both parts in turn, leading zeros left out.
    let all = || int_part.bytes().chain(frac_part.bytes());
    let leading_zeros = all().take_while(|&d| d == b'0').count();
    let significant = int_part.len() + frac_part.len() - leading_zeros;
    let shift = i64::from(exponent) - frac_part.len() as i64 + i64::from(scale);
    let kept = if shift >= 0 {
        significant
    } else {
        significant.saturating_sub(shift.unsigned_abs() as usize)
    };
    let mut digits = all().skip(leading_zeros);
    let mut units: i128 = 0;
    for d in digits.by_ref().take(kept) {
        units = units.checked_mul(10)?.checked_add(i128::from(d - b'0'))?;
    }
    if shift > 0 {
        units = units.checked_mul(10_i128.checked_pow(u32::try_from(shift).ok()?)?)?;
    }
    // Half away from zero: the first dropped digit decides (when the cut
    // drops more digits than the text has, the value rounds to 0).
    let dropped_all = shift < 0 && shift.unsigned_abs() as usize > significant;
    if !dropped_all && digits.next().is_some_and(|d| d >= b'5') {
        units = units.checked_add(1)?;
    }
    Some(if negative { -units } else { units })
}

/// `units × 10^-scale` as JSON: a number when it has at most 15
/// significant digits (a double holds it, and prints it, exactly), else
/// its exact decimal text as a string.
fn decimal_value(units: i128, scale: u32) -> Value {
    let text = decimal_text(units, scale);
    let significant = text
        .bytes()
        .filter(u8::is_ascii_digit)
        .skip_while(|d| *d == b'0')
        .count();
    if significant <= 15 {
        if let Ok(i) = text.parse::<i64>() {
            return i.into();
        }
        if let Ok(f) = text.parse::<f64>() {
            return float(f);
        }
    }
    Value::String(text)
}

/// `units × 10^-scale` in decimal notation, trailing zeros dropped.
fn decimal_text(units: i128, scale: u32) -> String {
    let digits = units.unsigned_abs().to_string();
    let scale = scale as usize;
    let padded = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (int_part, frac_part) = padded.split_at(padded.len() - scale);
    let frac_part = frac_part.trim_end_matches('0');
    let sign = if units < 0 { "-" } else { "" };
    if frac_part.is_empty() {
        format!("{sign}{int_part}")
    } else {
        format!("{sign}{int_part}.{frac_part}")
    }
}

/// (offset, partition) ordering of LATEST/EARLIEST, with the value. Values
/// are boxed here and in [`Extreme`] so that every accumulator stays small
/// (32 bytes) in the state cache and in hopping slices.
type ByOffset = Option<Box<((u64, u32), Value)>>;

/// The value MIN or MAX holds so far.
type Extreme = Option<Box<Value>>;

/// The partial result of one aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accumulator {
    /// COUNT(*) and COUNT(x).
    Count(u64),
    /// SUM.
    Sum(Sum),
    /// AVG.
    Avg {
        /// Sum of the values.
        sum: f64,
        /// Number of values.
        count: u64,
    },
    /// MIN.
    Min(Extreme),
    /// MAX.
    Max(Extreme),
    /// COUNT_DISTINCT: the distinct values, as JSON text.
    Distinct(BTreeSet<String>),
    /// LATEST_BY_OFFSET.
    Latest(ByOffset),
    /// EARLIEST_BY_OFFSET.
    Earliest(ByOffset),
    /// SUM or AVG over DECIMAL, exact (boxed: rare, and larger).
    Decimal(Box<DecimalSum>),
    /// SUM or AVG over a table's changes: exact, so values taken back
    /// leave no residue ([`ExactSum`]).
    Exact(Box<ExactSum>),
    /// MIN, MAX or COUNT_DISTINCT over a table's changes: every value
    /// with its count ([`Multiset`]).
    Values(Box<Multiset>),
}

fn float(f: f64) -> Value {
    serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
}

/// SQL ordering of two non-null scalars: numbers numerically, strings
/// lexicographically, booleans false < true; other pairs do not compare.
pub fn compare(a: &Value, b: &Value) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => Some(i.cmp(&j)),
            _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
        },
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

impl Accumulator {
    /// Adds one row: `value` is the aggregate's input (ignored by
    /// `COUNT(*)`, which the caller marks with `count_all`); `position` is
    /// the record's (offset, partition).
    pub fn add(&mut self, value: &Value, count_all: bool, position: (u64, u32)) {
        if count_all {
            if let Accumulator::Count(n) = self {
                *n += 1;
            }
            return;
        }
        if value.is_null() {
            return;
        }
        match self {
            Accumulator::Count(n) => *n += 1,
            Accumulator::Sum(s) => {
                if let Value::Number(n) = value {
                    s.add_number(n);
                }
            }
            Accumulator::Avg { sum, count } => {
                if let Some(f) = value.as_f64() {
                    *sum += f;
                    *count += 1;
                }
            }
            Accumulator::Decimal(d) => {
                if let Value::Number(n) = value {
                    d.add(n);
                }
            }
            Accumulator::Min(m) => keep_if(m, value, std::cmp::Ordering::Less),
            Accumulator::Max(m) => keep_if(m, value, std::cmp::Ordering::Greater),
            Accumulator::Distinct(set) => {
                set.insert(value.to_string());
            }
            Accumulator::Exact(sum) => sum.add(value),
            Accumulator::Values(values) => values.add(value),
            Accumulator::Latest(slot) => {
                if slot.as_ref().is_none_or(|held| position >= held.0) {
                    *slot = Some(Box::new((position, value.clone())));
                }
            }
            Accumulator::Earliest(slot) => {
                if slot.as_ref().is_none_or(|held| position < held.0) {
                    *slot = Some(Box::new((position, value.clone())));
                }
            }
        }
    }

    /// Takes back one row [`Accumulator::add`] took (a table row's old
    /// version, as its change replaces it); only the forms
    /// [`AggregateKind::retracting`] makes, and `COUNT`, take values back —
    /// the others ignore it.
    pub fn retract(&mut self, value: &Value, count_all: bool) {
        if count_all {
            if let Accumulator::Count(n) = self {
                *n = n.saturating_sub(1);
            }
            return;
        }
        if value.is_null() {
            return;
        }
        match self {
            Accumulator::Count(n) => *n = n.saturating_sub(1),
            Accumulator::Decimal(d) => {
                if let Value::Number(n) = value {
                    d.retract(n);
                }
            }
            Accumulator::Exact(sum) => sum.retract(value),
            Accumulator::Values(values) => values.retract(value),
            _ => {}
        }
    }

    /// Merges another partial result of the same aggregate into this one.
    pub fn merge(&mut self, other: &Accumulator) {
        match (self, other) {
            (Accumulator::Count(a), Accumulator::Count(b)) => *a += b,
            (Accumulator::Sum(a), Accumulator::Sum(b)) => a.merge(b),
            (Accumulator::Avg { sum, count }, Accumulator::Avg { sum: s, count: c }) => {
                *sum += s;
                *count += c;
            }
            (Accumulator::Min(a), Accumulator::Min(Some(b))) => {
                keep_if(a, b, std::cmp::Ordering::Less)
            }
            (Accumulator::Max(a), Accumulator::Max(Some(b))) => {
                keep_if(a, b, std::cmp::Ordering::Greater)
            }
            (Accumulator::Distinct(a), Accumulator::Distinct(b)) => a.extend(b.iter().cloned()),
            (Accumulator::Decimal(a), Accumulator::Decimal(b)) => a.merge(b),
            (Accumulator::Latest(a), Accumulator::Latest(Some(b)))
                if a.as_ref().is_none_or(|held| b.0 >= held.0) =>
            {
                *a = Some(b.clone());
            }
            (Accumulator::Earliest(a), Accumulator::Earliest(Some(b)))
                if a.as_ref().is_none_or(|held| b.0 < held.0) =>
            {
                *a = Some(b.clone());
            }
            _ => {}
        }
    }

    /// The aggregate's value now.
    pub fn result(&self) -> Value {
        match self {
            Accumulator::Count(n) => (*n).into(),
            Accumulator::Sum(s) => s.result(),
            Accumulator::Avg { count: 0, .. } => Value::Null,
            Accumulator::Avg { sum, count } => float(sum / *count as f64),
            Accumulator::Min(v) | Accumulator::Max(v) => {
                v.as_deref().cloned().unwrap_or(Value::Null)
            }
            Accumulator::Distinct(set) => (set.len() as u64).into(),
            Accumulator::Decimal(d) => d.result(),
            Accumulator::Exact(sum) => sum.result(),
            Accumulator::Values(values) => values.result(),
            Accumulator::Latest(slot) | Accumulator::Earliest(slot) => {
                slot.as_ref().map_or(Value::Null, |held| held.1.clone())
            }
        }
    }
}

/// Tags of the binary accumulator encoding ([`Accumulator::encode`]).
mod tag {
    pub const COUNT: u8 = 1;
    pub const SUM: u8 = 2;
    pub const AVG: u8 = 3;
    /// Any other accumulator, as JSON (they hold JSON values anyway).
    pub const JSON: u8 = 4;
}

fn take<const N: usize>(bytes: &mut &[u8]) -> Option<[u8; N]> {
    let (head, rest) = bytes.split_first_chunk::<N>()?;
    *bytes = rest;
    Some(*head)
}

impl Accumulator {
    /// Appends the binary form: a tag byte, then for COUNT a `u64`, for SUM
    /// a flags byte (bit 0 seen, bit 1 float) and an `i64` or `f64`, for AVG
    /// an `f64` sum and a `u64` count (all little-endian); any other
    /// accumulator as a `u32` length and its JSON.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Accumulator::Count(n) => {
                out.push(tag::COUNT);
                out.extend_from_slice(&n.to_le_bytes());
            }
            Accumulator::Sum(s) => {
                out.push(tag::SUM);
                out.push(u8::from(s.seen) | (u8::from(s.is_float) << 1));
                if s.is_float {
                    out.extend_from_slice(&s.float.to_le_bytes());
                } else {
                    out.extend_from_slice(&s.int.to_le_bytes());
                }
            }
            Accumulator::Avg { sum, count } => {
                out.push(tag::AVG);
                out.extend_from_slice(&sum.to_le_bytes());
                out.extend_from_slice(&count.to_le_bytes());
            }
            other => {
                out.push(tag::JSON);
                let json = serde_json::to_vec(other).expect("accumulators serialize");
                out.extend_from_slice(&(json.len() as u32).to_le_bytes());
                out.extend_from_slice(&json);
            }
        }
    }

    /// Reads one [`Accumulator::encode`]d accumulator from the front of
    /// `bytes`, advancing it; `None` if the bytes are not one.
    pub fn decode(bytes: &mut &[u8]) -> Option<Accumulator> {
        let [t] = take::<1>(bytes)?;
        Some(match t {
            tag::COUNT => Accumulator::Count(u64::from_le_bytes(take(bytes)?)),
            tag::SUM => {
                let [flags] = take::<1>(bytes)?;
                let raw: [u8; 8] = take(bytes)?;
                let is_float = flags & 2 != 0;
                Accumulator::Sum(Sum {
                    int: if is_float { 0 } else { i64::from_le_bytes(raw) },
                    float: if is_float {
                        f64::from_le_bytes(raw)
                    } else {
                        0.0
                    },
                    is_float,
                    seen: flags & 1 != 0,
                })
            }
            tag::AVG => Accumulator::Avg {
                sum: f64::from_le_bytes(take(bytes)?),
                count: u64::from_le_bytes(take(bytes)?),
            },
            tag::JSON => {
                let len = u32::from_le_bytes(take(bytes)?) as usize;
                if bytes.len() < len {
                    return None;
                }
                let (json, rest) = bytes.split_at(len);
                *bytes = rest;
                serde_json::from_slice(json).ok()?
            }
            _ => return None,
        })
    }
}

/// Replaces `slot` with `candidate` when it orders `wanted` against it.
fn keep_if(slot: &mut Extreme, candidate: &Value, wanted: std::cmp::Ordering) {
    match slot {
        None => *slot = Some(Box::new(candidate.clone())),
        Some(current) => {
            if compare(candidate, current) == Some(wanted) {
                **current = candidate.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimal_text_is_read_exactly_with_half_up_rounding() {
        assert_eq!(decimal_units("10.5", 2), Some(1050));
        assert_eq!(decimal_units("-0.125", 2), Some(-13));
        assert_eq!(decimal_units("0.124", 2), Some(12));
        assert_eq!(decimal_units("7", 2), Some(700));
        assert_eq!(decimal_units("1.5e2", 2), Some(15000));
        assert_eq!(decimal_units("25e-3", 2), Some(3));
        assert_eq!(decimal_units("4e-9", 2), Some(0));
        assert_eq!(decimal_units("0.0049", 2), Some(0));
        assert_eq!(decimal_units("abc", 2), None);
        assert_eq!(decimal_units("1e400", 2), None);
    }

    #[test]
    fn decimal_sums_and_averages_have_no_binary_residue() {
        // 0.1 + 0.2 as doubles is 0.30000000000000004; the seed's amounts
        // summed as doubles gave 585.1600000000001.
        let mut sum = AggregateKind::Sum.for_decimal(2).accumulator();
        let mut avg = AggregateKind::Avg.for_decimal(2).accumulator();
        let amounts = [json!(0.1), json!(0.2), json!(100.33), json!(484.53)];
        for (i, a) in amounts.iter().enumerate() {
            sum.add(a, false, (i as u64, 0));
            avg.add(a, false, (i as u64, 0));
        }
        assert_eq!(sum.result(), json!(585.16));
        let mut residue = AggregateKind::Sum.accumulator();
        residue.add(&json!(0.1), false, (0, 0));
        residue.add(&json!(0.2), false, (1, 0));
        assert_eq!(
            residue.result(),
            json!(0.30000000000000004),
            "what this avoids"
        );
        assert_eq!(avg.result(), json!(146.29));
        // Merging (hopping slices, sessions) stays exact; encoding round-trips.
        let mut other = AggregateKind::Sum.for_decimal(2).accumulator();
        other.add(&json!(0.01), false, (9, 0));
        sum.merge(&other);
        assert_eq!(sum.result(), json!(585.17));
        let mut bytes = Vec::new();
        sum.encode(&mut bytes);
        assert_eq!(Accumulator::decode(&mut bytes.as_slice()), Some(sum));
        // AVG keeps four more places, rounded half up.
        let mut third = AggregateKind::Avg.for_decimal(2).accumulator();
        for (i, v) in [json!(1), json!(1), json!(2.01)].iter().enumerate() {
            third.add(v, false, (i as u64, 0));
        }
        assert_eq!(third.result(), json!(1.336667));
        // Beyond 15 significant digits the exact text is a string.
        let mut big = AggregateKind::Sum.for_decimal(2).accumulator();
        big.add(&json!(9999999999999.99), false, (0, 0));
        big.add(&json!(9999999999999.99), false, (1, 0));
        assert_eq!(big.result(), json!("19999999999999.98"));
        // A whole result is an integer.
        let mut whole = AggregateKind::Sum.for_decimal(2).accumulator();
        whole.add(&json!(17.5), false, (0, 0));
        whole.add(&json!(0.5), false, (1, 0));
        assert_eq!(whole.result(), json!(18));
        assert_eq!(
            AggregateKind::Sum.for_decimal(2).accumulator().result(),
            Value::Null
        );
    }

    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// [`decimal_units`] the plain way: all digits in one string, leading
    /// zeros trimmed, cut where the scale ends.
    fn units_by_cutting_text(text: &str, scale: u32) -> Option<i128> {
        let (mantissa, exponent) = match text.find(['e', 'E']) {
            Some(i) => (&text[..i], text[i + 1..].parse::<i32>().ok()?),
            None => (text, 0),
        };
        let (negative, digits) = match mantissa.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, mantissa),
        };
        let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
        let all: String = [int_part, frac_part].concat();
        let shift = i64::from(exponent) - frac_part.len() as i64 + i64::from(scale);
        let all = all.trim_start_matches('0');
        let (kept, dropped) = if shift >= 0 {
            (all, "")
        } else {
            all.split_at(all.len().saturating_sub(shift.unsigned_abs() as usize))
        };
        let mut units: i128 = 0;
        for b in kept.bytes() {
            units = units.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        }
        if shift > 0 {
            units = units.checked_mul(10_i128.checked_pow(u32::try_from(shift).ok()?)?)?;
        }
        let dropped_all = shift < 0 && shift.unsigned_abs() as usize > all.len();
        if !dropped_all && dropped.as_bytes().first().is_some_and(|d| *d >= b'5') {
            units = units.checked_add(1)?;
        }
        Some(if negative { -units } else { units })
    }

    #[test]
    fn an_integer_beyond_i64_sums_as_its_text() {
        let n = serde_json::Number::from(u64::MAX);
        let mut sum = DecimalSum {
            units: 0,
            count: 0,
            scale: 2,
            average: false,
        };
        sum.add(&n);
        assert_eq!((sum.units, sum.count), (i128::from(u64::MAX) * 100, 1));
    }

    proptest! {
        #[test]
        fn decimal_units_agree_with_cutting_the_text(
            negative in any::<bool>(),
            int_part in "0{0,3}[0-9]{0,18}",
            frac_part in proptest::option::of("[0-9]{0,20}"),
            exponent in proptest::option::of(-40i32..40),
            scale in 0u32..=MAX_DECIMAL_SCALE,
        ) {
            prop_assume!(!int_part.is_empty() || frac_part.as_ref().is_some_and(|f| !f.is_empty()));
            let mut text = format!("{}{int_part}", if negative { "-" } else { "" });
            if let Some(f) = &frac_part {
                text = format!("{text}.{f}");
            }
            if let Some(e) = exponent {
                text = format!("{text}e{e}");
            }
            prop_assert_eq!(decimal_units(&text, scale), units_by_cutting_text(&text, scale), "{}", text);
        }

        #[test]
        fn a_decimal_read_as_a_double_takes_its_units_without_its_text(
            units in -(1i64 << 49)..(1i64 << 49),
            scale in 0u32..=15,
            other_scale in 0u32..=MAX_DECIMAL_SCALE,
        ) {
            // The double a JSON number of `scale` places reads as.
            let text = decimal_text(i128::from(units), scale);
            let f: f64 = text.parse().unwrap();
            prop_assert_eq!(float_units(f, scale), Some(i128::from(units)), "{}", text);
            // At any scale, an answer is the one its shortest text gives.
            let shortest = decimal_units(zmij::Buffer::new().format_finite(f), other_scale);
            if let Some(fast) = float_units(f, other_scale) {
                prop_assert_eq!(Some(fast), shortest, "{} at scale {}", text, other_scale);
            }
            // Halfway between two decimals of `scale` places (as 1.005 is,
            // which reads as 1.00499999999999989..., and whose shortest
            // text rounds up), only the text decides.
            let halfway = decimal_text(i128::from(units) * 10 + 5, scale + 1);
            let f: f64 = halfway.parse().unwrap();
            let shortest = decimal_units(zmij::Buffer::new().format_finite(f), scale);
            if let Some(fast) = float_units(f, scale) {
                prop_assert_eq!(Some(fast), shortest, "{} at scale {}", halfway, scale);
            }
        }

        #[test]
        fn a_double_takes_the_units_of_its_shortest_text(
            x in proptest::num::f64::ANY,
            scale in 0u32..=MAX_DECIMAL_SCALE,
        ) {
            if let Some(fast) = float_units(x, scale) {
                let shortest = decimal_units(zmij::Buffer::new().format_finite(x), scale);
                prop_assert_eq!(Some(fast), shortest, "{} at scale {}", x, scale);
            }
        }

        #[test]
        fn a_double_sums_as_its_shortest_text(x in proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL, scale in 0u32..=4) {
            let n = serde_json::Number::from_f64(x).unwrap();
            let mut sum = DecimalSum { units: 0, count: 0, scale, average: false };
            sum.add(&n);
            let expected = units_by_cutting_text(&n.to_string(), scale);
            prop_assert_eq!(sum.count, u64::from(expected.is_some()));
            prop_assert_eq!(sum.units, expected.unwrap_or(0));
        }
    }

    fn run(kind: AggregateKind, values: &[Value]) -> Value {
        let mut acc = kind.accumulator();
        for (i, v) in values.iter().enumerate() {
            acc.add(v, kind == AggregateKind::CountAll, (i as u64, 0));
        }
        acc.result()
    }

    #[test]
    fn nulls_are_ignored_except_by_count_star() {
        let values = [json!(1), Value::Null, json!(3)];
        assert_eq!(run(AggregateKind::CountAll, &values), json!(3));
        assert_eq!(run(AggregateKind::Count, &values), json!(2));
        assert_eq!(run(AggregateKind::Sum, &values), json!(4));
        assert_eq!(run(AggregateKind::Avg, &values), json!(2.0));
        assert_eq!(run(AggregateKind::Min, &values), json!(1));
        assert_eq!(run(AggregateKind::Max, &values), json!(3));
    }

    #[test]
    fn empty_inputs_give_null_or_zero() {
        assert_eq!(run(AggregateKind::Sum, &[]), Value::Null);
        assert_eq!(run(AggregateKind::Avg, &[Value::Null]), Value::Null);
        assert_eq!(run(AggregateKind::Count, &[]), json!(0));
        assert_eq!(run(AggregateKind::Max, &[]), Value::Null);
    }

    #[test]
    fn integer_sums_stay_exact_until_a_float_and_saturate_on_overflow() {
        assert_eq!(
            run(AggregateKind::Sum, &[json!(i64::MAX - 1), json!(1)]),
            json!(i64::MAX)
        );
        assert_eq!(run(AggregateKind::Sum, &[json!(1), json!(2.5)]), json!(3.5));
        let overflow = run(AggregateKind::Sum, &[json!(i64::MAX), json!(1)]);
        assert_eq!(
            overflow,
            json!(i64::MAX),
            "an integer sum never becomes a double"
        );
        let under = run(AggregateKind::Sum, &[json!(i64::MIN), json!(-5), json!(3)]);
        assert_eq!(under, json!(i64::MIN + 3));
        // Merged partial sums (hopping slices, sessions) saturate too.
        let mut a = AggregateKind::Sum.accumulator();
        a.add(&json!(i64::MAX), false, (0, 0));
        let mut b = AggregateKind::Sum.accumulator();
        b.add(&json!(10), false, (1, 0));
        a.merge(&b);
        assert_eq!(a.result(), json!(i64::MAX));
    }

    #[test]
    fn distinct_latest_and_earliest() {
        let values = [json!("a"), json!("b"), json!("a"), json!(1)];
        assert_eq!(run(AggregateKind::CountDistinct, &values), json!(3));
        assert_eq!(run(AggregateKind::Latest, &values), json!(1));
        assert_eq!(run(AggregateKind::Earliest, &values), json!("a"));
    }

    #[test]
    fn min_max_compare_strings_and_mixed_numbers() {
        assert_eq!(
            run(AggregateKind::Min, &[json!("b"), json!("a")]),
            json!("a")
        );
        assert_eq!(
            run(AggregateKind::Max, &[json!(1), json!(2.5), json!(2)]),
            json!(2.5)
        );
    }

    fn arb_accumulator() -> impl Strategy<Value = Accumulator> {
        let value = prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[a-z]{0,5}".prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ];
        prop_oneof![
            any::<u64>().prop_map(Accumulator::Count),
            (any::<i64>(), -1e12f64..1e12, any::<bool>(), any::<bool>()).prop_map(
                |(int, float, is_float, seen)| Accumulator::Sum(Sum {
                    int: if is_float { 0 } else { int },
                    float: if is_float { float } else { 0.0 },
                    is_float,
                    seen,
                })
            ),
            (-1e12f64..1e12, any::<u64>()).prop_map(|(sum, count)| Accumulator::Avg { sum, count }),
            proptest::option::of(value.clone()).prop_map(|v| Accumulator::Min(v.map(Box::new))),
            proptest::option::of(value.clone()).prop_map(|v| Accumulator::Max(v.map(Box::new))),
            proptest::collection::btree_set("[a-z]{0,3}", 0..4).prop_map(Accumulator::Distinct),
            proptest::option::of((any::<(u64, u32)>(), value))
                .prop_map(|v| Accumulator::Latest(v.map(Box::new))),
        ]
    }

    proptest! {
        /// The binary form reads back as the same accumulators, and a
        /// truncated encoding is an error, never a wrong value.
        #[test]
        fn binary_encoding_roundtrips(accs in proptest::collection::vec(arb_accumulator(), 0..5)) {
            let mut bytes = Vec::new();
            for a in &accs {
                a.encode(&mut bytes);
            }
            let mut rest = bytes.as_slice();
            let mut back = Vec::new();
            while !rest.is_empty() {
                back.push(Accumulator::decode(&mut rest).expect("decodes"));
            }
            prop_assert_eq!(&back, &accs);
            if !bytes.is_empty() {
                let mut cut = &bytes[..bytes.len() - 1];
                let mut failed = false;
                while !cut.is_empty() && !failed {
                    failed = Accumulator::decode(&mut cut).is_none();
                }
                prop_assert!(failed, "a truncated last accumulator must not decode");
            }
        }

        /// Splitting the input anywhere and merging the halves gives the
        /// same result as one pass: what hopping slices and session merges
        /// rely on.
        #[test]
        fn merge_of_parts_equals_one_pass(values in proptest::collection::vec(proptest::option::of(-1000i64..1000), 0..30), cut in 0usize..30) {
            let values: Vec<Value> = values.into_iter().map(|v| v.map_or(Value::Null, Value::from)).collect();
            let cut = cut.min(values.len());
            for kind in [AggregateKind::CountAll, AggregateKind::Count, AggregateKind::Sum, AggregateKind::Avg,
                         AggregateKind::Min, AggregateKind::Max, AggregateKind::CountDistinct, AggregateKind::Latest, AggregateKind::Earliest] {
                let star = kind == AggregateKind::CountAll;
                let mut whole = kind.accumulator();
                let (mut left, mut right) = (kind.accumulator(), kind.accumulator());
                for (i, v) in values.iter().enumerate() {
                    whole.add(v, star, (i as u64, 0));
                    if i < cut { left.add(v, star, (i as u64, 0)) } else { right.add(v, star, (i as u64, 0)) }
                }
                // Merge in both orders.
                let mut lr = left.clone();
                lr.merge(&right);
                let mut rl = right.clone();
                rl.merge(&left);
                let expect = whole.result();
                match (&expect, lr.result(), rl.result()) {
                    (Value::Number(e), Value::Number(a), Value::Number(b)) => {
                        let (e, a, b) = (e.as_f64().unwrap(), a.as_f64().unwrap(), b.as_f64().unwrap());
                        prop_assert!((e - a).abs() < 1e-6 && (e - b).abs() < 1e-6, "{kind:?}");
                    }
                    (e, a, b) => {
                        prop_assert_eq!(e, &a, "{:?}", kind);
                        prop_assert_eq!(e, &b, "{:?}", kind);
                    }
                }
            }
        }
    }
}
