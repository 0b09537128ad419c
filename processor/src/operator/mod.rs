//! Operators: one file per operator. Each keeps an in-memory view of its
//! state (loaded from the store on demand or at restore), marks what it
//! changed, and adds those changes to the commit's batch in `flush`.

pub mod aggregate;
pub mod dedup;
pub mod join;
pub mod slices;
pub mod stream_join;
pub mod table_aggregate;

use serde_json::Value;

/// A change to an output row: the row's key (the view key, also the output
/// record key), its window if any, and the new row (`None` = deleted).
#[derive(Debug, Clone, PartialEq)]
pub struct RowChange {
    /// View key.
    pub key: String,
    /// Window bounds, for windowed rows.
    pub window: Option<(i64, i64)>,
    /// The row, or `None` when it was removed.
    pub row: Option<Value>,
}
