//! The state of every processor version, one RocksDB database each:
//!
//! ```text
//! <dir>/<name>@<version>/                  a version's Store (column families
//!                                          <name>@<version>.state and .view)
//! <dir>/<name>@<version>.damaged-<ms>/     a store that failed RocksDB's checks,
//!                                          kept aside (never deleted)
//! ```
//!
//! One database per version isolates damage: a table file that fails its
//! checksum, a lost manifest or a background error (which RocksDB makes
//! database-wide, stopping every write) takes down that version only; the
//! log and every other view keep serving. A version's store is opened on
//! first use and stays open until the version is dropped, or until a retry
//! of the failed version reopens it ([`Stores::reopen`]): only a new handle
//! clears such a background error.
//!
//! Damage found at open moves the version's directory aside and answers
//! [`ProcessorError::StateDamaged`], naming where it is kept: the caller
//! fails that version and the operator rebuilds it from the log (a replay)
//! knowingly — a silent rebuild would serve less than before if retention
//! has expired part of the input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::{ProcessorError, Result};
use crate::state::store::{Batch, Scope, Store, WRITE_BUFFER_BYTES};

/// Entries per write while copying a shared store apart.
const COPY_BATCH: usize = 10_000;

/// The scope named `<name>@<version>` (a store directory, or a column
/// family name without its suffix); `None` for anything else (a kept-aside
/// `.damaged-<ms>` store).
fn parse_scope(text: &str) -> Option<Scope> {
    let (name, version) = text.rsplit_once('@')?;
    Some(Scope {
        name: name.to_string(),
        version: version.parse().ok()?,
    })
}

/// Renames `from` to `to`, naming both on failure.
fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        ProcessorError::Stopped(format!(
            "cannot rename {} to {}: {e}",
            from.display(),
            to.display()
        ))
    })
}

