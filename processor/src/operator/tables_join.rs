//! A join of two declared tables ([`RowsJoin`]): each row of the `FROM`
//! table ([`super::table_rows::TableRows`], the "left" rows) joins the
//! latest row of the joined table whose key its `ON` expression names — a
//! primary-key join when that is its own key column, a foreign-key join
//! (ksqlDB's) when it is another column. The joined row is keyed by the
//! left row's key and changes when either row does, so at each commit
//! the rows it hands on are a pure function of the two tables as that
//! commit leaves them, whatever batches the records came in.
//!
//! State (in the version's `.state` column family):
//!
//! | namespace | rest of the key | value |
//! |---|---|---|
//! | `0x06` [`ns::JOINED_ROW`] | the joined table's record key, UTF-8 as is | its latest row, a JSON object (its key column filled from the record key) |
//! | `0x07` [`ns::JOIN_INDEX`] | the key a left row joins ([`key::encode_group_key`]), then the left row's key | empty |
//!
//! The index finds the left rows that join a joined row when that row
//! changes. The left rows live in the stage column family. Every write
//! goes into the commit's batch with the offsets.
//!
//! At a commit, the joined rows that may have changed are those of the
//! left keys that changed and of the left keys the index lists under each
//! joined key that changed; each is computed from the two tables as the
//! commit leaves them. Its previous version is computed the same way from
//! the store, which still holds both tables as the last commit left them
//! ([`previous_joined_row`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::aggregate::corrupt;
use super::each_row::row_of;
use super::table_rows::TableRows;
use super::RowChange;
use crate::error::Result;
use crate::expr::stringify;
use crate::plan::{JoinKind, RowsJoin};
use crate::state::key::{self, ns};
use crate::state::store::{Batch, Store};

/// The joined table's latest rows and the index of the left rows by the
/// key they join.
#[derive(Debug)]
pub struct TablesJoin {
    spec: RowsJoin,
    state_cf: String,
    /// Joined rows changed since the last flush, by key (`None`: deleted).
    right: BTreeMap<String, Option<Value>>,
}

impl TablesJoin {
    /// The join `spec`, its state in `state_cf`.
    pub fn new(spec: RowsJoin, state_cf: String) -> TablesJoin {
        TablesJoin {
            spec,
            state_cf,
            right: BTreeMap::new(),
        }
    }

    /// The joined table's row of a record with `key` and `value`:
    /// `Some(None)` deletes its key's row (a null or empty value),
    /// `None` is an invalid record (a value that is not a JSON object).
    pub fn row_of_record(&self, key: &str, value: &[u8]) -> Option<Option<Value>> {
        let trimmed = value.trim_ascii();
        if trimmed.is_empty() || trimmed == b"null" {
            return Some(None);
        }
        let Ok(Value::Object(mut row)) = serde_json::from_slice::<Value>(trimmed) else {
            return None;
        };
        if let Some(column) = &self.spec.key_column {
            row.insert(column.clone(), Value::String(key.to_string()));
        }
        Some(Some(Value::Object(row)))
    }

    /// From now on the joined table's row of `key` is `row` (`None`: none).
    pub fn upsert(&mut self, key: String, row: Option<Value>) {
        self.right.insert(key, row);
    }

    /// Joined rows waiting for the next commit.
    pub fn pending_entries(&self) -> usize {
        self.right.len()
    }

    /// The joined table's row of `key` now (this commit's, else stored).
    fn right_now(&self, store: &Store, key: &str) -> Result<Option<Value>> {
        match self.right.get(key) {
            Some(row) => Ok(row.clone()),
            None => stored_right(store, &self.state_cf, key),
        }
    }

