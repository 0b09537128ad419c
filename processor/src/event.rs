//! An input record decoded for processing: its JSON value, key, times, and
//! (after a join) the matched table row. Implements [`Row`] so expressions
//! can read it.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::expr::{get_path, Row};

#[doc(hidden)]
pub mod fuzzing;
mod scan;

pub(crate) use scan::{locate_fields, NameSet, Raw, Shape};

/// One event flowing through a processor.
#[derive(Debug, Clone)]
pub struct Event {
    /// Input partition.
    pub partition: u32,
    /// Input offset.
    pub offset: u64,
    /// The record timestamp (ms).
    pub record_timestamp: i64,
    /// The record key bytes.
    pub raw_key: Option<Bytes>,
    /// The key as text when its bytes are not UTF-8 (lossy); otherwise
    /// [`Event::key_text`] borrows the bytes.
    pub lossy_key: Option<String>,
    /// The raw value bytes (kept for side outputs).
    pub raw_value: Bytes,
    /// The decoded value, when decoded whole (else `Null`).
    pub value: Value,
    /// When decoded by fields: the names read and their values, in order
    /// (`Null` for a missing field).
    pub fields: Option<(Arc<[String]>, Vec<Value>)>,
    /// Event time (ms).
    pub event_time: i64,
    /// The joined table rows (or joined stream event's value), each under
    /// its alias, in join order (`Null`: a left join found none).
    pub joined: Vec<(String, Value)>,
    /// The record key of the joined stream's event as a JSON string, read
    /// as the column [`JOINED_KEY_COLUMN`] (a stream-stream join).
    pub joined_key: Option<Value>,
}

/// The column name an expression reads a joined stream's record key by
/// ([`crate::expr::Expr::Column`]); `#` starts no output column's name.
pub const JOINED_KEY_COLUMN: &str = "#joined_key";

impl Event {
    /// The record key as text, if any.
    pub fn key_text(&self) -> Option<&str> {
        match &self.lossy_key {
            Some(k) => Some(k),
            None => self
                .raw_key
                .as_deref()
                .and_then(|k| std::str::from_utf8(k).ok()),
        }
    }

    /// The lossy text of `key` when it is not UTF-8 (for [`Event::lossy_key`]).
    pub fn lossy_key_of(key: Option<&[u8]>) -> Option<String> {
        let key = key?;
        std::str::from_utf8(key)
            .is_err()
            .then(|| String::from_utf8_lossy(key).into_owned())
    }
}

/// A record key's text, invalid UTF-8 replaced as `String::from_utf8_lossy`
/// does; valid text (nearly every key) is checked by `str::from_utf8`,
/// several times faster on it than the lossy walk, and ASCII (most keys:
/// a few digits or letters) by the inlined `is_ascii`, without a call.
#[inline]
pub(crate) fn key_text(key: &[u8]) -> Cow<'_, str> {
    if key.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(key) });
    }
    match std::str::from_utf8(key) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(key),
    }
}

impl Row for Event {
    fn field(&self, path: &[String]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        if let Some((_, row)) = self.joined.iter().find(|(alias, _)| first == alias) {
            return get_path(row, rest);
        }
        match &self.fields {
            Some((names, values)) => {
                let i = names.iter().position(|n| n == first)?;
                get_path(&values[i], rest)
            }
            None => get_path(&self.value, path),
        }
    }

    fn key(&self) -> Option<&str> {
        self.key_text()
    }

    fn record_timestamp(&self) -> i64 {
        self.record_timestamp
    }

    fn column(&self, name: &str) -> Option<&Value> {
        // Only the joined key is a column of an event; it is read as text.
        match name {
            JOINED_KEY_COLUMN => self.joined_key.as_ref(),
            _ => None,
        }
    }
}

/// A finished output row (for HAVING): columns by name.
#[derive(Debug, Clone)]
pub struct OutputRow<'a> {
    /// The row object.
    pub columns: &'a serde_json::Map<String, Value>,
}

