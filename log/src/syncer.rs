//! The `fsync = interval` policy's fdatasync, on its own thread: every
//! interval it syncs the active segment if anything was written since the
//! last sync. The writer thread only writes, so appends never wait for the
//! disk under this policy.
//!
//! The writer marks each write ([`IntervalSync::wrote`]) after it is in the
//! file, and the syncer clears the mark before it syncs, so a write is
//! either covered by the sync that cleared its mark or marks the next one.
//! When the writer rolls to a new segment it syncs the old one itself (a
//! sealed segment is durable whatever the policy) and points the syncer at
//! the new file ([`IntervalSync::retarget`]) before writing to it.
//!
//! A failed sync stops the partition, as on the writer thread: after a
//! failed fsync the kernel may have dropped the dirty pages.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::error::{LogError, Result};
use crate::partition::PartitionShared;
use crate::{io, stats};

/// The file the syncer syncs.
struct Target {
    file: File,
    path: PathBuf,
    /// Set by [`IntervalSync::stop`].
    stopped: bool,
}

/// The interval syncer of one partition (shared by its writer and syncer
/// threads).
pub struct IntervalSync {
    shared: Arc<PartitionShared>,
    interval: Duration,
    target: Mutex<Target>,
    wake: Condvar,
    /// Written since the last sync began.
    unsynced: AtomicBool,
}

/// Records one fdatasync of segment data (stats and the latency metric).
pub fn record_sync(started: Instant) {
    stats::global().fsyncs.fetch_add(1, Ordering::Relaxed);
    metrics::histogram!(crate::metrics::FSYNC_SECONDS).record(started.elapsed().as_secs_f64());
}

impl IntervalSync {
    /// A syncer of `file` (the active segment at `path`, duplicated here)
    /// every `interval`.
    pub fn new(
        shared: Arc<PartitionShared>,
        interval: Duration,
        file: &File,
        path: &Path,
    ) -> Result<Self> {
        Ok(IntervalSync {
            shared,
            interval,
            target: Mutex::new(Target {
                file: file.try_clone().map_err(|e| LogError::io(path, e))?,
                path: path.to_path_buf(),
                stopped: false,
            }),
            wake: Condvar::new(),
            unsynced: AtomicBool::new(false),
        })
    }

    /// The writer wrote to the current target.
    pub fn wrote(&self) {
        self.unsynced.store(true, Ordering::Release);
    }

    /// The writer rolled: later writes go to `file` at `path`.
    pub fn retarget(&self, file: &File, path: &Path) -> Result<()> {
        let file = file.try_clone().map_err(|e| LogError::io(path, e))?;
        let mut target = self.target.lock().expect("sync target");
        target.file = file;
        target.path = path.to_path_buf();
        Ok(())
    }

    /// The syncer thread's body: until [`IntervalSync::stop`], syncs every
    /// interval when something was written; stops at the first failure.
    pub fn run(&self) {
        let mut target = self.target.lock().expect("sync target");
        loop {
            let (woken, _) = self
                .wake
                .wait_timeout(target, self.interval)
                .expect("sync target");
            target = woken;
            if target.stopped || self.shared.failure().is_some() {
                return;
            }
            if !self.unsynced.swap(false, Ordering::AcqRel) {
                continue;
            }
            let started = Instant::now();
            let faults = self.shared.log_config.faults.as_deref();
            if let Err(e) = io::sync_data(&target.file, &target.path, faults) {
                self.shared.fail(&e);
                return;
            }
            record_sync(started);
        }
    }

    /// Ends [`IntervalSync::run`] (the writer syncs what is left itself).
    pub fn stop(&self) {
        self.target.lock().expect("sync target").stopped = true;
        self.wake.notify_all();
    }
}
