//! Grouped aggregation, unwindowed or over tumbling, hopping or session
//! windows, with EMIT CHANGES or EMIT FINAL, grace periods and state purge.
//!
//! State: per group (and window, or hopping slice) the accumulators of every
//! aggregate, under `ns::ACCUMULATOR` + the key encoding of `state::key`.
//! Hopping windows keep one slot per slice (`gcd(size, advance)`) and merge a
//! window's slices when its row is computed, so an event touches one slot.
//! In memory: a cache of slots (dirty ones are flushed at each commit, clean
//! ones evicted beyond a bound), and indexes of open windows, sessions and
//! hopping slices, rebuilt from the store at restore.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::{Map, Value};

use super::RowChange;
use crate::aggregate::{Accumulator, AggregateKind};
use crate::error::{ProcessorError, Result};
use crate::event::{Event, OutputRow};
use crate::plan::{AggregateSpec, ColumnSource, Emit};
use crate::state::key;
use crate::state::store::{ns, Batch, Store};
use crate::window::{hopping, session, Window, WindowSpec};

/// What happened to an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It updated state.
    Applied,
    /// Every window it belongs to had closed: it is late.
    Late,
}

#[derive(Debug)]
struct Slot {
    accs: Vec<Accumulator>,
    dirty: bool,
    deleted: bool,
}

/// The aggregate operator's state.
#[derive(Debug)]
pub struct AggregateOp {
    spec: AggregateSpec,
    state_cf: String,
    cache: HashMap<Vec<u8>, Slot>,
    cache_limit: usize,
    /// (close at = end + grace, group, window) of windows not yet closed.
    open: BTreeSet<(i64, Vec<u8>, Window)>,
    /// Session windows per group.
    sessions: HashMap<Vec<u8>, Vec<Window>>,
    /// (purge at, group, slice start) of hopping slices.
    slices: BTreeSet<(i64, Vec<u8>, i64)>,
    /// Rows to recompute at the next commit (EMIT CHANGES).
    changed: BTreeSet<(Vec<u8>, Option<Window>)>,
    /// Row changes ready to write.
    ready: BTreeMap<(Vec<u8>, Option<Window>), Option<Value>>,
}

fn corrupt(cf: &str, reason: impl Into<String>) -> ProcessorError {
    ProcessorError::CorruptState {
        cf: cf.to_string(),
        reason: reason.into(),
    }
}

/// The key a group's rows are found under: a single string group value as
/// itself, anything else as JSON text (a JSON array for several columns).
pub fn view_key(group: &[Value]) -> String {
    match group {
        [Value::String(s)] => s.clone(),
        [v] => v.to_string(),
        many => Value::Array(many.to_vec()).to_string(),
    }
}

impl AggregateOp {
    /// An empty operator for `spec`, keeping at most `cache_limit` clean slots.
    pub fn new(spec: AggregateSpec, state_cf: String, cache_limit: usize) -> Self {
        AggregateOp {
            spec,
            state_cf,
            cache: HashMap::new(),
            cache_limit,
            open: BTreeSet::new(),
            sessions: HashMap::new(),
            slices: BTreeSet::new(),
            changed: BTreeSet::new(),
            ready: BTreeMap::new(),
        }
    }

    fn window_spec(&self) -> Option<(WindowSpec, i64, Emit)> {
        self.spec
            .window
            .as_ref()
            .map(|w| (w.window, w.grace_ms, w.emit))
    }

    fn slot_key(group: &[u8], window: Option<Window>) -> Vec<u8> {
        let mut k = vec![ns::ACCUMULATOR];
        match window {
            Some(w) => k.extend(key::windowed(group, w.start, w.end)),
            None => k.extend(key::plain(group)),
        }
        k
    }

    fn fresh(&self) -> Vec<Accumulator> {
        self.spec
            .aggregates
            .iter()
            .map(|a| a.kind.accumulator())
            .collect()
    }

