//! The `rebuild` scenario: how fast a view is rebuilt from the start of its
//! log, the Kappa way (a replay builds version n+1 next to n and swaps it in
//! when it has caught up).
//!
//! Setup: a topic holding `--events` records (produced now, flat out, not
//! measured; or an existing topic as it is with `--reuse-topic`), a stream
//! declared over it and an aggregate view (`COUNT(*)` per key); then the
//! view's first build is awaited. Each run then sends
//! `POST /v1/views/{view}/replay {"from":"earliest"}` and polls
//! `GET /v1/views/{view}` every `--poll-ms` (this polling is the
//! measurement, not a synchronization) until the new version is the served
//! one. Rebuild time runs from sending the replay to the first poll that
//! sees the new version served, so it is at most `--poll-ms` late; events/s
//! divides the topic's records by it. Every poll's build progress (done,
//! total, the server's rate) is kept in the JSON (`runs[].details`).

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde::Serialize;

use super::http::{self, Conn, Target};
use super::load::{self, LoadSpec};
use super::produce::Fsync;
use super::progress;
use super::report::{self, Counts, Metric, Report, RunResult};
use super::stats::{self, LatencySummary};
use super::views::{self, ViewInfo};

/// Options of `kappa-bench rebuild`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct RebuildArgs {
    /// Topic to load (or reuse) and build the view from.
    #[arg(long, default_value = "bench_rebuild_events")]
    pub topic: String,
    /// Name of the stream declared over the topic.
    #[arg(long, default_value = "bench_rebuild_stream")]
    pub stream: String,
    /// Name of the aggregate view.
    #[arg(long, default_value = "bench_rebuild")]
    pub view: String,
    /// Events to load into the topic (rounded up to whole batches).
    #[arg(long, default_value_t = 1_000_000)]
    pub events: u64,
    /// Use the topic as it is when it exists (no load); it is kept afterwards.
    #[arg(long)]
    pub reuse_topic: bool,
    /// Drop the view and stream and delete the topic first if they exist.
    #[arg(long, conflicts_with = "reuse_topic")]
    pub recreate: bool,
    /// Leave the view, stream and topic in place afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Aggregate per tumbling window of this many seconds (default: per key only).
    #[arg(long)]
    pub tumbling_secs: Option<u64>,
    /// Partitions of a created topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// fsync policy of a created topic.
    #[arg(long, value_enum, default_value_t = Fsync::Never)]
    pub fsync: Fsync,
    /// Records per produce request while loading.
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Connections while loading.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Approximate size of each record's value (JSON text), in bytes.
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// Key cardinality (view rows).
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Seed of the key sequence.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Interval between polls of the view's progress, ms.
    #[arg(long, default_value_t = 200)]
    pub poll_ms: u64,
    /// Longest wait for one build, seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    /// Replays, one after the other; the table shows the median with min and max.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
}

/// One poll of a build's progress.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ProgressSample {
    /// Since the replay was sent, ms.
    pub t_ms: u64,
    /// Records processed by the build.
    pub done: u64,
    /// Records it has to process.
    pub total: u64,
    /// The server's rate over its last seconds, records/s.
    pub rate: f64,
}

