//! Reading a view: point lookups, prefix and key ranges, a key's windows in
//! a time range — each answer says as of which input offsets and watermark.
//! A read can also filter rows on their window bounds ([`RowFilter`], what
//! a pull query's `WINDOWSTART`/`WINDOWEND` conditions ask) with a cap on
//! the rows it examines, answering a cursor to continue from.
//!
//! A view stores accumulators, not rows (see `operator::aggregate`): a read
//! computes each row's columns with the version's aggregate spec (kept in
//! its state under [`Meta::Spec`]), skips rows HAVING rejects and, for EMIT
//! FINAL, windows the committed watermark has not closed. Everything is read
//! from one snapshot, so rows, watermark and offsets belong to one commit.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use std::collections::VecDeque;

use crate::accumulators::Accumulator;
use crate::error::{ProcessorError, Result};
use crate::operator::aggregate::{fresh_accs, row_of};
use crate::plan::{AggregateSpec, Emit};
use crate::state::key::{self, ns, Meta};
use crate::state::slot::{self, GroupForm};
use crate::state::store::{Scope, Snapshot, Store};
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
    /// The rows of these keys (sorted, without repeats), each key's range
    /// read in turn from one snapshot.
    Keys(Vec<String>),
    /// Rows whose key lies between two bounds, in key (byte) order.
    Range {
        /// The smallest key, and whether it is included (`None`: from the
        /// first key).
        lower: Option<(String, bool)>,
        /// The largest key, and whether it is included (`None`: to the
        /// last key).
        upper: Option<(String, bool)>,
    },
    /// Every row.
    All,
}

/// A test a read applies to each row its range and [`RowFilter`] admit,
/// in key order, inside the read's snapshot: a row it rejects is examined
/// but not returned. A test may also fold the rows it sees (an aggregate
/// over a range) and reject them all.
pub type RowTest<'a> = dyn Fn(&ViewRow) -> bool + Send + Sync + 'a;

/// Where the rows were read: the committed input position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsOf {
    /// Committed offset per input partition.
    pub offsets: Vec<u64>,
    /// Committed watermark, if any.
    pub watermark: Option<i64>,
}

/// A time range: `from_ms` inclusive, `to_ms` exclusive; `None` = unbounded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRange {
    /// Smallest time included.
    pub from_ms: Option<i64>,
    /// First time excluded.
    pub to_ms: Option<i64>,
}

impl TimeRange {
    /// True if `t` lies in the range.
    pub fn contains(&self, t: i64) -> bool {
        self.from_ms.is_none_or(|f| t >= f) && self.to_ms.is_none_or(|e| t < e)
    }

    /// True if neither end is bounded.
    pub fn is_unbounded(&self) -> bool {
        self.from_ms.is_none() && self.to_ms.is_none()
    }

    /// Raises the lower end to `v` (never lowers it).
    pub(crate) fn lower(&mut self, v: i64) {
        self.from_ms = Some(self.from_ms.map_or(v, |f| f.max(v)));
    }

    /// Lowers the upper end to `v` (never raises it).
    pub(crate) fn upper(&mut self, v: i64) {
        self.to_ms = Some(self.to_ms.map_or(v, |t| t.min(v)));
    }
}

/// Which rows of a query's key range a read returns, and how many rows it
/// may examine. Window bounds are no key range (rows are ordered by key,
/// then window), so they are checked row by row inside the read; the cap
/// keeps a read that finds few matches from walking the whole view.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RowFilter {
    /// Window starts in this range; an unwindowed row passes only when it
    /// is unbounded.
    pub window_start: TimeRange,
    /// Window ends in this range; likewise.
    pub window_end: TimeRange,
    /// Stop once this many rows were examined — stored rows and open
    /// hopping windows, visible or not, matching or not — and answer a
    /// cursor after the last one (at least one row is examined). `None`:
    /// read until `limit` rows or the end of the range.
    pub max_scanned: Option<usize>,
}

