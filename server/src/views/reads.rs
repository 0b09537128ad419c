//! Reads: a view's description (versions, lag, build progress, state
//! size) and its rows (point, prefix, a key's windows, all; paged), each
//! answer saying as of which input offsets and watermark — optionally
//! after waiting until the served version has processed given offsets
//! (read-your-writes).
//!
//! The version to read is resolved under the manager's lock, the RocksDB
//! reads run outside it. Rows and `as_of` come from one snapshot of the
//! store, so `as_of` is exactly the input the rows reflect.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kappa_processor::host::{Scope, ViewReader};
use kappa_processor::plan::{Operation, Plan};
use kappa_processor::progress::{Progress, WorkerRole};
use kappa_processor::view::{AsOf, RowFilter, RowTest, ViewQuery, ViewRow};

use super::catalog::{VersionEntry, ViewEntry};
use super::manager::{lock, scope, ViewManager};
use super::supervisor::RATE_WINDOW;
use super::{Result, ViewError};
use crate::dto::{
    AsOfOut, BuildOut, BuildProgressOut, GraceOut, IntoWire, PartitionOffset, RowOut, RowsOut,
    VersionOut, ViewOut, ViewPartitionOut, WorkerOut,
};

/// Longest slice of a read-your-writes wait before the served version is
/// looked up again (it may have been swapped).
const WAIT_SLICE: Duration = Duration::from_millis(250);

/// Most rows in one answer (a page of `GET /v1/views/{view}/rows`, or a
/// pull query's rows).
pub const MAX_ROWS_PER_PAGE: usize = 10_000;

/// What a rows request asks.
#[derive(Debug, Clone)]
pub struct RowsRequest {
    /// Point, key windows, prefix or all.
    pub query: ViewQuery,
    /// Window bounds the rows must pass and the cap on rows examined
    /// (a pull query's; `RowFilter::default()`: every row of the range).
    pub filter: RowFilter,
    /// Continue after this key (from `next_cursor`).
    pub cursor: Option<Vec<u8>>,
    /// Most rows.
    pub limit: usize,
    /// A version other than the served one.
    pub version: Option<u64>,
    /// Wait until the served version has processed these (partition, offset) records.
    pub after: Vec<(u32, u64)>,
    /// Longest wait for `after`.
    pub max_wait: Duration,
    /// For a version spread over a Kappa cluster's nodes: rows of a
    /// standby here this far behind its input at most may answer (`None`:
    /// only the partitions' owners answer).
    pub max_staleness: Option<Duration>,
    /// A test rows must also pass, applied inside the read's snapshot (a
    /// pull query's conditions on value columns, or its aggregate folding
    /// the rows); never forwarded to another node.
    pub test: Option<RowsTest>,
}

/// A [`RowTest`] a [`RowsRequest`] carries.
#[derive(Clone)]
pub struct RowsTest(pub Arc<RowTest<'static>>);

impl std::fmt::Debug for RowsTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RowsTest")
    }
}

/// Rows and where they were read.
#[derive(Debug, Clone)]
pub struct RowsAnswer {
    /// Version read.
    pub version: u64,
    /// The view's columns in SELECT order (the keys of each row).
    pub columns: Vec<String>,
    /// Rows.
    pub rows: Vec<ViewRow>,
    /// Cursor of the next page: more rows follow, or (with a filter's
    /// `max_scanned`) the read stopped at its cap and more may follow.
    pub next_cursor: Option<Vec<u8>>,
    /// Input position.
    pub as_of: AsOf,
    /// The version read has not reached its input's end once yet.
    pub catching_up: bool,
    /// For a version spread over nodes, the input partitions whose rows
    /// this node read (its tasks at the time of the read).
    pub partitions_read: Option<Vec<u32>>,
}

/// Where a spread version's rows are ([`ViewManager::spread_of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadRows {
    /// The version.
    pub version: u64,
    /// Its input's partition count.
    pub partitions: usize,
    /// The partitions whose tasks run on this node.
    pub owned: Vec<u32>,
    /// The partitions whose standby runs on this node, and how far behind
    /// its input each is (`None`: it has not caught up yet).
    pub standbys: Vec<(u32, Option<Duration>)>,
}

