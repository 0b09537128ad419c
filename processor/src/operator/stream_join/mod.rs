//! Stream-stream join within a time bound (`JOIN .. WITHIN`), as ksqlDB's
//! and Kafka Streams' windowed stream-stream joins.
//!
//! An event of the stream (`FROM`, the *left* side) at time `t` joins each
//! event of the joined stream (the *right* side) with the same join key
//! whose time is in `[t - before, t + after]`. Both sides' events are
//! buffered by key; an arriving event probes the other side's buffer, and
//! each match becomes one joined event: the left event with the right
//! event's value under the alias (and its record key as the column
//! [`crate::event::JOINED_KEY_COLUMN`]), at the later of the two times. So
//! each pair is joined once, when the second of the two is processed, and
//! the processing order — the log order of both topics
//! ([`crate::order`]) — decides everything: a replay joins what the live
//! run joined.
//!
//! **Time.** The watermark runs over the partitions of both topics. An
//! event more than the grace period behind it is late: counted and
//! dropped, joined with nothing. A buffered event no later event can join
//! any more — a left event at `t` once `t + after` is behind the watermark
//! by more than the grace, a right event at `r` once `r + before` is — is
//! dropped from the buffer; so state stays bounded by the time bound and
//! the grace.
//!
//! **Outer joins.** A `LEFT` join emits a left event that matched nothing
//! when it leaves the buffer (at its own time, with the right side's
//! columns null); a `FULL` join does the same for right events (with the
//! left side's columns null). An event whose join key is `NULL` matches
//! nothing and is emitted unmatched at once by the outer joins.
//!
//! **Filters first.** The conjuncts of `WHERE` that read one side only are
//! applied to that side's events before they are buffered, where that
//! cannot change the result: the stream's for inner and left joins, the
//! joined stream's for inner joins (an outer join's unmatched row has
//! that side null, so `WHERE` decides it after the join). `WHERE` is
//! still applied whole to each joined event.
//!
//! **State** (namespace [`ns::STREAM_JOIN`]), one entry per buffered event,
//! keyed by [`key::stream_join_entry`] (side, partition, offset), written
//! in the commit with the offsets:
//!
//! ```text
//! 0x01 · header JSON {"k": join key, "t": event time, "ts": record
//!        timestamp, "key": record key or null, "m": matched} · 0x0A ·
//!        the value: the record's value bytes as read, or — when the join
//!        keeps only what the plan reads ([`StreamJoin::keeping_read_fields`])
//!        — a JSON object of the fields the plan reads of that side
//! ```
//!
//! A restart reads the buffers back and decodes each value whole (a
//! joined stream's, by the fields read); both forms give the same fields.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::expr::{conforms, parse_timestamp, stringify, BinaryOp, Expr};
use crate::operator::HashMap;
use crate::plan::{JoinKind, JoinSpec, WithinSpec};
use crate::state::key::{self, ns};
use crate::state::store::{Batch, Store};

/// First byte of a stored entry.
const ENTRY_FORMAT: u8 = 0x01;

/// Which stream a buffered event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JoinSide {
    /// The stream (`FROM`).
    Left,
    /// The joined stream.
    Right,
}

impl JoinSide {
    /// Its byte in a state key.
    pub fn tag(self) -> u8 {
        match self {
            JoinSide::Left => b'l',
            JoinSide::Right => b'r',
        }
    }
}

/// A buffered event.
#[derive(Debug)]
struct Entry {
    /// Partition and offset in its topic: its identity.
    partition: u32,
    offset: u64,
    /// Whether it joined something (kept for outer joins only).
    matched: bool,
    /// The event as joined: a left event as decoded; a right event with
    /// its value under the alias and its key in `joined_key`.
    event: Event,
}

impl Entry {
    fn order(&self) -> (i64, u32, u64) {
        (self.event.event_time, self.partition, self.offset)
    }
}

/// One side's buffer: events by join key, each key's in (time, partition,
/// offset) order, and the same events by that order for expiry. A join
/// key is one shared string for all three places that name it (the key's
/// events, the time index and [`StreamJoin::unstored`]).
#[derive(Debug, Default)]
struct Buffer {
    by_key: HashMap<Arc<str>, Vec<Entry>>,
    by_time: BTreeMap<(i64, u32, u64), Arc<str>>,
}

