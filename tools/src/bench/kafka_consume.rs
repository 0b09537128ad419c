//! The `kafka-consume` scenario: the `consume` scenario over the Kafka wire
//! protocol. One connection (and task) per partition sends Fetch v12 from
//! the partition's start up to the end offset seen over HTTP when the run
//! starts, one fetch at a time, as a consumer assigned to the partition
//! does (no group, no fetch session).
//!
//! As the HTTP scenario skips the JSON records and reads only
//! `next_offset`, this one walks the record batches' headers only (base
//! offset + last offset delta + 1 is the next offset) and does not decode
//! the records. The run's time goes from the first fetch to the last
//! answer of the slowest partition; MB/s counts the record batch bytes;
//! latency is per fetch. A fetch answered with an error code, or without
//! progress, ends its partition's reader and fails the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::consume::{repeat_runs, ReadTally};
use super::http::{self, Conn, PartitionInfo, Target, TopicInfo};
use super::kafka;
use super::progress;
use super::report::{self, Counts, Report, RunResult};
use super::stats::{self, LatencySummary};

/// The Fetch version sent: the highest the server serves
/// (server/src/kafka/versions.rs; v13 would need topic ids).
const FETCH_VERSION: i16 = 12;

/// Where a v2 record batch header keeps its fields (Kafka's
/// `DefaultRecordBatch`): base offset (i64), batch length (i32, the bytes
/// after it), last offset delta (i32).
const BASE_OFFSET_AT: usize = 0;
const BATCH_LENGTH_AT: usize = 8;
const LAST_OFFSET_DELTA_AT: usize = 23;
/// Bytes before the batch length counts (base offset + the length itself).
const LOG_OVERHEAD: usize = 12;
/// Smallest whole batch header (up to the record count).
const BATCH_HEADER_BYTES: usize = 61;

/// Options of `kappa-bench kafka-consume`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct KafkaConsumeArgs {
    /// The server's Kafka listener (`host:port`, its `--kafka-listen`).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub kafka: String,
    /// Topic to read (described over HTTP for its partitions and offsets).
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// `max_bytes` and `partition_max_bytes` of each fetch (1..=16777216).
    #[arg(long, default_value_t = 16_777_216)]
    pub max_bytes: i32,
    /// Stop early after this many seconds (default: read up to the end).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Repetitions; the table shows the median with min and max.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
}

/// The offset after the last whole record batch in `records`, and the
/// batches' bytes; `None` when it holds no whole batch.
fn next_offset(records: &[u8]) -> Option<(i64, usize)> {
    let mut at = 0;
    let mut next = None;
    while records.len() - at >= BATCH_HEADER_BYTES {
        let field = |offset: usize, len: usize| &records[at + offset..at + offset + len];
        let length = i32::from_be_bytes(field(BATCH_LENGTH_AT, 4).try_into().ok()?);
        let end = at + LOG_OVERHEAD + usize::try_from(length).ok()?;
        if end > records.len() {
            break; // a partial batch at the end of the answer
        }
        let base = i64::from_be_bytes(field(BASE_OFFSET_AT, 8).try_into().ok()?);
        let delta = i32::from_be_bytes(field(LAST_OFFSET_DELTA_AT, 4).try_into().ok()?);
        next = Some(base + i64::from(delta) + 1);
        at = end;
    }
    next.map(|n| (n, at))
}

/// A full fetch of one partition from `offset`, answered at once.
fn fetch_request(topic: &str, partition: u32, offset: i64, max_bytes: i32) -> FetchRequest {
    let fetch_partition = FetchPartition::default()
        .with_partition(partition as i32)
        .with_current_leader_epoch(-1)
        .with_fetch_offset(offset)
        .with_last_fetched_epoch(-1)
        .with_log_start_offset(-1)
        .with_partition_max_bytes(max_bytes);
    let fetch_topic = FetchTopic::default()
        .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
        .with_partitions(vec![fetch_partition]);
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_topic])
}

/// One partition's reader's result.
struct PartitionTotals {
    tally: ReadTally,
    finished: Instant,
}

/// Reads one partition from its start to the end seen at the run's start.
async fn read_partition(
    stream: TcpStream,
    args: KafkaConsumeArgs,
    part: PartitionInfo,
    deadline: Option<Instant>,
    progress: Arc<AtomicU64>,
) -> anyhow::Result<PartitionTotals> {
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::new(reader);
    let mut tally = ReadTally::new();
    let mut offset = part.start_offset as i64;
    let mut correlation_id = 0;
    while offset < part.end_offset as i64 && deadline.is_none_or(|d| Instant::now() < d) {
        let request = fetch_request(&args.topic, part.partition, offset, args.max_bytes);
        let frame = kafka::frame(ApiKey::Fetch, FETCH_VERSION, correlation_id, &request)?;
        let sent = Instant::now();
        writer.write_all(&frame).await?;
        let answer: FetchResponse =
            kafka::read_answer(&mut reader, ApiKey::Fetch, FETCH_VERSION, correlation_id).await?;
        let done = Instant::now();
        correlation_id += 1;
        let data = answer
            .responses
            .first()
            .and_then(|t| t.partitions.first())
            .context("a fetch answer without the partition")?;
        let code = if answer.error_code != 0 {
            answer.error_code
        } else {
            data.error_code
        };
        let records = data.records.as_deref().unwrap_or_default();
        match next_offset(records) {
            Some((next, bytes)) if code == 0 && next > offset => {
                tally.answered(done - sent, (next - offset) as u64, bytes as u64);
                progress.fetch_add((next - offset) as u64, Ordering::Relaxed);
                offset = next;
            }
            _ => {
                // No progress: say why rather than fetch the same offset forever.
                *tally
                    .statuses
                    .entry(format!("kafka error {code}"))
                    .or_default() += 1;
                tally.counts.failed_requests += 1;
                break;
            }
        }
    }
    Ok(PartitionTotals {
        tally,
        finished: Instant::now(),
    })
}

