//! A hopping aggregate's slices, kept per group.
//!
//! Time is cut into slices of `gcd(size, advance)` (`window::hopping`): an
//! event updates the one slice of its group holding its time, and a
//! window's row is the merge of the window's slices. In memory each group
//! holds its live slices in time order, so closing a window costs one
//! lookup per group with data in it and a merge of adjacent slices, not one
//! lookup per slice.
//!
//! Stored form (operator state): key `ns::ACCUMULATOR` followed by the
//! slice's row key (`state::key::windowed(group, start, start + slice)`),
//! value the slot (`state::slot`). So all slices of a group are one
//! contiguous key range, loaded with one scan.
//!
//! Memory: beyond the dirty ones, at most `limit` slices stay cached. A
//! group whose slices were evicted keeps their starts (and its index
//! entry): an event for a new slice of it reads nothing, one for an
//! evicted slice reads that slice, and closing a window loads the group
//! whole (many groups with one pass over the stored slices). The index is
//! complete: a group absent from it has no stored slices, so a new group
//! costs no store lookup.
//!
//! Index: `by_first` lists each group under the start of its earliest live
//! slice. Slices before the next open window's start are purged when a
//! window closes, so the groups listed before a closing window's end are
//! exactly the groups with data in it. Entries may be stale (the group got
//! an earlier slice, or was purged and came back); a group's `indexed_at`
//! says which entry is current, and `closed_for` keeps a group from being
//! closed twice for one window.

use std::collections::hash_map::Entry;
use std::collections::BTreeMap;

use super::aggregate::{corrupt, fresh_accs, Accs, GroupedEvent};
use crate::error::Result;
use crate::plan::AggregateSpec;
use crate::state::key::{self, ns};
use crate::state::slot::{self, GroupForm};
use crate::state::store::{Batch, Store};
use crate::window::Window;

use crate::operator::HashMap;

/// Stub groups closing at once from which [`Slices::close`] loads them with
/// one pass over the stored slices instead of a scan each.
const BULK_LOAD_MIN: usize = 64;

/// A group's view key bytes, inline up to 24 bytes.
pub type GroupKey = smallvec::SmallVec<[u8; 24]>;

/// One slice of one group.
#[derive(Debug)]
struct Slice {
    start: i64,
    accs: Accs,
    /// Changed since the last flush.
    dirty: bool,
    /// Written to the store at some flush (purging it must delete it).
    stored: bool,
}

/// One group's slices.
#[derive(Debug)]
struct Group {
    form: GroupForm,
    /// Live slices in memory, in start order.
    slices: Vec<Slice>,
    /// Starts of the live slices that are in the store only (evicted), in
    /// order; the group is whole in memory when this is empty.
    evicted: Vec<i64>,
    /// The `by_first` entry that is current.
    indexed_at: i64,
    /// Listed in `Slices::dirty`.
    dirty: bool,
    /// End of the last window this group was closed for.
    closed_for: i64,
}

impl Group {
    /// The merge of the slices in `w`, or `None` if none holds data.
    fn merged(&self, spec: &AggregateSpec, w: Window) -> Option<Accs> {
        let mut accs = fresh_accs(spec);
        let mut any = false;
        for s in self.slices.iter().skip_while(|s| s.start < w.start) {
            if s.start >= w.end {
                break;
            }
            any = true;
            for (acc, part) in accs.iter_mut().zip(&s.accs) {
                acc.merge(part);
            }
        }
        any.then_some(accs)
    }
}

/// A group's merged window: view key, group form, accumulators.
pub type ClosedGroup = (GroupKey, GroupForm, Accs);

/// Closes one window for one group at a time ([`Slices::close`]).
struct Closer<'a> {
    store: &'a Store,
    spec: &'a AggregateSpec,
    w: Window,
    keep_from: i64,
    cf: &'a str,
    slice_ms: i64,
    by_first: &'a mut BTreeMap<i64, Vec<GroupKey>>,
    deletes: &'a mut Vec<Vec<u8>>,
    cached: &'a mut usize,
    /// The closed window of each group with data in it.
    out: Vec<ClosedGroup>,
}