impl Buffer {
    fn insert(&mut self, join_key: Arc<str>, entry: Entry) {
        self.by_time.insert(entry.order(), join_key.clone());
        // Most keys hold one event or two at a time (an event is large:
        // a first push would make room for four).
        let entries = self
            .by_key
            .entry(join_key)
            .or_insert_with(|| Vec::with_capacity(1));
        let at = entries.partition_point(|e| e.order() <= entry.order());
        entries.insert(at, entry);
    }

    /// The entries of `join_key` whose time is in `[from, to]`.
    fn range_mut(&mut self, join_key: &str, from: i64, to: i64) -> &mut [Entry] {
        match self.by_key.get_mut(join_key) {
            Some(entries) => {
                let start = entries.partition_point(|e| e.event.event_time < from);
                let end = entries.partition_point(|e| e.event.event_time <= to);
                &mut entries[start..end.max(start)]
            }
            None => &mut [],
        }
    }

    /// Removes the entries older than `before` (time). A key's entries
    /// are in time order, so its expired ones are a prefix of them, taken
    /// off at once (a hot key's many entries are not shifted one by one).
    fn expire(&mut self, before: i64) -> Vec<Entry> {
        let mut expired: HashMap<Arc<str>, usize> = HashMap::default();
        while let Some(entry) = self.by_time.first_entry() {
            if entry.key().0 >= before {
                break;
            }
            *expired.entry(entry.remove()).or_default() += 1;
        }
        let mut out = Vec::new();
        for (join_key, n) in expired {
            let entries = self
                .by_key
                .get_mut(&join_key)
                .expect("indexed by time and key");
            debug_assert!(entries[..n].iter().all(|e| e.event.event_time < before));
            out.extend(entries.drain(..n));
            if entries.is_empty() {
                self.by_key.remove(&join_key);
            }
        }
        out
    }
}

/// The stored header of an entry (see the module doc).
#[derive(Debug, Serialize, Deserialize)]
struct StoredHeader<'a> {
    k: Cow<'a, str>,
    t: i64,
    ts: i64,
    key: Option<Cow<'a, str>>,
    m: bool,
}

/// A record of the joined stream, as read.
#[derive(Debug, Clone, Copy)]
pub struct JoinedInput<'a> {
    /// Its partition.
    pub partition: u32,
    /// Its offset.
    pub offset: u64,
    /// Its record timestamp.
    pub timestamp: i64,
    /// Its key, if any.
    pub key: Option<&'a [u8]>,
    /// Its value.
    pub value: &'a [u8],
}

impl<'a> JoinedInput<'a> {
    /// The record `record` of the joined stream's `partition`.
    pub fn of(partition: u32, record: &kappa_log::RecordRef<'a>) -> JoinedInput<'a> {
        JoinedInput {
            partition,
            offset: record.offset,
            timestamp: record.timestamp,
            key: record.key,
            value: record.value,
        }
    }
}

/// What a right-side record is.
#[derive(Debug)]
pub enum JoinedRecord {
    /// Not a JSON value, without a readable time, or with a declared
    /// field of another type: counted and skipped.
    Invalid,
    /// Its time is too far after its append time (as
    /// [`crate::plan::SourceSpec::max_future_ms`]).
    Future,
    /// It failed the joined stream's conditions of `WHERE` (its time, which
    /// still moves the watermark): it joins nothing.
    Filtered(i64),
    /// An event to join.
    Event(Box<Event>),
}

/// Makes the joined stream's records into the events the join takes
/// ([`JoinedDecoder::decode`]). It depends on the join's definition
/// alone, so source workers run it ([`crate::parallel::SourceWork`]) as
/// well as the version's own thread.
#[derive(Debug, Clone)]
pub struct JoinedDecoder {
    /// The joined stream's alias: an event's value is its column of this
    /// name.
    alias: String,
    /// The path of its time column, if declared (else the record
    /// timestamp is its time).
    time: Option<Vec<String>>,
    /// Declared types of its values' top-level fields.
    typed_fields: Vec<(String, crate::expr::DataType)>,
    /// `WHERE`'s conjuncts its events must pass before the join
    /// ([`side_filters`]).
    filter: Option<Expr>,
    /// The fields of its values the plan reads (`None`: all of them).
    fields: Option<Arc<[String]>>,
    /// Events keep only those fields ([`StreamJoin::keeping_read_fields`]).
    keep_fields: bool,
}

impl JoinedDecoder {
    /// A joined stream's value as the join holds it: whole, or only the
    /// fields read (missing and null ones left out).
    fn decode_value(&self, bytes: &[u8]) -> serde_json::Result<Value> {
        let Some(names) = &self.fields else {
            return serde_json::from_slice(bytes);
        };
        crate::event::decode_object(bytes, names)
    }

