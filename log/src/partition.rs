//! A partition: its ordered segments, its writer thread, and the read
//! paths (by offset, by timestamp, waiting for new data).
//!
//! Concurrency: the writer thread owns appends and rolls; retention removes
//! sealed segments; readers take a snapshot of the segment map under a
//! short read lock and then read without locks. The end offset readers may
//! see is published through a `watch` channel, which also wakes waiting
//! readers (no polling).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::{oneshot, watch, Semaphore};

use crate::batch::{
    self, BatchView, EncodedRecords, FramedBatch, NewRecord, ReadBatch, Record,
    MAX_IDEMPOTENCY_KEY_LEN,
};
use crate::cache::SegmentCache;
use crate::cleaner::CompactionOutcome;
use crate::config::{LogConfig, TopicConfig};
use crate::error::{LogError, Result};
use crate::idempotency::{fingerprint_by, fingerprint_of, IdempotencyWindow, StoredKey};
use crate::kafka_batch::KafkaRecords;
use crate::retention::{self, SegmentFacts};
use crate::segment::{self, Segment, Source};
use crate::tiered::RemotePlace;
use crate::writer::{AppendJob, Command, Writer};
use crate::{now_ms, recovery, stats};

/// Reads of a partition retried in a row when its segments changed under
/// them (a compaction swap, a retention deletion) before one gives up.
const MAX_READ_RETRIES: usize = 16;

/// Reads asking for at least this many bytes from a tiered segment start
/// the download of the next ones (`tiered::RemoteSource::prefetch`).
const PREFETCH_MIN_READ_BYTES: u64 = 64 << 10;

/// Tiered segments after the one read that such a read downloads ahead.
const PREFETCH_SEGMENTS: usize = 2;

/// One append: records plus an optional idempotency key.
#[derive(Debug, Clone, Default)]
pub struct AppendRequest {
    /// The records, at least one.
    pub records: Vec<NewRecord>,
    /// A key that makes retries of this append idempotent (1..=255 bytes).
    pub idempotency_key: Option<Vec<u8>>,
    /// The records as a Kafka producer compressed them (`records` decoded
    /// from it): stored as sent when the topic compresses with the same
    /// codec (FORMAT.md §2.10), else ignored.
    pub as_sent: Option<KafkaRecords>,
}

/// What an append carries to the writer: records it encodes, or records
/// encoded where they were made ([`Partition::submit_encoded`]).
#[derive(Debug)]
pub(crate) enum AppendPayload {
    /// An [`AppendRequest`].
    Records(AppendRequest),
    /// Records encoded already, the append's idempotency key and chain.
    Encoded {
        /// The records.
        records: EncodedRecords,
        /// As [`AppendRequest::idempotency_key`].
        idempotency_key: Option<Vec<u8>>,
        /// The chain the append belongs to, if any.
        chain: Option<AppendChain>,
    },
}

impl AppendPayload {
    /// The append's idempotency key.
    pub(crate) fn idempotency_key(&self) -> Option<&[u8]> {
        match self {
            AppendPayload::Records(request) => request.idempotency_key.as_deref(),
            AppendPayload::Encoded {
                idempotency_key, ..
            } => idempotency_key.as_deref(),
        }
    }

    /// The chain the append belongs to.
    pub(crate) fn chain(&self) -> Option<&AppendChain> {
        match self {
            AppendPayload::Records(_) => None,
            AppendPayload::Encoded { chain, .. } => chain.as_ref(),
        }
    }

    /// Records appended.
    pub(crate) fn record_count(&self) -> usize {
        match self {
            AppendPayload::Records(request) => request.records.len(),
            AppendPayload::Encoded { records, .. } => records.len(),
        }
    }

    /// Appends the batch of these records to `out` (before any
    /// compression) and returns its length.
    pub(crate) fn encode(&self, out: &mut Vec<u8>, meta: batch::BatchMeta<'_>) -> usize {
        match self {
            AppendPayload::Records(request) => batch::encode(out, meta, &request.records),
            AppendPayload::Encoded { records, .. } => records.encode(out, meta),
        }
    }

    /// [`crate::idempotency::fingerprint_encoded`] of these records.
    pub(crate) fn fingerprint(&self) -> u64 {
        match self {
            AppendPayload::Records(request) => fingerprint_of(&request.records),
            AppendPayload::Encoded { records, .. } => fingerprint_by(|out, meta| {
                records.encode(out, meta);
            }),
        }
    }

    /// The records as a Kafka producer compressed them, if it did.
    pub(crate) fn as_sent(&self) -> Option<&KafkaRecords> {
        match self {
            AppendPayload::Records(request) => request.as_sent.as_ref(),
            AppendPayload::Encoded { .. } => None,
        }
    }
}

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Number of records.
    pub record_count: u32,
    /// Bytes written (0 for a duplicate).
    pub bytes: u64,
    /// True if the idempotency key matched an earlier append and nothing
    /// was written.
    pub duplicate: bool,
}