impl RowFilter {
    /// True if `row`'s window satisfies both bounds.
    pub fn admits(&self, row: &ViewRow) -> bool {
        let within = |range: &TimeRange, t: Option<i64>| match t {
            Some(t) => range.contains(t),
            None => range.is_unbounded(),
        };
        within(&self.window_start, row.window_start) && within(&self.window_end, row.window_end)
    }
}

/// One page of a read.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The rows, in key (then window) order.
    pub rows: Vec<ViewRow>,
    /// Where the next page starts (pass it as the cursor); `None`: the
    /// range holds nothing more.
    pub next_cursor: Option<Vec<u8>>,
    /// Rows examined ([`RowFilter::max_scanned`] counts these).
    pub scanned: usize,
    /// True when the page stopped at [`RowFilter::max_scanned`]: rows may
    /// or may not follow the cursor. False when it stopped at `limit`
    /// (another row matched) or at the end of the range.
    pub scan_limited: bool,
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

/// A range of stored keys: `[lower, upper)`, `upper` `None` to the end.
type KeyRange = (Vec<u8>, Option<Vec<u8>>);

/// The key ranges a query covers, in key order, not overlapping.
fn ranges(query: &ViewQuery) -> Vec<KeyRange> {
    let group = |k: &str| {
        let (lower, upper) = key::group_range(k.as_bytes());
        (lower, Some(upper))
    };
    match query {
        ViewQuery::Key(k) => vec![group(k)],
        ViewQuery::KeyWindows { key: k, from, to } => {
            let (lower, upper) = key::window_range(k.as_bytes(), *from, *to);
            vec![(lower, Some(upper))]
        }
        ViewQuery::Prefix(p) => vec![key::group_prefix_range(p.as_bytes())],
        ViewQuery::Keys(keys) => {
            let mut keys: Vec<&String> = keys.iter().collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().map(|k| group(k)).collect()
        }
        ViewQuery::Range { lower, upper } => {
            fn as_bytes(b: &Option<(String, bool)>) -> Option<(&[u8], bool)> {
                b.as_ref().map(|(k, inclusive)| (k.as_bytes(), *inclusive))
            }
            let (lower, upper) = key::group_key_range(as_bytes(lower), as_bytes(upper));
            match &upper {
                Some(u) if *u <= lower => Vec::new(),
                _ => vec![(lower, upper)],
            }
        }
        ViewQuery::All => vec![(Vec::new(), None)],
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

/// A page of `query`'s rows that pass `filter` and `test`: at most
/// `limit`, starting after `cursor`, examining at most
/// [`RowFilter::max_scanned`] rows; and the committed position the rows
/// reflect, read from the same snapshot.
#[allow(clippy::too_many_arguments)] // One read: what, which rows, where, how many.
pub fn query_page_as_of(
    store: &Store,
    scope: &Scope,
    query: &ViewQuery,
    filter: &RowFilter,
    test: Option<&RowTest<'_>>,
    cursor: Option<&[u8]>,
    limit: usize,
    partitions: usize,
) -> Result<(Page, AsOf)> {
    let snapshot = store.snapshot();
    let page = read_page(&snapshot, scope, query, filter, test, cursor, limit)?;
    Ok((page, read_as_of(&snapshot, scope, partitions)?))
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
    let page = read_page(
        snapshot,
        scope,
        query,
        &RowFilter::default(),
        None,
        cursor,
        limit,
    )?;
    Ok((page.rows, page.next_cursor))
}

/// The rows a page collects: those its filter admits, up to the limit.
struct Collector<'f> {
    filter: &'f RowFilter,
    test: Option<&'f RowTest<'f>>,
    limit: usize,
    rows: Vec<ViewRow>,
    /// Key of the last row taken: the cursor of a full page.
    last_taken: Option<Vec<u8>>,
    scanned: usize,
}

/// What examining one row decided.
enum Next {
    /// Examine the next row.
    Go,
    /// Stop: the page is complete, with this cursor.
    Stop(Option<Vec<u8>>, bool),
}

impl Collector<'_> {
    /// Examines the row under `k` (`None`: hidden).
    fn offer(&mut self, k: &[u8], row: Option<ViewRow>) -> Next {
        self.scanned += 1;
        let kept = |r: &ViewRow| self.filter.admits(r) && self.test.is_none_or(|test| test(r));
        if let Some(row) = row.filter(kept) {
            if self.rows.len() == self.limit {
                // A row past the limit: there is more.
                return Next::Stop(self.last_taken.take(), false);
            }
            self.rows.push(row);
            self.last_taken = Some(k.to_vec());
        }
        match self.filter.max_scanned {
            Some(max) if self.scanned >= max.max(1) => Next::Stop(Some(k.to_vec()), true),
            // A cancelled statement's read ends like a capped one.
            _ if self.scanned.is_multiple_of(crate::read_cancel::CHECK_EVERY)
                && crate::read_cancel::requested() =>
            {
                Next::Stop(Some(k.to_vec()), true)
            }
            _ => Next::Go,
        }
    }

    fn page(self, next_cursor: Option<Vec<u8>>, scan_limited: bool) -> Page {
        Page {
            rows: self.rows,
            next_cursor,
            scanned: self.scanned,
            scan_limited,
        }
    }
}

