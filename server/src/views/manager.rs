//! The view manager: the processor's [`ViewHost`] (a store per version
//! under `<data>/views`), one [`RunningVersion`] per live version, and the operations that change
//! what runs — create, replace, replay, drop — each persisted in the
//! [`Catalog`] before or after the processors move so that a crash at any
//! point leaves a catalog the next start can resume from.
//!
//! Locks: `ops` serializes changes (API calls and the supervisor's swaps),
//! so slow work (opening a version restores its state) never blocks
//! readers; `state` guards the in-memory catalog and the running
//! processors and is only held briefly. Order: `ops`, then `state`.
//!
//! Blue/green: a replace or replay starts version n+1 next to n; the
//! supervisor (`supervisor.rs`) swaps it in once caught up. A derived
//! stream has no rows to keep serving and must not write its output twice,
//! so its new version takes over at once (the old one stops first).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::Instant;

use kappa_log::Log;
use kappa_processor::host::{RunOptions, RunningVersion, Scope, StartFrom, ViewHost};
use kappa_processor::plan::{Plan, Sink};
use kappa_processor::source::PartitionOffsets;
use kappa_processor::sql::SourceDecl;

use super::catalog::{BuildEntry, Catalog, Keeping, VersionEntry, ViewEntry};
use super::retry::{Clock, Retry};
use super::{validate_name, Result, ViewError};

/// A view's own settings from its latest `CREATE [OR REPLACE]` (the
/// server's apply where `None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ViewSettings {
    /// `KEEP_VERSIONS`: replaced versions kept.
    pub keep_versions: Option<u32>,
    /// `VERSION_GRACE`: how long each is kept (ms).
    pub version_grace_ms: Option<u64>,
    /// `PARALLELISM`: workers of each kind its next versions run with.
    pub parallelism: Option<u32>,
}

impl ViewSettings {
    /// Sets them on `view`; true if that changed anything.
    fn apply(self, view: &mut ViewEntry) -> bool {
        let before = (view.keep_versions, view.version_grace_ms, view.parallelism);
        view.keep_versions = self.keep_versions;
        view.version_grace_ms = self.version_grace_ms;
        view.parallelism = self.parallelism;
        before != (view.keep_versions, view.version_grace_ms, view.parallelism)
    }
}

/// Settings of the manager (from the server config).
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Data directory: the catalog and `views/` (the state stores) live here.
    pub data_dir: PathBuf,
    /// A build is swapped in once its total lag is at most this many records.
    pub swap_max_lag: u64,
    /// How long a replaced version stays readable (unless the view says).
    pub grace_ms: u64,
    /// How many replaced versions are kept (unless the view says).
    pub keep_versions: u32,
    /// Commit interval of every processor.
    pub commit_interval_ms: u64,
    /// Processors also commit as soon as they caught up with their input.
    pub commit_when_caught_up: bool,
    /// Workers of each kind a version runs with unless its view says.
    pub processor_threads: u32,
    /// What a topic a processor creates (a derived stream's output, a
    /// `LATE_TOPIC`) gets: the server's topic defaults.
    pub topic_defaults: kappa_log::TopicConfig,
    /// Time of retries of failed versions ([`Clock::system`] but in tests).
    pub clock: Clock,
    /// The Kafka clusters views may read from (`None`: only the built-in
    /// log).
    pub clusters: Option<Arc<dyn kappa_processor::source::Clusters>>,
    /// The partitions of views spread over the nodes of a Kappa cluster
    /// this node owns (`None`: every view runs whole here).
    pub assignments: Option<Arc<dyn kappa_processor::spread::Assignments>>,
    /// Where the tasks of spread versions are checkpointed, and how often.
    pub checkpoints: Option<(
        Arc<dyn kappa_processor::spread::Checkpoints>,
        std::time::Duration,
    )>,
}

