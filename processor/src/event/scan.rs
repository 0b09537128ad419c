//! The fast path of [`super::decode_fields`]: one pass over the bytes of a
//! JSON object, building only the named members' values.
//!
//! Invariant: [`decode_fields`] gives `Some` only for input serde_json's
//! decoder accepts too, and then the same values; on anything it is not
//! sure of — a top-level value that is not an object, an escape in a
//! member name, a control character, nesting deeper than [`MAX_DEPTH`],
//! malformed input — it gives `None` and the caller decodes with serde_json,
//! which decides (and names the error). Skipped members are checked the way
//! serde_json's `IgnoredAny` checks them: the grammar, escapes and control
//! characters of strings, but not their UTF-8. Kept strings without escapes
//! and short integers are built here; any other kept value is handed to
//! serde_json on its own bytes, which decodes it as it would in place.

use std::cell::Cell;

use serde_json::Value;
use smallvec::{smallvec, SmallVec};

use crate::expr::{DataType, Num};
use crate::time::{parse_timestamp_ascii, parse_timestamp_memo, parse_timestamp_text, MinuteMemo};

mod quick;

pub(crate) use quick::Shape;

/// Deepest nesting of a member's value the fast path follows.
const MAX_DEPTH: usize = 64;

/// The members `names` of the JSON object `bytes`, in the order of
/// `names` (`Null` when missing); `None` to leave the decision to serde_json.
pub(super) fn decode_fields(bytes: &[u8], names: &[String]) -> Option<Vec<Value>> {
    let position = |name: &[u8]| names.iter().position(|n| n.as_bytes() == name);
    let mut raws: SmallVec<[Raw<'_>; 8]> = smallvec![Raw::Missing; names.len()];
    let position_in = |bytes: &[u8], start, end| position(&bytes[start..end]);
    if quick::locate(bytes, position_in, &mut raws, None).is_some() {
        return raws.iter().map(|raw| raw.build()).collect();
    }
    let mut out = vec![Value::Null; names.len()];
    scan_kept(bytes, position, |i, raw| {
        out[i] = raw.build()?;
        Some(())
    })?;
    Some(out)
}

/// Locates the members `names` of the JSON object `bytes` into `out` (one
/// slot per name, [`Raw::Missing`] on entry), without building them; `None`
/// to leave the decision to [`decode_fields`]: besides what that declines,
/// a name kept twice (where every copy is built, and the last one kept).
pub(crate) fn locate_fields<'a>(
    bytes: &'a [u8],
    names: &NameSet,
    out: &mut [Raw<'a>],
    shape: Option<&mut Shape>,
) -> Option<()> {
    let position_in = |bytes: &[u8], start, end| names.position_in(bytes, start, end);
    if quick::locate(bytes, position_in, out, shape).is_some() {
        return Some(());
    }
    out.fill(Raw::Missing);
    scan_kept(
        bytes,
        |name| names.position_in(name, 0, name.len()),
        |i, raw| {
            if out[i] != Raw::Missing {
                return None;
            }
            out[i] = raw;
            Some(())
        },
    )
}

/// Member names to keep: most members' names are told apart by their
/// length alone, the others by their first 16 bytes, read as two words,
/// before any longer comparison.
#[derive(Debug, Clone)]
pub(crate) struct NameSet {
    /// Bit `n` (`n` < 63): some name is `n` bytes long; bit 63: some name
    /// is 63 bytes or longer.
    lengths: u64,
    /// Per name, in the order of `names`: its first 16 bytes as two words
    /// ([`words_at`]) and its length.
    keys: Vec<(u64, u64, usize)>,
    names: Vec<String>,
}

impl NameSet {
    /// The set of `names`, each matched to its index there.
    pub(crate) fn new(names: &[String]) -> NameSet {
        NameSet {
            lengths: names.iter().fold(0, |bits, n| bits | length_bit(n.len())),
            keys: names
                .iter()
                .map(|n| {
                    let (a, b) = words_at(n.as_bytes(), 0, n.len());
                    (a, b, n.len())
                })
                .collect(),
            names: names.to_vec(),
        }
    }

    /// The index of the name `bytes[start..end]` among the names.
    #[inline(always)]
    fn position_in(&self, bytes: &[u8], start: usize, end: usize) -> Option<usize> {
        let len = end - start;
        if self.lengths & length_bit(len) == 0 {
            return None;
        }
        let (a, b) = words_at(bytes, start, len);
        // The first word tells most names apart: compared first.
        let i = self
            .keys
            .iter()
            .position(|&(ka, kb, klen)| ka == a && kb == b && klen == len)?;
        (len <= 16 || self.names[i].as_bytes() == &bytes[start..end]).then_some(i)
    }
}

/// The bit of [`NameSet::lengths`] for a name of `len` bytes.
#[inline(always)]
fn length_bit(len: usize) -> u64 {
    1 << len.min(63)
}

/// The first 16 (at most) of the `len` bytes at `start` of `bytes`, as two
/// little-endian words, zero-padded: read as two whole words wherever
/// `bytes` holds 16 bytes from `start`, whatever `len`.
#[inline(always)]
fn words_at(bytes: &[u8], start: usize, len: usize) -> (u64, u64) {
    /// The low `n` bytes of `word` (all of them from 8 on).
    fn low(word: u64, n: usize) -> u64 {
        match n {
            0 => 0,
            1..8 => word & ((1 << (8 * n)) - 1),
            _ => word,
        }
    }
    if let Some(window) = bytes.get(start..).and_then(|rest| rest.first_chunk::<16>()) {
        let (a, b) = window.split_at(8);
        let a = u64::from_le_bytes(a.try_into().expect("8 bytes"));
        let b = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        return (low(a, len), low(b, len.saturating_sub(8)));
    }
    let word = |at: usize, n: usize| {
        if n == 0 {
            return 0;
        }
        bytes[at..][..n.min(8)]
            .iter()
            .rev()
            .fold(0, |w, b| (w << 8) | u64::from(*b))
    };
    (word(start, len), word(start + 8, len.saturating_sub(8)))
}

/// The byte scanner: one pass over the JSON object `bytes`, calling `kept`
/// with the index and located value of each member `position` finds, in
/// order, skipping and checking the others; `None` when the input is not
/// an object the fast path is sure of, or when `kept` gives `None`.
fn scan_kept<'a>(
    bytes: &'a [u8],
    position: impl Fn(&[u8]) -> Option<usize>,
    mut kept: impl FnMut(usize, Raw<'a>) -> Option<()>,
) -> Option<()> {
    let mut s = Scanner { bytes, pos: 0 };
    s.skip_whitespace();
    s.eat(b'{')?;
    s.skip_whitespace();
    if s.peek() == Some(b'}') {
        s.pos += 1;
    } else {
        loop {
            s.skip_whitespace();
            s.eat(b'"')?;
            let name = s.name()?;
            let index = position(name);
            // serde_json reads every member name as text.
            if index.is_none() && !name.is_ascii() {
                std::str::from_utf8(name).ok()?;
            }
            s.skip_whitespace();
            s.eat(b':')?;
            s.skip_whitespace();
            match index {
                Some(i) => kept(i, s.locate()?)?,
                None => s.skip_value(0)?,
            }
            s.skip_whitespace();
            match s.next()? {
                b',' => {}
                b'}' => break,
                _ => return None,
            }
        }
    }
    s.skip_whitespace();
    (s.pos == bytes.len()).then_some(())
}

struct Scanner<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Scanner<'a> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let b = self.peek()?;
        self.pos += 1;
        Some(b)
    }

    fn eat(&mut self, expected: u8) -> Option<()> {
        (self.next()? == expected).then_some(())
    }

    /// JSON's whitespace, as serde_json skips it.
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Advances to the next `"`, `\` or control character (or the end).
    fn skip_plain(&mut self) {
        const ONES: u64 = u64::MAX / 255;
        const HIGH: u64 = ONES << 7;
        let bytes = self.bytes;
        let mut chunks = bytes[self.pos..].chunks_exact(8);
        for chunk in &mut chunks {
            let x = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
            let control = x.wrapping_sub(ONES * 0x20) & !x;
            let q = x ^ (ONES * u64::from(b'"'));
            let quote = q.wrapping_sub(ONES) & !q;
            let b = x ^ (ONES * u64::from(b'\\'));
            let backslash = b.wrapping_sub(ONES) & !b;
            let hits = (control | quote | backslash) & HIGH;
            if hits != 0 {
                // The lowest flagged byte is a true hit (borrows only
                // flag bytes above one).
                self.pos += hits.trailing_zeros() as usize / 8;
                return;
            }
            self.pos += 8;
        }
        while let Some(b) = self.peek() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                return;
            }
            self.pos += 1;
        }
    }

    /// A member name after its opening quote, when it has no escape and no
    /// control character: its raw bytes.
    fn name(&mut self) -> Option<&'a [u8]> {
        let start = self.pos;
        self.skip_plain();
        let name = &self.bytes[start..self.pos];
        self.eat(b'"')?;
        Some(name)
    }

    /// Skips a string after its opening quote, checking it as serde_json's
    /// `ignore_str` does; true if it held an escape.
    fn skip_string(&mut self) -> Option<bool> {
        let mut escaped = false;
        loop {
            self.skip_plain();
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => {
                    escaped = true;
                    match self.next()? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let hex = self.bytes.get(self.pos..self.pos + 4)?;
                            if !hex.iter().all(u8::is_ascii_hexdigit) {
                                return None;
                            }
                            self.pos += 4;
                        }
                        _ => return None,
                    }
                }
                _ => return None, // a control character
            }
        }
    }

    /// Skips a number (its first byte not yet read) by JSON's grammar, as
    /// serde_json's `ignore_integer` does.
    fn skip_number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.next()? {
            b'0' => {
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return None;
                }
            }
            b'1'..=b'9' => self.skip_digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.skip_digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if !self.peek()?.is_ascii_digit() {
                return None;
            }
            self.skip_digits();
        }
        Some(())
    }

    fn skip_digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn literal(&mut self, text: &[u8]) -> Option<()> {
        let end = self.pos + text.len();
        (self.bytes.get(self.pos..end)? == text).then(|| self.pos = end)
    }

    /// Skips a value (whitespace before it already skipped) at nesting
    /// `depth`, checking it as serde_json's `IgnoredAny` does.
    fn skip_value(&mut self, depth: usize) -> Option<()> {
        match self.peek()? {
            b'"' => {
                self.pos += 1;
                self.skip_string()?;
            }
            b'-' | b'0'..=b'9' => self.skip_number()?,
            b't' => self.literal(b"true")?,
            b'f' => self.literal(b"false")?,
            b'n' => self.literal(b"null")?,
            open @ (b'[' | b'{') => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.pos += 1;
                let close = if open == b'[' { b']' } else { b'}' };
                self.skip_whitespace();
                if self.peek() == Some(close) {
                    self.pos += 1;
                    return Some(());
                }
                loop {
                    self.skip_whitespace();
                    if open == b'{' {
                        self.eat(b'"')?;
                        self.skip_string()?;
                        self.skip_whitespace();
                        self.eat(b':')?;
                        self.skip_whitespace();
                    }
                    self.skip_value(depth + 1)?;
                    self.skip_whitespace();
                    match self.next()? {
                        b',' => {}
                        b if b == close => break,
                        _ => return None,
                    }
                }
            }
            _ => return None,
        }
        Some(())
    }

    /// A kept member's value (whitespace before it already skipped),
    /// checked by JSON's grammar and located, not yet built.
    fn locate(&mut self) -> Option<Raw<'a>> {
        let start = self.pos;
        if self.peek()? == b'"' {
            self.pos += 1;
            let escaped = self.skip_string()?;
            if !escaped {
                return Some(Raw::Text(&self.bytes[start + 1..self.pos - 1]));
            }
        } else {
            self.skip_value(0)?;
            return Some(Raw::of_value(&self.bytes[start..self.pos]));
        }
        Some(Raw::Other(&self.bytes[start..self.pos]))
    }
}

/// A kept member's value located in the bytes of its object and checked by
/// JSON's grammar, not yet built: [`Raw::build`] makes the value
/// serde_json would, and the cheaper [`Raw::is_buildable`] and
/// [`Raw::conforms`] answer questions about it without building it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Raw<'a> {
    /// The member is absent (its value is `Null`).
    Missing,
    /// A string without escapes: the bytes between its quotes (UTF-8 not
    /// yet checked).
    Text(&'a [u8]),
    /// An integer of at most 18 digits (one serde_json builds as an
    /// integer and writes back as these bytes): its bytes and value.
    Int(&'a [u8], i64),
    /// Any other value (a number [`Raw::of_value`] does not take as an
    /// integer, a literal, an escaped string, an array or an object): its
    /// bytes.
    Other(&'a [u8]),
}

impl<'a> Raw<'a> {
    /// A located value that is not a string without escapes (`bytes`,
    /// checked by JSON's grammar): [`Raw::Int`] for an integer of at most
    /// 18 digits, else [`Raw::Other`].
    pub(crate) fn of_value(bytes: &'a [u8]) -> Raw<'a> {
        match quick::integer(bytes, 0) {
            Some((n, end)) if end == bytes.len() => Raw::Int(bytes, n),
            _ => Raw::Other(bytes),
        }
    }

    /// The value, as serde_json would decode it in place; `None` when the
    /// fast path cannot tell (the caller then decodes with serde_json).
    pub(crate) fn build(self) -> Option<Value> {
        let bytes = match self {
            Raw::Missing => return Some(Value::Null),
            Raw::Int(_, n) => return Some(integer_value(n)),
            Raw::Text(text) => {
                let text = std::str::from_utf8(text).ok()?;
                return Some(Value::String(text.to_owned()));
            }
            Raw::Other(bytes) => bytes,
        };
        match bytes.first()? {
            b't' => return Some(Value::Bool(true)),
            b'f' => return Some(Value::Bool(false)),
            b'n' => return Some(Value::Null),
            _ => {}
        }
        // Escaped strings, numbers that are not `Raw::Int`, arrays and
        // objects: serde_json decodes the value's bytes as it would have
        // in place.
        serde_json::from_slice(bytes).ok()
    }

    /// For a literal or a [`Raw::Int`]: its bytes, which are the text
    /// serde_json writes for the value [`Raw::build`] gives (JSON's
    /// grammar, checked when located, leaves an integer no leading zero or
    /// sign but `-`, and `-0` is not one of them: it builds a float).
    pub(crate) fn canonical_text(self) -> Option<&'a [u8]> {
        match self {
            Raw::Int(bytes, _) => Some(bytes),
            Raw::Other(bytes) if is_literal(bytes) => Some(bytes),
            _ => None,
        }
    }

    /// The number of the value [`Raw::build`] gives (`Some(None)` for a
    /// value that is not a number, NULL included), as
    /// [`crate::expr::num`] reads it, a [`Raw::Int`] without building it;
    /// `None` when the value does not build.
    pub(crate) fn number(self) -> Option<Option<Num>> {
        match self {
            Raw::Int(_, n) => Some(Some(Num::Int(n))),
            Raw::Other(_) => Some(crate::expr::num(&self.build()?)),
            Raw::Missing => Some(None),
            Raw::Text(_) => self.is_buildable().then_some(None),
        }
    }

    /// A string without escapes, when its bytes are UTF-8.
    pub(crate) fn text(self) -> Option<&'a str> {
        match self {
            Raw::Text(text) => std::str::from_utf8(text).ok(),
            _ => None,
        }
    }

    /// For a string without escapes that is UTF-8, or a [`Raw::Int`]: its
    /// event time ([`crate::time::parse_timestamp`] of the built value).
    pub(crate) fn timestamp(self) -> Option<Option<i64>> {
        match self {
            Raw::Text(text) if text.is_ascii() => Some(parse_timestamp_ascii(text)),
            Raw::Int(_, n) => Some(Some(n)),
            Raw::Other(_) => None,
            _ => Some(parse_timestamp_text(self.text()?)),
        }
    }

    /// [`Raw::timestamp`], reading a minute equal to the last one read
    /// through `memo` from memory ([`parse_timestamp_memo`]).
    pub(crate) fn timestamp_memo(self, memo: &Cell<Option<MinuteMemo>>) -> Option<Option<i64>> {
        if let Raw::Text(text) = self {
            if let Some(answer) = parse_timestamp_memo(text, memo) {
                return Some(answer);
            }
        }
        self.timestamp()
    }

    /// True when [`Raw::build`] would certainly give a value, told without
    /// building it; false when only building can tell.
    #[inline]
    pub(crate) fn is_buildable(self) -> bool {
        match self {
            Raw::Missing | Raw::Int(..) => true,
            Raw::Text(text) => text.is_ascii() || std::str::from_utf8(text).is_ok(),
            Raw::Other(bytes) => is_literal(bytes) || is_plain_decimal(bytes),
        }
    }

    /// Whether the value [`Raw::build`] gives is of `ty`
    /// ([`crate::expr::conforms`]), told without building it: `None` when
    /// only the built value can tell. Assumes [`Raw::is_buildable`], except
    /// of a number or literal (`Raw::Other`): of those it answers only for
    /// ones that build.
    pub(crate) fn conforms(self, ty: DataType) -> Option<bool> {
        match self {
            Raw::Missing => Some(true),
            Raw::Text(_) => match ty {
                DataType::String => Some(true),
                DataType::Timestamp => Some(self.timestamp()?.is_some()),
                _ => Some(false),
            },
            // An integer that fits an i64 is of every type but BOOLEAN
            // (a TIMESTAMP in epoch milliseconds).
            Raw::Int(..) => Some(ty != DataType::Boolean),
            Raw::Other(b"true" | b"false") => {
                Some(matches!(ty, DataType::Boolean | DataType::String))
            }
            Raw::Other(b"null") => Some(true),
            // serde_json reads a number with a fraction as a double.
            Raw::Other(bytes) if is_plain_decimal(bytes) => match ty {
                DataType::String | DataType::Double | DataType::Decimal { .. } => Some(true),
                DataType::Integer | DataType::Boolean => Some(false),
                DataType::Timestamp => None,
            },
            Raw::Other(_) => None,
        }
    }
}

/// `true`, `false` or `null` (already checked by JSON's grammar).
fn is_literal(bytes: &[u8]) -> bool {
    matches!(bytes, b"true" | b"false" | b"null")
}

/// A number (already checked by JSON's grammar) with a fraction and no
/// exponent, short enough that serde_json reads it as a finite double:
/// fewer than 300 digits before the point, so below 10^300.
fn is_plain_decimal(bytes: &[u8]) -> bool {
    bytes.len() <= 300
        && matches!(bytes.first(), Some(b'-' | b'0'..=b'9'))
        && bytes.contains(&b'.')
        && !bytes.iter().any(|b| matches!(b, b'e' | b'E'))
}

/// An integer's value as serde_json makes it (a `u64` when not negative).
fn integer_value(n: i64) -> Value {
    match n {
        n if n >= 0 => Value::from(n as u64),
        n => Value::from(n),
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode_fields_serde;
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const ALL_TYPES: [DataType; 6] = [
        DataType::Boolean,
        DataType::Integer,
        DataType::Double,
        DataType::Decimal {
            precision: 10,
            scale: 2,
        },
        DataType::String,
        DataType::Timestamp,
    ];

    #[test]
    fn raw_values_tell_what_they_can_without_building() {
        fn located(bytes: &str) -> Raw<'_> {
            let mut raws = vec![Raw::Missing];
            locate_fields(
                bytes.as_bytes(),
                &NameSet::new(&names(&["a"])),
                &mut raws,
                None,
            )
            .unwrap();
            raws[0]
        }
        let text = located(r#"{"a":" 2026-01-01T00:00:00Z"}"#);
        assert!(text.is_buildable());
        assert_eq!(text.conforms(DataType::Timestamp), Some(true));
        assert_eq!(text.conforms(DataType::Double), Some(false));
        let decimal = located(r#"{"a":13.05}"#);
        assert!(decimal.is_buildable());
        assert_eq!(decimal.conforms(DataType::Integer), Some(false));
        assert_eq!(decimal.conforms(DataType::Timestamp), None);
        // Out of a double's range: only serde_json can tell.
        assert!(!located(r#"{"a":1e400}"#).is_buildable());
        let long = format!(r#"{{"a":{}.5}}"#, "9".repeat(400));
        assert!(!located(&long).is_buildable());
        assert_eq!(located(r#"{"b":1}"#), Raw::Missing);
        // Literals and short integers are written as they are located:
        // what serde_json writes for their built values.
        for json in ["true", "null", "0", "-7", "123456789012345678"] {
            let record = format!(r#"{{"a":{json}}}"#);
            let raw = located(&record);
            let built = serde_json::to_string(&raw.build().unwrap()).unwrap();
            assert_eq!(raw.canonical_text(), Some(built.as_bytes()), "{json}");
        }
        for json in ["-0", "1.50", "1e2", "1234567890123456789", r#""x""#] {
            let record = format!(r#"{{"a":{json}}}"#);
            assert_eq!(located(&record).canonical_text(), None, "{json}");
        }
        // A name kept twice is left to the full decoder.
        let mut raws = vec![Raw::Missing];
        assert!(locate_fields(
            br#"{"a":1,"a":2}"#,
            &NameSet::new(&names(&["a"])),
            &mut raws,
            None
        )
        .is_none());
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|n| n.to_string()).collect()
    }

    /// The fast path agrees with serde_json: the same values when it
    /// answers, and no answer when serde_json refuses the input.
    fn agrees(bytes: &[u8], names: &[String]) -> Result<(), String> {
        let fast = decode_fields(bytes, names);
        let reference = decode_fields_serde(bytes, names);
        match (&fast, &reference) {
            (None, _) => Ok(()),
            (Some(f), Ok(r)) if f == r => Ok(()),
            _ => Err(format!(
                "{:?}: fast {fast:?}, serde_json {reference:?}",
                String::from_utf8_lossy(bytes)
            )),
        }
    }

    #[track_caller]
    fn fast(bytes: &[u8], keep: &[&str]) -> Vec<Value> {
        let keep = names(keep);
        agrees(bytes, &keep).unwrap();
        decode_fields(bytes, &keep).expect("the fast path answers")
    }

    #[track_caller]
    fn declined(bytes: &[u8], keep: &[&str]) {
        let keep = names(keep);
        agrees(bytes, &keep).unwrap();
        assert_eq!(
            decode_fields(bytes, &keep),
            None,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }

    #[test]
    fn a_flat_event_takes_the_fast_path() {
        let bytes = br#"{"user":"u12","amount":57,"ts":1700000000123,"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}"#;
        assert_eq!(
            fast(bytes, &["user", "amount", "ts"]),
            vec![json!("u12"), json!(57), json!(1_700_000_000_123_u64)]
        );
        assert_eq!(
            fast(b" {\n\t\"a\" :\r 1 , \"b\":2 } \n", &["b", "a"]),
            vec![json!(2), json!(1)]
        );
        assert_eq!(fast(b"{}", &["a"]), vec![Value::Null]);
        assert_eq!(fast(b"{ }", &[]), Vec::<Value>::new());
    }

    #[test]
    fn kept_strings_with_escapes_and_unicode() {
        assert_eq!(
            fast(br#"{"a":"x\"y\\z\/\n\u00e9"}"#, &["a"]),
            vec![json!("x\"y\\z/\n\u{e9}")]
        );
        assert_eq!(
            fast(br#"{"a":"\ud83d\ude00"}"#, &["a"]),
            vec![json!("\u{1f600}")]
        );
        assert_eq!(
            fast("{\"a\":\"ünï – 😀\"}".as_bytes(), &["a"]),
            vec![json!("ünï – 😀")]
        );
        assert_eq!(fast("{\"ü\":1}".as_bytes(), &["ü"]), vec![json!(1)]);
        // A lone surrogate is no string.
        declined(br#"{"a":"\ud800"}"#, &["a"]);
        // Skipped strings are not decoded, as serde_json's IgnoredAny: a
        // lone surrogate there is fine.
        assert_eq!(fast(br#"{"b":"\ud800","a":1}"#, &["a"]), vec![json!(1)]);
        // An escaped member name goes to serde_json (which unescapes it).
        declined(br#"{"\u0061":1}"#, &["a"]);
        assert_eq!(
            decode_fields_serde(br#"{"\u0061":1}"#, &names(&["a"])).unwrap(),
            vec![json!(1)]
        );
    }

    #[test]
    fn numbers_in_every_form() {
        for (text, expect) in [
            ("0", json!(0)),
            ("-0", json!(-0.0)),
            ("7", json!(7)),
            ("-7", json!(-7)),
            ("123456789012345678", json!(123_456_789_012_345_678_i64)),
            ("-123456789012345678", json!(-123_456_789_012_345_678_i64)),
            ("18446744073709551615", json!(u64::MAX)),
            ("18446744073709551616", json!(18_446_744_073_709_551_616.0)),
            ("-9223372036854775808", json!(i64::MIN)),
            ("-9223372036854775809", json!(-9_223_372_036_854_775_809.0)),
            ("2.5", json!(2.5)),
            ("-0.125", json!(-0.125)),
            ("1e3", json!(1000.0)),
            ("1E-3", json!(0.001)),
            ("-1.25e+2", json!(-125.0)),
            ("0.1", json!(0.1)),
        ] {
            let bytes = format!(r#"{{"n":{text},"m":{text}}}"#);
            assert_eq!(fast(bytes.as_bytes(), &["n"]), vec![expect], "{text}");
        }
        for bad in [
            "01", "-", "1.", ".5", "1e", "1e+", "+1", "0x1", "1.5.2", "--1", "-01",
        ] {
            for keep in [&["n"][..], &[]] {
                let bytes = format!(r#"{{"n":{bad}}}"#);
                declined(bytes.as_bytes(), keep);
                assert!(
                    decode_fields_serde(bytes.as_bytes(), &names(keep)).is_err(),
                    "{bad}"
                );
            }
        }
        // Out of a double's range: serde_json refuses it.
        declined(br#"{"n":1e400}"#, &["n"]);
        assert!(decode_fields_serde(br#"{"n":1e400}"#, &names(&["n"])).is_err());
    }

    #[test]
    fn nested_values_kept_and_skipped() {
        let bytes = br#"{"a":{"x":[1,{"y":null}],"z":"w"},"b":[true,false,[],{}],"c":{"d":1}}"#;
        assert_eq!(
            fast(bytes, &["a", "c"]),
            vec![json!({"x": [1, {"y": null}], "z": "w"}), json!({"d": 1})]
        );
        // Nesting deeper than the fast path follows goes to serde_json.
        let deep = format!(r#"{{"a":{}1{}}}"#, "[".repeat(100), "]".repeat(100));
        declined(deep.as_bytes(), &["b"]);
        assert!(decode_fields_serde(deep.as_bytes(), &names(&["b"])).is_ok());
        let shallow = format!(r#"{{"a":{}1{}}}"#, "[".repeat(30), "]".repeat(30));
        assert_eq!(fast(shallow.as_bytes(), &["b"]), vec![Value::Null]);
    }

    #[test]
    fn duplicate_members_keep_the_last() {
        assert_eq!(
            fast(br#"{"a":1,"b":2,"a":"x"}"#, &["a", "b"]),
            vec![json!("x"), json!(2)]
        );
        assert_eq!(
            fast(br#"{"a":{"q":1},"a":null}"#, &["a"]),
            vec![Value::Null]
        );
    }

    #[test]
    fn malformed_input_is_declined() {
        for bad in [
            &br#"{"a":1,}"#[..],
            br#"{,"a":1}"#,
            br#"{"a" 1}"#,
            br#"{"a":1 "b":2}"#,
            br#"{"a":1"#,
            br#"{"a":"x"#,
            br#"{"a":tru}"#,
            br#"{"a":truex}"#,
            br#"{"a":nul}"#,
            br#"{"a":[1,]}"#,
            br#"{"a":[1 2]}"#,
            br#"{"a":{"b"}}"#,
            br#"{"a":{1:2}}"#,
            br#"{"a":"\x"}"#,
            br#"{"a":"\u12G4"}"#,
            br#"{"a":"\u12"}"#,
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":1} x",
            b"{\"a\":1}}",
            b"{a:1}",
            b"",
            b"{",
        ] {
            for keep in [&["a"][..], &["b"]] {
                declined(bad, keep);
                assert!(
                    decode_fields_serde(bad, &names(keep)).is_err(),
                    "{:?}",
                    String::from_utf8_lossy(bad)
                );
            }
        }
        // Invalid UTF-8: refused in names and kept strings; in a skipped
        // string serde_json's IgnoredAny does not look (neither do we).
        declined(b"{\"\xff\":1}", &["a"]);
        assert!(decode_fields_serde(b"{\"\xff\":1}", &names(&["a"])).is_err());
        declined(b"{\"a\":\"\xff\"}", &["a"]);
        assert!(decode_fields_serde(b"{\"a\":\"\xff\"}", &names(&["a"])).is_err());
        assert_eq!(fast(b"{\"b\":\"\xff\",\"a\":2}", &["a"]), vec![json!(2)]);
    }

    #[test]
    fn other_top_level_values_go_to_serde_json() {
        for other in [&b"[1,2]"[..], b"1", b"\"s\"", b"null", b" true "] {
            declined(other, &["a"]);
            assert_eq!(
                decode_fields_serde(other, &names(&["a"])).unwrap(),
                vec![Value::Null]
            );
        }
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            (-1e3f64..1e3).prop_map(Value::from),
            "[a-c\\\"\\\\é\u{1f600}\n\u{1}/]{0,6}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 24, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-dé\"]", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_object_bytes() -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::collection::btree_map("[a-d]{1,2}", arb_json(), 0..6),
            any::<bool>(),
        )
            .prop_map(|(members, pretty)| {
                let value = Value::Object(members.into_iter().collect());
                if pretty {
                    serde_json::to_vec_pretty(&value).unwrap()
                } else {
                    serde_json::to_vec(&value).unwrap()
                }
            })
    }

    /// An edit of a byte string: remove, replace or insert at a position.
    fn mutate(mut bytes: Vec<u8>, edits: &[(u8, usize, u8)]) -> Vec<u8> {
        const INTERESTING: &[u8] = b"{}[]\":,\\ -.e0159tfnu\x01\xff\xc3";
        for &(kind, at, with) in edits {
            let with = INTERESTING[usize::from(with) % INTERESTING.len()];
            let at = at % (bytes.len() + 1);
            match kind % 3 {
                0 if at < bytes.len() => {
                    bytes.remove(at);
                }
                1 if at < bytes.len() => bytes[at] = with,
                _ => bytes.insert(at, with),
            }
        }
        bytes
    }

    proptest! {
        /// A name is found where it sits in a record, whatever its length
        /// and however near the record's end (words read past the name).
        #[test]
        fn names_are_found_in_place(
            names in proptest::collection::vec("[a-c_]{0,20}", 1..5),
            probe in "[a-c_]{0,20}",
            before in 0usize..20,
            after in 0usize..10,
        ) {
            let set = NameSet::new(&names);
            let record = format!("{}{probe}{}", "x".repeat(before), "y".repeat(after));
            let end = before + probe.len();
            prop_assert_eq!(
                set.position_in(record.as_bytes(), before, end),
                names.iter().position(|n| *n == probe)
            );
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// On well-formed objects the fast path answers, and as serde_json does.
        #[test]
        fn valid_objects_agree(bytes in arb_object_bytes(), keep in proptest::collection::vec("[a-d]{1,2}", 0..4)) {
            let mut keep = keep;
            keep.sort();
            keep.dedup();
            prop_assert!(agrees(&bytes, &keep).is_ok(), "{}", agrees(&bytes, &keep).unwrap_err());
            prop_assert!(decode_fields_serde(&bytes, &keep).is_ok());
            prop_assert!(decode_fields(&bytes, &keep).is_some());
        }

        /// On damaged input the fast path never accepts what serde_json
        /// refuses, nor answers differently.
        #[test]
        fn damaged_objects_agree(
            bytes in arb_object_bytes(),
            edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 1..4),
            keep in proptest::collection::vec("[a-d]{1,2}", 0..4),
        ) {
            let mut keep = keep;
            keep.sort();
            keep.dedup();
            let bytes = mutate(bytes, &edits);
            prop_assert!(agrees(&bytes, &keep).is_ok(), "{}", agrees(&bytes, &keep).unwrap_err());
        }

        /// Located members build to what the fast path decodes, and what
        /// [`Raw`] tells without building agrees with the built value.
        #[test]
        fn located_members_agree_with_built_ones(
            bytes in arb_object_bytes(),
            edits in proptest::collection::vec((any::<u8>(), any::<usize>(), any::<u8>()), 0..2),
            keep in proptest::collection::vec("[a-d]{1,2}", 0..4),
        ) {
            let mut keep = keep;
            keep.sort();
            keep.dedup();
            let bytes = mutate(bytes, &edits);
            let mut raws = vec![Raw::Missing; keep.len()];
            if locate_fields(&bytes, &NameSet::new(&keep), &mut raws, None).is_none() {
                return Ok(());
            }
            let built: Option<Vec<Value>> = raws.iter().map(|r| r.build()).collect();
            prop_assert_eq!(&built, &decode_fields(&bytes, &keep));
            for raw in raws {
                let value = raw.build();
                prop_assert!(!raw.is_buildable() || value.is_some(), "{:?}", raw);
                let Some(value) = value.filter(|_| raw.is_buildable()) else { continue };
                for ty in ALL_TYPES {
                    if let Some(conforms) = raw.conforms(ty) {
                        prop_assert_eq!(conforms, crate::expr::conforms(&value, ty), "{:?} {:?}", raw, ty);
                    }
                }
                if let Some(event_time) = raw.timestamp() {
                    prop_assert_eq!(event_time, crate::time::parse_timestamp(&value), "{:?}", raw);
                }
                prop_assert_eq!(raw.number(), Some(crate::expr::num(&value)), "{:?}", raw);
            }
        }
    }
}