/// Records read from a partition: whole batches checked ([`BatchView`]),
/// or, from [`Partition::read_framed`], checked by their frame only
/// ([`FramedBatch`]).
///
/// Every batch holds records of `[offset, next_offset)`: the first may
/// start before `offset` and the last end after `next_offset` (a fetch
/// that stopped inside it), but none starts at or after `next_offset`, and
/// none ends after `high_watermark` — whatever is appended while the read
/// runs.
#[derive(Debug, Clone)]
pub struct Fetch<B = BatchView> {
    /// The batches read; the first may start before `offset`.
    pub batches: Vec<B>,
    /// The requested offset.
    pub offset: u64,
    /// Offset after the last record returned (where to read next).
    pub next_offset: u64,
    /// End offset of the partition when read (the high watermark).
    pub high_watermark: u64,
    /// First offset still stored.
    pub start_offset: u64,
}

impl Fetch<BatchView> {
    /// The records in `[offset, next_offset)`.
    pub fn records(&self) -> impl Iterator<Item = Record> + '_ {
        let (from, to) = (self.offset, self.next_offset);
        self.batches
            .iter()
            .flat_map(|b| b.records())
            .skip_while(move |r| r.offset < from)
            .take_while(move |r| r.offset < to)
    }
}

impl<B> Fetch<B> {
    /// Number of records in `[offset, next_offset)`.
    pub fn record_count(&self) -> u64 {
        self.next_offset - self.offset
    }
}

/// Offsets and sizes of a partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PartitionDescription {
    /// Partition number.
    pub partition: u32,
    /// First stored offset.
    pub start_offset: u64,
    /// Offset the next record gets (the high watermark).
    pub end_offset: u64,
    /// Bytes of all segments.
    pub bytes: u64,
    /// Number of segments.
    pub segment_count: usize,
    /// Bytes of the segments in tiered storage (counted in `bytes` too).
    pub remote_bytes: u64,
}

/// State shared by the partition handle, its writer thread and readers.
#[derive(Debug)]
pub struct PartitionShared {
    /// Topic name.
    pub topic: String,
    /// Partition number.
    pub partition: u32,
    /// Directory holding the segments.
    pub dir: PathBuf,
    /// The topic's settings when the partition opened (what can change
    /// lives in `settings`).
    pub config: TopicConfig,
    /// The topic's settings as now set ([`Partition::set_settings`]):
    /// retention, compression and compaction apply from them.
    settings: Mutex<TopicConfig>,
    /// The log's settings.
    pub log_config: Arc<LogConfig>,
    segments: RwLock<BTreeMap<u64, Arc<Segment>>>,
    start_offset: AtomicU64,
    end: watch::Sender<u64>,
    failure: Mutex<Option<String>>,
    pub(crate) cache: Arc<SegmentCache>,
    /// Recent idempotency keys; the writer updates it under this lock.
    pub idempotency: Mutex<IdempotencyWindow>,
    /// Where its tiered segments go, if the log has a tiered store.
    pub(crate) remote: Option<RemotePlace>,
}

