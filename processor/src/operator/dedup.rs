//! Deduplication: an event whose id was seen within the time-to-live (in
//! event time) is dropped. Ids live in memory and in state under
//! `ns::DEDUP`; an id is forgotten once the watermark passes its last
//! sighting plus the TTL, which bounds the state.

use std::collections::{BTreeSet, HashMap};

use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::plan::DedupSpec;
use crate::state::key::{self, ns};
use crate::state::store::{Batch, Store};

/// The deduplication operator's state.
#[derive(Debug)]
pub struct Dedup {
    spec: DedupSpec,
    state_cf: String,
    seen: HashMap<String, i64>,
    expiry: BTreeSet<(i64, String)>,
    dirty: HashMap<String, Option<i64>>,
}

impl Dedup {
    /// Ids remembered.
    pub fn ids(&self) -> usize {
        self.seen.len()
    }

    /// An empty operator.
    pub fn new(spec: DedupSpec, state_cf: String) -> Self {
        Dedup {
            spec,
            state_cf,
            seen: HashMap::new(),
            expiry: BTreeSet::new(),
            dirty: HashMap::new(),
        }
    }

    fn id_of(&self, event: &Event) -> String {
        match self.spec.id.eval(event) {
            serde_json::Value::String(s) => s,
            other => other.to_string(),
        }
    }

    /// True if the event is a duplicate; otherwise remembers its id.
    pub fn is_duplicate(&mut self, event: &Event) -> bool {
        let id = self.id_of(event);
        if let Some(&at) = self.seen.get(&id) {
            if event.event_time.saturating_sub(at) < self.spec.ttl_ms
                && at.saturating_sub(event.event_time) < self.spec.ttl_ms
            {
                return true;
            }
            self.expiry.remove(&(at, id.clone()));
        }
        self.seen.insert(id.clone(), event.event_time);
        self.expiry.insert((event.event_time, id.clone()));
        self.dirty.insert(id, Some(event.event_time));
        false
    }

    /// Forgets ids the watermark has passed by the TTL.
    pub fn expire(&mut self, watermark: i64) {
        while let Some((at, id)) = self.expiry.first().cloned() {
            if at.saturating_add(self.spec.ttl_ms) > watermark {
                break;
            }
            self.expiry.pop_first();
            self.seen.remove(&id);
            self.dirty.insert(id, None);
        }
    }

    /// Adds changed ids to the commit.
    pub fn flush(&mut self, batch: &mut Batch) {
        for (id, at) in self.dirty.drain() {
            match at {
                Some(t) => batch.put(&self.state_cf, key::dedup_id(&id), t.to_le_bytes()),
                None => batch.delete(&self.state_cf, key::dedup_id(&id)),
            }
        }
    }

    /// Loads remembered ids.
    pub fn restore(&mut self, store: &Store) -> Result<()> {
        let (lower, upper) = key::namespace(ns::DEDUP);
        let rows = store.scan(&self.state_cf, &lower, Some(&upper), usize::MAX)?;
        for (k, v) in rows {
            let id = String::from_utf8(key::without_namespace(&k).to_vec())
                .map_err(|e| self.corrupt(e.to_string()))?;
            let at = i64::from_le_bytes(
                v.as_slice()
                    .try_into()
                    .map_err(|_| self.corrupt("bad dedup time".into()))?,
            );
            self.expiry.insert((at, id.clone()));
            self.seen.insert(id, at);
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
