//! Stream-table join: the table is the latest value per record key of
//! another topic (a null value deletes the key), kept in memory and in
//! state under `ns::TABLE`. Table records are applied before the stream
//! records of the same poll, and their offsets commit with everything else.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::plan::{JoinKind, JoinSpec};
use crate::state::store::{ns, Batch, Store};

/// The join operator's state.
#[derive(Debug)]
pub struct TableJoin {
    spec: JoinSpec,
    state_cf: String,
    rows: HashMap<String, Value>,
    dirty: HashMap<String, Option<Value>>,
}

impl TableJoin {
    /// An empty table.
    pub fn new(spec: JoinSpec, state_cf: String) -> Self {
        TableJoin {
            spec,
            state_cf,
            rows: HashMap::new(),
            dirty: HashMap::new(),
        }
    }

    /// The table's topic.
    pub fn topic(&self) -> &str {
        &self.spec.table_topic
    }

    /// Applies a table record: the latest value per key wins; null deletes.
    pub fn upsert(&mut self, key: String, value: Value) {
        if value.is_null() {
            self.rows.remove(&key);
            self.dirty.insert(key, None);
        } else {
            self.rows.insert(key.clone(), value.clone());
            self.dirty.insert(key, Some(value));
        }
    }

    /// Attaches the matching table row; false if an inner join found none.
    pub fn enrich(&self, event: &mut Event) -> bool {
        let key = match self.spec.stream_key.eval(event) {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        match self.rows.get(&key) {
            Some(row) => {
                event.joined = Some((self.spec.alias.clone(), row.clone()));
                true
            }
            None => {
                event.joined = Some((self.spec.alias.clone(), Value::Null));
                self.spec.kind == JoinKind::Left
            }
        }
    }

    fn state_key(key: &str) -> Vec<u8> {
        let mut k = vec![ns::TABLE];
        k.extend_from_slice(key.as_bytes());
        k
    }

    /// Adds changed rows to the commit.
    pub fn flush(&mut self, batch: &mut Batch) {
        for (key, row) in self.dirty.drain() {
            match row {
                Some(v) => batch.put(
                    &self.state_cf,
                    Self::state_key(&key),
                    v.to_string().into_bytes(),
                ),
                None => batch.delete(&self.state_cf, Self::state_key(&key)),
            }
        }
    }

    /// Loads the table.
    pub fn restore(&mut self, store: &Store) -> Result<()> {
        for (k, v) in store.scan(
            &self.state_cf,
            &[ns::TABLE],
            Some(&[ns::TABLE + 1]),
            usize::MAX,
        )? {
            let key =
                String::from_utf8(k[1..].to_vec()).map_err(|e| self.corrupt(e.to_string()))?;
            let value = serde_json::from_slice(&v).map_err(|e| self.corrupt(e.to_string()))?;
            self.rows.insert(key, value);
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
