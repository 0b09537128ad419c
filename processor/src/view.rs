//! Reading a view: point lookups, prefix and key ranges, a key's windows in
//! a time range — each answer says as of which input offsets and watermark.
//!
//! A view stores accumulators, not rows (see `operator::aggregate`): a read
//! computes each row's columns with the version's aggregate spec (kept in
//! its state under [`SPEC_META`]), skips rows HAVING rejects and, for EMIT
//! FINAL, windows the committed watermark has not closed. Everything is read
//! from one snapshot, so rows, watermark and offsets belong to one commit.

use serde::Serialize;
use serde_json::Value;

use std::collections::VecDeque;

use crate::aggregate::Accumulator;
use crate::error::{ProcessorError, Result};
use crate::operator::aggregate::{fresh_accs, row_of};
use crate::plan::{AggregateSpec, Emit};
use crate::state::key;
use crate::state::slot::{self, GroupForm};
use crate::state::store::{ns, Scope, Snapshot, Store};
use crate::window::{hopping, Window, WindowSpec};

/// One view row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ViewRow {
    /// The row's key.
    pub key: String,
    /// Window start, for windowed views.
    pub window_start: Option<i64>,
    /// Window end (exclusive), for windowed views.
    pub window_end: Option<i64>,
    /// The row.
    pub row: Value,
}

/// What a query asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewQuery {
    /// All rows of one key (every window of it, for windowed views).
    Key(String),
    /// One key's windows starting in `[from, to)`.
    KeyWindows {
        /// The key.
        key: String,
        /// Earliest window start.
        from: i64,
        /// Window starts before this.
        to: i64,
    },
    /// Rows whose key starts with this.
    Prefix(String),
    /// Every row.
    All,
}

/// Where the rows were read: the committed input position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsOf {
    /// Committed offset per input partition.
    pub offsets: Vec<u64>,
    /// Committed watermark, if any.
    pub watermark: Option<i64>,
}

/// Meta entry (in the version's state column family) holding the
/// aggregate spec that readers compute rows with; written at open.
pub const SPEC_META: &str = "spec";

fn meta_key(name: &str) -> Vec<u8> {
    let mut k = vec![ns::META];
    k.extend_from_slice(name.as_bytes());
    k
}

/// What a reader needs to turn stored slots into rows.
struct RowReader<'a> {
    scope: &'a Scope,
    spec: AggregateSpec,
    /// Committed watermark (`i64::MIN` before the first).
    watermark: i64,
}

impl RowReader<'_> {
    fn bad(&self, reason: &str) -> ProcessorError {
        ProcessorError::CorruptState {
            cf: self.scope.view_cf(),
            reason: reason.to_string(),
        }
    }

    /// The row stored under `k`, or `None` when it is not visible: HAVING
    /// rejects it, or (EMIT FINAL) its window has not closed.
    fn row(&self, k: &[u8], v: &[u8]) -> Result<Option<ViewRow>> {
        let (key_bytes, rest) = key::decode_group_key(k).ok_or_else(|| self.bad("bad view key"))?;
        let window = if rest.is_empty() {
            None
        } else {
            let (start, rest) = key::decode_i64(rest).ok_or_else(|| self.bad("bad window"))?;
            let (end, _) = key::decode_i64(rest).ok_or_else(|| self.bad("bad window"))?;
            Some(Window { start, end })
        };
        if let (Some(w), Some(ws)) = (window, &self.spec.window) {
            if ws.emit == Emit::Final && w.end.saturating_add(ws.grace_ms) > self.watermark {
                return Ok(None);
            }
        }
        let key = String::from_utf8_lossy(&key_bytes).into_owned();
        let (form, accs) = slot::decode(v).ok_or_else(|| self.bad("bad accumulator value"))?;
        let group = form.values(&key).ok_or_else(|| self.bad("bad group key"))?;
        Ok(
            row_of(&self.spec, &group, window, &accs).map(|row| ViewRow {
                key,
                window_start: window.map(|w| w.start),
                window_end: window.map(|w| w.end),
                row,
            }),
        )
    }
}

