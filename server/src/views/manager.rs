//! The view manager: one RocksDB [`Store`] at `<data>/state`, one
//! [`RunningProcessor`] per live version, and the operations that change
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

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use kappa_log::Log;
use kappa_processor::plan::{Plan, Sink};
use kappa_processor::runner::{RunOptions, StartFrom};
use kappa_processor::sql::SourceDecl;
use kappa_processor::state::store::{Scope, Store};
use kappa_processor::version::{drop_version, RunningProcessor};

use super::catalog::{BuildEntry, Catalog, VersionEntry, ViewEntry};
use super::retry::{Clock, Retry};
use super::{validate_name, Result, ViewError};

/// Settings of the manager (from the server config).
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Data directory: the catalog and `state/` live here.
    pub data_dir: PathBuf,
    /// A build is swapped in once its total lag is at most this many records.
    pub swap_max_lag: u64,
    /// How long a replaced version stays readable.
    pub grace_ms: u64,
    /// Commit interval of every processor.
    pub commit_interval_ms: u64,
    /// Time of retries of failed versions ([`Clock::system`] but in tests).
    pub clock: Clock,
}

/// In-memory state: the catalog as last persisted and what runs.
pub(super) struct State {
    /// The catalog, equal to the file.
    pub catalog: Catalog,
    /// Running versions.
    pub running: HashMap<Scope, RunningProcessor>,
    /// Build progress samples (time, records done) for the rate.
    pub samples: HashMap<Scope, VecDeque<(Instant, u64)>>,
    /// Bumped on every change, so the supervisor never misses a wakeup.
    pub changes: u64,
    /// Served versions that are down and retried, by view name.
    pub retries: HashMap<String, Retry>,
}

/// Hosts the views of one server.
pub struct ViewManager {
    pub(super) log: Arc<Log>,
    pub(super) store: Arc<Store>,
    pub(super) config: ManagerConfig,
    pub(super) ops: Mutex<()>,
    pub(super) state: Mutex<State>,
    pub(super) wake: Condvar,
    pub(super) stopping: AtomicBool,
    pub(super) supervisor: Mutex<Option<JoinHandle<()>>>,
}

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

