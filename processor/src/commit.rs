//! The commit of a processor version: one atomic RocksDB write of
//! operator state, view rows, input offsets (stream and table), watermark,
//! tracker state and log time ([`crate::state::key::Meta`]), with the
//! output records made since the last commit on one of two paths.
//!
//! - **Sequenced** ([`crate::sequenced`]): records of the built-in log's
//!   topics that are a function of the input in processing order — a
//!   derived stream's rows, late side outputs, over the built-in log — are
//!   appended *before* the write (as they fill an append, and the rest by
//!   the commit, which waits for the log's acknowledgement), each batch
//!   naming its records' sequence numbers; the write commits each output
//!   partition's next number. A crash before the write leaves records the
//!   restarted version makes again with the same numbers, and drops.
//! - **Stored outbox**: every other output record (an aggregate's row
//!   changes, a topic on a Kafka cluster, any output of a version reading
//!   a cluster) is written into the outbox inside the write
//!   (`outbox/<n>`, JSON) and appended after it with an idempotency key
//!   derived from the entry's number `n`; a restart re-appends a pending
//!   entry with the same key, which the log (or the cluster's sink)
//!   deduplicates, then deletes it.
//!
//! So a crash at any point ([`CrashPoint`]) yields neither duplicates nor
//! gaps downstream.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ProcessorError, Result};
use crate::event::Event;
use crate::operator::RowChange;
use crate::plan::Sink;
use crate::runner::Runtime;
use crate::sink::OutputRecord;
use crate::state::key::Meta;
use crate::state::store::Batch;

/// Where the simulated crash of [`Runtime::commit_crashing`] happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// Inside the sequenced append: one output partition got the
    /// commit's records, the others did not; nothing written to RocksDB.
    InsideAppend,
    /// After the sequenced append, before the RocksDB commit.
    BeforeCommit,
    /// After the RocksDB commit, before the outbox is appended.
    AfterCommit,
    /// After the outbox is appended, before it is cleared.
    AfterAppend,
}

/// An output record waiting in the outbox.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OutRecord {
    /// The topic it goes to (shared by the records of one topic).
    pub(crate) topic: Arc<str>,
    /// Record key.
    pub(crate) key: Option<String>,
    /// Record value (JSON text).
    pub(crate) value: String,
    /// Record timestamp (ms).
    pub(crate) timestamp: i64,
    /// The input partition and offset it was made from (a repartition
    /// topic's records: see [`crate::spread::repartition`]).
    pub(crate) source: Option<(u32, u64)>,
    /// The table row the event was joined with (JSON text), for the
    /// stage after a repartition topic.
    pub(crate) joined: Option<String>,
    /// Place of the input that made it in the version's processing order
    /// (records from key-shard workers are put back in this order).
    pub(crate) seq: u64,
}

/// A record of a stored outbox entry (`outbox/<n>`): the entry's value is
/// the JSON array of its records, `{"topic", "key", "value",
/// "timestamp"[, "source", "joined"]}` — the format entries have always
/// had, so a pending entry left by an older build is appended too.
#[derive(Serialize, Deserialize)]
struct StoredRecord<'a> {
    #[serde(borrow)]
    topic: Cow<'a, str>,
    #[serde(borrow)]
    key: Option<Cow<'a, str>>,
    #[serde(borrow)]
    value: Cow<'a, str>,
    timestamp: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    source: Option<(u32, u64)>,
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    joined: Option<Cow<'a, str>>,
}