impl SpreadRows {
    /// Whether this node answers `partition` for a read accepting
    /// `max_staleness`: it owns the partition, or keeps a standby of it
    /// at most that far behind.
    pub fn answers(&self, partition: u32, max_staleness: Option<Duration>) -> bool {
        self.owned.contains(&partition)
            || max_staleness.is_some_and(|max| {
                self.standbys
                    .iter()
                    .any(|(p, s)| *p == partition && s.is_some_and(|s| s <= max))
            })
    }
}

/// The work of a version spread over nodes on this node
/// ([`ViewManager::spread_stats`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SpreadStats {
    /// `view@version`.
    pub version: String,
    /// The partitions whose tasks run here.
    pub partitions: Vec<u32>,
    /// Their input not yet processed and committed.
    pub lag: u64,
    /// Records processed per second by the tasks.
    pub records_per_second: f64,
    /// The oldest of the tasks' newest checkpoints (ms since the epoch);
    /// `None` while one has none.
    pub oldest_checkpoint_ms: Option<i64>,
    /// The partitions whose standby runs here, and how far behind each is
    /// (`None`: not caught up yet).
    pub standbys: Vec<(u32, Option<Duration>)>,
}

/// A version resolved for reading.
struct Target {
    scope: Scope,
    /// Its columns in SELECT order.
    columns: Vec<String>,
    /// Whether its rows are windows.
    windowed: bool,
    partitions: usize,
}

/// A table's columns in SELECT order.
fn columns(plan: &Plan) -> Vec<String> {
    match (plan.view_aggregate(), &plan.operation) {
        (Some(a), _) => a.columns.iter().map(|(name, _)| name.clone()).collect(),
        (None, Operation::Project { columns }) => {
            columns.iter().map(|(name, _)| name.clone()).collect()
        }
        (None, Operation::Aggregate(_)) => Vec::new(),
    }
}

fn windowed(plan: &Plan) -> bool {
    plan.view_aggregate().is_some_and(|a| a.window.is_some())
}

/// The catalog entry of view `name`, which must be a table (rows are read
/// from tables; a derived stream's rows are its topic's records).
fn table<'c>(
    views: &'c std::collections::BTreeMap<String, ViewEntry>,
    name: &str,
) -> Result<&'c ViewEntry> {
    let view = views
        .get(name)
        .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
    if !view.is_table() {
        return Err(ViewError::NotATable(name.to_string()));
    }
    Ok(view)
}

/// The version of table `name` read: the served one, or `version`.
fn entry_of<'c>(
    views: &'c std::collections::BTreeMap<String, ViewEntry>,
    name: &str,
    version: Option<u64>,
) -> Result<&'c VersionEntry> {
    let view = table(views, name)?;
    match version {
        None => Ok(&view.served),
        Some(v) => view.version(v).ok_or(ViewError::UnknownVersion {
            view: name.to_string(),
            version: v,
        }),
    }
}

impl ViewManager {
    fn resolve(&self, name: &str, version: Option<u64>) -> Result<Target> {
        let st = lock(&self.state);
        let entry = entry_of(&st.catalog.views, name, version)?;
        let s = scope(name, entry.version);
        let partitions = match st.running.get(&s) {
            Some(p) => p.progress().committed_offsets.len(),
            None => match self.partitions(&entry.plan) {
                // A cluster that does not answer: as many as it committed.
                0 if entry.plan.source.cluster.is_some() => self
                    .host
                    .reader(&s)
                    .and_then(|r| r.committed_partitions().ok())
                    .unwrap_or(0),
                n => n,
            },
        };
        Ok(Target {
            scope: s,
            columns: columns(&entry.plan),
            windowed: windowed(&entry.plan),
            partitions,
        })
    }

