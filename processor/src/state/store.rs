//! The RocksDB state store: one database under the data directory, a pair
//! of column families per processor version — `<name>@<version>.state`
//! (operator state, input offsets, watermark, outbox) and
//! `<name>@<version>.view` (the rows readers query). Everything a commit
//! changes goes into one `WriteBatch`, written with the WAL synced, so state,
//! view rows and offsets move together or not at all.

use std::path::Path;
use std::sync::Arc;

use rocksdb::{
    properties, BoundColumnFamily, DBWithThreadMode, IteratorMode, MultiThreaded, Options,
    ReadOptions, WriteBatch, WriteOptions,
};

use crate::error::{ProcessorError, Result};

/// Namespaces inside a `.state` column family (first key byte).
pub mod ns {
    /// Aggregate accumulators: group key (+ window).
    pub const ACCUMULATOR: u8 = 0x01;
    /// Deduplication ids.
    pub const DEDUP: u8 = 0x02;
    /// Join table rows by record key.
    pub const TABLE: u8 = 0x03;
    /// Offsets, watermark, outbox.
    pub const META: u8 = 0x10;
}

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
}

type Db = DBWithThreadMode<MultiThreaded>;

/// The state database.
pub struct Store {
    db: Db,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.db.path())
            .finish()
    }
}

/// Puts and deletes for one atomic commit, by column family name.
#[derive(Debug, Default)]
pub struct Batch {
    ops: Vec<(String, Vec<u8>, Option<Vec<u8>>)>,
    bytes: usize,
}

impl Batch {
    /// Sets `key` to `value` in `cf`.
    pub fn put(&mut self, cf: &str, key: Vec<u8>, value: Vec<u8>) {
        self.bytes += key.len() + value.len();
        self.ops.push((cf.to_string(), key, Some(value)));
    }
    /// Deletes `key` in `cf`.
    pub fn delete(&mut self, cf: &str, key: Vec<u8>) {
        self.bytes += key.len();
        self.ops.push((cf.to_string(), key, None));
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
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
        let cfs = match Db::list_cf(&opts, path) {
            Ok(cfs) => cfs,
            Err(_) => vec!["default".to_string()],
        };
        let db = Db::open_cf(&opts, path, cfs)?;
        Ok(Store { db })
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
                let mut opts = Options::default();
                opts.set_compression_type(rocksdb::DBCompressionType::Lz4);
                self.db.create_cf(&name, &opts)?;
            }
        }
        Ok(())
    }

    /// Drops the scope's column families (the version's state and rows).
    pub fn drop_scope(&self, scope: &Scope) -> Result<()> {
        for name in [scope.state_cf(), scope.view_cf()] {
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
        let mut wb = WriteBatch::default();
        for (cf, key, value) in &batch.ops {
            let handle = self.cf(cf)?;
            match value {
                Some(v) => wb.put_cf(&handle, key, v),
                None => wb.delete_cf(&handle, key),
            }
        }
        let mut opts = WriteOptions::default();
        opts.set_sync(true);
        self.db.write_opt(wb, &opts)?;
        Ok(())
    }

    /// Keys and values in `[lower, upper)` of `cf`, at most `limit`.
    pub fn scan(
        &self,
        cf: &str,
        lower: &[u8],
        upper: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let handle = self.cf(cf)?;
        let mut opts = ReadOptions::default();
        if let Some(upper) = upper {
            opts.set_iterate_upper_bound(upper.to_vec());
        }
        let mode = IteratorMode::From(lower, rocksdb::Direction::Forward);
        let mut out = Vec::new();
        for item in self.db.iterator_cf_opt(&handle, opts, mode) {
            if out.len() >= limit {
                break;
            }
            let (k, v) = item?;
            out.push((k.to_vec(), v.to_vec()));
        }
        Ok(out)
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
