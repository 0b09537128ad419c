//! The `e2e` scenario: end-to-end latency from a produce request to its
//! records being visible in a view.
//!
//! Setup: a topic, a stream declared over it and an aggregate view
//! (`COUNT(*)` per record key, optionally per tumbling window), all through
//! `POST /v1/statements`. Then `--connections` tasks produce NDJSON batches
//! paced to `--rate` events/s in total (flat out with `--rate 0`). Every
//! `--sample-every`-th request is a sample: once its produce is answered, a
//! probe sends `GET /v1/views/{view}/rows?key=K&after=P:O,..` with the
//! offsets the produce answered (the highest per partition), which the
//! server answers once the served version has committed past them. The
//! sample's latency runs from the start of the produce request to the
//! probe's 200: produce (with the topic's fsync) + processing + the view's
//! commit interval + the read.
//!
//! Probes run on their own connections (`--probe-connections`, opened
//! before the run) so they never hold up the producers; a sample that finds
//! every probe connection busy is skipped and counted, never queued (a
//! queued probe would add its queueing time to the latency). A probe
//! answered `504 view_behind` counts as a failure of its own kind.
//! Afterwards the view's counts are checked against the topic: once the
//! view has committed past the end of every partition, its `n` summed over
//! all rows must equal the records in the topic (every record counted
//! once; a record lost or counted twice fails the run). With
//! `--tumbling-secs` this is not checked: a late record may be dropped.
//! Then the view, the stream and the topic are dropped unless `--keep`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::Method;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use super::body::write_record_line;
use super::http::{self, Conn, Target};
use super::keys::{KeyGen, Skew};
use super::produce::{self, Fsync, Pacer, Totals};
use super::progress;
use super::report::{self, Metric, Report, RunResult};
use super::stats::{self, LatencySummary};
use super::views;

/// Distinct pre-built request bodies cycled by the producers.
const POOL_BODIES: usize = 256;
/// Extra time, beyond `--max-wait-ms`, the end of a run waits for probes.
const PROBE_DRAIN_SLACK: Duration = Duration::from_secs(5);

/// Options of `kappa-bench e2e`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct E2eArgs {
    /// Topic to create and produce to.
    #[arg(long, default_value = "bench_e2e_events")]
    pub topic: String,
    /// Name of the stream declared over the topic.
    #[arg(long, default_value = "bench_e2e_stream")]
    pub stream: String,
    /// Name of the aggregate view.
    #[arg(long, default_value = "bench_e2e")]
    pub view: String,
    /// Drop the view and stream and delete the topic first if they exist.
    #[arg(long)]
    pub recreate: bool,
    /// Leave the view, stream and topic in place afterwards.
    #[arg(long)]
    pub keep: bool,
    /// Aggregate per tumbling window of this many seconds (default: per key only).
    #[arg(long)]
    pub tumbling_secs: Option<u64>,
    /// Partitions of the topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// fsync policy of the topic.
    #[arg(long, value_enum, default_value_t = Fsync::Always)]
    pub fsync: Fsync,
    /// Target events/s over all connections; 0 = flat out.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Concurrent produce connections.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// Records per produce request (1..=10000).
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
    /// Approximate size of each record's value (JSON text), in bytes.
    #[arg(long, default_value_t = 100)]
    pub record_bytes: usize,
    /// Key cardinality (view rows).
    #[arg(long, default_value_t = 10_000)]
    pub keys: u64,
    /// Key distribution: `uniform` or `zipf:S`.
    #[arg(long, default_value = "uniform")]
    pub skew: Skew,
    /// Seed of the key sequence.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Sample every k-th produce request. Default: about
    /// [`SAMPLES_PER_SEC`] samples a second at the paced rate (every
    /// request at up to that many requests a second), every
    /// [`FLAT_OUT_SAMPLE_EVERY`]th flat out. A fixed k at a low rate left
    /// a p99 of a handful of samples: at 1,000 events/s in batches of 100,
    /// every 10th request was one sample a second, and a 10 s run's "p99"
    /// its largest sample.
    #[arg(long)]
    pub sample_every: Option<u64>,
    /// Connections reserved for the read-your-writes probes.
    #[arg(long, default_value_t = 32)]
    pub probe_connections: usize,
    /// `max_wait_ms` of each probe (0..=30000); a longer wait is a 504 view_behind.
    #[arg(long, default_value_t = 10_000)]
    pub max_wait_ms: u64,
    /// Measured seconds after the warm-up [default: 10 unless --events].
    #[arg(long)]
    pub duration: Option<f64>,
    /// Stop after this many acknowledged events in the measured window.
    #[arg(long)]
    pub events: Option<u64>,
    /// Seconds of load (not sampled) before measuring.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Repetitions on the same view; the table shows the median with min and max.
    #[arg(long, default_value_t = 1)]
    pub runs: usize,
}

