//! The file seam: every write and fdatasync of segment data and of the
//! consumer offsets store goes through here so tests can inject failures
//! (failed write, failed fsync, a torn write) without a special filesystem.
//! In production `faults` is `None` and these are plain calls.
//!
//! Every step that changes what is on disk — a write, an fdatasync, a
//! create, a rename, a truncation, a directory fsync, a removal — in the
//! segment writer, rolls and seals, topic creation and deletion and the
//! offsets store also passes [`crash::step`], which lets a test simulate a
//! process crash before any chosen step (`log/tests/crash_points.rs`).

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::error::{LogError, Result};

/// Switches that make the next I/O call fail. Shared with the test.
#[derive(Debug)]
pub struct FaultInjector {
    /// Fail the next fdatasync with EIO.
    pub fail_next_sync: AtomicBool,
    /// Fail the next write with ENOSPC after writing this many bytes of it
    /// (`usize::MAX` = off). 0 fails it before any byte is written.
    pub fail_next_write_after: AtomicUsize,
    /// Every write through [`write_all`] takes this lock first: a test that
    /// holds it stalls the writers (to fill their queues deterministically).
    pub write_gate: Mutex<()>,
    /// Writes started through [`write_all`] (counted before `write_gate`).
    pub writes_started: AtomicUsize,
    /// Every fdatasync through [`sync_data`] takes this lock first: a test
    /// that holds it stalls the syncs.
    pub sync_gate: Mutex<()>,
    /// fdatasyncs started through [`sync_data`] (counted before `sync_gate`).
    pub syncs_started: AtomicUsize,
    /// Every read of a partition takes this lock after it has read the
    /// partition's end offset and before it reads the segments ([`read_gate`]):
    /// a test that holds it can append while a read is between the two.
    pub read_gate: Mutex<()>,
    /// Reads that have read their end offset and come to `read_gate`
    /// (counted before it).
    pub reads_gated: AtomicUsize,
}

impl Default for FaultInjector {
    fn default() -> Self {
        Self::new()
    }
}

impl FaultInjector {
    /// An injector with nothing armed.
    pub fn new() -> Self {
        FaultInjector {
            fail_next_sync: AtomicBool::new(false),
            fail_next_write_after: AtomicUsize::new(usize::MAX),
            write_gate: Mutex::new(()),
            writes_started: AtomicUsize::new(0),
            sync_gate: Mutex::new(()),
            syncs_started: AtomicUsize::new(0),
            read_gate: Mutex::new(()),
            reads_gated: AtomicUsize::new(0),
        }
    }
}

/// Simulated process crashes at numbered steps, for tests that enumerate
/// every crash point of a scenario. Process-wide: a test binary that arms
/// it must run one test at a time. Unarmed (always, in production), a step
/// costs one atomic load.
pub mod crash {
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};

    use crate::error::{LogError, Result};

    /// Steps taken since the last `arm`.
    static STEPS: AtomicU64 = AtomicU64::new(0);
    /// The step that "crashes" (it and every later one fail); `u64::MAX` = off.
    static CRASH_AT: AtomicU64 = AtomicU64::new(u64::MAX);

    /// Makes step number `at` (counting from 0 from now) and every later
    /// step fail, as if the process had died just before it.
    pub fn arm(at: u64) {
        STEPS.store(0, Ordering::SeqCst);
        CRASH_AT.store(at, Ordering::SeqCst);
    }

    /// Turns the simulation off; returns the steps counted since `arm`.
    pub fn disarm() -> u64 {
        CRASH_AT.store(u64::MAX, Ordering::SeqCst);
        STEPS.load(Ordering::SeqCst)
    }

    /// True once the armed step was reached.
    pub fn crashed() -> bool {
        let at = CRASH_AT.load(Ordering::SeqCst);
        at != u64::MAX && STEPS.load(Ordering::SeqCst) > at
    }

    /// One step that changes what is on disk (`what` names it). Fails once
    /// the armed step is reached.
    pub fn step(path: &Path, what: &str) -> Result<()> {
        if CRASH_AT.load(Ordering::Relaxed) == u64::MAX {
            return Ok(());
        }
        let n = STEPS.fetch_add(1, Ordering::SeqCst);
        if n >= CRASH_AT.load(Ordering::SeqCst) {
            return Err(LogError::io(
                path,
                std::io::Error::other(format!("simulated crash before step {n} ({what})")),
            ));
        }
        Ok(())
    }
}