impl Closer<'_> {
    /// Closes the window for group `gk` (listed before the window's end):
    /// its merged slices go to `out`, slices before `keep_from` are purged
    /// and the group listed under its new first slice. Returns false if no
    /// slice is left (the caller forgets the group).
    fn close(&mut self, gk: &GroupKey, group: &mut Group) -> Result<bool> {
        group.closed_for = self.w.end;
        load(self.store, self.cf, gk, group, self.cached)?;
        if let Some(accs) = group.merged(self.spec, self.w) {
            self.out.push((gk.clone(), group.form, accs));
        }
        let purged = group
            .slices
            .iter()
            .take_while(|s| s.start < self.keep_from)
            .count();
        for s in group.slices.drain(..purged) {
            if s.stored {
                let mut k = Vec::with_capacity(gk.len() + 20);
                slice_key_into(&mut k, gk, s.start, self.slice_ms);
                self.deletes.push(k);
            }
        }
        *self.cached -= purged;
        let Some(first) = group.slices.first() else {
            return Ok(false);
        };
        group.indexed_at = first.start;
        self.by_first
            .entry(first.start)
            .or_default()
            .push(gk.clone());
        Ok(true)
    }
}

/// The slices of every group of one hopping aggregate.
#[derive(Debug)]
pub struct Slices {
    /// Operator state column family.
    cf: String,
    slice_ms: i64,
    groups: HashMap<GroupKey, Group>,
    /// Groups by the start of their earliest live slice (see module docs).
    by_first: BTreeMap<i64, Vec<GroupKey>>,
    /// Groups with dirty slices.
    dirty: Vec<GroupKey>,
    /// State keys of purged stored slices, deleted at the next flush.
    deletes: Vec<Vec<u8>>,
    /// Slices in memory.
    cached: usize,
    /// Clean slices kept in memory at most.
    limit: usize,
    /// Some group had slices in the store only (evicted, or restored) at
    /// some point: until then closing a window has no stubs to look for.
    evicted_any: bool,
}

/// The state key of group `vk`'s slice starting at `start`, into `k`.
fn slice_key_into(k: &mut Vec<u8>, vk: &[u8], start: i64, slice_ms: i64) {
    key::slice_into(k, vk, start, start + slice_ms);
}

/// Decodes a stored slice starting at `start`.
fn stored_slice(cf: &str, start: i64, v: &[u8]) -> Result<(GroupForm, Slice)> {
    let (form, accs) = slot::decode(v).ok_or_else(|| corrupt(cf, "bad slice value"))?;
    let slice = Slice {
        start,
        accs: accs.into_iter().collect(),
        dirty: false,
        stored: true,
    };
    Ok((form, slice))
}

/// Adds slices read from the store to `group` (they were evicted).
fn restore_slices(group: &mut Group, loaded: Vec<(GroupForm, Slice)>, cached: &mut usize) {
    *cached += loaded.len();
    for (form, slice) in loaded {
        group.form = form;
        group.slices.push(slice);
    }
    group.slices.sort_unstable_by_key(|s| s.start);
}

/// Reads a group's evicted slices back from the store (one range scan).
fn load(store: &Store, cf: &str, vk: &[u8], group: &mut Group, cached: &mut usize) -> Result<()> {
    if group.evicted.is_empty() {
        return Ok(());
    }
    let prefix = key::slice_prefix(vk);
    let upper = key::prefix_end(&prefix);
    let mut loaded = Vec::with_capacity(group.evicted.len());
    for (k, v) in store.scan(cf, &prefix, upper.as_deref(), usize::MAX)? {
        let (_, start, _) = key::decode_slice(&k).ok_or_else(|| corrupt(cf, "bad slice key"))?;
        // A slice also in memory is newer there.
        if group.evicted.binary_search(&start).is_ok() {
            loaded.push(stored_slice(cf, start, &v)?);
        }
    }
    group.evicted.clear();
    restore_slices(group, loaded, cached);
    Ok(())
}

