//! The compaction scenario (issue 40): a compacted topic filled with
//! `--compact-records` records over `--compact-keys` keys, then one
//! compaction pass (`Log::compact`) timed, while a producer appends to a
//! second topic (`fsync = always`, 10 records per append) — its append
//! latencies beside those of the same producer with no pass running.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use bytes::Bytes;
use kappa_log::{
    AppendRequest, CleanupPolicy, FsyncPolicy, Log, LogConfig, NewRecord, Partition, TopicConfig,
};
use tokio::runtime::Runtime;

use super::settings::*;
use super::*;

/// Records per append of the fill.
const FILL_BATCH: usize = 1000;
/// Records per append of the latency producer.
const PROBE_BATCH: usize = 10;
/// Appends of the latency producer with no pass running.
const IDLE_APPENDS: usize = 2000;

/// One run of the scenario.
#[derive(Debug, Clone)]
pub(super) struct CompactSample {
    /// Records in the topic before the pass.
    pub(super) records: u64,
    /// Records the pass removed.
    pub(super) removed: u64,
    /// Bytes of the segments the pass rewrote, and of what replaced them.
    pub(super) bytes_before: u64,
    pub(super) bytes_after: u64,
    /// Seconds the pass took.
    pub(super) secs: f64,
    /// Append latencies (µs) with no pass running, and during the pass.
    pub(super) idle_us: Vec<f64>,
    pub(super) during_us: Vec<f64>,
}

/// A JSON value of about `value_bytes` for record `i` of `key`.
fn value(i: u64, key: u64, value_bytes: usize) -> Bytes {
    let head = format!(r#"{{"user":"u{key}","seq":{i},"pad":""#);
    let pad = value_bytes.saturating_sub(head.len() + 2);
    Bytes::from(format!("{head}{}\"}}", "x".repeat(pad)))
}

/// Appends one probe batch and returns its latency in µs.
async fn probe(partition: &Partition, value: &Bytes) -> Result<f64> {
    let records = vec![NewRecord::value(value.clone()); PROBE_BATCH];
    let started = Instant::now();
    partition
        .append(AppendRequest {
            records,
            idempotency_key: None,
            as_sent: None,
        })
        .await?;
    Ok(started.elapsed().as_secs_f64() * 1e6)
}

pub(super) fn compact_run(rt: &Runtime, s: &Settings) -> Result<CompactSample> {
    let data = TempDir::new(&s.dir, "compact")?;
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::new(data.path())
    };
    let log = Arc::new(Log::open(config)?);
    let topic = log.create_topic(
        TOPIC,
        TopicConfig {
            cleanup_policy: CleanupPolicy::Compact,
            ..s.topic_config(FsyncPolicy::Never)
        },
    )?;
    let live = log.create_topic("live", s.topic_config(FsyncPolicy::Always))?;
    let mut rng = crate::bench::keys::Rng::new(0xC0FFEE);
    rt.block_on(async {
        let partition = topic.partition(0)?;
        let mut i = 0u64;
        while i < s.compact_records {
            let n = FILL_BATCH.min((s.compact_records - i) as usize);
            let records = (0..n as u64)
                .map(|j| {
                    let key = rng.next_u64() % s.compact_keys;
                    NewRecord {
                        key: Some(Bytes::from(format!("u{key}"))),
                        value: value(i + j, key, s.value_bytes),
                        timestamp: None,
                        headers: vec![],
                    }
                })
                .collect();
            partition
                .append(AppendRequest {
                    records,
                    idempotency_key: None,
                    as_sent: None,
                })
                .await?;
            i += n as u64;
        }
        anyhow::Ok(())
    })?;
    let probe_value = value(0, 0, s.value_bytes);
    let live_partition = live.partition(0)?;
    let idle_us = rt.block_on(async {
        let mut out = Vec::with_capacity(IDLE_APPENDS);
        for _ in 0..IDLE_APPENDS {
            out.push(probe(live_partition, &probe_value).await?);
        }
        anyhow::Ok(out)
    })?;
    // Past the idempotency window: every sealed segment is cleanable.
    let later = kappa_log::now_ms() + 24 * 3_600_000;
    let cleaner_log = log.clone();
    let started = Instant::now();
    let cleaner = std::thread::spawn(move || {
        let outcome = cleaner_log.compact(later);
        (outcome, started.elapsed().as_secs_f64())
    });
    let during_us = rt.block_on(async {
        let mut out = Vec::new();
        while !cleaner.is_finished() {
            out.push(probe(live_partition, &probe_value).await?);
        }
        anyhow::Ok(out)
    })?;
    let (outcome, secs) = cleaner
        .join()
        .map_err(|_| anyhow::anyhow!("the compaction thread panicked"))?;
    let outcome = outcome.context("compaction pass")?;
    ensure!(outcome.records_removed > 0, "the pass removed nothing");
    log.close();
    Ok(CompactSample {
        records: s.compact_records,
        removed: outcome.records_removed,
        bytes_before: outcome.bytes_before,
        bytes_after: outcome.bytes_after,
        secs,
        idle_us,
        during_us,
    })
}

/// The `q`-quantile (0..=1) of `values` (nearest rank).
pub(super) fn quantile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The scenario's Markdown section.
pub(super) fn compact_report(s: &Settings, samples: &[CompactSample]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let Some(first) = samples.first() else {
        return out;
    };
    let _ = writeln!(
        out,
        "\n### Compaction\n\n{} records over {} keys ({} B values, {} MiB segments), one pass \
         (`Log::compact`) per run; a producer appends {PROBE_BATCH} records per append \
         (`fsync = always`) to another topic, {IDLE_APPENDS} appends with no pass running, then \
         during the pass.\n",
        thousands(first.records as f64),
        thousands(s.compact_keys as f64),
        s.value_bytes,
        s.segment_bytes >> 20
    );
    let _ = writeln!(
        out,
        "| run | pass s | MB/s read | records/s | removed | bytes before → after | append p50 / p99 idle (µs) | append p50 / p99 during (µs) |"
    );
    let _ = writeln!(out, "|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (i, r) in samples.iter().enumerate() {
        let _ = writeln!(
            out,
            "| {} | {:.2} | {:.0} | {} | {} | {} → {} | {:.0} / {:.0} | {:.0} / {:.0} ({} appends) |",
            i + 1,
            r.secs,
            r.bytes_before as f64 / r.secs / 1e6,
            thousands(r.records as f64 / r.secs),
            thousands(r.removed as f64),
            thousands(r.bytes_before as f64),
            thousands(r.bytes_after as f64),
            quantile(&r.idle_us, 0.5),
            quantile(&r.idle_us, 0.99),
            quantile(&r.during_us, 0.5),
            quantile(&r.during_us, 0.99),
            r.during_us.len()
        );
    }
    out
}
