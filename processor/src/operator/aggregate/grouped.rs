//! An event as an aggregate applies it ([`GroupedEvent`]): what the
//! aggregate reads of it, computed from the event once.
//!
//! With several workers a source worker computes it right after decoding,
//! on the thread that decoded the event, and a key shard receives only it:
//! a few words and the group's key instead of the whole event (its decoded
//! fields, their strings and the record's bytes), so what crosses threads
//! per event is small and the event's memory is freed where it was taken.

use std::borrow::Cow;

use serde_json::Value;
use smallvec::SmallVec;

use super::{view_key, NULL};
use crate::accumulators::{Accumulator, AggregateKind};
use crate::event::Event;
use crate::expr::{Expr, Row};
use crate::plan::AggregateSpec;
use crate::state::slot::GroupForm;

/// What an aggregate reads of one event: its group (view key and form),
/// its event time, the input of each aggregate and its place in the log.
/// Borrows from the event where it can ([`GroupedEvent::of`]);
/// [`GroupedEvent::into_owned`] makes one that outlives it.
#[derive(Debug, Clone)]
pub(crate) struct GroupedEvent<'e> {
    /// The group's view key ([`view_key`]): a single string group value
    /// itself, anything else its JSON text.
    key: ViewKey<'e>,
    /// The shape of the group's values.
    pub(crate) form: GroupForm,
    /// Event time (ms).
    pub(crate) event_time: i64,
    /// The input of each of the spec's aggregates, in order (`Null` for
    /// `COUNT(*)`, which reads none); inline for up to three.
    inputs: SmallVec<[Cow<'e, Value>; 3]>,
    /// The record's (offset, partition), for accumulators that keep the
    /// latest or earliest value.
    position: (u64, u32),
}

/// A view key's bytes: borrowed from the event, or owned — inline up to 24
/// bytes (most keys), so an owned grouped event needs no allocation for it.
#[derive(Debug, Clone)]
enum ViewKey<'e> {
    Borrowed(&'e str),
    Owned(SmallVec<[u8; 24]>),
}

impl ViewKey<'_> {
    fn owned(key: String) -> ViewKey<'static> {
        ViewKey::Owned(SmallVec::from_vec(key.into_bytes()))
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            ViewKey::Borrowed(s) => s.as_bytes(),
            ViewKey::Owned(bytes) => bytes,
        }
    }
}

impl<'e> GroupedEvent<'e> {
    /// `event` as `spec`'s aggregate reads it: a group by one field and an
    /// input that is a field borrow the event's values; expressions are
    /// evaluated here.
    pub(crate) fn of(spec: &AggregateSpec, event: &'e Event) -> GroupedEvent<'e> {
        let (key, form) = match &spec.group_by[..] {
            [Expr::Field(path)] => match event.field(path).unwrap_or(&NULL) {
                Value::String(s) => (ViewKey::Borrowed(s.as_str()), GroupForm::String),
                other => {
                    let values = std::slice::from_ref(other);
                    (ViewKey::owned(view_key(values)), GroupForm::of(values))
                }
            },
            exprs => {
                let mut values: Vec<Value> = exprs.iter().map(|e| e.eval(event)).collect();
                let form = GroupForm::of(&values);
                let key = match &mut values[..] {
                    // The view key of one string value is that value.
                    [Value::String(s)] => std::mem::take(s),
                    other => view_key(other),
                };
                (ViewKey::owned(key), form)
            }
        };
        let inputs = spec
            .aggregates
            .iter()
            .map(|a| match &a.input {
                None => Cow::Borrowed(&NULL),
                Some(Expr::Field(path)) => Cow::Borrowed(event.field(path).unwrap_or(&NULL)),
                Some(e) => Cow::Owned(e.eval(event)),
            })
            .collect();
        GroupedEvent {
            key,
            form,
            event_time: event.event_time,
            inputs,
            position: (event.offset, event.partition),
        }
    }

    /// The same, owning what it borrowed (the key, inline when short, and
    /// for inputs that are fields, their values: usually numbers).
    pub(crate) fn into_owned(self) -> GroupedEvent<'static> {
        GroupedEvent {
            key: match self.key {
                ViewKey::Borrowed(s) => ViewKey::Owned(SmallVec::from_slice(s.as_bytes())),
                ViewKey::Owned(bytes) => ViewKey::Owned(bytes),
            },
            form: self.form,
            event_time: self.event_time,
            inputs: self
                .inputs
                .into_iter()
                .map(|input| Cow::Owned(input.into_owned()))
                .collect(),
            position: self.position,
        }
    }

