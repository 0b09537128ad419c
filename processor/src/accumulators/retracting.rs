//! Accumulators that take values back: the aggregates over a table's
//! changes, where each change of a row retracts its old version and adds
//! its new one (as Kafka Streams' `KTable.groupBy(..).aggregate` does with
//! its adder and subtractor).
//!
//! Each one's result depends only on the values it holds now, never on the
//! order they came and went in, so a replay that sees a row's versions in
//! other batches ends with the same rows:
//! - [`ExactSum`] (`SUM`, `AVG`) sums integers of `10^-9` units, so taking
//!   a value back leaves no floating-point residue;
//! - [`Multiset`] (`MIN`, `MAX`, `COUNT_DISTINCT`) keeps every distinct
//!   value with its count, so the extreme is known again when it leaves.
//!   Its size is the group's distinct values.

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{compare, decimal_value, number_units};

/// Decimal places [`ExactSum`] keeps.
pub const EXACT_SCALE: u32 = 9;

/// `SUM` or `AVG` over a table's changes: the values' sum in integer
/// units of `10^-9` (each value rounded half away from zero to 9 places).
/// The result is an integer while every value held is one, else a double.
/// A value beyond what 9 places in 128 bits hold (about `10^29`) makes the
/// result `NULL` while it is held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactSum {
    units: i128,
    /// Values held (non-null numbers).
    count: u64,
    /// Values held that are not integers.
    fractional: u64,
    /// Values held that did not fit.
    unfit: u64,
    /// `AVG` (else `SUM`).
    average: bool,
}

impl ExactSum {
    /// An empty sum (`average`: an `AVG`).
    pub fn new(average: bool) -> ExactSum {
        ExactSum {
            units: 0,
            count: 0,
            fractional: 0,
            unfit: 0,
            average,
        }
    }

    fn change(&mut self, value: &Value, sign: i8) {
        let Value::Number(n) = value else {
            return;
        };
        let step = |x: u64| {
            if sign > 0 {
                x + 1
            } else {
                x.saturating_sub(1)
            }
        };
        self.count = step(self.count);
        if n.as_i64().is_none() && n.as_u64().is_none() {
            self.fractional = step(self.fractional);
        }
        match number_units(n, EXACT_SCALE) {
            Some(units) if sign > 0 => self.units = self.units.saturating_add(units),
            Some(units) => self.units = self.units.saturating_sub(units),
            None => self.unfit = step(self.unfit),
        }
    }

    /// Takes a value (non-numbers are ignored).
    pub fn add(&mut self, value: &Value) {
        self.change(value, 1);
    }

    /// Takes back a value [`ExactSum::add`] took.
    pub fn retract(&mut self, value: &Value) {
        self.change(value, -1);
    }

    /// The sum or average now.
    pub fn result(&self) -> Value {
        if self.count == 0 || self.unfit > 0 {
            return Value::Null;
        }
        let unit = 10_i128.pow(EXACT_SCALE);
        if self.average {
            // One rounding for a sum of whole units (as a double's sum and
            // division would give), else the units' division.
            let avg = match self.units % unit {
                0 => (self.units / unit) as f64 / self.count as f64,
                _ => self.units as f64 / (self.count as f64 * unit as f64),
            };
            return serde_json::Number::from_f64(avg).map_or(Value::Null, Value::Number);
        }
        if self.fractional == 0 {
            // Every value an integer: so is the sum.
            let whole = self.units / unit;
            return match i64::try_from(whole) {
                Ok(i) => i.into(),
                Err(_) => decimal_value(self.units, EXACT_SCALE),
            };
        }
        let f = (self.units / unit) as f64 + (self.units % unit) as f64 / unit as f64;
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// What a [`Multiset`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduce {
    /// The smallest value.
    Min,
    /// The largest value.
    Max,
    /// How many distinct values.
    Distinct,
}

/// `MIN`, `MAX` or `COUNT_DISTINCT` over a table's changes: each distinct
/// non-null value held, in `held_order`, with how many times.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Multiset {
    reduce: Reduce,
    values: Vec<(Value, u64)>,
}

/// A total order of JSON scalars for [`Multiset`]: booleans, then numbers
/// (numerically), then strings, then anything else by its JSON text; within
/// a kind as [`compare`] orders.
pub fn total_order(a: &Value, b: &Value) -> Ordering {
    let rank = |v: &Value| match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Number(_) => 2,
        Value::String(_) => 3,
        _ => 4,
    };
    rank(a)
        .cmp(&rank(b))
        .then_with(|| compare(a, b).unwrap_or_else(|| a.to_string().cmp(&b.to_string())))
}

/// The order a [`Multiset`] holds its values in: [`total_order`], then
/// values it finds equal (`17` and `17.0`) by their JSON text. So they are
/// held apart, as `COUNT_DISTINCT` over events counts them, and which of
/// them `MIN` or `MAX` answers depends on the values held, never on the
/// order they came in.
fn held_order(a: &Value, b: &Value) -> Ordering {
    total_order(a, b).then_with(|| a.to_string().cmp(&b.to_string()))
}

