//! The quick pass of [`super::locate_fields`] and [`super::decode_fields`],
//! for the records nearly every topic holds: a flat JSON object whose
//! strings have no escapes and no control characters, spaced by nothing
//! but `' '`.
//!
//! The record is looked at in blocks of 64 bytes: AVX-512 comparisons
//! (AVX2 or SSE2 on x86-64 processors without AVX-512BW; a byte loop elsewhere)
//! give a block's `"` bytes as a bit mask,
//! and whether it holds a byte no fast string may hold (`\` or a control
//! character). Where a string starts is known from the grammar; with no
//! such byte in the blocks it reaches, it ends at the next quote — one
//! `trailing_zeros` instead of a loop over its bytes, each block's masks
//! made once, when the first string reaches it. The walk over the members
//! reads only the few bytes between strings: the `:` and `,`, numbers and
//! literals (checked by the byte scanner's grammar, which takes no `\` or
//! control character either).
//!
//! A topic's records mostly share their members, in the same order and
//! spacing: given a [`Shape`], the pass reads a record by the one before
//! it — the bytes from each value's end to the next value's start (`,"name":`)
//! compared at once, the name's index known — and walks on where they
//! differ. Values are read as without it.
//!
//! Anything else — an escape or control character anywhere in the record
//! (so also whitespace other than `' '`), a nested array or object,
//! malformed input, a member kept twice — is declined (`None`), and the
//! whole record goes to the byte scanner, which decides.
//! So where the quick pass answers, it gives what the byte scanner gives
//! for the same bytes (property-tested against it below).

use super::{Raw, Scanner};

/// Bytes per block of the masks.
const BLOCK: usize = 64;

/// Locates the members of the JSON object `bytes` that `position_in` keeps
/// (it is given the record and where a name starts and ends) into `out` (one slot per index, [`Raw::Missing`] on entry); `None` to
/// leave the record to the byte scanner (see the module's documentation),
/// `out` then holding what was located so far. A member kept twice is
/// declined too.
///
/// With a `shape` (that of the records located before with the same
/// `position_in`), the members it foresees are read off it, and a record
/// located whole leaves its own shape there ([`Shape`]).
pub(super) fn locate<'a>(
    bytes: &'a [u8],
    position_in: impl Fn(&[u8], usize, usize) -> Option<usize>,
    out: &mut [Raw<'a>],
    mut shape: Option<&mut Shape>,
) -> Option<()> {
    let mut quotes = Quotes::new(bytes);
    // The members the shape foresees, then the walk after them.
    let (mut pos, foreseen) = match shape.as_deref_mut() {
        Some(shape) => shape.walk(bytes, &mut quotes, out)?,
        None => (0, 0),
    };
    // Where the bytes before the next member's value start: after the
    // value before it, or at the record's start.
    let mut prefix_start = pos;
    if foreseen == 0 {
        pos = spaces(bytes, 0);
        if bytes.get(pos) != Some(&b'{') {
            return None;
        }
        pos = spaces(bytes, pos + 1);
        if bytes.get(pos) == Some(&b'}') {
            (spaces(bytes, pos + 1) == bytes.len()).then_some(())?;
            if let Some(shape) = shape {
                shape.keep(bytes, 0);
            }
            return Some(());
        }
    } else if !next_member(bytes, &mut pos)? {
        if let Some(shape) = shape {
            shape.keep(bytes, foreseen);
        }
        return Some(());
    }
    // Each token's first byte is matched as it is (records rarely hold
    // spaces); spaces are skipped only where that fails.
    loop {
        // The name: a string starting here.
        pos = after_spaces(bytes, pos, b'"')?;
        let end = quotes.end_of_string(pos - 1)?;
        let name = &bytes[pos..end];
        let index = position_in(bytes, pos, end);
        // The byte scanner's check: serde_json reads every name as text.
        if index.is_none() && !name.is_ascii() {
            std::str::from_utf8(name).ok()?;
        }
        pos = spaces(bytes, after_spaces(bytes, end + 1, b':')?);
        if let Some(shape) = shape.as_deref_mut() {
            shape.seen.push((prefix_start, pos, index));
        }
        let (raw, after) = value(bytes, pos, &mut quotes)?;
        pos = after;
        if let Some(index) = index {
            fill(out, index, raw)?;
        }
        prefix_start = pos;
        if !next_member(bytes, &mut pos)? {
            if let Some(shape) = shape {
                shape.keep(bytes, foreseen);
            }
            return Some(());
        }
    }
}

