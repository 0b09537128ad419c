//! A Kafka cluster as a view's source ([`kappa_processor::source::Source`]):
//! a librdkafka consumer per input topic, assigned the partitions at the
//! offsets the view committed (never a consumer group, never a commit to
//! the cluster: the view's offsets live in its own state, in the same
//! RocksDB write as the state they produced, so the view is exactly-once
//! without Kafka transactions).
//!
//! Each record fetched becomes a record of a batch in the built-in log's
//! format (`kappa_log::batch`), its Kafka offset as its offset and its
//! timestamp as its record timestamp. A batch holds consecutive offsets of
//! one *ordering time*: the largest timestamp of its partition so far
//! (timestamps a producer set may go back; the ordering time never does),
//! which is the batch's append time, by which the view merges its
//! partitions.
//!
//! **Completeness per partition** ([`SourceTopic::bound`]): a record of
//! one partition is processed before another partition's next record only
//! once that partition can no longer get a record at or before it:
//! - the partition has records fetched: their ordering time bounds it;
//! - the topic's timestamps are the broker's (`LogAppendTime`): a record
//!   appended from now on gets at least the newest timestamp fetched from
//!   any partition, so everything before that is complete;
//! - otherwise (`CreateTime`), or with several brokers whose clocks
//!   differ: once the partition has been at its end for
//!   [`ClusterConfig::max_task_idle_ms`] (Kafka Streams'
//!   `max.task.idle.ms`). Only this case depends on timing: a replay
//!   reproduces the live run unless a record arrived in a partition after
//!   that wait ended with an older timestamp than records already
//!   processed from other partitions (docs/clusters.md).

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use kappa_log::batch::{self, BatchMeta, FramedBatch, Header, NewRecord};
use kappa_processor::error::{ProcessorError, Result};
use kappa_processor::source::{PartitionOffsets, Source, SourceFetch, SourceTopic};
use kappa_processor::stop::StopSignal;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Headers, Message};
use rdkafka::ClientContext;
use rdkafka::{Offset, Timestamp, TopicPartitionList};

use crate::{client_config, ClusterConfig};

/// How long a metadata or offsets request to the cluster may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a cluster that did not answer a metadata request is taken as
/// unreachable without asking again.
const UNREACHABLE_FOR: Duration = Duration::from_secs(5);

/// How long a topic's offsets asked for stay the answer.
const OFFSETS_CACHE: Duration = Duration::from_secs(2);

/// How long an end offset asked for stays the answer.
const END_CACHE: Duration = Duration::from_secs(1);

/// Longest wait for a partition's end offset.
const END_TIMEOUT: Duration = Duration::from_millis(500);

/// Most records taken from the consumer's queue in one pump.
const PUMP_MAX: usize = 100_000;

/// What a cluster answered for a topic's offsets, or why it did not.
type OffsetsAnswer = std::result::Result<Vec<PartitionOffsets>, String>;

/// A configured cluster as a source of views.
pub struct ClusterSource {
    name: String,
    config: ClusterConfig,
    /// The client that answers [`Source::topic_offsets`], made at first use.
    admin: Mutex<Option<BaseConsumer>>,
    /// Each topic's last answer and when it came: reused for
    /// [`OFFSETS_CACHE`] (a failure too, so a cluster that does not answer
    /// delays one caller, not every one).
    offsets: Mutex<HashMap<String, (Instant, OffsetsAnswer)>>,
    /// When a metadata request last went unanswered, and why: for
    /// [`UNREACHABLE_FOR`] the cluster is taken as unreachable without
    /// asking again.
    unreachable: Mutex<Option<(Instant, String)>>,
}

impl std::fmt::Debug for ClusterSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterSource")
            .field("name", &self.name)
            .field("bootstrap_servers", &self.config.bootstrap_servers)
            .finish()
    }
}

impl ClusterSource {
    /// The cluster `name` with its settings.
    pub fn shared(name: &str, config: ClusterConfig) -> Arc<dyn Source> {
        Arc::new(ClusterSource {
            name: name.to_string(),
            config,
            admin: Mutex::new(None),
            offsets: Mutex::new(HashMap::new()),
            unreachable: Mutex::new(None),
        })
    }

