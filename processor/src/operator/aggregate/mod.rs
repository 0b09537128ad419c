//! Grouped aggregation, unwindowed or over tumbling, hopping or session
//! windows, with EMIT CHANGES or EMIT FINAL and grace periods.
//!
//! Storage: an aggregate view's rows *are* its accumulators. The rows
//! column family maps a row key (`state::key`: the view key, plus the
//! window) to the encoded accumulators (`state::slot`), and readers compute
//! the columns with [`row_of`] — applying HAVING and, for EMIT FINAL, showing
//! only windows the committed watermark has closed. So an event updates one
//! slot in memory, and a commit writes each changed slot once; nothing is
//! written twice (state and row), and closing a window writes nothing.
//! Hopping windows are the exception: their slots are slices of
//! `gcd(size, advance)`, kept per group in operator state
//! ([`super::slices`]). Readers merge an open window's row from its
//! slices; a closed window's row is written once, when it closes, and
//! slices are purged when the last window using them closes.
//!
//! In memory: a cache of slots (dirty ones written at each commit, clean
//! ones evicted beyond a bound, closed windows dropped), and indexes of the
//! open windows by close time and of sessions per group. The indexes are
//! complete (rebuilt from the store at restore), so a slot absent from them
//! is known to be new and costs no store lookup.
//!
//! Row changes ([`RowChange`]) are computed only when something consumes
//! them: a topic sink, or a change feed.
//!
//! Here: the operator, its slots and applying events; `close.rs` closes
//! windows as the watermark passes them; `persist.rs` hands out changes,
//! flushes into a commit and restores.

mod close;
mod grouped;
mod persist;

pub(crate) use grouped::GroupedEvent;

use serde_json::{Map, Value};
use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

use crate::operator::{HashMap, HashSet};

use super::slices::Slices;
use super::RowChange;
use crate::accumulators::Accumulator;
use crate::error::{ProcessorError, Result};
use crate::event::{Event, OutputRow};
use crate::plan::{AggregateSpec, ColumnSource, Emit};
use crate::state::key;
use crate::state::slot::{self, GroupForm};
use crate::state::store::{Batch, Store};
use crate::window::{hopping, session, Window, WindowSpec};

/// What happened to an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It updated state.
    Applied,
    /// Every window it belongs to had closed: it is late.
    Late,
}

/// A row's accumulators in memory.
#[derive(Debug)]
struct Slot {
    form: GroupForm,
    accs: Accs,
    /// Changed since the last flush.
    dirty: bool,
    /// Removed: the flush deletes it.
    deleted: bool,
    /// Its window closed: the flush writes it if dirty, then forgets it.
    closed: bool,
}

/// The aggregate operator's state.
#[derive(Debug)]
pub struct AggregateOp {
    spec: AggregateSpec,
    rows_cf: String,
    /// Compute [`RowChange`]s (a topic sink or a change feed reads them).
    emit_changes: bool,
    /// Write hopping windows' rows (the sink is a view).
    write_rows: bool,
    cache: HashMap<SlotKey, Slot>,
    /// Keys of the slots made dirty since the last flush (each once), so a
    /// flush does not walk the whole cache.
    dirty: Vec<SlotKey>,
    cache_limit: usize,
    /// Row keys of windows not yet closed, by close time (end + grace).
    open: BTreeMap<i64, HashSet<SlotKey>>,
    /// Open session windows per view key.
    sessions: HashMap<Vec<u8>, Vec<Window>>,
    /// Hopping windows' slices (hopping aggregates only).
    hopping: Option<Slices>,
    /// End of the last hopping window closed (`i64::MIN`: none yet).
    closed_end: i64,
    /// With a retention: row keys of closed windows by the time their rows
    /// are deleted (window end + retention).
    expiring: BTreeMap<i64, Vec<SlotKey>>,
    /// Reused for the row key of each event.
    key_buf: Vec<u8>,
    /// Row keys whose row changed since the last commit and is recomputed
    /// then (hopping windows; others only when changes are emitted).
    changed: HashSet<Vec<u8>>,
    /// Row changes ready to hand out, by row key (`None` = removed).
    ready: HashMap<Vec<u8>, Option<Value>>,
    /// Hopping rows to write at the next flush (`None` = delete).
    row_writes: Vec<(SlotKey, Option<RowValue>)>,
    /// The key-shard worker this operator is (`None`: it holds every
    /// group): restore loads only the groups it owns.
    owner: Option<key::Shard>,
}

