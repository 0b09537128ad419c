//! Hosting views: everything a server needs to run view versions and read
//! their rows, without touching runners, stores or RocksDB.
//!
//! A [`ViewHost`] owns the stores of every version under one directory
//! (one RocksDB database per version, `<dir>/<name>@<version>`; see
//! `docs/data-directory.md`) and the log they read. It starts a version
//! ([`ViewHost::start_fresh`], [`ViewHost::resume`], [`ViewHost::restart`]),
//! answering a [`RunningVersion`] to watch ([`RunningVersion::progress`],
//! [`RunningVersion::lag`]) and stop ([`RunningVersion::stop`]); it hands
//! out a [`ViewReader`] for a version's rows, position and size; and it
//! deletes a version's state ([`ViewHost::remove`]).
//!
//! A version is named by its [`Scope`] (view name and version number).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kappa_log::Log;

use crate::diff::Diff;
use crate::error::Result;
use crate::plan::Plan;
use crate::source::{Clusters, LogSource, Source};
use crate::state::store::Store;
use crate::state::stores::Stores;
use crate::view::{self, AsOf, Page, RowFilter, ViewQuery, ViewRow};

pub use crate::runner::{RunOptions, StartFrom};
pub use crate::state::store::Scope;
pub use crate::version::{PartitionLag, RunningProcessor as RunningVersion};

/// Most partitions [`ViewReader::committed_partitions`] looks for (a bound
/// on its walk over the offset keys; Kafka topics have far fewer).
const MAX_COMMITTED_PARTITIONS: usize = 1 << 20;

/// The stores of every hosted version, and the log they read.
#[derive(Debug)]
pub struct ViewHost {
    stores: Stores,
    log: Arc<Log>,
    /// The Kafka clusters views may read from (none: only the built-in log).
    clusters: Option<Arc<dyn Clusters>>,
}

impl ViewHost {
    /// Hosts the versions whose stores are under `dir` (created if
    /// missing), reading `log`. Versions still in a store shared by all
    /// (`legacy_shared`, the layout before one store per version) are
    /// first moved into stores of their own.
    pub fn open(dir: &Path, legacy_shared: &Path, log: Arc<Log>) -> Result<ViewHost> {
        let stores = Stores::open(dir)?;
        stores.adopt_shared(legacy_shared)?;
        Ok(ViewHost {
            stores,
            log,
            clusters: None,
        })
    }

    /// The host with `clusters` as the sources of views over a Kafka
    /// cluster's topics ([`crate::plan::SourceSpec::cluster`]).
    pub fn with_clusters(mut self, clusters: Arc<dyn Clusters>) -> ViewHost {
        self.clusters = Some(clusters);
        self
    }

    /// The sink of `plan`'s output topic when it lives on a cluster,
    /// written by version `version`.
    fn cluster_sink_of(
        &self,
        plan: &Plan,
        version: u64,
    ) -> Result<Option<Arc<dyn crate::sink::OutputSink>>> {
        let (Some(name), crate::plan::Sink::Topic(topic)) = (&plan.sink_cluster, &plan.sink) else {
            return Ok(None);
        };
        let Some(clusters) = &self.clusters else {
            return Err(crate::error::ProcessorError::InvalidPlan(format!(
                "cluster '{name}' is not configured on this server"
            )));
        };
        let writer = format!("{}@{version}", plan.name);
        Ok(Some(clusters.sink(name, &writer, topic)?))
    }

    /// Where `plan` reads its inputs: the built-in log, or the cluster it
    /// names.
    pub fn source_of(&self, plan: &Plan) -> Result<Arc<dyn Source>> {
        match (&plan.source.cluster, &self.clusters) {
            (None, _) => Ok(LogSource::shared(self.log.clone())),
            (Some(name), Some(clusters)) => clusters.source(name),
            (Some(name), None) => Err(crate::error::ProcessorError::InvalidPlan(format!(
                "cluster '{name}' is not configured on this server"
            ))),
        }
    }

    /// The directory holding every version's store.
    pub fn dir(&self) -> &Path {
        self.stores.dir()
    }

    /// Every version that has a store on disk.
    pub fn on_disk(&self) -> Vec<Scope> {
        self.stores.scopes()
    }

    /// True if `scope` has a store (open, or on disk).
    pub fn has(&self, scope: &Scope) -> bool {
        self.stores.exists(scope)
    }

    /// Starts `plan` as version `version` of `plan.name` in a new store.
    /// State left by an earlier use of the number (a crash before the
    /// caller recorded it) is dropped first; if the start fails, the new
    /// store is removed again.
    pub fn start_fresh(
        &self,
        plan: Plan,
        version: u64,
        options: RunOptions,
    ) -> Result<RunningVersion> {
        let scope = Scope {
            name: plan.name.clone(),
            version,
        };
        let store = self.stores.create(&scope)?;
        self.run(plan, version, store, options).inspect_err(|_| {
            let _ = self.stores.remove(&scope);
        })
    }

    /// Resumes a version that ran before from its store (from its last
    /// commit).
    pub fn resume(&self, plan: Plan, version: u64, options: RunOptions) -> Result<RunningVersion> {
        let store = self.stores.existing(&Scope {
            name: plan.name.clone(),
            version,
        })?;
        self.run(plan, version, store, options)
    }

