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

use std::borrow::Cow;

use serde_json::{Map, Value};
use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

/// Hash maps keyed by state keys: foldhash is several times faster than
/// SipHash on short keys, and the keys are not attacker-chosen in a way that
/// matters here (a collision flood only slows one processor).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

use super::slices::Slices;
use super::RowChange;
use crate::accumulators::{Accumulator, AggregateKind};
use crate::error::{ProcessorError, Result};
use crate::event::{Event, OutputRow};
use crate::expr::{Expr, Row};
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

/// Adds `event` to the accumulators of `spec`'s aggregates.
pub(crate) fn add_event(accs: &mut [Accumulator], spec: &AggregateSpec, event: &Event) {
    let position = (event.offset, event.partition);
    for (acc, spec) in accs.iter_mut().zip(&spec.aggregates) {
        let input = match &spec.input {
            None => Cow::Borrowed(&NULL),
            Some(Expr::Field(path)) => Cow::Borrowed(event.field(path).unwrap_or(&NULL)),
            Some(e) => Cow::Owned(e.eval(event)),
        };
        acc.add(&input, spec.kind == AggregateKind::CountAll, position);
    }
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
static NULL: Value = Value::Null;

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
    for (name, source) in &spec.columns {
        let v = match source {
            ColumnSource::GroupKey(i) => group.get(*i).cloned().unwrap_or(Value::Null),
            ColumnSource::WindowStart => window.map_or(Value::Null, |w| w.start.into()),
            ColumnSource::WindowEnd => window.map_or(Value::Null, |w| w.end.into()),
            ColumnSource::Aggregate(i) => accs.get(*i).map_or(Value::Null, Accumulator::result),
        };
        row.insert(name.clone(), v);
    }
    if let Some(having) = &spec.having {
        if !having.is_true(&OutputRow { columns: &row }) {
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
        }
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
        event: &Event,
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
        event: &Event,
    ) -> Result<()> {
        let (slot, aggregate) = self.slot_and_spec(store, k, form, stored)?;
        add_event(&mut slot.accs, aggregate, event);
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
        // A group by one field borrows the event's value; others are evaluated.
        let evaluated: Vec<Value>;
        let group: &[Value] = match &self.spec.group_by[..] {
            [Expr::Field(path)] => std::slice::from_ref(event.field(path).unwrap_or(&NULL)),
            exprs => {
                evaluated = exprs.iter().map(|e| e.eval(event)).collect();
                &evaluated
            }
        };
        let form = GroupForm::of(group);
        let rendered = match group {
            [Value::String(_)] => None,
            other => Some(view_key(other)),
        };
        let vk: &[u8] = match (&rendered, group) {
            (Some(k), _) => k.as_bytes(),
            (None, [Value::String(s)]) => s.as_bytes(),
            _ => unreachable!("a non-string group has a rendered key"),
        };
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
        event: &Event,
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
        add_event(&mut slot.accs, spec, event);
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
    fn sessions_used(&self) -> bool {
        matches!(self.window_spec(), Some((WindowSpec::Session { .. }, _, _)))
    }

    /// With a retention, schedules the deletion of closed window `w`'s row.
    fn expire_later(&mut self, rk: &[u8], w: Window) {
        if let Some(retention) = self.spec.window.as_ref().and_then(|s| s.retention_ms) {
            self.expiring
                .entry(w.end.saturating_add(retention))
                .or_default()
                .push(SlotKey::from_slice(rk));
        }
    }

    /// Deletes the rows whose retention the watermark has passed (at the
    /// next flush). Not a change: nothing is handed out.
    fn delete_expired(&mut self, watermark: i64) {
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
    fn advance_hopping(
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
    fn hopping_row(
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
    fn compute_row(
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
        if let Some(slices) = &mut self.hopping {
            slices.restore(store)?;
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
