//! The `kafka-produce` scenario: the `produce` scenario's records sent over
//! the Kafka wire protocol (Produce v9) instead of HTTP, to compare the two
//! front ends like with like (issue 17). `--connections` TCP connections to
//! the server's Kafka listener, each with up to `--in-flight` requests
//! pipelined (librdkafka's `max.in.flight` is 5); every request carries
//! `--batch` records of `--record-bytes` values, encoded before the run.
//!
//! Records are those of the HTTP bodies ([`super::body::write_value`]), with
//! the same keys ([`KeyGen`]); a request holds one v2 record batch
//! (uncompressed) per partition its keys hash to (murmur2, as the server
//! and Kafka clients partition keyed records), or with `--keys 0` one batch
//! for one partition, taken round-robin (as the server spreads unkeyed
//! HTTP requests). The topic is created and described over HTTP.
//!
//! Timing: a request counts when it is sent in the measured window (after
//! `--warmup`) and answered before the window's end (`--duration`), or,
//! with `--records`, when it is one of the first `ceil(records / batch)`
//! sent in the window; that window ends at the last of their answers.
//! Latency is from writing a request to having read its answer, so it
//! includes waiting behind the requests pipelined before it. Any answer
//! with a non-zero error code fails the run; a broken connection too.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use bytes::{Buf, Bytes, BytesMut};
use indicatif::ProgressBar;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kappa_log::partition_for_key;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::body::write_value;
use super::http::{self, Conn, Target};
use super::kafka;
use super::keys::{KeyGen, Skew};
use super::produce::{duration_limit, window_elapsed, Fsync, Totals};
use super::progress;
use super::report::{self, Report, RunResult};
use super::stats::LatencySummary;

/// The Produce version sent: the highest the server serves
/// (server/src/kafka/versions.rs); v9 is the first flexible one.
const PRODUCE_VERSION: i16 = 9;

/// Most bytes of record values the request pool may hold.
const MAX_POOL_VALUE_BYTES: usize = 256 << 20;

/// How long the server may wait for the acknowledgements (`timeout_ms`).
const PRODUCE_TIMEOUT_MS: i32 = 30_000;

/// Options of `kappa-bench kafka-produce`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct KafkaProduceArgs {
    /// The server's Kafka listener (`host:port`, its `--kafka-listen`).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub kafka: String,
    /// Topic to produce to (must exist unless --create).
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// Create the topic first over HTTP (with --partitions and --fsync).
    #[arg(long)]
    pub create: bool,
    /// With --create: delete the topic first if it exists, before every run.
    #[arg(long, requires = "create")]
    pub recreate: bool,
    /// Partitions of the created topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// fsync policy of the created topic.
    #[arg(long, value_enum, default_value_t = Fsync::Always)]
    pub fsync: Fsync,
    /// TCP connections to the Kafka listener.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,
    /// Requests pipelined per connection (librdkafka's max.in.flight).
    #[arg(long, default_value_t = 5)]
    pub in_flight: usize,
    /// Records per request (1..=10000).
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Approximate size of each record's value (JSON text), in bytes.
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// Key cardinality (0 = records without a key).
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Key distribution: `uniform` or `zipf:S`.
    #[arg(long, default_value = "uniform")]
    pub skew: Skew,
    /// Seed of the key sequence.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Acknowledgements asked for: -1 (all in-sync replicas) or 1 (the leader).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub acks: i16,
    /// Measured seconds after the warm-up [default: 10, none with --records alone].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after the requests holding this many records, sent in the window.
    #[arg(long)]
    pub records: Option<u64>,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Repetitions; the table shows the median with min and max.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Records pre-encoded into distinct requests, cycled by the connections.
    #[arg(long, default_value_t = 100_000)]
    pub pool_records: usize,
}

