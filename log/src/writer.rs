//! The writer thread of one partition: the only code that appends to its
//! active segment.
//!
//! Group commit: the thread takes every append waiting in its queue (up to
//! a bound), encodes them into one buffer (records encoded where they were
//! made are sealed in their own: `EncodedRecords::into_sealed`), issues
//! one `write` of them all, and under
//! `fsync = always` one `fdatasync` for the whole group, then publishes the
//! new end to readers and answers every caller. While it syncs, new appends
//! queue up and form the next group, so concurrent producers share syncs.
//! Under `fsync = interval` the writer never syncs the active segment
//! itself: a syncer thread does, every interval (`crate::syncer`).
//!
//! A failed fsync stops the partition for good (until a restart runs
//! recovery): after a failed fsync the kernel may have dropped the dirty
//! pages, so retrying could acknowledge data that is not on disk.

use std::fs::File;
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, OwnedSemaphorePermit};

use crate::batch::{self, BatchMeta};
use crate::compression::Compression;
use crate::config::FsyncPolicy;
use crate::error::{LogError, Result};
use crate::idempotency::{fingerprint_encoded, PriorAppend};
use crate::io;
use crate::partition::{AppendChain, AppendOutcome, AppendPayload, PartitionShared};
use crate::recovery::{self, ActiveState};
use crate::syncer::{record_sync, IntervalSync};

/// Most bytes one group commit writes (beyond its first append).
const MAX_GROUP_BYTES: usize = 8 << 20;
/// Most appends in one group commit.
const MAX_GROUP_APPENDS: usize = 4096;

/// A queued append.
pub struct AppendJob {
    /// What to append.
    pub request: AppendPayload,
    /// Its encoded size.
    pub encoded_len: usize,
    /// Where the answer goes.
    pub reply: oneshot::Sender<Result<AppendOutcome>>,
    /// Queue space held until the append is answered.
    pub permit: OwnedSemaphorePermit,
}

impl AppendJob {
    /// Answers the append; a failed one breaks its chain first, so that no
    /// later append of the chain is written.
    fn answer(self, outcome: Result<AppendOutcome>) {
        if outcome.is_err() {
            if let Some(chain) = self.request.chain() {
                chain.stop();
            }
        }
        let _ = self.reply.send(outcome);
        // The queue space is given back once the answer is sent.
        drop(self.permit);
    }
}

/// What the writer thread is asked to do.
pub enum Command {
    /// Append records.
    Append(AppendJob),
    /// Seal the active segment now (if it holds anything).
    Roll(oneshot::Sender<Result<()>>),
}

/// The writer's state; `run` consumes it on its own thread.
pub struct Writer {
    shared: Arc<PartitionShared>,
    rx: Receiver<Command>,
    active: ActiveState,
    buf: Vec<u8>,
    /// Written since the writer's last own sync.
    unsynced: bool,
    /// The syncer of the `interval` policy.
    interval: Option<Arc<IntervalSync>>,
    /// The page cache tail ([`crate::TopicConfig::cached_tail_bytes`]).
    cache: CachedTail,
}

/// What the writer has dropped from the page cache under
/// [`crate::TopicConfig::cached_tail_bytes`]: the active segment's bytes
/// before `dropped`, and of the segment sealed last, the rest still
/// cached until the active segment holds the whole tail.
#[derive(Default)]
struct CachedTail {
    /// Bytes at the start of the active segment dropped (a multiple of
    /// [`PAGE`]).
    dropped: u64,
    /// The segment sealed last, its bytes from the first number to the
    /// second still cached.
    sealed: Option<(File, u64, u64)>,
}

/// The page size the drops are aligned to.
const PAGE: u64 = 4096;
/// The largest folio the page cache may hold a file's bytes in (a huge
/// page): a drop leaves a folio it covers only in part, so each one
/// reaches back this far over the bytes dropped before.
const MAX_FOLIO: u64 = 2 << 20;