/// The key range a query covers.
fn bounds(query: &ViewQuery) -> (Vec<u8>, Option<Vec<u8>>) {
    match query {
        ViewQuery::Key(k) => {
            let lower = key::plain(k.as_bytes());
            let mut upper = lower.clone();
            // The terminator is 0x00 0x01; 0x00 0x02 ends this key's range.
            *upper.last_mut().expect("terminated") += 1;
            (lower, Some(upper))
        }
        ViewQuery::KeyWindows { key: k, from, to } => {
            let (lower, upper) = key::window_range(k.as_bytes(), *from, *to);
            (lower, Some(upper))
        }
        ViewQuery::Prefix(p) => {
            let mut lower = Vec::new();
            for &b in p.as_bytes() {
                lower.push(b);
                if b == 0 {
                    lower.push(0xFF);
                }
            }
            let upper = key::prefix_end(&lower);
            (lower, upper)
        }
        ViewQuery::All => (Vec::new(), None),
    }
}

/// Reads rows of `scope`'s view: at most `limit`, starting after `cursor`
/// (an opaque key from a previous page). Returns the rows and the cursor
/// of the next page, if there is more.
pub fn query(
    store: &Store,
    scope: &Scope,
    query: &ViewQuery,
    cursor: Option<&[u8]>,
    limit: usize,
) -> Result<(Vec<ViewRow>, Option<Vec<u8>>)> {
    let snapshot = store.snapshot();
    read_rows(&snapshot, scope, query, cursor, limit)
}

/// [`query`] and the committed position the rows reflect, read from one
/// snapshot so the two always agree.
pub fn query_as_of(
    store: &Store,
    scope: &Scope,
    query: &ViewQuery,
    cursor: Option<&[u8]>,
    limit: usize,
    partitions: usize,
) -> Result<(Vec<ViewRow>, Option<Vec<u8>>, AsOf)> {
    let snapshot = store.snapshot();
    let (rows, next) = read_rows(&snapshot, scope, query, cursor, limit)?;
    Ok((rows, next, read_as_of(&snapshot, scope, partitions)?))
}

/// Up to `limit` rows of `query` from `snapshot`, after `cursor`, and the
/// cursor of the next page (used by [`query`] and [`crate::diff`]).
pub(crate) fn read_rows(
    snapshot: &Snapshot<'_>,
    scope: &Scope,
    query: &ViewQuery,
    cursor: Option<&[u8]>,
    limit: usize,
) -> Result<(Vec<ViewRow>, Option<Vec<u8>>)> {
    let spec_bytes = snapshot
        .get(&scope.state_cf(), &meta_key(SPEC_META))?
        .ok_or_else(|| ProcessorError::NotFound(format!("view {}", scope.view_cf())))?;
    let spec: AggregateSpec =
        serde_json::from_slice(&spec_bytes).map_err(|e| ProcessorError::CorruptState {
            cf: scope.state_cf(),
            reason: format!("view spec: {e}"),
        })?;
    let reader = RowReader {
        scope,
        spec,
        watermark: read_u64(snapshot, scope, "watermark")?.map_or(i64::MIN, |w| w as i64),
    };
    let (lower, upper) = bounds(query);
    let mut start = match cursor {
        Some(c) if c > lower.as_slice() => {
            let mut after = c.to_vec();
            after.push(0);
            after
        }
        _ => lower,
    };
    // Open hopping windows (EMIT CHANGES) are not stored as rows: they are
    // merged from their slices and interleaved with the stored rows.
    let hopping_changes = matches!(
        reader.spec.window.as_ref().map(|w| (w.window, w.emit)),
        Some((WindowSpec::Hopping { .. }, Emit::Changes))
    );
    let mut open = OpenRows::new(
        snapshot,
        &reader,
        (&start, upper.as_deref()),
        hopping_changes,
        OPEN_SLICES_CHUNK,
    );
    // Hidden rows (HAVING, open EMIT FINAL windows) are skipped, so read
    // pages until one row past the limit is found or the range ends.
    let page = limit.saturating_add(1).clamp(16, 4096);
    let mut rows = Vec::new();
    let mut last_key: Option<Vec<u8>> = None;
    // Adds a row; true once a row past the limit shows there is more.
    let mut push = |k: &[u8], row: ViewRow| {
        if rows.len() == limit {
            return true;
        }
        rows.push(row);
        last_key = Some(k.to_vec());
        false
    };
    loop {
        let raw = snapshot.scan(&scope.view_cf(), &start, upper.as_deref(), page)?;
        let exhausted = raw.len() < page;
        for (k, v) in &raw {
            while open.peek_key()?.is_some_and(|ok| ok < k.as_slice()) {
                let (ok, row) = open.pop().expect("peeked");
                if push(&ok, row) {
                    return Ok((rows, last_key));
                }
            }
            if let Some(row) = reader.row(k, v)? {
                if push(k, row) {
                    return Ok((rows, last_key));
                }
            }
        }
        match raw.last() {
            Some((k, _)) if !exhausted => {
                start = k.clone();
                start.push(0);
            }
            _ => break,
        }
    }
    while open.peek_key()?.is_some() {
        let (ok, row) = open.pop().expect("peeked");
        if push(&ok, row) {
            return Ok((rows, last_key));
        }
    }
    Ok((rows, None))
}