    /// A consumer of the cluster, reading `topic` when it is assigned (no
    /// group: it never commits to the cluster). Only a context that takes
    /// librdkafka's statistics (`Health`) is sent them: the default one
    /// logs each at INFO.
    fn consumer<C: ConsumerContext>(
        &self,
        topic: &str,
        context: C,
        statistics: bool,
    ) -> Result<BaseConsumer<C>> {
        let mut config = client_config(&self.name, &self.config)
            .map_err(|e| ProcessorError::InvalidPlan(e.to_string()))?;
        config
            .set("group.id", format!("kappa-{}-{topic}", self.name))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .set("auto.offset.reset", "earliest")
            .set(
                "statistics.interval.ms",
                if statistics { STATS_INTERVAL_MS } else { "0" },
            )
            // A view merges its partitions in time order, so it advances
            // by what one fetch brings of its densest partition: 4 MiB of
            // each (librdkafka's default is 1 MiB).
            .set("max.partition.fetch.bytes", "4194304");
        config
            .create_with_context(context)
            .map_err(|e| self.waiting(format!("cannot make a client: {e}")))
    }

    /// The number of partitions of `topic`, asked of the cluster.
    fn partition_count<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        topic: &str,
    ) -> Result<u32> {
        let answer = consumer.fetch_metadata(Some(topic), REQUEST_TIMEOUT);
        *self.unreachable.lock().unwrap_or_else(|e| e.into_inner()) = answer
            .as_ref()
            .err()
            .map(|e| (Instant::now(), e.to_string()));
        let metadata = answer.map_err(|e| self.waiting(format!("unreachable: {e}")))?;
        let partitions = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
            .map_or(0, |t| t.partitions().len() as u32);
        match partitions {
            0 => Err(self.waiting(format!("topic '{topic}' does not exist"))),
            n => Ok(n),
        }
    }

    /// Fails at once while the cluster did not answer a metadata request
    /// less than [`UNREACHABLE_FOR`] ago: a start resuming several views
    /// over it waits for it once, not once per view.
    fn recently_unreachable(&self) -> Result<()> {
        let unreachable = self.unreachable.lock().unwrap_or_else(|e| e.into_inner());
        match unreachable.as_ref() {
            Some((at, why)) if at.elapsed() < UNREACHABLE_FOR => Err(self.waiting(format!(
                "unreachable: {why} ({} ms ago; asked again after {} s)",
                at.elapsed().as_millis(),
                UNREACHABLE_FOR.as_secs()
            ))),
            _ => Ok(()),
        }
    }

    fn waiting(&self, what: String) -> ProcessorError {
        ProcessorError::WaitingForSource(format!(
            "cluster '{}' ({}): {what}",
            self.name, self.config.bootstrap_servers
        ))
    }
}

impl Source for ClusterSource {
    fn open(&self, topic: &str) -> Result<Arc<dyn SourceTopic>> {
        self.recently_unreachable()?;
        let health = Health {
            cluster: self.name.clone(),
            ..Health::default()
        };
        let consumer = self.consumer(topic, health, true)?;
        let partitions = self.partition_count(&consumer, topic)?;
        // Offsets are asked on a connection of their own: a broker may
        // answer a ListOffsets slowly (Tansu 0.6 takes long on a big
        // partition), and one on the fetching connection holds the fetches
        // behind it.
        let offsets = self.consumer(topic, rdkafka::consumer::DefaultConsumerContext, false)?;
        Ok(Arc::new(ClusterTopic {
            cluster: self.name.clone(),
            name: topic.to_string(),
            partitions,
            idle: Duration::from_millis(self.config.max_task_idle_ms),
            consumer,
            offsets,
            state: Mutex::new(ReadState {
                parts: (0..partitions).map(|_| PartState::default()).collect(),
                newest_append_time: i64::MIN,
            }),
        }))
    }

    fn check_current(&self, _topic: &dyn SourceTopic) -> Result<()> {
        Ok(())
    }

    fn complete_up_to(&self) -> i64 {
        // Decided per partition ([`ClusterTopic::bound`]).
        i64::MAX
    }

    fn wait_complete(
        &self,
        _t: i64,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    ) {
        // A partition's bound moves when a record arrives (woken by it) or
        // its idle wait ends (looked at again within 10 ms).
        let topics = cluster_topics(inputs);
        let slice = timeout.min(Duration::from_millis(10)) / topics.len().max(1) as u32;
        if stop.is_set() {
            return;
        }
        if topics.is_empty() {
            std::thread::sleep(slice);
        }
        for topic in topics {
            let mut state = topic.state();
            if topic.pump(&mut state, slice) {
                return;
            }
        }
    }

