//! The `produce` scenario: `--connections` tasks, each with its own
//! keep-alive HTTP/1.1 connection, send NDJSON bodies of `--batch` records
//! back to back (or paced to `--rate` records/s in total) to
//! `POST /v1/topics/{topic}/records`.
//!
//! Timing: everything answered during `--warmup` is not counted. A request
//! counts when its answer arrives inside the measured window, which ends
//! after `--duration` seconds, or at the `--requests`-th counted answer;
//! rates divide by the window's length. Latency is from sending a request
//! to having read its whole answer; with `--retry`, a request answered 503
//! is sent again after its `Retry-After`, and its latency includes the wait.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::Method;
use indicatif::ProgressBar;
use serde::Serialize;
use tokio::task::JoinHandle;

use super::body::{BodyPool, BodySpec};
use super::http::{self, Conn, Target};
use super::keys::{KeyGen, Skew};
use super::progress;
use super::report::{self, Counts, Report, RunResult};
use super::stats::{self, LatencySummary};

/// Most bytes of record values the body pool may hold.
const MAX_POOL_VALUE_BYTES: usize = 256 << 20;

/// A topic's fsync policy, as `POST /v1/topics` takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fsync {
    /// Acknowledge after `fdatasync`.
    Always,
    /// `fdatasync` every `--fsync-interval-ms`.
    Interval,
    /// Leave it to the kernel.
    Never,
}

/// Options of `kappa-bench produce`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct ProduceArgs {
    /// Topic to produce to (must exist unless --create).
    #[arg(long, default_value = "bench")]
    pub topic: String,
    /// Create the topic first (with --partitions, --fsync, --fsync-interval-ms).
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
    /// fsync interval of the created topic (for --fsync interval).
    #[arg(long, default_value_t = 100)]
    pub fsync_interval_ms: u64,
    /// Concurrent connections, each sending one request at a time.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
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
    /// Target records/s over all connections (default: as fast as possible).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Measured seconds after the warm-up [default: 10, none with --requests alone].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many counted requests.
    #[arg(long)]
    pub requests: Option<u64>,
    /// Seconds of load before measuring.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Retry requests answered 503 after their Retry-After (else they fail).
    #[arg(long)]
    pub retry: bool,
    /// Repetitions; the table shows the median with min and max.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
    /// Records pre-built into distinct request bodies, cycled by the connections.
    #[arg(long, default_value_t = 100_000)]
    pub pool_records: usize,
}

impl ProduceArgs {
    fn validate(&self) -> anyhow::Result<()> {
        if !(1..=10_000).contains(&self.batch) {
            bail!("--batch must be in 1..=10000, got {}", self.batch);
        }
        if self.connections == 0 || self.runs == 0 || self.partitions == 0 {
            bail!("--connections, --runs and --partitions must be at least 1");
        }
        if self.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            bail!("--rate must be a positive number of records/s");
        }
        if self.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
            bail!("--duration must be a positive number of seconds");
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            bail!("--warmup must be a non-negative number of seconds");
        }
        if self.requests == Some(0) {
            bail!("--requests must be at least 1");
        }
        Ok(())
    }

    /// The measured window's length limit: `--duration`, else 10 s unless
    /// `--requests` alone bounds the run.
    pub fn duration_limit(&self) -> Option<Duration> {
        duration_limit(self.duration, self.requests)
    }

    fn title(&self, layout: &str) -> String {
        let keys = if self.keys == 0 {
            "no keys".to_string()
        } else {
            format!("{} keys {}", self.keys, self.skew)
        };
        let rate = self.rate.map_or("flat out".to_string(), |r| {
            format!("paced to {r} records/s")
        });
        let c = self.connections;
        format!(
            "topic `{}` ({layout}); {c} connection{}, batch {} × ~{} B values, {keys}, {rate}",
            self.topic,
            if c == 1 { "" } else { "s" },
            self.batch,
            self.record_bytes,
        )
    }
}

/// The measured window's length limit of a load run: `duration` seconds,
/// else 10 s unless a `count` limit alone bounds the run. Shared with `e2e`.
pub(super) fn duration_limit(duration: Option<f64>, count: Option<u64>) -> Option<Duration> {
    match (duration, count) {
        (Some(d), _) => Some(Duration::from_secs_f64(d)),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(10)),
    }
}

/// Paces requests to a target rate: request `i` is due when the records
/// of the requests before it would have taken at `rate`.
#[derive(Debug)]
pub struct Pacer {
    start: Instant,
    rate: f64,
    reserved: AtomicU64,
}

