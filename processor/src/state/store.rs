//! A RocksDB state store: one database per processor version (see
//! [`super::stores`]; a data directory of the earlier layout holds every version in one
//! database), a pair of column families per version — `<name>@<version>.state`
//! (operator state, input offsets, watermark, outbox) and
//! `<name>@<version>.view` (the rows readers query). Everything a commit
//! changes goes into one `WriteBatch`, written with the WAL synced, so state,
//! view rows and offsets move together or not at all.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    properties, BlockBasedOptions, BoundColumnFamily, ColumnFamilyDescriptor, DBWithThreadMode,
    MultiThreaded, Options, ReadOptions, WriteBatch, WriteOptions,
};

use crate::error::{ProcessorError, Result};

/// Which processor version's column families.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    /// Processor (and view) name.
    pub name: String,
    /// Version number.
    pub version: u64,
}

impl Scope {
    /// Column family of operator state.
    pub fn state_cf(&self) -> String {
        format!("{}@{}.state", self.name, self.version)
    }
    /// Column family of view rows.
    pub fn view_cf(&self) -> String {
        format!("{}@{}.view", self.name, self.version)
    }
    /// Column family of an inner aggregate's rows, for a view aggregating
    /// them (a subquery or CTE in `FROM`); made only for such a view.
    pub fn stage_cf(&self) -> String {
        format!("{}@{}.stage", self.name, self.version)
    }
}

/// Operators' tests' store: a fresh one in a temporary directory (kept
/// while the `TempDir` lives), with the column families of version 1 of
/// `name` made, its stage's included.
#[cfg(test)]
pub(crate) fn temp_store(name: &str) -> (tempfile::TempDir, Store, Scope) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let scope = Scope {
        name: name.into(),
        version: 1,
    };
    store.ensure(&scope).unwrap();
    store.ensure_cf(&scope.stage_cf()).unwrap();
    (dir, store, scope)
}

type Db = DBWithThreadMode<MultiThreaded>;

/// Options of every column family. Memtables are kept small (16 MiB): state
/// keys arrive in random order, and a skiplist insert into a large memtable
/// is mostly cache misses. A block bloom filter makes lookups of absent keys
/// cheap on disk; there is no memtable bloom filter, since every write would
/// pay for it and the operators' complete indexes already avoid looking up
/// keys that do not exist.
///
/// Memtable inserts start from where the previous one with the same first
/// byte went ([`INSERT_HINT_OPTIONS`]): operators write a commit's keys in key
/// order, so each insert usually lands a few entries past the previous one
/// and climbs only a few skiplist levels instead of searching from the top.
fn cf_options(write_buffer_bytes: usize) -> Options {
    let mut opts = Options::default()
        .get_options_from_string(INSERT_HINT_OPTIONS)
        .expect("a valid options string");
    opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
    opts.set_write_buffer_size(write_buffer_bytes);
    let mut table = BlockBasedOptions::default();
    table.set_bloom_filter(10.0, false);
    table.set_whole_key_filtering(true);
    opts.set_block_based_table_factory(&table);
    opts
}

/// Memtable size of every column family (16 MiB).
pub const WRITE_BUFFER_BYTES: usize = 16 << 20;

/// RocksDB's insert hints, which its C API sets only through an options
/// string: one hint (the last insert position) per first key byte. Only the
/// memtable's insert path changes; what is stored is the same.
const INSERT_HINT_OPTIONS: &str =
    "memtable_insert_with_hint_prefix_extractor=rocksdb.FixedPrefix.1";

/// The state database.
pub struct Store {
    db: Db,
    write_buffer_bytes: usize,
    /// Fault seam: while set, every write fails with this reason.
    failing_writes: std::sync::Mutex<Option<String>>,
    /// A write of this handle failed: RocksDB keeps answering that error
    /// until the database is opened again ([`Store::write_failed`]).
    write_failed: std::sync::atomic::AtomicBool,
    /// Fault seam: while true, writes wait (a stalled disk); with the
    /// number of writes waiting.
    held_writes: (std::sync::Mutex<(bool, usize)>, std::sync::Condvar),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db.path())
            .finish()
    }
}