/// Adds `group`'s dirty slices to `batch` and marks them clean; returns
/// how many. `buffers` are reused for the key and the value.
fn write_dirty(
    batch: &mut Batch,
    cf: &str,
    slice_ms: i64,
    gk: &[u8],
    group: &mut Group,
    (k, value): &mut (Vec<u8>, Vec<u8>),
) -> u64 {
    let mut written = 0;
    group.dirty = false;
    for s in group.slices.iter_mut().filter(|s| s.dirty) {
        slice_key_into(k, gk, s.start, slice_ms);
        slot::encode_into(value, group.form, &s.accs);
        batch.put(cf, &*k, &*value);
        s.dirty = false;
        s.stored = true;
        written += 1;
    }
    written
}

impl Slices {
    /// No slices yet: slices of `slice_ms` stored in `cf`, at most `limit`
    /// clean ones cached.
    pub fn new(cf: String, slice_ms: i64, limit: usize) -> Self {
        Slices {
            cf,
            slice_ms,
            groups: HashMap::default(),
            by_first: BTreeMap::new(),
            dirty: Vec::new(),
            deletes: Vec::new(),
            cached: 0,
            limit,
            evicted_any: false,
        }
    }

    /// Lists `gk` under slice `start`.
    fn index(&mut self, gk: &[u8], start: i64) {
        self.by_first
            .entry(start)
            .or_default()
            .push(GroupKey::from_slice(gk));
    }

    /// Adds `event` to group `vk`'s slice starting at `start` (which must
    /// be in an open window).
    pub(crate) fn add(
        &mut self,
        store: &Store,
        spec: &AggregateSpec,
        (vk, form): (&[u8], GroupForm),
        start: i64,
        event: &GroupedEvent<'_>,
    ) -> Result<()> {
        let (group, indexed) = match self.groups.entry(GroupKey::from_slice(vk)) {
            Entry::Occupied(e) => (e.into_mut(), true),
            Entry::Vacant(e) => {
                let group = e.insert(Group {
                    form,
                    slices: Vec::new(),
                    evicted: Vec::new(),
                    indexed_at: start,
                    dirty: false,
                    closed_for: i64::MIN,
                });
                (group, false)
            }
        };
        if let Ok(e) = group.evicted.binary_search(&start) {
            // This slice was evicted: read it back (only it).
            group.evicted.remove(e);
            let mut k = Vec::with_capacity(vk.len() + 20);
            slice_key_into(&mut k, vk, start, self.slice_ms);
            if let Some(v) = store.get(&self.cf, &k)? {
                let loaded = stored_slice(&self.cf, start, &v)?;
                restore_slices(group, vec![loaded], &mut self.cached);
            }
        }
        let slices = &mut group.slices;
        // Usually the latest slice: search from the back.
        let i = match slices.iter().rposition(|s| s.start <= start) {
            Some(i) if slices[i].start == start => i,
            found => {
                let i = found.map_or(0, |i| i + 1);
                slices.insert(
                    i,
                    Slice {
                        start,
                        accs: fresh_accs(spec),
                        dirty: false,
                        stored: false,
                    },
                );
                self.cached += 1;
                i
            }
        };
        let slice = &mut slices[i];
        event.add_to(&mut slice.accs, spec);
        slice.dirty = true;
        let reindex = !indexed || start < group.indexed_at;
        if reindex {
            group.indexed_at = start;
        }
        if !group.dirty {
            group.dirty = true;
            self.dirty.push(GroupKey::from_slice(vk));
        }
        if reindex {
            self.index(vk, start);
        }
        Ok(())
    }

    /// Entries held in memory: groups and cached slices.
    pub fn memory_entries(&self) -> usize {
        self.groups.len() + self.cached + self.deletes.len()
    }

    /// Groups with slices a commit has not written yet.
    pub fn dirty_groups(&self) -> usize {
        self.dirty.len()
    }

    /// Start of the earliest slice of any group (possibly of a stale index
    /// entry: then earlier than the real one).
    pub fn first_start(&self) -> Option<i64> {
        self.by_first.keys().next().copied()
    }