/// A hopping slice's start and accumulators.
type SliceAccs = (i64, Vec<Accumulator>);

/// Slices read at a time by [`OpenRows`] (then completed to a whole group).
const OPEN_SLICES_CHUNK: usize = 4096;

/// The rows of open hopping windows (EMIT CHANGES) whose keys fall in a
/// range, in key order: each window with data that the committed watermark
/// has not closed, merged from its slices in operator state. Slices are
/// read a chunk of whole groups at a time, as the rows are consumed, so a
/// page of a large view reads only the groups it reaches.
struct OpenRows<'a> {
    snapshot: &'a Snapshot<'a>,
    reader: &'a RowReader<'a>,
    /// Row keys in `[start, upper)` are wanted.
    start: Vec<u8>,
    upper: Option<Vec<u8>>,
    /// Where the next slice scan starts (`None`: no more slices).
    next: Option<Vec<u8>>,
    /// End of the slice range.
    slice_upper: Vec<u8>,
    chunk: usize,
    ready: VecDeque<(Vec<u8>, ViewRow)>,
}

impl<'a> OpenRows<'a> {
    /// Open rows with keys in `[start, upper)`; none unless `enabled`.
    fn new(
        snapshot: &'a Snapshot<'a>,
        reader: &'a RowReader<'a>,
        (start, upper): (&[u8], Option<&[u8]>),
        enabled: bool,
        chunk: usize,
    ) -> Self {
        // Whole groups: a window in range may use slices past `upper`.
        let group_start = |k: &[u8]| match key::decode_group_key(k) {
            Some((group, _)) => key::plain(&group),
            None => k.to_vec(),
        };
        let mut lower = vec![ns::ACCUMULATOR];
        lower.extend(group_start(start));
        let slice_upper = match upper {
            Some(u) => {
                let mut end = vec![ns::ACCUMULATOR];
                match key::decode_group_key(u) {
                    Some((group, rest)) if !rest.is_empty() => {
                        let mut g = key::plain(&group);
                        *g.last_mut().expect("terminated") += 1;
                        end.extend(g);
                    }
                    _ => end.extend_from_slice(u),
                }
                end
            }
            None => vec![ns::ACCUMULATOR + 1],
        };
        OpenRows {
            snapshot,
            reader,
            start: start.to_vec(),
            upper: upper.map(<[u8]>::to_vec),
            next: enabled.then_some(lower),
            slice_upper,
            chunk: chunk.max(1),
            ready: VecDeque::new(),
        }
    }

    /// The key of the next open row, reading slices as needed.
    fn peek_key(&mut self) -> Result<Option<&[u8]>> {
        while self.ready.is_empty() {
            let Some(from) = self.next.take() else {
                break;
            };
            self.read_chunk(&from)?;
        }
        Ok(self.ready.front().map(|(k, _)| k.as_slice()))
    }

    /// The next open row (after [`OpenRows::peek_key`] found one).
    fn pop(&mut self) -> Option<(Vec<u8>, ViewRow)> {
        self.ready.pop_front()
    }