impl Pacer {
    /// A pacer for `rate` records/s starting at `start`.
    pub fn new(start: Instant, rate: f64) -> Pacer {
        Pacer {
            start,
            rate,
            reserved: AtomicU64::new(0),
        }
    }

    /// Reserves `records` and returns when they may be sent.
    pub fn due(&self, records: u64) -> Instant {
        let before = self.reserved.fetch_add(records, Ordering::Relaxed);
        self.start + pace_offset(before, self.rate)
    }

    /// Reserves `records` and sleeps until they may be sent, or until
    /// `deadline` if that comes first.
    pub async fn wait_turn(&self, records: u64, deadline: Option<Instant>) {
        let due = self.due(records);
        let wake = deadline.map_or(due, |d| due.min(d));
        tokio::time::sleep_until(wake.into()).await;
    }
}

/// Time at which `records` records have been sent at `rate` records/s.
pub fn pace_offset(records: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(records as f64 / rate)
}

/// State shared by the connection tasks of one run.
struct Shared {
    pool: Arc<BodyPool>,
    target: Target,
    path: String,
    batch: u64,
    retry: bool,
    pacer: Option<Pacer>,
    window_start: Instant,
    deadline: Option<Instant>,
    limit: Option<u64>,
    stop: AtomicBool,
    /// Answers counted in the window (for `--requests`).
    counted: AtomicU64,
    /// When the `--requests`-th answer came, in ns after the window start.
    end_ns: AtomicU64,
    /// Records and bytes acknowledged in the window (for the progress bar).
    records: AtomicU64,
    bytes: AtomicU64,
}

impl Shared {
    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    fn after_warmup(&self, at: Instant) -> bool {
        at >= self.window_start
    }

    /// Whether an answer that arrived at `done` counts; stops the run once
    /// the window is over.
    fn claim(&self, done: Instant) -> bool {
        if done < self.window_start {
            return false;
        }
        if self.deadline.is_some_and(|d| done > d) {
            self.stop.store(true, Ordering::Relaxed);
            return false;
        }
        let Some(limit) = self.limit else {
            return true;
        };
        let k = self.counted.fetch_add(1, Ordering::Relaxed);
        if k + 1 >= limit {
            self.stop.store(true, Ordering::Relaxed);
        }
        if k + 1 == limit {
            let ns = (done - self.window_start).as_nanos() as u64;
            self.end_ns.store(ns.max(1), Ordering::Relaxed);
        }
        k < limit
    }

    /// Length of the measured window once the run is over.
    fn elapsed(&self) -> Duration {
        window_elapsed(&self.end_ns, self.window_start, self.deadline)
    }
}

/// Length of a measured window that opened at `window_start`: up to the
/// count limit's answer (`end_ns` after the start, 0 if not reached), else
/// to `deadline`, else until now. Shared with `e2e`.
pub(super) fn window_elapsed(
    end_ns: &AtomicU64,
    window_start: Instant,
    deadline: Option<Instant>,
) -> Duration {
    match end_ns.load(Ordering::Relaxed) {
        0 => match deadline {
            Some(d) => d - window_start,
            None => Instant::now().saturating_duration_since(window_start),
        },
        ns => Duration::from_nanos(ns),
    }
}

/// What one connection task counted; failed answers by status, keyed by
/// `K` (`u16` here, a labelled `String` in the `e2e` scenario, which shares
/// this).
pub(super) struct Totals<K = u16> {
    /// Latency of the acknowledged requests.
    pub histogram: Histogram<u64>,
    /// Requests, records and bytes.
    pub counts: Counts,
    /// Failed answers by status.
    pub statuses: BTreeMap<K, u64>,
    /// Connections refused or broken.
    pub transport_errors: u64,
}

impl<K: Ord> Totals<K> {
    /// Nothing counted yet.
    pub fn new() -> Totals<K> {
        Totals {
            histogram: stats::new_histogram(),
            counts: Counts::default(),
            statuses: BTreeMap::new(),
            transport_errors: 0,
        }
    }

    /// Counts a request of `records` records in `bytes` bytes acknowledged
    /// after `latency`.
    pub fn acknowledged(&mut self, latency: Duration, records: u64, bytes: u64) {
        stats::record(&mut self.histogram, latency);
        self.counts.ok_requests += 1;
        self.counts.records += records;
        self.counts.bytes += bytes;
    }