/// Drops bytes `from..to` of `file` from the page cache, reaching back
/// [`MAX_FOLIO`] before `from` (the bytes there were dropped before but
/// for a folio that drop covered in part), and counts them.
fn drop_range(file: &File, from: u64, to: u64) {
    let reach = from.saturating_sub(MAX_FOLIO);
    io::drop_cached(file, reach, to - reach);
    metrics::counter!(crate::metrics::PAGE_CACHE_DROPPED_BYTES).increment(to - from);
}

impl CachedTail {
    /// After the writer's fsync of the active segment's first `end` bytes
    /// (`file`): drops the bytes older than the newest `tail`, the sealed
    /// segment's rest once the active one holds them all.
    fn drop_behind(&mut self, file: &File, end: u64, tail: u64) {
        let upto = end.saturating_sub(tail) / PAGE * PAGE;
        if upto > self.dropped {
            drop_range(file, self.dropped, upto);
            self.dropped = upto;
        }
        if end >= tail {
            if let Some((sealed, from, to)) = self.sealed.take() {
                drop_range(&sealed, from, to);
            }
        }
    }

    /// The active segment was sealed, and the next one starts empty; with
    /// `sealed` (its file and size, synced) its rest is dropped later.
    fn rolled(&mut self, sealed: Option<(File, u64)>) {
        self.sealed = sealed
            .filter(|&(_, size)| size > self.dropped)
            .map(|(file, size)| (file, self.dropped, size));
        self.dropped = 0;
    }
}

/// Where one batch of a group is, between encoding and writing.
enum Piece {
    /// In the writer's buffer.
    Buffered(std::ops::Range<usize>),
    /// In the buffer its records were pushed into.
    Sealed(batch::SealedBatch),
}

impl Piece {
    /// The batch's bytes, `buffer` being the writer's.
    fn bytes<'a>(&'a self, buffer: &'a [u8]) -> &'a [u8] {
        match self {
            Piece::Buffered(range) => &buffer[range.clone()],
            Piece::Sealed(sealed) => sealed.batch(),
        }
    }
}

/// One append of a group, between encoding and answering.
struct Pending {
    job: AppendJob,
    outcome: Result<AppendOutcome>,
    /// (position, base offset, length, max timestamp) when it was encoded.
    written: Option<(u64, u64, u64, i64)>,
}

impl Writer {
    /// A writer for a recovered partition.
    pub fn new(
        shared: Arc<PartitionShared>,
        rx: Receiver<Command>,
        active: ActiveState,
    ) -> Result<Self> {
        let interval = match shared.config.fsync {
            FsyncPolicy::Interval => Some(Arc::new(IntervalSync::new(
                shared.clone(),
                Duration::from_millis(shared.config.fsync_interval_ms),
                &active.file,
                &active.segment.paths.log,
            )?)),
            FsyncPolicy::Always | FsyncPolicy::Never => None,
        };
        Ok(Writer {
            shared,
            rx,
            active,
            buf: Vec::new(),
            unsynced: false,
            interval,
            cache: CachedTail::default(),
        })
    }

    /// The thread body: serve commands until every sender is gone (with
    /// the syncer thread beside it under `interval`), then sync what is
    /// unsynced.
    pub fn run(mut self) {
        let interval = self.interval.clone();
        std::thread::scope(|scope| {
            if let Some(syncer) = &interval {
                let name = format!("kappa-sync-{}-{}", self.shared.topic, self.shared.partition);
                if let Err(e) = std::thread::Builder::new()
                    .name(name)
                    .spawn_scoped(scope, || syncer.run())
                {
                    self.shared.fail(&LogError::io(&self.shared.dir, e));
                }
            }
            self.serve();
            if let Some(syncer) = &interval {
                syncer.stop();
            }
        });
        if self.unsynced && self.shared.failure().is_none() {
            if let Err(e) = self.sync() {
                tracing::error!(topic = %self.shared.topic, partition = self.shared.partition, error = %e, "final fsync failed");
            }
        }
    }