    /// The joined rows this commit may change, as the commit leaves them
    /// (`None`: no joined row), in key order: those of the left rows
    /// `left` changed, and of the left rows joining a joined row that
    /// changed.
    pub fn changes(&self, store: &Store, left: &TableRows) -> Result<Vec<RowChange>> {
        let mut keys: BTreeSet<String> = left.pending().keys().cloned().collect();
        for r in self.right.keys() {
            for_each_joining(store, &self.state_cf, r, |k| {
                keys.insert(k);
                Ok(())
            })?;
        }
        let mut changes = Vec::with_capacity(keys.len());
        for k in keys {
            let left_row = match left.pending().get(&k) {
                Some(row) => row.clone(),
                None => left.stored_row(store, &k)?,
            };
            let row = match left_row {
                Some(l) => {
                    let right = match joined_key(&self.spec, &l) {
                        Some(r) => self.right_now(store, &r)?,
                        None => None,
                    };
                    joined_row(&self.spec, l, right)
                }
                None => None,
            };
            changes.push(RowChange {
                key: k,
                window: None,
                row,
            });
        }
        Ok(changes)
    }

    /// Adds the joined rows changed and the index entries of the left
    /// rows `left` changed to `batch` (call before `left` flushes: the
    /// store's left rows are the previous versions).
    pub fn flush(&mut self, store: &Store, left: &TableRows, batch: &mut Batch) -> Result<()> {
        for (k, new) in left.pending() {
            let old = left.stored_row(store, k)?;
            let old_key = old.as_ref().and_then(|l| joined_key(&self.spec, l));
            let new_key = new.as_ref().and_then(|l| joined_key(&self.spec, l));
            if old_key == new_key {
                continue;
            }
            if let Some(r) = old_key {
                batch.delete(&self.state_cf, index_key(&r, k));
            }
            if let Some(r) = new_key {
                batch.put(&self.state_cf, index_key(&r, k), []);
            }
        }
        for (r, row) in std::mem::take(&mut self.right) {
            let k = right_key(&r);
            match row {
                Some(row) => batch.put(
                    &self.state_cf,
                    k,
                    serde_json::to_vec(&row).expect("JSON values serialize"),
                ),
                None => batch.delete(&self.state_cf, k),
            }
        }
        Ok(())
    }
}

/// The key of the joined row the left row `left` names (`None`: `NULL`).
fn joined_key(spec: &RowsJoin, left: &Value) -> Option<String> {
    stringify(&spec.on.eval(&row_of(left)))
}

/// The row `left` and the joined row `right` make: `left` with `right`
/// (or, for a left join without one, `null`) under the join's alias;
/// `None` for an inner join without a joined row.
fn joined_row(spec: &RowsJoin, left: Value, right: Option<Value>) -> Option<Value> {
    if right.is_none() && spec.kind == JoinKind::Inner {
        return None;
    }
    let Value::Object(mut row) = left else {
        return None;
    };
    row.insert(spec.alias.clone(), right.unwrap_or(Value::Null));
    Some(Value::Object(row))
}

/// The joined row the left row `left` made as the last commit stored the
/// joined table: the previous version of a joined row whose left row as
/// stored is `left`.
pub fn previous_joined_row(
    spec: &RowsJoin,
    store: &Store,
    state_cf: &str,
    left: Value,
) -> Result<Option<Value>> {
    let right = match joined_key(spec, &left) {
        Some(r) => stored_right(store, state_cf, &r)?,
        None => None,
    };
    Ok(joined_row(spec, left, right))
}

fn right_key(r: &str) -> Vec<u8> {
    let mut k = vec![ns::JOINED_ROW];
    k.extend_from_slice(r.as_bytes());
    k
}

fn index_prefix(r: &str) -> Vec<u8> {
    let mut k = vec![ns::JOIN_INDEX];
    key::encode_group_key(&mut k, r.as_bytes());
    k
}

fn index_key(r: &str, left: &str) -> Vec<u8> {
    let mut k = index_prefix(r);
    k.extend_from_slice(left.as_bytes());
    k
}

/// The joined table's row of `key` as the last commit stored it.
fn stored_right(store: &Store, state_cf: &str, r: &str) -> Result<Option<Value>> {
    let Some(bytes) = store.get(state_cf, &right_key(r))? else {
        return Ok(None);
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| corrupt(state_cf, format!("bad joined table row: {e}")))
}

