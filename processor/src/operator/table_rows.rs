//! The rows an aggregate over rows reads ([`crate::plan::Plan::then`]),
//! and where each one's previous version is found.
//!
//! Two kinds of inner rows ([`InnerRows`]):
//! - an inner aggregate's rows (a subquery or CTE in `FROM`): its slots,
//!   in the version's stage column family, are the rows as the last commit
//!   stored them, and a row is computed from its slot;
//! - a declared table's rows (`FROM` a table): [`TableRows`] keeps the
//!   latest row of each record key, as a projection of the record's value
//!   made it, in the stage column family:
//!
//! | column family | key | value |
//! |---|---|---|
//! | `<name>@<version>.stage` | the record key ([`key::plain`]) | the row, a JSON object of the table's columns |
//!
//! A record with a null value (or none) deletes its key's row. The rows
//! changed since the last commit go to the outer aggregate at the commit,
//! before it writes them, so the store still holds each row's previous
//! version, which the outer aggregate takes back ([`InnerStage::previous`]).

use std::collections::BTreeMap;

use serde_json::Value;

use super::aggregate::{corrupt, row_of};
use super::tables_join::previous_joined_row;
use super::RowChange;
use crate::error::Result;
use crate::plan::{AggregateSpec, InnerRows, RowsJoin};
use crate::state::key;
use crate::state::slot;
use crate::state::store::{Batch, Store};
use crate::window::Window;

/// The row of `key` in `stage_cf` as the last commit stored it.
fn stored_row(store: &Store, stage_cf: &str, key: &str) -> Result<Option<Value>> {
    let Some(bytes) = store.get(stage_cf, &key::plain(key.as_bytes()))? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| corrupt(stage_cf, format!("bad table row: {e}")))
}

/// Where an aggregate over rows finds an inner row's previous version.
#[derive(Debug)]
pub struct InnerStage {
    /// The inner aggregate whose slots hold the rows; `None`: the rows are
    /// stored whole ([`TableRows`]).
    slots: Option<AggregateSpec>,
    /// The table rows are joined with another table's, whose rows are in
    /// this state column family.
    join: Option<(RowsJoin, String)>,
    /// The stage column family.
    cf: String,
    /// Each row arrives once (an inner window's final rows): there is no
    /// previous version.
    final_rows: bool,
}

impl InnerStage {
    /// The stage of `inner`'s rows, stored in `cf`; a table's rows are
    /// joined by `join`, its joined rows in `state_cf`.
    pub fn new(
        inner: InnerRows<'_>,
        cf: String,
        join: Option<&RowsJoin>,
        state_cf: String,
    ) -> InnerStage {
        InnerStage {
            slots: match inner {
                InnerRows::Aggregate(spec) => Some(spec.clone()),
                InnerRows::Table => None,
            },
            join: join.map(|j| (j.clone(), state_cf)),
            cf,
            final_rows: inner.are_final(),
        }
    }

    /// Whether each row arrives once, never to change or leave.
    pub fn rows_are_final(&self) -> bool {
        self.final_rows
    }

    /// The row under `change`'s key and window as the last commit stored
    /// it, if it had one: the version `change` replaces.
    pub fn previous(&self, store: &Store, change: &RowChange) -> Result<Option<Value>> {
        if self.final_rows {
            return Ok(None);
        }
        let Some(inner) = &self.slots else {
            let Some(row) = stored_row(store, &self.cf, &change.key)? else {
                return Ok(None);
            };
            return match &self.join {
                Some((join, state_cf)) => previous_joined_row(join, store, state_cf, row),
                None => Ok(Some(row)),
            };
        };
        let k = match change.window {
            Some((start, end)) => key::windowed(change.key.as_bytes(), start, end),
            None => key::plain(change.key.as_bytes()),
        };
        let Some(bytes) = store.get(&self.cf, &k)? else {
            return Ok(None);
        };
        let (form, accs) =
            slot::decode(&bytes).ok_or_else(|| corrupt(&self.cf, "bad accumulator value"))?;
        let group = form
            .values(&change.key)
            .ok_or_else(|| corrupt(&self.cf, "bad group key"))?;
        let window = change.window.map(|(start, end)| Window { start, end });
        Ok(row_of(inner, &group, window, &accs))
    }
}