/// Waits at most `patience` until `store` has no other holder; answers
/// whether it has none.
fn sole_owner_within(store: &Arc<Store>, patience: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + patience;
    while Arc::strong_count(store) > 1 && std::time::Instant::now() < deadline {
        // Readers hold a store for one read; nothing signals its end.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Arc::strong_count(store) == 1
}

/// Every version's store under one directory.
#[derive(Debug)]
pub struct Stores {
    dir: PathBuf,
    write_buffer_bytes: usize,
    open: Mutex<HashMap<Scope, Arc<Store>>>,
    /// Milliseconds since the epoch, for the names of kept-aside stores.
    now_ms: fn() -> i64,
}

impl Stores {
    /// The stores under `dir` (created if missing). Nothing is opened yet.
    pub fn open(dir: &Path) -> Result<Stores> {
        Self::open_with_write_buffer(dir, WRITE_BUFFER_BYTES)
    }

    /// [`Stores::open`] with memtables of `write_buffer_bytes` (tests).
    pub fn open_with_write_buffer(dir: &Path, write_buffer_bytes: usize) -> Result<Stores> {
        std::fs::create_dir_all(dir).map_err(|e| {
            ProcessorError::Stopped(format!("cannot create {}: {e}", dir.display()))
        })?;
        Ok(Stores {
            dir: dir.to_path_buf(),
            write_buffer_bytes,
            open: Mutex::new(HashMap::new()),
            now_ms: kappa_log::now_ms,
        })
    }

    /// The directory holding every store.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the store of `scope` lives.
    pub fn path(&self, scope: &Scope) -> PathBuf {
        self.dir.join(format!("{}@{}", scope.name, scope.version))
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Scope, Arc<Store>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every version with a store on disk (kept-aside stores excluded).
    pub fn scopes(&self) -> Vec<Scope> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut out: Vec<Scope> = entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter_map(|n| parse_scope(&n))
            .collect();
        out.sort_by(|a, b| (&a.name, a.version).cmp(&(&b.name, b.version)));
        out
    }

    /// True if `scope` has a store on disk.
    pub fn exists(&self, scope: &Scope) -> bool {
        self.lock().contains_key(scope) || self.path(scope).join("CURRENT").exists()
    }

    /// The store of a version that has one (open already, or on disk).
    /// A store RocksDB finds damaged is moved aside:
    /// [`ProcessorError::StateDamaged`]. A version without a store on disk
    /// answers [`ProcessorError::StateDamaged`] too: its state is lost.
    pub fn existing(&self, scope: &Scope) -> Result<Arc<Store>> {
        let mut open = self.lock();
        if let Some(store) = open.get(scope) {
            return Ok(store.clone());
        }
        let path = self.path(scope);
        if !path.join("CURRENT").exists() {
            return Err(ProcessorError::StateDamaged(format!(
                "the state of {}@{} is missing ({} does not hold a store)",
                scope.name,
                scope.version,
                path.display()
            )));
        }
        let store = self.open_at(scope, &path)?;
        open.insert(scope.clone(), store.clone());
        Ok(store)
    }

    /// A new, empty store for a version that never ran; whatever an earlier
    /// use of the number left (a crash before the catalog named it) is
    /// deleted first.
    pub fn create(&self, scope: &Scope) -> Result<Arc<Store>> {
        self.remove(scope)?;
        let mut open = self.lock();
        let store = Arc::new(Store::create_for(
            &self.path(scope),
            self.write_buffer_bytes,
            scope,
        )?);
        open.insert(scope.clone(), store.clone());
        Ok(store)
    }

    /// The store of `scope` if it is open (no disk access).
    pub fn get_open(&self, scope: &Scope) -> Option<Arc<Store>> {
        self.lock().get(scope).cloned()
    }

    /// Closes and deletes the store of `scope` (the version's state and
    /// rows). Its processor must have stopped; a reader still holding the
    /// store keeps reading files it has open.
    pub fn remove(&self, scope: &Scope) -> Result<()> {
        drop(self.lock().remove(scope));
        let path = self.path(scope);
        match std::fs::remove_dir_all(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(ProcessorError::Stopped(format!(
                "cannot delete {}: {e}",
                path.display()
            ))),
        }
    }

    /// [`Stores::remove`] for a version being retired: once no one else
    /// holds its store (a read in progress), so the directory is deleted
    /// with the database closed and a new store of the same scope can open
    /// at once. Waits at most `patience`, then deletes anyway.
    pub fn remove_when_closed(&self, scope: &Scope, patience: std::time::Duration) -> Result<()> {
        let held = self.lock().remove(scope);
        if let Some(store) = held {
            if !sole_owner_within(&store, patience) {
                tracing::warn!(
                    view = %scope.name,
                    version = scope.version,
                    "a reader still holds the store of a dropped version: deleting it anyway"
                );
            }
        }
        self.remove(scope)
    }

    /// Closes the store of `scope` and opens it again from disk, for a
    /// version started again after a failure. RocksDB makes a failed write
    /// (a full disk) a background error of the whole database that every
    /// later write answers until the database is reopened — freeing space
    /// does not clear it — so a retry on the same handle fails forever. The
    /// new handle holds the last commit (a failed write applies nothing).
    ///
    /// RocksDB refuses a second handle on one directory, so this waits at
    /// most `patience` for whoever else holds the store (a read in
    /// progress; the failed processor has let go of it) and fails,
    /// keeping the store open as it was, if they still do. Damage found by
    /// the new open moves the store aside, as [`Stores::existing`] does.
    /// A store none of whose writes failed (the version failed for another
    /// reason: its source, its state limit) is kept open as it is, and
    /// stays readable.
    pub fn reopen(&self, scope: &Scope, patience: std::time::Duration) -> Result<Arc<Store>> {
        let mut open = self.lock();
        match open.get(scope) {
            Some(store) if !store.write_failed() => return Ok(store.clone()),
            _ => {}
        }
        // Out of the map while it closes: readers see the version as
        // unavailable for that moment instead of blocking on the lock.
        let Some(old) = open.remove(scope) else {
            drop(open);
            return self.existing(scope);
        };
        drop(open);
        if !sole_owner_within(&old, patience) {
            self.lock().insert(scope.clone(), old);
            return Err(ProcessorError::Stopped(format!(
                "the store of {}@{} is still in use, so it cannot be reopened; \
                 the next retry tries again",
                scope.name, scope.version
            )));
        }
        let failing = old.injected_failure();
        // The last handle: dropping it closes the database.
        drop(old);
        let mut open = self.lock();
        let store = self.open_at(scope, &self.path(scope))?;
        store.fail_writes(failing);
        open.insert(scope.clone(), store.clone());
        Ok(store)
    }

    /// Moves every version out of a store shared by all versions (the
    /// layout before one store per version) into its own store, then
    /// renames the shared store to `<shared>.migrated-<ms>` (kept: the
    /// operator deletes it). The rename is the commit point: a crash before
    /// it redoes the whole copy at the next start (each version's store is
    /// made anew). A shared store that is damaged is renamed to
    /// `<shared>.damaged-<ms>` instead, and its versions find no state.
    /// Answers how many versions moved.
    pub fn adopt_shared(&self, shared: &Path) -> Result<usize> {
        if !shared.join("CURRENT").exists() {
            return Ok(0);
        }
        let kept = |what: &str| {
            let mut name = shared.as_os_str().to_owned();
            name.push(format!(".{what}-{}", (self.now_ms)()));
            PathBuf::from(name)
        };
        let legacy = match Store::open(shared) {
            Ok(store) => store,
            Err(e) if e.is_corruption() => {
                let aside = kept("damaged");
                rename(shared, &aside)?;
                tracing::error!(
                    path = %shared.display(),
                    kept_at = %aside.display(),
                    error = %e,
                    "the shared state store is damaged: it is kept aside and its views fail until rebuilt"
                );
                return Ok(0);
            }
            Err(e) => return Err(e),
        };
        let mut scopes: Vec<Scope> = legacy
            .column_families()
            .iter()
            .filter_map(|cf| parse_scope(cf.strip_suffix(".state")?))
            .collect();
        scopes.sort_by(|a, b| (&a.name, a.version).cmp(&(&b.name, b.version)));
        for scope in &scopes {
            let store = self.create(scope)?;
            store.ensure(scope)?;
            for cf in [scope.state_cf(), scope.view_cf()] {
                let mut batch = Batch::default();
                legacy.for_each_entry(&cf, &[], None, |k, v| {
                    batch.put(&cf, k, v);
                    if batch.len() >= COPY_BATCH {
                        store.write(std::mem::take(&mut batch))?;
                    }
                    Ok(())
                })?;
                store.write(batch)?;
            }
            tracing::info!(view = %scope.name, version = scope.version, "moved a version's state into its own store");
        }
        drop(legacy);
        let aside = kept("migrated");
        rename(shared, &aside)?;
        tracing::info!(
            versions = scopes.len(),
            kept_at = %aside.display(),
            "every version's state now has its own store; the shared store is kept (delete it once the views look right)"
        );
        Ok(scopes.len())
    }

    /// Opens the store at `path`; damage moves it aside.
    fn open_at(&self, scope: &Scope, path: &Path) -> Result<Arc<Store>> {
        let error = match Store::open_with_write_buffer(path, self.write_buffer_bytes) {
            Ok(store) => return Ok(Arc::new(store)),
            // Only damage is moved aside: a lock held by another server, a
            // permission or a full disk must fail, not hide the state.
            Err(e) if !e.is_corruption() => return Err(e),
            Err(e) => e,
        };
        let aside = self.set_aside(scope, path)?;
        tracing::error!(
            view = %scope.name,
            version = scope.version,
            kept_at = %aside.display(),
            error = %error,
            "the state of this version is damaged: it is kept aside, the version fails"
        );
        Err(ProcessorError::StateDamaged(format!(
            "the state of {}@{} is damaged ({error}); it is kept at {}",
            scope.name,
            scope.version,
            aside.display()
        )))
    }

    /// Moves the store of `scope` (not open: called under the lock) aside
    /// to `<name>@<version>.damaged-<ms>` and answers where.
    fn set_aside(&self, scope: &Scope, path: &Path) -> Result<PathBuf> {
        let aside = self.dir.join(format!(
            "{}@{}.damaged-{}",
            scope.name,
            scope.version,
            (self.now_ms)()
        ));
        rename(path, &aside)?;
        Ok(aside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_store_is_created_with_its_versions_column_families() {
        let dir = tempfile::tempdir().unwrap();
        let stores = Stores::open(dir.path()).unwrap();
        let scope = Scope {
            name: "v".into(),
            version: 3,
        };
        let store = stores.create(&scope).unwrap();
        let mut families = store.column_families();
        families.sort();
        assert_eq!(families, ["default", "v@3.state", "v@3.view"]);
        // Nothing left for the runtime to create.
        store.ensure(&scope).unwrap();
        assert_eq!(store.column_families().len(), 3);
    }
}