    fn wait_for_input(
        &self,
        inputs: &[(&dyn SourceTopic, &[u64])],
        timeout: Duration,
        stop: &StopSignal,
    ) {
        let deadline = Instant::now() + timeout;
        let topics = cluster_topics(inputs);
        while !stop.is_set() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            // Each topic's consumer blocks at most its share of a slice.
            let slice = left.min(Duration::from_millis(20)) / topics.len().max(1) as u32;
            for topic in &topics {
                if topic.wait(slice) {
                    return;
                }
            }
            if topics.is_empty() {
                std::thread::sleep(slice);
            }
        }
    }

    fn describe(&self) -> String {
        format!("cluster '{}'", self.name)
    }

    fn topic_offsets(&self, topic: &str) -> Result<Vec<PartitionOffsets>> {
        let cached = {
            let offsets = self.offsets.lock().unwrap_or_else(|e| e.into_inner());
            offsets
                .get(topic)
                .filter(|(at, _)| at.elapsed() < OFFSETS_CACHE)
                .map(|(_, answer)| answer.clone())
        };
        let answer = match cached {
            Some(answer) => answer,
            None => {
                let answer = self.ask_offsets(topic).map_err(|e| e.to_string());
                self.offsets
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(topic.to_string(), (Instant::now(), answer.clone()));
                answer
            }
        };
        answer.map_err(|reason| {
            // Kept as the error's text; said once more as the same error.
            let prefix = format!("{}: ", kappa_processor::error::WAITING_FOR_SOURCE);
            ProcessorError::WaitingForSource(
                reason.strip_prefix(&prefix).unwrap_or(&reason).to_string(),
            )
        })
    }
}

impl ClusterSource {
    /// [`Source::topic_offsets`], asked of the cluster now.
    fn ask_offsets(&self, topic: &str) -> Result<Vec<PartitionOffsets>> {
        self.recently_unreachable()?;
        let mut admin = self.admin.lock().unwrap_or_else(|e| e.into_inner());
        if admin.is_none() {
            *admin =
                Some(self.consumer("admin", rdkafka::consumer::DefaultConsumerContext, false)?);
        }
        let Some(consumer) = admin.as_ref() else {
            return Err(self.waiting("no client".into()));
        };
        let partitions = self.partition_count(consumer, topic)?;
        (0..partitions)
            .map(|p| {
                let (low, high) = consumer
                    .fetch_watermarks(topic, p as i32, REQUEST_TIMEOUT)
                    .map_err(|e| self.waiting(format!("topic '{topic}', partition {p}: {e}")))?;
                Ok(PartitionOffsets {
                    start: low.max(0) as u64,
                    end: high.max(0) as u64,
                })
            })
            .collect()
    }
}

/// The topics of `inputs` this source opened.
fn cluster_topics<'a>(inputs: &[(&'a dyn SourceTopic, &[u64])]) -> Vec<&'a ClusterTopic> {
    inputs
        .iter()
        .filter_map(|(t, _)| t.as_any().downcast_ref::<ClusterTopic>())
        .collect()
}

/// A record fetched, not yet read.
#[derive(Debug)]
struct Fetched {
    offset: u64,
    timestamp: i64,
    key: Option<Bytes>,
    value: Bytes,
    headers: Vec<Header>,
}

/// One partition's read state.
#[derive(Debug, Default)]
struct PartState {
    /// Records fetched from the consumer, in offset order.
    fetched: VecDeque<Fetched>,
    /// The offset the next read is expected at (where the consumer is).
    position: Option<u64>,
    /// The ordering time so far: the largest timestamp read.
    ordering_time: i64,
    /// The consumer delivered everything up to the partition's end (it
    /// said so after the last record fetched; cleared by a newer record).
    /// At the end once the fetched records are read too.
    eof: bool,
    /// Since when reads found nothing while at the end.
    idle_since: Option<Instant>,
    /// The partition's end offset as last known, and when it was last
    /// asked for (answered or not).
    end: Option<(Option<u64>, Instant)>,
}

#[derive(Debug)]
struct ReadState {
    parts: Vec<PartState>,
    /// The newest broker-set (`LogAppendTime`) timestamp fetched from any
    /// partition; `i64::MIN` while none was.
    newest_append_time: i64,
}

/// Round-trip time of a cluster's requests (fetches included) per broker,
/// from librdkafka's statistics every [`STATS_INTERVAL_MS`]: `stat` is
/// `avg` or `p99` over the interval.
pub const BROKER_RTT: &str = "kappa_cluster_broker_rtt_seconds";