impl<'a> StoredRecord<'a> {
    fn of(r: &'a OutRecord) -> StoredRecord<'a> {
        StoredRecord {
            topic: Cow::Borrowed(&r.topic),
            key: r.key.as_deref().map(Cow::Borrowed),
            value: Cow::Borrowed(&r.value),
            timestamp: r.timestamp,
            source: r.source,
            joined: r.joined.as_deref().map(Cow::Borrowed),
        }
    }

    fn into_record(self) -> OutRecord {
        OutRecord {
            topic: Arc::from(self.topic.as_ref()),
            key: self.key.map(Cow::into_owned),
            value: self.value.into_owned(),
            timestamp: self.timestamp,
            source: self.source,
            joined: self.joined.map(Cow::into_owned),
            seq: 0,
        }
    }
}

impl OutRecord {
    /// `event` sent as is to side-output `topic` (late or invalid).
    pub(crate) fn side_output(topic: &str, event: &Event, seq: u64) -> OutRecord {
        LateRecord::of(event).side_output(topic, seq)
    }
}

/// What a side output sends of an event: its record key and value as they
/// came, and its record timestamp. A key shard keeps this (not the event)
/// for each event it may find late.
#[derive(Debug)]
pub(crate) struct LateRecord {
    key: Option<Bytes>,
    value: Bytes,
    timestamp: i64,
}

impl LateRecord {
    /// `event`'s record (its bytes shared, not copied).
    pub(crate) fn of(event: &Event) -> LateRecord {
        LateRecord {
            key: event.raw_key.clone(),
            value: event.raw_value.clone(),
            timestamp: event.record_timestamp,
        }
    }

    /// The record sent to side-output `topic`, `seq` its place in the
    /// processing order. A key that is not UTF-8 goes as its lossy text,
    /// as [`Event::key_text`] reads it.
    pub(crate) fn side_output(&self, topic: &str, seq: u64) -> OutRecord {
        OutRecord {
            topic: Arc::from(topic),
            key: self
                .key
                .as_deref()
                .map(|k| String::from_utf8_lossy(k).into_owned()),
            value: String::from_utf8_lossy(&self.value).into_owned(),
            timestamp: self.timestamp,
            source: None,
            joined: None,
            seq,
        }
    }
}

/// What a commit writes besides operator state, rows, the outbox and the
/// log time. When it equals the last commit's and nothing else is to be
/// written, the commit is skipped: an idle version does not sync its WAL
/// every interval.
///
/// Only the log time would differ (it follows the log's completeness bound
/// while the input is idle), and leaving the stored one behind decides
/// nothing differently: log time acts only through the watermark computed
/// from the tracker's state at that time, and moving it from the stored
/// time to a later one after a restart passes the same times the skipped
/// commits passed, where — the tracker and watermark being unchanged —
/// nothing happened. No batch was appended in between either: every
/// batch up to the log time is read before it moves, and one read would
/// have moved the positions.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CommitMeta {
    stream_positions: Vec<u64>,
    table_positions: Vec<u64>,
    watermark: i64,
    /// The watermark tracker's state, serialized.
    tracker: Vec<u8>,
}

fn now_ms() -> i64 {
    kappa_log::now_ms()
}

impl Runtime {
    /// Commits: one atomic write of state, rows, offsets and watermark (and
    /// the outbox), then appends the outbox to its topics.
    ///
    /// A commit hands the state changed since the last one to its write;
    /// if it fails, that state is gone from this runtime (the operators
    /// hold it as clean), so every later commit of the runtime fails too,
    /// naming the first failure: the version restarts from its last commit
    /// in a new runtime, which the server does.
    pub fn commit(&mut self) -> Result<()> {
        self.commit_guarded(None)
    }

    /// A commit that stops at `crash`, as a crash would (tests).
    pub fn commit_crashing(&mut self, crash: CrashPoint) -> Result<()> {
        self.commit_guarded(Some(crash))
    }

    fn commit_guarded(&mut self, crash: Option<CrashPoint>) -> Result<()> {
        if let Some(reason) = &self.failed_commit {
            return Err(ProcessorError::Stopped(format!(
                "an earlier commit of this runtime failed ({reason}); restart the version from its last commit"
            )));
        }
        let committed = self.commit_inner(crash);
        if let Err(e) = &committed {
            self.failed_commit = Some(e.to_string());
        }
        committed
    }