    /// Where the rows of view `name` (its served version, or `version`)
    /// are when that version is spread over the nodes of a Kappa cluster:
    /// the version, its input's partition count and the partitions whose
    /// tasks run here. `None` for a version running whole here.
    pub fn spread_of(&self, name: &str, version: Option<u64>) -> Result<Option<SpreadRows>> {
        let st = lock(&self.state);
        let entry = entry_of(&st.catalog.views, name, version)?;
        let Some(spread) = st
            .running
            .get(&scope(name, entry.version))
            .and_then(|p| p.as_spread())
        else {
            return Ok(None);
        };
        Ok(Some(SpreadRows {
            version: entry.version,
            partitions: spread.progress().committed_offsets.len(),
            owned: spread.owned(),
            standbys: spread.standbys(),
        }))
    }

    /// The builds spread over the nodes of a Kappa cluster running here:
    /// view, version, the input's partition count, and the partitions
    /// whose tasks here have caught up (empty while they have not).
    pub fn spread_builds(&self) -> Vec<(String, u64, u32, Vec<u32>)> {
        let st = lock(&self.state);
        st.catalog
            .views
            .values()
            .filter_map(|view| {
                let build = view.building.as_ref()?;
                let s = scope(&view.name, build.entry.version);
                let spread = st.running.get(&s)?.as_spread()?;
                let of = spread.progress().committed_offsets.len() as u32;
                let ready = st.spread_ready.get(&s).cloned().unwrap_or_default();
                Some((view.name.clone(), build.entry.version, of, ready))
            })
            .collect()
    }

    /// The versions spread over a Kappa cluster's nodes running here:
    /// `view@version`, the partitions owned here, their lag, the records
    /// per second and the oldest of their newest checkpoints (ms since the
    /// epoch; `None` while one has none).
    pub fn spread_stats(&self) -> Vec<SpreadStats> {
        let st = lock(&self.state);
        st.running
            .iter()
            .filter_map(|(s, p)| {
                let spread = p.as_spread()?;
                let owned = spread.owned();
                let lag = spread.lag().map_or(0, |l| l.iter().map(|l| l.lag).sum());
                let checkpoints = spread.checkpoints();
                let oldest = owned
                    .iter()
                    .map(|p| checkpoints.get(p).map(|c| c.1))
                    .collect::<Option<Vec<i64>>>()
                    .and_then(|at| at.into_iter().min());
                Some(SpreadStats {
                    version: format!("{}@{}", s.name, s.version),
                    partitions: owned,
                    lag,
                    records_per_second: spread.progress().rate_per_second,
                    oldest_checkpoint_ms: oldest,
                    standbys: spread.standbys(),
                })
            })
            .collect()
    }

    /// Reads rows of view `name`.
    pub fn rows(&self, name: &str, request: &RowsRequest) -> Result<RowsAnswer> {
        let waited = if request.after.is_empty() {
            None
        } else {
            Some(self.wait_for(name, &request.after, request.max_wait)?)
        };
        let target = self.resolve(name, request.version.or(waited))?;
        if matches!(request.query, ViewQuery::KeyWindows { .. }) && !target.windowed {
            return Err(ViewError::BadRequest(format!(
                "view {name:?} is not windowed: from and to do not apply"
            )));
        }
        let gone = |e| match e {
            kappa_processor::error::ProcessorError::NotFound(_) => ViewError::UnknownVersion {
                view: name.to_string(),
                version: target.scope.version,
            },
            e => e.into(),
        };
        let reader = match request.max_staleness {
            Some(max) => self.host.reader_within(&target.scope, max).ok_or_else(|| {
                ViewError::Unavailable {
                    view: name.to_string(),
                    version: target.scope.version,
                }
            })?,
            None => self.reader(&target.scope)?,
        };
        // Rows and position from one snapshot: `as_of` is exact.
        let (page, as_of) = reader
            .page(
                &request.query,
                &request.filter,
                request.test.as_ref().map(|t| t.0.as_ref()),
                request.cursor.as_deref(),
                request.limit,
                target.partitions,
            )
            .map_err(gone)?;
        let catching_up = !self.caught_up(&lock(&self.state), &target.scope);
        Ok(RowsAnswer {
            partitions_read: reader.partitions_held(),
            version: target.scope.version,
            columns: target.columns,
            rows: page.rows,
            next_cursor: page.next_cursor,
            as_of,
            catching_up,
        })
    }

