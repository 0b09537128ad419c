//! The `build` scenario (issue 14's benchmark): how long the seed's
//! `purchase_stats` view takes to build from a topic loaded from an NDJSON
//! file of `user_events` (`kappa-datagen purchases --out FILE`), so that the
//! same file can be given to another engine (tools/bench-duckdb.sh runs
//! DuckDB on it).
//!
//! Setup (unmeasured): the file is loaded once into a new topic of
//! `--partitions` partitions (fsync=never, stored as `--compression`
//! says): each line becomes a record
//! keyed by its `user_id` (so a user's events share a partition) whose value
//! is the line as it is, sent in NDJSON produce requests of `--batch`
//! records over `--connections` connections. `--reuse-topic` takes an
//! existing topic as it is. The stream is declared with the event time
//! from the `event_time` field (`TIMESTAMP='event_time'`).
//!
//! Each run sends the seed's `CREATE TABLE .. AS` (with `WITH
//! (PARALLELISM=n)` when `--parallelism` is given) and waits for the view
//! with a read-your-writes read after the last offset of every partition
//! (`GET /v1/views/{view}/rows?limit=1&after=..`), which the server answers
//! the moment the view's committed offsets reach the topic's end offsets;
//! build time runs from sending the statement to that answer. A read that
//! waited `--poll-ms` without an answer looks at `GET /v1/views/{view}`
//! (progress, or the version's failure) and waits again. (Until session 14
//! the description was polled every 10 ms, which put each build time up to
//! 10 ms late.) Then, unmeasured, the view's rows are counted (paging through
//! `GET /v1/views/{view}/rows`, also summing `purchase_count`, to compare
//! with another engine's answer) and the view is dropped.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use hyper::Method;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, Mutex};

use super::http::{self, Conn, Target};
use super::produce::Fsync;
use super::progress;
use super::report::{self, Counts, Metric, Report, RunResult};
use super::stats::{self, LatencySummary};
use super::views;

/// Most times one produce request is retried after a 503.
const MAX_RETRIES: u32 = 100;

/// Options of `kappa-bench build`.
#[derive(Debug, Clone, clap::Args, Serialize)]
pub struct BuildArgs {
    /// NDJSON file of `user_events` (one JSON object per line with
    /// `user_id`, `event_type`, `amount`, `event_time`), as
    /// `kappa-datagen purchases --out FILE` writes it.
    #[arg(long, required_unless_present_any = ["reuse_topic", "cluster"])]
    pub file: Option<PathBuf>,
    /// Topic to load the file into.
    #[arg(long, default_value = "user_events")]
    pub topic: String,
    /// Name of the stream declared over the topic.
    #[arg(long, default_value = "user_events")]
    pub stream: String,
    /// Name of the view (the seed's).
    #[arg(long, default_value = "purchase_stats")]
    pub view: String,
    /// Partitions of the created topic.
    #[arg(long, default_value_t = 1)]
    pub partitions: u32,
    /// Add `WITH (PARALLELISM=n)` to the view's definition.
    #[arg(long)]
    pub parallelism: Option<u32>,
    /// Use the topic as it is when it exists (no load); it is kept afterwards.
    #[arg(long)]
    pub reuse_topic: bool,
    /// fsync policy of the created topic.
    #[arg(long, value_enum, default_value_t = Fsync::Never)]
    pub fsync: Fsync,
    /// How the created topic stores its batches: `none`, `zstd` or `lz4`
    /// (log/FORMAT.md §2.8).
    #[arg(long, default_value = "none")]
    pub compression: String,
    /// Records per produce request while loading.
    #[arg(long, default_value_t = 5000)]
    pub batch: usize,
    /// Connections while loading.
    #[arg(long, default_value_t = 2)]
    pub connections: usize,
    /// Longest wait of one read-your-writes read before the view's
    /// progress is looked at, ms.
    #[arg(long, default_value_t = 1000)]
    pub poll_ms: u64,
    /// Pause after dropping the view, before the next run, ms.
    #[arg(long, default_value_t = 1000)]
    pub pause_ms: u64,
    /// Longest wait for one build, seconds.
    #[arg(long, default_value_t = 600)]
    pub timeout_secs: u64,
    /// Builds, one after the other; the table shows the median with min and max.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Leave the last view, the stream and the topic in place afterwards.
    #[arg(long)]
    pub keep: bool,
    /// The server's process id, on the same Linux machine: each build then
    /// also reports the server's CPU time (from /proc/PID/stat).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The topic lives on this Kafka cluster (configured on the server,
    /// already loaded: nothing is loaded here): the stream is declared
    /// with `CLUSTER`, and a build ends when the view's committed offsets
    /// reach `--cluster-ends`.
    #[arg(long, requires = "cluster_ends")]
    pub cluster: Option<String>,
    /// The end offset of each partition of the cluster's topic, comma
    /// separated, in partition order.
    #[arg(long, value_delimiter = ',')]
    pub cluster_ends: Vec<u64>,
}