/// A slot's row key, kept inline up to 32 bytes: comparing and hashing
/// cached keys then touches no other memory, and a new slot costs no key
/// allocation.
type SlotKey = smallvec::SmallVec<[u8; 32]>;

/// A slot's accumulators, inline for up to two aggregates: they sit in the
/// cache entry next to its key, so updating a slot touches one place.
pub(crate) type Accs = smallvec::SmallVec<[Accumulator; 2]>;

/// An encoded row (`state::slot`) queued for writing, inline when small:
/// closing a hopping window writes a row per group, with no allocation.
type RowValue = smallvec::SmallVec<[u8; 32]>;

/// Whether a slot missing from the cache may be in the store.
#[derive(Debug, Clone, Copy)]
enum Stored {
    /// Known by the caller.
    Known(bool),
    /// As the open-window index says (the slot's window closes at the
    /// given time); a new slot is added to it.
    OpenIndex(i64),
}

/// Adds a row key to an open-window index; returns true if it was there.
fn open_insert(open: &mut BTreeMap<i64, HashSet<SlotKey>>, close_at: i64, k: &[u8]) -> bool {
    let bucket = open.entry(close_at).or_default();
    if bucket.contains(k) {
        true
    } else {
        bucket.insert(SlotKey::from_slice(k));
        false
    }
}

/// Fresh accumulators for `spec`'s aggregates.
pub(crate) fn fresh_accs(spec: &AggregateSpec) -> Accs {
    spec.aggregates
        .iter()
        .map(|a| a.kind.accumulator())
        .collect()
}

/// The slot under `k` in `cache`, with one lookup: revived empty if it was
/// deleted or closed; on a miss, loaded from `cf` when `stored` allows, else
/// created empty.
#[allow(clippy::too_many_arguments)]
fn slot_in<'c>(
    cache: &'c mut HashMap<SlotKey, Slot>,
    open: &mut BTreeMap<i64, HashSet<SlotKey>>,
    spec: &AggregateSpec,
    cf: &str,
    store: &Store,
    k: &[u8],
    form: GroupForm,
    stored: Stored,
) -> Result<&'c mut Slot> {
    match cache.entry(SlotKey::from_slice(k)) {
        Entry::Occupied(entry) => {
            let slot = entry.into_mut();
            if slot.deleted || slot.closed {
                slot.deleted = false;
                slot.closed = false;
                slot.accs = fresh_accs(spec);
            }
            Ok(slot)
        }
        Entry::Vacant(entry) => {
            let stored = match stored {
                Stored::Known(stored) => stored,
                Stored::OpenIndex(close_at) => open_insert(open, close_at, k),
            };
            let loaded = match stored {
                true => store.get(cf, k)?,
                false => None,
            };
            let (form, accs) = match loaded {
                Some(bytes) => {
                    let (form, accs) =
                        slot::decode(&bytes).ok_or_else(|| corrupt(cf, "bad accumulator value"))?;
                    (form, accs.into_iter().collect())
                }
                None => (form, fresh_accs(spec)),
            };
            Ok(entry.insert(Slot {
                form,
                accs,
                dirty: false,
                deleted: false,
                closed: false,
            }))
        }
    }
}

/// Adds a dirty slot's write (or deletion) to `batch` and marks it clean;
/// returns true if the cache should forget it (deleted or closed).
fn write_slot(batch: &mut Batch, cf: &str, k: &[u8], slot: &mut Slot, value: &mut Vec<u8>) -> bool {
    slot.dirty = false;
    if slot.deleted {
        batch.delete(cf, k);
    } else {
        slot::encode_into(value, slot.form, &slot.accs);
        batch.put(cf, k, &*value);
    }
    slot.deleted || slot.closed
}

