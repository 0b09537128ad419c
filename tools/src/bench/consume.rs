//! The `consume` scenario: reads a topic from each partition's start up to
//! the end offsets seen when the run starts, one connection (and task) per
//! partition, with `GET /v1/topics/{t}/partitions/{p}/records?offset=..`.
//!
//! The run's time goes from the first request to the last answer of the
//! slowest partition. Records per answer are `next_offset − offset`; MB/s
//! counts the bytes of the JSON answers; latency is per request.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::http::{self, Conn, PartitionInfo, Target, TopicInfo};
use super::progress;
use super::report::{self, Counts, Report, RunResult};
use super::stats::{self, LatencySummary};

/// Options of `kappa-bench consume`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct ConsumeArgs {
    /// Topic to read.
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// `max_records` of each read (1..=10000).
    #[arg(long, default_value_t = 10_000)]
    pub max_records: u64,
    /// `max_bytes` of each read (1..=16777216).
    #[arg(long, default_value_t = 16_777_216)]
    pub max_bytes: u64,
    /// Stop early after this many seconds (default: read up to the end).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Repetitions; the table shows the median with min and max.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
}

/// The part of a read answer the benchmark needs (the records are skipped).
#[derive(Deserialize)]
struct ReadHead {
    next_offset: u64,
}

/// What a reader counted: the latency of every read answered with
/// records, the counts, and the reads that failed by status. Shared with
/// the `replay` scenario.
pub(super) struct ReadTally {
    /// Latency of the answered reads.
    pub histogram: Histogram<u64>,
    /// Requests, records and bytes.
    pub counts: Counts,
    /// Failed reads by status.
    pub statuses: BTreeMap<String, u64>,
}

impl ReadTally {
    /// Nothing counted yet.
    pub fn new() -> ReadTally {
        ReadTally {
            histogram: stats::new_histogram(),
            counts: Counts::default(),
            statuses: BTreeMap::new(),
        }
    }

    /// Counts a read answered after `latency` with `records` records in a
    /// `bytes`-byte answer.
    pub fn answered(&mut self, latency: Duration, records: u64, bytes: u64) {
        stats::record(&mut self.histogram, latency);
        self.counts.ok_requests += 1;
        self.counts.records += records;
        self.counts.bytes += bytes;
    }

    /// Counts a read answered `status` without progress (it ends the reader).
    pub fn failed(&mut self, status: u16) {
        *self.statuses.entry(status.to_string()).or_default() += 1;
        self.counts.failed_requests += 1;
    }
}

/// One partition's reader's result.
struct PartitionTotals {
    tally: ReadTally,
    transport_errors: u64,
    finished: Instant,
}

/// Reads one partition from its start to the end seen at the run's start.
async fn read_partition(
    mut conn: Conn,
    topic: String,
    args: ConsumeArgs,
    part: PartitionInfo,
    deadline: Option<Instant>,
    progress: Arc<AtomicU64>,
) -> PartitionTotals {
    let mut t = PartitionTotals {
        tally: ReadTally::new(),
        transport_errors: 0,
        finished: Instant::now(),
    };
    let mut offset = part.start_offset;
    while offset < part.end_offset && deadline.is_none_or(|d| Instant::now() < d) {
        let path = format!(
            "/v1/topics/{topic}/partitions/{}/records?offset={offset}&max_records={}&max_bytes={}",
            part.partition, args.max_records, args.max_bytes
        );
        let sent = Instant::now();
        let answer = match conn.get(&path).await {
            Ok(a) => a,
            Err(_) => {
                t.transport_errors += 1;
                t.tally.counts.failed_requests += 1;
                break;
            }
        };
        let done = Instant::now();
        let next = serde_json::from_slice::<ReadHead>(&answer.body).map(|h| h.next_offset);
        match next {
            Ok(next) if answer.status == 200 && next > offset => {
                t.tally
                    .answered(done - sent, next - offset, answer.body.len() as u64);
                progress.fetch_add(next - offset, Ordering::Relaxed);
                offset = next;
            }
            _ => {
                t.tally.failed(answer.status);
                break;
            }
        }
    }
    t.finished = Instant::now();
    t
}