/// Samples a second the default `--sample-every` aims for at a paced rate.
pub const SAMPLES_PER_SEC: f64 = 100.0;
/// Default `--sample-every` flat out (no rate to aim by).
pub const FLAT_OUT_SAMPLE_EVERY: u64 = 10;

impl E2eArgs {
    /// Every how many produce requests one is sampled: `--sample-every`,
    /// else about [`SAMPLES_PER_SEC`] a second at the paced rate, else
    /// [`FLAT_OUT_SAMPLE_EVERY`].
    pub fn sample_every(&self) -> u64 {
        self.sample_every.unwrap_or_else(|| {
            if self.rate > 0.0 {
                let requests_per_sec = self.rate / self.batch as f64;
                ((requests_per_sec / SAMPLES_PER_SEC).floor() as u64).max(1)
            } else {
                FLAT_OUT_SAMPLE_EVERY
            }
        })
    }

    fn validate(&self) -> anyhow::Result<()> {
        if !(1..=10_000).contains(&self.batch) {
            bail!("--batch must be in 1..=10000, got {}", self.batch);
        }
        if self.connections == 0 || self.probe_connections == 0 || self.runs == 0 {
            bail!("--connections, --probe-connections and --runs must be at least 1");
        }
        if self.partitions == 0 || self.keys == 0 || self.sample_every == Some(0) {
            bail!("--partitions, --keys and --sample-every must be at least 1");
        }
        if !(self.rate.is_finite() && self.rate >= 0.0) {
            bail!("--rate must be a non-negative number of events/s (0 = flat out)");
        }
        if self.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
            bail!("--duration must be a positive number of seconds");
        }
        if !(self.warmup.is_finite() && self.warmup >= 0.0) {
            bail!("--warmup must be a non-negative number of seconds");
        }
        if self.events == Some(0) || self.max_wait_ms > 30_000 {
            bail!("--events must be at least 1 and --max-wait-ms at most 30000");
        }
        Ok(())
    }

    /// `--duration`, else 10 s unless `--events` alone bounds the run.
    fn duration_limit(&self) -> Option<Duration> {
        produce::duration_limit(self.duration, self.events)
    }

    fn title(&self, layout: &str) -> String {
        let rate = if self.rate > 0.0 {
            format!("paced to {} events/s", report::thousands(self.rate))
        } else {
            "flat out".into()
        };
        let window = self
            .tumbling_secs
            .map_or(String::new(), |s| format!(" per {s} s tumbling window"));
        format!(
            "topic `{}` ({layout}) → view `{}` = COUNT(*) by key{window} over {} keys {}; \
             {} connections, batch {} × ~{} B values, {rate}; 1 in {} requests sampled",
            self.topic,
            self.view,
            self.keys,
            self.skew,
            self.connections,
            self.batch,
            self.record_bytes,
            self.sample_every()
        )
    }
}

/// A pre-built produce body and the key of its last record (the probe's `key`).
struct KeyedBody {
    body: Bytes,
    key: String,
}

fn build_bodies(args: &E2eArgs) -> Vec<KeyedBody> {
    let mut keys = KeyGen::new(args.keys, args.skew, args.seed);
    let mut seq = 0u64;
    (0..POOL_BODIES)
        .map(|_| {
            let mut out = Vec::with_capacity(args.batch * (args.record_bytes + 40));
            let mut key = String::new();
            for _ in 0..args.batch {
                key = keys.next_key();
                write_record_line(&mut out, Some(&key), seq, args.record_bytes);
                seq += 1;
            }
            KeyedBody {
                body: Bytes::from(out),
                key,
            }
        })
        .collect()
}

