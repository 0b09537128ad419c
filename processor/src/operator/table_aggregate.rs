//! Aggregation over a table's changes: the outer query of `SELECT .. FROM
//! (SELECT .. GROUP BY ..) GROUP BY ..` (a subquery or a CTE), whose input
//! is the rows of the inner aggregate — a table — rather than events.
//!
//! At each commit the inner aggregate hands over its row changes (new
//! rows; `None` when a row went away). For each, this operator retracts
//! the row's previous version from the outer group it fell in and adds the
//! new one to its group, as Kafka Streams' `KTable.groupBy(..).aggregate`
//! does with its subtractor and adder. The previous version needs no copy
//! of its own: it is the inner row as the last commit stored it (the
//! inner's slots, in the version's stage column family), which is exactly
//! what the last commit applied here. An inner window that emits only
//! final rows (`EMIT FINAL`) hands each row over once, so it has no
//! previous version.
//!
//! The outer aggregate's accumulators take values back
//! ([`AggregateKind::retracting`]); its last aggregate is a hidden
//! `COUNT(*)` of the rows a group holds ([`ROWS_AGGREGATE`]), and a group
//! holding none is deleted. Its slots are the view's rows, in the stored
//! form of every aggregate view (`state::slot`), so readers compute them
//! as they do any view's. The outer aggregate is unwindowed, and its
//! `WHERE` (applied to the inner rows) counts a row that fails it as
//! absent.
//!
//! State: only the view's rows (one slot per outer group), and the inner
//! aggregate's own; both are written in the same commit as the offsets, so
//! a restart resumes consistent, and a replay ends with the same rows
//! (every retracting accumulator's result depends only on the values it
//! holds).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::aggregate::{corrupt, row_of, view_key};
use super::each_row::passes;
use super::table_rows::InnerStage;
use super::RowChange;
use crate::accumulators::{Accumulator, AggregateKind};
use crate::error::{ProcessorError, Result};
use crate::event::OutputRow;
use crate::expr::Expr;
use crate::plan::{AggregateSpec, InnerRows, RowsAggregate};
use crate::state::key;
use crate::state::slot::{self, GroupForm};
use crate::state::store::{Batch, Store};

/// The name of the hidden `COUNT(*)` that ends an aggregate over a table's
/// changes: the rows its group holds; `#` starts no output column's name.
pub const ROWS_AGGREGATE: &str = "#rows";

/// One outer group's accumulators in memory.
#[derive(Debug)]
struct Slot {
    form: GroupForm,
    accs: Vec<Accumulator>,
    dirty: bool,
}

impl Slot {
    /// Rows the group holds ([`ROWS_AGGREGATE`]).
    fn rows(&self) -> u64 {
        match self.accs.last() {
            Some(Accumulator::Count(n)) => *n,
            _ => 0,
        }
    }
}

/// The aggregate over an inner aggregate's rows.
#[derive(Debug)]
pub struct TableAggregate {
    outer: AggregateSpec,
    filter: Option<Expr>,
    /// Where an inner row's previous version is found.
    inner: InnerStage,
    /// The view's rows: the outer slots.
    view_cf: String,
    cache: HashMap<Vec<u8>, Slot>,
    /// Keys of slots changed since the last flush (each once).
    dirty: Vec<Vec<u8>>,
    /// Keys of rows changed since the last [`TableAggregate::take_changes`],
    /// when changes are emitted (a change feed reads them).
    changed: BTreeSet<Vec<u8>>,
    emit_changes: bool,
    cache_limit: usize,
}

impl TableAggregate {
    /// The operator aggregating `rows`' input, the rows `inner` (stored in
    /// `inner_cf`; a join's joined rows in `state_cf`), into the view's
    /// rows in `view_cf`; at most `cache_limit` clean slots stay in memory.
    pub fn new(
        rows: &RowsAggregate,
        inner: InnerRows<'_>,
        inner_cf: String,
        view_cf: String,
        state_cf: String,
        cache_limit: usize,
    ) -> Result<TableAggregate> {
        rows.validate(inner).map_err(ProcessorError::InvalidPlan)?;
        Ok(TableAggregate {
            outer: rows.aggregate.clone(),
            filter: rows.filter.clone(),
            inner: InnerStage::new(inner, inner_cf, rows.join.as_ref(), state_cf),
            view_cf,
            cache: HashMap::new(),
            dirty: Vec::new(),
            changed: BTreeSet::new(),
            emit_changes: false,
            cache_limit,
        })
    }

    /// Starts (or stops) computing row changes for
    /// [`TableAggregate::take_changes`].
    pub fn set_emit_changes(&mut self, on: bool) {
        self.emit_changes = on;
        if !on {
            self.changed.clear();
        }
    }

    /// Entries waiting for the next commit.
    pub fn pending_entries(&self) -> usize {
        self.dirty.len() + self.changed.len()
    }

