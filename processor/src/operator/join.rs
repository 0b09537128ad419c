//! Stream-table join, as of the event's time: the table keeps, per record
//! key of another topic, the history of its values by record timestamp (a
//! null value deletes the key from then on), kept in memory and in state
//! under `ns::TABLE`. A stream event joins the value the key had at the
//! event's time — the latest table record whose timestamp is at or before
//! it — as Flink's `FOR SYSTEM_TIME AS OF` and Kafka Streams' versioned
//! stores do, so a replay that reads the whole table first joins what the
//! live run joined. Table records are applied before the stream records
//! of the same poll, and their offsets commit with everything else.
//!
//! History older than [`TableJoin::prune`]'s horizon — the window's grace
//! period behind the watermark for windowed aggregates (older events are
//! late), else [`DEFAULT_HISTORY_MS`] — is dropped, except the newest value
//! before it, which then stands for all earlier time: an event older than
//! the horizon joins it. A table
//! record that arrives after the stream events of its time were processed
//! (its timestamp behind them) changes later joins only: the live run
//! joined the older value, a replay joins the newer one.
//!
//! Stored form of one key (`ns::TABLE` + key, or for a table joined after
//! the first join `ns::FURTHER_TABLE` + its place + key: [`TableSlot`]): a
//! version byte `0x01` and a JSON array of `[timestamp_ms, value-or-null]`
//! pairs in time order. A value without the version byte (written before
//! history was kept) is one row valid from the beginning of time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use serde_json::Value;

use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::plan::{JoinKind, JoinSpec};
use crate::state::key::TableSlot;
use crate::state::store::{Batch, Store};

/// History kept behind the watermark when the plan has no window: a day.
pub const DEFAULT_HISTORY_MS: i64 = 24 * 3_600_000;

/// First byte of a stored history (older state holds a bare JSON row).
const HISTORY_FORMAT: u8 = 0x01;

/// One key's values by time: `(since_ms, value)`, `None` = deleted, sorted.
type History = Vec<(i64, Option<Value>)>;

/// The join operator's state.
#[derive(Debug)]
pub struct TableJoin {
    spec: JoinSpec,
    state_cf: String,
    /// Where its rows are kept in state.
    slot: TableSlot,
    /// The fields of a table record's value the plan reads (and its time
    /// column): the row keeps only those. `None`: the whole value.
    fields: Option<Vec<String>>,
    rows: HashMap<String, History>,
    dirty: std::collections::HashSet<String>,
    /// Keys whose history [`TableJoin::prune`] may shorten, by the horizon
    /// from which it can ([`due`]): a prune takes only the keys due, not
    /// the whole table, on every poll (a table of immutable rows — each
    /// key one value — would otherwise be walked whole each time). An
    /// entry whose key changed since is checked again when taken.
    prunable: BinaryHeap<Reverse<(i64, String)>>,
}

impl TableJoin {
    /// An empty table, kept in state at `slot`.
    pub fn new(spec: JoinSpec, state_cf: String, slot: TableSlot) -> Self {
        TableJoin {
            spec,
            state_cf,
            slot,
            fields: None,
            rows: HashMap::new(),
            dirty: std::collections::HashSet::new(),
            prunable: BinaryHeap::new(),
        }
    }

    /// The same table keeping only `fields` of each record's value (all
    /// that the plan reads of it, [`crate::plan::Plan::table_fields`]):
    /// each event that joins it then copies those, not the whole value.
    pub fn reading(mut self, fields: Option<Vec<String>>) -> Self {
        self.fields = fields;
        self
    }

    /// A table record's value as the table keeps it: whole, or only the
    /// fields read (missing and null ones left out); `Null` for a
    /// deletion (an empty or `null` value) or a value that is not JSON.
    pub fn row_of(&self, bytes: &[u8]) -> Value {
        let trimmed = bytes.trim_ascii();
        let Some(names) = self
            .fields
            .as_ref()
            .filter(|_| trimmed.first() == Some(&b'{'))
        else {
            return serde_json::from_slice(bytes).unwrap_or(Value::Null);
        };
        crate::event::decode_object(bytes, names).unwrap_or(Value::Null)
    }

    /// Keys the table holds.
    pub fn keys(&self) -> usize {
        self.rows.len()
    }

    /// How far behind the watermark its history is kept, if the
    /// definition says (`JOIN_HISTORY`).
    pub fn history_ms(&self) -> Option<i64> {
        self.spec.history_ms
    }

    /// The table's time column, if it declares one.
    pub fn time_field(&self) -> Option<&[String]> {
        self.spec.table_time.as_deref()
    }

    /// Applies a table record with timestamp `at_ms`: from then on the key
    /// has `value` (null deletes). Records of equal time apply in offset
    /// order (the later wins).
    pub fn upsert(&mut self, key: String, value: Value, at_ms: i64) {
        let value = (!value.is_null()).then_some(value);
        let history = self.rows.entry(key.clone()).or_default();
        let at = history.partition_point(|(t, _)| *t <= at_ms);
        history.insert(at, (at_ms, value));
        if let Some(when) = due(history) {
            self.prunable.push(Reverse((when, key.clone())));
        }
        self.dirty.insert(key);
    }