    /// True if events keep only the fields read.
    fn keeps_fields(&self) -> bool {
        self.keep_fields && self.fields.is_some()
    }

    /// Decodes a record of the joined stream appended at `append_time`:
    /// its value whole (or the fields read), its time from the declared
    /// column (else the record timestamp), checked against the declared
    /// types and `max_future_ms`, then against the joined stream's
    /// conditions of `WHERE`.
    pub fn decode(
        &self,
        record: JoinedInput<'_>,
        append_time: i64,
        max_future_ms: i64,
    ) -> JoinedRecord {
        let Ok(value) = self.decode_value(record.value) else {
            return JoinedRecord::Invalid;
        };
        let typed = self
            .typed_fields
            .iter()
            .all(|(name, ty)| value.get(name).is_none_or(|v| conforms(v, *ty)));
        if !typed {
            return JoinedRecord::Invalid;
        }
        let time = match &self.time {
            Some(path) => match crate::expr::get_path(&value, path).and_then(parse_timestamp) {
                Some(t) => t,
                None => return JoinedRecord::Invalid,
            },
            None => record.timestamp,
        };
        if time > append_time.saturating_add(max_future_ms) {
            return JoinedRecord::Future;
        }
        let key = record.key.map(|k| String::from_utf8_lossy(k).into_owned());
        let mut event = self.event(
            record.partition,
            record.offset,
            record.timestamp,
            time,
            key,
            Bytes::new(),
            value,
        );
        if self.filter.as_ref().is_some_and(|f| !f.is_true(&event)) {
            return JoinedRecord::Filtered(time);
        }
        // Kept as read fields, the value the join buffers and stores is
        // those fields' JSON text; else the record's value as read.
        event.raw_value = match self.keeps_fields() {
            true => match event.joined.first() {
                Some((_, value)) => Bytes::from(value.to_string()),
                None => Bytes::new(),
            },
            false => Bytes::copy_from_slice(record.value),
        };
        JoinedRecord::Event(Box::new(event))
    }

    /// The event of a joined stream's record: its `value` under the
    /// alias, its record key as [`Event::joined_key`].
    #[allow(clippy::too_many_arguments)]
    fn event(
        &self,
        partition: u32,
        offset: u64,
        record_timestamp: i64,
        event_time: i64,
        key: Option<String>,
        raw_value: Bytes,
        value: Value,
    ) -> Event {
        Event {
            partition,
            offset,
            record_timestamp,
            raw_key: None,
            lossy_key: None,
            raw_value,
            value: Value::Null,
            fields: None,
            event_time,
            joined: vec![(self.alias.clone(), value)],
            joined_key: key.map(Value::String),
        }
    }
}

/// What joining an event gave.
#[derive(Debug)]
pub enum Joined {
    /// The event is late: joined with nothing (given back).
    Late(Box<Event>),
    /// The joined events, in the order they are processed.
    Rows(Vec<Event>),
}

/// The stream-stream join operator's state.
#[derive(Debug)]
pub struct StreamJoin {
    spec: JoinSpec,
    within: WithinSpec,
    state_cf: String,
    left: Buffer,
    right: Buffer,
    /// `WHERE`'s conjuncts applied to the stream's events before the join
    /// (the joined stream's are its decoder's).
    left_filter: Option<Expr>,
    /// Decodes (and filters) the joined stream's records.
    joined: JoinedDecoder,
    /// State writes of the next commit by key (`None` deletes): of events
    /// a commit wrote before.
    pending: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Events kept since the last commit, with their join key and time:
    /// the next commit writes those still kept (most leave first, and are
    /// never encoded). None of them has a write in `pending`: a change of
    /// an unstored event's `matched` goes into the entry it is written as.
    unstored: HashMap<(JoinSide, u32, u64), (Arc<str>, i64)>,
    /// Buffered events keep, and store, only the fields the plan reads
    /// instead of their record's value ([`StreamJoin::keeping_read_fields`]).
    keep_read_fields: bool,
}

impl StreamJoin {
    /// An empty join; `None` unless `spec` joins a stream. `filter` is the
    /// plan's `WHERE`, applied after the join.
    pub fn new(spec: JoinSpec, state_cf: String, filter: Option<&Expr>) -> Option<Self> {
        let within = spec.within.clone()?;
        let (left_filter, right_filter) = side_filters(filter, &spec.alias, spec.kind);
        let joined = JoinedDecoder {
            alias: spec.alias.clone(),
            time: spec.table_time.clone(),
            typed_fields: within.typed_fields.clone(),
            filter: right_filter,
            fields: None,
            keep_fields: false,
        };
        Some(StreamJoin {
            spec,
            within,
            state_cf,
            left: Buffer::default(),
            right: Buffer::default(),
            left_filter,
            joined,
            pending: BTreeMap::new(),
            unstored: HashMap::default(),
            keep_read_fields: false,
        })
    }

