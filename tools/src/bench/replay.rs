//! The `replay` scenario: a consumer re-reading a topic from the start, the
//! way a consumer group replays after a reset. Each run resets `--group` to
//! `earliest` (`POST /v1/groups/{group}/reset`), then reads
//! `GET /v1/groups/{group}/topics/{topic}/records?commit=true` (one
//! connection; every read commits its `next_offsets`, as an at-most-once
//! consumer would) until every partition's position reaches the end offset
//! it had when the run started.
//!
//! Unlike `consume` (one connection per partition, explicit offsets, no
//! group), this measures the group path: one read covering all partitions,
//! the committed-position lookup and a durable commit per read. Records per
//! read are the advance of `next_offsets`; MB/s counts JSON answer bytes;
//! latency is per read (including its commit). The group is left behind (the
//! API has no group deletion); its offsets are just committed positions.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use serde::{Deserialize, Serialize};

use super::consume::{readable_topic, repeat_runs, ReadTally};
use super::http::{Conn, Target};
use super::progress;
use super::report::{self, Report, RunResult};
use super::stats::LatencySummary;

/// Options of `kappa-bench replay`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct ReplayArgs {
    /// Topic to re-read.
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// Consumer group reset to earliest before each run.
    #[arg(long, default_value = "kappa-bench-replay")]
    pub group: String,
    /// `max_records` of each read, over all partitions (1..=10000).
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

#[derive(Deserialize)]
struct PartitionOffset {
    partition: u32,
    offset: u64,
}

/// The part of a group read (or reset) answer the benchmark needs.
#[derive(Deserialize)]
struct GroupHead {
    #[serde(alias = "offsets")]
    next_offsets: Vec<PartitionOffset>,
}

fn positions(head: GroupHead) -> BTreeMap<u32, u64> {
    head.next_offsets
        .into_iter()
        .map(|o| (o.partition, o.offset))
        .collect()
}

/// Resets the group to earliest; answers each partition's new position.
async fn reset(conn: &mut Conn, args: &ReplayArgs) -> anyhow::Result<BTreeMap<u32, u64>> {
    let body = serde_json::json!({"topic": args.topic, "to": "earliest"});
    let answer = conn
        .request(
            Method::POST,
            &format!("/v1/groups/{}/reset", args.group),
            Some("application/json"),
            Bytes::from(serde_json::to_vec(&body)?),
        )
        .await?;
    if !answer.is_success() {
        return Err(answer.error(&format!("resetting group {}", args.group)));
    }
    Ok(positions(serde_json::from_slice(&answer.body)?))
}

/// One run: reset, then read with commits up to the end offsets.
async fn run_once(
    args: &ReplayArgs,
    target: &Target,
    ends: &BTreeMap<u32, u64>,
    label: String,
) -> anyhow::Result<RunResult> {
    let mut conn = Conn::connect(target).await?;
    let mut at = reset(&mut conn, args).await?;
    let total: u64 = ends
        .iter()
        .map(|(p, e)| e - at.get(p).copied().unwrap_or(0))
        .sum();
    let bar = progress::count_bar(label, total, "records");
    let path = format!(
        "/v1/groups/{}/topics/{}/records?max_records={}&max_bytes={}&commit=true",
        args.group, args.topic, args.max_records, args.max_bytes
    );
    let mut tally = ReadTally::new();
    let t0 = Instant::now();
    let deadline = args.duration.map(|d| t0 + Duration::from_secs_f64(d));
    let behind =
        |at: &BTreeMap<u32, u64>| ends.iter().any(|(p, e)| at.get(p).is_none_or(|o| o < e));
    while behind(&at) && deadline.is_none_or(|d| Instant::now() < d) {
        let sent = Instant::now();
        let answer = conn.get(&path).await?;
        let done = Instant::now();
        let next = serde_json::from_slice::<GroupHead>(&answer.body).map(positions);
        let advance = match &next {
            Ok(next) if answer.status == 200 => next
                .iter()
                .map(|(p, o)| o.saturating_sub(at.get(p).copied().unwrap_or(0)))
                .sum::<u64>(),
            _ => 0,
        };
        if advance == 0 {
            tally.failed(answer.status);
            break;
        }
        tally.answered(done - sent, advance, answer.body.len() as u64);
        bar.inc(advance);
        at = next.expect("matched Ok above");
    }
    bar.finish_and_clear();
    let latency = LatencySummary::from_histogram(&tally.histogram);
    Ok(RunResult::new(
        tally.counts,
        t0.elapsed(),
        latency,
        tally.statuses,
        0,
    ))
}

/// Runs the replay scenario `--runs` times and reports.
pub async fn run(args: &ReplayArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    let (_conn, info) = readable_topic(
        target,
        &args.topic,
        args.max_records,
        args.max_bytes,
        args.runs,
    )
    .await?;
    let ends: BTreeMap<u32, u64> = info
        .partitions
        .iter()
        .map(|p| (p.partition, p.end_offset))
        .collect();
    let runs = repeat_runs("replay", args.runs, |label| {
        run_once(args, target, &ends, label)
    })
    .await?;
    let notes = vec![format!(
        "the topic held {} records when the runs started; each run resets group `{}` to earliest and reads with commit=true",
        report::thousands(info.records() as f64),
        args.group
    )];
    Ok(Report {
        scenario: "replay".into(),
        title: format!(
            "topic `{}` ({}) re-read through consumer group `{}`, max_records={} max_bytes={}",
            args.topic,
            info.layout(),
            args.group,
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