impl Multiset {
    /// An empty multiset answering `reduce`.
    pub fn new(reduce: Reduce) -> Multiset {
        Multiset {
            reduce,
            values: Vec::new(),
        }
    }

    /// Takes a value.
    pub fn add(&mut self, value: &Value) {
        match self
            .values
            .binary_search_by(|(held, _)| held_order(held, value))
        {
            Ok(i) => self.values[i].1 += 1,
            Err(i) => self.values.insert(i, (value.clone(), 1)),
        }
    }

    /// Takes back a value [`Multiset::add`] took.
    pub fn retract(&mut self, value: &Value) {
        if let Ok(i) = self
            .values
            .binary_search_by(|(held, _)| held_order(held, value))
        {
            self.values[i].1 -= 1;
            if self.values[i].1 == 0 {
                self.values.remove(i);
            }
        }
    }

    /// The minimum, maximum or number of distinct values now.
    pub fn result(&self) -> Value {
        match self.reduce {
            Reduce::Min => self.values.first().map_or(Value::Null, |(v, _)| v.clone()),
            Reduce::Max => self.values.last().map_or(Value::Null, |(v, _)| v.clone()),
            Reduce::Distinct => (self.values.len() as u64).into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Accumulator, AggregateKind};
    use proptest::prelude::*;
    use serde_json::{json, Value};

    const KINDS: [AggregateKind; 7] = [
        AggregateKind::CountAll,
        AggregateKind::Count,
        AggregateKind::Sum,
        AggregateKind::Avg,
        AggregateKind::Min,
        AggregateKind::Max,
        AggregateKind::CountDistinct,
    ];

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            (-50i64..50).prop_map(Value::from),
            (-500i64..500).prop_map(|c| json!(c as f64 / 10.0)),
            "[a-d]{1,2}".prop_map(Value::from),
        ]
    }

    fn result(kind: AggregateKind, values: &[&Value], retracted: &[&Value]) -> Value {
        let mut acc = kind.retracting().expect("retracting");
        for v in values {
            acc.add(v, kind == AggregateKind::CountAll, (0, 0));
        }
        for v in retracted {
            acc.retract(v, kind == AggregateKind::CountAll);
        }
        // What is stored is what is read back.
        let mut bytes = Vec::new();
        acc.encode(&mut bytes);
        Accumulator::decode(&mut bytes.as_slice())
            .expect("decodes")
            .result()
    }

    proptest! {
        /// Adding values and taking some back answers exactly what adding
        /// only the rest does, in any order.
        #[test]
        fn taking_values_back_equals_never_adding_them(
            values in proptest::collection::vec(value(), 0..40),
            gone in proptest::collection::vec(any::<bool>(), 40),
        ) {
            for kind in KINDS {
                let kept: Vec<&Value> = values.iter().zip(&gone).filter(|(_, g)| !**g).map(|(v, _)| v).collect();
                let taken: Vec<&Value> = values.iter().zip(&gone).filter(|(_, g)| **g).map(|(v, _)| v).collect();
                let all: Vec<&Value> = values.iter().collect();
                prop_assert_eq!(result(kind, &all, &taken), result(kind, &kept, &[]), "{:?}", kind);
            }
        }
    }

    /// `17` and `17.0` are held apart: taking back the one that came first
    /// leaves the other, as adding only it would (a case proptest found).
    #[test]
    fn equal_numbers_written_apart_are_held_apart() {
        let (int, float) = (json!(-17), json!(-17.0));
        for kind in [AggregateKind::Min, AggregateKind::Max] {
            assert_eq!(result(kind, &[&int, &float], &[&int]), float);
            assert_eq!(result(kind, &[&float, &int], &[&float]), int);
        }
        assert_eq!(
            result(AggregateKind::CountDistinct, &[&int, &float], &[]),
            json!(2)
        );
    }

    #[test]
    fn sums_are_integers_while_every_value_is_and_averages_are_exact() {
        let none: [&Value; 0] = [];
        assert_eq!(
            result(AggregateKind::Sum, &[&json!(2), &json!(3)], &none),
            json!(5)
        );
        assert_eq!(
            result(AggregateKind::Sum, &[&json!(0.1), &json!(0.2)], &none),
            json!(0.3)
        );
        assert_eq!(
            result(
                AggregateKind::Sum,
                &[&json!(0.1), &json!(2)],
                &[&json!(0.1)]
            ),
            json!(2)
        );
        assert_eq!(
            result(AggregateKind::Avg, &[&json!(1), &json!(2)], &none),
            json!(1.5)
        );
        assert_eq!(
            result(AggregateKind::Sum, &[&json!(1)], &[&json!(1)]),
            Value::Null
        );
        assert_eq!(
            result(AggregateKind::Max, &[&json!(1), &json!(9)], &[&json!(9)]),
            json!(1)
        );
        assert_eq!(
            result(AggregateKind::Sum, &[&json!(1e40)], &none),
            Value::Null
        );
    }
}
