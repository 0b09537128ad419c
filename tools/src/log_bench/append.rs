//! The append scenario: one partition, for each fsync policy, with one and
//! with several writer tasks.

use std::time::Instant;

use anyhow::{ensure, Context, Result};
use kappa_log::{FsyncPolicy, Log, LogConfig};
use tokio::runtime::Runtime;

use super::settings::*;
use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) struct AppendSample {
    pub(super) secs: f64,
    pub(super) records: u64,
    pub(super) value_bytes: u64,
    pub(super) appends: u64,
    pub(super) fsyncs: u64,
    pub(super) close_secs: f64,
    pub(super) segments: usize,
}

pub(super) fn append_run(
    rt: &Runtime,
    s: &Settings,
    fsync: FsyncPolicy,
    writers: usize,
    payloads: &[&'static [u8]],
) -> Result<AppendSample> {
    let data = TempDir::new(&s.dir, "append")?;
    let log = Log::open(LogConfig::new(data.path()))?;
    let topic = log.create_topic(TOPIC, s.topic_config(fsync))?;
    let batches = s.batches_for(s.append_bytes);
    let (value_bytes, batch_records) = (s.value_bytes, s.batch_records);
    let fsyncs0 = fsync_count();
    let started = Instant::now();
    rt.block_on(async {
        let mut tasks = Vec::with_capacity(writers);
        for (w, &payload) in payloads.iter().enumerate().take(writers) {
            let n = batches / writers as u64 + u64::from((w as u64) < batches % writers as u64);
            let topic = topic.clone();
            tasks.push(tokio::spawn(async move {
                let partition = topic.partition(0)?;
                append_batches(partition, n, payload, value_bytes, batch_records).await
            }));
        }
        for task in tasks {
            task.await.context("writer task panicked")??;
        }
        anyhow::Ok(())
    })?;
    let secs = started.elapsed().as_secs_f64();
    let fsyncs1 = fsync_count();
    let partition = topic.partition(0)?;
    let records = batches * s.batch_records as u64;
    ensure!(
        partition.end_offset() == records,
        "partition ends at {} after appending {records} records",
        partition.end_offset()
    );
    let segments = partition.describe().segment_count;
    let closing = Instant::now();
    log.close();
    let close_secs = closing.elapsed().as_secs_f64();
    drop(topic);
    drop(log);
    drop(data);
    Ok(AppendSample {
        secs,
        records,
        value_bytes: batches * s.batch_value_bytes(),
        appends: batches,
        fsyncs: fsyncs1 - fsyncs0,
        close_secs,
        segments,
    })
}