/// Opens the state store. A store RocksDB cannot open at all (a damaged
/// manifest, a missing table file) would keep the whole server — the log
/// included — down: it is moved aside to `state.damaged-<ms>` (kept, never
/// deleted) and a fresh store opened, so every version rebuilds its state
/// from the log, where it started. Logged as an error naming both paths.
fn open_store(config: &ManagerConfig) -> Result<Store> {
    let path = config.data_dir.join("state");
    let error = match Store::open(&path) {
        Ok(store) => return Ok(store),
        // Only damage is moved aside: a lock held by another server, a
        // permission or a full disk must stop the start, not hide the state.
        Err(e) if !e.is_corruption() => return Err(e.into()),
        Err(e) => e,
    };
    let aside = config
        .data_dir
        .join(format!("state.damaged-{}", config.clock.now_ms()));
    std::fs::rename(&path, &aside).map_err(|e| {
        ViewError::Catalog(format!(
            "the state store {} cannot be opened ({error}) nor moved aside to {}: {e}",
            path.display(),
            aside.display()
        ))
    })?;
    tracing::error!(
        path = %path.display(),
        kept_at = %aside.display(),
        error = %error,
        "the state store cannot be opened: it is kept aside and every view rebuilds its state from the log"
    );
    Ok(Store::open(&path)?)
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
        let store = Arc::new(open_store(&config)?);
        let catalog = Catalog::open(&config.data_dir, &store.column_families())
            .map_err(ViewError::Catalog)?;
        let manager = Arc::new(ViewManager {
            log,
            store,
            config,
            ops: Mutex::new(()),
            state: Mutex::new(State {
                catalog: catalog.clone(),
                running: HashMap::new(),
                samples: HashMap::new(),
                changes: 0,
                retries: HashMap::new(),
            }),
            wake: Condvar::new(),
            stopping: AtomicBool::new(false),
            supervisor: Mutex::new(None),
        });
        manager.drop_orphans(&catalog);
        manager.resume(catalog)?;
        Ok(manager)
    }

    /// Drops column families of versions the catalog does not know (a
    /// crash between starting a version and persisting the catalog, or
    /// between persisting a drop and dropping the state).
    fn drop_orphans(&self, catalog: &Catalog) {
        for cf in self.store.column_families() {
            let Some(base) = cf
                .strip_suffix(".state")
                .or_else(|| cf.strip_suffix(".view"))
            else {
                continue;
            };
            let Some((name, version)) = base.rsplit_once('@') else {
                continue;
            };
            let Ok(version) = version.parse::<u64>() else {
                continue;
            };
            let live = catalog
                .views
                .get(name)
                .is_some_and(|v| v.version(version).is_some());
            if !live {
                tracing::info!(view = name, version, "dropping state no version owns");
                if let Err(e) = drop_version(&self.store, &scope(name, version)) {
                    tracing::warn!(view = name, version, error = %e, "cannot drop orphan state");
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
                        if during_build {
                            view.building = None;
                            let _ = drop_version(&self.store, &scope(&view.name, entry.version));
                        } else {
                            let now = self.config.clock.now_ms();
                            retries.insert(
                                view.name.clone(),
                                Retry::new(entry.version, e.to_string(), now),
                            );
                        }
                        view.failure = Some(super::catalog::Failure {
                            version: entry.version,
                            reason: e.to_string(),
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

    /// Starts (or resumes) a version on its own thread.
    pub(super) fn start(&self, name: &str, entry: &VersionEntry) -> Result<RunningProcessor> {
        let mut plan = entry.plan.clone();
        plan.name = name.to_string();
        let options = RunOptions {
            commit_interval_ms: self.config.commit_interval_ms,
            start: entry.start.clone(),
            ..RunOptions::default()
        };
        Ok(RunningProcessor::start(
            plan,
            entry.version,
            self.log.clone(),
            self.store.clone(),
            options,
        )?)
    }

    /// Starts a version that never ran: state left by an earlier use of
    /// the number (a crash before the catalog was written) is dropped first.
    fn start_fresh(&self, name: &str, entry: &VersionEntry) -> Result<RunningProcessor> {
        let s = scope(name, entry.version);
        if self.store.has(&s) {
            drop_version(&self.store, &s)?;
        }
        self.start(name, entry).inspect_err(|_| {
            let _ = drop_version(&self.store, &s);
        })
    }

    /// Writes the catalog file.
    pub(super) fn save(&self, catalog: &Catalog) -> Result<()> {
        catalog
            .save(&Catalog::path(&self.config.data_dir))
            .map_err(ViewError::Catalog)
    }

    /// Installs a persisted catalog and processors that started, and
    /// wakes the supervisor.
    pub(super) fn install(&self, catalog: Catalog, started: Vec<(Scope, RunningProcessor)>) {
        let mut st = lock(&self.state);
        st.catalog = catalog;
        st.running.extend(started);
        st.changes += 1;
        drop(st);
        self.wake.notify_all();
    }

    /// Stops versions (final commit) and, if `drop_state`, drops their
    /// state. Errors are logged: the catalog no longer names them, so a
    /// restart drops what is left.
    pub(super) fn retire(&self, scopes: Vec<Scope>, drop_state: bool) {
        let taken: Vec<(Scope, Option<RunningProcessor>)> = {
            let mut st = lock(&self.state);
            scopes
                .into_iter()
                .map(|s| {
                    st.samples.remove(&s);
                    let p = st.running.remove(&s);
                    (s, p)
                })
                .collect()
        };
        for (s, p) in taken {
            if let Some(p) = p {
                if let Err(e) = p.stop() {
                    tracing::warn!(view = %s.name, version = s.version, error = %e, "stopped with an error");
                }
            }
            if drop_state {
                if let Err(e) = drop_version(&self.store, &s) {
                    tracing::warn!(view = %s.name, version = s.version, error = %e, "cannot drop state");
                }
            }
        }
    }

    /// A copy of the catalog.
    pub fn catalog(&self) -> Catalog {
        lock(&self.state).catalog.clone()
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
    pub fn create(&self, name: &str, plan: Plan, sql: Option<String>) -> Result<u64> {
        validate_name(name)?;
        plan.validate().map_err(ViewError::InvalidPlan)?;
        let _ops = lock(&self.ops);
        self.check_open()?;
        let mut catalog = self.catalog();
        if catalog.views.contains_key(name) || catalog.sources.contains_key(name) {
            return Err(ViewError::Exists(name.to_string()));
        }
        let now = kappa_log::now_ms();
        let entry = VersionEntry {
            version: 1,
            plan,
            sql,
            start: StartFrom::Earliest,
            started_ms: now,
        };
        let running = self.start_fresh(name, &entry)?;
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
            },
        );
        if let Err(e) = self.save(&catalog) {
            drop(running);
            let _ = drop_version(&self.store, &scope(name, 1));
            return Err(e);
        }
        self.install(catalog, vec![(scope(name, 1), running)]);
        tracing::info!(view = name, "view created");
        Ok(1)
    }

    /// Replaces the definition of `name`: unchanged if `plan` is the
    /// newest definition already, else a new version (built in the
    /// background for tables, taking over at once for streams).
    pub fn replace(&self, name: &str, plan: Plan, sql: Option<String>) -> Result<Change> {
        plan.validate().map_err(ViewError::InvalidPlan)?;
        let _ops = lock(&self.ops);
        self.check_open()?;
        let catalog = self.catalog();
        let view = catalog
            .views
            .get(name)
            .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
        let mut current = view.latest().plan.clone();
        current.name = plan.name.clone();
        if current == plan {
            return Ok(Change::Unchanged);
        }
        if (plan.sink == Sink::View) != view.is_table() {
            return Err(ViewError::BadRequest(format!(
                "{name:?} cannot change between a table and a stream: drop it first"
            )));
        }
        self.new_version(catalog, name, plan, sql, None)
    }

    /// Rebuilds `name` with its newest definition from `from`, as a new
    /// version.
    pub fn replay(&self, name: &str, from: StartFrom) -> Result<Change> {
        let _ops = lock(&self.ops);
        self.check_open()?;
        let catalog = self.catalog();
        let view = catalog
            .views
            .get(name)
            .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
        let latest = view.latest().clone();
        self.new_version(catalog, name, latest.plan, latest.sql, Some(from))
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
        };
        if !is_table {
            return self.take_over(catalog, name, entry, cancelled, continue_old);
        }
        // Persist the cancellation first: if this start fails, the build
        // is gone either way.
        if let Some(c) = cancelled {
            self.save(&catalog)?;
            self.install(catalog.clone(), Vec::new());
            self.retire(vec![c], true);
        }
        let target_offsets = self.end_offsets(&entry.plan);
        let running = self.start_fresh(name, &entry)?;
        let start_offsets = running.progress().committed_offsets;
        if entry.start == StartFrom::Latest {
            entry.start = StartFrom::Offsets(start_offsets.clone());
        }
        let view = catalog.views.get_mut(name).expect("present");
        view.building = Some(BuildEntry {
            entry,
            start_offsets,
            target_offsets,
        });
        view.failure = None;
        if let Err(e) = self.save(&catalog) {
            drop(running);
            let _ = drop_version(&self.store, &scope(name, version));
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
        if continue_old && served.plan.source.topic == entry.plan.source.topic {
            let committed = match committed {
                Some(c) => c,
                None => {
                    let partitions = self.partitions(&served.plan);
                    kappa_processor::view::as_of(&self.store, &old, partitions)?.offsets
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
        let view = catalog.views.get_mut(name).expect("present");
        view.served = entry;
        view.failure = None;
        self.save(&catalog)?;
        self.install(catalog, vec![(scope(name, version), running)]);
        self.retire(cancelled.into_iter().chain([old]).collect(), true);
        tracing::info!(view = name, version, "stream version took over");
        Ok(Change::Served(version))
    }

    /// End offsets of a plan's input topic (empty if it is gone).
    fn end_offsets(&self, plan: &Plan) -> Vec<u64> {
        self.log.topic(&plan.source.topic).map_or(Vec::new(), |t| {
            t.partitions().iter().map(|p| p.end_offset()).collect()
        })
    }

    /// Partitions of a plan's input topic (0 if it is gone).
    pub(super) fn partitions(&self, plan: &Plan) -> usize {
        self.log
            .topic(&plan.source.topic)
            .map_or(0, |t| t.partition_count() as usize)
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
        self.retire(scopes, true);
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
        let running: Vec<(Scope, RunningProcessor)> = lock(&self.state).running.drain().collect();
        for (s, p) in running {
            if let Err(e) = p.stop() {
                tracing::warn!(view = %s.name, version = s.version, error = %e, "stopped with an error");
            }
        }
        tracing::info!("views stopped");
    }
}
