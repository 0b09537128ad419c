//! Comparing two versions of a view, row by row, as of their committed
//! positions: what a new version would change before it serves.
//!
//! Both versions' rows are read in key order (view key, then window) from
//! one snapshot each, a page at a time, and merge-joined: memory stays at
//! two pages and the examples asked for, whatever the views' size.

use std::cmp::Ordering;

use serde::Serialize;
use serde_json::Value;

use crate::error::Result;
use crate::state::store::{Scope, Snapshot, Store};
use crate::view::{read_as_of, read_rows, AsOf, ViewQuery, ViewRow};

/// Rows read from each side at a time.
const PAGE: usize = 1024;

/// How two versions' rows differ.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// The base version's committed position.
    pub base_as_of: AsOf,
    /// The candidate version's committed position.
    pub candidate_as_of: AsOf,
    /// Rows only the candidate has.
    pub added: u64,
    /// Rows only the base has.
    pub removed: u64,
    /// Rows both have, with different values.
    pub changed: u64,
    /// Rows both have, equal.
    pub unchanged: u64,
    /// The first differences in key order, at most the number asked for.
    pub examples: Vec<DiffExample>,
}

/// One row that differs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffExample {
    /// `"added"`, `"removed"` or `"changed"`.
    pub change: &'static str,
    /// The row's key.
    pub key: String,
    /// Window start, for windowed views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_start: Option<i64>,
    /// Window end, for windowed views.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_end: Option<i64>,
    /// The base version's row (null when added).
    pub base: Option<Value>,
    /// The candidate version's row (null when removed).
    pub candidate: Option<Value>,
}

/// The rows of one version in key order, a page at a time.
struct Rows<'a> {
    snapshot: &'a Snapshot<'a>,
    scope: &'a Scope,
    page: std::vec::IntoIter<ViewRow>,
    cursor: Option<Vec<u8>>,
    done: bool,
    next: Option<ViewRow>,
}

impl<'a> Rows<'a> {
    fn new(snapshot: &'a Snapshot<'a>, scope: &'a Scope) -> Result<Rows<'a>> {
        let mut rows = Rows {
            snapshot,
            scope,
            page: Vec::new().into_iter(),
            cursor: None,
            done: false,
            next: None,
        };
        rows.advance()?;
        Ok(rows)
    }

    /// Moves `next` to the following row.
    fn advance(&mut self) -> Result<()> {
        loop {
            if let Some(row) = self.page.next() {
                self.next = Some(row);
                return Ok(());
            }
            if self.done {
                self.next = None;
                return Ok(());
            }
            let (rows, cursor) = read_rows(
                self.snapshot,
                self.scope,
                &ViewQuery::All,
                self.cursor.as_deref(),
                PAGE,
            )?;
            self.done = cursor.is_none();
            self.cursor = cursor;
            self.page = rows.into_iter();
        }
    }
}

/// The order rows are stored in: view key bytes, then window.
fn order(a: &ViewRow, b: &ViewRow) -> Ordering {
    (a.key.as_bytes(), a.window_start, a.window_end).cmp(&(
        b.key.as_bytes(),
        b.window_start,
        b.window_end,
    ))
}

/// Compares `candidate` against `base` (each a store and a version),
/// keeping the first `examples` differences. `partitions` is the input's
/// partition count (for the positions).
pub fn diff(
    base: (&Store, &Scope),
    candidate: (&Store, &Scope),
    partitions: usize,
    examples: usize,
) -> Result<Diff> {
    let (base_snapshot, candidate_snapshot) = (base.0.snapshot(), candidate.0.snapshot());
    let mut out = Diff {
        base_as_of: read_as_of(&base_snapshot, base.1, partitions)?,
        candidate_as_of: read_as_of(&candidate_snapshot, candidate.1, partitions)?,
        added: 0,
        removed: 0,
        changed: 0,
        unchanged: 0,
        examples: Vec::new(),
    };
    let mut left = Rows::new(&base_snapshot, base.1)?;
    let mut right = Rows::new(&candidate_snapshot, candidate.1)?;
    loop {
        let step = match (&left.next, &right.next) {
            (None, None) => break,
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (Some(l), Some(r)) => order(l, r),
        };
        let (change, row, b, c) = match step {
            Ordering::Less => {
                out.removed += 1;
                let l = left.next.take().expect("present");
                left.advance()?;
                let row = l.row.clone();
                ("removed", l, Some(row), None)
            }
            Ordering::Greater => {
                out.added += 1;
                let r = right.next.take().expect("present");
                right.advance()?;
                let row = r.row.clone();
                ("added", r, None, Some(row))
            }
            Ordering::Equal => {
                let (l, r) = (
                    left.next.take().expect("present"),
                    right.next.take().expect("present"),
                );
                left.advance()?;
                right.advance()?;
                if l.row == r.row {
                    out.unchanged += 1;
                    continue;
                }
                out.changed += 1;
                let row = r.row.clone();
                ("changed", r, Some(l.row), Some(row))
            }
        };
        if out.examples.len() < examples {
            out.examples.push(DiffExample {
                change,
                key: row.key,
                window_start: row.window_start,
                window_end: row.window_end,
                base: b,
                candidate: c,
            });
        }
    }
    Ok(out)
}