impl KafkaProduceArgs {
    fn validate(&self) -> anyhow::Result<()> {
        if !(1..=10_000).contains(&self.batch) {
            bail!("--batch must be in 1..=10000, got {}", self.batch);
        }
        if self.connections == 0 || self.in_flight == 0 || self.runs == 0 || self.partitions == 0 {
            bail!("--connections, --in-flight, --runs and --partitions must be at least 1");
        }
        if !matches!(self.acks, -1 | 1) {
            // acks=0 gets no answer, so there would be nothing to time.
            bail!("--acks must be -1 or 1, got {}", self.acks);
        }
        if self.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
            bail!("--duration must be a positive number of seconds");
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            bail!("--warmup must be a non-negative number of seconds");
        }
        if self.records == Some(0) {
            bail!("--records must be at least 1");
        }
        Ok(())
    }

    /// Requests the window may send with `--records` (whole requests).
    fn request_limit(&self) -> Option<u64> {
        self.records.map(|r| r.div_ceil(self.batch as u64))
    }

    fn title(&self, layout: &str) -> String {
        let keys = if self.keys == 0 {
            "no keys".to_string()
        } else {
            format!("{} keys {}", self.keys, self.skew)
        };
        format!(
            "topic `{}` ({layout}) over the Kafka protocol (Produce v{PRODUCE_VERSION}, acks={}); \
             {} connections × {} in flight, batch {} × ~{} B values, {keys}, flat out",
            self.topic, self.acks, self.connections, self.in_flight, self.batch, self.record_bytes,
        )
    }
}

/// One pre-encoded Produce request body (without its header).
#[derive(Debug)]
struct PooledRequest {
    body: Bytes,
    records: u64,
    /// Partitions it writes to: one answer entry is expected for each.
    partitions: usize,
}

/// Pre-encoded requests, handed out round-robin to every connection.
#[derive(Debug)]
struct RequestPool {
    requests: Vec<PooledRequest>,
    next: AtomicUsize,
}

impl RequestPool {
    /// Encodes enough requests for `pool_records` records (at least 16),
    /// for a topic of `partitions` partitions.
    fn build(args: &KafkaProduceArgs, partitions: u32) -> anyhow::Result<RequestPool> {
        let cap = (MAX_POOL_VALUE_BYTES / args.record_bytes.max(1)).max(1);
        let count = args.pool_records.min(cap).div_ceil(args.batch).max(16);
        let mut keys = (args.keys > 0).then(|| KeyGen::new(args.keys, args.skew, args.seed));
        let mut requests = Vec::with_capacity(count);
        for i in 0..count {
            let first_seq = (i * args.batch) as u64;
            let mut by_partition: BTreeMap<u32, Vec<Record>> = BTreeMap::new();
            for seq in first_seq..first_seq + args.batch as u64 {
                let key = keys.as_mut().map(KeyGen::next_key);
                let partition = match &key {
                    Some(k) => partition_for_key(k.as_bytes(), partitions),
                    None => i as u32 % partitions,
                };
                let batch = by_partition.entry(partition).or_default();
                batch.push(record(key, seq, batch.len(), args.record_bytes));
            }
            requests.push(encode_request(args, &by_partition)?);
        }
        Ok(RequestPool {
            requests,
            next: AtomicUsize::new(0),
        })
    }

    fn next(&self) -> &PooledRequest {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.requests.len();
        &self.requests[i]
    }

    fn mean_body_bytes(&self) -> f64 {
        let total: usize = self.requests.iter().map(|r| r.body.len()).sum();
        total as f64 / self.requests.len() as f64
    }
}

/// The `index`-th record of its batch: the HTTP bench's value, no producer
/// id (not idempotent), creation time now. The sequence runs along the
/// batch so the encoder keeps it one batch, whose base sequence is -1 (no
/// producer), as a plain Kafka client sends.
fn record(key: Option<String>, seq: u64, index: usize, record_bytes: usize) -> Record {
    let mut value = Vec::with_capacity(record_bytes + 8);
    write_value(
        &mut value,
        key.as_deref().unwrap_or("none"),
        seq,
        record_bytes,
    );
    Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: index as i64,
        sequence: index as i32 - 1,
        timestamp: report::unix_ms() as i64,
        key: key.map(Bytes::from),
        value: Some(Bytes::from(value)),
        headers: Default::default(),
    }
}

