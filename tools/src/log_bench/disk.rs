//! The raw disk baseline: `write` + `fdatasync` per batch-sized chunk, and a
//! dd-like run of 1 MiB `O_DSYNC` writes.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::time::Instant;

use anyhow::{Context, Result};

use super::settings::*;
use super::*;

/// `chunks` times: `write` of `chunk`, then `fdatasync`. Returns seconds.
pub(super) fn disk_fdatasync_run(s: &Settings, chunk: &[u8], chunks: u64) -> Result<f64> {
    let data = TempDir::new(&s.dir, "disk")?;
    let path = data.path().join("fdatasync.dat");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let started = Instant::now();
    for _ in 0..chunks {
        file.write_all(chunk).context("write")?;
        file.sync_data().context("fdatasync")?;
    }
    Ok(started.elapsed().as_secs_f64())
}

/// `O_DSYNC` on the Linux targets whose value is the generic 0o10000.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
pub(super) const O_DSYNC: Option<i32> = Some(0o10000);
#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
pub(super) const O_DSYNC: Option<i32> = None;

/// dd-like: `writes` writes of `chunk` to a file opened with `O_DSYNC`
/// (`dd bs=1M oflag=dsync`). Returns seconds, or `None` where unsupported.
pub(super) fn disk_dsync_run(s: &Settings, chunk: &[u8], writes: u64) -> Result<Option<f64>> {
    use std::os::unix::fs::OpenOptionsExt;
    let Some(flag) = O_DSYNC else { return Ok(None) };
    let data = TempDir::new(&s.dir, "dsync")?;
    let path = data.path().join("dsync.dat");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(flag)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    let started = Instant::now();
    for _ in 0..writes {
        file.write_all(chunk).context("write")?;
    }
    Ok(Some(started.elapsed().as_secs_f64()))
}