    /// Starts a version again after it failed, from its last commit. When
    /// a write of its store failed, on a new handle: RocksDB answers every
    /// write of a handle whose write failed (a full disk) with that error
    /// until the database is reopened, so a retry on the old handle would
    /// fail however much space had been freed (waits at most `patience`
    /// for readers of the old handle). Otherwise on the open store, which
    /// stays readable.
    pub fn restart(
        &self,
        plan: Plan,
        version: u64,
        options: RunOptions,
        patience: Duration,
    ) -> Result<RunningVersion> {
        let scope = Scope {
            name: plan.name.clone(),
            version,
        };
        let store = self.stores.reopen(&scope, patience)?;
        self.run(plan, version, store, options)
    }

    fn run(
        &self,
        plan: Plan,
        version: u64,
        store: Arc<Store>,
        options: RunOptions,
    ) -> Result<RunningVersion> {
        let source = self.source_of(&plan)?;
        let sink = self.cluster_sink_of(&plan, version)?;
        RunningVersion::start(
            plan,
            version,
            self.log.clone(),
            source,
            sink,
            store,
            options,
        )
    }

    /// A reader of `scope`'s rows, if its store is open (a version whose
    /// store is not open failed to start or was removed).
    pub fn reader(&self, scope: &Scope) -> Option<ViewReader> {
        self.stores.get_open(scope).map(|store| ViewReader {
            store,
            scope: scope.clone(),
        })
    }

    /// A reader of `scope`'s rows from its store on disk, opening it if
    /// needed.
    pub fn reader_on_disk(&self, scope: &Scope) -> Result<ViewReader> {
        Ok(ViewReader {
            store: self.stores.existing(scope)?,
            scope: scope.clone(),
        })
    }

    /// Test seam: `scope`'s open store itself (to inject faults).
    #[doc(hidden)]
    pub fn open_store(&self, scope: &Scope) -> Option<Arc<Store>> {
        self.stores.get_open(scope)
    }

    /// Deletes `scope`'s store (state and rows) now.
    pub fn remove(&self, scope: &Scope) -> Result<()> {
        self.stores.remove(scope)
    }

    /// Deletes `scope`'s store once no reader holds it (a read in
    /// progress), waiting at most `patience`, then deletes anyway; a new
    /// version of the same scope can start at once after.
    pub fn remove_when_closed(&self, scope: &Scope, patience: Duration) -> Result<()> {
        self.stores.remove_when_closed(scope, patience)
    }
}

/// Reads one version's rows, its position and its size. Each read is one
/// consistent snapshot of the version's store.
#[derive(Clone)]
pub struct ViewReader {
    store: Arc<Store>,
    scope: Scope,
}

impl ViewReader {
    /// The version read.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// One page of the rows `query` selects that pass `filter`, starting
    /// at `cursor`, and the input offsets and watermark those rows
    /// reflect (`partitions`: the input's partition count).
    pub fn page(
        &self,
        query: &ViewQuery,
        filter: &RowFilter,
        cursor: Option<&[u8]>,
        limit: usize,
        partitions: usize,
    ) -> Result<(Page, AsOf)> {
        view::query_page_as_of(
            &self.store,
            &self.scope,
            query,
            filter,
            cursor,
            limit,
            partitions,
        )
    }

    /// Up to `limit` rows `query` selects from `cursor`, and the cursor
    /// of the next page.
    pub fn rows(
        &self,
        query: &ViewQuery,
        cursor: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<ViewRow>, Option<Vec<u8>>)> {
        view::query(&self.store, &self.scope, query, cursor, limit)
    }

    /// The input offsets (of `partitions` partitions) and the watermark
    /// of the version's last commit.
    pub fn as_of(&self, partitions: usize) -> Result<AsOf> {
        view::as_of(&self.store, &self.scope, partitions)
    }

    /// How many input partitions the version has committed offsets for
    /// (the partitions it read, as far as its store says: for an input
    /// whose partition count cannot be asked now, such as a cluster that
    /// does not answer).
    pub fn committed_partitions(&self) -> Result<usize> {
        let cf = self.scope.state_cf();
        let mut partitions = 0;
        while partitions < MAX_COMMITTED_PARTITIONS
            && self
                .store
                .get(&cf, &crate::state::key::Meta::Offset(partitions).key())?
                .is_some()
        {
            partitions += 1;
        }
        Ok(partitions)
    }

    /// Approximate bytes of the version's state and rows.
    pub fn size_bytes(&self) -> u64 {
        let size = |cf: String| self.store.size(&cf).unwrap_or(0);
        size(self.scope.state_cf()) + size(self.scope.view_cf())
    }

    /// How `candidate`'s rows differ from this version's (`partitions`:
    /// the input's partition count), with up to `examples` differing rows.
    pub fn diff(&self, candidate: &ViewReader, partitions: usize, examples: usize) -> Result<Diff> {
        crate::diff::diff(
            (&self.store, &self.scope),
            (&candidate.store, &candidate.scope),
            partitions,
            examples,
        )
    }

    /// Test seam: while `hold` is true, the version's commits wait before
    /// writing (see [`ViewReader::writes_waiting`]).
    #[doc(hidden)]
    pub fn hold_writes(&self, hold: bool) {
        self.store.hold_writes(hold);
    }

    /// Test seam: commits waiting because of [`ViewReader::hold_writes`].
    #[doc(hidden)]
    pub fn writes_waiting(&self) -> usize {
        self.store.writes_waiting()
    }
}