    fn commit_inner(&mut self, crash: Option<CrashPoint>) -> Result<()> {
        let started = Instant::now();
        let span = tracing::debug_span!(
            "commit",
            view = %self.scope.name,
            version = self.scope.version,
            records = self.uncommitted_records,
            bytes = tracing::field::Empty,
        );
        let _entered = span.enter();
        let cf = self.scope.state_cf();
        let mut batch = Batch::default();
        let mut changes = Vec::new();
        if let Some(a) = &mut self.aggregate {
            let (taken, rows, late) = a.flush(&self.store, &mut batch)?;
            changes = taken;
            match &mut self.rows_aggregate {
                // The inner rows' changes go to the outer aggregate, whose
                // rows are the view's (read before this batch is written:
                // the store holds each inner row's previous version).
                Some(outer) => {
                    outer.apply(&self.store, std::mem::take(&mut changes))?;
                    changes = outer.take_changes()?;
                    self.progress.add_output(outer.flush(&mut batch));
                }
                None => self.progress.add_output(rows),
            }
            if !late.is_empty() {
                // Key-shard workers' late events, back in processing order.
                self.outbox.extend(late);
                self.outbox.sort_by_key(|r| r.seq);
            }
        }
        if let (Some(rows), Some(outer)) = (&mut self.table_rows, &mut self.rows_aggregate) {
            // A declared table's changed rows (joined, for a join of
            // tables) go to the query over them (read before this batch is
            // written: the store holds each row's previous version).
            let input = match &self.tables_join {
                Some(join) => join.changes(&self.store, rows)?,
                None => rows.changes(),
            };
            outer.apply(&self.store, input)?;
            changes = outer.take_changes()?;
            self.progress.add_output(outer.flush(&mut batch));
            if let Some(join) = &mut self.tables_join {
                join.flush(&self.store, rows, &mut batch)?;
            }
            rows.flush(&mut batch);
        }
        if let Some(d) = &mut self.dedup {
            d.flush(&mut batch);
        }
        for j in &mut self.tables {
            j.flush(&mut batch);
        }
        if let Some(j) = &mut self.stream_join {
            j.flush(&mut batch);
        }
        if let Some(s) = &self.source_dedup {
            s.flush(&mut batch, &cf);
        }
        let state_written = !batch.is_empty();
        let flushed_us = started.elapsed().as_micros() as u64;
        let meta = CommitMeta {
            stream_positions: self.order.stream_positions().to_vec(),
            table_positions: self.order.table_positions().to_vec(),
            watermark: self.watermark.current(),
            tracker: serde_json::to_vec(&self.watermark.state()).expect("serializes"),
        };
        self.queue_changes(&changes);
        if crash.is_none()
            && !state_written
            && changes.is_empty()
            && self.outbox.is_empty()
            && !self.sequenced.appended()
            && self.last_meta.as_ref() == Some(&meta)
        {
            self.uncommitted_records = 0;
            self.last_commit = Instant::now();
            return Ok(());
        }
        for (p, offset) in meta.stream_positions.iter().enumerate() {
            batch.put(&cf, Meta::Offset(p).key(), offset.to_le_bytes());
        }
        for (p, offset) in meta.table_positions.iter().enumerate() {
            batch.put(&cf, Meta::TableOffset(p).key(), offset.to_le_bytes());
        }
        let watermark = meta.watermark;
        batch.put(&cf, Meta::Watermark.key(), (watermark as u64).to_le_bytes());
        batch.put(&cf, Meta::WatermarkPartitions.key(), &meta.tracker);
        batch.put(
            &cf,
            Meta::LogTime.key(),
            (self.log_time as u64).to_le_bytes(),
        );
        // The sequenced outputs' records: in the log before the write that
        // commits their input.
        self.drain_sequenced()?;
        self.sequenced
            .flush(crash == Some(CrashPoint::InsideAppend))?;
        match crash {
            Some(CrashPoint::InsideAppend) => {
                return Err(ProcessorError::Stopped(
                    "simulated crash inside the append".into(),
                ))
            }
            Some(CrashPoint::BeforeCommit) => {
                return Err(ProcessorError::Stopped(
                    "simulated crash before the commit".into(),
                ))
            }
            _ => {}
        }
        self.sequenced.put_positions(&mut batch, &cf);
        let outbox = std::mem::take(&mut self.outbox);
        let seq = self.outbox_seq;
        if !outbox.is_empty() {
            let stored: Vec<StoredRecord<'_>> = outbox.iter().map(StoredRecord::of).collect();
            let json = serde_json::to_vec(&stored).expect("serializes");
            batch.put(&cf, Meta::Outbox(seq).key(), json);
            self.outbox_seq += 1;
            batch.put(&cf, Meta::OutboxSeq.key(), self.outbox_seq.to_le_bytes());
        }
        let bytes = batch.bytes();
        span.record("bytes", bytes);
        let write_started = Instant::now();
        self.store.write(batch)?;
        let write_us = write_started.elapsed().as_micros() as u64;
        self.last_meta = Some(meta);
        self.uncommitted_records = 0;
        self.last_commit = Instant::now();
        self.progress
            .set_committed(self.order.stream_positions(), watermark);
        self.progress.changes.publish(&changes);
        if crash == Some(CrashPoint::AfterCommit) {
            return Err(ProcessorError::Stopped(
                "simulated crash after the commit".into(),
            ));
        }
        if !outbox.is_empty() {
            self.append_outbox(seq, &outbox)?;
            if crash == Some(CrashPoint::AfterAppend) {
                return Err(ProcessorError::Stopped(
                    "simulated crash after the append".into(),
                ));
            }
            let mut clear = Batch::default();
            clear.delete(&cf, Meta::Outbox(seq).key());
            self.store.write(clear)?;
            self.progress.add_output(outbox.len() as u64);
        }
        let latency = self
            .newest_input_ms
            .take()
            .map(|t| now_ms().saturating_sub(t));
        let state_bytes = self.state_bytes();
        crate::metrics::record_commit(&self.scope, started.elapsed(), bytes, latency, state_bytes);
        tracing::debug!(
            outbox = outbox.len(),
            watermark,
            elapsed_us = started.elapsed().as_micros() as u64,
            flushed_us,
            write_us,
            "committed"
        );
        self.check_state_limit()
    }