    /// Closes window `w`: the merged slices of every group with data in it,
    /// in no particular order; then purges each such group's slices that
    /// start before `keep_from` (the next open window's start).
    pub fn close(
        &mut self,
        store: &Store,
        spec: &AggregateSpec,
        w: Window,
        keep_from: i64,
    ) -> Result<Vec<ClosedGroup>> {
        // Taken first: groups are listed again (under their new first
        // slice) as they are closed, possibly before `w.end`.
        let mut listed = Vec::new();
        let mut count = 0;
        while let Some(entry) = self.by_first.first_entry() {
            if *entry.key() >= w.end {
                break;
            }
            count += entry.get().len();
            listed.push((*entry.key(), entry.remove()));
        }
        self.preload(store, w)?;
        let mut closer = Closer {
            store,
            spec,
            w,
            keep_from,
            cf: &self.cf,
            slice_ms: self.slice_ms,
            by_first: &mut self.by_first,
            deletes: &mut self.deletes,
            cached: &mut self.cached,
            out: Vec::new(),
        };
        if count.saturating_mul(4) >= self.groups.len() {
            // Most groups close: one pass over the map beats a lookup each.
            let mut failed = None;
            self.groups.retain(|gk, group| {
                if failed.is_some() || group.indexed_at >= w.end {
                    return true;
                }
                closer.close(gk, group).unwrap_or_else(|e| {
                    failed = Some(e);
                    true
                })
            });
            if let Some(e) = failed {
                return Err(e);
            }
        } else {
            for (at, groups) in listed {
                for gk in groups {
                    let Some(group) = self.groups.get_mut(&gk) else {
                        continue;
                    };
                    if group.indexed_at != at || group.closed_for == w.end {
                        continue;
                    }
                    if !closer.close(&gk, group)? {
                        self.groups.remove(&gk);
                    }
                }
            }
        }
        Ok(closer.out)
    }
    /// Loads the stub groups with data in `w` (about to close) with one
    /// pass over the stored slices when they are many: a seek per group
    /// costs several times more than stepping over the slices between them.
    fn preload(&mut self, store: &Store, w: Window) -> Result<()> {
        if !self.evicted_any {
            return Ok(());
        }
        let mut stubs: Vec<GroupKey> = self
            .groups
            .iter()
            .filter(|(_, g)| !g.evicted.is_empty() && g.indexed_at < w.end)
            .map(|(gk, _)| gk.clone())
            .collect();
        if stubs.len() < BULK_LOAD_MIN || stubs.len().saturating_mul(8) < self.groups.len() {
            return Ok(()); // few: the closer loads each with its own scan
        }
        stubs.sort_unstable();
        let lower = key::slice_prefix(&stubs[0]);
        let upper = key::prefix_end(&key::slice_prefix(&stubs[stubs.len() - 1]));
        let (cf, groups, cached) = (&self.cf, &mut self.groups, &mut self.cached);
        // The group of the entries being read: its key prefix, and whether
        // it is a stub being loaded.
        let mut current: (Vec<u8>, Option<GroupKey>) = (Vec::new(), None);
        store.for_each_entry(cf, &lower, upper.as_deref(), |k, v| {
            if current.0.is_empty() || !k.starts_with(&current.0) {
                let (gk, rest) = key::decode_group_key(key::without_namespace(k))
                    .ok_or_else(|| corrupt(cf, "bad slice key"))?;
                current.0 = k[..k.len() - rest.len()].to_vec();
                current.1 = groups
                    .get(gk.as_slice())
                    .is_some_and(|g| !g.evicted.is_empty() && g.indexed_at < w.end)
                    .then(|| GroupKey::from_vec(gk));
            }
            let Some(group) = current.1.as_ref().and_then(|gk| groups.get_mut(gk)) else {
                return Ok(());
            };
            let (_, start, _) = key::decode_slice(k).ok_or_else(|| corrupt(cf, "bad slice key"))?;
            // A slice also in memory is newer there.
            if group.evicted.binary_search(&start).is_ok() {
                let (form, slice) = stored_slice(cf, start, v)?;
                group.form = form;
                group.slices.push(slice);
                *cached += 1;
            }
            Ok(())
        })?;
        for gk in stubs {
            if let Some(group) = self.groups.get_mut(&gk) {
                group.evicted.clear();
                group.slices.sort_unstable_by_key(|s| s.start);
            }
        }
        Ok(())
    }