    /// Waits (bounded by `max_wait`) until the served version of `name`
    /// has committed past every (partition, offset); returns that version.
    fn wait_for(&self, name: &str, after: &[(u32, u64)], max_wait: Duration) -> Result<u64> {
        let deadline = Instant::now() + max_wait;
        loop {
            let (version, progress, targets) = self.wait_target(name, after)?;
            let left = deadline.saturating_duration_since(Instant::now());
            let reached = |c: &[u64]| c.iter().zip(&targets).all(|(c, t)| c >= t);
            let done = match &progress {
                Some(p) => p.wait_committed(left.min(WAIT_SLICE), reached),
                None => false,
            };
            if done {
                return Ok(version);
            }
            if Instant::now() >= deadline || progress.is_none() {
                let committed = progress
                    .map(|p| p.snapshot().committed_offsets)
                    .unwrap_or_default();
                return Err(ViewError::Behind {
                    view: name.to_string(),
                    wanted: format_offsets(&targets),
                    committed: format_offsets(&committed),
                });
            }
        }
    }

    /// The served version, its progress (None if not running) and the
    /// committed offsets `after` asks for, per partition.
    fn wait_target(
        &self,
        name: &str,
        after: &[(u32, u64)],
    ) -> Result<(u64, Option<Arc<Progress>>, Vec<u64>)> {
        let st = lock(&self.state);
        let view = table(&st.catalog.views, name)?;
        let topic_name = &view.served.plan.source.topic;
        let version = view.served.version;
        let running = st.running.get(&scope(name, version));
        if view.served.plan.source.cluster.is_some() {
            return Self::cluster_wait_target(name, topic_name, version, running, after);
        }
        let topic = self
            .log
            .topic(topic_name)
            .map_err(|e| ViewError::Processor(e.into()))?;
        let mut targets = vec![0u64; topic.partition_count() as usize];
        for &(p, offset) in after {
            let partition = topic.partition(p).map_err(|_| {
                ViewError::BadRequest(format!("after: topic {topic_name:?} has no partition {p}"))
            })?;
            if offset >= partition.end_offset() {
                return Err(ViewError::BadRequest(format!(
                    "after: topic {topic_name:?} partition {p}: offset {offset} is beyond the end ({})",
                    partition.end_offset()
                )));
            }
            targets[p as usize] = targets[p as usize].max(offset + 1);
        }
        let progress = running.map(|p| p.shared_progress());
        Ok((version, progress, targets))
    }

    /// [`Self::wait_target`] of a view over a cluster topic. Offsets past
    /// the partition's end are not refused (the cluster's end is not asked
    /// on every read: a wait for them ends at `max_wait`). A version spread
    /// over a Kappa cluster's nodes waits for the partitions it owns here:
    /// each node asked waits for its own.
    fn cluster_wait_target(
        name: &str,
        topic_name: &str,
        version: u64,
        running: Option<&kappa_processor::host::RunningVersion>,
        after: &[(u32, u64)],
    ) -> Result<(u64, Option<Arc<Progress>>, Vec<u64>)> {
        let Some(running) = running else {
            return Err(ViewError::Behind {
                view: name.to_string(),
                wanted: format_offsets(&after.iter().map(|(_, o)| o + 1).collect::<Vec<_>>()),
                committed: String::new(),
            });
        };
        let partitions = running.progress().committed_offsets.len();
        let owned = running.as_spread().map(|s| s.owned());
        let mut targets = vec![0u64; partitions];
        for &(p, offset) in after {
            let slot = targets.get_mut(p as usize).ok_or_else(|| {
                ViewError::BadRequest(format!("after: topic {topic_name:?} has no partition {p}"))
            })?;
            if owned.as_ref().is_none_or(|o| o.contains(&p)) {
                *slot = (*slot).max(offset + 1);
            }
        }
        Ok((version, Some(running.shared_progress()), targets))
    }