impl Row for OutputRow<'_> {
    fn field(&self, path: &[String]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        get_path(self.columns.get(first)?, rest)
    }

    fn key(&self) -> Option<&str> {
        None
    }

    fn record_timestamp(&self) -> i64 {
        0
    }

    fn column(&self, name: &str) -> Option<&Value> {
        self.columns.get(name).or_else(|| {
            self.columns
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }
}

/// Decodes only the members `names` of a JSON object value, into values in
/// the order of `names` (`Null` when missing, or when the value is not an
/// object). Other members are skipped without being built, but still
/// checked to be well-formed JSON.
///
/// A flat object takes a hand-written scanner (`scan`); whatever it is not
/// sure of goes to serde_json, which gives the same values either way.
pub fn decode_fields(bytes: &[u8], names: &[String]) -> serde_json::Result<Vec<Value>> {
    match scan::decode_fields(bytes, names) {
        Some(values) => Ok(values),
        None => decode_fields_serde(bytes, names),
    }
}

/// The named members of a JSON object as an object of those members
/// ([`decode_fields`]; missing and null ones left out): what a join keeps
/// of a joined value it reads only some fields of.
pub fn decode_object(bytes: &[u8], names: &[String]) -> serde_json::Result<Value> {
    let values = decode_fields(bytes, names)?;
    Ok(Value::Object(
        names
            .iter()
            .zip(values)
            .filter(|(_, v)| !v.is_null())
            .map(|(n, v)| (n.clone(), v))
            .collect(),
    ))
}

/// [`decode_fields`] through serde_json alone: the reference its fast path
/// is tested against (and benchmarked against, by `kappa-processor-bench`).
#[doc(hidden)]
pub fn decode_fields_serde(bytes: &[u8], names: &[String]) -> serde_json::Result<Vec<Value>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let values = ByName(names).deserialize(&mut de)?;
    de.end()?;
    Ok(values)
}

/// Reads the named members of an object into a vector.
struct ByName<'k>(&'k [String]);

impl<'de> DeserializeSeed<'de> for ByName<'_> {
    type Value = Vec<Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Vec<Value>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ByName<'_> {
    type Value = Vec<Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Vec<Value>, E> {
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_i64<E>(self, _: i64) -> Result<Vec<Value>, E> {
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_u64<E>(self, _: u64) -> Result<Vec<Value>, E> {
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_f64<E>(self, _: f64) -> Result<Vec<Value>, E> {
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_str<E>(self, _: &str) -> Result<Vec<Value>, E> {
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_unit<E>(self) -> Result<Vec<Value>, E> {
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Value>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(vec![Value::Null; self.0.len()])
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Vec<Value>, A::Error> {
        let mut out = vec![Value::Null; self.0.len()];
        while let Some(i) = map.next_key_seed(NameIndex(self.0))? {
            match i {
                Some(i) => out[i] = map.next_value()?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// Reads a member name; its index in the names to keep, if it is one.
struct NameIndex<'k>(&'k [String]);

impl<'de> DeserializeSeed<'de> for NameIndex<'_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for NameIndex<'_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E>(self, v: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|k| k == v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn keeps_only_the_named_members() {
        let bytes = br#"{"user":"u1","pad":{"deep":[1,2,{"x":"y"}]},"amount":2.5,"ts":7}"#;
        let keep = ["user".to_string(), "ts".to_string(), "missing".to_string()];
        assert_eq!(
            decode_fields(bytes, &keep).unwrap(),
            vec![json!("u1"), json!(7), Value::Null]
        );
    }

    #[test]
    fn malformed_input_is_an_error_either_way() {
        let keep = ["a".to_string()];
        for bad in [
            &br#"{"a":1,"b":}"#[..],
            br#"{"a":1"#,
            br#"{"a":1} x"#,
            b"",
            br#"{"b":[1,}"#,
        ] {
            assert!(
                decode_fields(bad, &keep).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
            assert!(serde_json::from_slice::<Value>(bad).is_err());
        }
        // Not an object: no field (paths into it find nothing).
        assert_eq!(decode_fields(b"[1,2]", &keep).unwrap(), vec![Value::Null]);
    }

    #[test]
    fn fields_come_back_in_the_order_asked() {
        let bytes = br#"{"ts":7,"pad":[1,{"a":2}],"user":"u1"}"#;
        let names = ["user".to_string(), "missing".to_string(), "ts".to_string()];
        assert_eq!(
            decode_fields(bytes, &names).unwrap(),
            vec![json!("u1"), Value::Null, json!(7)]
        );
        assert_eq!(
            decode_fields(b"[1,2]", &names).unwrap(),
            vec![Value::Null; 3]
        );
        assert!(decode_fields(br#"{"user":"u1","x":}"#, &names).is_err());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            (-1e9f64..1e9).prop_map(Value::from),
            "[a-c\\\"é]{0,4}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-d]", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Decoding by fields equals full decoding with the other members removed.
        #[test]
        fn pruned_equals_full_minus_the_rest(value in arb_json(), keep in proptest::collection::vec("[a-d]", 0..3)) {
            let bytes = serde_json::to_vec(&value).unwrap();
            // serde_json's float parsing is not round-trip exact: compare
            // with a full decode, not with the original value.
            let full: Value = serde_json::from_slice(&bytes).unwrap();
            let expect = match &full {
                Value::Object(m) => Value::Object(m.iter().filter(|(k, _)| keep.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect()),
                other => other.clone(),
            };
            // Plans ask for each name once.
            let mut names = keep.clone();
            names.sort();
            names.dedup();
            let by_name = decode_fields(&bytes, &names).unwrap();
            for (name, v) in names.iter().zip(by_name) {
                prop_assert_eq!(v, expect.get(name).cloned().unwrap_or(Value::Null));
            }
        }
    }
}
