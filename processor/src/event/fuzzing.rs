//! The body of the `event_decode` fuzz target (fuzz/fuzz_targets/), in the
//! crate so that the target and the corpus test
//! (processor/tests/fuzz_corpus.rs) run the same code.
//!
//! Invariants checked on any input: the hand-written decoder (the quick
//! pass over SSE2 masks, else the byte scanner) never panics; where it
//! answers, serde_json accepts the same bytes and builds the same values;
//! and the members it locates without building build to those values.

use serde_json::Value;

use super::decode_fields_serde;
use super::scan::{decode_fields, locate_fields, NameSet, Raw};

/// The member names a fuzzed record is decoded by (its first byte picks
/// one set): the seed's, short and repeated ones, one longer than the 16
/// bytes compared as words, one with a non-ASCII byte, the empty name.
const NAME_SETS: &[&[&str]] = &[
    &["user_id", "event_type", "amount", "event_time"],
    &["a", "b", "c"],
    &["a_name_longer_than_sixteen_bytes", "a"],
    &["caf\u{e9}", ""],
];

/// Decodes `data` (after its first byte, which picks the names) and checks
/// the invariants above.
pub fn fuzz_event_decode(data: &[u8]) {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    let names: Vec<String> = NAME_SETS[usize::from(pick) % NAME_SETS.len()]
        .iter()
        .map(|n| n.to_string())
        .collect();
    let fast = decode_fields(bytes, &names);
    if let Some(values) = &fast {
        match decode_fields_serde(bytes, &names) {
            Ok(reference) => assert_eq!(values, &reference, "{:?}", String::from_utf8_lossy(bytes)),
            Err(e) => panic!(
                "the fast path accepted what serde_json refuses ({e}): {:?}",
                String::from_utf8_lossy(bytes)
            ),
        }
    }
    let mut raws = vec![Raw::Missing; names.len()];
    if locate_fields(bytes, &NameSet::new(&names), &mut raws, None).is_some() {
        let built: Option<Vec<Value>> = raws.iter().map(|r| r.build()).collect();
        if let Some(built) = built {
            assert_eq!(Some(built), fast, "{:?}", String::from_utf8_lossy(bytes));
        }
    }
}
