//! An input record decoded for processing: its JSON value, key, times, and
//! (after a join) the matched table row. Implements [`Row`] so expressions
//! can read it.

use bytes::Bytes;
use serde_json::Value;

use crate::expr::{get_path, Row};

/// One event flowing through a processor.
#[derive(Debug, Clone)]
pub struct Event {
    /// Input partition.
    pub partition: u32,
    /// Input offset.
    pub offset: u64,
    /// The record timestamp (ms).
    pub record_timestamp: i64,
    /// The record key, as text.
    pub key: Option<String>,
    /// The raw key bytes (kept for side outputs).
    pub raw_key: Option<Bytes>,
    /// The raw value bytes (kept for side outputs).
    pub raw_value: Bytes,
    /// The decoded value.
    pub value: Value,
    /// Event time (ms).
    pub event_time: i64,
    /// The joined table row, under its alias.
    pub joined: Option<(String, Value)>,
}

impl Row for Event {
    fn field(&self, path: &[String]) -> Option<&Value> {
        if let (Some((alias, row)), Some(first)) = (&self.joined, path.first()) {
            if first == alias {
                return get_path(row, &path[1..]);
            }
        }
        get_path(&self.value, path)
    }

    fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    fn record_timestamp(&self) -> i64 {
        self.record_timestamp
    }
}

/// A finished output row (for HAVING): columns by name.
#[derive(Debug, Clone)]
pub struct OutputRow<'a> {
    /// The row object.
    pub columns: &'a serde_json::Map<String, Value>,
}

impl Row for OutputRow<'_> {
    fn field(&self, path: &[String]) -> Option<&Value> {
        let (first, rest) = path.split_first()?;
        get_path(self.columns.get(first)?, rest)
    }

    fn key(&self) -> Option<&str> {
        None
    }

    fn record_timestamp(&self) -> i64 {
        0
    }

    fn column(&self, name: &str) -> Option<&Value> {
        self.columns.get(name).or_else(|| {
            self.columns
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }
}