/// After a member's value at `pos`: `true` with `pos` after its `,` if
/// another member follows, `false` at the object's `}` (and the record's
/// end), `None` for anything else.
#[inline(always)]
fn next_member(bytes: &[u8], pos: &mut usize) -> Option<bool> {
    loop {
        match bytes.get(*pos) {
            Some(b',') => {
                *pos += 1;
                return Some(true);
            }
            Some(b'}') => return (spaces(bytes, *pos + 1) == bytes.len()).then_some(false),
            Some(b' ') => *pos = spaces(bytes, *pos),
            _ => return None,
        }
    }
}

/// The value starting at `pos` (after any spaces) and the position after
/// it: a string without escapes, or a number or literal (checked by the
/// byte scanner's grammar); `None` for anything else.
#[inline(always)]
fn value<'a>(bytes: &'a [u8], mut pos: usize, quotes: &mut Quotes<'a>) -> Option<(Raw<'a>, usize)> {
    loop {
        let start = pos;
        match *bytes.get(pos)? {
            b'"' => {
                let close = quotes.end_of_string(pos)?;
                return Some((Raw::Text(&bytes[start + 1..close]), close + 1));
            }
            b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                if let Some((n, end)) = integer(bytes, pos) {
                    return Some((Raw::Int(&bytes[start..end], n), end));
                }
                let mut scanner = Scanner { bytes, pos };
                scanner.skip_value(0)?;
                return Some((Raw::of_value(&bytes[start..scanner.pos]), scanner.pos));
            }
            b' ' => pos = spaces(bytes, pos),
            _ => return None,
        }
    }
}

/// The integer of at most 18 digits at `pos` (JSON's grammar: no leading
/// zero; not `-0`, which serde_json reads as a double), read and checked
/// in one pass: its value and end. `None` for any other value, a longer
/// integer or a number with a fraction or exponent, which the byte
/// scanner reads (and [`Raw::of_value`] classifies, where the integer
/// must be all of its bytes).
#[inline(always)]
pub(super) fn integer(bytes: &[u8], pos: usize) -> Option<(i64, usize)> {
    let negative = bytes.get(pos) == Some(&b'-');
    let first = pos + usize::from(negative);
    let mut end = first;
    let mut n: i64 = 0;
    while let Some(&digit) = bytes.get(end) {
        if !digit.is_ascii_digit() {
            break;
        }
        if end - first == 18 {
            return None;
        }
        n = n * 10 + i64::from(digit - b'0');
        end += 1;
    }
    let digits = end - first;
    if digits == 0
        || (digits > 1 && bytes[first] == b'0')
        || matches!(bytes.get(end), Some(b'.' | b'e' | b'E'))
    {
        return None;
    }
    match (negative, n) {
        (true, 0) => None,
        (true, n) => Some((-n, end)),
        (false, n) => Some((n, end)),
    }
}

/// Puts `raw` in slot `index` of `out`; `None` if the member was located
/// before (kept twice) or there is no such slot.
#[inline(always)]
fn fill<'a>(out: &mut [Raw<'a>], index: usize, raw: Raw<'a>) -> Option<()> {
    let slot = out.get_mut(index)?;
    if !matches!(slot, Raw::Missing) {
        return None;
    }
    *slot = raw;
    Some(())
}