    /// The same join keeping of each buffered event only the fields the
    /// plan reads, as a JSON object in place of its record's value, in
    /// memory and in state: a stream's event decoded by fields, a joined
    /// stream's when [`StreamJoin::reading`] names its fields. Only for
    /// plans that never send a record's value on — no late side output,
    /// no repartition stage — where the fields are all that is read.
    /// Nexmark q3 buffers auctions of ~600 bytes to read 3 of their
    /// fields.
    pub fn keeping_read_fields(mut self, keep: bool) -> Self {
        self.keep_read_fields = keep;
        self.joined.keep_fields = keep;
        self
    }

    /// The same join decoding only `fields` of the joined stream's values
    /// (all that the plan reads of them, [`crate::plan::Plan::joined_fields`]):
    /// a pair then copies those, not the whole value.
    pub fn reading(mut self, fields: Option<Vec<String>>) -> Self {
        self.joined.fields = fields.map(Arc::from);
        self
    }

    /// What decodes the joined stream's records for this join.
    pub fn joined_decoder(&self) -> &JoinedDecoder {
        &self.joined
    }

    /// True if an event at `event_time` is late at `watermark`: behind it
    /// by more than the grace, it joins nothing.
    pub fn is_late(&self, event_time: i64, watermark: i64) -> bool {
        event_time < self.horizon(watermark)
    }

    /// Events buffered, of both streams.
    pub fn buffered(&self) -> usize {
        self.left.by_time.len() + self.right.by_time.len()
    }

    /// State writes waiting for the next commit.
    pub fn pending_writes(&self) -> usize {
        self.pending.len() + self.unstored.len()
    }

    /// The earliest time an event may have and still be joined at
    /// `watermark`.
    fn horizon(&self, watermark: i64) -> i64 {
        watermark.saturating_sub(self.within.grace_ms)
    }

    /// Joins an event of the stream at `watermark` (including it): the
    /// pairs it makes with buffered joined events, in their order; then
    /// buffers it.
    pub fn left_event(&mut self, mut event: Event, watermark: i64) -> Joined {
        if self.is_late(event.event_time, watermark) {
            return Joined::Late(Box::new(event));
        }
        if self
            .left_filter
            .as_ref()
            .is_some_and(|f| !f.is_true(&event))
        {
            return Joined::Rows(Vec::new());
        }
        let outer = self.spec.kind != JoinKind::Inner;
        let Some(join_key) = stringify(&self.spec.stream_key.eval(&event)) else {
            return Joined::Rows(match outer {
                true => vec![unmatched_left(event, &self.spec.alias)],
                false => Vec::new(),
            });
        };
        let t = event.event_time;
        let (from, to) = (
            t.saturating_sub(self.within.before_ms),
            t.saturating_add(self.within.after_ms),
        );
        let full = self.spec.kind == JoinKind::Full;
        let mut rows = Vec::new();
        for right in self.right.range_mut(&join_key, from, to) {
            rows.push(pair(&event, &right.event));
            if full && !right.matched {
                right.matched = true;
                let id = (JoinSide::Right, right.partition, right.offset);
                if self.unstored.contains_key(&id) {
                    continue;
                }
                self.pending.insert(
                    key::stream_join_entry(JoinSide::Right.tag(), right.partition, right.offset),
                    Some(encode(&join_key, right)),
                );
            }
        }
        // Not shared with the batch it came in: a buffered event would
        // keep the whole batch in memory.
        event.raw_value = match (&event.fields, self.keep_read_fields) {
            (Some((names, values)), true) => Bytes::from(fields_object(names, values)),
            _ => Bytes::copy_from_slice(&event.raw_value),
        };
        event.raw_key = event.raw_key.as_deref().map(Bytes::copy_from_slice);
        let entry = Entry {
            partition: event.partition,
            offset: event.offset,
            matched: !rows.is_empty(),
            event,
        };
        self.add(JoinSide::Left, Arc::from(join_key), entry);
        Joined::Rows(rows)
    }