/// In-memory state: the catalog as last persisted and what runs.
pub(super) struct State {
    /// The catalog, equal to the file.
    pub catalog: Catalog,
    /// Running versions.
    pub running: HashMap<Scope, RunningVersion>,
    /// Build progress samples (time, records done) for the rate: of
    /// builds, and of served versions still catching up.
    pub samples: HashMap<Scope, VecDeque<(Instant, u64)>>,
    /// Whether each running version caught up once, and keeps up.
    pub catch_up: HashMap<Scope, super::catch_up::CatchUp>,
    /// Bumped on every change, so the supervisor never misses a wakeup.
    pub changes: u64,
    /// Served versions that are down and retried, by view name.
    pub retries: HashMap<String, Retry>,
    /// Versions told to end whose thread and store are still going away
    /// ([`ViewManager::retire`]); a new store of the same scope waits.
    pub retiring: HashSet<Scope>,
    /// Builds spread over the nodes of a Kappa cluster, and the
    /// partitions whose tasks here have caught up (empty while they have
    /// not): the cluster swaps them in once every partition has
    /// ([`ViewManager::spread_builds`]).
    pub spread_ready: HashMap<Scope, Vec<u32>>,
}

/// Hosts the views of one server.
pub struct ViewManager {
    pub(super) log: Arc<Log>,
    pub(super) host: ViewHost,
    pub(super) config: ManagerConfig,
    pub(super) ops: Mutex<()>,
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
    pub(super) stopping: AtomicBool,
    pub(super) supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Notified whenever a retiring version is gone.
    pub(super) retired: Condvar,
    /// This manager, for the threads that finish retirements.
    me: Weak<ViewManager>,
    /// Those threads, joined by [`Self::close`]: each holds this manager
    /// (and so every open store) until it ends.
    retirers: Mutex<Vec<JoinHandle<()>>>,
}

/// How long a retired version's store waits for a read in progress before
/// it is deleted anyway.
const READER_PATIENCE: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a retry waits for a read in progress to let go of the failed
/// version's store before it gives up until the next retry.
const REOPEN_PATIENCE: std::time::Duration = std::time::Duration::from_secs(5);

/// Directory of the per-version state stores, in the data directory.
pub const STORES_DIR: &str = "views";
/// The store shared by every version in the earlier layout, moved apart at start.
pub const SHARED_STORE_DIR: &str = "state";

/// Locks, ignoring poisoning: every critical section leaves the data
/// consistent before anything can panic.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The scope of version `version` of view `name`.
pub(super) fn scope(name: &str, version: u64) -> Scope {
    Scope {
        name: name.to_string(),
        version,
    }
}

/// Hosts every version's store under `<data>/views`, first moving the
/// versions of a store shared by all (`<data>/state`, the earlier layout)
/// into stores of their own.
fn open_host(config: &ManagerConfig, log: Arc<Log>) -> Result<ViewHost> {
    let host = ViewHost::open(
        &config.data_dir.join(STORES_DIR),
        &config.data_dir.join(SHARED_STORE_DIR),
        log,
    )?;
    let host = match &config.clusters {
        Some(clusters) => host.with_clusters(clusters.clone()),
        None => host,
    };
    let host = match &config.assignments {
        Some(assignments) => host.with_assignments(assignments.clone()),
        None => host,
    };
    Ok(match &config.checkpoints {
        Some((checkpoints, every)) => host.with_checkpoints(checkpoints.clone(), *every),
        None => host,
    })
}

/// When a table's new version takes over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Swap {
    /// Once it has caught up (the default).
    #[default]
    Auto,
    /// When `promote` says so; until then it follows its input, ready.
    Manual,
}

/// What a replace or replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing: the definition is the same.
    Unchanged,
    /// Version n is being built in the background.
    Building(u64),
    /// Version n took over at once (derived streams).
    Served(u64),
}

