//! The quick pass of [`super::locate_fields`] and [`super::decode_fields`],
//! for the records nearly every topic holds: a flat JSON object whose
//! strings have no escapes and no control characters, spaced by nothing
//! but `' '`.
//!
//! The record is looked at in blocks of 64 bytes: SSE2 comparisons (on
//! x86-64; a byte loop elsewhere) give a block's `"` bytes as a bit mask,
//! and whether it holds a byte no fast string may hold (`\` or a control
//! character). Where a string starts is known from the grammar; with no
//! such byte in the blocks it reaches, it ends at the next quote — one
//! `trailing_zeros` instead of a loop over its bytes, each block's masks
//! made once, when the first string reaches it. The walk over the members
//! reads only the few bytes between strings: the `:` and `,`, numbers and
//! literals (checked by the byte scanner's grammar, which takes no `\` or
//! control character either).
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
pub(super) fn locate<'a>(
    bytes: &'a [u8],
    position_in: impl Fn(&[u8], usize, usize) -> Option<usize>,
    out: &mut [Raw<'a>],
) -> Option<()> {
    let mut quotes = Quotes::new(bytes);
    let mut pos = spaces(bytes, 0);
    if bytes.get(pos) != Some(&b'{') {
        return None;
    }
    pos = spaces(bytes, pos + 1);
    if bytes.get(pos) == Some(&b'}') {
        return (spaces(bytes, pos + 1) == bytes.len()).then_some(());
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
        pos = after_spaces(bytes, end + 1, b':')?;
        let raw = loop {
            let start = pos;
            match *bytes.get(pos)? {
                b'"' => {
                    let close = quotes.end_of_string(pos)?;
                    pos = close + 1;
                    break Raw::Text(&bytes[start + 1..close]);
                }
                b'-' | b'0'..=b'9' | b't' | b'f' | b'n' => {
                    let mut scanner = Scanner { bytes, pos };
                    scanner.skip_value(0)?;
                    pos = scanner.pos;
                    break Raw::Other(&bytes[start..pos]);
                }
                b' ' => pos = spaces(bytes, pos),
                _ => return None,
            }
        };
        if let Some(index) = index {
            let slot = out.get_mut(index)?;
            if !matches!(slot, Raw::Missing) {
                return None;
            }
            *slot = raw;
        }
        loop {
            match bytes.get(pos) {
                Some(b',') => break pos += 1,
                Some(b'}') => return (spaces(bytes, pos + 1) == bytes.len()).then_some(()),
                Some(b' ') => pos = spaces(bytes, pos),
                _ => return None,
            }
        }
    }
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
    // SAFETY: SSE2 is part of every x86-64 processor.
    unsafe { masks_sse2(block) }
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
        let mut out = vec![Raw::Missing; keep.len()];
        let position_in =
            |bytes: &[u8], start, end| keep.iter().position(|k| k.as_bytes() == &bytes[start..end]);
        locate(bytes, position_in, &mut out)?;
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

    /// A JSON object's bytes from pieces that exercise the quick pass and
    /// its edges: strings around block boundaries, escapes, control
    /// characters, nesting, spaces, damage.
    fn arb_object() -> impl Strategy<Value = Vec<u8>> {
        let name = prop_oneof![Just("a"), Just("b"), Just("c"), Just("é"), Just("a\\n")];
        let value = prop_oneof![
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
        ];
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

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

        /// The SSE2 masks are the byte loop's.
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
        }
    }
}