/// The layout of the last record [`locate`] located whole, to walk the
/// next one by: per member, in order, the bytes from the end of the value
/// before it (or the record's start) to its value's start — `{"name":`
/// for the first, `,"name":` for the others, spaces included — and the
/// index its name was given. Where a record starts with the same bytes,
/// its members are read by comparing them, the names known, instead of
/// finding where each name ends and looking it up.
///
/// A comparison accepts what the walk accepts: the bytes compared were
/// accepted in the record they come from (names without escapes or
/// control characters, checked as text, spaces only `' '`), and every
/// value is still read as the walk reads it. So a record is located the
/// same with or without a shape (property-tested below).
#[derive(Debug, Clone, Default)]
pub(crate) struct Shape {
    /// The members' leading bytes, one after the other.
    prefixes: Vec<u8>,
    /// Per member: the end of its leading bytes in `prefixes`, and its
    /// name's index (`None`: not kept).
    members: Vec<(usize, Option<usize>)>,
    /// The members of the record being located past the foreseen ones:
    /// where their leading bytes start and their value starts, and the
    /// index of their name.
    seen: Vec<(usize, usize, Option<usize>)>,
}

impl Shape {
    /// Reads the members of `bytes` this shape foresees, for as long as
    /// the record has their leading bytes, into `out`: the position after
    /// the last one's value and their number (`(0, 0)`: none); `None` if
    /// a value is one the walk declines.
    #[inline]
    fn walk<'a>(
        &mut self,
        bytes: &'a [u8],
        quotes: &mut Quotes<'a>,
        out: &mut [Raw<'a>],
    ) -> Option<(usize, usize)> {
        self.seen.clear();
        let (mut pos, mut from) = (0, 0);
        for (n, &(to, index)) in self.members.iter().enumerate() {
            let prefix = &self.prefixes[from..to];
            if !starts_with_at(bytes, pos, prefix) {
                return Some((pos, n));
            }
            let (raw, after) = value(bytes, pos + prefix.len(), quotes)?;
            if let Some(index) = index {
                fill(out, index, raw)?;
            }
            (pos, from) = (after, to);
        }
        Some((pos, self.members.len()))
    }

    /// `bytes` was located whole, its first `foreseen` members as this
    /// shape foresaw them and the others in `seen`: unless that was all
    /// of them, this becomes its shape.
    fn keep(&mut self, bytes: &[u8], foreseen: usize) {
        if foreseen == self.members.len() && self.seen.is_empty() {
            return;
        }
        self.members.truncate(foreseen);
        self.prefixes
            .truncate(self.members.last().map_or(0, |&(to, _)| to));
        for &(start, value_start, index) in &self.seen {
            self.prefixes.extend_from_slice(&bytes[start..value_start]);
            self.members.push((self.prefixes.len(), index));
        }
        self.seen.clear();
    }
}

/// Whether `bytes` holds `prefix` at `pos`, compared a word at a time.
#[inline(always)]
fn starts_with_at(bytes: &[u8], pos: usize, prefix: &[u8]) -> bool {
    let Some(window) = bytes.get(pos..pos + prefix.len()) else {
        return false;
    };
    let word = |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
    let n = prefix.len();
    if n < 8 {
        return window == prefix;
    }
    let mut at = 0;
    while at + 8 < n {
        if word(window, at) != word(prefix, at) {
            return false;
        }
        at += 8;
    }
    // The last 8 bytes (overlapping the word before when `n` is not a
    // multiple of 8).
    word(window, n - 8) == word(prefix, n - 8)
}

/// The position after the byte `expected`, found at `pos` after any
/// spaces.
#[inline(always)]
fn after_spaces(bytes: &[u8], pos: usize, expected: u8) -> Option<usize> {
    match bytes.get(pos) {
        Some(&b) if b == expected => Some(pos + 1),
        Some(b' ') => {
            let pos = spaces(bytes, pos);
            (bytes.get(pos) == Some(&expected)).then_some(pos + 1)
        }
        _ => None,
    }
}