impl ViewManager {
    /// Opens the store, loads the catalog, drops state no version owns and
    /// resumes every live version from its committed offsets. A version
    /// that cannot start is recorded as failed; the server still starts.
    pub fn open(log: Arc<Log>, config: ManagerConfig) -> Result<Arc<ViewManager>> {
        let host = open_host(&config, log.clone())?;
        let with_state: Vec<String> = host
            .on_disk()
            .iter()
            .map(|s| format!("{}@{}", s.name, s.version))
            .collect();
        let catalog = Catalog::open(&config.data_dir, &with_state, host.dir())?;
        let manager = Arc::new_cyclic(|me| ViewManager {
            me: me.clone(),
            retirers: Mutex::new(Vec::new()),
            retired: Condvar::new(),
            log,
            host,
            config,
            ops: Mutex::new(()),
            state: Mutex::new(State {
                catalog: catalog.clone(),
                running: HashMap::new(),
                samples: HashMap::new(),
                catch_up: HashMap::new(),
                changes: 0,
                retries: HashMap::new(),
                retiring: HashSet::new(),
                spread_ready: HashMap::new(),
            }),
            wake: Condvar::new(),
            stopping: AtomicBool::new(false),
            supervisor: Mutex::new(None),
        });
        manager.drop_orphans(&catalog);
        manager.resume(catalog)?;
        Ok(manager)
    }

    /// Deletes the stores of versions the catalog does not know (a crash
    /// between starting a version and persisting the catalog, or between
    /// persisting a drop and dropping the state).
    fn drop_orphans(&self, catalog: &Catalog) {
        for s in self.host.on_disk() {
            let live = catalog
                .views
                .get(&s.name)
                .is_some_and(|v| v.version(s.version).is_some());
            if !live {
                tracing::info!(view = %s.name, version = s.version, "dropping state no version owns");
                if let Err(e) = self.host.remove(&s) {
                    tracing::warn!(view = %s.name, version = s.version, error = %e, "cannot drop orphan state");
                }
            }
        }
    }

    fn resume(&self, mut catalog: Catalog) -> Result<()> {
        let mut running = HashMap::new();
        let mut retries = HashMap::new();
        for view in catalog.views.values_mut() {
            let versions: Vec<VersionEntry> = view.versions().cloned().collect();
            for entry in versions {
                match self.start(&view.name, &entry) {
                    Ok(p) => {
                        running.insert(scope(&view.name, entry.version), p);
                    }
                    Err(e) => {
                        let during_build = view
                            .building
                            .as_ref()
                            .is_some_and(|b| b.entry.version == entry.version);
                        tracing::error!(view = %view.name, version = entry.version, error = %e, "cannot resume");
                        let damaged = matches!(&e, ViewError::Processor(p) if p.is_corruption());
                        let reason = if damaged {
                            super::damaged_reason(&view.name, &e)
                        } else {
                            e.to_string()
                        };
                        if during_build {
                            view.building = None;
                            let _ = self.host.remove(&scope(&view.name, entry.version));
                        } else if !damaged {
                            // Damage is not retried: it would read the same
                            // damage. The operator rebuilds the version.
                            let now = self.config.clock.now_ms();
                            retries.insert(
                                view.name.clone(),
                                Retry::new(entry.version, reason.clone(), now),
                            );
                        }
                        view.failure = Some(super::catalog::Failure {
                            version: entry.version,
                            reason,
                            at_ms: kappa_log::now_ms(),
                            during_build,
                        });
                    }
                }
            }
        }
        if let Err(e) = self.save(&catalog) {
            // The failures are known in memory and retried; the file
            // catches up at the next change.
            tracing::error!(error = %e, "cannot persist the catalog after resuming");
        }
        let mut st = lock(&self.state);
        st.catalog = catalog;
        st.running = running;
        st.retries = retries;
        Ok(())
    }

    /// Resumes a version that ran before on its own thread, from its store.
    pub(super) fn start(&self, name: &str, entry: &VersionEntry) -> Result<RunningVersion> {
        let (plan, options) = self.run_options(name, entry);
        Ok(self.host.resume(plan, entry.version, options)?)
    }

