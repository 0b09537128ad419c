//! `generate`: the input log of JSON events and `generated.json` describing
//! it (a suite reuses a directory holding the same data).

use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, NewRecord, TopicConfig};
use serde::{Deserialize, Serialize};

use crate::bench::keys::Rng;
use crate::bench::report::thousands;

use super::args::*;
use super::run::*;
use super::*;

/// What `generate` wrote (DIR/generated.json).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Generated {
    pub(super) events: u64,
    pub(super) keys: u64,
    pub(super) value_bytes: usize,
    pub(super) disorder_ms: i64,
    pub(super) seed: u64,
    /// Mean bytes of a value.
    pub(super) mean_value_bytes: f64,
    pub(super) first_event_ms: i64,
    pub(super) last_event_ms: i64,
    /// Bytes of the partition's files.
    pub(super) log_bytes: u64,
    pub(super) secs: f64,
}

impl Generated {
    pub(super) fn matches(&self, d: &DataArgs) -> bool {
        (
            self.events,
            self.keys,
            self.value_bytes,
            self.disorder_ms,
            self.seed,
        ) == (d.events, d.keys, d.value_bytes, d.disorder_ms, d.seed)
    }
}

/// Event `i`: (user, amount, event time).
pub(super) fn event_fields(rng: &mut Rng, i: u64, d: &DataArgs) -> (u64, u64, i64) {
    let user = rng.below(d.keys);
    let amount = 1 + rng.below(100);
    let lag = if d.disorder_ms > 0 {
        rng.below(d.disorder_ms as u64 + 1) as i64
    } else {
        0
    };
    (user, amount, FIRST_EVENT_MS + i as i64 - lag)
}

/// The JSON value of an event, padded to `value_bytes` when it is shorter.
pub(super) fn event_json(
    user: u64,
    amount: u64,
    ts: i64,
    value_bytes: usize,
    rng: &mut Rng,
) -> String {
    let head = format!(r#"{{"user":"u{user}","amount":{amount},"ts":{ts},"pad":""#);
    let tail = "\"}";
    let pad = value_bytes.saturating_sub(head.len() + tail.len());
    let mut s = String::with_capacity(head.len() + pad + tail.len());
    s.push_str(&head);
    for _ in 0..pad {
        s.push(char::from(b'a' + rng.below(26) as u8));
    }
    s.push_str(tail);
    s
}

pub(super) fn generate(dir: &Path, d: &DataArgs) -> Result<Generated> {
    ensure!(d.events >= 1, "--events must be at least 1");
    ensure!(d.keys >= 1, "--keys must be at least 1");
    ensure!(d.disorder_ms >= 0, "--disorder-ms must not be negative");
    let log_dir = dir.join("log");
    ensure!(
        !log_dir.exists(),
        "{} exists: remove it first (the suite does when its data differs)",
        log_dir.display()
    );
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let log = Log::open(LogConfig::new(&log_dir))?;
    let topic = log.create_topic(
        TOPIC,
        TopicConfig {
            partitions: 1,
            fsync: FsyncPolicy::Never,
            retention_ms: None,
            ..Default::default()
        },
    )?;
    let partition = topic.partition(0)?;
    let mut rng = Rng::new(d.seed);
    let (mut value_total, mut first, mut last) = (0u64, i64::MAX, i64::MIN);
    let started = Instant::now();
    let mut reported = Instant::now();
    let mut i = 0u64;
    while i < d.events {
        let n = (d.events - i).min(GENERATE_BATCH as u64);
        let mut records = Vec::with_capacity(n as usize);
        for j in i..i + n {
            let (user, amount, ts) = event_fields(&mut rng, j, d);
            first = first.min(ts);
            last = last.max(ts);
            let value = event_json(user, amount, ts, d.value_bytes, &mut rng);
            value_total += value.len() as u64;
            records.push(NewRecord::value(Bytes::from(value)));
        }
        rt.block_on(partition.append(AppendRequest {
            records,
            idempotency_key: None,
            as_sent: None,
        }))?;
        i += n;
        if reported.elapsed() >= PROGRESS_EVERY {
            reported = Instant::now();
            eprintln!(
                "generate: {} / {} events ({:.0} events/s)",
                thousands(i as f64),
                thousands(d.events as f64),
                i as f64 / started.elapsed().as_secs_f64()
            );
        }
    }
    ensure!(
        partition.end_offset() == d.events,
        "the partition ends at {}",
        partition.end_offset()
    );
    log.close();
    let secs = started.elapsed().as_secs_f64();
    drop(topic);
    drop(log);
    let g = Generated {
        events: d.events,
        keys: d.keys,
        value_bytes: d.value_bytes,
        disorder_ms: d.disorder_ms,
        seed: d.seed,
        mean_value_bytes: value_total as f64 / d.events as f64,
        first_event_ms: first,
        last_event_ms: last,
        log_bytes: dir_bytes(&log_dir.join("topics").join(TOPIC)),
        secs,
    };
    std::fs::write(
        dir.join(GENERATED_META),
        serde_json::to_vec_pretty(&g).expect("serializes"),
    )
    .context("writing generated.json")?;
    eprintln!(
        "generate: {} events ({:.1} value bytes on average, {} MB of log) in {secs:.1}s",
        thousands(d.events as f64),
        g.mean_value_bytes,
        thousands(g.log_bytes as f64 / 1e6)
    );
    Ok(g)
}

pub(super) fn read_generated(dir: &Path) -> Option<Generated> {
    let bytes = std::fs::read(dir.join(GENERATED_META)).ok()?;
    serde_json::from_slice(&bytes).ok()
}