    /// The slot for `k`, loaded from the store or created.
    fn slot(&mut self, store: &Store, k: &[u8]) -> Result<&mut Slot> {
        if !self.cache.contains_key(k) {
            let accs = match store.get(&self.state_cf, k)? {
                Some(bytes) => serde_json::from_slice(&bytes)
                    .map_err(|e| corrupt(&self.state_cf, e.to_string()))?,
                None => self.fresh(),
            };
            self.cache.insert(
                k.to_vec(),
                Slot {
                    accs,
                    dirty: false,
                    deleted: false,
                },
            );
        }
        let slot = self.cache.get_mut(k).expect("inserted above");
        if slot.deleted {
            slot.deleted = false;
            slot.accs = self
                .spec
                .aggregates
                .iter()
                .map(|a| a.kind.accumulator())
                .collect();
        }
        Ok(slot)
    }

    fn add_to(
        &mut self,
        store: &Store,
        k: &[u8],
        inputs: &[Value],
        position: (u64, u32),
    ) -> Result<()> {
        let kinds: Vec<AggregateKind> = self.spec.aggregates.iter().map(|a| a.kind).collect();
        let slot = self.slot(store, k)?;
        for ((acc, input), kind) in slot.accs.iter_mut().zip(inputs).zip(kinds) {
            acc.add(input, kind == AggregateKind::CountAll, position);
        }
        slot.dirty = true;
        Ok(())
    }

    fn delete_slot(&mut self, k: Vec<u8>) {
        self.cache.insert(
            k,
            Slot {
                accs: Vec::new(),
                dirty: true,
                deleted: true,
            },
        );
    }

    /// Applies an event, given the watermark before it.
    pub fn apply(&mut self, store: &Store, event: &Event, watermark: i64) -> Result<Outcome> {
        let group: Vec<Value> = self.spec.group_by.iter().map(|e| e.eval(event)).collect();
        let group = serde_json::to_vec(&group).expect("JSON values serialize");
        let inputs: Vec<Value> = self
            .spec
            .aggregates
            .iter()
            .map(|a| a.input.as_ref().map_or(Value::Null, |e| e.eval(event)))
            .collect();
        let position = (event.offset, event.partition);
        let et = event.event_time;
        let Some((window, grace, _)) = self.window_spec() else {
            self.add_to(store, &Self::slot_key(&group, None), &inputs, position)?;
            self.changed.insert((group, None));
            return Ok(Outcome::Applied);
        };
        let is_open = |w: &Window| w.end.saturating_add(grace) > watermark;
        match window {
            WindowSpec::Tumbling { .. } => {
                let w = window.fixed_windows(et)[0];
                if !is_open(&w) {
                    return Ok(Outcome::Late);
                }
                self.add_to(store, &Self::slot_key(&group, Some(w)), &inputs, position)?;
                self.track_open(&group, w, grace);
            }
            WindowSpec::Hopping {
                size_ms,
                advance_ms,
            } => {
                let open: Vec<Window> = window
                    .fixed_windows(et)
                    .into_iter()
                    .filter(is_open)
                    .collect();
                if open.is_empty() {
                    return Ok(Outcome::Late);
                }
                let slice_ms = hopping::slice_ms(size_ms, advance_ms);
                let slice = hopping::slice_start(et, slice_ms);
                let slice_window = Window {
                    start: slice,
                    end: slice + slice_ms,
                };
                self.add_to(
                    store,
                    &Self::slot_key(&group, Some(slice_window)),
                    &inputs,
                    position,
                )?;
                let last_start = slice.div_euclid(advance_ms) * advance_ms;
                self.slices
                    .insert((last_start + size_ms + grace, group.clone(), slice));
                for w in open {
                    self.track_open(&group, w, grace);
                }
            }
            WindowSpec::Session { gap_ms } => {
                if et.saturating_add(gap_ms).saturating_add(grace) <= watermark {
                    return Ok(Outcome::Late);
                }
                self.apply_session(store, &group, et, gap_ms, grace, &inputs, position)?;
            }
        }
        Ok(Outcome::Applied)
    }