impl PartitionShared {
    /// The topic's settings as now set.
    pub fn settings(&self) -> TopicConfig {
        self.settings.lock().expect("settings").clone()
    }
    /// Why the partition stopped accepting writes, if it did.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().expect("failure").clone()
    }

    /// Stops the partition for writes because of `error`.
    pub fn fail(&self, error: &LogError) {
        let mut failure = self.failure.lock().expect("failure");
        if failure.is_none() {
            tracing::error!(topic = %self.topic, partition = self.partition, %error, "partition stops accepting writes");
            stats::global()
                .partitions_failed
                .fetch_add(1, Ordering::Relaxed);
            *failure = Some(error.to_string());
        }
    }

    /// The error appends get once the partition failed.
    pub fn failed_error(&self, reason: &str) -> LogError {
        LogError::PartitionFailed {
            topic: self.topic.clone(),
            partition: self.partition,
            reason: reason.to_string(),
        }
    }

    /// `PartitionFailed` if the partition failed, else a copy of `error`.
    pub fn failed_or(&self, error: &LogError) -> LogError {
        match self.failure() {
            Some(reason) => self.failed_error(&reason),
            None => match error {
                LogError::Io { path, source } => {
                    LogError::io(path, std::io::Error::new(source.kind(), source.to_string()))
                }
                other => LogError::InvalidArgument(other.to_string()),
            },
        }
    }

    /// Makes offsets below `end` visible and wakes waiting readers.
    pub fn publish_end(&self, end: u64) {
        self.end.send_replace(end);
    }

    /// Adds a newly created active segment.
    pub fn add_segment(&self, segment: Arc<Segment>) {
        self.segments
            .write()
            .expect("segments")
            .insert(segment.base_offset, segment);
    }

    /// The segments, oldest first (the last is the active one).
    pub(crate) fn snapshot(&self) -> Vec<Arc<Segment>> {
        self.segments
            .read()
            .expect("segments")
            .values()
            .cloned()
            .collect()
    }

    /// Puts `new` in the place of the consecutive sealed segments `old`
    /// (the cleaner's swap): marks them deleted (a reader that meets one
    /// reads again from a new snapshot), closes them, runs `files` (which
    /// makes `new`'s files the ones on disk) and then changes the segment
    /// map, all under the map's lock so no reader sees the files change
    /// under a segment it just listed.
    pub(crate) fn replace_segments(
        &self,
        old: &[Arc<Segment>],
        new: Arc<Segment>,
        files: impl FnOnce(&Arc<Segment>) -> Result<()>,
    ) -> Result<()> {
        let mut map = self.segments.write().expect("segments");
        for s in old {
            s.deleted.store(true, Ordering::Release);
            self.cache.remove(s);
        }
        files(&new)?;
        for s in old {
            map.remove(&s.base_offset);
        }
        map.insert(new.base_offset, new);
        Ok(())
    }

    /// The read source of `segment`, or `None` if it was replaced or
    /// deleted (then its files may be another segment's: read again).
    pub(crate) fn source_unless_replaced(&self, segment: &Arc<Segment>) -> Result<Option<Source>> {
        let source = self.cache.source(segment);
        if segment.deleted.load(Ordering::Acquire) {
            return Ok(None);
        }
        source.map(Some)
    }

    /// Reads the append time of a sealed segment's last batch (from its
    /// last offset index entry: a compacted segment's last offsets may be
    /// gone).
    pub(crate) fn learn_append_time(&self, segment: &Arc<Segment>) -> Result<i64> {
        let source = self.cache.source(segment)?;
        let (from, _) = source.floor(segment.base_offset, segment.end_offset() - 1);
        let read = segment::read_batches::<BatchView>(segment, &source, from, u64::MAX, u64::MAX)?;
        let t = read
            .batches
            .iter()
            .map(|b| b.append_time())
            .max()
            .unwrap_or(i64::MIN);
        segment.set_max_append_time(t);
        Ok(t)
    }
}

/// A partition handle: appends go to its writer thread, reads run on the
/// caller's thread.
#[derive(Debug)]
pub struct Partition {
    shared: Arc<PartitionShared>,
    sender: Mutex<Option<mpsc::Sender<Command>>>,
    queue: Arc<Semaphore>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// The earliest stored offset and its batch's append time, as last
    /// read by [`Partition::earliest_append_time`].
    earliest_append: Mutex<Option<(u64, i64)>>,
}

impl Partition {
    /// Opens (recovering) the partition in `dir` and starts its writer.
    pub fn open(
        topic: &str,
        partition: u32,
        dir: PathBuf,
        config: TopicConfig,
        log_config: Arc<LogConfig>,
        cache: Arc<SegmentCache>,
        remote: Option<RemotePlace>,
    ) -> Result<Partition> {
        let span = tracing::info_span!("recovery", topic, partition);
        let _entered = span.enter();
        let started = std::time::Instant::now();
        let recovered = recovery::recover(&dir, log_config.index_interval_bytes, remote.as_ref())?;
        let start = *recovered
            .segments
            .keys()
            .next()
            .expect("at least one segment");
        let end = recovered.active.next_offset;
        // Later appends (in any partition) get this time or later.
        if let Some(t) = recovered
            .segments
            .values()
            .rev()
            .find_map(|s| s.known_max_append_time())
        {
            log_config.clock.observe(t);
        }
        let shared = Arc::new(PartitionShared {
            topic: topic.to_string(),
            partition,
            dir,
            settings: Mutex::new(config.clone()),
            config,
            log_config: log_config.clone(),
            segments: RwLock::new(recovered.segments),
            start_offset: AtomicU64::new(start),
            end: watch::Sender::new(end),
            failure: Mutex::new(None),
            cache,
            idempotency: Mutex::new(IdempotencyWindow::new(0, 0)),
            remote,
        });
        *shared.idempotency.lock().expect("idempotency") = recover_window(&shared, recovered.keys)?;
        tracing::debug!(
            segments = shared.snapshot().len(),
            active_base_offset = recovered.active.segment.base_offset,
            bytes = recovered.active.size,
            start_offset = start,
            end_offset = end,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "recovered partition"
        );
        let (tx, rx) = mpsc::channel();
        let writer = Writer::new(shared.clone(), rx, recovered.active)?;
        let thread = std::thread::Builder::new()
            .name(format!("kappa-writer-{topic}-{partition}"))
            .spawn(move || writer.run())
            .map_err(|e| LogError::io(&shared.dir, e))?;
        Ok(Partition {
            shared,
            sender: Mutex::new(Some(tx)),
            queue: Arc::new(Semaphore::new(log_config.append_queue_bytes)),
            thread: Mutex::new(Some(thread)),
            earliest_append: Mutex::new(None),
        })
    }