/// The position of the first byte at or after `pos` that is not `' '`.
#[inline(always)]
fn spaces(bytes: &[u8], mut pos: usize) -> usize {
    while bytes.get(pos) == Some(&b' ') {
        pos += 1;
    }
    pos
}

/// Where the strings of a record end, read off the masks of its blocks,
/// each block looked at once, when a string reaches it.
struct Quotes<'a> {
    bytes: &'a [u8],
    /// The block whose quote mask `quotes` is (none yet: `usize::MAX`).
    block: usize,
    /// Its `"` bytes (bit `i`: byte `i` of the block).
    quotes: u64,
}

impl<'a> Quotes<'a> {
    /// The quotes of `bytes`, no block read yet.
    fn new(bytes: &'a [u8]) -> Quotes<'a> {
        Quotes {
            bytes,
            block: usize::MAX,
            quotes: 0,
        }
    }

    /// The closing quote of the string whose opening quote is at `open`:
    /// the next quote, as the string has no escape. `None` if there is
    /// none, or a block the string reaches holds a `\` or control
    /// character (so the string may hold one).
    #[inline(always)]
    fn end_of_string(&mut self, open: usize) -> Option<usize> {
        let from = open + 1;
        let mut block = from / BLOCK;
        self.read(block)?;
        // The quotes at `from` or after, in its block.
        let mut quotes = self.quotes & (u64::MAX << (from % BLOCK));
        while quotes == 0 {
            block += 1;
            self.read(block)?;
            quotes = self.quotes;
        }
        Some(block * BLOCK + quotes.trailing_zeros() as usize)
    }

    /// Makes `block` the block read; `None` past the record's end or if
    /// the block holds a `\` or control character.
    #[inline(always)]
    fn read(&mut self, block: usize) -> Option<()> {
        if block != self.block {
            self.quotes = block_quotes(self.bytes, block)?;
            self.block = block;
        }
        Some(())
    }
}

/// The quote mask of block `block` of `bytes`; `None` past their end or if
/// the block holds a `\` or control character.
fn block_quotes(bytes: &[u8], block: usize) -> Option<u64> {
    let rest = bytes.get(block * BLOCK..).filter(|rest| !rest.is_empty())?;
    let (quotes, unfit) = match rest.first_chunk::<BLOCK>() {
        Some(chunk) => masks(chunk),
        None => {
            let mut padded = [b' '; BLOCK];
            padded[..rest.len()].copy_from_slice(rest);
            masks(&padded)
        }
    };
    (!unfit).then_some(quotes)
}

/// The quote mask of a block and whether it holds an unfit byte (a `\`
/// or control character) ([`block_quotes`]).
#[cfg(target_arch = "x86_64")]
fn masks(block: &[u8; BLOCK]) -> (u64, bool) {
    if std::arch::is_x86_feature_detected!("avx512bw") {
        // SAFETY: the processor has AVX-512BW (detected once, then cached).
        return unsafe { masks_avx512(block) };
    }
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2 (detected once, then cached).
        return unsafe { masks_avx2(block) };
    }
    // SAFETY: SSE2 is part of every x86-64 processor.
    unsafe { masks_sse2(block) }
}

/// [`masks`], 32 bytes per AVX2 comparison (processors with AVX2 but not
/// AVX-512BW, such as AMD's before Zen 4: half the SSE2 version's
/// instructions).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn masks_avx2(block: &[u8; BLOCK]) -> (u64, bool) {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_min_epu8, _mm256_movemask_epi8,
        _mm256_or_si256, _mm256_set1_epi8,
    };
    let quote = _mm256_set1_epi8(b'"' as i8);
    let backslash = _mm256_set1_epi8(b'\\' as i8);
    let last_control = _mm256_set1_epi8(0x1f);
    // SAFETY: `block` is 64 readable bytes, two loads of 32 from its
    // start and middle, which have no alignment requirement.
    let (low, high) = unsafe {
        (
            _mm256_loadu_si256(block.as_ptr().cast::<__m256i>()),
            _mm256_loadu_si256(block.as_ptr().add(32).cast::<__m256i>()),
        )
    };
    let quotes = |v| _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, quote)) as u32;
    // v <= 0x1f, unsigned: the smaller of v and 0x1f is v.
    let unfit = |v| {
        _mm256_or_si256(
            _mm256_cmpeq_epi8(v, backslash),
            _mm256_cmpeq_epi8(_mm256_min_epu8(v, last_control), v),
        )
    };
    let quotes = u64::from(quotes(low)) | (u64::from(quotes(high)) << 32);
    let unfit = _mm256_movemask_epi8(_mm256_or_si256(unfit(low), unfit(high)));
    (quotes, unfit != 0)
}