/// Polls the view until `done(view)` says so; fails on a failure of
/// `version`, or after `timeout`. `sample` sees every description.
async fn poll_until(
    conn: &mut Conn,
    args: &RebuildArgs,
    version: u64,
    mut sample: impl FnMut(&ViewInfo),
    done: impl Fn(&ViewInfo) -> bool,
) -> anyhow::Result<Instant> {
    let started = Instant::now();
    let timeout = Duration::from_secs(args.timeout_secs);
    let mut tick = tokio::time::interval(Duration::from_millis(args.poll_ms.max(1)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let info = views::describe_view(conn, &args.view)
            .await?
            .with_context(|| format!("view {:?} disappeared", args.view))?;
        let now = Instant::now();
        if let Some(f) = info.failure.as_ref().filter(|f| f.version == version) {
            bail!("version {version} of {} failed: {}", args.view, f.reason);
        }
        sample(&info);
        if done(&info) {
            return Ok(now);
        }
        if now - started > timeout {
            bail!(
                "version {version} of {} not served after {timeout:?} (status {})",
                args.view,
                info.status
            );
        }
    }
}

/// Creates (or reuses) the topic and loads it; returns its records and
/// whether this run created it.
async fn prepare_topic(
    args: &RebuildArgs,
    conn: &mut Conn,
    target: &Target,
) -> anyhow::Result<(u64, String, bool)> {
    let existing = http::describe_topic(conn, &args.topic).await?;
    if let (Some(info), true) = (&existing, args.reuse_topic) {
        if info.records() == 0 {
            bail!("--reuse-topic: topic {:?} is empty", args.topic);
        }
        eprintln!(
            "reusing topic {} ({} records)",
            args.topic,
            report::thousands(info.records() as f64)
        );
        return Ok((info.records(), info.layout(), false));
    }
    if existing.is_some() {
        if !args.recreate {
            bail!(
                "topic {:?} exists: pass --reuse-topic to use it or --recreate to replace it",
                args.topic
            );
        }
        views::drop_view_and_stream(conn, &args.stream, &args.view).await?;
        http::delete_topic(conn, &args.topic).await?;
    }
    let body = serde_json::json!({
        "name": args.topic, "partitions": args.partitions, "fsync": args.fsync,
    });
    http::create_topic(conn, &body).await?;
    let spec = LoadSpec {
        topic: args.topic.clone(),
        records: args.events,
        batch: args.batch,
        connections: args.connections,
        record_bytes: args.record_bytes,
        keys: args.keys,
        seed: args.seed,
    };
    load::load(spec, target).await?;
    let info = http::describe_topic(conn, &args.topic)
        .await?
        .context("the topic disappeared while loading")?;
    Ok((info.records(), info.layout(), true))
}

/// Defines the stream and view and waits for the first build; returns its time.
async fn define_view(
    args: &RebuildArgs,
    conn: &mut Conn,
    records: u64,
) -> anyhow::Result<Duration> {
    if views::describe_view(conn, &args.view).await?.is_some() {
        if !(args.recreate || args.reuse_topic) {
            bail!("view {:?} exists: pass --recreate", args.view);
        }
        views::drop_view_and_stream(conn, &args.stream, &args.view).await?;
    }
    let sql = views::define_sql(&args.topic, &args.stream, &args.view, args.tumbling_secs);
    let t0 = Instant::now();
    views::statements(conn, &sql).await?;
    let bar = progress::count_bar(format!("first build of {}", args.view), records, "records");
    let caught_up = poll_until(
        conn,
        args,
        1,
        |v| bar.set_position(v.served_version.processed),
        |v| v.served_version.lag == 0 && v.building_version.is_none(),
    )
    .await;
    bar.finish_and_clear();
    Ok(caught_up? - t0)
}

/// One replay, measured.
async fn run_once(
    args: &RebuildArgs,
    conn: &mut Conn,
    records: u64,
    label: String,
) -> anyhow::Result<RunResult> {
    let t0 = Instant::now();
    let version = views::replay_earliest(conn, &args.view).await?;
    let bar = progress::count_bar(label, records, "records");
    let mut samples: Vec<ProgressSample> = Vec::new();
    let served = poll_until(
        conn,
        args,
        version,
        |v| {
            let Some(b) = v
                .building_version
                .as_ref()
                .filter(|b| b.version.version == version)
            else {
                return;
            };
            let p = &b.progress;
            bar.set_length(p.total);
            bar.set_position(p.done);
            samples.push(ProgressSample {
                t_ms: t0.elapsed().as_millis() as u64,
                done: p.done,
                total: p.total,
                rate: p.rate_records_per_second,
            });
        },
        |v| v.served_version.version >= version,
    )
    .await;
    bar.finish_and_clear();
    let elapsed = served? - t0;
    let total = records;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let counts = Counts {
        records: total,
        ..Counts::default()
    };
    let latency = LatencySummary::from_histogram(&stats::new_histogram());
    let mut result = RunResult::new(counts, elapsed, latency, Default::default(), 0);
    result.metrics = vec![
        Metric::new("rebuild time", "s", false, elapsed.as_secs_f64()),
        Metric::new("events/s", "/s", true, total as f64 / secs),
        Metric::new("progress samples", "count", true, samples.len() as f64),
    ];
    result.details = serde_json::json!({ "version": version, "progress": samples });
    Ok(result)
}

/// Loads (or reuses) the topic, builds the view, replays it `--runs` times.
pub async fn run(args: &RebuildArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    if args.runs == 0 || args.events == 0 || args.keys == 0 || args.batch == 0 {
        bail!("--runs, --events, --keys and --batch must be at least 1");
    }
    let mut conn = Conn::connect(target).await?;
    let (records, layout, created) = prepare_topic(args, &mut conn, target).await?;
    let measured = measure(args, &mut conn, records).await;
    if !args.keep {
        let mut conn = Conn::connect(target).await?;
        let mut cleaned = views::drop_view_and_stream(&mut conn, &args.stream, &args.view).await;
        if created && cleaned.is_ok() {
            cleaned = http::delete_topic(&mut conn, &args.topic).await.map(|_| ());
        }
        if measured.is_ok() {
            cleaned.context("cleaning up (pass --keep to leave the view in place)")?;
        }
    }
    let (runs, first_build) = measured?;
    let notes = vec![
        format!(
            "the topic held {} records; the view's first build (CREATE TABLE .. AS) took {:.2} s",
            report::thousands(records as f64),
            first_build.as_secs_f64()
        ),
        format!(
            "rebuild time = `POST /v1/views/{}/replay {{\"from\":\"earliest\"}}` → first poll (every {} ms) seeing the new version served",
            args.view, args.poll_ms
        ),
    ];
    let window = args
        .tumbling_secs
        .map_or(String::new(), |s| format!(" per {s} s tumbling window"));
    Ok(Report {
        scenario: "rebuild".into(),
        title: format!(
            "topic `{}` ({layout}, {} records) → view `{}` = COUNT(*) by key{window}, replayed from earliest",
            args.topic,
            report::thousands(records as f64),
            args.view
        ),
        command,
        params: serde_json::to_value(args)?,
        notes,
        summary: report::summarize(&runs),
        runs,
    })
}

async fn measure(
    args: &RebuildArgs,
    conn: &mut Conn,
    records: u64,
) -> anyhow::Result<(Vec<RunResult>, Duration)> {
    let first_build = define_view(args, conn, records).await?;
    eprintln!(
        "first build of {}: {:.2} s",
        args.view,
        first_build.as_secs_f64()
    );
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        let label = format!("rebuild run {}/{}", i + 1, args.runs);
        let started = report::unix_ms();
        let result = run_once(args, conn, records, label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!(
            "{label}: {} records in {:.2} s = {} events/s",
            report::thousands(records as f64),
            result.elapsed_s,
            report::thousands(records as f64 / result.elapsed_s.max(1e-9))
        );
        runs.push(result);
    }
    Ok((runs, first_build))
}