/// What a missing field or `COUNT(*)`'s input reads as.
pub(crate) static NULL: Value = Value::Null;

/// A corrupt-state error of column family `cf`.
pub(crate) fn corrupt(cf: &str, reason: impl Into<String>) -> ProcessorError {
    ProcessorError::CorruptState {
        cf: cf.to_string(),
        reason: reason.into(),
    }
}

/// The key a group's rows are found under: a single string group value as
/// itself, anything else as JSON text (a JSON array for several columns).
/// Groups with the same text (`42` and `"42"`) are the same group.
pub fn view_key(group: &[Value]) -> String {
    match group {
        [Value::String(s)] => s.clone(),
        [v] => v.to_string(),
        many => Value::Array(many.to_vec()).to_string(),
    }
}

/// The output row of a group (and window) from its accumulators; `None`
/// if HAVING rejects it.
pub fn row_of(
    spec: &AggregateSpec,
    group: &[Value],
    window: Option<Window>,
    accs: &[Accumulator],
) -> Option<Value> {
    let mut row = Map::new();
    let inputs = spec.computes().then(|| {
        spec.inputs(
            group,
            window.map(|w| (w.start, w.end)),
            accs.iter().map(Accumulator::result),
        )
    });
    for (name, source) in &spec.columns {
        let v = match source {
            ColumnSource::GroupKey(i) => group.get(*i).cloned().unwrap_or(Value::Null),
            ColumnSource::WindowStart => window.map_or(Value::Null, |w| w.start.into()),
            ColumnSource::WindowEnd => window.map_or(Value::Null, |w| w.end.into()),
            ColumnSource::Aggregate(i) => accs.get(*i).map_or(Value::Null, Accumulator::result),
            ColumnSource::Computed(e) => match &inputs {
                Some(columns) => e.eval(&OutputRow { columns }),
                None => Value::Null,
            },
        };
        row.insert(name.clone(), v);
    }
    if let Some(having) = &spec.having {
        let kept = match (&inputs, spec.having_reads_inputs()) {
            (Some(inputs), true) => {
                let mut both = inputs.clone();
                both.extend(row.iter().map(|(k, v)| (k.clone(), v.clone())));
                having.is_true(&OutputRow { columns: &both })
            }
            _ => having.is_true(&OutputRow { columns: &row }),
        };
        if !kept {
            return None;
        }
    }
    Some(Value::Object(row))
}

/// End of the last hopping window a watermark has closed (`i64::MIN` if
/// none): window ends lie on `size + n * advance`.
pub fn last_closed_end(watermark: i64, size_ms: i64, advance_ms: i64, grace: i64) -> i64 {
    let Some(limit) = watermark
        .checked_sub(grace)
        .and_then(|l| l.checked_sub(size_ms))
    else {
        return i64::MIN;
    };
    limit
        .div_euclid(advance_ms)
        .checked_mul(advance_ms)
        .and_then(|s| s.checked_add(size_ms))
        .unwrap_or(i64::MIN)
}

/// Splits a row key into its view key text and window.
fn split_row_key(k: &[u8], windowed: bool) -> Option<(String, Option<Window>)> {
    if windowed {
        let (group, start, end) = key::decode_windowed(k)?;
        Some((
            String::from_utf8_lossy(&group).into_owned(),
            Some(Window { start, end }),
        ))
    } else {
        let (group, rest) = key::decode_group_key(k)?;
        rest.is_empty()
            .then(|| (String::from_utf8_lossy(&group).into_owned(), None))
    }
}