/// Puts and deletes for one atomic commit, by column family name. Keys and
/// values are copied into one buffer, so building a batch of many small
/// writes costs no allocation per write.
#[derive(Debug, Default)]
pub struct Batch {
    /// Column family names, each once; ops refer to them by index.
    cfs: Vec<String>,
    /// Keys and values, back to back.
    data: Vec<u8>,
    /// (column family, key range, value range or `None` for a delete).
    ops: Vec<(
        usize,
        std::ops::Range<usize>,
        Option<std::ops::Range<usize>>,
    )>,
    bytes: usize,
}

impl Batch {
    fn cf_index(&mut self, cf: &str) -> usize {
        match self.cfs.iter().position(|c| c == cf) {
            Some(i) => i,
            None => {
                self.cfs.push(cf.to_string());
                self.cfs.len() - 1
            }
        }
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> std::ops::Range<usize> {
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        start..self.data.len()
    }

    /// Appends `other`'s operations after this batch's.
    pub fn append(&mut self, other: Batch) {
        let base = self.data.len();
        let shift = |r: std::ops::Range<usize>| r.start + base..r.end + base;
        let cfs: Vec<usize> = other.cfs.iter().map(|cf| self.cf_index(cf)).collect();
        self.data.extend_from_slice(&other.data);
        self.ops.extend(
            other
                .ops
                .into_iter()
                .map(|(cf, key, value)| (cfs[cf], shift(key), value.map(shift))),
        );
        self.bytes += other.bytes;
    }

    /// Sets `key` to `value` in `cf`.
    pub fn put(&mut self, cf: &str, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        self.bytes += key.len() + value.len();
        let cf = self.cf_index(cf);
        let key = self.push_bytes(key);
        let value = self.push_bytes(value);
        self.ops.push((cf, key, Some(value)));
    }
    /// Sets `key` to the value `write` appends to the buffer it is given,
    /// in `cf`: a value written in place, not made on its own and copied.
    pub fn put_with(&mut self, cf: &str, key: &[u8], write: impl FnOnce(&mut Vec<u8>)) {
        let cf = self.cf_index(cf);
        let key = self.push_bytes(key);
        let start = self.data.len();
        write(&mut self.data);
        self.bytes += key.len() + (self.data.len() - start);
        self.ops.push((cf, key, Some(start..self.data.len())));
    }
    /// Deletes `key` in `cf`.
    pub fn delete(&mut self, cf: &str, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        self.bytes += key.len();
        let cf = self.cf_index(cf);
        let key = self.push_bytes(key);
        self.ops.push((cf, key, None));
    }
    /// Number of operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }
    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
    /// Bytes of keys and values.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Store {
    /// Opens (creating) the database at `path` with every existing column family.
    pub fn open(path: &Path) -> Result<Store> {
        Self::open_with_write_buffer(path, WRITE_BUFFER_BYTES)
    }

    /// [`Store::open`] with memtables of `write_buffer_bytes` (tests use
    /// small ones to make RocksDB flush often).
    ///
    /// Atomic flush: a commit writes the `.state` column family (offsets,
    /// watermark, operator state) and the `.view` one (rows) in one batch,
    /// and RocksDB flushes every column family with data in its memtable
    /// together, so the files on disk never hold one without the other.
    /// Without it, a lost WAL (deleted, or a medium that dropped it) left
    /// a view's rows flushed but its offsets not: a restart replayed input
    /// the rows already counted.
    pub fn open_with_write_buffer(path: &Path, write_buffer_bytes: usize) -> Result<Store> {
        Self::open_with_column_families(path, write_buffer_bytes, &[])
    }

    /// A new store at `path` for `scope`, its column families created as
    /// the database is: RocksDB then writes its options file once, where
    /// creating each column family afterwards ([`Store::ensure`]) writes
    /// and syncs it again per family.
    pub fn create_for(path: &Path, write_buffer_bytes: usize, scope: &Scope) -> Result<Store> {
        Self::open_with_column_families(
            path,
            write_buffer_bytes,
            &[scope.state_cf(), scope.view_cf()],
        )
    }

    /// Opens (creating) the database at `path` with every existing column
    /// family and the missing ones of `create`.
    fn open_with_column_families(
        path: &Path,
        write_buffer_bytes: usize,
        create: &[String],
    ) -> Result<Store> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        opts.set_atomic_flush(true);
        let mut cfs = match Db::list_cf(&opts, path) {
            Ok(cfs) => cfs,
            Err(_) => vec!["default".to_string()],
        };
        for name in create {
            if !cfs.contains(name) {
                cfs.push(name.clone());
            }
        }
        let descriptors = cfs
            .into_iter()
            .map(|name| ColumnFamilyDescriptor::new(name, cf_options(write_buffer_bytes)));
        let db = Db::open_cf_descriptors(&opts, path, descriptors)?;
        Ok(Store {
            db,
            write_buffer_bytes,
            failing_writes: std::sync::Mutex::new(None),
            write_failed: Default::default(),
            held_writes: Default::default(),
        })
    }