    /// Partition number.
    pub fn id(&self) -> u32 {
        self.shared.partition
    }

    /// Checks an append against the log's limits; its encoded length.
    fn validate(&self, payload: &AppendPayload) -> Result<usize> {
        let bad = |m: String| Err(LogError::InvalidArgument(m));
        let (unkeyed, len) = match payload {
            AppendPayload::Records(request) => {
                for r in &request.records {
                    if r.headers.len() > u16::MAX as usize {
                        return bad(format!(
                            "a record has {} headers, at most {} fit",
                            r.headers.len(),
                            u16::MAX
                        ));
                    }
                    if r.headers.iter().any(|h| h.name.len() > u16::MAX as usize) {
                        return bad("a header name is longer than 65535 bytes".into());
                    }
                }
                let unkeyed = request.records.iter().filter(|r| r.key.is_none()).count();
                let key = request.idempotency_key.as_deref();
                (unkeyed, batch::encoded_len(&request.records, key))
            }
            AppendPayload::Encoded {
                records,
                idempotency_key,
                ..
            } => (
                records.unkeyed(),
                records.batch_len(idempotency_key.as_deref()),
            ),
        };
        let cfg = &self.shared.log_config;
        let count = payload.record_count();
        if count == 0 {
            return bad("an append needs at least one record".into());
        }
        if count > cfg.max_batch_records {
            return Err(LogError::LimitExceeded(format!(
                "{count} records in one append, the limit is {}",
                cfg.max_batch_records
            )));
        }
        if let Some(key) = payload.idempotency_key() {
            if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY_LEN {
                return bad(format!(
                    "idempotency key must be 1..={MAX_IDEMPOTENCY_KEY_LEN} bytes"
                ));
            }
        }
        if unkeyed > 0 && self.shared.settings().cleanup_policy.compacts() {
            return Err(LogError::KeyRequired {
                topic: self.shared.topic.clone(),
                policy: self.shared.settings().cleanup_policy.to_string(),
            });
        }
        if len > cfg.max_batch_bytes {
            return Err(LogError::LimitExceeded(format!(
                "append of {len} bytes, the limit is {} (max_batch_bytes)",
                cfg.max_batch_bytes
            )));
        }
        Ok(len)
    }

    /// Queues an append and returns a handle to await its outcome. Waits up
    /// to `append_queue_wait_ms` for queue space, then fails with
    /// `Backpressure`.
    pub async fn submit(&self, request: AppendRequest) -> Result<PendingAppend> {
        self.reserve(request).await?.send()
    }