    /// Joins an event of the joined stream ([`JoinedDecoder::decode`],
    /// which applied its filter) at `watermark`, as
    /// [`StreamJoin::left_event`] joins the stream's.
    pub fn right_event_joined(&mut self, event: Event, watermark: i64) -> Joined {
        if self.is_late(event.event_time, watermark) {
            return Joined::Late(Box::new(event));
        }
        let Some(join_key) = stringify(&self.within.joined_key.eval(&event)) else {
            return Joined::Rows(match self.spec.kind == JoinKind::Full {
                true => vec![event],
                false => Vec::new(),
            });
        };
        let r = event.event_time;
        // Left events at t with r in [t - before, t + after].
        let (from, to) = (
            r.saturating_sub(self.within.after_ms),
            r.saturating_add(self.within.before_ms),
        );
        let outer = self.spec.kind != JoinKind::Inner;
        let mut rows = Vec::new();
        for left in self.left.range_mut(&join_key, from, to) {
            rows.push(pair(&left.event, &event));
            if outer && !left.matched {
                left.matched = true;
                let id = (JoinSide::Left, left.partition, left.offset);
                if self.unstored.contains_key(&id) {
                    continue;
                }
                self.pending.insert(
                    key::stream_join_entry(JoinSide::Left.tag(), left.partition, left.offset),
                    Some(encode(&join_key, left)),
                );
            }
        }
        let entry = Entry {
            partition: event.partition,
            offset: event.offset,
            matched: !rows.is_empty(),
            event,
        };
        self.add(JoinSide::Right, Arc::from(join_key), entry);
        Joined::Rows(rows)
    }

    fn add(&mut self, side: JoinSide, join_key: Arc<str>, entry: Entry) {
        self.unstored.insert(
            (side, entry.partition, entry.offset),
            (join_key.clone(), entry.event.event_time),
        );
        match side {
            JoinSide::Left => self.left.insert(join_key, entry),
            JoinSide::Right => self.right.insert(join_key, entry),
        }
    }

    /// Drops the buffered events no event at or after `watermark`'s
    /// horizon can join; returns the unmatched ones an outer join emits,
    /// in (time, side, partition, offset) order.
    pub fn expire(&mut self, watermark: i64) -> Vec<Event> {
        let horizon = self.horizon(watermark);
        // A left event at t joins right events up to t + after.
        let left = self
            .left
            .expire(horizon.saturating_sub(self.within.after_ms));
        let right = self
            .right
            .expire(horizon.saturating_sub(self.within.before_ms));
        let mut unmatched = Vec::new();
        for (side, expired) in [(JoinSide::Left, left), (JoinSide::Right, right)] {
            for entry in expired {
                let id = (side, entry.partition, entry.offset);
                // Never written (and so without a pending write): nothing
                // to delete.
                let state_key =
                    || key::stream_join_entry(side.tag(), entry.partition, entry.offset);
                if self.unstored.remove(&id).is_none() {
                    self.pending.insert(state_key(), None);
                } else {
                    debug_assert!(!self.pending.contains_key(&state_key()));
                }
                let emits = !entry.matched
                    && match side {
                        JoinSide::Left => self.spec.kind != JoinKind::Inner,
                        JoinSide::Right => self.spec.kind == JoinKind::Full,
                    };
                if emits {
                    unmatched.push((entry.order(), side, entry.event));
                }
            }
        }
        unmatched.sort_by_key(|(order, side, _)| (*order, *side));
        unmatched
            .into_iter()
            .map(|(_, side, event)| match side {
                JoinSide::Left => unmatched_left(event, &self.spec.alias),
                JoinSide::Right => event,
            })
            .collect()
    }