    fn track_open(&mut self, group: &[u8], w: Window, grace: i64) {
        self.open
            .insert((w.end.saturating_add(grace), group.to_vec(), w));
        if self
            .spec
            .window
            .as_ref()
            .is_some_and(|s| s.emit == Emit::Changes)
        {
            self.changed.insert((group.to_vec(), Some(w)));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_session(
        &mut self,
        store: &Store,
        group: &[u8],
        et: i64,
        gap_ms: i64,
        grace: i64,
        inputs: &[Value],
        position: (u64, u32),
    ) -> Result<()> {
        let existing = self.sessions.get(group).cloned().unwrap_or_default();
        let merge = session::assign(&existing, et, gap_ms);
        let mut accs = self.fresh();
        for old in &merge.absorbed {
            let k = Self::slot_key(group, Some(*old));
            for (acc, part) in accs.iter_mut().zip(&self.slot(store, &k)?.accs.clone()) {
                acc.merge(part);
            }
            self.delete_slot(k);
            self.open
                .remove(&(old.end.saturating_add(grace), group.to_vec(), *old));
            self.changed.remove(&(group.to_vec(), Some(*old)));
            if *old != merge.window {
                // The absorbed session's row goes away; the merged one replaces it.
                self.ready.insert((group.to_vec(), Some(*old)), None);
            }
        }
        let k = Self::slot_key(group, Some(merge.window));
        let slot = self.slot(store, &k)?;
        slot.accs = accs;
        slot.dirty = true;
        self.add_to(store, &k, inputs, position)?;
        let sessions = self.sessions.entry(group.to_vec()).or_default();
        sessions.retain(|s| !merge.absorbed.contains(s));
        sessions.push(merge.window);
        self.track_open(group, merge.window, grace);
        Ok(())
    }

    /// Closes every window whose end + grace the watermark has reached:
    /// emits its final row (EMIT FINAL) or its last change, and purges its
    /// state.
    pub fn advance(&mut self, store: &Store, watermark: i64) -> Result<()> {
        while let Some((close_at, group, w)) = self.open.first().cloned() {
            if close_at > watermark {
                break;
            }
            self.open.pop_first();
            let changed = self.changed.remove(&(group.clone(), Some(w)));
            let emit_final = self
                .spec
                .window
                .as_ref()
                .is_some_and(|s| s.emit == Emit::Final);
            if emit_final || changed {
                let row = self.compute_row(store, &group, Some(w))?;
                self.ready.insert((group.clone(), Some(w)), row);
            }
            if let Some((WindowSpec::Session { .. } | WindowSpec::Tumbling { .. }, _, _)) =
                self.window_spec()
            {
                self.delete_slot(Self::slot_key(&group, Some(w)));
                if let Some(sessions) = self.sessions.get_mut(&group) {
                    sessions.retain(|s| *s != w);
                    if sessions.is_empty() {
                        self.sessions.remove(&group);
                    }
                }
            }
        }
        while let Some((purge_at, group, slice)) = self.slices.first().cloned() {
            if purge_at > watermark {
                break;
            }
            self.slices.pop_first();
            if let Some((
                WindowSpec::Hopping {
                    size_ms,
                    advance_ms,
                },
                _,
                _,
            )) = self.window_spec()
            {
                let slice_ms = hopping::slice_ms(size_ms, advance_ms);
                self.delete_slot(Self::slot_key(
                    &group,
                    Some(Window {
                        start: slice,
                        end: slice + slice_ms,
                    }),
                ));
            }
        }
        Ok(())
    }

    /// The accumulators of a row: its slot, or its merged hopping slices.
    fn row_accumulators(
        &mut self,
        store: &Store,
        group: &[u8],
        w: Option<Window>,
    ) -> Result<Vec<Accumulator>> {
        if let (
            Some(w),
            Some((
                WindowSpec::Hopping {
                    size_ms,
                    advance_ms,
                },
                _,
                _,
            )),
        ) = (w, self.window_spec())
        {
            let slice_ms = hopping::slice_ms(size_ms, advance_ms);
            let mut accs = self.fresh();
            for start in hopping::slices_of(w, slice_ms) {
                let k = Self::slot_key(
                    group,
                    Some(Window {
                        start,
                        end: start + slice_ms,
                    }),
                );
                let slot = self.slot(store, &k)?;
                for (acc, part) in accs.iter_mut().zip(&slot.accs) {
                    acc.merge(part);
                }
            }
            return Ok(accs);
        }
        Ok(self.slot(store, &Self::slot_key(group, w))?.accs.clone())
    }

    /// The output row of a group (and window); `None` if HAVING rejects it.
    fn compute_row(
        &mut self,
        store: &Store,
        group: &[u8],
        w: Option<Window>,
    ) -> Result<Option<Value>> {
        let accs = self.row_accumulators(store, group, w)?;
        let values: Vec<Value> =
            serde_json::from_slice(group).map_err(|e| corrupt(&self.state_cf, e.to_string()))?;
        let mut row = Map::new();
        for (name, source) in &self.spec.columns {
            let v = match source {
                ColumnSource::GroupKey(i) => values.get(*i).cloned().unwrap_or(Value::Null),
                ColumnSource::WindowStart => w.map_or(Value::Null, |w| w.start.into()),
                ColumnSource::WindowEnd => w.map_or(Value::Null, |w| w.end.into()),
                ColumnSource::Aggregate(i) => accs.get(*i).map_or(Value::Null, Accumulator::result),
            };
            row.insert(name.clone(), v);
        }
        if let Some(having) = &self.spec.having {
            if !having.is_true(&OutputRow { columns: &row }) {
                return Ok(None);
            }
        }
        Ok(Some(Value::Object(row)))
    }

    /// Row changes since the last call (EMIT CHANGES rows recomputed once
    /// each, plus rows finished by `advance`).
    pub fn take_changes(&mut self, store: &Store) -> Result<Vec<RowChange>> {
        for (group, w) in std::mem::take(&mut self.changed) {
            let row = self.compute_row(store, &group, w)?;
            self.ready.insert((group, w), row);
        }
        let mut out = Vec::with_capacity(self.ready.len());
        for ((group, w), row) in std::mem::take(&mut self.ready) {
            let values: Vec<Value> = serde_json::from_slice(&group)
                .map_err(|e| corrupt(&self.state_cf, e.to_string()))?;
            out.push(RowChange {
                key: view_key(&values),
                window: w.map(|w| (w.start, w.end)),
                row,
            });
        }
        Ok(out)
    }

    /// Adds dirty slots to `batch` and marks them clean; evicts clean slots
    /// beyond the cache bound.
    pub fn flush(&mut self, batch: &mut Batch) {
        self.cache.retain(|k, slot| {
            if slot.dirty {
                if slot.deleted {
                    batch.delete(&self.state_cf, k.clone());
                } else {
                    batch.put(
                        &self.state_cf,
                        k.clone(),
                        serde_json::to_vec(&slot.accs).expect("serializes"),
                    );
                }
                slot.dirty = false;
            }
            !slot.deleted
        });
        if self.cache.len() > self.cache_limit {
            let excess = self.cache.len() - self.cache_limit;
            let victims: Vec<Vec<u8>> = self.cache.keys().take(excess).cloned().collect();
            for k in victims {
                self.cache.remove(&k);
            }
        }
    }

    /// Rebuilds the open-window, session and slice indexes from the store,
    /// given the watermark of the last commit (windows it closed stay closed).
    pub fn restore(&mut self, store: &Store, watermark: i64) -> Result<()> {
        let Some((window, grace, _)) = self.window_spec() else {
            return Ok(());
        };
        let lower = [ns::ACCUMULATOR];
        let upper = [ns::ACCUMULATOR + 1];
        let mut after: Vec<u8> = lower.to_vec();
        loop {
            let chunk = store.scan(&self.state_cf, &after, Some(&upper), 10_000)?;
            let Some((last, _)) = chunk.last() else { break };
            after = last.clone();
            after.push(0);
            for (k, _) in &chunk {
                let (group, start, end) = key::decode_windowed(&k[1..])
                    .ok_or_else(|| corrupt(&self.state_cf, "bad accumulator key"))?;
                let w = Window { start, end };
                match window {
                    WindowSpec::Tumbling { .. } => {
                        self.open.insert((end.saturating_add(grace), group, w));
                    }
                    WindowSpec::Session { .. } => {
                        self.sessions.entry(group.clone()).or_default().push(w);
                        self.open.insert((end.saturating_add(grace), group, w));
                    }
                    WindowSpec::Hopping {
                        size_ms,
                        advance_ms,
                    } => {
                        let last_start = start.div_euclid(advance_ms) * advance_ms;
                        self.slices
                            .insert((last_start + size_ms + grace, group.clone(), start));
                        // Every window containing this slice that has not closed.
                        for w in hopping::windows_of(start, size_ms, advance_ms) {
                            if w.end.saturating_add(grace) > watermark {
                                self.open
                                    .insert((w.end.saturating_add(grace), group.clone(), w));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Number of open windows (for metrics).
    pub fn open_windows(&self) -> usize {
        self.open.len()
    }
}