/// The stream declaration: the seed's columns, event time from
/// `event_time`; on `cluster` when given.
pub fn stream_sql(topic: &str, stream: &str, cluster: Option<&str>) -> String {
    let cluster = cluster.map_or(String::new(), |c| format!(", CLUSTER='{c}'"));
    format!(
        "CREATE STREAM {stream} (user_id VARCHAR, event_type VARCHAR, amount DECIMAL(10,2), \
         event_time TIMESTAMP) WITH (KAFKA_TOPIC='{topic}', VALUE_FORMAT='JSON', \
         TIMESTAMP='event_time'{cluster});"
    )
}

/// The seed's view, optionally with `WITH (PARALLELISM=n)`.
pub fn view_sql(stream: &str, view: &str, parallelism: Option<u32>) -> String {
    let with = parallelism.map_or(String::new(), |n| format!(" WITH (PARALLELISM={n})"));
    format!(
        "CREATE TABLE {view}{with} AS SELECT user_id, WINDOWSTART as window_start, \
         WINDOWEND as window_end, COUNT(*) as purchase_count, SUM(amount) as total_amount, \
         AVG(amount) as avg_amount FROM {stream} WINDOW TUMBLING (SIZE 5 MINUTES) \
         WHERE event_type = 'purchase' GROUP BY user_id EMIT CHANGES;"
    )
}

/// The one field of a line the load reads: its key.
#[derive(Deserialize)]
struct KeyField<'a> {
    #[serde(borrow)]
    user_id: Option<std::borrow::Cow<'a, str>>,
}

/// Appends `{"key":<user_id>,"value":<line>}\n` to `body`.
fn append_record(body: &mut Vec<u8>, line: &str, number: u64) -> anyhow::Result<()> {
    let key: KeyField = serde_json::from_str(line)
        .with_context(|| format!("line {number} is not a JSON object"))?;
    let user = key
        .user_id
        .with_context(|| format!("line {number} has no string user_id"))?;
    body.extend_from_slice(b"{\"key\":");
    serde_json::to_writer(&mut *body, user.as_ref())?;
    body.extend_from_slice(b",\"value\":");
    body.extend_from_slice(line.as_bytes());
    body.extend_from_slice(b"}\n");
    Ok(())
}

/// Reads the file into NDJSON produce bodies of `batch` records each, sent
/// to `bodies`; returns the records read. Runs on a thread of its own.
fn read_bodies(
    path: PathBuf,
    batch: usize,
    bodies: mpsc::Sender<(Bytes, u64)>,
    bytes_read: Arc<AtomicU64>,
) -> anyhow::Result<u64> {
    let file = std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let (mut line, mut body) = (String::new(), Vec::with_capacity(batch * 200));
    let (mut records, mut in_body, mut number) = (0u64, 0u64, 0u64);
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        if n == 0 {
            break;
        }
        number += 1;
        bytes_read.fetch_add(n as u64, Ordering::Relaxed);
        let text = line.trim_end();
        if text.is_empty() {
            continue;
        }
        append_record(&mut body, text, number)
            .with_context(|| format!("reading {}", path.display()))?;
        in_body += 1;
        if in_body as usize == batch {
            let full = std::mem::replace(&mut body, Vec::with_capacity(batch * 200));
            if bodies.blocking_send((full.into(), in_body)).is_err() {
                bail!("the load stopped (a produce request failed)");
            }
            records += in_body;
            in_body = 0;
        }
    }
    if in_body > 0 && bodies.blocking_send((body.into(), in_body)).is_ok() {
        records += in_body;
    }
    Ok(records)
}