    /// Adds the buffers' changes to the commit, in key order: RocksDB's
    /// memtable takes a batch's keys in the order given, each insert
    /// starting from where the one before it ended.
    pub fn flush(&mut self, batch: &mut Batch) {
        let mut unstored: Vec<_> = self.unstored.drain().collect();
        // (side, partition, offset) sorts as its key (`'l'` < `'r'`).
        unstored.sort_unstable_by_key(|(id, _)| *id);
        let mut pending = std::mem::take(&mut self.pending).into_iter().peekable();
        let state_cf = &self.state_cf;
        let write_pending = |batch: &mut Batch, (k, v): (Vec<u8>, Option<Vec<u8>>)| match v {
            Some(bytes) => batch.put(state_cf, k, bytes),
            None => batch.delete(state_cf, k),
        };
        for ((side, partition, offset), (join_key, time)) in unstored {
            let key = key::stream_join_entry(side.tag(), partition, offset);
            while let Some(earlier) = pending.next_if(|(k, _)| *k < key) {
                write_pending(batch, earlier);
            }
            let buffer = match side {
                JoinSide::Left => &self.left,
                JoinSide::Right => &self.right,
            };
            let order = (time, partition, offset);
            let entry = buffer.by_key.get(&*join_key).and_then(|entries| {
                let at = entries.partition_point(|e| e.order() < order);
                entries.get(at).filter(|e| e.order() == order)
            });
            let entry = entry.expect("an unstored event is kept until it is written or dropped");
            batch.put_with(state_cf, &key, |out| encode_into(&join_key, entry, out));
        }
        for rest in pending {
            write_pending(batch, rest);
        }
    }

    /// Loads the buffers.
    pub fn restore(&mut self, store: &Store) -> Result<()> {
        let (lower, upper) = key::namespace(ns::STREAM_JOIN);
        for (k, v) in store.scan(&self.state_cf, &lower, Some(&upper), usize::MAX)? {
            let (tag, partition, offset) =
                key::parse_stream_join_entry(&k).ok_or_else(|| self.corrupt("a malformed key"))?;
            let side = match tag {
                b'l' => JoinSide::Left,
                b'r' => JoinSide::Right,
                _ => return Err(self.corrupt("an entry of neither side")),
            };
            let (header, raw) = decode(&v).ok_or_else(|| self.corrupt("a malformed entry"))?;
            let value: Value = match side {
                JoinSide::Left => serde_json::from_slice(raw),
                JoinSide::Right => self.joined.decode_value(raw),
            }
            .map_err(|e| self.corrupt(&format!("a value that is not JSON: {e}")))?;
            let raw = Bytes::copy_from_slice(raw);
            let event = match side {
                JoinSide::Left => Event {
                    partition,
                    offset,
                    record_timestamp: header.ts,
                    raw_key: header.key.map(|k| Bytes::from(k.into_owned())),
                    lossy_key: None,
                    raw_value: raw,
                    value,
                    fields: None,
                    event_time: header.t,
                    joined: Vec::new(),
                    joined_key: None,
                },
                JoinSide::Right => self.joined.event(
                    partition,
                    offset,
                    header.ts,
                    header.t,
                    header.key.map(Cow::into_owned),
                    raw,
                    value,
                ),
            };
            let entry = Entry {
                partition,
                offset,
                matched: header.m,
                event,
            };
            let join_key = Arc::from(header.k.as_ref());
            match side {
                JoinSide::Left => self.left.insert(join_key, entry),
                JoinSide::Right => self.right.insert(join_key, entry),
            }
        }
        Ok(())
    }