    /// Drops history no event at or after `horizon_ms` can join: every
    /// value older than the newest one at or before the horizon.
    pub fn prune(&mut self, horizon_ms: i64) {
        while let Some(Reverse((when, _))) = self.prunable.peek() {
            if *when > horizon_ms {
                break;
            }
            let Some(Reverse((_, key))) = self.prunable.pop() else {
                break;
            };
            let Some(history) = self.rows.get_mut(&key) else {
                continue;
            };
            let at = history.partition_point(|(t, _)| *t <= horizon_ms);
            if at > 1 || (at == 1 && history[0].0 != i64::MIN) {
                history.drain(..at - 1);
                // The value at the horizon stands for all earlier time.
                history[0].0 = i64::MIN;
                self.dirty.insert(key.clone());
            }
            if let Some(when) = due(history) {
                self.prunable.push(Reverse((when, key)));
            }
        }
    }

    /// Attaches the table row the event's key had at the event's time;
    /// false if an inner join found none.
    pub fn enrich(&self, event: &mut Event) -> bool {
        let key = match self.spec.stream_key.eval(event) {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let row = self.rows.get(&key).and_then(|history| {
            let at = history.partition_point(|(t, _)| *t <= event.event_time);
            history[..at].last().and_then(|(_, v)| v.as_ref())
        });
        let found = row.is_some();
        let row = row.cloned().unwrap_or(Value::Null);
        event.joined.push((self.spec.alias.clone(), row));
        found || self.spec.kind == JoinKind::Left
    }

    /// Adds changed histories to the commit.
    pub fn flush(&mut self, batch: &mut Batch) {
        for key in self.dirty.drain() {
            match self.rows.get(&key) {
                Some(history) if !history.is_empty() => {
                    let mut bytes = vec![HISTORY_FORMAT];
                    serde_json::to_writer(&mut bytes, history).expect("values serialize");
                    batch.put(&self.state_cf, self.slot.row(&key), bytes);
                }
                _ => batch.delete(&self.state_cf, self.slot.row(&key)),
            }
        }
    }

    /// Loads the table.
    pub fn restore(&mut self, store: &Store) -> Result<()> {
        let (lower, upper) = self.slot.range();
        for (k, v) in store.scan(&self.state_cf, &lower, Some(&upper), usize::MAX)? {
            let key = String::from_utf8(self.slot.record_key(&k).to_vec())
                .map_err(|e| self.corrupt(e.to_string()))?;
            let history: History = match v.split_first() {
                Some((&HISTORY_FORMAT, json)) => {
                    serde_json::from_slice(json).map_err(|e| self.corrupt(e.to_string()))?
                }
                _ => vec![(
                    i64::MIN,
                    Some(serde_json::from_slice(&v).map_err(|e| self.corrupt(e.to_string()))?),
                )],
            };
            if let Some(when) = due(&history) {
                self.prunable.push(Reverse((when, key.clone())));
            }
            self.rows.insert(key, history);
        }
        Ok(())
    }

    fn corrupt(&self, reason: String) -> ProcessorError {
        ProcessorError::CorruptState {
            cf: self.state_cf.clone(),
            reason,
        }
    }
}

/// The horizon from which [`TableJoin::prune`] can shorten `history`: its
/// first value's time while that does not yet stand for all earlier time,
/// else its second value's; `None` when there is nothing to prune.
fn due(history: &History) -> Option<i64> {
    match history.as_slice() {
        [(first, _), ..] if *first != i64::MIN => Some(*first),
        [_, (second, _), ..] => Some(*second),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::Expr;
    use crate::state::key::TableSlot;

    fn table() -> TableJoin {
        let spec = JoinSpec {
            table_topic: "t".into(),
            stream_key: Expr::Key,
            alias: "t".into(),
            kind: JoinKind::Inner,
            table_time: None,
            history_ms: None,
            within: None,
        };
        TableJoin::new(spec, "cf".into(), TableSlot::First)
    }

    fn history(t: &TableJoin, key: &str) -> Vec<i64> {
        t.rows[key].iter().map(|(at, _)| *at).collect()
    }

    #[test]
    fn prune_shortens_exactly_the_histories_due_and_keeps_the_rest_due_later() {
        let mut t = table();
        t.upsert("a".into(), serde_json::json!(1), 100);
        t.upsert("a".into(), serde_json::json!(2), 200);
        t.upsert("a".into(), serde_json::json!(3), 300);
        t.upsert("b".into(), serde_json::json!(1), 250);
        t.prune(50);
        assert_eq!(history(&t, "a"), [100, 200, 300]);
        t.prune(210);
        // a's value at 200 stands for all earlier time; b is not due.
        assert_eq!(history(&t, "a"), [i64::MIN, 300]);
        assert_eq!(history(&t, "b"), [250]);
        t.prune(260);
        assert_eq!(history(&t, "b"), [i64::MIN]);
        t.prune(1_000);
        assert_eq!(history(&t, "a"), [i64::MIN]);
        // Nothing left to prune: the heap is empty, not walked again.
        assert!(t.prunable.is_empty(), "{:?}", t.prunable);
        // A later value makes the key due again.
        t.upsert("b".into(), serde_json::json!(2), 2_000);
        t.prune(2_000);
        assert_eq!(history(&t, "b"), [i64::MIN]);
    }

    #[test]
    fn a_table_of_one_value_per_key_is_not_walked_whole_by_each_prune() {
        let mut t = table();
        for k in 0..10_000 {
            t.upsert(format!("k{k}"), serde_json::json!(k), 1_000 + k);
        }
        t.prune(500);
        // None is due: every entry is still waiting, none taken.
        assert_eq!(t.prunable.len(), 10_000);
        t.prune(1_099);
        assert_eq!(t.prunable.len(), 10_000 - 100);
    }
}