    /// The served version of view `name` and its shared progress (which
    /// carries its change feed); `None` when that version is not running.
    pub fn served_progress(&self, name: &str) -> Result<(u64, Option<Arc<Progress>>)> {
        let st = lock(&self.state);
        let view = table(&st.catalog.views, name)?;
        let version = view.served.version;
        let progress = st
            .running
            .get(&scope(name, version))
            .map(|p| p.shared_progress());
        Ok((version, progress))
    }

    /// Views whose served version is not running (its processor stopped
    /// with an error), with the recorded reason: what `/ready` reports.
    pub fn failed_views(&self) -> Vec<(String, Option<String>)> {
        let st = lock(&self.state);
        st.catalog
            .views
            .values()
            .filter(|v| {
                st.running
                    .get(&scope(&v.name, v.served.version))
                    .is_none_or(|p| p.is_finished())
            })
            .map(|v| {
                let reason = st
                    .retries
                    .get(&v.name)
                    .filter(|r| r.version == v.served.version)
                    .map(|r| r.reason.clone())
                    .or_else(|| {
                        v.failure
                            .as_ref()
                            .filter(|f| f.version == v.served.version)
                            .map(|f| f.reason.clone())
                    });
                (v.name.clone(), reason)
            })
            .collect()
    }

    /// Input records each running version has yet to process (the sum over
    /// its input partitions of end offset minus committed offset), with
    /// the view's name and the version's number and role (`served` or
    /// `building`).
    pub fn lags(&self) -> Vec<(String, u64, &'static str, Vec<u64>)> {
        let st = lock(&self.state);
        let mut out = Vec::new();
        for view in st.catalog.views.values() {
            let building = view
                .building
                .as_ref()
                .map(|b| (b.entry.version, "building"));
            for (version, role) in [(view.served.version, "served")]
                .into_iter()
                .chain(building)
            {
                let Some(p) = st.running.get(&scope(&view.name, version)) else {
                    continue;
                };
                if p.is_finished() {
                    continue;
                }
                let lag = p.lag().map(|l| l.iter().map(|l| l.lag).collect());
                if let Ok(lag) = lag {
                    out.push((view.name.clone(), version, role, lag));
                }
            }
        }
        out
    }

    /// Describes every view, by name.
    pub fn list(&self) -> Vec<ViewOut> {
        let names: Vec<String> = lock(&self.state).catalog.views.keys().cloned().collect();
        names.iter().filter_map(|n| self.describe(n).ok()).collect()
    }

    /// Entries each stateful operator of version `version` of view `name`
    /// keeps in memory, by gauge name (empty when it does not run here).
    pub fn operator_state(
        &self,
        name: &str,
        version: u64,
    ) -> std::collections::BTreeMap<String, u64> {
        let st = lock(&self.state);
        st.running
            .get(&scope(name, version))
            .map(|p| p.progress().operator_state)
            .unwrap_or_default()
    }

    /// Describes view `name`: versions, lag, progress, state size.
    pub fn describe(&self, name: &str) -> Result<ViewOut> {
        let (view, mut served, building, retry) = {
            let st = lock(&self.state);
            let view = st
                .catalog
                .views
                .get(name)
                .ok_or_else(|| ViewError::UnknownView(name.to_string()))?
                .clone();
            let mut served = self.version_out(&st, name, &view.served);
            if served.catching_up {
                let rate = rate_of(&st, &scope(name, view.served.version));
                served.catch_up = Some(self.first_build(&view, &served, rate));
            }
            let building = view.building.as_ref().map(|b| {
                let s = scope(name, b.entry.version);
                (self.version_out(&st, name, &b.entry), rate_of(&st, &s))
            });
            let retry = st.retries.get(name).cloned();
            (view, served, building, retry)
        };
        served.state_bytes = self.state_bytes(&scope(name, served.version));
        let building_version = match (view.building.as_ref(), building) {
            (Some(b), Some((mut out, rate))) => {
                out.state_bytes = self.state_bytes(&scope(name, out.version));
                Some(build_out(
                    b,
                    out,
                    rate.unwrap_or(0.0),
                    self.config.swap_max_lag,
                ))
            }
            _ => None,
        };
        let mut out = view_out(&view, served, building_version);
        out.replay_horizon = match view.served.plan.source.cluster {
            None => super::horizon::horizon(&self.log, &view.served),
            Some(_) => {
                super::horizon::from_offsets(&view.served, &self.input_offsets(&view.served.plan))
            }
        }
        .into();
        let keeping = self.keeping(&view);
        (out.keep_versions, out.version_grace_ms) = (keeping.versions, keeping.grace_ms);
        if let Some(r) = &retry {
            // Known in memory even when the catalog could not be written.
            if out.failure.as_ref().is_none_or(|f| f.version != r.version) {
                out.failure = Some(crate::dto::Failure {
                    version: r.version,
                    reason: r.reason.clone(),
                    at_ms: r.failed_at_ms,
                    during_build: false,
                });
            }
        }
        out.retry = retry.map(Into::into);
        Ok(out)
    }