/// The part of a produce answer a probe needs.
#[derive(Deserialize)]
struct ProduceAnswer {
    records: Vec<Placed>,
}

#[derive(Deserialize)]
struct Placed {
    partition: u32,
    offset: u64,
}

/// `partition:offset,..` of the highest offset per partition in a produce answer.
fn after_param(body: &[u8]) -> anyhow::Result<String> {
    let answer: ProduceAnswer = serde_json::from_slice(body).context("parsing a produce answer")?;
    let mut highest: BTreeMap<u32, u64> = BTreeMap::new();
    for r in answer.records {
        let o = highest.entry(r.partition).or_default();
        *o = (*o).max(r.offset);
    }
    if highest.is_empty() {
        bail!("the produce answer placed no records");
    }
    let mut out = String::new();
    for (p, o) in highest {
        let sep = if out.is_empty() { "" } else { "," };
        let _ = write!(out, "{sep}{p}:{o}");
    }
    Ok(out)
}

/// What the probes counted (shared by the probe tasks of one run).
struct ProbeTotals {
    histogram: Histogram<u64>,
    samples: u64,
    view_behind: u64,
    failed: u64,
    statuses: BTreeMap<String, u64>,
}

/// State shared by the producer and probe tasks of one run.
struct Shared {
    bodies: Vec<KeyedBody>,
    next_body: AtomicU64,
    target: Target,
    produce_path: String,
    view: String,
    max_wait_ms: u64,
    batch: u64,
    sample_every: u64,
    pacer: Option<Pacer>,
    window_start: Instant,
    deadline: Option<Instant>,
    event_limit: Option<u64>,
    stop: AtomicBool,
    end_ns: AtomicU64,
    /// Events acknowledged in the window.
    events: AtomicU64,
    /// Requests sent after the warm-up (the sampling counter).
    sent_after_warmup: AtomicU64,
    skipped_samples: AtomicU64,
    probe_permits: Arc<Semaphore>,
    idle_probe_conns: Mutex<Vec<Conn>>,
    probes: Mutex<ProbeTotals>,
}