impl AggregateOp {
    /// An empty operator for `spec`. Its slots live in `rows_cf` (the
    /// view's column family), hopping slices in `state_cf`; at most
    /// `cache_limit` clean slots (or hopping slices) stay in memory. `emit_changes` makes
    /// [`AggregateOp::take_changes`] compute row changes (for a topic sink);
    /// `write_rows` makes hopping windows write their rows (for a view).
    pub fn new(
        spec: AggregateSpec,
        state_cf: String,
        rows_cf: String,
        cache_limit: usize,
        emit_changes: bool,
        write_rows: bool,
    ) -> Self {
        let hopping = match spec.window.as_ref().map(|w| w.window) {
            Some(WindowSpec::Hopping {
                size_ms,
                advance_ms,
            }) => Some(Slices::new(
                state_cf,
                hopping::slice_ms(size_ms, advance_ms),
                cache_limit,
            )),
            _ => None,
        };
        AggregateOp {
            spec,
            rows_cf,
            emit_changes,
            write_rows,
            cache: HashMap::default(),
            dirty: Vec::new(),
            cache_limit,
            open: BTreeMap::new(),
            sessions: HashMap::default(),
            hopping,
            closed_end: i64::MIN,
            expiring: BTreeMap::new(),
            key_buf: Vec::new(),
            changed: HashSet::default(),
            ready: HashMap::default(),
            row_writes: Vec::new(),
            owner: None,
        }
    }

    /// The same operator as key-shard worker `shard`: it is given only the
    /// events of the groups it owns, and restores only those.
    pub fn for_shard(mut self, shard: key::Shard) -> Self {
        self.owner = Some(shard);
        self
    }

    /// True if this operator holds `view_key`'s group.
    fn owns(&self, view_key: &[u8]) -> bool {
        self.owner.is_none_or(|shard| shard.owns(view_key))
    }

    /// Entries held in memory until a commit writes them: dirty slots and
    /// hopping groups, hopping rows to write, row changes. A commit frees
    /// them, so the runtime commits early when they are many.
    pub fn pending_entries(&self) -> usize {
        self.dirty.len()
            + self.row_writes.len()
            + self.ready.len()
            + self.changed.len()
            + self.hopping.as_ref().map_or(0, Slices::dirty_groups)
    }

    /// Entries in memory (approximately): cached slots, the indexes of open
    /// windows, sessions and expiring rows, hopping groups and slices, and
    /// what waits for the next commit. Walks the indexes: call it per
    /// commit, not per event.
    pub fn memory_entries(&self) -> usize {
        self.cache.len()
            + self.open.values().map(HashSet::len).sum::<usize>()
            + self.sessions.values().map(Vec::len).sum::<usize>()
            + self.expiring.values().map(Vec::len).sum::<usize>()
            + self.hopping.as_ref().map_or(0, Slices::memory_entries)
            + self.pending_entries()
    }

    fn window_spec(&self) -> Option<(WindowSpec, i64, Emit)> {
        self.spec
            .window
            .as_ref()
            .map(|w| (w.window, w.grace_ms, w.emit))
    }

    fn emit(&self) -> Emit {
        self.spec.window.as_ref().map_or(Emit::Changes, |w| w.emit)
    }

    fn fresh(&self) -> Accs {
        fresh_accs(&self.spec)
    }

    /// The cached slot under `k`, loaded from the store when `stored` (it
    /// may exist there) and not cached, else created empty.
    fn slot(
        &mut self,
        store: &Store,
        k: &[u8],
        form: GroupForm,
        stored: bool,
    ) -> Result<&mut Slot> {
        let (slot, _) = self.slot_and_spec(store, k, form, Stored::Known(stored))?;
        Ok(slot)
    }

    /// The slot under `k` (see [`slot_in`]) and the spec, borrowed apart so
    /// the caller can walk the aggregates while updating the slot.
    fn slot_and_spec(
        &mut self,
        store: &Store,
        k: &[u8],
        form: GroupForm,
        stored: Stored,
    ) -> Result<(&mut Slot, &AggregateSpec)> {
        let slot = slot_in(
            &mut self.cache,
            &mut self.open,
            &self.spec,
            &self.rows_cf,
            store,
            k,
            form,
            stored,
        )?;
        Ok((slot, &self.spec))
    }

    fn mark_dirty(&mut self, k: &[u8]) {
        if let Some(slot) = self.cache.get_mut(k) {
            if !slot.dirty {
                slot.dirty = true;
                self.dirty.push(SlotKey::from_slice(k));
            }
        }
    }