    /// How far a served version still catching up is: records done since
    /// the start of its input, out of those the input holds.
    fn first_build(
        &self,
        view: &ViewEntry,
        served: &VersionOut,
        rate: Option<f64>,
    ) -> BuildProgressOut {
        let starts: Vec<u64> = self
            .log
            .topic(&view.served.plan.source.topic)
            .map(|t| {
                t.describe()
                    .partitions
                    .iter()
                    .map(|p| p.start_offset)
                    .collect()
            })
            .unwrap_or_default();
        let done: u64 = served
            .partitions
            .iter()
            .map(|p| {
                let start = starts.get(p.partition as usize).copied().unwrap_or(0);
                p.committed.saturating_sub(start)
            })
            .sum();
        let rate = rate.unwrap_or(0.0);
        BuildProgressOut {
            done,
            total: done + served.lag,
            rate_records_per_second: rate,
            eta_ms: (rate > 0.0).then(|| ((served.lag as f64 / rate) * 1000.0) as u64),
        }
    }

    /// Whether version `s` has reached its input's end once: as the
    /// supervisor recorded it, or (before its first look, e.g. just after a
    /// restart) because it is there now.
    fn caught_up(&self, st: &super::manager::State, s: &Scope) -> bool {
        let lags = || st.running.get(s).and_then(|p| p.lag().ok());
        self.caught_up_with(st, s, lags)
    }

    /// [`Self::caught_up`] with the version's lags read by `lags` (once, if
    /// at all), so that an answer showing lags agrees with them.
    fn caught_up_with(
        &self,
        st: &super::manager::State,
        s: &Scope,
        lags: impl FnOnce() -> Option<Vec<kappa_processor::host::PartitionLag>>,
    ) -> bool {
        match st.catch_up.get(s) {
            Some(c) => c.caught_up(),
            None => lags().is_some_and(|lags| {
                lags.iter().map(|l| l.lag).sum::<u64>() <= self.config.swap_max_lag
            }),
        }
    }

    fn version_out(
        &self,
        st: &super::manager::State,
        name: &str,
        entry: &VersionEntry,
    ) -> VersionOut {
        let running = &st.running;
        let s = scope(name, entry.version);
        let catch_up = st.catch_up.get(&s);
        let p = running.get(&s);
        let lags = p.and_then(|p| p.lag().ok());
        let caught_up = self.caught_up_with(st, &s, || lags.clone());
        let lags = lags.unwrap_or_default();
        let snapshot = p.map(|p| p.progress());
        let watermark = match &snapshot {
            Some(snap) => snap.watermark,
            None => self
                .host
                .reader(&s)
                .and_then(|reader| reader.as_of(0).ok())
                .and_then(|a| a.watermark),
        };
        let workers: Vec<WorkerOut> = snapshot
            .as_ref()
            .map(|s| s.workers.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|w| {
                let lag = match &w.role {
                    WorkerRole::Source { partitions } => Some(
                        lags.iter()
                            .filter(|l| partitions.contains(&l.partition))
                            .map(|l| l.lag)
                            .sum(),
                    ),
                    WorkerRole::Shard { .. } => None,
                };
                WorkerOut {
                    worker: w.worker,
                    role: w.role.into_wire(),
                    events: w.events,
                    rate_per_second: w.rate_per_second,
                    lag,
                }
            })
            .collect();
        VersionOut {
            version: entry.version,
            sql: entry.sql.clone(),
            started_ms: entry.started_ms,
            running: p.is_some_and(|p| !p.is_finished()),
            lag: lags.iter().map(|l| l.lag).sum(),
            partitions: lags
                .into_iter()
                .map(|l| ViewPartitionOut {
                    partition: l.partition,
                    committed: l.committed,
                    end: l.end,
                    lag: l.lag,
                })
                .collect(),
            watermark,
            state_bytes: 0,
            processed: snapshot.as_ref().map_or(0, |s| s.processed),
            late: snapshot
                .as_ref()
                .map_or(0, |s| s.late_dropped + s.late_side_output),
            invalid: snapshot.as_ref().map_or(0, |s| s.invalid),
            parallelism: entry.workers.unwrap_or(self.config.processor_threads),
            workers,
            catching_up: !caught_up,
            not_keeping_up: catch_up.is_some_and(|c| c.not_keeping_up(self.config.clock.now_ms())),
            catch_up: None,
        }
    }