/// Calls `f` with the key of each left row the last commit stored as
/// joining the joined row `r`.
fn for_each_joining(
    store: &Store,
    state_cf: &str,
    r: &str,
    mut f: impl FnMut(String) -> Result<()>,
) -> Result<()> {
    let lower = index_prefix(r);
    let upper = key::prefix_end(&lower);
    store.for_each_key(state_cf, &lower, upper.as_deref(), |k| {
        f(String::from_utf8_lossy(&k[lower.len()..]).into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use serde_json::json;

    fn spec(kind: JoinKind) -> RowsJoin {
        RowsJoin {
            topic: "regions".into(),
            on: Expr::Field(vec!["region".into()]),
            alias: "r".into(),
            kind,
            key_column: Some("code".into()),
        }
    }

    #[test]
    fn a_joined_row_changes_with_either_side_and_its_previous_version_is_stored() {
        let (_dir, store, scope) = crate::state::store::temp_store("j");
        let mut join = TablesJoin::new(spec(JoinKind::Inner), scope.state_cf());
        let mut left = TableRows::new(scope.stage_cf());
        let commit = |join: &mut TablesJoin, left: &mut TableRows| {
            let changes = join.changes(&store, left).unwrap();
            let mut batch = Batch::default();
            join.flush(&store, left, &mut batch).unwrap();
            left.flush(&mut batch);
            store.write(batch).unwrap();
            changes
        };

        left.upsert("a1".into(), Some(json!({"id": "a1", "region": "eu"})));
        left.upsert("a2".into(), Some(json!({"id": "a2", "region": "eu"})));
        let row = join.row_of_record("eu", br#"{"name": "Europe"}"#).unwrap();
        join.upsert("eu".into(), row);
        let first = commit(&mut join, &mut left);
        assert_eq!(
            first[0].row,
            Some(json!({"id": "a1", "region": "eu", "r": {"code": "eu", "name": "Europe"}}))
        );
        assert_eq!(first.len(), 2);

        // The region's change reaches both accounts through the index.
        join.upsert("eu".into(), Some(json!({"code": "eu", "name": "EU"})));
        let second = commit(&mut join, &mut left);
        let keys: Vec<&str> = second.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["a1", "a2"]);
        assert_eq!(second[1].row.as_ref().unwrap()["r"]["name"], "EU");

        // An account moving to a region without a row leaves the inner
        // join; its previous version is computed from the store.
        left.upsert("a1".into(), Some(json!({"id": "a1", "region": "us"})));
        let stored = left.stored_row(&store, "a1").unwrap().unwrap();
        let previous = previous_joined_row(&join.spec, &store, &scope.state_cf(), stored)
            .unwrap()
            .unwrap();
        assert_eq!(previous["r"]["name"], "EU");
        let third = commit(&mut join, &mut left);
        assert_eq!(third.len(), 1);
        assert_eq!(third[0].row, None);

        // The index followed the move: a change of "eu" reaches a2 only.
        join.upsert("eu".into(), None);
        let fourth = commit(&mut join, &mut left);
        assert_eq!(fourth.len(), 1);
        assert_eq!((fourth[0].key.as_str(), &fourth[0].row), ("a2", &None));
    }

    #[test]
    fn a_left_join_keeps_a_row_without_its_joined_row() {
        let left = json!({"id": "a1", "region": null});
        assert_eq!(joined_key(&spec(JoinKind::Left), &left), None);
        assert_eq!(
            joined_row(&spec(JoinKind::Left), left.clone(), None),
            Some(json!({"id": "a1", "region": null, "r": null}))
        );
        assert_eq!(joined_row(&spec(JoinKind::Inner), left, None), None);
        let join = TablesJoin::new(spec(JoinKind::Left), "s".into());
        assert_eq!(join.row_of_record("k", b"[1]"), None);
        assert_eq!(join.row_of_record("k", b" null "), Some(None));
    }
}