    /// A reader of `name`@`version`, if its store is open (tests: to read
    /// rows and hold commits through its seams).
    #[doc(hidden)]
    pub fn reader_of(&self, name: &str, version: u64) -> Option<kappa_processor::host::ViewReader> {
        self.host.reader(&scope(name, version))
    }

    /// Starts a served version again after it failed, on a new handle of
    /// its store ([`ViewHost::restart`]). It resumes from the last commit.
    pub(super) fn restart(&self, name: &str, entry: &VersionEntry) -> Result<RunningVersion> {
        let (plan, options) = self.run_options(name, entry);
        Ok(self
            .host
            .restart(plan, entry.version, options, REOPEN_PATIENCE)?)
    }

    /// The plan `entry` runs under the name `name`, and how it runs.
    fn run_options(&self, name: &str, entry: &VersionEntry) -> (Plan, RunOptions) {
        let mut plan = entry.plan.clone();
        plan.name = name.to_string();
        let options = RunOptions {
            commit_interval_ms: self.config.commit_interval_ms,
            commit_when_caught_up: self.config.commit_when_caught_up,
            start: entry.start.clone(),
            output_topics: self.config.topic_defaults.clone(),
            workers: entry.workers.unwrap_or(self.config.processor_threads) as usize,
            ..RunOptions::default()
        };
        (plan, options)
    }

    /// Starts a version that never ran in a new store: state left by an
    /// earlier use of the number (a crash before the catalog was written)
    /// is dropped first.
    fn start_fresh(&self, name: &str, entry: &VersionEntry) -> Result<RunningVersion> {
        self.wait_retired(Some(&scope(name, entry.version)));
        let (plan, options) = self.run_options(name, entry);
        Ok(self.host.start_fresh(plan, entry.version, options)?)
    }

    /// Writes the catalog file.
    pub(super) fn save(&self, catalog: &Catalog) -> Result<()> {
        catalog
            .save(&Catalog::path(&self.config.data_dir))
            .map_err(ViewError::from)
    }

    /// After a failed save, drops the store of the version the save was
    /// to name, unless the catalog on disk names it: a save can fail after
    /// its rename (the directory sync), and the next start needs the state
    /// the catalog names.
    fn forget_unsaved(&self, s: &Scope) {
        let on_disk = Catalog::load(&Catalog::path(&self.config.data_dir));
        let named = on_disk.is_ok_and(|c| {
            c.views
                .get(&s.name)
                .is_some_and(|v| v.version(s.version).is_some())
        });
        if !named {
            let _ = self.host.remove(s);
        }
    }

    /// Installs a persisted catalog and processors that started, and
    /// wakes the supervisor.
    pub(super) fn install(&self, catalog: Catalog, started: Vec<(Scope, RunningVersion)>) {
        let mut st = lock(&self.state);
        st.catalog = catalog;
        st.running.extend(started);
        st.changes += 1;
        drop(st);
        self.wake.notify_all();
    }

    /// Ends versions the catalog no longer names and drops their state,
    /// returning at once: each is told to end at its next batch boundary
    /// without a final commit (its state goes anyway), and a thread waits
    /// for it and deletes its store. Until then its scope is `retiring`
    /// and a new store of the same scope waits ([`Self::wait_retired`]).
    /// Errors are logged: a restart drops whatever is left.
    pub(super) fn retire(&self, scopes: Vec<Scope>) {
        let taken: Vec<(Scope, Option<RunningVersion>)> = {
            let mut st = lock(&self.state);
            scopes
                .into_iter()
                .map(|s| {
                    st.samples.remove(&s);
                    st.catch_up.remove(&s);
                    st.retiring.insert(s.clone());
                    let p = st.running.remove(&s);
                    (s, p)
                })
                .collect()
        };
        for p in taken.iter().filter_map(|(_, p)| p.as_ref()) {
            p.abandon();
        }
        let work = Arc::new(Mutex::new(taken));
        let Some(me) = self.me.upgrade() else {
            return self.finish_retiring(&work);
        };
        let spawned = std::thread::Builder::new()
            .name("kappa-retire".into())
            .spawn({
                let work = work.clone();
                move || me.finish_retiring(&work)
            });
        match spawned {
            Ok(thread) => {
                let mut retirers = lock(&self.retirers);
                retirers.retain(|t| !t.is_finished());
                retirers.push(thread);
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot start a thread to retire versions: retiring inline");
                self.finish_retiring(&work);
            }
        }
    }