    /// Checks an append (limits, a stopped partition) and takes its queue
    /// space without sending it to the writer: nothing can be written until
    /// [`ReservedAppend::send`], and dropping the reservation gives the space
    /// back. Waits up to `append_queue_wait_ms`, then fails with
    /// `Backpressure`. A multi-partition produce reserves every partition
    /// before sending any, so a refusal leaves every partition untouched.
    pub async fn reserve(&self, request: AppendRequest) -> Result<ReservedAppend<'_>> {
        self.reserve_payload(AppendPayload::Records(request)).await
    }

    /// Queues an append of records encoded where they were made
    /// ([`EncodedRecords`]), as [`Partition::submit`] queues one: the
    /// writer writes their bytes as the batch. In `chain`, it is written
    /// only if every append of the chain queued before it was.
    pub async fn submit_encoded(
        &self,
        records: EncodedRecords,
        idempotency_key: Option<Vec<u8>>,
        chain: Option<&AppendChain>,
    ) -> Result<PendingAppend> {
        let payload = AppendPayload::Encoded {
            records,
            idempotency_key,
            chain: chain.cloned(),
        };
        self.reserve_payload(payload).await?.send()
    }

    /// [`Partition::reserve`] of either kind of append.
    async fn reserve_payload(&self, request: AppendPayload) -> Result<ReservedAppend<'_>> {
        let encoded_len = self.validate(&request)?;
        if let Some(reason) = self.shared.failure() {
            return Err(self.shared.failed_error(&reason));
        }
        let wait = Duration::from_millis(self.shared.log_config.append_queue_wait_ms);
        let permit = match tokio::time::timeout(
            wait,
            self.queue.clone().acquire_many_owned(encoded_len as u32),
        )
        .await
        {
            Ok(Ok(permit)) => permit,
            Ok(Err(_)) => return Err(LogError::Closed),
            Err(_) => {
                return Err(LogError::Backpressure {
                    topic: self.shared.topic.clone(),
                    partition: self.shared.partition,
                })
            }
        };
        Ok(ReservedAppend {
            partition: self,
            request,
            encoded_len,
            permit,
        })
    }

    /// Appends and waits until the fsync policy is met.
    pub async fn append(&self, request: AppendRequest) -> Result<AppendOutcome> {
        self.submit(request).await?.wait().await
    }

    /// Seals the active segment now, if it holds data.
    pub async fn roll(&self) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        {
            let sender = self.sender.lock().expect("sender");
            sender
                .as_ref()
                .ok_or(LogError::Closed)?
                .send(Command::Roll(reply))
                .map_err(|_| LogError::Closed)?;
        }
        rx.await.map_err(|_| LogError::Closed)?
    }

    /// First stored offset.
    pub fn start_offset(&self) -> u64 {
        self.shared.start_offset.load(Ordering::Acquire)
    }

    /// Offset the next record gets; readers see everything below it.
    pub fn end_offset(&self) -> u64 {
        *self.shared.end.borrow()
    }

    /// Why the partition stopped accepting writes, if it did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// True if an append with this idempotency key is in the window.
    pub fn remembers_idempotency_key(&self, key: &[u8]) -> bool {
        self.shared
            .idempotency
            .lock()
            .expect("idempotency")
            .contains(key, now_ms())
    }

    /// When the batch holding the earliest stored record was appended (ms);
    /// `None` for an empty partition. Read once per earliest offset (a
    /// read checks the whole batch, a CRC over up to megabytes), then
    /// remembered: status pages ask for it at every refresh.
    pub fn earliest_append_time(&self) -> Result<Option<i64>> {
        let start = self.start_offset();
        let mut known = self.earliest_append.lock().expect("earliest append");
        if let Some((offset, time)) = *known {
            if offset == start {
                return Ok(Some(time));
            }
        }
        let time = self
            .read(start, 1, 1)?
            .batches
            .first()
            .map(|b| b.append_time());
        *known = time.map(|t| (start, t));
        Ok(time)
    }

    /// Reads records from `offset`, at most `max_records` and about
    /// `max_bytes` (whole batches; at least one record if any is there).
    pub fn read(&self, offset: u64, max_records: u64, max_bytes: u64) -> Result<Fetch> {
        self.read_as(offset, max_records, max_bytes)
    }

    /// [`Partition::read`], each batch checked by its frame only: its
    /// length, offsets, magic byte, version and reserved fields, not its
    /// CRC and records. For a reader that checks the batches on other
    /// threads ([`FramedBatch::check`]): damage only those checks find is
    /// not reported here, and the batches after it may be handed out. The
    /// reader must not use a batch past one that fails its check; a
    /// [`Partition::read`] at that batch's first offset reports the damage.
    pub fn read_framed(
        &self,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<Fetch<FramedBatch>> {
        self.read_as(offset, max_records, max_bytes)
    }

    fn read_as<B: ReadBatch>(
        &self,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<Fetch<B>> {
        self.retrying("reads", || self.read_once(offset, max_records, max_bytes))
    }

    /// Runs `attempt` until it answers: `None` means a segment it listed
    /// was replaced (compaction, tiering) or deleted (retention) under it,
    /// so it runs again over the new segments — each retry follows a swap
    /// that finished — at most [`MAX_READ_RETRIES`] times in a row.
    fn retrying<T>(&self, what: &str, mut attempt: impl FnMut() -> Result<Option<T>>) -> Result<T> {
        for _ in 0..=MAX_READ_RETRIES {
            if let Some(answer) = attempt()? {
                return Ok(answer);
            }
        }
        Err(LogError::InvalidArgument(format!(
            "topic {:?} partition {}: the segments changed under {MAX_READ_RETRIES} {what} in a row; try again",
            self.shared.topic, self.shared.partition
        )))
    }

    /// One attempt of [`Partition::read_as`]: `None` if a segment it
    /// listed was replaced or deleted before its files were opened.
    fn read_once<B: ReadBatch>(
        &self,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<Option<Fetch<B>>> {
        let end = self.end_offset();
        let start = self.start_offset();
        if offset < start || offset > end {
            return Err(self.out_of_range(offset, start, end));
        }
        let mut fetch = Fetch {
            batches: Vec::new(),
            offset,
            next_offset: offset,
            high_watermark: end,
            start_offset: start,
        };
        if offset == end || max_records == 0 {
            return Ok(Some(fetch));
        }
        crate::io::read_gate(self.shared.log_config.faults.as_deref());
        let segments = self.shared.snapshot();
        let first = segments
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        let mut bytes = 0u64;
        let mut cursor = offset;
        for (i, segment) in segments.iter().enumerate().skip(first) {
            if cursor >= end || bytes >= max_bytes || cursor - offset >= max_records {
                break;
            }
            if segment.end_offset() <= cursor {
                continue;
            }
            let Some(source) = self
                .shared
                .source_unless_replaced(segment)
                .map_err(|e| self.deleted_or(e, offset))?
            else {
                return Ok(None);
            };
            // A reader going through tiered segments (a replay: more
            // than a record or two at a time) goes on to the next one.
            if max_bytes >= PREFETCH_MIN_READ_BYTES {
                for next in segments.iter().skip(i + 1).take(PREFETCH_SEGMENTS) {
                    if let Some(remote) = next.remote() {
                        remote.prefetch();
                    }
                }
            }
            // Not past `end`: appends published since it was read are in
            // the segments already, but not in this fetch (its
            // `next_offset` and `high_watermark` stop at `end`).
            let until = offset.saturating_add(max_records).min(end);
            let read = match segment::read_batches::<B>(
                segment,
                &source,
                cursor,
                until,
                max_bytes - bytes,
            ) {
                Ok(read) => read,
                // Damage in a later segment: hand out what came before it.
                Err(LogError::Damaged { .. }) if !fetch.batches.is_empty() => break,
                Err(e) => return Err(e.in_partition(&self.shared.topic, self.shared.partition)),
            };
            bytes += read.bytes;
            match read.batches.last() {
                Some(last) => cursor = last.next_offset(),
                // The rest of the segment was compacted away.
                None => cursor = segment.end_offset(),
            }
            fetch.batches.extend(read.batches);
            if cursor < segment.end_offset() {
                // The read stopped inside this segment (a limit, or damage
                // the next read will report): the next segment must wait.
                break;
            }
        }
        fetch.next_offset = cursor.min(offset.saturating_add(max_records)).min(end);
        Ok(Some(fetch))
    }

    fn out_of_range(&self, offset: u64, start: u64, end: u64) -> LogError {
        LogError::OffsetOutOfRange {
            topic: self.shared.topic.clone(),
            partition: self.shared.partition,
            offset,
            start,
            end,
        }
    }

    /// A read that raced with retention reports the offset as out of range.
    fn deleted_or(&self, error: LogError, offset: u64) -> LogError {
        if offset < self.start_offset() {
            self.out_of_range(offset, self.start_offset(), self.end_offset())
        } else {
            error
        }
    }

    /// Waits until the end offset is beyond `offset` or `timeout` passes;
    /// returns the end offset then. No polling: the writer's publish wakes it.
    pub async fn wait_for(&self, offset: u64, timeout: Duration) -> Result<u64> {
        let mut rx = self.shared.end.subscribe();
        let waited = tokio::time::timeout(timeout, rx.wait_for(|end| *end > offset)).await;
        match waited {
            Ok(Ok(end)) => Ok(*end),
            Ok(Err(_)) => Err(LogError::Closed),
            Err(_) => Ok(self.end_offset()),
        }
    }

    /// The first offset whose record timestamp is at or after `timestamp`
    /// (the end offset if there is none).
    pub fn offset_for_timestamp(&self, timestamp: i64) -> Result<u64> {
        self.retrying("lookups", || self.offset_for_timestamp_once(timestamp))
    }

    /// One attempt of [`Partition::offset_for_timestamp`]: `None` if a
    /// segment it listed was replaced or deleted under it.
    fn offset_for_timestamp_once(&self, timestamp: i64) -> Result<Option<u64>> {
        let end = self.end_offset();
        for segment in self.shared.snapshot() {
            if segment.end_offset() <= self.start_offset().max(segment.base_offset) {
                continue;
            }
            let Some(source) = self.shared.source_unless_replaced(&segment)? else {
                return Ok(None);
            };
            if segment.max_timestamp().is_some_and(|max| max < timestamp) {
                continue;
            }
            let from = source
                .time_floor(segment.base_offset, timestamp)
                .unwrap_or(segment.base_offset);
            let mut cursor = from;
            while cursor < segment.end_offset().min(end) {
                let read = match segment::read_batches::<BatchView>(
                    &segment,
                    &source,
                    cursor,
                    u64::MAX,
                    1 << 20,
                ) {
                    Ok(read) => read,
                    // Damaged records have no timestamp to match: look after them.
                    Err(LogError::Damaged { next_offset, .. }) if next_offset > cursor => {
                        cursor = next_offset;
                        continue;
                    }
                    Err(e) => return Err(e.in_partition(&self.shared.topic, self.shared.partition)),
                };
                for batch in &read.batches {
                    if batch.max_timestamp() >= timestamp {
                        if let Some(r) = batch
                            .records()
                            .find(|r| r.offset >= cursor && r.timestamp >= timestamp)
                        {
                            return Ok(Some(r.offset));
                        }
                    }
                    cursor = batch.next_offset();
                }
                if read.batches.is_empty() {
                    break;
                }
            }
        }
        Ok(Some(end))
    }

    /// Offsets and sizes.
    pub fn describe(&self) -> PartitionDescription {
        let segments = self.shared.snapshot();
        PartitionDescription {
            partition: self.shared.partition,
            start_offset: self.start_offset(),
            end_offset: self.end_offset(),
            bytes: segments.iter().map(|s| s.readable_bytes()).sum(),
            segment_count: segments.len(),
            remote_bytes: segments
                .iter()
                .filter(|s| s.is_remote())
                .map(|s| s.readable_bytes())
                .sum(),
        }
    }

    /// Retention by age and by size, as now applied: none when the topic's
    /// cleanup policy does not delete.
    pub fn retention(&self) -> (Option<u64>, Option<u64>) {
        let settings = self.shared.settings();
        if settings.cleanup_policy.deletes() {
            (settings.retention_ms, settings.retention_bytes)
        } else {
            (None, None)
        }
    }

    /// Changes the settings that may change ([`crate::TopicChanges`]):
    /// batches appended from now on are stored as its compression says,
    /// and the next retention and compaction passes apply the rest.
    pub fn set_settings(&self, settings: &TopicConfig) {
        *self.shared.settings.lock().expect("settings") = settings.clone();
    }

    /// Deletes the sealed segments retention says to delete at `now_ms`;
    /// returns how many it deleted.
    pub fn apply_retention(&self, now_ms: i64) -> Result<usize> {
        let (retention_ms, retention_bytes) = self.retention();
        if retention_ms.is_none() && retention_bytes.is_none() {
            return Ok(0);
        }
        let segments = self.shared.snapshot();
        let (active, sealed) = segments.split_last().expect("an active segment");
        let horizon = retention_ms.map(|ms| now_ms.saturating_sub(ms.min(i64::MAX as u64) as i64));
        // Append times are only needed for the expired prefix: stop learning
        // them (a read of each segment's last batch) at the first young one.
        let mut in_expired_prefix = horizon.is_some();
        let mut facts = Vec::with_capacity(sealed.len());
        for s in sealed {
            let t = match s.known_max_append_time() {
                Some(t) => t,
                None if in_expired_prefix => self.shared.learn_append_time(s)?,
                None => i64::MAX,
            };
            if horizon.is_some_and(|h| t >= h) {
                in_expired_prefix = false;
            }
            facts.push(SegmentFacts {
                bytes: s.readable_bytes(),
                max_append_time: t,
            });
        }
        let n = retention::segments_to_delete(
            &facts,
            active.readable_bytes(),
            retention_ms,
            retention_bytes,
            now_ms,
        );
        if n == 0 {
            return Ok(0);
        }
        let doomed: Vec<Arc<Segment>> = sealed[..n].to_vec();
        let remote = crate::tiered::forget_remote(&self.shared, &doomed)?;
        {
            let mut map = self.shared.segments.write().expect("segments");
            for s in &doomed {
                map.remove(&s.base_offset);
            }
            let new_start = *map.keys().next().expect("the active segment stays");
            self.shared.start_offset.store(new_start, Ordering::Release);
        }
        for s in &doomed {
            s.deleted.store(true, Ordering::Release);
            self.shared.cache.remove(s);
            for path in [&s.paths.log, &s.paths.index, &s.paths.time_index] {
                match std::fs::remove_file(path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(LogError::io(path, e)),
                }
            }
            tracing::info!(topic = %self.shared.topic, partition = self.shared.partition, segment = s.base_offset, "retention deleted segment");
        }
        for (place, base) in remote {
            place.delete(base);
        }
        stats::global()
            .segments_deleted
            .fetch_add(n as u64, Ordering::Relaxed);
        crate::io::sync_dir(&self.shared.dir)?;
        Ok(n)
    }

    /// Moves the sealed segments past the topic's local retention to
    /// tiered storage (`tiered.rs`) as of `now_ms`; returns how many.
    pub fn tier(&self, now_ms: i64) -> Result<usize> {
        crate::tiered::tier_partition(&self.shared, now_ms)
    }

    /// Refuses `settings` if they ask for tiering the log cannot do.
    pub(crate) fn check_tiering(&self, settings: &TopicConfig) -> Result<()> {
        crate::tiered::check_tiering(settings, &self.shared.log_config)
    }

    /// Deletes the objects of the partition's tiered segments (its topic
    /// is being deleted); failures are logged.
    pub(crate) fn delete_remote(&self) {
        for s in self.shared.snapshot() {
            if let Some(remote) = s.remote() {
                remote.place().delete(s.base_offset);
            }
        }
    }

    /// Runs one compaction pass (`cleaner.rs`) as of `now_ms`; nothing
    /// unless the topic's cleanup policy compacts.
    pub fn compact(&self, now_ms: i64) -> Result<CompactionOutcome> {
        crate::cleaner::clean_partition(&self.shared, now_ms)
    }

    /// Stops the writer (syncing unsynced data) and waits for it.
    pub fn close(&self) {
        self.sender.lock().expect("sender").take();
        self.queue.close();
        if let Some(thread) = self.thread.lock().expect("thread").take() {
            let _ = thread.join();
        }
        for segment in self.shared.snapshot() {
            self.shared.cache.remove(&segment);
        }
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.close();
    }
}

/// An append that passed its checks and holds its queue space, not yet
/// sent to the writer (see [`Partition::reserve`]).
#[derive(Debug)]
pub struct ReservedAppend<'a> {
    partition: &'a Partition,
    request: AppendPayload,
    encoded_len: usize,
    permit: tokio::sync::OwnedSemaphorePermit,
}

impl ReservedAppend<'_> {
    /// Sends the append to the writer (fails only if the partition is
    /// closed, and then nothing is written).
    pub fn send(self) -> Result<PendingAppend> {
        let (reply, rx) = oneshot::channel();
        let job = AppendJob {
            request: self.request,
            encoded_len: self.encoded_len,
            reply,
            permit: self.permit,
        };
        let sender = self.partition.sender.lock().expect("sender");
        sender
            .as_ref()
            .ok_or(LogError::Closed)?
            .send(Command::Append(job))
            .map_err(|_| LogError::Closed)?;
        Ok(PendingAppend { rx })
    }
}