    /// Serves commands until every sender is gone.
    fn serve(&mut self) {
        while let Ok(command) = self.rx.recv() {
            match command {
                Command::Append(job) => {
                    let mut group = vec![job];
                    let mut bytes = 0;
                    let mut deferred = None;
                    while bytes < MAX_GROUP_BYTES && group.len() < MAX_GROUP_APPENDS {
                        match self.rx.try_recv() {
                            Ok(Command::Append(job)) => {
                                bytes += job.encoded_len;
                                group.push(job);
                            }
                            Ok(other) => {
                                deferred = Some(other);
                                break;
                            }
                            Err(_) => break,
                        }
                    }
                    self.commit_group(group);
                    if let Some(Command::Roll(reply)) = deferred {
                        let _ = reply.send(self.roll());
                    }
                }
                Command::Roll(reply) => {
                    let _ = reply.send(self.roll());
                }
            }
        }
    }

    fn commit_group(&mut self, group: Vec<AppendJob>) {
        if let Some(reason) = self.shared.failure() {
            for job in group {
                job.answer(Err(self.shared.failed_error(&reason)));
            }
            return;
        }
        // In flight from here until the batches are readable (or failed):
        // the log is not complete past `now` before the ticket drops.
        let ticket = self.shared.log_config.clock.begin();
        let now = ticket.time();
        let group_bytes: usize = group.iter().map(|j| j.encoded_len).sum();
        if self.should_roll(group_bytes as u64, now) {
            if let Err(e) = self.roll() {
                for job in group {
                    job.answer(Err(self.shared.failed_or(&e)));
                }
                return;
            }
        }
        self.buf.clear();
        let start_size = self.active.size;
        let mut next_offset = self.active.next_offset;
        let mut pending = Vec::with_capacity(group.len());
        // The group's batches in order, and their bytes.
        let mut pieces = Vec::with_capacity(group.len());
        let mut group_len = 0;
        let shared = self.shared.clone();
        // Read once per group: how its batches are stored, and the page
        // cache tail its fsync leaves.
        let settings = shared.settings();
        let compression = settings.compression;
        let mut window = shared.idempotency.lock().expect("idempotency");
        for mut job in group {
            // Checked in queue order: once an append of the chain failed,
            // every later one is refused here, unwritten.
            if job.request.chain().is_some_and(AppendChain::is_broken) {
                let outcome = Err(LogError::ChainBroken {
                    topic: shared.topic.clone(),
                    partition: shared.partition,
                });
                pending.push(Pending {
                    job,
                    outcome,
                    written: None,
                });
                continue;
            }
            let key = job.request.idempotency_key().map(<[u8]>::to_vec);
            if let Some(key) = &key {
                if let Some(prior) = window.get(key, now) {
                    let outcome = duplicate_outcome(key, prior, &job.request);
                    pending.push(Pending {
                        job,
                        outcome,
                        written: None,
                    });
                    continue;
                }
            }
            let position = start_size + group_len;
            let meta = BatchMeta {
                base_offset: next_offset,
                append_time: now,
                idempotency_key: key.as_deref(),
            };
            let count = job.request.record_count() as u32;
            let mut piece = match &mut job.request {
                // Records encoded where they were made, stored as encoded:
                // their batch is written from their own buffer.
                AppendPayload::Encoded { records, .. } if compression == Compression::None => {
                    Piece::Sealed(std::mem::take(records).into_sealed(meta))
                }
                request => {
                    let start = self.buf.len();
                    request.encode(&mut self.buf, meta);
                    Piece::Buffered(start..self.buf.len())
                }
            };
            // Read off the bytes just encoded, before their compression.
            let encoded = piece.bytes(&self.buf);
            let max_ts = batch::i64_at(encoded, batch::MAX_TIMESTAMP_OFFSET);
            if let Some(key) = key {
                let prior = PriorAppend {
                    base_offset: next_offset,
                    record_count: count,
                    append_time: now,
                    fingerprint: fingerprint_encoded(encoded),
                };
                window.insert(key, prior);
            }
            if let Piece::Buffered(range) = &mut piece {
                let start = range.start;
                let as_sent = job.request.as_sent().filter(|k| k.codec == compression);
                let stored_as_sent = as_sent.and_then(|kafka| {
                    crate::kafka_batch::store_as_sent(&mut self.buf, start, kafka)
                });
                if as_sent.is_some() && stored_as_sent.is_none() {
                    tracing::warn!(
                        topic = %shared.topic,
                        partition = shared.partition,
                        "a Kafka producer's batch does not read back as the records decoded from it: stored the usual way"
                    );
                }
                let len = stored_as_sent.unwrap_or_else(|| {
                    crate::compression::compress_batch(&mut self.buf, start, compression)
                });
                *range = start..start + len;
            }
            let len = piece.bytes(&self.buf).len() as u64;
            group_len += len;
            pieces.push(piece);
            let outcome = Ok(AppendOutcome {
                base_offset: next_offset,
                record_count: count,
                bytes: len,
                duplicate: false,
            });
            pending.push(Pending {
                job,
                outcome,
                written: Some((position, next_offset, len, max_ts)),
            });
            next_offset += u64::from(count);
        }
        // Not held across the write and fsync: readers of the window
        // (routing checks) must not wait for the disk.
        drop(window);
        if !pieces.is_empty() {
            if let Err(e) = self.write_and_sync(start_size, &pieces, settings.cached_tail_bytes) {
                let mut window = shared.idempotency.lock().expect("idempotency");
                for p in &pending {
                    if p.written.is_some() {
                        if let Some(key) = p.job.request.idempotency_key() {
                            window.remove(key);
                        }
                    }
                }
                let group_start = self.active.next_offset;
                for p in pending {
                    // A duplicate of an append in this same group failed with it.
                    let in_group = matches!(&p.outcome, Ok(o) if o.base_offset >= group_start);
                    let reply = if p.written.is_some() || in_group {
                        Err(self.shared.failed_or(&e))
                    } else {
                        p.outcome
                    };
                    p.job.answer(reply);
                }
                return;
            }
            let records = next_offset - self.active.next_offset;
            metrics::histogram!(crate::metrics::GROUP_COMMIT_RECORDS).record(records as f64);
            self.publish(&pending, group_len, next_offset, now);
        }
        drop(ticket);
        for p in pending {
            p.job.answer(p.outcome);
        }
    }