/// [`masks`], the whole block in one AVX-512 comparison each.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512bw")]
fn masks_avx512(block: &[u8; BLOCK]) -> (u64, bool) {
    use std::arch::x86_64::{
        _mm512_cmpeq_epi8_mask, _mm512_cmple_epu8_mask, _mm512_loadu_si512, _mm512_set1_epi8,
    };
    // SAFETY: `block` is 64 readable bytes, and the load has no alignment
    // requirement.
    let v = unsafe { _mm512_loadu_si512(block.as_ptr().cast()) };
    let quotes = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'"' as i8));
    let backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'\\' as i8));
    let control = _mm512_cmple_epu8_mask(v, _mm512_set1_epi8(0x1f));
    (quotes, (backslash | control) != 0)
}

/// [`masks`], 16 bytes per SSE2 comparison.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "sse2")]
fn masks_sse2(block: &[u8; BLOCK]) -> (u64, bool) {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8, _mm_setzero_si128,
    };
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let last_control = _mm_set1_epi8(0x1f);
    let mut quotes = 0u64;
    // The unfit bytes of all lanes together: only whether there is one
    // matters.
    let mut unfit = _mm_setzero_si128();
    for (i, lane) in block.chunks_exact(16).enumerate() {
        // SAFETY: `lane` is 16 readable bytes, and the load has no
        // alignment requirement.
        let v = unsafe { _mm_loadu_si128(lane.as_ptr().cast::<__m128i>()) };
        let is_quote = _mm_cmpeq_epi8(v, quote);
        let is_backslash = _mm_cmpeq_epi8(v, backslash);
        // v <= 0x1f, unsigned: the smaller of v and 0x1f is v.
        let is_control = _mm_cmpeq_epi8(_mm_min_epu8(v, last_control), v);
        let q = _mm_movemask_epi8(is_quote) as u16;
        quotes |= u64::from(q) << (16 * i);
        unfit = _mm_or_si128(unfit, _mm_or_si128(is_backslash, is_control));
    }
    (quotes, _mm_movemask_epi8(unfit) != 0)
}

/// The quote mask of a block and whether it holds an unfit byte
/// ([`block_quotes`]), a byte at a time.
#[cfg(not(target_arch = "x86_64"))]
fn masks(block: &[u8; BLOCK]) -> (u64, bool) {
    masks_bytewise(block)
}