/// A declared table's latest row per record key, kept in the stage column
/// family; the rows changed since the last commit wait in memory.
#[derive(Debug)]
pub struct TableRows {
    stage_cf: String,
    /// Rows changed since the last flush, by key (`None`: deleted).
    pending: BTreeMap<String, Option<Value>>,
}

impl TableRows {
    /// An empty change set over the rows stored in `stage_cf`.
    pub fn new(stage_cf: String) -> TableRows {
        TableRows {
            stage_cf,
            pending: BTreeMap::new(),
        }
    }

    /// From now on `key`'s row is `row` (`None`: the key has none).
    pub fn upsert(&mut self, key: String, row: Option<Value>) {
        self.pending.insert(key, row);
    }

    /// Keys changed since the last flush.
    pub fn pending_entries(&self) -> usize {
        self.pending.len()
    }

    /// The rows changed since the last flush, by key (`None`: deleted).
    pub fn pending(&self) -> &BTreeMap<String, Option<Value>> {
        &self.pending
    }

    /// The row of `key` as the last commit stored it.
    pub fn stored_row(&self, store: &Store, key: &str) -> Result<Option<Value>> {
        stored_row(store, &self.stage_cf, key)
    }

    /// The rows changed since the last flush, in key order, for the outer
    /// aggregate (which reads their previous versions from the store).
    pub fn changes(&self) -> Vec<RowChange> {
        self.pending
            .iter()
            .map(|(key, row)| RowChange {
                key: key.clone(),
                window: None,
                row: row.clone(),
            })
            .collect()
    }

    /// Adds the changed rows to `batch` and forgets them.
    pub fn flush(&mut self, batch: &mut Batch) {
        for (k, row) in std::mem::take(&mut self.pending) {
            let k = key::plain(k.as_bytes());
            match row {
                Some(row) => batch.put(
                    &self.stage_cf,
                    k,
                    serde_json::to_vec(&row).expect("JSON values serialize"),
                ),
                None => batch.delete(&self.stage_cf, k),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::store::Scope;
    use serde_json::json;

    fn store() -> (tempfile::TempDir, Store, Scope) {
        crate::state::store::temp_store("t")
    }

    #[test]
    fn a_change_replaces_the_row_the_last_commit_stored() {
        let (_dir, store, scope) = store();
        let stage = InnerStage::new(InnerRows::Table, scope.stage_cf(), None, scope.state_cf());
        let mut rows = TableRows::new(scope.stage_cf());
        rows.upsert("u1".into(), Some(json!({"id": "u1", "tier": "gold"})));
        rows.upsert("u2".into(), Some(json!({"id": "u2", "tier": "free"})));
        let first = rows.changes();
        assert_eq!(first.len(), 2);
        assert_eq!(stage.previous(&store, &first[0]).unwrap(), None);
        let mut batch = Batch::default();
        rows.flush(&mut batch);
        store.write(batch).unwrap();
        assert_eq!(rows.pending_entries(), 0);

        // The last of a commit's versions is the one handed over.
        rows.upsert("u1".into(), Some(json!({"id": "u1", "tier": "free"})));
        rows.upsert("u1".into(), Some(json!({"id": "u1", "tier": "silver"})));
        rows.upsert("u2".into(), None);
        let second = rows.changes();
        assert_eq!(second[0].row, Some(json!({"id": "u1", "tier": "silver"})));
        assert_eq!(
            stage.previous(&store, &second[0]).unwrap(),
            Some(json!({"id": "u1", "tier": "gold"}))
        );
        assert_eq!(second[1].row, None);
        let mut batch = Batch::default();
        rows.flush(&mut batch);
        store.write(batch).unwrap();
        assert_eq!(stage.previous(&store, &second[1]).unwrap(), None);
    }
}