    fn add_to(
        &mut self,
        store: &Store,
        k: &[u8],
        form: GroupForm,
        stored: bool,
        event: &GroupedEvent<'_>,
    ) -> Result<()> {
        self.add_with(store, k, form, Stored::Known(stored), event)
    }

    /// Adds `event` to the slot under `k` with one cache lookup; `stored`
    /// says, for a slot not in the cache, whether the store may hold it.
    fn add_with(
        &mut self,
        store: &Store,
        k: &[u8],
        form: GroupForm,
        stored: Stored,
        event: &GroupedEvent<'_>,
    ) -> Result<()> {
        let (slot, aggregate) = self.slot_and_spec(store, k, form, stored)?;
        event.add_to(&mut slot.accs, aggregate);
        let newly_dirty = !slot.dirty;
        slot.dirty = true;
        if newly_dirty {
            self.dirty.push(SlotKey::from_slice(k));
        }
        Ok(())
    }

    fn delete_slot(&mut self, k: &[u8]) {
        match self.cache.get_mut(k) {
            Some(slot) => {
                slot.deleted = true;
                slot.accs.clear();
            }
            None => {
                self.cache.insert(
                    SlotKey::from_slice(k),
                    Slot {
                        form: GroupForm::String,
                        accs: Accs::new(),
                        dirty: false,
                        deleted: true,
                        closed: false,
                    },
                );
            }
        }
        self.mark_dirty(k);
    }

    /// Forgets a closed window's slot after its last write.
    fn close_slot(&mut self, k: &[u8]) {
        if let Some(slot) = self.cache.get_mut(k) {
            if slot.dirty {
                slot.closed = true;
            } else {
                self.cache.remove(k);
            }
        }
    }

    /// Applies an event, given the watermark before it.
    pub fn apply(&mut self, store: &Store, event: &Event, watermark: i64) -> Result<Outcome> {
        let grouped = GroupedEvent::of(&self.spec, event);
        self.apply_grouped(store, &grouped, watermark)
    }