    /// Fault injection (tests): while `reason` is set, every
    /// [`Store::write`] fails with it, as a full disk would make RocksDB's
    /// writes fail; `None` heals the store.
    #[doc(hidden)]
    pub fn fail_writes(&self, reason: Option<String>) {
        *self
            .failing_writes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = reason;
    }

    /// The write fault injected with [`Store::fail_writes`], if any: a new
    /// handle on the same directory takes it over, since the fault stands
    /// for the disk, which reopening the database does not change.
    #[doc(hidden)]
    pub fn injected_failure(&self) -> Option<String> {
        self.failing_writes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Fault injection (tests): while `hold` is true, every
    /// [`Store::write`] waits, as on a stalled disk; false lets them go.
    #[doc(hidden)]
    pub fn hold_writes(&self, hold: bool) {
        let (state, cv) = &self.held_writes;
        state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0 = hold;
        cv.notify_all();
    }

    /// Writes waiting because of [`Store::hold_writes`] (tests).
    #[doc(hidden)]
    pub fn writes_waiting(&self) -> usize {
        self.held_writes
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .1
    }

    /// Waits while writes are held.
    fn wait_while_held(&self) {
        let (state, cv) = &self.held_writes;
        let mut st = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !st.0 {
            return;
        }
        st.1 += 1;
        while st.0 {
            st = cv
                .wait(st)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        st.1 -= 1;
    }

    /// Flushes every column family's memtable to table files and waits
    /// (tests: the data is then in `.sst` files).
    #[doc(hidden)]
    pub fn flush_all(&self) -> Result<()> {
        let names = self.column_families();
        let handles = names
            .iter()
            .filter_map(|n| self.db.cf_handle(n))
            .collect::<Vec<_>>();
        let refs: Vec<&Arc<BoundColumnFamily<'_>>> = handles.iter().collect();
        self.db
            .flush_cfs_opt(&refs, &rocksdb::FlushOptions::default())?;
        Ok(())
    }

    /// A consistent copy of the database in `dir` (which must not exist),
    /// made by RocksDB's checkpoint: memtables flushed, table files hard
    /// linked (cheap), the manifest copied. Opening `dir` gives the store
    /// as of that moment, its last commit whole.
    pub fn checkpoint(&self, dir: &Path) -> Result<()> {
        rocksdb::checkpoint::Checkpoint::new(&self.db)?.create_checkpoint(dir)?;
        Ok(())
    }

    /// The table files of column family `cf` (tests: to damage them).
    #[doc(hidden)]
    pub fn table_files(&self, cf: &str) -> Result<Vec<std::path::PathBuf>> {
        Ok(self
            .db
            .live_files()?
            .into_iter()
            .filter(|f| f.column_family_name == cf)
            .map(|f| self.db.path().join(f.name.trim_start_matches('/')))
            .collect())
    }

    /// Waits until RocksDB's scheduled background flushes and compactions
    /// are done (tests: what is on disk is then settled).
    pub fn wait_for_background_work(&self) -> Result<()> {
        self.db
            .wait_for_compact(&rocksdb::WaitForCompactOptions::default())?;
        Ok(())
    }

    fn cf(&self, name: &str) -> Result<Arc<BoundColumnFamily<'_>>> {
        self.db
            .cf_handle(name)
            .ok_or_else(|| ProcessorError::NotFound(format!("column family {name}")))
    }

    /// Creates the scope's column families if missing.
    pub fn ensure(&self, scope: &Scope) -> Result<()> {
        for name in [scope.state_cf(), scope.view_cf()] {
            if self.db.cf_handle(&name).is_none() {
                self.db
                    .create_cf(&name, &cf_options(self.write_buffer_bytes))?;
            }
        }
        Ok(())
    }

    /// Creates the column family `name` if missing.
    pub fn ensure_cf(&self, name: &str) -> Result<()> {
        if self.db.cf_handle(name).is_none() {
            self.db
                .create_cf(name, &cf_options(self.write_buffer_bytes))?;
        }
        Ok(())
    }

    /// Drops the scope's column families (the version's state and rows).
    pub fn drop_scope(&self, scope: &Scope) -> Result<()> {
        for name in [scope.state_cf(), scope.view_cf(), scope.stage_cf()] {
            if self.db.cf_handle(&name).is_some() {
                self.db.drop_cf(&name)?;
            }
        }
        Ok(())
    }

    /// True if the scope's column families exist.
    pub fn has(&self, scope: &Scope) -> bool {
        self.db.cf_handle(&scope.state_cf()).is_some()
    }

    /// Every column family name.
    pub fn column_families(&self) -> Vec<String> {
        Db::list_cf(&Options::default(), self.db.path()).unwrap_or_default()
    }

    /// Reads one key.
    pub fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.db.get_cf(&self.cf(cf)?, key)?)
    }

    /// Writes a batch atomically, with the write-ahead log synced.
    pub fn write(&self, batch: Batch) -> Result<()> {
        self.wait_while_held();
        let failing = self
            .failing_writes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(reason) = failing {
            self.write_failed
                .store(true, std::sync::atomic::Ordering::Release);
            return Err(ProcessorError::WriteFailed(reason));
        }
        let handles = batch
            .cfs
            .iter()
            .map(|name| self.cf(name))
            .collect::<Result<Vec<_>>>()?;
        // Sized once: tag, column family and two lengths per operation at
        // most 16 bytes, plus the 12-byte header.
        let mut wb = WriteBatch::with_capacity_bytes(12 + batch.data.len() + 16 * batch.ops.len());
        for (cf, key, value) in &batch.ops {
            let handle = &handles[*cf];
            let key = &batch.data[key.clone()];
            match value {
                Some(v) => wb.put_cf(handle, key, &batch.data[v.clone()]),
                None => wb.delete_cf(handle, key),
            }
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(wb, &opts).inspect_err(|_| {
            self.write_failed
                .store(true, std::sync::atomic::Ordering::Release);
        })?;
        Ok(())
    }

    /// True once a write of this handle failed: a retry then needs the
    /// database opened again ([`crate::state::stores::Stores::reopen`]).
    pub fn write_failed(&self) -> bool {
        self.write_failed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Keys and values in `[lower, upper)` of `cf`, at most `limit`.
    pub fn scan(
        &self,
        cf: &str,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let iter = self.db.raw_iterator_cf_opt(&self.cf(cf)?, bounded(upper));
        collect(iter, lower, limit, true)
    }

    /// Keys in `[lower, upper)` of `cf`, at most `limit`.
    pub fn scan_keys(
        &self,
        cf: &str,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<Vec<u8>>> {
        let iter = self.db.raw_iterator_cf_opt(&self.cf(cf)?, bounded(upper));
        Ok(collect(iter, lower, limit, false)?
            .into_iter()
            .map(|(k, _)| k)
            .collect())
    }

    /// Calls `f` with every key in `[lower, upper)` of `cf`, in order,
    /// reading them a chunk at a time.
    pub fn for_each_key(
        &self,
        cf: &str,
        lower: &[u8],
        upper: Option<&[u8]>,
        mut f: impl FnMut(Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let mut after = lower.to_vec();
        loop {
            let chunk = self.scan_keys(cf, &after, upper, 10_000)?;
            let Some(last) = chunk.last() else {
                return Ok(());
            };
            after = last.clone();
            after.push(0);
            for k in chunk {
                f(k)?;
            }
        }
    }

    /// Calls `f` with every key and value in `[lower, upper)` of `cf`, in
    /// order, through one iterator (no copies).
    pub fn for_each_entry(
        &self,
        cf: &str,
        lower: &[u8],
        upper: Option<&[u8]>,
        mut f: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut iter = self.db.raw_iterator_cf_opt(&self.cf(cf)?, bounded(upper));
        iter.seek(lower);
        while let (Some(k), Some(v)) = (iter.key(), iter.value()) {
            f(k, v)?;
            iter.next();
        }
        iter.status()?;
        Ok(())
    }

    /// A consistent view of the whole store as of now: reads through it
    /// see one commit, never parts of two.
    pub fn snapshot(&self) -> Snapshot<'_> {
        Snapshot {
            store: self,
            snapshot: self.db.snapshot(),
        }
    }

    /// Approximate bytes of live data in `cf`.
    pub fn size(&self, cf: &str) -> Result<u64> {
        let handle = self.cf(cf)?;
        let live = self
            .db
            .property_int_value_cf(&handle, properties::ESTIMATE_LIVE_DATA_SIZE)?;
        let mem = self
            .db
            .property_int_value_cf(&handle, properties::CUR_SIZE_ALL_MEM_TABLES)?;
        Ok(live.unwrap_or(0) + mem.unwrap_or(0))
    }
}

/// Reads of the store at one point in time ([`Store::snapshot`]).
pub struct Snapshot<'a> {
    store: &'a Store,
    snapshot: rocksdb::SnapshotWithThreadMode<'a, Db>,
}

impl Snapshot<'_> {
    /// Reads one key.
    pub fn get(&self, cf: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.snapshot.get_cf(&self.store.cf(cf)?, key)?)
    }

    /// Keys and values in `[lower, upper)` of `cf`, at most `limit`.
    pub fn scan(
        &self,
        cf: &str,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let handle = self.store.cf(cf)?;
        let iter = self.snapshot.raw_iterator_cf_opt(&handle, bounded(upper));
        collect(iter, lower, limit, true)
    }
}

/// Read options that stop iteration at `upper` (exclusive), if given.
fn bounded(upper: Option<&[u8]>) -> ReadOptions {
    let mut opts = ReadOptions::default();
    if let Some(upper) = upper {
        opts.set_iterate_upper_bound(upper.to_vec());
    }
    opts
}

/// Up to `limit` entries from `lower` on: keys, and values when `values`
/// (else empty).
fn collect(
    mut iter: rocksdb::DBRawIteratorWithThreadMode<'_, Db>,
    lower: &[u8],
    limit: usize,
    values: bool,
) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    iter.seek(lower);
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(k) = iter.key() else { break };
        let v = match (values, iter.value()) {
            (true, Some(v)) => v.to_vec(),
            _ => Vec::new(),
        };
        out.push((k.to_vec(), v));
        iter.next();
    }
    iter.status()?;
    Ok(out)
}
