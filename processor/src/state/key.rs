//! The one order-preserving key encoding of state and view rows. RocksDB
//! orders keys bytewise; these encodings make that order the logical one:
//!
//! * a group key (arbitrary bytes) is escaped so no encoded key is a prefix
//!   of another: `0x00` becomes `0x00 0xFF`, and `0x00 0x01` terminates it;
//! * a window is `start` then `end`, each an `i64` with the sign bit flipped,
//!   big-endian — so negative times sort before positive ones.
//!
//! So all windows of one key form one contiguous range, ordered by start,
//! and a key's rows never interleave with another key's.

/// Terminator after an escaped group key.
const TERMINATOR: [u8; 2] = [0x00, 0x01];

/// Appends the escaped, terminated form of `key` to `out`.
pub fn encode_group_key(out: &mut Vec<u8>, key: &[u8]) {
    for &b in key {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&TERMINATOR);
}

/// Decodes an escaped group key at the start of `bytes`; returns the key
/// and the rest.
pub fn decode_group_key(bytes: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut key = Vec::new();
    let mut i = 0;
    loop {
        match *bytes.get(i)? {
            0 => match *bytes.get(i + 1)? {
                0xFF => {
                    key.push(0);
                    i += 2;
                }
                0x01 => return Some((key, &bytes[i + 2..])),
                _ => return None,
            },
            b => {
                key.push(b);
                i += 1;
            }
        }
    }
}

/// Appends `ts` so that byte order equals numeric order.
pub fn encode_i64(out: &mut Vec<u8>, ts: i64) {
    out.extend_from_slice(&((ts as u64) ^ (1 << 63)).to_be_bytes());
}

/// Reads an [`encode_i64`] value from the start of `bytes`.
pub fn decode_i64(bytes: &[u8]) -> Option<(i64, &[u8])> {
    let raw: [u8; 8] = bytes.get(..8)?.try_into().ok()?;
    Some(((u64::from_be_bytes(raw) ^ (1 << 63)) as i64, &bytes[8..]))
}

/// The key of a windowed row: group key, window start, window end.
pub fn windowed(key: &[u8], start: i64, end: i64) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 18);
    windowed_into(&mut out, key, start, end);
    out
}

/// Appends the [`windowed`] key to `out`.
pub fn windowed_into(out: &mut Vec<u8>, key: &[u8], start: i64, end: i64) {
    encode_group_key(out, key);
    encode_i64(out, start);
    encode_i64(out, end);
}

/// The first 8 bytes of `k` (zero-padded) as a number: comparing these
/// and then, on a tie, the whole keys gives byte order — cheaply, when
/// sorting references to keys stored elsewhere.
pub fn order_prefix(k: &[u8]) -> u64 {
    let mut head = [0u8; 8];
    let n = k.len().min(8);
    head[..n].copy_from_slice(&k[..n]);
    u64::from_be_bytes(head)
}

/// Map entries in the byte order of their keys, sorted by
/// [`order_prefix`] first so that most comparisons touch no key memory.
pub fn in_key_order<'a, K, V>(
    entries: impl Iterator<Item = (&'a K, &'a mut V)>,
) -> Vec<(&'a K, &'a mut V)>
where
    K: AsRef<[u8]> + 'a,
    V: 'a,
{
    let mut sorted: Vec<(u64, &'a K, &'a mut V)> = entries
        .map(|(k, v)| (order_prefix(k.as_ref()), k, v))
        .collect();
    sorted.sort_unstable_by(|a, b| (a.0, a.1.as_ref()).cmp(&(b.0, b.1.as_ref())));
    sorted.into_iter().map(|(_, k, v)| (k, v)).collect()
}

/// Decodes a [`windowed`] key.
pub fn decode_windowed(bytes: &[u8]) -> Option<(Vec<u8>, i64, i64)> {
    let (key, rest) = decode_group_key(bytes)?;
    let (start, rest) = decode_i64(rest)?;
    let (end, rest) = decode_i64(rest)?;
    rest.is_empty().then_some((key, start, end))
}

/// The key of an unwindowed row.
pub fn plain(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 2);
    encode_group_key(&mut out, key);
    out
}

/// The range `[lower, upper)` of a key's windows starting in `[from, to)`.
pub fn window_range(key: &[u8], from: i64, to: i64) -> (Vec<u8>, Vec<u8>) {
    let mut lower = plain(key);
    let mut upper = lower.clone();
    encode_i64(&mut lower, from);
    encode_i64(&mut upper, to);
    (lower, upper)
}

/// The smallest key greater than every key starting with `prefix` (for
/// prefix scans), or `None` if there is none (all `0xFF`).
pub fn prefix_end(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn negative_times_sort_first() {
        let (a, b, c) = (
            windowed(b"k", -5, 0),
            windowed(b"k", 0, 5),
            windowed(b"k", 5, 10),
        );
        assert!(a < b && b < c);
    }

    #[test]
    fn a_key_never_interleaves_with_its_extension() {
        // "a" with any window sorts before "a\0..." and "ab".
        let a_late = windowed(b"a", i64::MAX - 1, i64::MAX);
        assert!(a_late < windowed(b"a\0", i64::MIN, i64::MIN + 1));
        assert!(a_late < windowed(b"ab", i64::MIN, i64::MIN + 1));
    }

    proptest! {
        #[test]
        fn prefix_then_key_order_is_byte_order(keys in proptest::collection::vec(proptest::collection::vec(0u8..4, 0..12), 0..40)) {
            let mut by_prefix = keys.clone();
            by_prefix.sort_by(|a, b| (order_prefix(a), a).cmp(&(order_prefix(b), b)));
            let mut bytewise = keys;
            bytewise.sort();
            prop_assert_eq!(by_prefix, bytewise);
        }

        #[test]
        fn windowed_keys_roundtrip(key in proptest::collection::vec(any::<u8>(), 0..20), s in any::<i64>(), e in any::<i64>()) {
            prop_assert_eq!(decode_windowed(&windowed(&key, s, e)), Some((key, s, e)));
        }

        #[test]
        fn byte_order_is_key_then_start_then_end(
            k1 in proptest::collection::vec(any::<u8>(), 0..6), s1 in any::<i64>(), e1 in any::<i64>(),
            k2 in proptest::collection::vec(any::<u8>(), 0..6), s2 in any::<i64>(), e2 in any::<i64>(),
        ) {
            let logical = (k1.clone(), s1, e1).cmp(&(k2.clone(), s2, e2));
            prop_assert_eq!(windowed(&k1, s1, e1).cmp(&windowed(&k2, s2, e2)), logical);
        }

        #[test]
        fn window_ranges_hold_exactly_the_keys_windows(key in proptest::collection::vec(any::<u8>(), 0..6), other in proptest::collection::vec(any::<u8>(), 0..6), s in -1000i64..1000, from in -1000i64..1000, len in 0i64..500) {
            let (lo, hi) = window_range(&key, from, from + len);
            let row = windowed(&key, s, s + 10);
            prop_assert_eq!(lo <= row && row < hi, (from..from + len).contains(&s));
            if other != key {
                let foreign = windowed(&other, s, s + 10);
                prop_assert!(!(lo <= foreign && foreign < hi));
            }
        }
    }
}