/// Records a view's consumers fetched from a cluster.
pub const FETCHED_RECORDS: &str = "kappa_cluster_fetched_records_total";

/// How often a view's consumer reports its statistics.
const STATS_INTERVAL_MS: &str = "5000";

/// What librdkafka said of its connections: whether every broker is down,
/// and its statistics as gauges.
#[derive(Debug, Default)]
struct Health {
    /// The cluster's name (the metrics' label).
    cluster: String,
    /// Why no broker answers, since librdkafka said so (cleared by a
    /// record).
    all_down: Mutex<Option<String>>,
}

impl Health {
    fn all_down(&self) -> MutexGuard<'_, Option<String>> {
        self.all_down.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientContext for Health {
    fn stats(&self, statistics: rdkafka::Statistics) {
        for broker in statistics.brokers.values() {
            let Some(rtt) = &broker.rtt else {
                continue;
            };
            if rtt.cnt == 0 {
                continue;
            }
            for (stat, micros) in [("avg", rtt.avg), ("p99", rtt.p99)] {
                metrics::gauge!(
                    BROKER_RTT,
                    "cluster" => self.cluster.clone(),
                    "broker" => broker.nodename.clone(),
                    "stat" => stat
                )
                .set(micros as f64 / 1e6);
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        match error.rdkafka_error_code() {
            Some(RDKafkaErrorCode::AllBrokersDown) => *self.all_down() = Some(reason.to_string()),
            // The end of a partition reached: news, not an error.
            Some(RDKafkaErrorCode::PartitionEOF) => return,
            _ => {}
        }
        tracing::warn!(error = %error, reason, "cluster client");
    }
}

impl ConsumerContext for Health {}

/// One topic of a cluster, read by its own consumer.
struct ClusterTopic {
    cluster: String,
    name: String,
    partitions: u32,
    idle: Duration,
    consumer: BaseConsumer<Health>,
    /// The client that asks for the partitions' offsets (never assigned).
    offsets: BaseConsumer,
    state: Mutex<ReadState>,
}

impl std::fmt::Debug for ClusterTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterTopic")
            .field("cluster", &self.cluster)
            .field("name", &self.name)
            .field("partitions", &self.partitions)
            .finish()
    }
}

impl ClusterTopic {
    fn state(&self) -> MutexGuard<'_, ReadState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn failed(&self, what: &str, e: KafkaError) -> ProcessorError {
        ProcessorError::WaitingForSource(format!(
            "cluster '{}', topic '{}': {what}: {e}",
            self.cluster, self.name
        ))
    }