    /// The merge of group `vk`'s slices in `w`, with the group's form;
    /// `None` if none holds data.
    pub fn merged(
        &mut self,
        store: &Store,
        spec: &AggregateSpec,
        vk: &[u8],
        w: Window,
    ) -> Result<Option<(GroupForm, Accs)>> {
        let Some(group) = self.groups.get_mut(vk) else {
            return Ok(None);
        };
        load(store, &self.cf, vk, group, &mut self.cached)?;
        Ok(group.merged(spec, w).map(|accs| (group.form, accs)))
    }

    /// Adds dirty slices and deletions of purged ones to `batch`, in key
    /// order; evicts clean groups beyond the cache bound. Returns the
    /// number of slices written.
    pub fn flush(&mut self, batch: &mut Batch) -> u64 {
        let mut written = 0;
        let mut dirty = std::mem::take(&mut self.dirty);
        let mut buffers = (Vec::new(), Vec::new());
        // In key order, RocksDB's memtable inserts each key next to the
        // previous one instead of searching from the top.
        if dirty.len().saturating_mul(4) >= self.groups.len() {
            // Most groups are dirty: one pass over the map beats a lookup each.
            let groups = key::in_key_order(self.groups.iter_mut().filter(|(_, g)| g.dirty));
            for (gk, group) in groups {
                written += write_dirty(batch, &self.cf, self.slice_ms, gk, group, &mut buffers);
            }
        } else {
            dirty.sort_unstable();
            for gk in dirty {
                if let Some(group) = self.groups.get_mut(&gk) {
                    written +=
                        write_dirty(batch, &self.cf, self.slice_ms, &gk, group, &mut buffers);
                }
            }
        }
        let mut deletes = std::mem::take(&mut self.deletes);
        deletes.sort_unstable();
        for k in deletes {
            batch.delete(&self.cf, k);
        }
        if self.cached > self.limit {
            for group in self.groups.values_mut() {
                if self.cached <= self.limit {
                    break;
                }
                if !group.slices.is_empty() && !group.dirty {
                    self.evicted_any = true;
                    self.cached -= group.slices.len();
                    group.evicted.extend(group.slices.iter().map(|s| s.start));
                    group.evicted.sort_unstable();
                    group.slices = Vec::new();
                }
            }
        }
        written
    }

    /// Rebuilds the index from the store: every stored slice is known as
    /// evicted, read back when used; each group's form is its stored one. Only the groups `owns`
    /// accepts are restored (a key-shard worker's own).
    pub fn restore(&mut self, store: &Store, owns: &dyn Fn(&[u8]) -> bool) -> Result<()> {
        let cf = self.cf.clone();
        let (lower, upper) = key::namespace(ns::ACCUMULATOR);
        self.evicted_any = true;
        store.for_each_entry(&cf, &lower, Some(&upper), |k, v| {
            let (group, start, _) =
                key::decode_slice(k).ok_or_else(|| corrupt(&cf, "bad slice key"))?;
            if !owns(&group) {
                return Ok(());
            }
            let form = slot::form_of(v).ok_or_else(|| corrupt(&cf, "bad slice value"))?;
            // Keys come in group, then start order: the first is the earliest.
            match self.groups.entry(GroupKey::from_vec(group)) {
                Entry::Occupied(mut e) => e.get_mut().evicted.push(start),
                Entry::Vacant(e) => {
                    let gk = e.key().clone();
                    e.insert(Group {
                        form,
                        slices: Vec::new(),
                        evicted: vec![start],
                        indexed_at: start,
                        dirty: false,
                        closed_for: i64::MIN,
                    });
                    self.index(&gk, start);
                }
            }
            Ok(())
        })
    }
}