    fn corrupt(&self, what: &str) -> ProcessorError {
        ProcessorError::CorruptState {
            cf: self.state_cf.clone(),
            reason: format!("stream join buffer: {what}"),
        }
    }
}

/// The conjuncts of `filter` each side's events must pass before the join
/// (see the module doc): `(stream's, joined stream's)`.
pub(crate) fn side_filters(
    filter: Option<&Expr>,
    alias: &str,
    kind: JoinKind,
) -> (Option<Expr>, Option<Expr>) {
    let mut conjuncts = Vec::new();
    if let Some(f) = filter {
        split_and(f, &mut conjuncts);
    }
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for c in conjuncts {
        match sides_read(c, alias) {
            (true, false) if kind != JoinKind::Full => left.push(c.clone()),
            (false, true) if kind == JoinKind::Inner => right.push(c.clone()),
            _ => {}
        }
    }
    let all = |v: Vec<Expr>| {
        v.into_iter()
            .reduce(|a, b| Expr::Binary(BinaryOp::And, Box::new(a), Box::new(b)))
    };
    (all(left), all(right))
}

/// Whether `e` reads the stream (`FROM`) and whether it reads the joined
/// stream, whose columns are under `alias` and whose key is the column
/// [`crate::event::JOINED_KEY_COLUMN`].
pub(crate) fn sides_read(e: &Expr, alias: &str) -> (bool, bool) {
    let (mut stream, mut joined) = (false, false);
    e.walk(&mut |node| match node {
        Expr::Field(path) if path.first().map(String::as_str) == Some(alias) => joined = true,
        Expr::Column(name) if name == crate::event::JOINED_KEY_COLUMN => joined = true,
        Expr::Field(_) | Expr::Key | Expr::RecordTimestamp | Expr::Column(_) => stream = true,
        _ => {}
    });
    (stream, joined)
}

fn split_and<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match e {
        Expr::Binary(BinaryOp::And, l, r) => {
            split_and(l, out);
            split_and(r, out);
        }
        other => out.push(other),
    }
}

/// The joined event of `left` and `right`: the left event with the right
/// one's value and key, at the later of their times.
fn pair(left: &Event, right: &Event) -> Event {
    let mut out = left.clone();
    out.joined = right.joined.clone();
    out.joined_key = right.joined_key.clone();
    out.event_time = left.event_time.max(right.event_time);
    out.record_timestamp = left.record_timestamp.max(right.record_timestamp);
    out
}

/// A left event joined with nothing: the right side's columns are null.
fn unmatched_left(mut event: Event, alias: &str) -> Event {
    event.joined = vec![(alias.to_string(), Value::Null)];
    event.joined_key = None;
    event
}

/// The JSON text of an object of `names` and their `values` (a stream's
/// event decoded by fields; `null` for a missing one, as the event reads
/// it).
fn fields_object(names: &[String], values: &[Value]) -> Vec<u8> {
    let object: serde_json::Map<String, Value> =
        names.iter().cloned().zip(values.iter().cloned()).collect();
    serde_json::to_vec(&object).expect("a JSON object serializes")
}

/// The stored form of `entry` (see the module doc).
fn encode(join_key: &str, entry: &Entry) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_into(join_key, entry, &mut bytes);
    bytes
}

/// Appends the stored form of `entry` to `out`.
fn encode_into(join_key: &str, entry: &Entry, out: &mut Vec<u8>) {
    let event = &entry.event;
    let key = match &event.joined_key {
        Some(Value::String(k)) => Some(k.as_str()),
        _ => event.key_text(),
    };
    let header = StoredHeader {
        k: Cow::Borrowed(join_key),
        t: event.event_time,
        ts: event.record_timestamp,
        key: key.map(Cow::Borrowed),
        m: entry.matched,
    };
    out.push(ENTRY_FORMAT);
    serde_json::to_writer(&mut *out, &header).expect("headers serialize");
    out.push(b'\n');
    out.extend_from_slice(&event.raw_value);
}

/// A stored entry's header and value bytes.
fn decode(bytes: &[u8]) -> Option<(StoredHeader<'static>, &[u8])> {
    let rest = bytes.strip_prefix(&[ENTRY_FORMAT])?;
    let newline = rest.iter().position(|b| *b == b'\n')?;
    let header = serde_json::from_slice(&rest[..newline]).ok()?;
    Some((header, &rest[newline + 1..]))
}

#[cfg(test)]
mod tests;