    /// Appends the outbox's records of sequenced topics ahead of the
    /// commit once there are [`crate::runner::RunOptions::append_ahead_records`]
    /// of them (after a poll). Only while the outbox is in processing
    /// order as it fills: not with an aggregate, whose key shards hand
    /// their late records over at the commit.
    pub(crate) fn append_ahead(&mut self) -> Result<()> {
        if self.sequenced.is_empty()
            || self.aggregate.is_some()
            || self.outbox.len() + self.sequenced.buffered() < self.options.append_ahead_records
        {
            self.count_sequenced_output();
            return Ok(());
        }
        self.drain_sequenced()?;
        self.sequenced.send_all()
    }

    /// Hands the outbox's records of sequenced topics to
    /// [`crate::sequenced`], in order; the others stay for the stored
    /// outbox.
    pub(crate) fn drain_sequenced(&mut self) -> Result<()> {
        if self.sequenced.is_empty() || self.outbox.is_empty() {
            self.count_sequenced_output();
            return Ok(());
        }
        // Drained in place: the outbox keeps its allocation.
        let mut outbox = std::mem::take(&mut self.outbox);
        let mut kept = Vec::new();
        // The records of one topic share its name: looked up once.
        let mut last: Option<(Arc<str>, Option<usize>)> = None;
        for record in outbox.drain(..) {
            let index = match &last {
                Some((topic, index)) if Arc::ptr_eq(topic, &record.topic) => *index,
                _ => {
                    let index = self.sequenced.index(&record.topic);
                    last = Some((record.topic.clone(), index));
                    index
                }
            };
            match index {
                Some(topic) => {
                    let key = record.key.as_deref().map(str::as_bytes);
                    let value = record.value.as_bytes();
                    self.sequenced.push(topic, key, value, record.timestamp)?;
                }
                None => kept.push(record),
            }
        }
        outbox.append(&mut kept);
        self.outbox = outbox;
        self.count_sequenced_output();
        Ok(())
    }