    /// Moves what the consumer has (waiting at most `timeout` for the
    /// first) into the partitions' fetched records; returns whether a
    /// record came.
    fn pump(&self, state: &mut ReadState, timeout: Duration) -> bool {
        let mut got = false;
        let mut wait = timeout;
        let mut fetched = 0u64;
        for _ in 0..PUMP_MAX {
            let Some(polled) = self.consumer.poll(wait) else {
                break;
            };
            wait = Duration::ZERO;
            match polled {
                Ok(m) => {
                    let (Ok(p), Ok(offset)) =
                        (usize::try_from(m.partition()), u64::try_from(m.offset()))
                    else {
                        continue;
                    };
                    let Some(part) = state.parts.get_mut(p) else {
                        continue;
                    };
                    let timestamp = match m.timestamp() {
                        Timestamp::LogAppendTime(t) => {
                            state.newest_append_time = state.newest_append_time.max(t);
                            t
                        }
                        Timestamp::CreateTime(t) => t,
                        Timestamp::NotAvailable => part.ordering_time.max(0),
                    };
                    let headers = m
                        .headers()
                        .map(|hs| {
                            hs.iter()
                                .map(|h| Header {
                                    name: h.key.to_string(),
                                    value: Bytes::copy_from_slice(h.value.unwrap_or_default()),
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    part.fetched.push_back(Fetched {
                        offset,
                        timestamp,
                        key: m.key().map(Bytes::copy_from_slice),
                        value: Bytes::copy_from_slice(m.payload().unwrap_or_default()),
                        headers,
                    });
                    part.eof = false;
                    got = true;
                    fetched += 1;
                    *self.consumer.context().all_down() = None;
                }
                Err(KafkaError::PartitionEOF(p)) => {
                    if let Some(part) = usize::try_from(p).ok().and_then(|p| state.parts.get_mut(p))
                    {
                        part.eof = true;
                    }
                }
                Err(e) => {
                    // librdkafka retries by itself (a broker down, a leader
                    // moving): said, not fatal.
                    tracing::debug!(cluster = %self.cluster, topic = %self.name, error = %e, "cluster consumer");
                }
            }
        }
        if fetched > 0 {
            metrics::counter!(FETCHED_RECORDS, "cluster" => self.cluster.clone(), "topic" => self.name.clone())
                .increment(fetched);
        }
        got
    }

    /// Waits at most `timeout` for a record; returns whether one came.
    fn wait(&self, timeout: Duration) -> bool {
        let mut state = self.state();
        if state.parts.iter().any(|p| !p.fetched.is_empty()) {
            return true;
        }
        self.pump(&mut state, timeout)
    }

    fn watermarks(&self, partition: u32) -> Result<(u64, u64)> {
        let (low, high) = self
            .offsets
            .fetch_watermarks(&self.name, partition as i32, REQUEST_TIMEOUT)
            .map_err(|e| self.failed("reading the partition's offsets", e))?;
        Ok((low.max(0) as u64, high.max(0) as u64))
    }
}

impl SourceTopic for ClusterTopic {
    fn name(&self) -> &str {
        &self.name
    }

    fn partition_count(&self) -> u32 {
        self.partitions
    }

    fn start_offset(&self, partition: u32) -> Result<u64> {
        Ok(self.watermarks(partition)?.0)
    }

    fn end_offset(&self, partition: u32) -> Result<u64> {
        // Asked for lag, often: an answer at most a second old, and no
        // wait past half a second for a cluster that does not answer.
        let cached = {
            let state = self.state();
            state.parts.get(partition as usize).and_then(|p| p.end)
        };
        let known = cached.and_then(|(end, _)| end);
        let unknown = |e: Option<KafkaError>| match e {
            Some(e) => self.failed("reading the partition's end", e),
            None => ProcessorError::WaitingForSource(format!(
                "cluster '{}', topic '{}': the partition's end is not known",
                self.cluster, self.name
            )),
        };
        if cached.is_some_and(|(_, at)| at.elapsed() < END_CACHE) {
            return known.ok_or_else(|| unknown(None));
        }
        let asked = self
            .offsets
            .fetch_watermarks(&self.name, partition as i32, END_TIMEOUT);
        let end = asked.as_ref().ok().map(|(_, high)| (*high).max(0) as u64);
        if let Some(p) = self.state().parts.get_mut(partition as usize) {
            p.end = Some((end.or(known), Instant::now()));
        }
        match (end.or(known), asked) {
            (Some(end), _) => Ok(end),
            (None, Err(e)) => Err(unknown(Some(e))),
            (None, Ok(_)) => Err(unknown(None)),
        }
    }

    fn offset_for_timestamp(&self, partition: u32, timestamp: i64) -> Result<u64> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.name, partition as i32, Offset::Offset(timestamp))
            .map_err(|e| self.failed("asking for an offset by time", e))?;
        let found = self
            .offsets
            .offsets_for_times(tpl, REQUEST_TIMEOUT)
            .map_err(|e| self.failed("asking for an offset by time", e))?;
        match found
            .find_partition(&self.name, partition as i32)
            .map(|p| p.offset())
        {
            Some(Offset::Offset(o)) if o >= 0 => Ok(o as u64),
            _ => self.end_offset(partition),
        }
    }

    fn start_reading(&self, positions: &[u64]) -> Result<()> {
        let positions: Vec<(u32, u64)> = (0..).zip(positions.iter().copied()).collect();
        self.start_reading_partitions(&positions)
    }

    fn start_reading_partitions(&self, positions: &[(u32, u64)]) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        for &(p, offset) in positions {
            tpl.add_partition_offset(&self.name, p as i32, Offset::Offset(offset as i64))
                .map_err(|e| self.failed("assigning the partitions", e))?;
        }
        self.consumer
            .assign(&tpl)
            .map_err(|e| self.failed("assigning the partitions", e))?;
        let mut state = self.state();
        for &(p, offset) in positions {
            if let Some(part) = state.parts.get_mut(p as usize) {
                *part = PartState {
                    position: Some(offset),
                    ..PartState::default()
                };
            }
        }
        Ok(())
    }

    fn read(
        &self,
        partition: u32,
        offset: u64,
        max_records: u64,
        max_bytes: u64,
    ) -> Result<SourceFetch> {
        let mut state = self.state();
        self.pump(&mut state, Duration::ZERO);
        if let Some(reason) = self.consumer.context().all_down().clone() {
            // The version stops here, uncommitted input unapplied, and is
            // retried from its last commit once the cluster answers.
            return Err(ProcessorError::WaitingForSource(format!(
                "cluster '{}', topic '{}': no broker answers ({reason})",
                self.cluster, self.name
            )));
        }
        let p = partition as usize;
        let part = &mut state.parts[p];
        if part.position != Some(offset) {
            // Not where the consumer is (a read again after a failure):
            // start there.
            self.consumer
                .seek(
                    &self.name,
                    partition as i32,
                    Offset::Offset(offset as i64),
                    REQUEST_TIMEOUT,
                )
                .map_err(|e| self.failed("seeking", e))?;
            part.fetched.clear();
            part.eof = false;
            part.position = Some(offset);
        }
        while part.fetched.front().is_some_and(|r| r.offset < offset) {
            part.fetched.pop_front();
        }
        let mut batches = Vec::new();
        let mut next_offset = offset;
        let (mut records, mut bytes) = (0u64, 0u64);
        let mut run: Vec<NewRecord> = Vec::new();
        let (mut run_base, mut run_time) = (0u64, i64::MIN);
        while records < max_records && bytes < max_bytes {
            let Some(r) = part.fetched.pop_front() else {
                break;
            };
            let ordering_time = part.ordering_time.max(r.timestamp);
            let continues = !run.is_empty()
                && r.offset == run_base + run.len() as u64
                && ordering_time == run_time;
            if !continues && !run.is_empty() {
                batches.push(encode(run_base, run_time, &run)?);
                run.clear();
            }
            if run.is_empty() {
                (run_base, run_time) = (r.offset, ordering_time);
            }
            part.ordering_time = ordering_time;
            bytes += (r.value.len() + r.key.as_ref().map_or(0, |k| k.len())) as u64;
            records += 1;
            next_offset = r.offset + 1;
            run.push(NewRecord {
                key: r.key,
                value: r.value,
                timestamp: Some(r.timestamp),
                headers: r.headers,
            });
        }
        if !run.is_empty() {
            batches.push(encode(run_base, run_time, &run)?);
        }
        part.position = Some(next_offset);
        match batches.is_empty() {
            true => {
                if part.eof && part.fetched.is_empty() && part.idle_since.is_none() {
                    part.idle_since = Some(Instant::now());
                }
            }
            false => part.idle_since = None,
        }
        Ok(SourceFetch {
            at_end: part.fetched.is_empty(),
            next_offset,
            // Its batches end at `next_offset`: none is split.
            readable_to: next_offset,
            batches,
        })
    }

    fn bounds_partitions(&self) -> bool {
        true
    }

    fn bound(&self, partition: u32) -> i64 {
        let state = self.state();
        let Some(part) = state.parts.get(partition as usize) else {
            return i64::MAX;
        };
        if let Some(next) = part.fetched.front() {
            return part.ordering_time.max(next.timestamp).saturating_sub(1);
        }
        if !part.eof {
            // Records may be on their way, of any time.
            return i64::MIN;
        }
        if part.idle_since.is_some_and(|t| t.elapsed() >= self.idle) {
            return i64::MAX;
        }
        // Broker-set timestamps: what is appended next gets at least the
        // newest fetched (`i64::MIN` while none was).
        state.newest_append_time.saturating_sub(1)
    }

    fn damaged(&self, partition: u32, first_offset: u64, reason: &str) -> ProcessorError {
        ProcessorError::Stopped(format!(
            "cluster '{}', topic '{}', partition {partition}: the records from offset {first_offset} could not be read ({reason})",
            self.cluster, self.name
        ))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Records at consecutive offsets from `base_offset` as one batch of the
/// built-in log's format, appended at `ordering_time`.
fn encode(base_offset: u64, ordering_time: i64, records: &[NewRecord]) -> Result<FramedBatch> {
    let mut out = Vec::with_capacity(batch::encoded_len(records, None));
    batch::encode(
        &mut out,
        BatchMeta {
            base_offset,
            append_time: ordering_time,
            idempotency_key: None,
        },
        records,
    );
    FramedBatch::parse(&Bytes::from(out))
        .map_err(|e| ProcessorError::Stopped(format!("a fetched batch did not encode: {e}")))
}