/// A Produce v9 body with one uncompressed v2 record batch per partition.
fn encode_request(
    args: &KafkaProduceArgs,
    by_partition: &BTreeMap<u32, Vec<Record>>,
) -> anyhow::Result<PooledRequest> {
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    let mut partition_data = Vec::with_capacity(by_partition.len());
    for (&partition, records) in by_partition {
        let mut batch = BytesMut::new();
        RecordBatchEncoder::encode(&mut batch, records.iter(), &options)
            .context("encoding a record batch")?;
        partition_data.push(
            PartitionProduceData::default()
                .with_index(partition as i32)
                .with_records(Some(batch.freeze())),
        );
    }
    let topic = TopicProduceData::default()
        .with_name(TopicName(StrBytes::from_string(args.topic.clone())))
        .with_partition_data(partition_data);
    let request = ProduceRequest::default()
        .with_acks(args.acks)
        .with_timeout_ms(PRODUCE_TIMEOUT_MS)
        .with_topic_data(vec![topic]);
    let mut body = BytesMut::new();
    request
        .encode(&mut body, PRODUCE_VERSION)
        .context("encoding a Produce request")?;
    Ok(PooledRequest {
        body: body.freeze(),
        records: args.batch as u64,
        partitions: by_partition.len(),
    })
}

/// Reads one Produce answer and checks it answers `correlation_id` for
/// `partitions` partitions; the non-zero error codes it carries.
async fn read_answer<R: AsyncReadExt + Unpin>(
    reader: &mut R,
    correlation_id: i32,
    partitions: usize,
) -> anyhow::Result<Vec<i16>> {
    let answer: ProduceResponse =
        kafka::read_answer(reader, ApiKey::Produce, PRODUCE_VERSION, correlation_id).await?;
    let entries = answer.responses.iter().flat_map(|t| &t.partition_responses);
    let answered = entries.clone().count();
    ensure!(
        answered == partitions,
        "answer covers {answered} partitions, the request {partitions}"
    );
    Ok(entries.map(|p| p.error_code).filter(|&c| c != 0).collect())
}

/// State shared by the connection tasks of one run.
struct Shared {
    pool: Arc<RequestPool>,
    in_flight: usize,
    window_start: Instant,
    deadline: Option<Instant>,
    /// With `--records`: requests the window may send.
    limit: Option<u64>,
    /// Requests sent in the window so far.
    sent: AtomicU64,
    stop: AtomicBool,
    /// The last counted answer, in ns after the window start (for `--records`).
    end_ns: AtomicU64,
    /// Records and bytes acknowledged in the window (for the progress bar).
    records: AtomicU64,
    bytes: AtomicU64,
}

impl Shared {
    /// Whether another request may be sent now, and if so whether it counts.
    fn may_send(&self, now: Instant) -> Option<bool> {
        if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| now >= d) {
            return None;
        }
        if now < self.window_start {
            return Some(false);
        }
        let k = self.sent.fetch_add(1, Ordering::Relaxed);
        if self.limit.is_some_and(|limit| k >= limit) {
            self.stop.store(true, Ordering::Relaxed);
            return None;
        }
        Some(true)
    }
}

/// A request written and not yet answered.
struct Pending {
    correlation_id: i32,
    sent: Instant,
    counted: bool,
    records: u64,
    bytes: u64,
    partitions: usize,
}

/// One connection: keep up to `in_flight` requests written, read the
/// answers in order, count. Error answers count whenever they come.
async fn connection_task(shared: Arc<Shared>, stream: TcpStream) -> anyhow::Result<Totals<i16>> {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut totals = Totals::new();
    let mut pending = VecDeque::with_capacity(shared.in_flight);
    let mut correlation_id = 0i32;
    loop {
        while pending.len() < shared.in_flight {
            let Some(counted) = shared.may_send(Instant::now()) else {
                break;
            };
            let request = shared.pool.next();
            let head = kafka::frame_head(
                ApiKey::Produce,
                PRODUCE_VERSION,
                correlation_id,
                request.body.len(),
            )?;
            let mut frame = head.chain(&request.body[..]);
            let sent = Instant::now();
            writer.write_all_buf(&mut frame).await?;
            pending.push_back(Pending {
                correlation_id,
                sent,
                counted,
                records: request.records,
                bytes: request.body.len() as u64,
                partitions: request.partitions,
            });
            correlation_id = correlation_id.wrapping_add(1);
        }
        let Some(p) = pending.pop_front() else {
            return Ok(totals);
        };
        let errors = read_answer(&mut reader, p.correlation_id, p.partitions).await?;
        let done = Instant::now();
        if !errors.is_empty() {
            totals.counts.failed_requests += 1;
            for code in errors {
                *totals.statuses.entry(code).or_default() += 1;
            }
        } else if p.counted && shared.deadline.is_none_or(|d| done <= d) {
            totals.acknowledged(done - p.sent, p.records, p.bytes);
            let ns = (done - shared.window_start).as_nanos() as u64;
            shared.end_ns.fetch_max(ns.max(1), Ordering::Relaxed);
            shared.records.fetch_add(p.records, Ordering::Relaxed);
            shared.bytes.fetch_add(p.bytes, Ordering::Relaxed);
        }
    }
}