/// One run: every non-empty partition read concurrently.
async fn run_once(
    args: &ConsumeArgs,
    target: &Target,
    info: &TopicInfo,
    label: String,
) -> anyhow::Result<RunResult> {
    let parts = info.non_empty_partitions();
    let mut conns = Vec::with_capacity(parts.len());
    for _ in &parts {
        conns.push(Conn::connect(target).await?);
    }
    let bar = progress::count_bar(label, info.records(), "records");
    let read = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let deadline = args.duration.map(|d| t0 + Duration::from_secs_f64(d));
    let handles: Vec<_> = conns
        .into_iter()
        .zip(parts)
        .map(|(conn, part)| {
            let task = read_partition(
                conn,
                args.topic.clone(),
                args.clone(),
                part,
                deadline,
                read.clone(),
            );
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
        totals.push(handle.await.context("reader task panicked")?);
    }
    Ok(merge(totals, t0))
}

/// Adds up the partitions' results; the run ends with the last reader.
fn merge(totals: Vec<PartitionTotals>, t0: Instant) -> RunResult {
    let mut histogram = stats::new_histogram();
    let mut counts = Counts::default();
    let mut statuses = BTreeMap::new();
    let (mut errors, mut end) = (0, t0);
    for t in totals {
        let t_counts = &t.tally.counts;
        histogram
            .add(&t.tally.histogram)
            .expect("same histogram bounds");
        counts.ok_requests += t_counts.ok_requests;
        counts.records += t_counts.records;
        counts.bytes += t_counts.bytes;
        counts.failed_requests += t_counts.failed_requests;
        for (s, n) in t.tally.statuses {
            *statuses.entry(s).or_default() += n;
        }
        errors += t.transport_errors;
        end = end.max(t.finished);
    }
    let latency = LatencySummary::from_histogram(&histogram);
    RunResult::new(counts, end - t0, latency, statuses, errors)
}

/// Checks the read options, then describes `topic`, which must exist and
/// hold records; answers the connection (held for the runs, as before the
/// read scenarios shared this) and the topic. Shared with `replay`.
pub(super) async fn readable_topic(
    target: &Target,
    topic: &str,
    max_records: u64,
    max_bytes: u64,
    runs: usize,
) -> anyhow::Result<(Conn, TopicInfo)> {
    if !(1..=10_000).contains(&max_records) || !(1..=16 << 20).contains(&max_bytes) {
        bail!("--max-records must be in 1..=10000 and --max-bytes in 1..=16777216");
    }
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut conn = Conn::connect(target).await?;
    let info = http::describe_topic(&mut conn, topic)
        .await?
        .with_context(|| format!("topic {topic:?} does not exist"))?;
    if info.records() == 0 {
        bail!("topic {topic:?} is empty: produce to it first");
    }
    Ok((conn, info))
}

/// Runs `run_once` `runs` times with labels `"{scenario} run i/n"`, each
/// stamped with its wall-clock span and summed up on stderr. Shared with
/// `replay`.
pub(super) async fn repeat_runs<F, Fut>(
    scenario: &str,
    runs: usize,
    mut run_once: F,
) -> anyhow::Result<Vec<RunResult>>
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = anyhow::Result<RunResult>>,
{
    let mut results = Vec::with_capacity(runs);
    for i in 0..runs {
        let label = format!("{scenario} run {}/{runs}", i + 1);
        let started = report::unix_ms();
        let result = run_once(label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!(
            "{label}: {} records in {:.2} s = {} records/s, {} failed requests",
            report::thousands(result.records as f64),
            result.elapsed_s,
            report::thousands(result.records as f64 / result.elapsed_s.max(1e-9)),
            result.failed_requests()
        );
        results.push(result);
    }
    Ok(results)
}

/// Runs the consume scenario `--runs` times and reports.
pub async fn run(args: &ConsumeArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    let (_conn, info) = readable_topic(
        target,
        &args.topic,
        args.max_records,
        args.max_bytes,
        args.runs,
    )
    .await?;
    let runs = repeat_runs("consume", args.runs, |label| {
        run_once(args, target, &info, label)
    })
    .await?;
    let bytes: u64 = info.partitions.iter().map(|p| p.bytes).sum();
    let notes = vec![format!(
        "the topic held {} records ({} MB on disk) when the runs started; MB/s counts JSON answer bytes",
        report::thousands(info.records() as f64),
        format_args!("{:.1}", bytes as f64 / 1e6)
    )];
    Ok(Report {
        scenario: "consume".into(),
        title: format!(
            "topic `{}` ({}), one connection per partition, max_records={} max_bytes={}",
            args.topic,
            info.layout(),
            args.max_records,
            args.max_bytes
        ),
        command,
        params: serde_json::to_value(args)?,
        notes,
        summary: report::summarize(&runs),
        runs,
    })
}