/// Adds up the partitions' results; the run ends with the last reader.
fn merge(totals: Vec<PartitionTotals>, t0: Instant) -> RunResult {
    let mut histogram = stats::new_histogram();
    let mut counts = Counts::default();
    let mut statuses = std::collections::BTreeMap::new();
    let mut end = t0;
    for t in totals {
        histogram
            .add(&t.tally.histogram)
            .expect("same histogram bounds");
        counts.ok_requests += t.tally.counts.ok_requests;
        counts.records += t.tally.counts.records;
        counts.bytes += t.tally.counts.bytes;
        counts.failed_requests += t.tally.counts.failed_requests;
        for (s, n) in t.tally.statuses {
            *statuses.entry(s).or_default() += n;
        }
        end = end.max(t.finished);
    }
    let latency = LatencySummary::from_histogram(&histogram);
    RunResult::new(counts, end - t0, latency, statuses, 0)
}

/// One run: every non-empty partition read concurrently.
async fn run_once(
    args: &KafkaConsumeArgs,
    info: &TopicInfo,
    label: String,
) -> anyhow::Result<RunResult> {
    let parts = info.non_empty_partitions();
    let mut streams = Vec::with_capacity(parts.len());
    for _ in &parts {
        let stream = TcpStream::connect(&args.kafka)
            .await
            .with_context(|| format!("connecting to the Kafka listener {}", args.kafka))?;
        stream.set_nodelay(true)?;
        streams.push(stream);
    }
    let bar = progress::count_bar(label, info.records(), "records");
    let read = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let deadline = args.duration.map(|d| t0 + Duration::from_secs_f64(d));
    let handles: Vec<_> = streams
        .into_iter()
        .zip(parts)
        .map(|(stream, part)| {
            let task = read_partition(stream, args.clone(), part, deadline, read.clone());
            tokio::spawn(task)
        })
        .collect();
    while !handles.iter().all(|h| h.is_finished()) {
        tokio::time::sleep(progress::TICK).await;
        bar.set_position(read.load(Ordering::Relaxed));
    }
    bar.finish_and_clear();
    let mut totals = Vec::with_capacity(handles.len());
    for handle in handles {
        totals.push(handle.await.context("reader task panicked")??);
    }
    Ok(merge(totals, t0))
}

/// Runs the Kafka consume scenario `--runs` times and reports; fails if a
/// fetch was answered with an error.
pub async fn run(
    args: &KafkaConsumeArgs,
    target: &Target,
    command: String,
) -> anyhow::Result<Report> {
    if !(1..=16 << 20).contains(&args.max_bytes) || args.runs == 0 {
        bail!("--max-bytes must be in 1..=16777216 and --runs at least 1");
    }
    let mut conn = Conn::connect(target).await?;
    let info = http::describe_topic(&mut conn, &args.topic)
        .await?
        .with_context(|| format!("topic {:?} does not exist", args.topic))?;
    if info.records() == 0 {
        bail!("topic {:?} is empty: produce to it first", args.topic);
    }
    let runs = repeat_runs("kafka-consume", args.runs, |label| {
        run_once(args, &info, label)
    })
    .await?;
    if let Some(failed) = runs.iter().find(|r| r.failed_requests() > 0) {
        bail!("fetches failed: {:?}", failed.statuses);
    }
    let notes = vec![format!(
        "the topic held {} records when the runs started; MB/s counts record batch bytes",
        report::thousands(info.records() as f64),
    )];
    Ok(Report {
        scenario: "kafka-consume".into(),
        title: format!(
            "topic `{}` ({}) over the Kafka protocol (Fetch v{FETCH_VERSION}), one connection \
             per partition, max_bytes={}",
            args.topic,
            info.layout(),
            args.max_bytes
        ),
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
    use bytes::BytesMut;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn batch(out: &mut BytesMut, first: i64, count: i64) {
        let records: Vec<Record> = (first..first + count)
            .map(|offset| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset,
                sequence: (offset - first) as i32 - 1,
                timestamp: 0,
                key: None,
                value: Some(bytes::Bytes::from_static(b"v")),
                headers: Default::default(),
            })
            .collect();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(out, records.iter(), &options).unwrap();
    }

    #[test]
    fn next_offset_follows_whole_batches_and_skips_a_partial_one() {
        let mut out = BytesMut::new();
        batch(&mut out, 5, 3);
        batch(&mut out, 8, 10);
        let whole = out.len();
        assert_eq!(next_offset(&out), Some((18, whole)));
        batch(&mut out, 18, 4);
        let cut = &out[..out.len() - 3];
        assert_eq!(next_offset(cut), Some((18, whole)));
        assert_eq!(next_offset(&out[..20]), None);
        assert_eq!(next_offset(&[]), None);
    }
}
