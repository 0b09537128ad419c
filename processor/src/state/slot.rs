//! The stored form of one aggregate slot: the accumulators of every
//! aggregate for one group (and window, or hopping slice). It is the value
//! of an aggregate view's row — readers compute the row's columns from it
//! (`operator::aggregate::row_of`) — and of a hopping slice in operator
//! state.
//!
//! ```text
//! byte 0      format version, 1
//! byte 1      group form: how the group values follow from the row key
//!               0  one string value, equal to the key
//!               1  one non-string value, whose JSON text is the key
//!               2  several values, whose JSON array text is the key
//! bytes 2..   one accumulator per aggregate, in the plan's order
//!             (`Accumulator::encode`)
//! ```
//!
//! The key text is the view key (`operator::aggregate::view_key`), so the
//! group values never need to be stored twice.

use serde_json::Value;

use crate::accumulators::Accumulator;

/// Format version of a slot value.
pub const VERSION: u8 = 1;

/// How a slot's group values are recovered from its key text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum GroupForm {
    /// One string value, equal to the key.
    String = 0,
    /// One non-string value: the key is its JSON text.
    Json = 1,
    /// Several values: the key is the JSON array of them.
    Array = 2,
}

impl GroupForm {
    /// The form of `group`'s values.
    pub fn of(group: &[Value]) -> GroupForm {
        match group {
            [Value::String(_)] => GroupForm::String,
            [_] => GroupForm::Json,
            _ => GroupForm::Array,
        }
    }

    fn from_byte(b: u8) -> Option<GroupForm> {
        Some(match b {
            0 => GroupForm::String,
            1 => GroupForm::Json,
            2 => GroupForm::Array,
            _ => return None,
        })
    }

    /// The group values of a row whose key text is `key`.
    pub fn values(self, key: &str) -> Option<Vec<Value>> {
        match self {
            GroupForm::String => Some(vec![Value::String(key.to_string())]),
            GroupForm::Json => Some(vec![serde_json::from_str(key).ok()?]),
            GroupForm::Array => match serde_json::from_str(key).ok()? {
                Value::Array(values) => Some(values),
                _ => None,
            },
        }
    }
}

/// Encodes a slot value.
pub fn encode(form: GroupForm, accs: &[Accumulator]) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 10 * accs.len());
    encode_into(&mut out, form, accs);
    out
}

/// Encodes a slot value into `out` (cleared first), reusing its memory.
pub fn encode_into(out: &mut Vec<u8>, form: GroupForm, accs: &[Accumulator]) {
    out.clear();
    out.push(VERSION);
    out.push(form as u8);
    for acc in accs {
        acc.encode(out);
    }
}

/// The group form of a slot value, without decoding its accumulators.
pub fn form_of(bytes: &[u8]) -> Option<GroupForm> {
    match bytes {
        [VERSION, form, ..] => GroupForm::from_byte(*form),
        _ => None,
    }
}

/// Decodes a slot value; `None` if it is not one.
pub fn decode(bytes: &[u8]) -> Option<(GroupForm, Vec<Accumulator>)> {
    let (&[version, form], mut rest) = bytes.split_first_chunk::<2>()?;
    if version != VERSION {
        return None;
    }
    let form = GroupForm::from_byte(form)?;
    let mut accs = Vec::new();
    while !rest.is_empty() {
        accs.push(Accumulator::decode(&mut rest)?);
    }
    Some((form, accs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn roundtrip_and_group_forms() {
        let accs = vec![
            Accumulator::Count(3),
            Accumulator::Max(Some(Box::new(json!("z")))),
        ];
        for (group, key) in [
            (vec![json!("u1")], "u1".to_string()),
            (vec![json!(42)], "42".to_string()),
            (vec![json!("a"), json!(1)], r#"["a",1]"#.to_string()),
        ] {
            let form = GroupForm::of(&group);
            let (back_form, back) = decode(&encode(form, &accs)).unwrap();
            assert_eq!((back_form, &back), (form, &accs));
            assert_eq!(back_form.values(&key), Some(group));
        }
    }

    #[test]
    fn foreign_bytes_are_rejected() {
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"{\"n\":1}"), None);
        assert_eq!(decode(&[VERSION, 9]), None);
        assert_eq!(decode(&[VERSION, 0, 1, 2]), None);
    }
}