impl Shared {
    fn should_stop(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether an answer that arrived at `done` counts; ends the run once
    /// the window is over or the event limit is reached.
    fn claim(&self, done: Instant, records: u64) -> bool {
        if done < self.window_start {
            return false;
        }
        if self.deadline.is_some_and(|d| done > d) {
            self.stop.store(true, Ordering::Relaxed);
            return false;
        }
        let before = self.events.fetch_add(records, Ordering::Relaxed);
        if let Some(limit) = self.event_limit {
            if before >= limit {
                return false;
            }
            if before + records >= limit {
                self.stop.store(true, Ordering::Relaxed);
                let ns = (done - self.window_start).as_nanos() as u64;
                self.end_ns.store(ns.max(1), Ordering::Relaxed);
            }
        }
        true
    }

    fn elapsed(&self) -> Duration {
        produce::window_elapsed(&self.end_ns, self.window_start, self.deadline)
    }
}

/// What one producer task counted (failed answers as `produce <status>`).
type ProducerTotals = Totals<String>;

/// One probe: waits for the view to pass `after`, records the latency since `sent`.
async fn probe(shared: Arc<Shared>, sent: Instant, key: String, after: String) {
    let conn = shared.idle_probe_conns.lock().expect("not poisoned").pop();
    let mut conn = match conn {
        Some(c) if !c.is_closed() => c,
        _ => match Conn::connect(&shared.target).await {
            Ok(c) => c,
            Err(_) => {
                let mut t = shared.probes.lock().expect("not poisoned");
                t.failed += 1;
                *t.statuses.entry("probe transport".into()).or_default() += 1;
                return;
            }
        },
    };
    let path = format!(
        "/v1/views/{}/rows?key={key}&after={after}&max_wait_ms={}&limit=1",
        shared.view, shared.max_wait_ms
    );
    let answer = conn.get(&path).await;
    let done = Instant::now();
    let mut t = shared.probes.lock().expect("not poisoned");
    match answer {
        Ok(a) if a.status == 200 => {
            stats::record(&mut t.histogram, done - sent);
            t.samples += 1;
        }
        Ok(a) => {
            if a.status == 504 {
                t.view_behind += 1;
            } else {
                t.failed += 1;
            }
            *t.statuses.entry(format!("probe {}", a.status)).or_default() += 1;
        }
        Err(_) => {
            t.failed += 1;
            *t.statuses.entry("probe transport".into()).or_default() += 1;
            return;
        }
    }
    drop(t);
    shared
        .idle_probe_conns
        .lock()
        .expect("not poisoned")
        .push(conn);
}

/// Starts a probe for a sampled request, or counts it skipped when every
/// probe connection is busy.
fn start_probe(shared: &Arc<Shared>, sent: Instant, key: &str, answer: &[u8]) {
    let Ok(permit) = shared.probe_permits.clone().try_acquire_owned() else {
        shared.skipped_samples.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let after = match after_param(answer) {
        Ok(a) => a,
        Err(_) => {
            let mut t = shared.probes.lock().expect("not poisoned");
            t.failed += 1;
            *t.statuses
                .entry("unparsable produce answer".into())
                .or_default() += 1;
            return;
        }
    };
    let shared = shared.clone();
    let key = key.to_string();
    tokio::spawn(async move {
        probe(shared, sent, key, after).await;
        drop(permit);
    });
}

/// One producer connection: paced produce requests, sampling every k-th.
async fn producer(shared: Arc<Shared>, conn: Conn) -> ProducerTotals {
    let mut t = ProducerTotals::new();
    let mut conn = Some(conn);
    while !shared.should_stop() {
        let i = shared.next_body.fetch_add(1, Ordering::Relaxed) as usize;
        let body = &shared.bodies[i % shared.bodies.len()];
        if let Some(pacer) = &shared.pacer {
            pacer.wait_turn(shared.batch, shared.deadline).await;
            if shared.should_stop() {
                break;
            }
        }
        if conn.as_ref().is_none_or(Conn::is_closed) {
            conn = Conn::connect(&shared.target).await.ok();
        }
        let sent = Instant::now();
        let sample = sent >= shared.window_start
            && shared
                .sent_after_warmup
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(shared.sample_every);
        let answer = match conn.as_mut() {
            Some(c) => {
                c.request(
                    Method::POST,
                    &shared.produce_path,
                    Some("application/x-ndjson"),
                    body.body.clone(),
                )
                .await
            }
            None => Err(anyhow::anyhow!("not connected")),
        };
        let done = Instant::now();
        let ok = matches!(&answer, Ok(a) if a.is_success());
        if !shared.claim(done, if ok { shared.batch } else { 0 }) {
            continue;
        }
        match answer {
            Ok(a) if a.is_success() => {
                t.acknowledged(done - sent, shared.batch, body.body.len() as u64);
                if sample {
                    start_probe(&shared, sent, &body.key, &a.body);
                }
            }
            Ok(a) => {
                t.counts.failed_requests += 1;
                *t.statuses
                    .entry(format!("produce {}", a.status))
                    .or_default() += 1;
            }
            Err(_) => {
                conn = None;
                t.counts.failed_requests += 1;
                t.transport_errors += 1;
            }
        }
    }
    t
}

/// The figures of one e2e run, in display order.
fn metrics(
    produce: &ProducerTotals,
    elapsed: Duration,
    e2e: &LatencySummary,
    probes: &ProbeTotals,
    skipped: u64,
) -> Vec<Metric> {
    let secs = elapsed.as_secs_f64().max(1e-9);
    let p = LatencySummary::from_histogram(&produce.histogram);
    vec![
        Metric::new(
            "records/s",
            "/s",
            true,
            produce.counts.records as f64 / secs,
        ),
        Metric::new(
            "requests/s",
            "/s",
            true,
            produce.counts.ok_requests as f64 / secs,
        ),
        Metric::new("produce p50", "ms", false, p.p50_ms),
        Metric::new("produce p99", "ms", false, p.p99_ms),
        Metric::new("e2e p50", "ms", false, e2e.p50_ms),
        Metric::new("e2e p90", "ms", false, e2e.p90_ms),
        Metric::new("e2e p99", "ms", false, e2e.p99_ms),
        Metric::new("e2e p99.9", "ms", false, e2e.p999_ms),
        Metric::new("e2e max", "ms", false, e2e.max_ms),
        Metric::new("e2e samples", "count", true, probes.samples as f64),
        Metric::new("skipped samples", "count", false, skipped as f64),
        Metric::new("view_behind", "count", false, probes.view_behind as f64),
        Metric::new("failed probes", "count", false, probes.failed as f64),
        Metric::new(
            "failed requests",
            "count",
            false,
            produce.counts.failed_requests as f64,
        ),
    ]
}

/// Refreshes the progress bar until every producer has ended.
async fn watch(
    shared: &Shared,
    handles: &[tokio::task::JoinHandle<ProducerTotals>],
    bar: &indicatif::ProgressBar,
    t0: Instant,
) {
    while !handles.iter().all(|h| h.is_finished()) {
        tokio::time::sleep(progress::TICK).await;
        let now = Instant::now();
        match (shared.deadline, shared.event_limit) {
            (None, Some(_)) => bar.set_position(shared.events.load(Ordering::Relaxed)),
            _ => bar.set_position((now - t0).as_millis() as u64),
        }
        if now < shared.window_start {
            bar.set_message("warming up");
            continue;
        }
        let secs = (now - shared.window_start).as_secs_f64().max(1e-3);
        let rate = shared.events.load(Ordering::Relaxed) as f64 / secs;
        let (samples, behind) = {
            let p = shared.probes.lock().expect("not poisoned");
            (p.samples, p.view_behind)
        };
        bar.set_message(format!(
            "{} events/s, {samples} samples, {behind} view_behind",
            report::thousands(rate)
        ));
    }
}

/// One measured run.
async fn run_once(
    args: &E2eArgs,
    target: &Target,
    bodies: Vec<KeyedBody>,
    label: String,
) -> anyhow::Result<RunResult> {
    let mut producers = Vec::with_capacity(args.connections);
    for _ in 0..args.connections {
        producers.push(Conn::connect(target).await?);
    }
    let mut probe_conns = Vec::with_capacity(args.probe_connections);
    for _ in 0..args.probe_connections {
        probe_conns.push(Conn::connect(target).await?);
    }
    let t0 = Instant::now();
    let window_start = t0 + Duration::from_secs_f64(args.warmup);
    let deadline = args.duration_limit().map(|d| window_start + d);
    let shared = Arc::new(Shared {
        bodies,
        next_body: AtomicU64::new(0),
        target: target.clone(),
        produce_path: format!("/v1/topics/{}/records", args.topic),
        view: args.view.clone(),
        max_wait_ms: args.max_wait_ms,
        batch: args.batch as u64,
        sample_every: args.sample_every(),
        pacer: (args.rate > 0.0).then(|| Pacer::new(t0, args.rate)),
        window_start,
        deadline,
        event_limit: args.events,
        stop: AtomicBool::new(false),
        end_ns: AtomicU64::new(0),
        events: AtomicU64::new(0),
        sent_after_warmup: AtomicU64::new(0),
        skipped_samples: AtomicU64::new(0),
        probe_permits: Arc::new(Semaphore::new(args.probe_connections)),
        idle_probe_conns: Mutex::new(probe_conns),
        probes: Mutex::new(ProbeTotals {
            histogram: stats::new_histogram(),
            samples: 0,
            view_behind: 0,
            failed: 0,
            statuses: BTreeMap::new(),
        }),
    });
    let bar = match (deadline, args.events) {
        (Some(d), _) => progress::time_bar(label, d - t0),
        (None, Some(n)) => progress::count_bar(label, n, "events"),
        (None, None) => unreachable!("duration_limit bounds runs without --events"),
    };
    let handles: Vec<_> = producers
        .into_iter()
        .map(|c| tokio::spawn(producer(shared.clone(), c)))
        .collect();
    watch(&shared, &handles, &bar, t0).await;
    let elapsed = shared.elapsed();
    let mut produce = ProducerTotals::new();
    for handle in handles {
        produce.merge(handle.await.context("producer task panicked")?);
    }
    bar.set_message("waiting for the last probes");
    // Every probe holds a permit until it is done: taking them all waits for them.
    let drain = Duration::from_millis(args.max_wait_ms) + PROBE_DRAIN_SLACK;
    let all = u32::try_from(args.probe_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(drain, shared.probe_permits.acquire_many(all)).await;
    bar.finish_and_clear();
    if drained.is_err() {
        bail!("probes still waiting {drain:?} after the run ended");
    }
    let probes = shared.probes.lock().expect("not poisoned");
    let e2e = LatencySummary::from_histogram(&probes.histogram);
    let skipped = shared.skipped_samples.load(Ordering::Relaxed);
    let mut statuses = produce.statuses.clone();
    for (s, n) in &probes.statuses {
        *statuses.entry(s.clone()).or_default() += n;
    }
    let mut result = RunResult::new(
        produce.counts,
        elapsed,
        e2e,
        statuses,
        produce.transport_errors,
    );
    result.metrics = metrics(&produce, elapsed, &e2e, &probes, skipped);
    Ok(result)
}

/// Creates the topic, the stream and the view (after dropping them with
/// `--recreate`); fails if they exist without it.
async fn setup(args: &E2eArgs, conn: &mut Conn) -> anyhow::Result<String> {
    if args.recreate {
        views::drop_view_and_stream(conn, &args.stream, &args.view).await?;
        http::delete_topic(conn, &args.topic).await?;
    } else if http::describe_topic(conn, &args.topic).await?.is_some()
        || views::describe_view(conn, &args.view).await?.is_some()
    {
        bail!(
            "topic {:?} or view {:?} exists already: pass --recreate to drop them first",
            args.topic,
            args.view
        );
    }
    let body = serde_json::json!({
        "name": args.topic,
        "partitions": args.partitions,
        "fsync": args.fsync,
    });
    let info = http::create_topic(conn, &body).await?;
    let sql = views::define_sql(&args.topic, &args.stream, &args.view, args.tumbling_secs);
    views::statements(conn, &sql).await?;
    Ok(info.layout())
}

/// Drops the view and the stream and deletes the topic.
async fn cleanup(args: &E2eArgs, target: &Target) -> anyhow::Result<()> {
    let mut conn = Conn::connect(target).await?;
    views::drop_view_and_stream(&mut conn, &args.stream, &args.view).await?;
    http::delete_topic(&mut conn, &args.topic).await?;
    Ok(())
}

async fn measure(args: &E2eArgs, target: &Target) -> anyhow::Result<Vec<RunResult>> {
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        let label = format!("e2e run {}/{}", i + 1, args.runs);
        let started = report::unix_ms();
        let result = run_once(args, target, build_bodies(args), label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!(
            "{label}: {} events/s, e2e p50 {:.1} ms, p99 {:.1} ms over {} samples, {} failed",
            report::thousands(result.records as f64 / result.elapsed_s.max(1e-9)),
            result.latency.p50_ms,
            result.latency.p99_ms,
            result.latency.count,
            result.failed_requests()
        );
        runs.push(result);
    }
    Ok(runs)
}

/// Waits until the view has committed every record of the topic, then
/// checks that its counts add up to them: each record counted once.
/// Returns the records checked.
async fn check_counts(args: &E2eArgs, conn: &mut Conn) -> anyhow::Result<u64> {
    let topic = http::describe_topic(conn, &args.topic)
        .await?
        .with_context(|| format!("topic {:?} is gone", args.topic))?;
    let ends = topic.partitions.iter().map(|p| (p.partition, p.end_offset));
    let max_wait_ms = args.max_wait_ms.max(PROBE_DRAIN_SLACK.as_millis() as u64);
    if let Some(wait) = views::read_after_ends_path(&args.view, ends, max_wait_ms) {
        let answer = conn.get(&wait).await?;
        if !answer.is_success() {
            return Err(answer.error(&format!("waiting for view {} to reach the end", args.view)));
        }
    }
    let (_, counted) = views::rows_and_sum(conn, &args.view, "n").await?;
    let records = topic.records();
    if counted != records {
        bail!(
            "view {} counted {counted} records, the topic holds {records}: records were lost or counted twice",
            args.view
        );
    }
    Ok(records)
}

/// Runs the e2e scenario `--runs` times (on one view) and reports.
pub async fn run(args: &E2eArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    args.validate()?;
    let layout = setup(args, &mut Conn::connect(target).await?).await?;
    let mut measured = measure(args, target).await;
    let mut checked = None;
    if measured.is_ok() && args.tumbling_secs.is_none() {
        // A new connection: the server closes keep-alive connections idle
        // longer than its header_read_timeout_ms (10 s), as the setup's
        // is after the runs.
        let mut conn = Conn::connect(target).await?;
        match check_counts(args, &mut conn).await {
            Ok(records) => checked = Some(records),
            Err(e) => measured = Err(e),
        }
    }
    if !args.keep {
        let cleaned = cleanup(args, target).await;
        if measured.is_ok() {
            cleaned.context("cleaning up (pass --keep to leave the view in place)")?;
        }
    }
    let runs = measured?;
    let mut notes = vec![
        format!(
            "latency = start of a sampled produce request → 200 from `GET /v1/views/{}/rows?key=..&after=<its offsets>&max_wait_ms={}` \
             (includes the produce, the topic's fsync, processing and the view's commit interval)",
            args.view, args.max_wait_ms
        ),
        format!(
            "{} probe connections; a sample finding all busy is skipped (not queued); a 504 view_behind is a failure counted apart",
            args.probe_connections
        ),
    ];
    notes.push(match checked {
        Some(records) => format!(
            "afterwards the view's counts added up to the {records} records in the topic (each counted once)"
        ),
        None => "the view's counts were not checked (windows may drop late records)".into(),
    });
    Ok(Report {
        scenario: "e2e".into(),
        title: args.title(&layout),
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
    fn after_takes_the_highest_offset_per_partition() {
        let answer = br#"{"topic":"t","records":[{"partition":1,"offset":7},
            {"partition":0,"offset":3},{"partition":1,"offset":9},{"partition":0,"offset":2}],
            "duplicate":false}"#;
        assert_eq!(after_param(answer).unwrap(), "0:3,1:9");
        assert!(after_param(br#"{"records":[]}"#).is_err());
        assert!(after_param(b"nonsense").is_err());
    }

    /// Arguments of a small flat-out run.
    fn small_args() -> E2eArgs {
        E2eArgs {
            topic: "t".into(),
            stream: "s".into(),
            view: "v".into(),
            recreate: false,
            keep: false,
            tumbling_secs: None,
            partitions: 1,
            fsync: Fsync::Never,
            rate: 0.0,
            connections: 1,
            batch: 3,
            record_bytes: 50,
            keys: 10,
            skew: Skew::Uniform,
            seed: 1,
            sample_every: Some(1),
            probe_connections: 1,
            max_wait_ms: 100,
            duration: Some(1.0),
            events: None,
            warmup: 0.0,
            runs: 1,
        }
    }

    #[test]
    fn the_default_sampling_takes_about_a_hundred_samples_a_second() {
        let paced = |rate: f64, batch: usize| E2eArgs {
            rate,
            batch,
            sample_every: None,
            ..small_args()
        };
        // 10 requests a second: every one.
        assert_eq!(paced(1_000.0, 100).sample_every(), 1);
        // 100 requests a second: every one.
        assert_eq!(paced(10_000.0, 100).sample_every(), 1);
        // 1,000 requests a second: every 10th.
        assert_eq!(paced(100_000.0, 100).sample_every(), 10);
        assert_eq!(paced(100_000.0, 10).sample_every(), 100);
        assert_eq!(paced(0.0, 100).sample_every(), FLAT_OUT_SAMPLE_EVERY);
        let fixed = E2eArgs {
            sample_every: Some(7),
            ..paced(100_000.0, 100)
        };
        assert_eq!(fixed.sample_every(), 7);
        let zero = E2eArgs {
            sample_every: Some(0),
            ..small_args()
        };
        assert!(zero.validate().is_err());
    }

    #[test]
    fn bodies_carry_the_key_of_their_last_record() {
        let args = small_args();
        let bodies = build_bodies(&args);
        assert_eq!(bodies.len(), POOL_BODIES);
        for b in bodies.iter().take(5) {
            let last = b.body.split(|&c| c == b'\n').rfind(|l| !l.is_empty());
            let v: serde_json::Value = serde_json::from_slice(last.unwrap()).unwrap();
            assert_eq!(v["key"], b.key.as_str());
        }
    }
}
