//! Loading a topic with an exact number of records before a measurement
//! (not itself measured): `connections` tasks take request numbers from one
//! counter and send NDJSON bodies of `batch` records until `records` are
//! acknowledged; a 503 is retried after its `Retry-After`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hyper::Method;

use super::body::{BodyPool, BodySpec};
use super::http::{Conn, Target};
use super::keys::{KeyGen, Skew};
use super::progress;
use super::report;

/// Most times one request is retried after a 503 before the load fails.
const MAX_RETRIES: u32 = 100;

/// What to load.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Topic (must exist).
    pub topic: String,
    /// Records to produce (rounded up to whole batches).
    pub records: u64,
    /// Records per request.
    pub batch: usize,
    /// Concurrent connections.
    pub connections: usize,
    /// Approximate value size, bytes.
    pub record_bytes: usize,
    /// Key cardinality (> 0).
    pub keys: u64,
    /// Seed of the keys.
    pub seed: u64,
}

/// What a load took.
#[derive(Debug, Clone, Copy)]
pub struct Loaded {
    /// Records acknowledged.
    pub records: u64,
    /// Wall time.
    pub elapsed: Duration,
}

async fn load_task(
    spec: Arc<LoadSpec>,
    target: Target,
    pool: Arc<BodyPool>,
    next: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let requests = spec.records.div_ceil(spec.batch as u64);
    let path = format!("/v1/topics/{}/records", spec.topic);
    let mut conn = Conn::connect(&target).await?;
    while next.fetch_add(1, Ordering::Relaxed) < requests {
        let body = pool.next();
        let mut retries = 0;
        loop {
            if conn.is_closed() {
                conn = Conn::connect(&target).await?;
            }
            let answer = conn
                .request(
                    Method::POST,
                    &path,
                    Some("application/x-ndjson"),
                    body.clone(),
                )
                .await?;
            if answer.is_success() {
                break;
            }
            if answer.status != 503 || retries >= MAX_RETRIES {
                return Err(answer.error(&format!("producing to {}", spec.topic)));
            }
            retries += 1;
            tokio::time::sleep(answer.retry_after.unwrap_or(Duration::from_secs(1))).await;
        }
        done.fetch_add(spec.batch as u64, Ordering::Relaxed);
    }
    Ok(())
}

/// Produces `spec.records` records (rounded up to whole batches), with a progress bar.
pub async fn load(spec: LoadSpec, target: &Target) -> anyhow::Result<Loaded> {
    if spec.batch == 0 || spec.connections == 0 || spec.keys == 0 {
        bail!("loading needs a batch, connections and keys of at least 1");
    }
    let body_spec = BodySpec {
        batch: spec.batch,
        record_bytes: spec.record_bytes,
        keys: Some(KeyGen::new(spec.keys, Skew::Uniform, spec.seed)),
    };
    let pool = Arc::new(BodyPool::build(body_spec, 100_000));
    let total = spec.records.div_ceil(spec.batch as u64) * spec.batch as u64;
    let bar = progress::count_bar(format!("loading {}", spec.topic), total, "records");
    let spec = Arc::new(spec);
    let next = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let handles: Vec<_> = (0..spec.connections)
        .map(|_| {
            let task = load_task(
                spec.clone(),
                target.clone(),
                pool.clone(),
                next.clone(),
                done.clone(),
            );
            tokio::spawn(task)
        })
        .collect();
    while !handles.iter().all(|h| h.is_finished()) {
        tokio::time::sleep(progress::TICK).await;
        bar.set_position(done.load(Ordering::Relaxed));
    }
    bar.finish_and_clear();
    for handle in handles {
        handle.await.context("load task panicked")??;
    }
    let loaded = Loaded {
        records: done.load(Ordering::Relaxed),
        elapsed: t0.elapsed(),
    };
    eprintln!(
        "loaded {} records into {} in {:.1} s",
        report::thousands(loaded.records as f64),
        spec.topic,
        loaded.elapsed.as_secs_f64()
    );
    Ok(loaded)
}
