//! Tests of the log benchmark: the report's formats and the batches.

use super::report::*;
use super::*;
use crate::bench::report::{compact, thousands};
use crate::machine::{shell_quote, today};

#[test]
fn formats() {
    assert_eq!(thousands(1_234_567.4), "1,234,567");
    assert_eq!(thousands(999.0), "999");
    assert_eq!(thousands(0.0), "0");
    assert_eq!(compact(2_345_678.0), "2.35 M");
    assert_eq!(shell_quote("--runs"), "--runs");
    assert_eq!(shell_quote("a b"), "'a b'");
    let s = summarize([3.0, 1.0, 2.0]);
    assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
    assert_eq!(summarize([1.0, 2.0]).median, 1.5);
    assert_eq!(today().len(), 10);
}

#[test]
fn batches_are_filled_from_the_payload() {
    let payload: &'static [u8] = Box::leak(random_bytes(1000, 1).into_boxed_slice());
    let batch = make_batch(payload, 100, 10);
    assert_eq!(batch.len(), 10);
    assert!(batch
        .iter()
        .all(|r| r.value.len() == 100 && r.key.is_none()));
    assert_ne!(batch[0].value, batch[1].value);
}
