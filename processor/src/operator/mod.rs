//! Operators: one file per operator. Each keeps an in-memory view of its
//! state (loaded from the store on demand or at restore), marks what it
//! changed, and adds those changes to the commit's batch in `flush`.

pub mod aggregate;
pub mod dedup;
pub mod each_row;
pub mod join;
pub mod slices;
pub mod stream_join;
pub mod table_aggregate;
pub mod table_rows;
pub mod tables_join;
pub mod top_n;

use serde_json::Value;

/// The hash map operators key by state keys and join keys: foldhash is
/// several times faster than SipHash on short keys, and the keys are not
/// attacker-chosen in a way that matters here (a collision flood only
/// slows one processor).
pub(crate) type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The hash set of the same keys ([`HashMap`]).
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

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

/// What follows an aggregate or a table whose rows are a query's input
/// ([`crate::plan::Plan::then`]): it takes their row changes at each
/// commit, and its rows are the view's.
#[derive(Debug)]
pub enum RowsStage {
    /// An aggregate over the rows.
    Aggregate(table_aggregate::TableAggregate),
    /// The top rows of each partition.
    Top(top_n::TopN),
    /// Each row a view row.
    Each(each_row::EachRow),
}

impl RowsStage {
    /// Applies the inner rows' changes of a commit, before it is written
    /// (taking them: a top-N keeps the rows it ranks).
    pub fn apply(
        &mut self,
        store: &crate::state::store::Store,
        changes: Vec<RowChange>,
    ) -> crate::error::Result<()> {
        match self {
            RowsStage::Aggregate(a) => a.apply(store, &changes),
            RowsStage::Top(t) => t.apply(store, changes),
            RowsStage::Each(e) => {
                e.apply(&changes);
                Ok(())
            }
        }
    }

    /// The view's row changes of the commit (empty unless emitted).
    pub fn take_changes(&mut self) -> crate::error::Result<Vec<RowChange>> {
        match self {
            RowsStage::Aggregate(a) => a.take_changes(),
            RowsStage::Top(t) => t.take_changes(),
            RowsStage::Each(e) => Ok(e.take_changes()),
        }
    }

    /// Adds the commit's writes to `batch`; returns the view rows written.
    pub fn flush(&mut self, batch: &mut crate::state::store::Batch) -> u64 {
        match self {
            RowsStage::Aggregate(a) => a.flush(batch),
            RowsStage::Top(t) => t.flush(batch),
            RowsStage::Each(e) => e.flush(batch),
        }
    }

    /// Starts (or stops) handing out row changes.
    pub fn set_emit_changes(&mut self, on: bool) {
        match self {
            RowsStage::Aggregate(a) => a.set_emit_changes(on),
            RowsStage::Top(t) => t.set_emit_changes(on),
            RowsStage::Each(e) => e.set_emit_changes(on),
        }
    }

    /// Entries waiting for the next commit.
    pub fn pending_entries(&self) -> usize {
        match self {
            RowsStage::Aggregate(a) => a.pending_entries(),
            RowsStage::Top(t) => t.pending_entries(),
            RowsStage::Each(e) => e.pending_entries(),
        }
    }

    /// Entries in memory.
    pub fn memory_entries(&self) -> usize {
        match self {
            RowsStage::Aggregate(a) => a.memory_entries(),
            RowsStage::Top(t) => t.memory_entries(),
            RowsStage::Each(e) => e.pending_entries(),
        }
    }
}