/// Sends bodies from the shared queue until it is closed; returns the records sent.
async fn send_bodies(
    target: Target,
    topic: String,
    queue: Arc<Mutex<mpsc::Receiver<(Bytes, u64)>>>,
) -> anyhow::Result<u64> {
    let path = format!("/v1/topics/{topic}/records");
    let mut conn = Conn::connect(&target).await?;
    let mut sent = 0;
    loop {
        let Some((body, records)) = queue.lock().await.recv().await else {
            return Ok(sent);
        };
        let mut retries = 0;
        loop {
            if conn.is_closed() {
                conn = Conn::connect(&target).await?;
            }
            let ct = Some("application/x-ndjson");
            let answer = conn.request(Method::POST, &path, ct, body.clone()).await?;
            if answer.is_success() {
                break;
            }
            if answer.status != 503 || retries >= MAX_RETRIES {
                return Err(answer.error(&format!("producing to {topic}")));
            }
            retries += 1;
            tokio::time::sleep(answer.retry_after.unwrap_or(Duration::from_secs(1))).await;
        }
        sent += records;
    }
}

/// Loads the file into the (existing) topic; returns the records loaded.
async fn load_file(args: &BuildArgs, path: PathBuf, target: &Target) -> anyhow::Result<u64> {
    if args.batch == 0 || args.connections == 0 {
        bail!("--batch and --connections must be at least 1");
    }
    let size = std::fs::metadata(&path)
        .with_context(|| format!("reading {}", path.display()))?
        .len();
    let (tx, rx) = mpsc::channel(args.connections * 2);
    let bytes_read = Arc::new(AtomicU64::new(0));
    let (batch, read) = (args.batch, bytes_read.clone());
    let reader = std::thread::spawn(move || read_bodies(path, batch, tx, read));
    let queue = Arc::new(Mutex::new(rx));
    let t0 = Instant::now();
    let senders: Vec<_> = (0..args.connections)
        .map(|_| {
            tokio::spawn(send_bodies(
                target.clone(),
                args.topic.clone(),
                queue.clone(),
            ))
        })
        .collect();
    let bar = progress::count_bar(format!("loading {}", args.topic), size, "bytes");
    while !senders.iter().all(|h| h.is_finished()) {
        tokio::time::sleep(progress::TICK).await;
        bar.set_position(bytes_read.load(Ordering::Relaxed));
    }
    bar.finish_and_clear();
    // Closing the queue stops the reader if a sender failed.
    drop(queue);
    let mut sent = 0;
    for handle in senders {
        sent += handle.await.context("a load task panicked")??;
    }
    let read = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the file reader panicked"))??;
    if read != sent {
        bail!("read {read} records from the file but produced {sent}");
    }
    let secs = t0.elapsed().as_secs_f64();
    eprintln!(
        "loaded {} records into {} in {secs:.1} s ({} records/s)",
        report::thousands(sent as f64),
        args.topic,
        report::thousands(sent as f64 / secs.max(1e-9))
    );
    Ok(sent)
}

/// Creates the topic and loads the file, or reuses the topic; returns its
/// description and whether this run created it.
async fn prepare_topic(
    args: &BuildArgs,
    conn: &mut Conn,
    target: &Target,
) -> anyhow::Result<(http::TopicInfo, bool)> {
    let existing = http::describe_topic(conn, &args.topic).await?;
    let created = match (existing, args.reuse_topic) {
        (Some(info), true) if info.records() > 0 => {
            eprintln!(
                "reusing topic {} ({} records)",
                args.topic,
                report::thousands(info.records() as f64)
            );
            false
        }
        (Some(_), true) => bail!("--reuse-topic: topic {:?} is empty", args.topic),
        (Some(_), false) => bail!(
            "topic {:?} exists: pass --reuse-topic to use it, or delete it",
            args.topic
        ),
        (None, _) => {
            let path = args
                .file
                .clone()
                .context("the topic does not exist: give --file to load it")?;
            let body = serde_json::json!({
                "name": args.topic, "partitions": args.partitions, "fsync": args.fsync,
                "compression_type": args.compression,
            });
            http::create_topic(conn, &body).await?;
            load_file(args, path, target).await?;
            // A long load leaves this connection idle past the server's
            // keep-alive timeout: start again on a new one.
            *conn = Conn::connect(target).await?;
            true
        }
    };
    let info = http::describe_topic(conn, &args.topic)
        .await?
        .context("the topic disappeared while loading")?;
    Ok((info, created))
}