/// The masks a byte at a time: the portable version, and the reference the
/// SSE2 one is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn masks_bytewise(block: &[u8; BLOCK]) -> (u64, bool) {
    let mut quotes = 0u64;
    for (i, &b) in block.iter().enumerate() {
        quotes |= u64::from(b == b'"') << i;
    }
    (quotes, block.iter().any(|&b| b == b'\\' || b < 0x20))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// What the quick pass locates in `bytes` keeping `keep`.
    fn quick<'a>(bytes: &'a [u8], keep: &[&str]) -> Option<Vec<Raw<'a>>> {
        shaped(bytes, keep, None)
    }

    /// What the quick pass locates in `bytes` keeping `keep`, reading it
    /// by `shape` if given.
    fn shaped<'a>(
        bytes: &'a [u8],
        keep: &[&str],
        shape: Option<&mut Shape>,
    ) -> Option<Vec<Raw<'a>>> {
        let mut out = vec![Raw::Missing; keep.len()];
        let position_in =
            |bytes: &[u8], start, end| keep.iter().position(|k| k.as_bytes() == &bytes[start..end]);
        locate(bytes, position_in, &mut out, shape)?;
        Some(out)
    }

    /// What the byte scanner locates in `bytes` keeping `keep` (a member
    /// kept twice declined, as the quick pass does).
    fn scanner<'a>(bytes: &'a [u8], keep: &[&str]) -> Option<Vec<Raw<'a>>> {
        let mut out = vec![Raw::Missing; keep.len()];
        super::super::scan_kept(
            bytes,
            |name| keep.iter().position(|k| k.as_bytes() == name),
            |i, raw| {
                if out[i] != Raw::Missing {
                    return None;
                }
                out[i] = raw;
                Some(())
            },
        )?;
        Some(out)
    }

    #[test]
    fn seed_events_take_the_quick_pass() {
        let keep = ["user_id", "event_type", "amount", "event_time"];
        let event = br#"{"event_id":"1-000000000","user_id":"user-38","event_type":"cart","product_id":"p-4855","amount":13.05,"currency":"EUR","event_time":"2026-01-01T00:00:00.000Z"}"#;
        let found = quick(event, &keep).expect("the quick pass answers");
        assert_eq!(
            found,
            vec![
                Raw::Text(b"user-38"),
                Raw::Text(b"cart"),
                Raw::Other(b"13.05"),
                Raw::Text(b"2026-01-01T00:00:00.000Z"),
            ]
        );
        assert_eq!(Some(found), scanner(event, &keep));
        // Spaced as Python's json.dumps writes it, with literals, and a
        // long string crossing several blocks.
        let long = "x".repeat(200);
        let spaced =
            format!(r#" {{ "a": 1, "b" : "{long}", "c": true, "d": null, "e": -2.5e3 }} "#);
        let found =
            quick(spaced.as_bytes(), &["e", "b", "c", "z"]).expect("the quick pass answers");
        assert_eq!(
            found,
            vec![
                Raw::Other(b"-2.5e3"),
                Raw::Text(long.as_bytes()),
                Raw::Other(b"true"),
                Raw::Missing,
            ]
        );
        assert_eq!(quick(b"{}", &["a"]), Some(vec![Raw::Missing]));
    }

    #[test]
    fn what_it_is_not_sure_of_is_declined() {
        for bytes in [
            &br#"{"a":"x\"y"}"#[..],
            br#"{"a\u0062":1}"#,
            b"{\"a\":\"x\ty\"}",
            b"{\"a\":\n1}",
            br#"{"a":[1]}"#,
            br#"{"a":{"b":1}}"#,
            br#"{"a":"unterminated}"#,
            br#"{"a":01}"#,
            br#"{"a":1,}"#,
            br#"{"a":1} x"#,
            br#"{"a":1,"a":2}"#,
            br#"{"b":"x\\","a":1}"#,
            br#"[1]"#,
        ] {
            assert_eq!(
                quick(bytes, &["a"]),
                None,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    /// A member's value for the generated objects: strings of every
    /// length around the blocks, escapes, control characters, numbers,
    /// literals, nesting and damage.
    fn arb_value() -> impl Strategy<Value = String> {
        prop_oneof![
            (0usize..130).prop_map(|n| format!("\"{}\"", "y".repeat(n))),
            Just(r#""x\"y""#.to_string()),
            Just("\"tab\there\"".to_string()),
            Just("\"caf\u{e9}\"".to_string()),
            Just("-12.5e-3".to_string()),
            Just("0".to_string()),
            Just("012".to_string()),
            Just("true".to_string()),
            Just("nul".to_string()),
            Just("[1,\"a\"]".to_string()),
            Just("{}".to_string()),
        ]
    }

    /// A JSON object's bytes from pieces that exercise the quick pass and
    /// its edges: strings around block boundaries, escapes, control
    /// characters, nesting, spaces, damage.
    fn arb_object() -> impl Strategy<Value = Vec<u8>> {
        let name = prop_oneof![Just("a"), Just("b"), Just("c"), Just("é"), Just("a\\n")];
        let value = arb_value();
        let space = prop_oneof![Just(""), Just(" "), Just("  "), Just("\n")];
        (
            proptest::collection::vec((name, value, space.clone()), 0..6),
            space,
            0usize..3,
        )
            .prop_map(|(members, outer, damage)| {
                let body: Vec<String> = members
                    .iter()
                    .map(|(n, v, s)| format!("{s}\"{n}\"{s}:{s}{v}{s}"))
                    .collect();
                let mut bytes = format!("{outer}{{{}}}{outer}", body.join(",")).into_bytes();
                match damage {
                    1 => {
                        bytes.pop();
                    }
                    2 if bytes.len() > 3 => {
                        let at = bytes.len() / 2;
                        bytes[at] = b'"';
                    }
                    _ => {}
                }
                bytes
            })
    }

    #[test]
    fn integers_are_read_in_one_pass_only_where_they_build_as_integers() {
        let read = |text: &str| integer(text.as_bytes(), 0);
        assert_eq!(read("0,"), Some((0, 1)));
        assert_eq!(read("-5}"), Some((-5, 2)));
        assert_eq!(
            read("123456789012345678"),
            Some((123_456_789_012_345_678, 18))
        );
        assert_eq!(
            read("-123456789012345678 "),
            Some((-123_456_789_012_345_678, 19))
        );
        // The byte scanner reads these (or refuses them).
        for other in [
            "-0",
            "007",
            "1234567890123456789",
            "12.5",
            "1e3",
            "2E1",
            "-",
            "-x",
            "t",
        ] {
            assert_eq!(read(other), None, "{other}");
        }
    }

    #[test]
    fn records_of_one_shape_are_read_by_it() {
        let keep = ["user_id", "amount"];
        let mut shape = Shape::default();
        let first = br#"{"event_id": "1", "user_id": "user-38", "amount": 13.05}"#;
        let found = shaped(first, &keep, Some(&mut shape)).expect("the quick pass answers");
        assert_eq!(found, [Raw::Text(b"user-38"), Raw::Other(b"13.05")]);
        assert_eq!(shape.members, [(13, None), (26, Some(0)), (38, Some(1))]);
        assert_eq!(
            &shape.prefixes[..],
            br#"{"event_id": , "user_id": , "amount": "#
        );
        // The next record is read by it, and keeps it.
        let second = br#"{"event_id": "2", "user_id": "user-9", "amount": 7}"#;
        let found = shaped(second, &keep, Some(&mut shape)).expect("the quick pass answers");
        assert_eq!(found, [Raw::Text(b"user-9"), Raw::Int(b"7", 7)]);
        assert_eq!(shape.members.len(), 3);
        // One that differs after its first member gives its own shape.
        let third = br#"{"event_id": "3","amount":1,"user_id":"u"}"#;
        let found = shaped(third, &keep, Some(&mut shape)).expect("the quick pass answers");
        assert_eq!(found, [Raw::Text(b"u"), Raw::Int(b"1", 1)]);
        assert_eq!(
            &shape.prefixes[..],
            br#"{"event_id": ,"amount":,"user_id":"#
        );
        // A value the walk declines is declined read by the shape too,
        // and a member kept twice.
        assert_eq!(
            shaped(
                br#"{"event_id": "3","amount":01,"user_id":"u"}"#,
                &keep,
                Some(&mut shape)
            ),
            None
        );
        assert_eq!(
            shaped(
                br#"{"event_id": "3","amount":1,"user_id":"u","amount":2}"#,
                &keep,
                Some(&mut shape)
            ),
            None
        );
        assert_eq!(
            shaped(
                br#"{"event_id": "3","amount":1,"user_id":"u\n"}"#,
                &keep,
                Some(&mut shape)
            ),
            None
        );
        // Fewer members, or none.
        assert_eq!(
            shaped(br#"{"event_id": "4"}"#, &keep, Some(&mut shape)),
            Some(vec![Raw::Missing; 2])
        );
        assert_eq!(
            shaped(b"{}", &keep, Some(&mut shape)),
            Some(vec![Raw::Missing; 2])
        );
        assert!(shape.members.is_empty());
    }

    /// Records sharing members and spacing, as a topic's records do, with
    /// some changed: a member left out, another spacing, damage.
    fn arb_records() -> impl Strategy<Value = Vec<Vec<u8>>> {
        let name = prop_oneof![
            Just("a"),
            Just("b"),
            Just("c"),
            Just("é"),
            Just("long_name_0123456789")
        ];
        let space = prop_oneof![Just(""), Just(" "), Just("  "), Just("\n")];
        let value = arb_value();
        let members = proptest::collection::vec((name, space.clone()), 0..6);
        let records = proptest::collection::vec(
            (proptest::collection::vec(value, 6), 0usize..8, space),
            1..8,
        );
        (members, records).prop_map(|(members, records)| {
            records
                .into_iter()
                .map(|(values, change, other_space)| {
                    let mut members = members.clone();
                    match change {
                        5 => {
                            members.pop();
                        }
                        6 if !members.is_empty() => members[0].1 = other_space,
                        _ => {}
                    }
                    let body: Vec<String> = members
                        .iter()
                        .zip(&values)
                        .map(|((n, s), v)| format!("{s}\"{n}\"{s}:{s}{v}"))
                        .collect();
                    let mut bytes = format!("{{{}}}", body.join(",")).into_bytes();
                    if change == 7 && bytes.len() > 3 {
                        let at = bytes.len() / 2;
                        bytes[at] = b'"';
                    }
                    bytes
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// Read by the shape the records before left, a record is located
        /// as without it — and so as the byte scanner locates it.
        #[test]
        fn a_shape_changes_nothing_located(
            records in arb_records(),
            keep in proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("é"), Just("long_name_0123456789")], 0..3),
        ) {
            let mut shape = Shape::default();
            for bytes in &records {
                let found = shaped(bytes, &keep, Some(&mut shape));
                prop_assert_eq!(&found, &quick(bytes, &keep), "{:?}", String::from_utf8_lossy(bytes));
                if found.is_some() {
                    prop_assert_eq!(found, scanner(bytes, &keep));
                }
            }
        }

        /// Where the quick pass answers, the byte scanner answers the same.
        #[test]
        fn the_quick_pass_answers_as_the_byte_scanner(
            bytes in arb_object(),
            keep in proptest::collection::vec(prop_oneof![Just("a"), Just("b"), Just("é")], 0..3),
        ) {
            if let Some(found) = quick(&bytes, &keep) {
                prop_assert_eq!(Some(found), scanner(&bytes, &keep), "{:?}", String::from_utf8_lossy(&bytes));
            }
        }

        /// The SSE2, AVX2 and AVX-512 masks are the byte loop's (AVX2 and
        /// AVX-512 where the processor has them).
        #[test]
        fn masks_agree_with_the_byte_loop(
            block in proptest::collection::vec(
                // Mostly printable, so that blocks without an unfit byte
                // come often.
                prop_oneof![8 => 0x20u8..0x7f, 1 => any::<u8>()],
                BLOCK,
            ),
        ) {
            let block: [u8; BLOCK] = block.try_into().unwrap();
            prop_assert_eq!(masks(&block), masks_bytewise(&block));
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: SSE2 is part of every x86-64 processor.
                prop_assert_eq!(unsafe { masks_sse2(&block) }, masks_bytewise(&block));
                if std::arch::is_x86_feature_detected!("avx512bw") {
                    // SAFETY: detected just above.
                    prop_assert_eq!(unsafe { masks_avx512(&block) }, masks_bytewise(&block));
                }
                if std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: detected just above.
                    prop_assert_eq!(unsafe { masks_avx2(&block) }, masks_bytewise(&block));
                }
            }
        }
    }
}