    /// Reads up to a chunk of slices from `from`, completed to the end of
    /// the last group, and turns them into rows.
    fn read_chunk(&mut self, from: &[u8]) -> Result<()> {
        let state_cf = self.reader.scope.state_cf();
        let mut slices =
            self.snapshot
                .scan(&state_cf, from, Some(&self.slice_upper), self.chunk)?;
        if slices.len() < self.chunk {
            self.next = None;
        } else {
            let (last, _) = slices.last().expect("a full chunk");
            let (group, _) = key::decode_group_key(&last[1..])
                .ok_or_else(|| self.reader.bad("bad slice key"))?;
            let mut prefix = vec![ns::ACCUMULATOR];
            prefix.extend(key::plain(&group));
            let group_end = key::prefix_end(&prefix)
                .filter(|end| *end < self.slice_upper)
                .unwrap_or_else(|| self.slice_upper.clone());
            let mut after = last.clone();
            after.push(0);
            let rest = self
                .snapshot
                .scan(&state_cf, &after, Some(&group_end), usize::MAX)?;
            slices.extend(rest);
            self.next = (group_end < self.slice_upper).then_some(group_end);
        }
        self.rows_of(&slices)
    }

    /// The open rows of whole groups' slices, in key order.
    fn rows_of(&mut self, slices: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        let reader = self.reader;
        let Some(ws) = &reader.spec.window else {
            return Ok(());
        };
        let WindowSpec::Hopping {
            size_ms,
            advance_ms,
        } = ws.window
        else {
            return Ok(());
        };
        // Slices grouped by view key, in key (then time) order.
        let mut groups: Vec<(Vec<u8>, GroupForm, Vec<SliceAccs>)> = Vec::new();
        for (k, v) in slices {
            let (group, slice_start, _) =
                key::decode_windowed(&k[1..]).ok_or_else(|| reader.bad("bad slice key"))?;
            let (form, accs) = slot::decode(v).ok_or_else(|| reader.bad("bad slice value"))?;
            match groups.last_mut() {
                Some((g, _, list)) if *g == group => list.push((slice_start, accs)),
                _ => groups.push((group, form, vec![(slice_start, accs)])),
            }
        }
        for (group, form, slices) in groups {
            let key = String::from_utf8_lossy(&group).into_owned();
            let values = form
                .values(&key)
                .ok_or_else(|| reader.bad("bad group key"))?;
            let mut starts = std::collections::BTreeSet::new();
            for (s, _) in &slices {
                for w in hopping::windows_of(*s, size_ms, advance_ms) {
                    if w.end.saturating_add(ws.grace_ms) > reader.watermark {
                        starts.insert(w.start);
                    }
                }
            }
            for window_start in starts {
                let w = Window {
                    start: window_start,
                    end: window_start + size_ms,
                };
                let rk = key::windowed(&group, w.start, w.end);
                if rk < self.start || self.upper.as_ref().is_some_and(|u| rk >= *u) {
                    continue;
                }
                let mut accs = fresh_accs(&reader.spec);
                for (_, part) in slices.iter().filter(|(s, _)| w.contains(*s)) {
                    for (acc, p) in accs.iter_mut().zip(part) {
                        acc.merge(p);
                    }
                }
                if let Some(row) = row_of(&reader.spec, &values, Some(w), &accs) {
                    let view_row = ViewRow {
                        key: key.clone(),
                        window_start: Some(w.start),
                        window_end: Some(w.end),
                        row,
                    };
                    self.ready.push_back((rk, view_row));
                }
            }
        }
        Ok(())
    }
}

fn read_u64(snapshot: &Snapshot<'_>, scope: &Scope, name: &str) -> Result<Option<u64>> {
    Ok(snapshot
        .get(&scope.state_cf(), &meta_key(name))?
        .and_then(|v| v.as_slice().try_into().ok())
        .map(u64::from_le_bytes))
}

/// The committed position of `scope` in `snapshot`.
pub(crate) fn read_as_of(
    snapshot: &Snapshot<'_>,
    scope: &Scope,
    partitions: usize,
) -> Result<AsOf> {
    let offsets = (0..partitions)
        .map(|p| Ok(read_u64(snapshot, scope, &format!("offset/{p}"))?.unwrap_or(0)))
        .collect::<Result<_>>()?;
    let watermark = read_u64(snapshot, scope, "watermark")?
        .map(|w| w as i64)
        .filter(|w| *w != i64::MIN);
    Ok(AsOf { offsets, watermark })
}

/// The committed input position of a version.
pub fn as_of(store: &Store, scope: &Scope, partitions: usize) -> Result<AsOf> {
    read_as_of(&store.snapshot(), scope, partitions)
}