    /// Waits for retired versions' threads, deletes their stores, and
    /// wakes whoever waits for their scopes.
    fn finish_retiring(&self, work: &Mutex<Vec<(Scope, Option<RunningVersion>)>>) {
        let taken = std::mem::take(&mut *lock(work));
        for (s, p) in taken {
            if let Some(p) = p {
                if let Err(e) = p.stop() {
                    tracing::warn!(view = %s.name, version = s.version, error = %e, "stopped with an error");
                }
            }
            if let Err(e) = self.host.remove_when_closed(&s, READER_PATIENCE) {
                tracing::warn!(view = %s.name, version = s.version, error = %e, "cannot drop state");
            }
            lock(&self.state).retiring.remove(&s);
            self.retired.notify_all();
            tracing::debug!(view = %s.name, version = s.version, "version retired");
        }
    }

    /// Waits until `s` (or, with `None`, every version) is no longer
    /// retiring.
    pub(super) fn wait_retired(&self, s: Option<&Scope>) {
        let mut st = lock(&self.state);
        while s.map_or(!st.retiring.is_empty(), |s| st.retiring.contains(s)) {
            st = self
                .retired
                .wait(st)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A copy of the catalog.
    pub fn catalog(&self) -> Catalog {
        lock(&self.state).catalog.clone()
    }

    /// `f` of view `name`'s entry, read under the catalog's lock without
    /// copying the catalog (a pull query's per-statement look at its
    /// view); `None` if there is no such view. `f` must be quick.
    pub fn with_view<T>(&self, name: &str, f: impl FnOnce(&ViewEntry) -> T) -> Option<T> {
        lock(&self.state).catalog.views.get(name).map(f)
    }

    /// Refuses to let topic `topic` go while the catalog uses it: streams or
    /// tables declared over it, views reading it, views writing it.
    pub fn check_topic_unused(&self, topic: &str) -> Result<()> {
        let st = lock(&self.state);
        let catalog = &st.catalog;
        let mut users: Vec<String> = catalog
            .sources
            .values()
            .filter(|d| d.topic == topic)
            .map(|d| d.name.clone())
            .collect();
        users.extend(catalog.readers_of(topic, ""));
        users.extend(
            catalog
                .views
                .values()
                .filter(|v| v.output_topic() == Some(topic))
                .map(|v| v.name.clone()),
        );
        users.sort();
        users.dedup();
        if users.is_empty() {
            return Ok(());
        }
        Err(ViewError::HasDependents {
            name: format!("topic {topic}"),
            dependents: users,
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.stopping.load(Ordering::Acquire) {
            return Err(ViewError::Closed);
        }
        Ok(())
    }

    /// Creates view (or derived stream) `name` running `plan` as version 1
    /// from the start of its input.
    pub fn create(
        &self,
        name: &str,
        plan: Plan,
        sql: Option<String>,
        settings: ViewSettings,
    ) -> Result<u64> {
        validate_name(name)?;
        plan.validate().map_err(ViewError::InvalidPlan)?;
        let _ops = lock(&self.ops);
        self.check_open()?;
        let mut catalog = self.catalog();
        if catalog.views.contains_key(name) || catalog.sources.contains_key(name) {
            return Err(ViewError::Exists(name.to_string()));
        }
        let now = kappa_log::now_ms();
        let mut entry = VersionEntry {
            version: 1,
            plan,
            sql,
            start: StartFrom::Earliest,
            started_ms: now,
            first_offsets: None,
            workers: settings.parallelism,
        };
        let running = self.start_fresh(name, &entry)?;
        entry.first_offsets = Some(running.progress().committed_offsets);
        catalog.views.insert(
            name.to_string(),
            ViewEntry {
                name: name.to_string(),
                served: entry,
                building: None,
                grace: Vec::new(),
                failure: None,
                next_version: 2,
                created_ms: now,
                keep_versions: settings.keep_versions,
                version_grace_ms: settings.version_grace_ms,
                parallelism: settings.parallelism,
            },
        );
        if let Err(e) = self.save(&catalog) {
            drop(running);
            self.forget_unsaved(&scope(name, 1));
            return Err(e);
        }
        self.install(catalog, vec![(scope(name, 1), running)]);
        tracing::info!(view = name, "view created");
        Ok(1)
    }

    /// Replaces the definition of `name`: unchanged if `plan` is the
    /// newest definition already, else a new version (built in the
    /// background for tables, taking over at once for streams). The view
    /// takes `settings` either way.
    pub fn replace(
        &self,
        name: &str,
        plan: Plan,
        sql: Option<String>,
        swap: Swap,
        settings: ViewSettings,
    ) -> Result<Change> {
        plan.validate().map_err(ViewError::InvalidPlan)?;
        let _ops = lock(&self.ops);
        self.check_open()?;
        let mut catalog = self.catalog();
        let view = catalog
            .views
            .get_mut(name)
            .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
        let resettled = settings.apply(view);
        let mut current = view.latest().plan.clone();
        current.name = plan.name.clone();
        if current == plan {
            if resettled {
                self.save(&catalog)?;
                self.install(catalog, Vec::new());
            }
            return Ok(Change::Unchanged);
        }
        if (plan.sink == Sink::View) != view.is_table() {
            return Err(ViewError::BadRequest(format!(
                "{name:?} cannot change between a table and a stream: drop it first"
            )));
        }
        self.new_version(catalog, name, plan, sql, None, swap)
    }

    /// Rebuilds `name` with its newest definition from `from`, as a new
    /// version.
    pub fn replay(&self, name: &str, from: StartFrom, swap: Swap) -> Result<Change> {
        let _ops = lock(&self.ops);
        self.check_open()?;
        let catalog = self.catalog();
        let view = catalog
            .views
            .get(name)
            .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
        let latest = view.latest().clone();
        self.new_version(catalog, name, latest.plan, latest.sql, Some(from), swap)
    }

    /// Starts version `next_version` of `name` (under the `ops` lock). A
    /// build already running is cancelled: the newest request wins.
    fn new_version(
        &self,
        mut catalog: Catalog,
        name: &str,
        plan: Plan,
        sql: Option<String>,
        from: Option<StartFrom>,
        swap: Swap,
    ) -> Result<Change> {
        let view = catalog.views.get_mut(name).expect("checked by the caller");
        let version = view.next_version;
        view.next_version += 1;
        let cancelled = view.building.take().map(|b| scope(name, b.entry.version));
        let is_table = view.is_table();
        let continue_old = from.is_none();
        let mut entry = VersionEntry {
            version,
            plan,
            sql,
            start: from.unwrap_or(StartFrom::Earliest),
            started_ms: kappa_log::now_ms(),
            first_offsets: None,
            workers: view.parallelism,
        };
        if !is_table {
            return self.take_over(catalog, name, entry, cancelled, continue_old);
        }
        // Persist the cancellation first: if this start fails, the build
        // is gone either way.
        if let Some(c) = cancelled {
            self.save(&catalog)?;
            self.install(catalog.clone(), Vec::new());
            self.retire(vec![c]);
        }
        let target_offsets = self.end_offsets(&entry.plan);
        let running = self.start_fresh(name, &entry)?;
        let start_offsets = running.progress().committed_offsets;
        entry.first_offsets = Some(start_offsets.clone());
        if entry.start == StartFrom::Latest {
            entry.start = StartFrom::Offsets(start_offsets.clone());
        }
        let view = catalog.views.get_mut(name).expect("present");
        view.building = Some(BuildEntry {
            entry,
            start_offsets,
            target_offsets,
            manual: swap == Swap::Manual,
        });
        view.failure = None;
        if let Err(e) = self.save(&catalog) {
            drop(running);
            self.forget_unsaved(&scope(name, version));
            return Err(e);
        }
        self.install(catalog, vec![(scope(name, version), running)]);
        tracing::info!(view = name, version, "building a new version");
        Ok(Change::Building(version))
    }

    /// A derived stream's new version: stop the served one (final commit),
    /// start the new one where it stopped (`continue_old`: a replace over
    /// the same input) or where asked, serve it at once, drop the old state.
    fn take_over(
        &self,
        mut catalog: Catalog,
        name: &str,
        mut entry: VersionEntry,
        cancelled: Option<Scope>,
        continue_old: bool,
    ) -> Result<Change> {
        let served = catalog.views[name].served.clone();
        let old = scope(name, served.version);
        let taken = lock(&self.state).running.remove(&old);
        let committed = taken.as_ref().map(|p| p.progress().committed_offsets);
        if let Some(p) = taken {
            // A version that failed is replaced all the same: that is how
            // it gets fixed.
            if let Err(e) = p.stop() {
                tracing::warn!(view = name, error = %e, "the replaced version had failed");
            }
        }
        let continued = continue_old && served.plan.source.topic == entry.plan.source.topic;
        if continued {
            let committed = match committed {
                Some(c) => c,
                None => {
                    let partitions = self.partitions(&served.plan);
                    self.host.reader_on_disk(&old)?.as_of(partitions)?.offsets
                }
            };
            entry.start = StartFrom::Offsets(committed);
        }
        let version = entry.version;
        let running = match self.start_fresh(name, &entry) {
            Ok(r) => r,
            Err(e) => {
                // Put the old version back to work.
                if let Ok(p) = self.start(name, &served) {
                    self.install(self.catalog(), vec![(old, p)]);
                }
                return Err(e);
            }
        };
        // What the stream has seen: where the old version began when this
        // one continues it, else where this one begins.
        entry.first_offsets = if continued {
            served.first_offsets.clone()
        } else {
            Some(running.progress().committed_offsets)
        };
        let view = catalog.views.get_mut(name).expect("present");
        view.served = entry;
        view.failure = None;
        self.save(&catalog)?;
        self.install(catalog, vec![(scope(name, version), running)]);
        self.retire(cancelled.into_iter().chain([old]).collect());
        tracing::info!(view = name, version, "stream version took over");
        Ok(Change::Served(version))
    }

    /// How view `view` keeps replaced versions: its own settings
    /// (`KEEP_VERSIONS`, `VERSION_GRACE`), else the server's.
    pub(super) fn keeping(&self, view: &ViewEntry) -> Keeping {
        Keeping {
            versions: view.keep_versions.unwrap_or(self.config.keep_versions),
            grace_ms: view.version_grace_ms.unwrap_or(self.config.grace_ms),
        }
    }

    /// Start and end offsets of a plan's input topic, where it lives (the
    /// built-in log, or its cluster); empty if it is gone or the cluster
    /// does not answer.
    pub(super) fn input_offsets(&self, plan: &Plan) -> Vec<PartitionOffsets> {
        if plan.source.cluster.is_none() {
            // The built-in log, without a source in between.
            return self.log.topic(&plan.source.topic).map_or(Vec::new(), |t| {
                t.partitions()
                    .iter()
                    .map(|p| PartitionOffsets {
                        start: p.start_offset(),
                        end: p.end_offset(),
                    })
                    .collect()
            });
        }
        self.host
            .source_of(plan)
            .and_then(|source| source.topic_offsets(&plan.source.topic))
            .unwrap_or_else(|e| {
                tracing::warn!(topic = %plan.source.topic, error = %e, "cannot read the input's offsets");
                Vec::new()
            })
    }

    /// End offsets of a plan's input topic (empty if it is gone).
    fn end_offsets(&self, plan: &Plan) -> Vec<u64> {
        self.input_offsets(plan).iter().map(|p| p.end).collect()
    }

    /// Partitions of a plan's input topic (0 if it is gone).
    pub(super) fn partitions(&self, plan: &Plan) -> usize {
        match plan.source.cluster {
            None => self
                .log
                .topic(&plan.source.topic)
                .map_or(0, |t| t.partition_count() as usize),
            Some(_) => self.input_offsets(plan).len(),
        }
    }

    /// Stops and drops every version of `name`. Refused while another view
    /// reads the topic this one writes.
    pub fn drop_view(&self, name: &str) -> Result<()> {
        let _ops = lock(&self.ops);
        self.check_open()?;
        let mut catalog = self.catalog();
        let view = catalog
            .views
            .get(name)
            .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
        if let Some(topic) = view.output_topic() {
            catalog.check_unread(topic, name, name)?;
        }
        let scopes: Vec<Scope> = view.versions().map(|v| scope(name, v.version)).collect();
        catalog.views.remove(name);
        // A stream's declaration (registered with it) goes too.
        catalog.sources.remove(name);
        self.save(&catalog)?;
        self.install(catalog, Vec::new());
        self.retire(scopes);
        tracing::info!(view = name, "view dropped");
        Ok(())
    }

    /// Declares a stream or table over a topic. Returns false if the same
    /// declaration exists already.
    pub fn declare_source(&self, decl: SourceDecl, replace: bool) -> Result<bool> {
        validate_name(&decl.name)?;
        let _ops = lock(&self.ops);
        self.check_open()?;
        let mut catalog = self.catalog();
        if catalog.views.contains_key(&decl.name) {
            return Err(ViewError::Exists(decl.name.clone()));
        }
        if let Some(existing) = catalog.sources.get(&decl.name) {
            if *existing == decl {
                return Ok(false);
            }
            if !replace {
                return Err(ViewError::Exists(decl.name.clone()));
            }
        }
        catalog.sources.insert(decl.name.clone(), decl);
        self.save(&catalog)?;
        self.install(catalog, Vec::new());
        Ok(true)
    }

    /// Removes a declaration. Refused while a view reads its topic.
    pub fn drop_source(&self, name: &str) -> Result<()> {
        let _ops = lock(&self.ops);
        self.check_open()?;
        let mut catalog = self.catalog();
        let decl = catalog
            .sources
            .get(name)
            .ok_or_else(|| ViewError::UnknownSource(name.to_string()))?;
        // A declaration is not a view: every view reading its topic counts.
        catalog.check_unread(&decl.topic, name, "")?;
        catalog.sources.remove(name);
        self.save(&catalog)?;
        self.install(catalog, Vec::new());
        Ok(())
    }

    /// Stops the supervisor and every processor (each with a final
    /// commit). Later changes answer [`ViewError::Closed`].
    pub fn close(&self) {
        self.stopping.store(true, Ordering::Release);
        {
            let mut st = lock(&self.state);
            st.changes += 1;
        }
        self.wake.notify_all();
        if let Some(t) = lock(&self.supervisor).take() {
            let _ = t.join();
        }
        let _ops = lock(&self.ops);
        let running: Vec<(Scope, RunningVersion)> = lock(&self.state).running.drain().collect();
        for (s, p) in running {
            if let Err(e) = p.stop() {
                tracing::warn!(view = %s.name, version = s.version, error = %e, "stopped with an error");
            }
        }
        self.wait_retired(None);
        // A retirer still holds this manager for a moment after its
        // version is gone; once joined, dropping the manager closes every
        // store (a manager opened again on the same directory needs them).
        let retirers = std::mem::take(&mut *lock(&self.retirers));
        for t in retirers {
            let _ = t.join();
        }
        tracing::info!("views stopped");
    }
}