/// Writes all of `buf` at the file's current position.
pub fn write_all(
    file: &mut File,
    path: &Path,
    buf: &[u8],
    faults: Option<&FaultInjector>,
) -> Result<()> {
    crash::step(path, "write")?;
    if let Some(f) = faults {
        f.writes_started.fetch_add(1, Ordering::SeqCst);
        let _gate = f.write_gate.lock().unwrap_or_else(|e| e.into_inner());
        let after = f.fail_next_write_after.swap(usize::MAX, Ordering::SeqCst);
        if after != usize::MAX {
            let partial = after.min(buf.len());
            file.write_all(&buf[..partial])
                .map_err(|e| LogError::io(path, e))?;
            return Err(LogError::io(
                path,
                io::Error::new(
                    io::ErrorKind::StorageFull,
                    "injected: no space left on device",
                ),
            ));
        }
    }
    file.write_all(buf).map_err(|e| LogError::io(path, e))
}

/// [`write_all`] of `pieces` one after the other, in one `writev` where
/// the kernel takes them all.
pub fn write_all_vectored(
    file: &mut File,
    path: &Path,
    pieces: &[&[u8]],
    faults: Option<&FaultInjector>,
) -> Result<()> {
    if let [piece] = pieces {
        return write_all(file, path, piece, faults);
    }
    if faults.is_some() {
        // Tests only: the injector counts the bytes of one buffer.
        return write_all(file, path, &pieces.concat(), faults);
    }
    crash::step(path, "write")?;
    let mut slices: Vec<io::IoSlice> = pieces.iter().map(|p| io::IoSlice::new(p)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match file.write_vectored(rest) {
            Ok(0) => return Err(LogError::io(path, io::ErrorKind::WriteZero.into())),
            Ok(n) => io::IoSlice::advance_slices(&mut rest, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(LogError::io(path, e)),
        }
    }
    Ok(())
}

/// fdatasync: the file's data (and the size, if it changed) reach the disk.
pub fn sync_data(file: &File, path: &Path, faults: Option<&FaultInjector>) -> Result<()> {
    crash::step(path, "fdatasync")?;
    if let Some(f) = faults {
        f.syncs_started.fetch_add(1, Ordering::SeqCst);
        let _gate = f.sync_gate.lock().unwrap_or_else(|e| e.into_inner());
        if f.fail_next_sync.swap(false, Ordering::SeqCst) {
            return Err(LogError::io(
                path,
                io::Error::other("injected: fsync failed"),
            ));
        }
    }
    file.sync_data().map_err(|e| LogError::io(path, e))
}

/// Asks the operating system to drop `len` bytes of `file` from `offset`
/// from its page cache (`posix_fadvise(DONTNEED)`; a no-op elsewhere than
/// Linux). A hint, never an error: pages that are dirty, or mapped by a
/// reader, stay; the bytes themselves are untouched and read back from
/// disk.
pub fn drop_cached(file: &File, offset: u64, len: u64) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: a plain system call on an open descriptor; it reads no
        // memory of ours.
        let rc = unsafe {
            libc::posix_fadvise(file.as_raw_fd(), offset, len, libc::POSIX_FADV_DONTNEED)
        };
        if rc != 0 {
            tracing::debug!(error = %io::Error::from_raw_os_error(rc), "posix_fadvise(DONTNEED) failed");
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len);
}

/// The point between a partition read's end offset and its segments: with
/// `faults`, counts the read and waits for [`FaultInjector::read_gate`].
pub fn read_gate(faults: Option<&FaultInjector>) {
    if let Some(f) = faults {
        f.reads_gated.fetch_add(1, Ordering::SeqCst);
        drop(f.read_gate.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// fsyncs a directory so that created, renamed or deleted entries in it are
/// durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    crash::step(dir, "directory fsync")?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| LogError::io(dir, e))
}

/// Writes `contents` to `path` atomically: a temporary file, fdatasync,
/// rename, then a directory fsync.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    crash::step(&tmp, "create")?;
    let mut file = File::create(&tmp).map_err(|e| LogError::io(&tmp, e))?;
    crash::step(&tmp, "write")?;
    file.write_all(contents)
        .map_err(|e| LogError::io(&tmp, e))?;
    crash::step(&tmp, "fdatasync")?;
    file.sync_data().map_err(|e| LogError::io(&tmp, e))?;
    crash::step(path, "rename")?;
    std::fs::rename(&tmp, path).map_err(|e| LogError::io(path, e))?;
    sync_dir(path.parent().expect("a file path has a parent"))
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    /// Pieces of any sizes, empty ones among them, are written whole and
    /// in order.
    #[test]
    fn vectored_writes_write_every_piece_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let pieces: Vec<Vec<u8>> = [0usize, 5, 1 << 20, 0, 3, 70_000]
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8 + 1; n])
            .collect();
        let slices: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        for take in [1, 2, slices.len()] {
            let mut file = File::create(&path).unwrap();
            write_all_vectored(&mut file, &path, &slices[..take], None).unwrap();
            let mut got = Vec::new();
            File::open(&path).unwrap().read_to_end(&mut got).unwrap();
            assert_eq!(got, slices[..take].concat(), "{take} pieces");
        }
    }
}
