//! Closing windows as the watermark passes them: final rows or last
//! changes, hopping windows' rows from their slices, expiry of closed rows
//! after their retention.

use super::*;

impl AggregateOp {
    /// Closes every window whose end + grace the watermark has reached:
    /// hands out its final row (EMIT FINAL) or its last change, writes a
    /// hopping window's final row, and drops the window from memory; purges
    /// hopping slices no open window uses.
    pub fn advance(&mut self, store: &Store, watermark: i64) -> Result<()> {
        let Some((window, grace, emit)) = self.window_spec() else {
            return Ok(());
        };
        if let WindowSpec::Hopping {
            size_ms,
            advance_ms,
        } = window
        {
            return self.advance_hopping(store, watermark, size_ms, advance_ms, grace, emit);
        }
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() > watermark {
                break;
            }
            let closing = entry.remove();
            let retention = self.spec.window.as_ref().and_then(|w| w.retention_ms);
            if !self.emit_changes && retention.is_none() && !self.sessions_used() {
                // Nothing to hand out or schedule: just forget the slots.
                for rk in closing {
                    self.close_slot(&rk);
                }
                continue;
            }
            let mut closing: Vec<SlotKey> = closing.into_iter().collect();
            closing.sort_unstable();
            for rk in closing {
                let changed = self.changed.remove(&rk[..]);
                let (vk, w) = split_row_key(&rk, true)
                    .ok_or_else(|| corrupt(&self.rows_cf, "bad row key"))?;
                let w = w.expect("windowed");
                if self.emit_changes && (emit == Emit::Final || changed) {
                    let row = self.compute_row(store, &rk, &vk, Some(w), true)?;
                    self.ready.insert(rk.to_vec(), row);
                }
                self.close_slot(&rk);
                self.expire_later(&rk, w);
                if let Some(sessions) = self.sessions.get_mut(vk.as_bytes()) {
                    sessions.retain(|s| *s != w);
                    if sessions.is_empty() {
                        self.sessions.remove(vk.as_bytes());
                    }
                }
            }
        }
        self.delete_expired(watermark);
        Ok(())
    }

    /// True for session windows (the operator keeps open sessions per group).
    pub(super) fn sessions_used(&self) -> bool {
        matches!(self.window_spec(), Some((WindowSpec::Session { .. }, _, _)))
    }

    /// With a retention, schedules the deletion of closed window `w`'s row.
    pub(super) fn expire_later(&mut self, rk: &[u8], w: Window) {
        if let Some(retention) = self.spec.window.as_ref().and_then(|s| s.retention_ms) {
            self.expiring
                .entry(w.end.saturating_add(retention))
                .or_default()
                .push(SlotKey::from_slice(rk));
        }
    }

    /// Deletes the rows whose retention the watermark has passed (at the
    /// next flush). Not a change: nothing is handed out.
    pub(super) fn delete_expired(&mut self, watermark: i64) {
        while let Some(entry) = self.expiring.first_entry() {
            if *entry.key() > watermark {
                break;
            }
            for rk in entry.remove() {
                self.row_writes.push((rk, None));
            }
        }
    }

    /// Closes hopping windows in end order: each window with data is merged
    /// from its slices and written as a row (and handed out as a change
    /// when changes are emitted); slices no later window uses are purged.
    pub(super) fn advance_hopping(
        &mut self,
        store: &Store,
        watermark: i64,
        size_ms: i64,
        advance_ms: i64,
        grace: i64,
        emit: Emit,
    ) -> Result<()> {
        while let Some(first) = self.hopping.as_ref().and_then(Slices::first_start) {
            // The first window holding the earliest slice (starts lie on
            // the advance grid), or the one after the last window closed.
            let first_end = ((first - size_ms).div_euclid(advance_ms) + 1) * advance_ms + size_ms;
            let end = match self.closed_end {
                i64::MIN => first_end,
                closed => first_end.max(closed.saturating_add(advance_ms)),
            };
            if end.saturating_add(grace) > watermark {
                break;
            }
            let w = Window {
                start: end - size_ms,
                end,
            };
            // Slices before the next window's start are in no open window.
            let keep_from = w.start + advance_ms;
            let slices = self
                .hopping
                .as_mut()
                .expect("a hopping aggregate has slices");
            let closed = slices.close(store, &self.spec, w, keep_from)?;
            let (mut rk, mut value) = (std::mem::take(&mut self.key_buf), Vec::new());
            for (vk, form, accs) in closed {
                rk.clear();
                key::windowed_into(&mut rk, &vk, w.start, w.end);
                let changed = !self.changed.is_empty() && self.changed.remove(&rk);
                if self.emit_changes && (emit == Emit::Final || changed) {
                    let row = self.hopping_row(&vk, form, w, &accs)?;
                    self.ready.insert(rk.clone(), row);
                }
                if self.write_rows {
                    self.expire_later(&rk, w);
                    slot::encode_into(&mut value, form, &accs);
                    self.row_writes
                        .push((SlotKey::from_slice(&rk), Some(RowValue::from_slice(&value))));
                }
            }
            self.key_buf = rk;
            self.closed_end = end;
        }
        // Windows that closed without data stay closed: an event arriving
        // later for one of their slices must not open them again.
        self.closed_end = self
            .closed_end
            .max(last_closed_end(watermark, size_ms, advance_ms, grace));
        self.delete_expired(watermark);
        Ok(())
    }

    /// A hopping window's output row from its merged slices.
    pub(super) fn hopping_row(
        &self,
        vk: &[u8],
        form: GroupForm,
        w: Window,
        accs: &[Accumulator],
    ) -> Result<Option<Value>> {
        let group = form
            .values(&String::from_utf8_lossy(vk))
            .ok_or_else(|| corrupt(&self.rows_cf, "bad group key"))?;
        Ok(row_of(&self.spec, &group, Some(w), accs))
    }

    /// The output row of the slot `rk` (a tumbling, session or unwindowed row).
    pub(super) fn compute_row(
        &mut self,
        store: &Store,
        rk: &[u8],
        vk: &str,
        w: Option<Window>,
        stored: bool,
    ) -> Result<Option<Value>> {
        let slot = self.slot(store, rk, GroupForm::String, stored)?;
        let (form, accs) = (slot.form, slot.accs.clone());
        let group = form
            .values(vk)
            .ok_or_else(|| corrupt(&self.rows_cf, "bad group key"))?;
        Ok(row_of(&self.spec, &group, w, &accs))
    }
}