    /// Entries in memory.
    pub fn memory_entries(&self) -> usize {
        self.cache.len() + self.changed.len()
    }

    /// Applies the inner aggregate's row changes of one commit, before the
    /// commit writes them (the store still holds each row's previous
    /// version).
    pub fn apply(&mut self, store: &Store, changes: &[RowChange]) -> Result<()> {
        for change in changes {
            let old = self.inner.previous(store, change)?;
            if let Some(old) = old.filter(|r| self.passes(r)) {
                self.change(store, &old, false)?;
            }
            if let Some(new) = change.row.as_ref().filter(|r| self.passes(r)) {
                self.change(store, new, true)?;
            }
        }
        Ok(())
    }

    fn passes(&self, row: &Value) -> bool {
        passes(self.filter.as_ref(), row)
    }

    /// Adds an inner row to its outer group (`add`), or takes it back.
    fn change(&mut self, store: &Store, row: &Value, add: bool) -> Result<()> {
        let Value::Object(columns) = row else {
            return Ok(());
        };
        let row = OutputRow { columns };
        let group: Vec<Value> = self.outer.group_by.iter().map(|e| e.eval(&row)).collect();
        let k = key::plain(view_key(&group).as_bytes());
        if !self.cache.contains_key(&k) {
            let slot = match store.get(&self.view_cf, &k)? {
                Some(bytes) => {
                    let (form, accs) = slot::decode(&bytes)
                        .ok_or_else(|| corrupt(&self.view_cf, "bad accumulator value"))?;
                    Slot {
                        form,
                        accs,
                        dirty: false,
                    }
                }
                None => Slot {
                    form: GroupForm::of(&group),
                    accs: fresh(&self.outer)?,
                    dirty: false,
                },
            };
            self.cache.insert(k.clone(), slot);
        }
        let slot = self.cache.get_mut(&k).expect("just cached");
        for (acc, a) in slot.accs.iter_mut().zip(&self.outer.aggregates) {
            let input = a.input.as_ref().map_or(Value::Null, |e| e.eval(&row));
            let count_all = a.kind == AggregateKind::CountAll;
            if add {
                acc.add(&input, count_all, (0, 0));
            } else {
                acc.retract(&input, count_all);
            }
        }
        if !slot.dirty {
            slot.dirty = true;
            self.dirty.push(k.clone());
        }
        if self.emit_changes {
            self.changed.insert(k);
        }
        Ok(())
    }

    /// The outer rows changed since the last call, in key order (`None`:
    /// the group holds no rows any more). Call before
    /// [`TableAggregate::flush`].
    pub fn take_changes(&mut self) -> Result<Vec<RowChange>> {
        let mut out = Vec::with_capacity(self.changed.len());
        for k in std::mem::take(&mut self.changed) {
            let Some(slot) = self.cache.get(&k) else {
                continue;
            };
            let (vk, _) =
                key::decode_group_key(&k).ok_or_else(|| corrupt(&self.view_cf, "bad row key"))?;
            let vk = String::from_utf8_lossy(&vk).into_owned();
            let row = match slot.rows() {
                0 => None,
                _ => {
                    let group = slot
                        .form
                        .values(&vk)
                        .ok_or_else(|| corrupt(&self.view_cf, "bad group key"))?;
                    row_of(&self.outer, &group, None, &slot.accs)
                }
            };
            out.push(RowChange {
                key: vk,
                window: None,
                row,
            });
        }
        Ok(out)
    }

    /// Adds the changed slots to `batch` (deleting groups that hold no
    /// rows) and evicts clean ones beyond the cache bound; returns the rows
    /// written.
    pub fn flush(&mut self, batch: &mut Batch) -> u64 {
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        let mut value = Vec::new();
        for k in &dirty {
            let Some(slot) = self.cache.get_mut(k) else {
                continue;
            };
            slot.dirty = false;
            if slot.rows() == 0 {
                batch.delete(&self.view_cf, k);
                self.cache.remove(k);
            } else {
                slot::encode_into(&mut value, slot.form, &slot.accs);
                batch.put(&self.view_cf, k, &value);
            }
        }
        if self.cache.len() > self.cache_limit {
            let mut excess = self.cache.len() - self.cache_limit;
            self.cache.retain(|_, slot| {
                if excess > 0 && !slot.dirty {
                    excess -= 1;
                    false
                } else {
                    true
                }
            });
        }
        dirty.len() as u64
    }
}

/// Fresh retracting accumulators for `spec`'s aggregates.
fn fresh(spec: &AggregateSpec) -> Result<Vec<Accumulator>> {
    spec.aggregates
        .iter()
        .map(|a| {
            a.kind.retracting().ok_or_else(|| {
                ProcessorError::InvalidPlan(format!(
                    "{:?} cannot aggregate a table's changes",
                    a.kind
                ))
            })
        })
        .collect()
}