    /// Adds `other`'s counts to these.
    pub fn merge(&mut self, other: Totals<K>) {
        self.histogram
            .add(&other.histogram)
            .expect("same histogram bounds");
        self.counts.ok_requests += other.counts.ok_requests;
        self.counts.records += other.counts.records;
        self.counts.bytes += other.counts.bytes;
        self.counts.failed_requests += other.counts.failed_requests;
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        self.transport_errors += other.transport_errors;
    }
}

impl Totals {
    fn into_result(self, elapsed: Duration) -> RunResult {
        let latency = LatencySummary::from_histogram(&self.histogram);
        let statuses = self
            .statuses
            .into_iter()
            .map(|(s, n)| (s.to_string(), n))
            .collect();
        RunResult::new(
            self.counts,
            elapsed,
            latency,
            statuses,
            self.transport_errors,
        )
    }
}

/// How a request ended.
enum Outcome {
    Acknowledged,
    Failed,
}

/// Sends `body` until it is acknowledged, fails, or (with `--retry`) the
/// run ends while it waits out a 503. Reconnects after transport errors.
async fn send(shared: &Shared, conn: &mut Option<Conn>, body: &Bytes, t: &mut Totals) -> Outcome {
    loop {
        if conn.as_ref().is_none_or(Conn::is_closed) {
            match Conn::connect(&shared.target).await {
                Ok(c) => *conn = Some(c),
                Err(_) => {
                    t.transport_errors += u64::from(shared.after_warmup(Instant::now()));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    return Outcome::Failed;
                }
            }
        }
        let c = conn.as_mut().expect("connected above");
        let answer = c
            .request(
                Method::POST,
                &shared.path,
                Some("application/x-ndjson"),
                body.clone(),
            )
            .await;
        let answer = match answer {
            Ok(a) if a.is_success() => return Outcome::Acknowledged,
            Ok(a) => a,
            Err(_) => {
                *conn = None;
                t.transport_errors += u64::from(shared.after_warmup(Instant::now()));
                return Outcome::Failed;
            }
        };
        if shared.after_warmup(Instant::now()) {
            *t.statuses.entry(answer.status).or_default() += 1;
        }
        if answer.status != 503 || !shared.retry || shared.should_stop() {
            return Outcome::Failed;
        }
        let wait = answer.retry_after.unwrap_or(Duration::from_secs(1));
        tokio::time::sleep(wait).await;
    }
}

/// One connection's loop: take a body, wait for its turn, send, count.
async fn connection_task(shared: Arc<Shared>, conn: Conn) -> Totals {
    let mut totals = Totals::new();
    let mut conn = Some(conn);
    while !shared.should_stop() {
        let body = shared.pool.next();
        if let Some(pacer) = &shared.pacer {
            pacer.wait_turn(shared.batch, shared.deadline).await;
            if shared.should_stop() {
                break;
            }
        }
        let sent = Instant::now();
        let outcome = send(&shared, &mut conn, &body, &mut totals).await;
        let done = Instant::now();
        if !shared.claim(done) {
            continue;
        }
        match outcome {
            Outcome::Acknowledged => {
                totals.acknowledged(done - sent, shared.batch, body.len() as u64);
                shared.records.fetch_add(shared.batch, Ordering::Relaxed);
                shared.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
            }
            Outcome::Failed => totals.counts.failed_requests += 1,
        }
    }
    totals
}

