//! The data-directory lock: one `kappa serve` per data directory.
//!
//! `<data_dir>/kappa.lock` holds the PID of the server using the directory,
//! under an exclusive `flock` taken before anything else is opened. A
//! second server on the same directory stops at once with a message naming
//! the directory and the other PID, instead of opening the log beside the
//! first. The kernel releases the lock when the process ends, however it
//! ends (`kill -9` included), so a stale file never blocks a start.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use anyhow::{bail, Context};

/// The lock file's name inside the data directory.
pub const LOCK_FILE: &str = "kappa.lock";

/// Holds the data directory until dropped.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the lock of `dir` (creating the directory), or fails naming the
    /// process that holds it.
    pub fn acquire(dir: &Path) -> anyhow::Result<DataDirLock> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the data directory {}", dir.display()))?;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let error = std::io::Error::last_os_error();
            if error.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    "another kappa process".to_string()
                } else {
                    format!("another kappa process (pid {holder})")
                };
                bail!(
                    "the data directory {} is in use by {who}: stop it first, or give this \
                     server another --data-dir",
                    dir.display()
                );
            }
            return Err(error).with_context(|| format!("locking {}", path.display()));
        }
        file.set_len(0)?;
        file.seek(SeekFrom::Start(0))?;
        writeln!(file, "{}", std::process::id())?;
        Ok(DataDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let error = DataDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(error.contains("in use"), "{error}");
        assert!(error.contains(&std::process::id().to_string()), "{error}");
        assert!(error.contains(&dir.path().display().to_string()), "{error}");
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }
}
