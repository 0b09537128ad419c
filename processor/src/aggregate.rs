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
            Accumulator::Min(m) => keep_if(m, value, std::cmp::Ordering::Less),
            Accumulator::Max(m) => keep_if(m, value, std::cmp::Ordering::Greater),
            Accumulator::Distinct(set) => {
                set.insert(value.to_string());
            }
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
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

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