/// Appends to one partition that land only as a prefix of the order they
/// were queued in ([`Partition::submit_encoded`]): once one of them fails,
/// or the chain is stopped, the writer refuses every later one unwritten
/// ([`LogError::ChainBroken`]). A sender can so keep several appends in
/// flight and still never have one land after one that did not. Clones
/// are the same chain.
#[derive(Debug, Clone, Default)]
pub struct AppendChain {
    /// Set once an append of the chain failed or the chain was stopped;
    /// never cleared. The partition's writer reads it before each append
    /// of the chain, in queue order.
    broken: Arc<AtomicBool>,
}

impl AppendChain {
    /// A new chain, nothing refused.
    pub fn new() -> AppendChain {
        AppendChain::default()
    }

    /// Refuses every append of the chain the writer has not begun to
    /// write: a sender giving up on its appends in flight.
    pub fn stop(&self) {
        self.broken.store(true, Ordering::SeqCst);
    }

    /// True once an append of the chain failed or it was stopped.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Ordering::SeqCst)
    }
}

/// An append in the writer's queue.
#[derive(Debug)]
pub struct PendingAppend {
    rx: oneshot::Receiver<Result<AppendOutcome>>,
}

impl PendingAppend {
    /// Waits for the outcome.
    pub async fn wait(self) -> Result<AppendOutcome> {
        self.rx.await.map_err(|_| LogError::Closed)?
    }

