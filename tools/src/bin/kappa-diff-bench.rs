//! `kappa-diff-bench`: time and peak memory of comparing two versions of a
//! view (`kappa_processor::diff`, what `GET /v1/views/{view}/diff` runs).
//!
//! Writes `--rows` events with distinct keys to a log (one partition), runs
//! two versions of a view over it — `COUNT(*)` by key and `COUNT(*)`,
//! `SUM(amount)` by key, so every row differs in one column and the two
//! versions hold `--rows` rows each — then diffs them `--runs` times and
//! prints each run's time and the process's peak anonymous memory during
//! the diffs (RssAnon sampled by a thread every millisecond, against the
//! level before).
//!
//! ```text
//! cargo run --release -p kappa-tools --bin kappa-diff-bench -- --dir /var/tmp/kdb --rows 1000000
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Result};
use bytes::Bytes;
use clap::Parser;
use kappa_log::{FsyncPolicy, Log, LogConfig, NewRecord, ProduceRecord, TopicConfig};
use kappa_processor::dsl::{self, Pipeline};
use kappa_processor::expr::Expr;
use kappa_processor::runner::{RunOptions, Runtime};
use kappa_processor::state::store::{Scope, Store};

#[derive(Debug, Parser)]
struct Cli {
    /// Working directory (must not exist).
    #[arg(long)]
    dir: PathBuf,
    /// Rows of each version (= events, one per key).
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Examples each diff keeps.
    #[arg(long, default_value_t = 20)]
    examples: usize,
    /// Diffs to time.
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

/// `RssAnon` of this process, bytes.
fn rss_anon() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    ensure!(!cli.dir.exists(), "{} exists", cli.dir.display());
    let log = Arc::new(Log::open(LogConfig::new(cli.dir.join("log")))?);
    let topic = log.create_topic(
        "events",
        TopicConfig {
            fsync: FsyncPolicy::Never,
            ..TopicConfig::default()
        },
    )?;
    let io = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    for chunk in (0..cli.rows).collect::<Vec<_>>().chunks(10_000) {
        let records = chunk
            .iter()
            .map(|i| ProduceRecord {
                partition: Some(0),
                record: NewRecord {
                    key: None,
                    value: Bytes::from(format!("{{\"k\":\"key-{i:09}\",\"amount\":{}}}", i % 1000)),
                    timestamp: None,
                    headers: Vec::new(),
                },
            })
            .collect();
        io.block_on(topic.produce(records, None))?;
    }
    eprintln!(
        "wrote {} events in {:.1}s",
        cli.rows,
        started.elapsed().as_secs_f64()
    );

    let store = Arc::new(Store::open(&cli.dir.join("state"))?);
    let versions = [
        Pipeline::from_topic("events")
            .key_by([("k", Expr::field("k"))])
            .aggregate([dsl::count("n")])
            .to_view("v"),
        Pipeline::from_topic("events")
            .key_by([("k", Expr::field("k"))])
            .aggregate([dsl::count("n"), dsl::sum("total", Expr::field("amount"))])
            .to_view("v"),
    ];
    for (i, plan) in versions.into_iter().enumerate() {
        let started = Instant::now();
        let mut rt = Runtime::open(
            plan,
            i as u64 + 1,
            log.clone(),
            store.clone(),
            RunOptions::default(),
        )?;
        while rt.positions() != [cli.rows] {
            rt.poll_once()?;
            if rt.commit_due() {
                rt.commit()?;
            }
        }
        rt.commit()?;
        eprintln!(
            "built version {} in {:.1}s",
            i + 1,
            started.elapsed().as_secs_f64()
        );
    }
    let scope = |version| Scope {
        name: "v".into(),
        version,
    };
    let (base, candidate) = (scope(1), scope(2));

    let before = rss_anon();
    let peak = Arc::new(AtomicU64::new(before));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, stop) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_anon(), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        })
    };
    println!("| run | rows per version | changed | time (s) | rows/s |");
    println!("|--:|--:|--:|--:|--:|");
    for run in 1..=cli.runs {
        let started = Instant::now();
        let diff =
            kappa_processor::diff::diff((&store, &base), (&store, &candidate), 1, cli.examples)?;
        let secs = started.elapsed().as_secs_f64();
        ensure!(diff.changed == cli.rows, "every row differs: {diff:?}");
        println!(
            "| {run} | {} | {} | {secs:.2} | {:.0} |",
            cli.rows,
            diff.changed,
            2.0 * cli.rows as f64 / secs
        );
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    println!(
        "\nanonymous memory: {} MB before the diffs, peak {} MB during them (+{} MB)",
        before >> 20,
        peak.load(Ordering::Relaxed) >> 20,
        peak.load(Ordering::Relaxed).saturating_sub(before) >> 20
    );
    Ok(())
}