/// [`read_rows`] with a [`RowFilter`]: the rows of one page and where the
/// next starts.
fn read_page(
    snapshot: &Snapshot<'_>,
    scope: &Scope,
    query: &ViewQuery,
    filter: &RowFilter,
    test: Option<&RowTest<'_>>,
    cursor: Option<&[u8]>,
    limit: usize,
) -> Result<Page> {
    let spec_bytes = snapshot
        .get(&scope.state_cf(), &Meta::Spec.key())?
        .ok_or_else(|| ProcessorError::NotFound(format!("view {}", scope.view_cf())))?;
    let spec: AggregateSpec =
        serde_json::from_slice(&spec_bytes).map_err(|e| ProcessorError::CorruptState {
            cf: scope.state_cf(),
            reason: format!("view spec: {e}"),
        })?;
    let reader = RowReader {
        scope,
        spec,
        watermark: read_u64(snapshot, scope, Meta::Watermark)?.map_or(i64::MIN, |w| w as i64),
    };
    // Hidden rows (HAVING, open EMIT FINAL windows) and rows the filter
    // rejects are skipped, so read pages until one row past the limit is
    // found, the scan cap is reached or the range ends.
    let mut chunk = limit.saturating_add(1).clamp(16, 4096);
    if let Some(max) = filter.max_scanned {
        chunk = chunk.min(max.max(1));
    }
    let mut out = Collector {
        filter,
        test,
        limit,
        rows: Vec::new(),
        last_taken: None,
        scanned: 0,
    };
    for (lower, upper) in ranges(query) {
        let start = match cursor {
            // The cursor is past this range: its rows were read.
            Some(c) if upper.as_ref().is_some_and(|u| u.as_slice() <= c) => continue,
            Some(c) if c >= lower.as_slice() => {
                let mut after = c.to_vec();
                after.push(0);
                after
            }
            _ => lower,
        };
        if let Some((next, capped)) =
            read_range(snapshot, &reader, (start, upper), chunk, &mut out)?
        {
            return Ok(out.page(next, capped));
        }
    }
    Ok(out.page(None, false))
}