/// Refreshes the progress bar until every connection task has ended.
async fn watch(shared: &Shared, handles: &[JoinHandle<Totals>], bar: &ProgressBar, t0: Instant) {
    while !handles.iter().all(JoinHandle::is_finished) {
        tokio::time::sleep(progress::TICK).await;
        let now = Instant::now();
        match shared.limit.filter(|_| shared.deadline.is_none()) {
            Some(_) => bar.set_position(shared.counted.load(Ordering::Relaxed)),
            None => bar.set_position((now - t0).as_millis() as u64),
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
    args: &ProduceArgs,
    target: &Target,
    pool: Arc<BodyPool>,
    label: String,
) -> anyhow::Result<RunResult> {
    let mut conns = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        conns.push(Conn::connect(target).await?);
    }
    let t0 = Instant::now();
    let warmup = Duration::from_secs_f64(args.warmup);
    let window_start = t0 + warmup;
    let deadline = args.duration_limit().map(|d| window_start + d);
    let shared = Arc::new(Shared {
        pool,
        target: target.clone(),
        path: format!("/v1/topics/{}/records", args.topic),
        batch: args.batch as u64,
        retry: args.retry,
        pacer: args.rate.map(|r| Pacer::new(t0, r)),
        window_start,
        deadline,
        limit: args.requests,
        stop: AtomicBool::new(false),
        counted: AtomicU64::new(0),
        end_ns: AtomicU64::new(0),
        records: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
    });
    let bar = match (deadline, args.requests) {
        (Some(d), _) => progress::time_bar(label, d - t0),
        (None, Some(n)) => progress::count_bar(label, n, "requests"),
        (None, None) => unreachable!("duration_limit bounds runs without --requests"),
    };
    let handles: Vec<_> = conns
        .into_iter()
        .map(|c| tokio::spawn(connection_task(shared.clone(), c)))
        .collect();
    watch(&shared, &handles, &bar, t0).await;
    let mut totals = Totals::new();
    for handle in handles {
        totals.merge(handle.await.context("connection task panicked")?);
    }
    bar.finish_and_clear();
    Ok(totals.into_result(shared.elapsed()))
}

/// The topic before a run (see [`http::prepare_topic`]).
async fn prepare_topic(args: &ProduceArgs, target: &Target, first_run: bool) -> anyhow::Result<()> {
    let create = args.create.then(|| {
        serde_json::json!({
            "name": args.topic,
            "partitions": args.partitions,
            "fsync": args.fsync,
            "fsync_interval_ms": args.fsync_interval_ms,
        })
    });
    http::prepare_topic(
        target,
        &args.topic,
        create.as_ref(),
        args.recreate,
        first_run,
    )
    .await?;
    Ok(())
}

/// The body pool for `args`, its size capped at [`MAX_POOL_VALUE_BYTES`].
fn build_pool(args: &ProduceArgs) -> BodyPool {
    let keys = (args.keys > 0).then(|| KeyGen::new(args.keys, args.skew, args.seed));
    let spec = BodySpec {
        batch: args.batch,
        record_bytes: args.record_bytes,
        keys,
    };
    let cap = (MAX_POOL_VALUE_BYTES / args.record_bytes.max(1)).max(1);
    BodyPool::build(spec, args.pool_records.min(cap))
}

/// The progress line of one produce run: rate, latency, failures.
pub(super) fn run_line(label: &str, result: &RunResult) -> String {
    format!(
        "{label}: {} records/s, p50 {:.3} ms, p99 {:.3} ms, {} failed requests",
        report::thousands(result.records as f64 / result.elapsed_s.max(1e-9)),
        result.latency.p50_ms,
        result.latency.p99_ms,
        result.failed_requests()
    )
}

/// The report's note on what the topic holds after the produce runs.
pub(super) fn topic_after_runs(info: &http::TopicInfo, runs: &[RunResult]) -> String {
    format!(
        "after the last run the topic holds {} records ({} acknowledged in its measured window; \
         the rest came in the warm-up or after the window)",
        report::thousands(info.records() as f64),
        report::thousands(runs.last().map_or(0, |r| r.records) as f64)
    )
}

/// Runs the produce scenario `--runs` times and reports.
pub async fn run(args: &ProduceArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    args.validate()?;
    let pool = Arc::new(build_pool(args));
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        prepare_topic(args, target, i == 0).await?;
        let label = format!("produce run {}/{}", i + 1, args.runs);
        let started = report::unix_ms();
        let result = run_once(args, target, pool.clone(), label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!("{}", run_line(&label, &result));
        runs.push(result);
    }
    let mut conn = Conn::connect(target).await?;
    let info = http::describe_topic(&mut conn, &args.topic)
        .await?
        .context("the topic disappeared during the run")?;
    let notes = vec![
        format!(
            "request bodies: {} distinct pre-built NDJSON bodies, {} bytes each on average, cycled",
            pool.len(),
            report::thousands(pool.mean_body_bytes())
        ),
        topic_after_runs(&info, &runs),
    ];
    Ok(Report {
        scenario: "produce".into(),
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

    #[test]
    fn pacing_spaces_requests_by_their_records() {
        assert_eq!(pace_offset(0, 1000.0), Duration::ZERO);
        assert_eq!(pace_offset(500, 1000.0), Duration::from_millis(500));
        let start = Instant::now();
        let pacer = Pacer::new(start, 10_000.0);
        let dues: Vec<Duration> = (0..4).map(|_| pacer.due(1000) - start).collect();
        let ms: Vec<u128> = dues.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, vec![0, 100, 200, 300]);
    }
}