    /// The outcome if the writer has answered, without waiting: `None`
    /// while the append is still being written (or synced).
    pub fn try_outcome(&mut self) -> Option<Result<AppendOutcome>> {
        match self.rx.try_recv() {
            Ok(outcome) => Some(outcome),
            Err(oneshot::error::TryRecvError::Empty) => None,
            Err(oneshot::error::TryRecvError::Closed) => Some(Err(LogError::Closed)),
        }
    }
}

/// Rebuilds the idempotency window: keys from the active segment, then
/// from older segments (newest first) until the window's count is reached
/// or a segment is older than its age bound.
fn recover_window(
    shared: &PartitionShared,
    active_keys: Vec<StoredKey>,
) -> Result<IdempotencyWindow> {
    let cfg = &shared.log_config;
    let mut window = IdempotencyWindow::new(cfg.idempotency_window_keys, cfg.idempotency_window_ms);
    let horizon = now_ms().saturating_sub(cfg.idempotency_window_ms as i64);
    let mut chunks = vec![active_keys];
    let mut found: usize = chunks[0].len();
    let segments = shared.snapshot();
    for segment in segments.iter().rev().skip(1) {
        if found >= cfg.idempotency_window_keys {
            break;
        }
        if segment.is_remote() {
            // Tiered: older than any local segment, not read at open.
            break;
        }
        let bytes = segment::map_file(&segment.paths.log)?;
        let scanned = segment::scan_keys(&bytes, segment.base_offset);
        if let Some((position, problem)) = &scanned.problem {
            tracing::error!(
                segment = %segment.paths.log.display(),
                position,
                %problem,
                "corrupt batch in a sealed segment: idempotency keys after it are not recovered"
            );
            stats::global()
                .corruptions_detected
                .fetch_add(1, Ordering::Relaxed);
        }
        segment.set_max_append_time(scanned.last_append_time);
        found += scanned.keys.len();
        chunks.push(scanned.keys);
        if scanned.last_append_time < horizon {
            break;
        }
    }
    for stored in chunks.into_iter().rev().flatten() {
        window.insert(stored.key, stored.prior);
    }
    Ok(window)
}
