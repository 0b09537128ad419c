//! The read scenario: a sequential read of a partition, first with its
//! files evicted from the page cache, then warm.

use std::fs::File;
use std::path::Path;
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use kappa_log::{FsyncPolicy, Log, LogConfig, Partition};
use tokio::runtime::Runtime;

use super::settings::*;
use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) struct ReadPass {
    pub(super) secs: f64,
    pub(super) records: u64,
    pub(super) value_bytes: u64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct ReadSample {
    pub(super) write_secs: f64,
    pub(super) cold: ReadPass,
    pub(super) warm: ReadPass,
    pub(super) evicted: bool,
    pub(super) segments: usize,
}

/// Reads the whole partition from its start, touching every value's length.
pub(super) fn read_all(partition: &Partition) -> Result<ReadPass> {
    let end = partition.end_offset();
    let mut offset = partition.start_offset();
    let (mut records, mut value_bytes) = (0u64, 0u64);
    let started = Instant::now();
    while offset < end {
        let fetch = partition.read(offset, READ_MAX_RECORDS, READ_MAX_BYTES)?;
        for record in fetch.records() {
            records += 1;
            value_bytes += std::hint::black_box(record.value.len()) as u64;
        }
        ensure!(
            fetch.next_offset > offset,
            "read made no progress at offset {offset}"
        );
        offset = fetch.next_offset;
    }
    Ok(ReadPass {
        secs: started.elapsed().as_secs_f64(),
        records,
        value_bytes,
    })
}

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(super) mod fadvise {
    extern "C" {
        // glibc/musl: int posix_fadvise(int fd, off_t offset, off_t len, int advice);
        // off_t is 64-bit on these targets.
        fn posix_fadvise(fd: i32, offset: i64, len: i64, advice: i32) -> i32;
    }
    const POSIX_FADV_DONTNEED: i32 = 4;

    /// Drops the file's clean pages from the page cache.
    pub fn dont_need(file: &std::fs::File) -> std::io::Result<bool> {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain syscall wrapper on a descriptor we own; it reads no
        // memory of ours.
        let rc = unsafe { posix_fadvise(file.as_raw_fd(), 0, 0, POSIX_FADV_DONTNEED) };
        if rc == 0 {
            Ok(true)
        } else {
            Err(std::io::Error::from_raw_os_error(rc))
        }
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
pub(super) mod fadvise {
    pub fn dont_need(_file: &std::fs::File) -> std::io::Result<bool> {
        Ok(false)
    }
}

/// Writes back and evicts every file of `dir` from the page cache (no root
/// needed, unlike `drop_caches`). Files mapped by the process keep their
/// pages, so call this before the first read maps sealed segments.
pub(super) fn evict_dir(dir: &Path) -> Result<bool> {
    let mut evicted = true;
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let file = File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        file.sync_data()
            .with_context(|| format!("fdatasync {}", path.display()))?;
        evicted &=
            fadvise::dont_need(&file).with_context(|| format!("fadvise {}", path.display()))?;
    }
    Ok(evicted)
}

pub(super) fn read_run(rt: &Runtime, s: &Settings, payload: &'static [u8]) -> Result<ReadSample> {
    let data = TempDir::new(&s.dir, "read")?;
    let log = Log::open(LogConfig::new(data.path()))?;
    let topic = log.create_topic(TOPIC, s.topic_config(FsyncPolicy::Never))?;
    let batches = s.batches_for(s.read_bytes);
    let records = batches * s.batch_records as u64;
    let value_bytes = batches * s.batch_value_bytes();
    let partition = topic.partition(0)?;
    let started = Instant::now();
    rt.block_on(append_batches(
        partition,
        batches,
        payload,
        s.value_bytes,
        s.batch_records,
    ))?;
    let write_secs = started.elapsed().as_secs_f64();
    ensure!(
        partition.end_offset() == records,
        "partition ends at {}",
        partition.end_offset()
    );
    let evicted = evict_dir(&topic.dir().join("0"))?;
    let cold = read_all(partition)?;
    let warm = read_all(partition)?;
    for pass in [cold, warm] {
        ensure!(
            pass.records == records && pass.value_bytes == value_bytes,
            "read {} records / {} value bytes, wrote {records} / {value_bytes}",
            pass.records,
            pass.value_bytes
        );
    }
    let segments = partition.describe().segment_count;
    log.close();
    drop(topic);
    drop(log);
    drop(data);
    Ok(ReadSample {
        write_secs,
        cold,
        warm,
        evicted,
        segments,
    })
}
