//! Each row a view row: the query over a declared table's rows without
//! `GROUP BY` ([`crate::plan::RowsAggregate::each_row`]) — a filtered
//! projection of the table, or a join of two tables. Every row passing the
//! `WHERE` is the view row of its key, its columns computed from the row;
//! a row that goes away or stops passing is deleted.
//!
//! Also the view rows' stored form shared with the top-N
//! ([`super::top_n`]): a row of values is stored as the slot of a
//! `LATEST_BY_OFFSET` of each column (`state::slot`), as every view row
//! is, so readers compute it as they do any view's.

use std::collections::BTreeMap;

use serde_json::Value;

use super::RowChange;
use crate::accumulators::Accumulator;
use crate::event::OutputRow;
use crate::expr::Expr;
use crate::plan::{AggregateSpec, RowsAggregate};
use crate::state::key;
use crate::state::slot::{self, GroupForm};
use crate::state::store::Batch;

/// An input row as expressions read it (its columns as fields).
pub(crate) fn row_of(row: &Value) -> OutputRow<'_> {
    static EMPTY: std::sync::OnceLock<serde_json::Map<String, Value>> = std::sync::OnceLock::new();
    match row {
        Value::Object(columns) => OutputRow { columns },
        _ => OutputRow {
            columns: EMPTY.get_or_init(serde_json::Map::new),
        },
    }
}

/// Whether `row` passes `filter` (a row that is not an object passes
/// none).
pub(crate) fn passes(filter: Option<&Expr>, row: &Value) -> bool {
    match (filter, row) {
        (None, _) => true,
        (Some(f), Value::Object(columns)) => f.is_true(&OutputRow { columns }),
        (Some(_), _) => false,
    }
}

/// The view row `columns` (each aggregate a `LATEST_BY_OFFSET` of its
/// column's expression) make of input row `row`.
pub(crate) fn values_row(columns: &AggregateSpec, row: &Value) -> Value {
    let r = row_of(row);
    Value::Object(
        columns
            .columns
            .iter()
            .zip(&columns.aggregates)
            .map(|((name, _), a)| {
                let v = a.input.as_ref().map_or(Value::Null, |e| e.eval(&r));
                (name.clone(), v)
            })
            .collect(),
    )
}

/// Adds the view row `columns` make of `row` (`None`: delete) under view
/// key `k` of `view_cf` to `batch`, in the stored form of a view row;
/// `buffer` is reused between calls.
fn write_values_row(
    batch: &mut Batch,
    view_cf: &str,
    k: &str,
    columns: &AggregateSpec,
    row: Option<&Value>,
    buffer: &mut Vec<u8>,
) {
    let rk = key::plain(k.as_bytes());
    let Some(row) = row else {
        batch.delete(view_cf, &rk);
        return;
    };
    let r = row_of(row);
    let accs: Vec<Accumulator> = columns
        .aggregates
        .iter()
        .map(|a| {
            let v = a.input.as_ref().map_or(Value::Null, |e| e.eval(&r));
            Accumulator::Latest(Some(Box::new(((0, 0), v))))
        })
        .collect();
    slot::encode_into(buffer, GroupForm::String, &accs);
    batch.put(view_cf, &rk, &*buffer);
}

/// The view row changes `writes` (input rows by view key, `None`:
/// deleted) make, in key order, for a change feed.
pub(crate) fn values_changes(
    columns: &AggregateSpec,
    writes: &BTreeMap<String, Option<Value>>,
) -> Vec<RowChange> {
    writes
        .iter()
        .map(|(k, row)| RowChange {
            key: k.clone(),
            window: None,
            row: row.as_ref().map(|r| values_row(columns, r)),
        })
        .collect()
}

/// Adds the view rows `columns` make of `writes` (input rows by view key,
/// `None`: delete) to `batch`; returns how many.
pub(crate) fn write_values_rows(
    batch: &mut Batch,
    view_cf: &str,
    columns: &AggregateSpec,
    writes: BTreeMap<String, Option<Value>>,
) -> u64 {
    let mut buffer = Vec::new();
    let written = writes.len() as u64;
    for (k, row) in writes {
        write_values_row(batch, view_cf, &k, columns, row.as_ref(), &mut buffer);
    }
    written
}

/// The operator making each input row a view row.
#[derive(Debug)]
pub struct EachRow {
    columns: AggregateSpec,
    filter: Option<Expr>,
    view_cf: String,
    /// Input rows to write at the flush, by key (`None`: delete).
    writes: BTreeMap<String, Option<Value>>,
    emit_changes: bool,
}

impl EachRow {
    /// The operator writing `rows`' columns of each input row into the
    /// view's `view_cf`.
    pub fn new(rows: &RowsAggregate, view_cf: String) -> EachRow {
        EachRow {
            columns: rows.aggregate.clone(),
            filter: rows.filter.clone(),
            view_cf,
            writes: BTreeMap::new(),
            emit_changes: false,
        }
    }

    /// Starts (or stops) handing out row changes.
    pub fn set_emit_changes(&mut self, on: bool) {
        self.emit_changes = on;
    }

    /// View rows waiting for the next commit.
    pub fn pending_entries(&self) -> usize {
        self.writes.len()
    }

    /// Applies the input rows' changes of one commit.
    pub fn apply(&mut self, changes: &[RowChange]) {
        for change in changes {
            let row = change
                .row
                .clone()
                .filter(|r| passes(self.filter.as_ref(), r));
            self.writes.insert(change.key.clone(), row);
        }
    }

    /// The view's row changes of the commit (empty unless emitted). A row
    /// deleted that never passed is handed out as a deletion too.
    pub fn take_changes(&self) -> Vec<RowChange> {
        if !self.emit_changes {
            return Vec::new();
        }
        values_changes(&self.columns, &self.writes)
    }

    /// Adds the view rows to `batch`; returns how many.
    pub fn flush(&mut self, batch: &mut Batch) -> u64 {
        write_values_rows(
            batch,
            &self.view_cf,
            &self.columns,
            std::mem::take(&mut self.writes),
        )
    }
}
