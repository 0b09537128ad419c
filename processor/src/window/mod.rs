//! Window assignment: which windows an event time belongs to. Pure
//! functions over milliseconds since the epoch (negative = before 1970);
//! every window is `[start, end)` — the end is exclusive.
//!
//! One file per window kind: [`tumbling`], [`hopping`] (with the slice
//! arithmetic that lets aggregates avoid copying an event into every
//! overlapping window), and [`session`] (merging by gap).

pub mod hopping;
pub mod session;
pub mod tumbling;

use serde::{Deserialize, Serialize};

/// A time window `[start, end)` in ms since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Window {
    /// First millisecond in the window.
    pub start: i64,
    /// First millisecond after the window.
    pub end: i64,
}

impl Window {
    /// True if `ts` falls in `[start, end)`.
    pub fn contains(&self, ts: i64) -> bool {
        self.start <= ts && ts < self.end
    }
}

/// How events are grouped in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WindowSpec {
    /// Fixed, non-overlapping windows of `size_ms`.
    Tumbling {
        /// Window length.
        size_ms: i64,
    },
    /// Windows of `size_ms` starting every `advance_ms` (they overlap when
    /// `advance_ms < size_ms`).
    Hopping {
        /// Window length.
        size_ms: i64,
        /// Distance between window starts.
        advance_ms: i64,
    },
    /// Per key, events closer than `gap_ms` share a window `[first, last + gap)`.
    Session {
        /// Inactivity gap that closes a session.
        gap_ms: i64,
    },
}

/// Most windows one event may belong to (a hopping window's `SIZE /
/// ADVANCE`): each is a row written when it closes and a row a reader
/// merges, so this bounds the work and state one event can cause.
pub const MAX_WINDOWS_PER_EVENT: i64 = 10_000;

impl WindowSpec {
    /// Checks sizes are positive, a hop does not skip time, and an event
    /// falls in at most [`MAX_WINDOWS_PER_EVENT`] windows.
    pub fn validate(&self) -> Result<(), String> {
        if let WindowSpec::Hopping {
            size_ms,
            advance_ms,
        } = *self
        {
            if advance_ms > 0 && size_ms / advance_ms > MAX_WINDOWS_PER_EVENT {
                return Err(format!(
                    "a hopping window of SIZE {size_ms} ms and ADVANCE {advance_ms} ms puts each event in {} windows; the limit is {MAX_WINDOWS_PER_EVENT} windows per event (SIZE / ADVANCE): use a larger ADVANCE or a smaller SIZE",
                    size_ms / advance_ms
                ));
            }
        }
        match *self {
            WindowSpec::Tumbling { size_ms } if size_ms <= 0 => Err("window size must be positive".into()),
            WindowSpec::Hopping { size_ms, advance_ms } if size_ms <= 0 || advance_ms <= 0 => {
                Err("window size and advance must be positive".into())
            }
            WindowSpec::Hopping { size_ms, advance_ms } if advance_ms > size_ms => {
                Err("a hopping window's advance must not exceed its size (events would fall in no window)".into())
            }
            WindowSpec::Session { gap_ms } if gap_ms <= 0 => Err("session gap must be positive".into()),
            _ => Ok(()),
        }
    }
}