/// Offers the rows of one key range (`[start, upper)`) to `out`, stored and
/// open ones interleaved in key order; where the page stopped (its cursor,
/// and whether the scan cap stopped it), or `None` if the range ended
/// first.
fn read_range(
    snapshot: &Snapshot<'_>,
    reader: &RowReader<'_>,
    (mut start, upper): KeyRange,
    chunk: usize,
    out: &mut Collector<'_>,
) -> Result<Option<(Option<Vec<u8>>, bool)>> {
    // Open hopping windows (EMIT CHANGES) are not stored as rows: they are
    // merged from their slices and interleaved with the stored rows.
    let hopping_changes = matches!(
        reader.spec.window.as_ref().map(|w| (w.window, w.emit)),
        Some((WindowSpec::Hopping { .. }, Emit::Changes))
    );
    let mut open = OpenRows::new(
        snapshot,
        reader,
        (&start, upper.as_deref()),
        hopping_changes,
        OPEN_SLICES_CHUNK,
    );
    loop {
        let raw = snapshot.scan(&reader.scope.view_cf(), &start, upper.as_deref(), chunk)?;
        let exhausted = raw.len() < chunk;
        for (k, v) in &raw {
            while open.peek_key()?.is_some_and(|ok| ok < k.as_slice()) {
                let (ok, row) = open.pop().expect("peeked");
                if let Next::Stop(next, capped) = out.offer(&ok, Some(row)) {
                    return Ok(Some((next, capped)));
                }
            }
            if let Next::Stop(next, capped) = out.offer(k, reader.row(k, v)?) {
                return Ok(Some((next, capped)));
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
        if let Next::Stop(next, capped) = out.offer(&ok, Some(row)) {
            return Ok(Some((next, capped)));
        }
    }
    Ok(None)
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
        let lower = key::slice_of_row(&group_start(start));
        let slice_upper = match upper {
            Some(u) => match key::decode_group_key(u) {
                Some((group, rest)) if !rest.is_empty() => {
                    key::slice_of_row(&key::group_range(&group).1)
                }
                _ => key::slice_of_row(u),
            },
            None => key::namespace(ns::ACCUMULATOR).1.to_vec(),
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
            let (group, _) = key::decode_group_key(key::without_namespace(last))
                .ok_or_else(|| self.reader.bad("bad slice key"))?;
            let group_end = key::prefix_end(&key::slice_prefix(&group))
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
                key::decode_slice(k).ok_or_else(|| reader.bad("bad slice key"))?;
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

fn read_u64(snapshot: &Snapshot<'_>, scope: &Scope, meta: Meta) -> Result<Option<u64>> {
    Ok(snapshot
        .get(&scope.state_cf(), &meta.key())?
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
        .map(|p| Ok(read_u64(snapshot, scope, Meta::Offset(p))?.unwrap_or(0)))
        .collect::<Result<_>>()?;
    let watermark = read_u64(snapshot, scope, Meta::Watermark)?
        .map(|w| w as i64)
        .filter(|w| *w != i64::MIN);
    Ok(AsOf { offsets, watermark })
}

/// The committed input position of a version.
pub fn as_of(store: &Store, scope: &Scope, partitions: usize) -> Result<AsOf> {
    read_as_of(&store.snapshot(), scope, partitions)
}

/// The stored key of `row`: where a page that took it continues after.
pub fn row_key(row: &ViewRow) -> Vec<u8> {
    match (row.window_start, row.window_end) {
        (Some(start), Some(end)) => key::windowed(row.key.as_bytes(), start, end),
        _ => key::plain(row.key.as_bytes()),
    }
}

/// One page of rows from pages of the same query and cursor read from
/// stores holding disjoint keys (the partitions of a view spread over
/// tasks and nodes), at most `limit` rows in key order. A page that has
/// more past its cursor holds back every row after that cursor (another
/// page's rows there might come after rows it did not read yet), so the
/// merged page stops at the smallest such cursor.
pub fn merge_pages(pages: Vec<Page>, limit: usize) -> Page {
    let bound = pages.iter().filter_map(|p| p.next_cursor.clone()).min();
    let scanned = pages.iter().map(|p| p.scanned).sum();
    let scan_limited = pages.iter().any(|p| p.scan_limited);
    let mut rows: Vec<(Vec<u8>, ViewRow)> = pages
        .into_iter()
        .flat_map(|p| p.rows)
        .map(|row| (row_key(&row), row))
        .collect();
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    let mut taken = Vec::new();
    let mut last: Option<Vec<u8>> = None;
    for (k, row) in rows {
        if bound.as_ref().is_some_and(|b| k > *b) {
            break;
        }
        if taken.len() == limit {
            return Page {
                rows: taken,
                next_cursor: last,
                scanned,
                scan_limited,
            };
        }
        taken.push(row);
        last = Some(k);
    }
    Page {
        rows: taken,
        next_cursor: bound,
        scanned,
        scan_limited,
    }
}