/// One partition's position in a view version.
/// True once no build runs and the served version has committed up to
/// `ends` on every partition (`committed`: partition and committed offset).
fn caught_up(committed: &[(u32, u64)], building: bool, ends: &[u64]) -> bool {
    !building
        && committed.len() == ends.len()
        && committed
            .iter()
            .all(|(p, c)| ends.get(*p as usize).is_some_and(|e| c >= e))
}

/// The served version's committed offset per partition.
fn committed_of(view: &kappa_wire::ViewOut) -> Vec<(u32, u64)> {
    view.served_version
        .partitions
        .iter()
        .map(|p| (p.partition, p.committed))
        .collect()
}

/// Waits until the view has caught up with `ends`; returns the time it was
/// seen to. A read-your-writes read after the last offset of each
/// non-empty partition is answered as soon as the view commits past them;
/// between such reads (each at most `--poll-ms`), the view's description
/// updates the progress bar and tells whether the version failed.
async fn wait_built(
    conn: &mut Conn,
    args: &BuildArgs,
    ends: &[u64],
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<Instant> {
    let started = Instant::now();
    let timeout = Duration::from_secs(args.timeout_secs);
    let partition_ends = ends.iter().enumerate().map(|(p, &end)| (p as u32, end));
    // Over a cluster the description alone says when (a read after
    // offsets is for the built-in log's topics).
    let read_after = match args.cluster {
        None => views::read_after_ends_path(&args.view, partition_ends, args.poll_ms.max(1)),
        Some(_) => None,
    };
    let describe = format!("/v1/views/{}", args.view);
    loop {
        if let Some(read_after) = &read_after {
            let answer = conn.get(read_after).await?;
            let now = Instant::now();
            if answer.is_success() {
                return Ok(now);
            }
            // 504 view_behind: not yet (anything else is a failure).
            if answer.status != 504 {
                return Err(answer.error(&format!("waiting for view {}", args.view)));
            }
        }
        let answer = conn.get(&describe).await?;
        let now = Instant::now();
        if !answer.is_success() {
            return Err(answer.error(&format!("describing view {}", args.view)));
        }
        let state: kappa_wire::ViewOut =
            serde_json::from_slice(&answer.body).context("parsing the view description")?;
        if let Some(f) = &state.failure {
            bail!(
                "version {} of {} failed: {}",
                f.version,
                args.view,
                f.reason
            );
        }
        let committed = committed_of(&state);
        bar.set_position(committed.iter().map(|(_, c)| c).sum());
        if caught_up(&committed, state.building_version.is_some(), ends) {
            return Ok(now);
        }
        if now - started > timeout {
            bail!(
                "view {} (version {}, status {}) not caught up after {timeout:?}",
                args.view,
                state.served_version.version,
                state.status
            );
        }
        if read_after.is_none() {
            // Nothing to wait on: the description alone says when.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// User + system CPU seconds of process `pid` (all its threads), from
/// /proc/PID/stat; `None` when it cannot be read.
fn process_cpu_secs(pid: u32) -> Option<f64> {
    crate::machine::stat_cpu_secs(&format!("/proc/{pid}/stat"))
}

/// One build, measured, then its rows counted and the view dropped.
async fn run_once(
    args: &BuildArgs,
    conn: &mut Conn,
    ends: &[u64],
    label: String,
) -> anyhow::Result<RunResult> {
    let records: u64 = ends.iter().sum();
    let sql = view_sql(&args.stream, &args.view, args.parallelism);
    let bar = progress::count_bar(label, records, "records");
    let cpu0 = args.server_pid.and_then(process_cpu_secs);
    let t0 = Instant::now();
    let built = async {
        views::statements(conn, &sql).await?;
        wait_built(conn, args, ends, &bar).await
    }
    .await;
    bar.finish_and_clear();
    let elapsed = built? - t0;
    let cpu1 = args.server_pid.and_then(process_cpu_secs);
    let (rows, purchases) = views::rows_and_sum(conn, &args.view, "purchase_count").await?;
    let secs = elapsed.as_secs_f64().max(1e-9);
    let counts = Counts {
        records,
        ..Counts::default()
    };
    let latency = LatencySummary::from_histogram(&stats::new_histogram());
    let mut result = RunResult::new(counts, elapsed, latency, Default::default(), 0);
    result.metrics = vec![
        Metric::new("build time", "s", false, elapsed.as_secs_f64()),
        Metric::new("events/s", "/s", true, records as f64 / secs),
        Metric::new("view rows", "count", true, rows as f64),
        Metric::new("purchases counted", "count", true, purchases as f64),
    ];
    let server_cpu_s = cpu0.zip(cpu1).map(|(a, b)| b - a);
    if let Some(cpu) = server_cpu_s {
        // Cores kept busy on average, in hundredths (the table prints it as is).
        let cores = (cpu / secs * 100.0).round() / 100.0;
        result
            .metrics
            .push(Metric::new("server CPU", "s", false, cpu));
        result
            .metrics
            .push(Metric::new("server cores busy", "cores", false, cores));
    }
    result.details = serde_json::json!({
        "rows": rows, "purchases": purchases, "server_cpu_s": server_cpu_s,
    });
    Ok(result)
}

/// Declares the stream, then builds the view `--runs` times, dropping it in between.
async fn measure(
    args: &BuildArgs,
    conn: &mut Conn,
    ends: &[u64],
) -> anyhow::Result<Vec<RunResult>> {
    views::drop_view_and_stream(conn, &args.stream, &args.view).await?;
    views::statements(
        conn,
        &stream_sql(&args.topic, &args.stream, args.cluster.as_deref()),
    )
    .await?;
    let records: u64 = ends.iter().sum();
    let mut runs = Vec::with_capacity(args.runs);
    for i in 0..args.runs {
        if i > 0 {
            views::drop_view(conn, &args.view).await?;
            tokio::time::sleep(Duration::from_millis(args.pause_ms)).await;
        }
        let label = format!("build run {}/{}", i + 1, args.runs);
        let started = report::unix_ms();
        let result = run_once(args, conn, ends, label.clone())
            .await?
            .with_span(started, report::unix_ms());
        eprintln!(
            "{label}: {} records in {:.3} s = {} events/s; {} rows",
            report::thousands(records as f64),
            result.elapsed_s,
            report::thousands(records as f64 / result.elapsed_s.max(1e-9)),
            report::thousands(result.details["rows"].as_f64().unwrap_or(0.0)),
        );
        runs.push(result);
    }
    Ok(runs)
}

/// Loads (or reuses) the topic and builds the view `--runs` times.
pub async fn run(args: &BuildArgs, target: &Target, command: String) -> anyhow::Result<Report> {
    if args.runs == 0 || args.partitions == 0 {
        bail!("--runs and --partitions must be at least 1");
    }
    let mut conn = Conn::connect(target).await?;
    let (layout, ends, created) = match &args.cluster {
        Some(cluster) => {
            if args.cluster_ends.is_empty() {
                bail!("--cluster needs --cluster-ends");
            }
            let layout = format!("cluster {cluster}, {} partitions", args.cluster_ends.len());
            (layout, args.cluster_ends.clone(), false)
        }
        None => {
            let (topic, created) = prepare_topic(args, &mut conn, target).await?;
            let ends = topic.partitions.iter().map(|p| p.end_offset).collect();
            (topic.layout(), ends, created)
        }
    };
    let records: u64 = ends.iter().sum();
    let measured = measure(args, &mut conn, &ends).await;
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
    let runs = measured?;
    let parallelism = args
        .parallelism
        .map_or("server default".to_string(), |n| n.to_string());
    let notes = vec![
        format!(
            "stream: `{}`",
            stream_sql(&args.topic, &args.stream, args.cluster.as_deref())
        ),
        format!("view: `{}`", view_sql(&args.stream, &args.view, args.parallelism)),
        match &args.cluster {
            None => format!(
                "build time = sending the CREATE TABLE → the answer of `GET /v1/views/{}/rows?after=..` \
                 (a read-your-writes read after the last offset of every partition, answered when the \
                 view's committed offsets reach the topic's end offsets); rows counted afterwards, \
                 unmeasured; the view is dropped between runs",
                args.view
            ),
            Some(cluster) => format!(
                "build time = sending the CREATE TABLE → the first `GET /v1/views/{}` (polled every \
                 10 ms) whose committed offsets reach the end offsets of the topic on cluster {cluster}; \
                 rows counted afterwards, unmeasured; the view is dropped between runs",
                args.view
            ),
        },
    ];
    Ok(Report {
        scenario: "build".into(),
        title: format!(
            "topic `{}` ({}, {} records) → view `{}` (the seed's purchase_stats), parallelism {parallelism}",
            args.topic,
            layout,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_keyed_by_user_id_and_carry_the_line() {
        let mut body = Vec::new();
        let line = r#"{"user_id":"user-7","event_type":"purchase","amount":1.5}"#;
        append_record(&mut body, line, 1).unwrap();
        let text = String::from_utf8(body).unwrap();
        assert_eq!(text, format!("{{\"key\":\"user-7\",\"value\":{line}}}\n"));
        assert!(append_record(&mut Vec::new(), r#"{"amount":1}"#, 2).is_err());
        assert!(append_record(&mut Vec::new(), "not json", 3).is_err());
    }

    #[test]
    fn view_sql_is_the_seeds_with_an_optional_parallelism() {
        let plain = view_sql("user_events", "purchase_stats", None);
        assert!(plain.starts_with("CREATE TABLE purchase_stats AS SELECT user_id,"));
        assert!(plain.contains("WINDOW TUMBLING (SIZE 5 MINUTES) WHERE event_type = 'purchase'"));
        let parallel = view_sql("user_events", "purchase_stats", Some(2));
        assert!(parallel.starts_with("CREATE TABLE purchase_stats WITH (PARALLELISM=2) AS"));
        assert!(stream_sql("t", "s", None).contains("TIMESTAMP='event_time'"));
        assert!(
            stream_sql("t", "s", Some("prod")).contains("TIMESTAMP='event_time', CLUSTER='prod')")
        );
    }

    #[test]
    fn caught_up_needs_every_partition_at_its_end() {
        assert!(caught_up(&[(0, 5), (1, 7)], false, &[5, 7]));
        assert!(!caught_up(&[(0, 5), (1, 6)], false, &[5, 7]));
        assert!(!caught_up(&[(0, 5)], false, &[5, 7]));
        assert!(!caught_up(&[(0, 5), (1, 7)], true, &[5, 7]));
        assert!(!caught_up(&[(0, 5), (3, 7)], false, &[5, 7]));
    }

    #[test]
    fn process_cpu_time_grows_with_work() {
        let cpu = || process_cpu_secs(std::process::id()).expect("this process's CPU time");
        let before = cpu();
        // Spin until the kernel has charged at least two clock ticks more
        // (a tick is 10 ms); a parser reading the wrong field never sees
        // that, and the wall-clock bound ends the test instead of hanging.
        let started = Instant::now();
        let mut spin = 0u64;
        while cpu() < before + 0.02 && started.elapsed() < Duration::from_secs(30) {
            for i in 0..100_000u64 {
                spin = std::hint::black_box(spin.wrapping_mul(31).wrapping_add(i));
            }
        }
        let after = cpu();
        assert!(
            after >= before + 0.02,
            "CPU time read {before} s, then {after} s after {:?} of spinning",
            started.elapsed()
        );
    }
}
