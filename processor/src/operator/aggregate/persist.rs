//! What an aggregate hands out and keeps: row changes for sinks and change
//! feeds, dirty slots flushed into a commit, and the in-memory indexes
//! rebuilt from the store at restore.

use super::*;

impl AggregateOp {
    /// Row changes since the last call, in row-key order: EMIT CHANGES rows
    /// recomputed once each, plus rows finished by `advance`. Hopping
    /// windows' changed rows are also queued for the next flush. Empty
    /// unless the operator emits changes (and, for hopping, writes rows).
    pub fn take_changes(&mut self, store: &Store) -> Result<Vec<RowChange>> {
        let windowed = self.spec.window.is_some();
        let hopping = matches!(self.window_spec(), Some((WindowSpec::Hopping { .. }, _, _)));
        let mut changed: Vec<Vec<u8>> = std::mem::take(&mut self.changed).into_iter().collect();
        changed.sort_unstable();
        for rk in changed {
            let (vk, w) = split_row_key(&rk, windowed)
                .ok_or_else(|| corrupt(&self.rows_cf, "bad row key"))?;
            if hopping {
                // An open window's row is computed when read; only the change
                // is handed out.
                let w = w.expect("windowed");
                let slices = self
                    .hopping
                    .as_mut()
                    .expect("a hopping aggregate has slices");
                if let Some((form, accs)) = slices.merged(store, &self.spec, vk.as_bytes(), w)? {
                    let row = self.hopping_row(vk.as_bytes(), form, w, &accs)?;
                    self.ready.insert(rk, row);
                }
            } else if self.emit_changes {
                let row = self.compute_row(store, &rk, &vk, w, true)?;
                self.ready.insert(rk, row);
            }
        }
        let mut ready: Vec<(Vec<u8>, Option<Value>)> = self.ready.drain().collect();
        ready.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        ready
            .into_iter()
            .map(|(rk, row)| {
                let (key, w) = split_row_key(&rk, windowed)
                    .ok_or_else(|| corrupt(&self.rows_cf, "bad row key"))?;
                Ok(RowChange {
                    key,
                    window: w.map(|w| (w.start, w.end)),
                    row,
                })
            })
            .collect()
    }

    /// Adds dirty slots (and queued hopping rows) to `batch` and marks them
    /// clean; forgets deleted and closed slots; evicts clean slots beyond
    /// the cache bound. Returns the number of rows written to the rows
    /// column family.
    pub fn flush(&mut self, batch: &mut Batch) -> u64 {
        let mut rows = 0;
        let mut dirty = std::mem::take(&mut self.dirty);
        let mut value = Vec::new();
        // In key order, RocksDB's memtable inserts each key next to the
        // previous one instead of searching the skiplist from the top.
        if dirty.len().saturating_mul(4) >= self.cache.len() {
            // Most slots are dirty: one pass over the cache beats a lookup each.
            let slots = key::in_key_order(self.cache.iter_mut().filter(|(_, slot)| slot.dirty));
            let mut forget = 0;
            for (k, slot) in slots {
                rows += 1;
                forget += usize::from(write_slot(batch, &self.rows_cf, k, slot, &mut value));
            }
            if forget > 0 {
                self.cache.retain(|_, slot| !(slot.deleted || slot.closed));
            }
        } else {
            dirty.sort_unstable();
            for k in dirty {
                let Some(slot) = self.cache.get_mut(&k) else {
                    continue;
                };
                rows += 1;
                if write_slot(batch, &self.rows_cf, &k, slot, &mut value) {
                    self.cache.remove(&k);
                }
            }
        }
        if let Some(slices) = &mut self.hopping {
            // A slice's write changes its windows' rows.
            rows += slices.flush(batch);
        }
        let mut row_writes = std::mem::take(&mut self.row_writes);
        row_writes.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in row_writes {
            rows += 1;
            match v {
                Some(v) => batch.put(&self.rows_cf, &k, &v),
                None => batch.delete(&self.rows_cf, &k),
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
        rows
    }

    /// Rebuilds the open-window, session and slice indexes from the store,
    /// given the watermark of the last commit (windows it closed stay closed).
    pub fn restore(&mut self, store: &Store, watermark: i64) -> Result<()> {
        let Some((window, grace, _)) = self.window_spec() else {
            return Ok(());
        };
        let owner = self.owner;
        let owns = |group: &[u8]| owner.is_none_or(|shard| shard.owns(group));
        if let Some(slices) = &mut self.hopping {
            slices.restore(store, &owns)?;
        }
        if let WindowSpec::Hopping {
            size_ms,
            advance_ms,
        } = window
        {
            self.closed_end = last_closed_end(watermark, size_ms, advance_ms, grace);
        }
        // A hopping view's rows are its closed windows: only their
        // retention needs them.
        let retention = self.spec.window.as_ref().and_then(|w| w.retention_ms);
        if self.hopping.is_some() && retention.is_none() {
            return Ok(());
        }
        let rows_cf = self.rows_cf.clone();
        store.for_each_key(&rows_cf, &[], None, |k| {
            let (group, start, end) =
                key::decode_windowed(&k).ok_or_else(|| corrupt(&rows_cf, "bad row key"))?;
            if !self.owns(&group) {
                return Ok(());
            }
            let w = Window { start, end };
            let close_at = end.saturating_add(grace);
            if self.hopping.is_some() || close_at <= watermark {
                self.expire_later(&k, w);
                return Ok(());
            }
            if matches!(window, WindowSpec::Session { .. }) {
                self.sessions.entry(group).or_default().push(w);
            }
            self.open
                .entry(close_at)
                .or_default()
                .insert(SlotKey::from_vec(k));
            Ok(())
        })?;
        self.delete_expired(watermark);
        Ok(())
    }

    /// Starts (or stops) computing row changes from now on (a change feed
    /// subscribed).
    pub fn set_emit_changes(&mut self, on: bool) {
        self.emit_changes = on;
    }

    /// True if row changes are computed.
    pub fn emits_changes(&self) -> bool {
        self.emit_changes
    }
}