/// Refreshes the progress bar until every connection task has ended.
async fn watch(
    shared: &Shared,
    handles: &[JoinHandle<anyhow::Result<Totals<i16>>>],
    bar: &ProgressBar,
    t0: Instant,
) {
    while !handles.iter().all(JoinHandle::is_finished) {
        tokio::time::sleep(progress::TICK).await;
        let now = Instant::now();
        match shared.deadline {
            Some(_) => bar.set_position((now - t0).as_millis() as u64),
            None => bar.set_position(shared.sent.load(Ordering::Relaxed)),
        }
        if now < shared.window_start {
            bar.set_message("warming up");
            continue;
        }
        let secs = (now - shared.window_start).as_secs_f64().max(1e-3);
        let records = shared.records.load(Ordering::Relaxed) as f64 / secs;
        let mb = shared.bytes.load(Ordering::Relaxed) as f64 / secs / 1e6;
        bar.set_message(format!(
            "{} records/s, {mb:.1} MB/s",
            report::thousands(records)
        ));
    }
}

/// One measured run over fresh connections.
async fn run_once(
    args: &KafkaProduceArgs,
    pool: Arc<RequestPool>,
    label: String,
) -> anyhow::Result<RunResult> {
    let mut streams = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        let stream = TcpStream::connect(&args.kafka)
            .await
            .with_context(|| format!("connecting to the Kafka listener {}", args.kafka))?;
        stream.set_nodelay(true)?;
        streams.push(stream);
    }
    let t0 = Instant::now();
    let window_start = t0 + Duration::from_secs_f64(args.warmup);
    let deadline = duration_limit(args.duration, args.records).map(|d| window_start + d);
    let shared = Arc::new(Shared {
        pool,
        in_flight: args.in_flight,
        window_start,
        deadline,
        limit: args.request_limit(),
        sent: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        end_ns: AtomicU64::new(0),
        records: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    let bar = match (deadline, args.request_limit()) {
        (Some(d), _) => progress::time_bar(label, d - t0),
        (None, Some(n)) => progress::count_bar(label, n, "requests"),
        (None, None) => unreachable!("duration_limit bounds runs without --records"),
    };
    let handles: Vec<_> = streams
        .into_iter()
        .map(|s| tokio::spawn(connection_task(shared.clone(), s)))
        .collect();
    watch(&shared, &handles, &bar, t0).await;
    let mut totals = Totals::new();
    for handle in handles {
        totals.merge(handle.await.context("connection task panicked")??);
    }
    bar.finish_and_clear();
    let elapsed = window_elapsed(&shared.end_ns, window_start, deadline);
    let statuses = totals
        .statuses
        .iter()
        .map(|(code, n)| (format!("kafka error {code}"), *n))
        .collect();
    let latency = LatencySummary::from_histogram(&totals.histogram);
    Ok(RunResult::new(totals.counts, elapsed, latency, statuses, 0))
}

/// The topic before a run, over HTTP (see [`http::prepare_topic`]);
/// answers its partition count.
async fn prepare_topic(
    args: &KafkaProduceArgs,
    target: &Target,
    first_run: bool,
) -> anyhow::Result<u32> {
    let create = args.create.then(|| {
        serde_json::json!({
            "name": args.topic,
            "partitions": args.partitions,
            "fsync": args.fsync,
        })
    });
    let topic = http::prepare_topic(
        target,
        &args.topic,
        create.as_ref(),
        args.recreate,
        first_run,
    )
    .await?;
    Ok(topic.config.partitions)
}

/// Runs the Kafka produce scenario `--runs` times and reports; fails if
/// any answer carried an error.
pub async fn run(
    args: &KafkaProduceArgs,
    target: &Target,
    command: String,
) -> anyhow::Result<Report> {
    args.validate()?;
    let mut pool = None;
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        let partitions = prepare_topic(args, target, i == 0).await?;
        let pool = match &pool {
            Some(pool) => Arc::clone(pool),
            None => pool
                .insert(Arc::new(RequestPool::build(args, partitions)?))
                .clone(),
        };
        let label = format!("kafka-produce run {}/{}", i + 1, args.runs);
        let started = report::unix_ms();
        let result = run_once(args, pool, label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!("{}", super::produce::run_line(&label, &result));
        if result.failed_requests() > 0 {
            bail!(
                "{label}: {} requests answered with errors ({:?})",
                result.failed_requests(),
                result.statuses
            );
        }
        runs.push(result);
    }
    let mut conn = Conn::connect(target).await?;
    let info = http::describe_topic(&mut conn, &args.topic)
        .await?
        .context("the topic disappeared during the run")?;
    let pool = pool.expect("at least one run");
    let notes = vec![
        format!(
            "requests: {} distinct pre-encoded Produce v{PRODUCE_VERSION} bodies (uncompressed v2 \
             record batches), {} bytes each on average, cycled",
            pool.requests.len(),
            report::thousands(pool.mean_body_bytes())
        ),
        super::produce::topic_after_runs(&info, &runs),
    ];
    Ok(Report {
        scenario: "kafka-produce".into(),
        title: args.title(&info.layout()),
        command,
        params: serde_json::to_value(args)?,
        notes,
        summary: report::summarize(&runs),
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use kafka_protocol::protocol::Decodable;
    use kafka_protocol::records::RecordBatchDecoder;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: KafkaProduceArgs,
    }

    fn args(extra: &[&str]) -> KafkaProduceArgs {
        let argv = ["x", "--topic", "t", "--batch", "10"].iter().chain(extra);
        Cli::parse_from(argv).args
    }

    /// The records of a pooled request, by partition.
    fn decode(request: &PooledRequest) -> BTreeMap<i32, Vec<Record>> {
        let mut body = request.body.clone();
        let produce = ProduceRequest::decode(&mut body, PRODUCE_VERSION).unwrap();
        assert_eq!(produce.acks, -1);
        let topic = &produce.topic_data[0];
        assert_eq!(topic.name.as_str(), "t");
        topic
            .partition_data
            .iter()
            .map(|p| {
                let mut batch = p.records.clone().unwrap();
                let set = RecordBatchDecoder::decode(&mut batch).unwrap();
                assert!(batch.is_empty(), "one record batch per partition");
                (p.index, set.records)
            })
            .collect()
    }

    #[test]
    fn keyed_records_go_to_the_partition_their_key_hashes_to() {
        let pool = RequestPool::build(&args(&["--pool-records", "100"]), 4).unwrap();
        assert_eq!(pool.requests.len(), 16);
        for request in &pool.requests {
            let batches = decode(request);
            assert_eq!(batches.len(), request.partitions);
            let mut total = 0;
            for (partition, records) in &batches {
                for (i, r) in records.iter().enumerate() {
                    let key = r.key.as_ref().unwrap();
                    assert_eq!(partition_for_key(key, 4) as i32, *partition);
                    assert_eq!(r.offset, i as i64, "offsets run along the batch");
                    assert_eq!(r.value.as_ref().unwrap().len(), 100);
                }
                total += records.len();
            }
            assert_eq!(total, 10);
        }
    }

    #[test]
    fn keyless_requests_take_partitions_round_robin() {
        let pool = RequestPool::build(&args(&["--keys", "0"]), 3).unwrap();
        for (i, request) in pool.requests.iter().enumerate().take(6) {
            let batches = decode(request);
            let records = &batches[&((i % 3) as i32)];
            assert_eq!((batches.len(), records.len()), (1, 10));
            assert!(records.iter().all(|r| r.key.is_none()));
        }
    }

    #[test]
    fn records_limit_rounds_up_to_whole_requests() {
        assert_eq!(args(&["--records", "25"]).request_limit(), Some(3));
        assert_eq!(args(&["--records", "30"]).request_limit(), Some(3));
        assert_eq!(args(&[]).request_limit(), None);
        assert!(args(&["--acks", "0"]).validate().is_err());
        assert!(args(&["--acks", "-1"]).validate().is_ok());
        assert!(args(&["--in-flight", "0"]).validate().is_err());
    }
}