    /// Counts the records handed to [`crate::sequenced`] since the last
    /// count as output (once per poll or drain, not per record: the
    /// counter's metric is looked up by its labels).
    fn count_sequenced_output(&mut self) {
        let handed = self.sequenced.take_pushed();
        if handed > 0 {
            self.progress.add_output(handed);
        }
    }

    /// Puts an aggregate's row changes in the outbox of a topic sink (a
    /// view's rows were written by the operator's flush).
    fn queue_changes(&mut self, changes: &[RowChange]) {
        let Sink::Topic(topic) = &self.plan.sink else {
            return;
        };
        let topic: Arc<str> = Arc::from(topic.as_str());
        for change in changes {
            self.outbox.push(OutRecord {
                topic: topic.clone(),
                key: Some(change.key.clone()),
                value: change.row.as_ref().map_or("null".into(), Value::to_string),
                // A window's start, else the log time of the input that
                // changed the row: the same in every replay.
                timestamp: change.window.map_or(self.log_time, |(s, _)| s),
                source: None,
                joined: None,
                seq: self.event_seq,
            });
        }
    }

    /// Finds what the sequenced topics hold past the commit
    /// ([`crate::sequenced::Sequenced::restore`]); appends outbox entries
    /// a crash left behind (the log drops the ones that were already
    /// appended), then clears them.
    pub(crate) fn flush_pending_outbox(&mut self) -> Result<()> {
        let cf = self.scope.state_cf();
        self.sequenced.restore(&self.store, &cf)?;
        let (lower, upper) = Meta::outbox_range();
        for (k, v) in self.store.scan(&cf, &lower, Some(&upper), usize::MAX)? {
            let seq = Meta::outbox_seq(&k).unwrap_or(0);
            let stored: Vec<StoredRecord<'_>> =
                serde_json::from_slice(&v).map_err(|e| ProcessorError::CorruptState {
                    cf: cf.clone(),
                    reason: e.to_string(),
                })?;
            let records: Vec<OutRecord> =
                stored.into_iter().map(StoredRecord::into_record).collect();
            self.append_outbox(seq, &records)?;
            let mut batch = Batch::default();
            batch.delete(&cf, k);
            self.store.write(batch)?;
        }
        Ok(())
    }

    /// Appends outbox entry `seq` to its topics. The input positions it
    /// names are the committed ones: an entry is appended after the commit
    /// that made it (or, left pending by a crash, on the restart, which
    /// resumes from that commit).
    fn append_outbox(&self, seq: u64, records: &[OutRecord]) -> Result<()> {
        let mut topics: Vec<&str> = records.iter().map(|r| r.topic.as_ref()).collect();
        topics.sort_unstable();
        topics.dedup();
        for topic in topics {
            let Some(output) = self.outputs.get(topic) else {
                return Err(ProcessorError::Stopped(format!(
                    "the outbox names topic {topic}, which is not an output of {}@{}",
                    self.scope.name, self.scope.version
                )));
            };
            let out: Vec<OutputRecord<'_>> = records
                .iter()
                .filter(|r| r.topic.as_ref() == topic)
                .map(|r| OutputRecord {
                    key: r.key.as_deref(),
                    value: &r.value,
                    timestamp: r.timestamp,
                    source: r.source,
                    joined: r.joined.as_deref(),
                })
                .collect();
            output.append(seq, &out, self.order.stream_positions())?;
        }
        Ok(())
    }
}