    fn should_roll(&self, incoming: u64, now: i64) -> bool {
        let cfg = &self.shared.config;
        self.active.size > 0
            && (self.active.size + incoming > cfg.segment_bytes
                || self
                    .active
                    .first_append_time
                    .is_some_and(|t| now.saturating_sub(t) >= cfg.segment_ms as i64))
    }

    /// Writes the group's batches, `pieces`; syncs under `fsync = always`
    /// (the syncer thread syncs under `interval`), then drops what is
    /// older than `cached_tail` bytes from the page cache. On a write
    /// error the file is cut back to `start_size` so no partial batch
    /// stays.
    fn write_and_sync(
        &mut self,
        start_size: u64,
        pieces: &[Piece],
        cached_tail: Option<u64>,
    ) -> Result<()> {
        let path = self.active.segment.paths.log.clone();
        let faults = self.shared.log_config.faults.clone();
        let batches: Vec<&[u8]> = pieces.iter().map(|p| p.bytes(&self.buf)).collect();
        let end = start_size + batches.iter().map(|b| b.len() as u64).sum::<u64>();
        let written =
            io::write_all_vectored(&mut self.active.file, &path, &batches, faults.as_deref());
        if let Err(e) = written {
            use std::io::{Seek, SeekFrom};
            let undo = self.active.file.set_len(start_size).and_then(|_| {
                self.active
                    .file
                    .seek(SeekFrom::Start(start_size))
                    .map(|_| ())
            });
            if let Err(undo) = undo {
                let failure = LogError::io(&path, undo);
                self.shared.fail(&failure);
            }
            return Err(e);
        }
        self.unsynced = true;
        if let Some(syncer) = &self.interval {
            syncer.wrote();
        }
        if self.shared.config.fsync == FsyncPolicy::Always {
            if let Err(e) = self.sync() {
                self.shared.fail(&e);
                return Err(e);
            }
            if let Some(tail) = cached_tail {
                self.cache.drop_behind(&self.active.file, end, tail);
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        let started = Instant::now();
        let path = &self.active.segment.paths.log;
        io::sync_data(
            &self.active.file,
            path,
            self.shared.log_config.faults.as_deref(),
        )?;
        record_sync(started);
        self.unsynced = false;
        Ok(())
    }

    /// Indexes the written batches, then makes them visible to readers.
    fn publish(&mut self, pending: &[Pending], group_len: u64, next_offset: u64, now: i64) {
        let mut max_ts = i64::MIN;
        {
            let mut indexes = self.active.files.indexes.write().expect("indexes");
            for (position, base, len, ts) in pending.iter().filter_map(|p| p.written) {
                self.active
                    .builder
                    .add(&mut indexes, position, base, len, ts);
                max_ts = max_ts.max(ts);
            }
        }
        self.active.size += group_len;
        self.active.next_offset = next_offset;
        self.active.first_append_time.get_or_insert(now);
        self.active
            .segment
            .publish(self.active.size, next_offset, max_ts, now);
        self.shared.publish_end(next_offset);
    }

    /// Seals the active segment and starts a new one at the next offset.
    fn roll(&mut self) -> Result<()> {
        if let Some(reason) = self.shared.failure() {
            return Err(self.shared.failed_error(&reason));
        }
        if self.active.size == 0 {
            return Ok(());
        }
        let result = self.seal_and_create();
        if let Err(e) = &result {
            self.shared.fail(e);
        }
        result
    }

    fn seal_and_create(&mut self) -> Result<()> {
        let span = tracing::info_span!(
            "segment_roll",
            topic = %self.shared.topic,
            partition = self.shared.partition,
            base_offset = self.active.segment.base_offset,
        );
        let _entered = span.enter();
        let started = std::time::Instant::now();
        // A sealed segment is durable whatever the policy: recovery trusts it.
        self.sync()?;
        let paths = self.active.segment.paths.clone();
        {
            let mut indexes = self.active.files.indexes.write().expect("indexes");
            self.active.builder.finish(&mut indexes);
            io::write_atomic(&paths.index, indexes.offsets.as_bytes())?;
            io::write_atomic(&paths.time_index, indexes.times.as_bytes())?;
        }
        let next = recovery::create_active(
            &self.shared.dir,
            self.active.next_offset,
            self.shared.log_config.index_interval_bytes,
        )?;
        self.active.segment.mark_sealed();
        tracing::info!(
            topic = %self.shared.topic,
            partition = self.shared.partition,
            sealed = self.active.segment.base_offset,
            next = next.segment.base_offset,
            bytes = self.active.size,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "rolled segment"
        );
        if let Some(syncer) = &self.interval {
            syncer.retarget(&next.file, &next.segment.paths.log)?;
        }
        self.shared.add_segment(next.segment.clone());
        let sealed = std::mem::replace(&mut self.active, next);
        let settings = self.shared.settings();
        let dropping =
            settings.fsync == FsyncPolicy::Always && settings.cached_tail_bytes.is_some();
        self.cache
            .rolled(dropping.then_some((sealed.file, sealed.size)));
        Ok(())
    }
}

/// The answer to a retry: the first append's offsets, if it really is the
/// same request.
fn duplicate_outcome(
    key: &[u8],
    prior: PriorAppend,
    request: &AppendPayload,
) -> Result<AppendOutcome> {
    let reused = |reason: String| LogError::IdempotencyKeyReused {
        key: String::from_utf8_lossy(key).into_owned(),
        reason,
    };
    if prior.record_count as usize != request.record_count() {
        return Err(reused(format!(
            "the first append had {} records, this one has {}",
            prior.record_count,
            request.record_count()
        )));
    }
    if prior.fingerprint != request.fingerprint() {
        return Err(reused("the records differ from the first append's".into()));
    }
    Ok(AppendOutcome {
        base_offset: prior.base_offset,
        record_count: prior.record_count,
        bytes: 0,
        duplicate: true,
    })
}