    fn state_bytes(&self, s: &Scope) -> u64 {
        self.host.reader(s).map_or(0, |reader| reader.size_bytes())
    }

    /// A reader of a readable version. A version whose store is not open
    /// failed to start (its state damaged or missing): reads say so.
    fn reader(&self, s: &Scope) -> Result<ViewReader> {
        self.host.reader(s).ok_or_else(|| ViewError::Unavailable {
            view: s.name.clone(),
            version: s.version,
        })
    }
}

fn build_out(
    b: &super::catalog::BuildEntry,
    version: VersionOut,
    rate: f64,
    swap_max_lag: u64,
) -> BuildOut {
    let reached = version.running
        && b.target_offsets
            .iter()
            .enumerate()
            .all(|(i, t)| version.partitions.get(i).is_some_and(|p| p.committed >= *t));
    let done: u64 = version
        .partitions
        .iter()
        .enumerate()
        .map(|(i, p)| {
            p.committed
                .saturating_sub(b.start_offsets.get(i).copied().unwrap_or(0))
        })
        .sum();
    let total = done + version.lag;
    let eta_ms = (rate > 0.0).then(|| ((version.lag as f64 / rate) * 1000.0) as u64);
    BuildOut {
        ready: reached && version.lag <= swap_max_lag,
        swap: if b.manual {
            crate::dto::SwapMode::Manual
        } else {
            crate::dto::SwapMode::Auto
        },
        start: b.entry.start.clone().into_wire(),
        start_offsets: b.start_offsets.clone(),
        target_offsets: b.target_offsets.clone(),
        progress: BuildProgressOut {
            done,
            total,
            rate_records_per_second: rate,
            eta_ms,
        },
        version,
    }
}

/// The rate of a version's progress over the last samples (records/s),
/// else its processor's own average.
fn rate_of(st: &super::manager::State, s: &Scope) -> Option<f64> {
    let sampled = st.samples.get(s).and_then(|samples| {
        let (first, last) = (samples.front()?, samples.back()?);
        let secs = last.0.duration_since(first.0).as_secs_f64();
        (secs >= 0.5 && first.0.elapsed() <= RATE_WINDOW * 2)
            .then(|| last.1.saturating_sub(first.1) as f64 / secs)
    });
    sampled.or_else(|| st.running.get(s).map(|p| p.progress().rate_per_second))
}

