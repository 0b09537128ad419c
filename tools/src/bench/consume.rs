//! The `consume` scenario: reads a topic from each partition's start up to
//! the end offsets seen when the run starts, one connection (and task) per
//! partition, with `GET /v1/topics/{t}/partitions/{p}/records?offset=..`.
//!
//! The run's time goes from the first request to the last answer of the
//! slowest partition. Records per answer are `next_offset − offset`; MB/s
//! counts the bytes of the JSON answers; latency is per request.

use std::collections::BTreeMap;
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

/// One partition's reader's result.
struct PartitionTotals {
    histogram: Histogram<u64>,
    counts: Counts,
    statuses: BTreeMap<String, u64>,
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
        histogram: stats::new_histogram(),
        counts: Counts::default(),
        statuses: BTreeMap::new(),
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
                t.counts.failed_requests += 1;
                break;
            }
        };
        let done = Instant::now();
        let next = serde_json::from_slice::<ReadHead>(&answer.body).map(|h| h.next_offset);
        match next {
            Ok(next) if answer.status == 200 && next > offset => {
                stats::record(&mut t.histogram, done - sent);
                t.counts.ok_requests += 1;
                t.counts.records += next - offset;
                t.counts.bytes += answer.body.len() as u64;
                progress.fetch_add(next - offset, Ordering::Relaxed);
                offset = next;
            }
            _ => {
                *t.statuses.entry(answer.status.to_string()).or_default() += 1;
                t.counts.failed_requests += 1;
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
    let parts: Vec<PartitionInfo> = info
        .partitions
        .iter()
        .filter(|p| p.end_offset > p.start_offset)
        .cloned()
        .collect();
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
        histogram.add(&t.histogram).expect("same histogram bounds");
        counts.ok_requests += t.counts.ok_requests;
        counts.records += t.counts.records;
        counts.bytes += t.counts.bytes;
        counts.failed_requests += t.counts.failed_requests;
        for (s, n) in t.statuses {
            *statuses.entry(s).or_default() += n;
        }
        errors += t.transport_errors;
        end = end.max(t.finished);
    }
    let latency = LatencySummary::from_histogram(&histogram);
    RunResult::new(counts, end - t0, latency, statuses, errors)
}

/// Runs the consume scenario `--runs` times and reports.
pub async fn run(args: &ConsumeArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    if !(1..=10_000).contains(&args.max_records) || !(1..=16 << 20).contains(&args.max_bytes) {
        bail!("--max-records must be in 1..=10000 and --max-bytes in 1..=16777216");
    }
    if args.runs == 0 {
        bail!("--runs must be at least 1");
    }
    let mut conn = Conn::connect(target).await?;
    let info = http::describe_topic(&mut conn, &args.topic)
        .await?
        .with_context(|| format!("topic {:?} does not exist", args.topic))?;
    if info.records() == 0 {
        bail!("topic {:?} is empty: produce to it first", args.topic);
    }
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        let label = format!("consume run {}/{}", i + 1, args.runs);
        let started = report::unix_ms();
        let result = run_once(args, target, &info, label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!(
            "{label}: {} records in {:.2} s = {} records/s, {} failed requests",
            report::thousands(result.records as f64),
            result.elapsed_s,
            report::thousands(result.records as f64 / result.elapsed_s.max(1e-9)),
            result.failed_requests()
        );
        runs.push(result);
    }
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
