//! Reading a view: point lookups, prefix and key ranges, a key's windows in
//! a time range — each answer says as of which input offsets and watermark.

use serde::Serialize;
use serde_json::Value;

use crate::error::{ProcessorError, Result};
use crate::state::key;
use crate::state::store::{ns, Scope, Store};

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

fn decode_row(scope: &Scope, k: &[u8], v: &[u8]) -> Result<ViewRow> {
    let bad = |reason: &str| ProcessorError::CorruptState {
        cf: scope.view_cf(),
        reason: reason.to_string(),
    };
    let (key_bytes, rest) = key::decode_group_key(k).ok_or_else(|| bad("bad view key"))?;
    let (window_start, window_end) = if rest.is_empty() {
        (None, None)
    } else {
        let (s, rest) = key::decode_i64(rest).ok_or_else(|| bad("bad window start"))?;
        let (e, _) = key::decode_i64(rest).ok_or_else(|| bad("bad window end"))?;
        (Some(s), Some(e))
    };
    Ok(ViewRow {
        key: String::from_utf8_lossy(&key_bytes).into_owned(),
        window_start,
        window_end,
        row: serde_json::from_slice(v).map_err(|e| bad(&e.to_string()))?,
    })
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
    let (lower, upper) = match query {
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
    };
    let start = match cursor {
        Some(c) if c > lower.as_slice() => {
            let mut after = c.to_vec();
            after.push(0);
            after
        }
        _ => lower,
    };
    let raw = store.scan(&scope.view_cf(), &start, upper.as_deref(), limit + 1)?;
    let more = raw.len() > limit;
    let rows = raw
        .iter()
        .take(limit)
        .map(|(k, v)| decode_row(scope, k, v))
        .collect::<Result<Vec<_>>>()?;
    let next = if more {
        raw.get(limit - 1).map(|(k, _)| k.clone())
    } else {
        None
    };
    Ok((rows, next))
}

/// The committed input position of a version.
pub fn as_of(store: &Store, scope: &Scope, partitions: usize) -> Result<AsOf> {
    let read = |name: &str| -> Result<Option<u64>> {
        let mut k = vec![ns::META];
        k.extend_from_slice(name.as_bytes());
        Ok(store
            .get(&scope.state_cf(), &k)?
            .and_then(|v| v.as_slice().try_into().ok())
            .map(u64::from_le_bytes))
    };
    let offsets = (0..partitions)
        .map(|p| Ok(read(&format!("offset/{p}"))?.unwrap_or(0)))
        .collect::<Result<_>>()?;
    let watermark = read("watermark")?
        .map(|w| w as i64)
        .filter(|w| *w != i64::MIN);
    Ok(AsOf { offsets, watermark })
}