/// The view's status: `failed`, `waiting_for_source` (down because its
/// cluster cannot be reached or lacks the topic; retried), `ready` (a manual build waits for
/// promote), `not_keeping_up` (the served version or the build falls
/// behind its input), `building`, `catching_up` (the served version has not
/// reached its input's end once: rows are partial) or `running`.
fn view_out(view: &ViewEntry, served: VersionOut, building: Option<BuildOut>) -> ViewOut {
    let waiting = view.failure.as_ref().is_some_and(|f| {
        f.reason
            .contains(kappa_processor::error::WAITING_FOR_SOURCE)
    });
    let status = if !served.running && waiting {
        "waiting_for_source"
    } else if !served.running {
        "failed"
    } else if building
        .as_ref()
        .is_some_and(|b| b.ready && b.swap == crate::dto::SwapMode::Manual)
    {
        "ready"
    } else if served.not_keeping_up || building.as_ref().is_some_and(|b| b.version.not_keeping_up) {
        "not_keeping_up"
    } else if building.is_some() {
        "building"
    } else if served.catching_up {
        "catching_up"
    } else {
        "running"
    };
    ViewOut {
        name: view.name.clone(),
        kind: if view.is_table() { "table" } else { "stream" }.to_string(),
        sql: view.served.sql.clone(),
        source_topic: view.served.plan.source.topic.clone(),
        source_cluster: view.served.plan.source.cluster.clone(),
        output_cluster: view.served.plan.sink_cluster.clone(),
        output_topic: view.output_topic().map(str::to_string),
        status: status.to_string(),
        served_version: served,
        building_version: building,
        grace_versions: view
            .grace
            .iter()
            .map(|g| GraceOut {
                version: g.entry.version,
                sql: g.entry.sql.clone(),
                readable_until_ms: g.readable_until_ms,
            })
            .collect(),
        keep_versions: 0,
        version_grace_ms: 0,
        failure: view.failure.clone().map(Into::into),
        retry: None,
        replay_horizon: crate::dto::ReplayHorizon {
            complete: true,
            topics: Vec::new(),
        },
    }
}

fn format_offsets(offsets: &[u64]) -> String {
    let parts: Vec<String> = offsets
        .iter()
        .enumerate()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect();
    format!("[{}]", parts.join(","))
}

// The view catalog's types in their wire form (this module builds the
// views' answers; `crate::dto` knows nothing of the views).

impl From<super::catalog::Failure> for crate::dto::Failure {
    fn from(f: super::catalog::Failure) -> Self {
        crate::dto::Failure {
            version: f.version,
            reason: f.reason,
            at_ms: f.at_ms,
            during_build: f.during_build,
        }
    }
}

impl From<super::retry::Retry> for crate::dto::Retry {
    fn from(r: super::retry::Retry) -> Self {
        crate::dto::Retry {
            version: r.version,
            reason: r.reason,
            failed_at_ms: r.failed_at_ms,
            attempts: r.attempts,
            next_attempt_ms: r.next_attempt_ms,
        }
    }
}

impl From<super::horizon::ReplayHorizon> for crate::dto::ReplayHorizon {
    fn from(h: super::horizon::ReplayHorizon) -> Self {
        crate::dto::ReplayHorizon {
            complete: h.complete,
            topics: h
                .topics
                .into_iter()
                .map(|t| crate::dto::TopicHorizon {
                    topic: t.topic,
                    role: t.role.to_string(),
                    partitions: t
                        .partitions
                        .into_iter()
                        .map(|p| crate::dto::PartitionHorizon {
                            partition: p.partition,
                            earliest_offset: p.earliest_offset,
                            earliest_append_ms: p.earliest_append_ms,
                            first_seen: p.first_seen,
                            missing: p.missing,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// The wire form of a rows answer.
pub trait RowsOutExt {
    /// The rows answer of `view`.
    fn from_answer(view: String, answer: RowsAnswer) -> RowsOut;
}

impl RowsOutExt for RowsOut {
    fn from_answer(view: String, answer: RowsAnswer) -> RowsOut {
        RowsOut {
            view,
            version: answer.version,
            columns: answer.columns,
            rows: answer
                .rows
                .into_iter()
                .map(|r| RowOut {
                    key: r.key,
                    window_start: r.window_start,
                    window_end: r.window_end,
                    row: r.row,
                })
                .collect(),
            next_cursor: answer.next_cursor.as_deref().map(crate::dto::cursor_text),
            as_of: AsOfOut {
                offsets: answer
                    .as_of
                    .offsets
                    .iter()
                    .enumerate()
                    .map(|(p, &offset)| PartitionOffset {
                        partition: p as u32,
                        offset,
                    })
                    .collect(),
                watermark: answer.as_of.watermark,
            },
            catching_up: answer.catching_up,
        }
    }
}