    /// The view key's bytes.
    pub(crate) fn key_bytes(&self) -> &[u8] {
        self.key.as_bytes()
    }

    /// Adds the event to `accs`, the accumulators of `spec` (the spec it
    /// was grouped with).
    pub(crate) fn add_to(&self, accs: &mut [Accumulator], spec: &AggregateSpec) {
        for ((acc, aggregate), input) in accs.iter_mut().zip(&spec.aggregates).zip(&self.inputs) {
            acc.add(
                input,
                aggregate.kind == AggregateKind::CountAll,
                self.position,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::AggregateColumn;
    use serde_json::json;

    fn event(value: Value) -> Event {
        Event {
            partition: 3,
            offset: 41,
            record_timestamp: 7,
            raw_key: Some(bytes::Bytes::from_static(b"k1")),
            lossy_key: None,
            raw_value: bytes::Bytes::new(),
            value,
            fields: None,
            event_time: 1_000,
            joined: Vec::new(),
            joined_key: None,
        }
    }

    /// A running aggregate by `group_by` of `COUNT(*)` and `SUM(amount)`.
    fn spec(group_by: Vec<Expr>) -> AggregateSpec {
        let column = |name: &str, kind, input| AggregateColumn {
            name: name.into(),
            kind,
            input,
        };
        AggregateSpec {
            group_by,
            window: None,
            aggregates: vec![
                column("n", AggregateKind::CountAll, None),
                column("s", AggregateKind::Sum, Some(Expr::field("amount"))),
            ],
            columns: Vec::new(),
            having: None,
        }
    }

    #[test]
    fn a_string_group_is_its_key_and_fields_are_borrowed() {
        let e = event(json!({"user": "u1", "amount": 12.5}));
        let spec = spec(vec![Expr::field("user")]);
        let g = GroupedEvent::of(&spec, &e);
        assert!(matches!(g.key, ViewKey::Borrowed("u1")));
        assert_eq!(g.form, GroupForm::String);
        assert_eq!(g.inputs.len(), 2);
        assert!(matches!(g.inputs[0], Cow::Borrowed(Value::Null)));
        assert!(matches!(g.inputs[1], Cow::Borrowed(v) if *v == json!(12.5)));
        assert_eq!((g.event_time, g.position), (1_000, (41, 3)));
        // Owned, it is the same event (compared as text: the two differ in
        // lifetime).
        let owned = g.clone().into_owned();
        assert!(matches!(&owned.key, ViewKey::Owned(k) if !k.spilled() && k[..] == *b"u1"));
        assert_eq!(owned.key_bytes(), g.key_bytes());
        assert_eq!(format!("{:?}", owned.inputs), format!("{:?}", g.inputs));
    }

    #[test]
    fn the_key_is_the_view_key_of_the_group_values() {
        let e = event(json!({"n": 42, "a": "x", "b": 2}));
        let cases = [
            (vec![Expr::field("n")], json!([42]), GroupForm::Json),
            (vec![Expr::field("nope")], json!([null]), GroupForm::Json),
            (
                vec![Expr::field("a"), Expr::field("b")],
                json!(["x", 2]),
                GroupForm::Array,
            ),
            // An expression giving one string: keyed by the string.
            (vec![Expr::Key], json!(["k1"]), GroupForm::String),
        ];
        for (group_by, values, form) in cases {
            let spec = spec(group_by);
            let g = GroupedEvent::of(&spec, &e);
            let values = values.as_array().unwrap();
            assert_eq!((g.key_bytes(), g.form), (view_key(values).as_bytes(), form));
            assert_eq!(GroupForm::of(values), form);
        }
    }

    #[test]
    fn adding_reads_each_aggregates_input() {
        let e = event(json!({"user": "u1", "amount": 12.5}));
        let spec = spec(vec![Expr::field("user")]);
        let mut accs = super::super::fresh_accs(&spec);
        let g = GroupedEvent::of(&spec, &e).into_owned();
        g.add_to(&mut accs, &spec);
        g.add_to(&mut accs, &spec);
        let mut expected = super::super::fresh_accs(&spec);
        for _ in 0..2 {
            expected[0].add(&Value::Null, true, (41, 3));
            expected[1].add(&json!(12.5), false, (41, 3));
        }
        assert_eq!(accs, expected);
    }
}