    /// Applies an event as grouped by this operator's spec
    /// ([`GroupedEvent::of`]), given the watermark before it.
    pub(crate) fn apply_grouped(
        &mut self,
        store: &Store,
        event: &GroupedEvent<'_>,
        watermark: i64,
    ) -> Result<Outcome> {
        let (form, vk) = (event.form, event.key_bytes());
        let et = event.event_time;
        let Some((window, grace, emit)) = self.window_spec() else {
            let k = key::plain(vk);
            self.add_to(store, &k, form, true, event)?;
            if self.emit_changes {
                self.changed.insert(k);
            }
            return Ok(Outcome::Applied);
        };
        let is_open = |w: &Window| w.end.saturating_add(grace) > watermark;
        match window {
            WindowSpec::Tumbling { size_ms } => {
                let w = crate::window::tumbling::window_of(et, size_ms);
                if !is_open(&w) {
                    return Ok(Outcome::Late);
                }
                let mut k = std::mem::take(&mut self.key_buf);
                k.clear();
                key::windowed_into(&mut k, vk, w.start, w.end);
                // A cached slot is in the open index; a new one is added to it.
                let close_at = w.end.saturating_add(grace);
                let stored = Stored::OpenIndex(close_at);
                let added = self.add_with(store, &k, form, stored, event);
                if self.emit_changes && emit == Emit::Changes {
                    self.changed.insert(k.clone());
                }
                self.key_buf = k;
                added?;
            }
            WindowSpec::Hopping {
                size_ms,
                advance_ms,
            } => {
                // The latest window holding the event is the last to close.
                let last_start = et.div_euclid(advance_ms) * advance_ms;
                let last = Window {
                    start: last_start,
                    end: last_start.saturating_add(size_ms),
                };
                if !is_open(&last) {
                    return Ok(Outcome::Late);
                }
                // One slice takes the event; open windows are computed from
                // slices when read, closed ones written when they close.
                let slice_ms = hopping::slice_ms(size_ms, advance_ms);
                let slice = hopping::slice_start(et, slice_ms);
                let slices = self
                    .hopping
                    .as_mut()
                    .expect("a hopping aggregate has slices");
                slices.add(store, &self.spec, (vk, form), slice, event)?;
                if self.emit_changes && emit == Emit::Changes {
                    for w in hopping::windows_of(et, size_ms, advance_ms).filter(is_open) {
                        self.changed.insert(key::windowed(vk, w.start, w.end));
                    }
                }
            }
            WindowSpec::Session { gap_ms } => {
                if et.saturating_add(gap_ms).saturating_add(grace) <= watermark {
                    return Ok(Outcome::Late);
                }
                self.apply_session(store, vk, form, et, gap_ms, grace, event)?;
            }
        }
        Ok(Outcome::Applied)
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_session(
        &mut self,
        store: &Store,
        vk: &[u8],
        form: GroupForm,
        et: i64,
        gap_ms: i64,
        grace: i64,
        event: &GroupedEvent<'_>,
    ) -> Result<()> {
        let merge = session::assign(self.sessions.get(vk).map_or(&[], Vec::as_slice), et, gap_ms);
        let k = key::windowed(vk, merge.window.start, merge.window.end);
        let emit_row = self.emit_changes && self.emit() == Emit::Changes;
        if merge.absorbed == [merge.window] {
            // Inside a session it does not change: one more event in its slot.
            self.add_to(store, &k, form, true, event)?;
            if emit_row {
                self.changed.insert(k);
            }
            return Ok(());
        }
        let mut accs = self.fresh();
        for old in &merge.absorbed {
            let old_k = key::windowed(vk, old.start, old.end);
            for (acc, part) in accs.iter_mut().zip(&self.take_slot(store, &old_k)?) {
                acc.merge(part);
            }
            if let Some(bucket) = self.open.get_mut(&old.end.saturating_add(grace)) {
                bucket.remove(&old_k[..]);
            }
            if !self.changed.is_empty() {
                self.changed.remove(&old_k);
            }
            if self.emit_changes {
                // The absorbed session's row goes away; the merged one replaces it.
                self.ready.insert(old_k, None);
            }
        }
        // The merged session is a new slot: its parts and the event.
        let (slot, spec) = self.slot_and_spec(store, &k, form, Stored::Known(false))?;
        slot.accs = accs;
        event.add_to(&mut slot.accs, spec);
        let newly_dirty = !slot.dirty;
        slot.dirty = true;
        if newly_dirty {
            self.dirty.push(SlotKey::from_slice(&k));
        }
        match self.sessions.get_mut(vk) {
            Some(sessions) => {
                sessions.retain(|s| !merge.absorbed.contains(s));
                sessions.push(merge.window);
            }
            None => {
                self.sessions.insert(vk.to_vec(), vec![merge.window]);
            }
        }
        open_insert(&mut self.open, merge.window.end.saturating_add(grace), &k);
        if emit_row {
            self.changed.insert(k);
        }
        Ok(())
    }

    /// Removes the slot under `k` (a session absorbed into another): its
    /// accumulators, with one cache lookup (or read from the store when it
    /// is not cached); the flush deletes it.
    fn take_slot(&mut self, store: &Store, k: &[u8]) -> Result<Accs> {
        let accs = match self.cache.get_mut(k) {
            Some(slot) => {
                slot.deleted = true;
                let accs = std::mem::take(&mut slot.accs);
                if !slot.dirty {
                    slot.dirty = true;
                    self.dirty.push(SlotKey::from_slice(k));
                }
                return Ok(accs);
            }
            None => match store.get(&self.rows_cf, k)? {
                Some(bytes) => {
                    let (_, accs) = slot::decode(&bytes)
                        .ok_or_else(|| corrupt(&self.rows_cf, "bad accumulator value"))?;
                    accs.into_iter().collect()
                }
                None => self.fresh(),
            },
        };
        self.delete_slot(k);
        Ok(accs)
    }
}
