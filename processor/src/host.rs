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

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kappa_log::Log;

use crate::diff::Diff;
use crate::error::Result;
use crate::plan::Plan;
use crate::source::{Clusters, LogSource, Source};
use crate::spread::{
    self, Assignments, OnePartition, SpreadHandle, SpreadVersion, Task, TaskStore,
};
use crate::state::key::Meta;
use crate::state::store::Store;
use crate::state::stores::Stores;
use crate::view::{self, AsOf, Page, RowFilter, RowTest, ViewQuery, ViewRow};

pub use crate::runner::{RunOptions, StartFrom};
pub use crate::state::store::Scope;
pub use crate::version::{PartitionLag, RunningProcessor as RunningVersion};

/// Most partitions [`ViewReader::committed_partitions`] looks for (a bound
/// on its walk over the offset keys; Kafka topics have far fewer).
const MAX_COMMITTED_PARTITIONS: usize = 1 << 20;

/// The stores of every hosted version, and the log they read.
#[derive(Debug)]
pub struct ViewHost {
    stores: Arc<Stores>,
    log: Arc<Log>,
    /// The Kafka clusters views may read from (none: only the built-in log).
    clusters: Option<Arc<dyn Clusters>>,
    /// Which versions are spread over several nodes, and the partitions
    /// this node owns of each (none: every version runs whole here).
    assignments: Option<Arc<dyn Assignments>>,
    /// The versions spread over nodes running here, for their readers.
    spread: Mutex<HashMap<Scope, SpreadHandle>>,
    /// Where the tasks of versions spread over nodes are checkpointed, and
    /// how often (none: they are not).
    checkpoints: Option<(Arc<dyn spread::Checkpoints>, Duration)>,
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
            stores: Arc::new(stores),
            log,
            clusters: None,
            assignments: None,
            spread: Mutex::new(HashMap::new()),
            checkpoints: None,
        })
    }

    /// The host with the tasks of versions spread over nodes checkpointed
    /// to `checkpoints` every `every`, and restored from there when a
    /// node takes a partition over.
    pub fn with_checkpoints(
        mut self,
        checkpoints: Arc<dyn spread::Checkpoints>,
        every: Duration,
    ) -> ViewHost {
        self.checkpoints = Some((checkpoints, every));
        self
    }

    /// The host with versions spread over the nodes `assignments` says
    /// ([`crate::spread`]).
    pub fn with_assignments(mut self, assignments: Arc<dyn Assignments>) -> ViewHost {
        self.assignments = Some(assignments);
        self
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

    /// Every version that has a store on disk (its own, or a task's).
    pub fn on_disk(&self) -> Vec<Scope> {
        let mut scopes: Vec<Scope> = self
            .stores
            .scopes()
            .into_iter()
            .map(|s| spread::parse_task_scope(&s).map_or(s, |(version, _)| version))
            .collect();
        scopes.sort_by(|a, b| (&a.name, a.version).cmp(&(&b.name, b.version)));
        scopes.dedup();
        scopes
    }

    /// The stores of `scope`'s tasks on disk.
    fn task_scopes(&self, scope: &Scope) -> Vec<Scope> {
        self.stores
            .scopes()
            .into_iter()
            .filter(|s| spread::parse_task_scope(s).is_some_and(|(v, _)| v == *scope))
            .collect()
    }

    /// True if `scope` has a store (open, or on disk).
    pub fn has(&self, scope: &Scope) -> bool {
        self.stores.exists(scope) || !self.task_scopes(scope).is_empty()
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
        if let Some(assignment) = self.assignment_of(&plan, &scope)? {
            for task in self.task_scopes(&scope) {
                self.stores.remove(&task)?;
            }
            return self.run_spread(plan, version, options, assignment);
        }
        let store = self.stores.create(&scope)?;
        self.run(plan, version, store, options).inspect_err(|_| {
            let _ = self.stores.remove(&scope);
        })
    }

    /// The assignment of version `scope` of `plan` when it is spread over
    /// nodes.
    fn assignment_of(
        &self,
        plan: &Plan,
        scope: &Scope,
    ) -> Result<Option<Arc<dyn spread::Assignment>>> {
        let Some(assignments) = &self.assignments else {
            return Ok(None);
        };
        if plan.source.cluster.is_some() {
            spread::check_spreadable(plan)?;
        }
        assignments.assignment(plan, scope)
    }

    /// Runs version `version` of `plan` as the tasks of the partitions
    /// `assignment` gives this node, each in its own store (resumed from
    /// it when it exists).
    fn run_spread(
        &self,
        plan: Plan,
        version: u64,
        options: RunOptions,
        assignment: Arc<dyn spread::Assignment>,
    ) -> Result<RunningVersion> {
        let scope = Scope {
            name: plan.name.clone(),
            version,
        };
        let source = self.source_of(&plan)?;
        let partitions = source.open(&plan.source.topic)?.partition_count() as usize;
        let checkpoint =
            self.checkpoints
                .as_ref()
                .map(|(checkpoints, every)| spread::CheckpointPlan {
                    checkpoints: checkpoints.clone(),
                    every: *every,
                    scratch: self.stores.dir().join(".checkpoints"),
                });
        // A GROUP BY on another column than the record key: re-keyed
        // through a repartition topic first (spread::repartition).
        let repartition = match spread::repartition::needs_repartition(&plan) {
            true => {
                let assignments = self.assignments.as_ref().ok_or_else(|| {
                    crate::error::ProcessorError::InvalidPlan("no Kappa cluster".into())
                })?;
                let cluster = plan.source.cluster.clone().unwrap_or_default();
                let topic = assignments.internal_topic(&scope, "repartition");
                assignments.create_topic(&cluster, &topic, partitions as u32)?;
                let (first, _) = spread::repartition::stages(&plan, &topic, 0)?;
                Some((topic, self.cluster_sink_maker(&first)))
            }
            false => None,
        };
        let start = {
            let checkpoint = checkpoint.clone();
            let (stores, log, plan, scope) = (
                self.stores.clone(),
                self.log.clone(),
                plan.clone(),
                scope.clone(),
            );
            let sink = self.cluster_sink_maker(&plan);
            move |partition: u32, role: spread::Role| -> Result<Task> {
                let run =
                    |plan: &Plan, task: &Scope, start: StartFrom, sink: &Option<SinkMaker>| {
                        let mut options = options.clone();
                        options.start = start;
                        // A node's cores go to its tasks, one thread each.
                        options.workers = 1;
                        start_task(
                            &stores,
                            &log,
                            &source,
                            sink,
                            checkpoint.as_ref(),
                            plan,
                            task,
                            partition,
                            options,
                        )
                    };
                let start_here = match &options.start {
                    StartFrom::Offsets(offsets) => StartFrom::Offsets(
                        offsets
                            .get(partition as usize)
                            .copied()
                            .into_iter()
                            .collect(),
                    ),
                    other => other.clone(),
                };
                let task = spread::task_scope(&scope, partition);
                // A standby writes nothing (its version is a view: no
                // sink) and reads what the owner's first stage writes.
                let standby = role == spread::Role::Standby;
                let Some((topic, first_sink)) = &repartition else {
                    let sink = if standby { &None } else { &sink };
                    let (running, store) = run(&plan, &task, start_here, sink)?;
                    return Ok(Task {
                        running,
                        store,
                        upstream: None,
                    });
                };
                let (first, second) = spread::repartition::stages(&plan, topic, partition)?;
                // The aggregate reads its repartition partition from the
                // start of the (new) topic; the first stage the input from
                // where the version starts.
                let (running, store) = run(&second, &task, StartFrom::Earliest, &sink)?;
                if standby {
                    return Ok(Task {
                        running,
                        store,
                        upstream: None,
                    });
                }
                let upstream = spread::first_stage_scope(&scope, partition);
                let first_running = run(&first, &upstream, start_here, first_sink)?;
                Ok(Task {
                    running,
                    store,
                    upstream: Some(first_running),
                })
            }
        };
        // Standbys keep views warm; a derived stream's records are written
        // by the partition's owner alone.
        let keeps_standbys = plan.sink == crate::plan::Sink::View;
        let spread = SpreadVersion::start(
            scope.clone(),
            partitions,
            assignment,
            Box::new(start),
            checkpoint,
            keeps_standbys,
        )?;
        self.spread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(scope.clone(), spread.handle());
        Ok(RunningVersion::spread(plan, scope, spread))
    }

    /// Makes the sink of a task's output topic when `plan`'s lives on a
    /// cluster (one writer per task).
    fn cluster_sink_maker(&self, plan: &Plan) -> Option<SinkMaker> {
        let (Some(name), crate::plan::Sink::Topic(topic), Some(clusters)) =
            (&plan.sink_cluster, &plan.sink, &self.clusters)
        else {
            return None;
        };
        let (name, topic, clusters) = (name.clone(), topic.clone(), clusters.clone());
        Some(Box::new(move |task: &Scope| {
            clusters.sink(&name, &format!("{}@{}", task.name, task.version), &topic)
        }))
    }

    /// Resumes a version that ran before from its store (from its last
    /// commit).
    pub fn resume(&self, plan: Plan, version: u64, options: RunOptions) -> Result<RunningVersion> {
        let scope = Scope {
            name: plan.name.clone(),
            version,
        };
        if let Some(assignment) = self.assignment_of(&plan, &scope)? {
            return self.run_spread(plan, version, options, assignment);
        }
        let store = self.stores.existing(&scope)?;
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
        if let Some(assignment) = self.assignment_of(&plan, &scope)? {
            // Each task is retried by the version itself.
            return self.run_spread(plan, version, options, assignment);
        }
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
        if let Some(tasks) = self.spread_stores(scope) {
            return Some(ViewReader {
                scope: scope.clone(),
                parts: Parts::Tasks(tasks),
            });
        }
        self.stores.get_open(scope).map(|store| ViewReader {
            scope: scope.clone(),
            parts: Parts::One(store),
        })
    }

    /// A reader of `scope`'s rows that also reads the standbys running
    /// here whose rows are at most `max_staleness` behind, when `scope` is
    /// spread over nodes; else [`Self::reader`].
    pub fn reader_within(&self, scope: &Scope, max_staleness: Duration) -> Option<ViewReader> {
        match self.spread_handle(scope) {
            Some(handle) => Some(ViewReader {
                scope: scope.clone(),
                parts: Parts::Tasks(handle.stores_within(max_staleness)),
            }),
            None => self.reader(scope),
        }
    }

    /// The stores of the tasks running here of `scope`, when it is spread
    /// over nodes and still running.
    fn spread_stores(&self, scope: &Scope) -> Option<Vec<TaskStore>> {
        self.spread_handle(scope).map(|h| h.stores())
    }

    /// The handle of `scope` when it is spread over nodes and still
    /// running.
    pub fn spread_handle(&self, scope: &Scope) -> Option<SpreadHandle> {
        let mut spread = self.spread.lock().unwrap_or_else(PoisonError::into_inner);
        let handle = spread.get(scope)?;
        if handle.is_stopped() {
            spread.remove(scope);
            return None;
        }
        Some(handle.clone())
    }

    /// A reader of `scope`'s rows from its store on disk, opening it if
    /// needed.
    pub fn reader_on_disk(&self, scope: &Scope) -> Result<ViewReader> {
        if let Some(reader) = self
            .reader(scope)
            .filter(|r| matches!(r.parts, Parts::Tasks(_)))
        {
            return Ok(reader);
        }
        Ok(ViewReader {
            parts: Parts::One(self.stores.existing(scope)?),
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
        for task in self.task_scopes(scope) {
            self.stores.remove(&task)?;
        }
        self.stores.remove(scope)
    }

    /// Deletes `scope`'s store once no reader holds it (a read in
    /// progress), waiting at most `patience`, then deletes anyway; a new
    /// version of the same scope can start at once after.
    pub fn remove_when_closed(&self, scope: &Scope, patience: Duration) -> Result<()> {
        for task in self.task_scopes(scope) {
            self.stores.remove_when_closed(&task, patience)?;
        }
        self.stores.remove_when_closed(scope, patience)
    }
}

/// Makes the sink of a task's output topic on a cluster, for the task.
type SinkMaker = Box<dyn Fn(&Scope) -> Result<Arc<dyn crate::sink::OutputSink>> + Send + Sync>;

/// Starts one task of a spread version: `plan` as `task` over partition
/// `partition` of its stream topic in `source`, in its store (restored
/// from the newest checkpoint first when that is ahead of it).
#[allow(clippy::too_many_arguments)]
fn start_task(
    stores: &Stores,
    log: &Arc<Log>,
    source: &Arc<dyn Source>,
    sink: &Option<SinkMaker>,
    checkpoint: Option<&spread::CheckpointPlan>,
    plan: &Plan,
    task: &Scope,
    partition: u32,
    options: RunOptions,
) -> Result<(RunningVersion, Arc<Store>)> {
    if let Some(plan) = checkpoint {
        spread::checkpoint::prepare(stores, task, plan)?;
    }
    let store = match stores.exists(task) {
        true => stores.existing(task)?,
        false => stores.create(task)?,
    };
    let mut plan = plan.clone();
    plan.name = task.name.clone();
    // A co-partitioned table is read one partition per task too — unless
    // the store was built reading it whole (its table offsets are of
    // every partition).
    let mut narrowed = vec![plan.source.topic.as_str()];
    if let Some(table) = spread::partition::co_partitioned_table(&plan, source.as_ref())? {
        let whole = store
            .get(&task.state_cf(), &Meta::TableOffset(1).key())?
            .is_some();
        if !whole {
            narrowed.push(table);
        }
    }
    let source = OnePartition::of_topics(source.clone(), &narrowed, partition);
    let sink = match sink {
        Some(make) => Some(make(task)?),
        None => None,
    };
    let running = RunningVersion::start(
        plan,
        task.version,
        log.clone(),
        source,
        sink,
        store.clone(),
        options,
    )?;
    Ok((running, store))
}

/// Reads one version's rows, its position and its size. Each read is one
/// consistent snapshot of the version's store — of each task's store, for
/// a version spread over nodes, whose answers merge the tasks running here
/// (their keys are disjoint: a key's rows live in its partition's task).
#[derive(Clone)]
pub struct ViewReader {
    scope: Scope,
    parts: Parts,
}

/// Where a version's rows are.
#[derive(Clone)]
enum Parts {
    /// One store.
    One(Arc<Store>),
    /// The stores of the tasks running here ([`crate::spread`]).
    Tasks(Vec<TaskStore>),
}

impl ViewReader {
    /// The version read.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The input partitions whose rows this reader holds: `None` for a
    /// version running whole, the partitions owned here for one spread
    /// over nodes.
    pub fn partitions_held(&self) -> Option<Vec<u32>> {
        match &self.parts {
            Parts::One(_) => None,
            Parts::Tasks(tasks) => Some(tasks.iter().map(|t| t.partition).collect()),
        }
    }

    /// One page of the rows `query` selects that pass `filter`, starting
    /// at `cursor`, and the input offsets and watermark those rows
    /// reflect (`partitions`: the input's partition count; for a version
    /// spread over nodes, partitions not held here answer offset 0).
    #[allow(clippy::too_many_arguments)] // One read: what, which rows, where, how many.
    pub fn page(
        &self,
        query: &ViewQuery,
        filter: &RowFilter,
        test: Option<&RowTest<'_>>,
        cursor: Option<&[u8]>,
        limit: usize,
        partitions: usize,
    ) -> Result<(Page, AsOf)> {
        match &self.parts {
            Parts::One(store) => view::query_page_as_of(
                store,
                &self.scope,
                query,
                filter,
                test,
                cursor,
                limit,
                partitions,
            ),
            Parts::Tasks(tasks) => {
                let mut pages = Vec::with_capacity(tasks.len());
                let mut as_of = Vec::with_capacity(tasks.len());
                for task in tasks {
                    let (page, at) = view::query_page_as_of(
                        &task.store,
                        &task.scope,
                        query,
                        filter,
                        test,
                        cursor,
                        limit,
                        1,
                    )?;
                    pages.push(page);
                    as_of.push((task.partition, at));
                }
                Ok((
                    view::merge_pages(pages, limit),
                    merge_as_of(as_of, partitions),
                ))
            }
        }
    }

    /// Up to `limit` rows `query` selects from `cursor`, and the cursor
    /// of the next page.
    pub fn rows(
        &self,
        query: &ViewQuery,
        cursor: Option<&[u8]>,
        limit: usize,
    ) -> Result<(Vec<ViewRow>, Option<Vec<u8>>)> {
        match &self.parts {
            Parts::One(store) => view::query(store, &self.scope, query, cursor, limit),
            Parts::Tasks(_) => {
                let (page, _) = self.page(query, &RowFilter::default(), None, cursor, limit, 0)?;
                Ok((page.rows, page.next_cursor))
            }
        }
    }

    /// The input offsets (of `partitions` partitions) and the watermark
    /// of the version's last commit.
    pub fn as_of(&self, partitions: usize) -> Result<AsOf> {
        match &self.parts {
            Parts::One(store) => view::as_of(store, &self.scope, partitions),
            Parts::Tasks(tasks) => {
                let as_of = tasks
                    .iter()
                    .map(|t| Ok((t.partition, view::as_of(&t.store, &t.scope, 1)?)))
                    .collect::<Result<Vec<_>>>()?;
                Ok(merge_as_of(as_of, partitions))
            }
        }
    }

    /// How many input partitions the version has committed offsets for
    /// (the partitions it read, as far as its store says: for an input
    /// whose partition count cannot be asked now, such as a cluster that
    /// does not answer). For a version spread over nodes: one past the
    /// highest partition held here.
    pub fn committed_partitions(&self) -> Result<usize> {
        let store = match &self.parts {
            Parts::One(store) => store,
            Parts::Tasks(tasks) => {
                return Ok(tasks
                    .iter()
                    .map(|t| t.partition as usize + 1)
                    .max()
                    .unwrap_or(0))
            }
        };
        let cf = self.scope.state_cf();
        let mut partitions = 0;
        while partitions < MAX_COMMITTED_PARTITIONS
            && store
                .get(&cf, &crate::state::key::Meta::Offset(partitions).key())?
                .is_some()
        {
            partitions += 1;
        }
        Ok(partitions)
    }

    /// Approximate bytes of the version's state and rows (of the tasks
    /// held here, for a version spread over nodes).
    pub fn size_bytes(&self) -> u64 {
        let size = |store: &Store, scope: &Scope| {
            store.size(&scope.state_cf()).unwrap_or(0) + store.size(&scope.view_cf()).unwrap_or(0)
        };
        match &self.parts {
            Parts::One(store) => size(store, &self.scope),
            Parts::Tasks(tasks) => tasks.iter().map(|t| size(&t.store, &t.scope)).sum(),
        }
    }

    /// How `candidate`'s rows differ from this version's (`partitions`:
    /// the input's partition count), with up to `examples` differing rows.
    /// Versions spread over nodes are not compared (yet).
    pub fn diff(&self, candidate: &ViewReader, partitions: usize, examples: usize) -> Result<Diff> {
        match (&self.parts, &candidate.parts) {
            (Parts::One(a), Parts::One(b)) => crate::diff::diff(
                (a, &self.scope),
                (b, &candidate.scope),
                partitions,
                examples,
            ),
            _ => Err(crate::error::ProcessorError::InvalidPlan(
                "versions spread over several nodes cannot be compared yet".into(),
            )),
        }
    }

    fn stores(&self) -> Vec<&Arc<Store>> {
        match &self.parts {
            Parts::One(store) => vec![store],
            Parts::Tasks(tasks) => tasks.iter().map(|t| &t.store).collect(),
        }
    }

    /// Test seam: while `hold` is true, the version's commits wait before
    /// writing (see [`ViewReader::writes_waiting`]).
    #[doc(hidden)]
    pub fn hold_writes(&self, hold: bool) {
        for store in self.stores() {
            store.hold_writes(hold);
        }
    }

    /// Test seam: commits waiting because of [`ViewReader::hold_writes`].
    #[doc(hidden)]
    pub fn writes_waiting(&self) -> usize {
        self.stores().iter().map(|s| s.writes_waiting()).sum()
    }
}

/// The position of a version spread over nodes from its tasks' (each of
/// one partition): offsets of the `partitions` partitions (0 where no task
/// is held here), and the lowest watermark.
fn merge_as_of(tasks: Vec<(u32, AsOf)>, partitions: usize) -> AsOf {
    let mut offsets = vec![0; partitions];
    let mut watermark: Option<i64> = None;
    for (partition, at) in tasks {
        if let (Some(slot), Some(&o)) = (offsets.get_mut(partition as usize), at.offsets.first()) {
            *slot = o;
        }
        if let Some(w) = at.watermark {
            watermark = Some(watermark.map_or(w, |m| m.min(w)));
        }
    }
    AsOf { offsets, watermark }
}
