//! A version spread over several nodes: each node runs one *task* per
//! input partition it owns, as Kafka Streams runs one task per partition.
//!
//! Which partitions a node owns comes from outside ([`Assignment`]: the
//! server's cluster membership, through Kafka's group protocol). A task
//! is a whole version of its own — the same plan over one partition of the
//! stream topic ([`partition::OnePartition`]), with its own store named
//! [`task_scope`] (`<name>#<partition>@<version>`), its own committed
//! offset, watermark and state — so a partition's state can move to
//! another node without the others', and a node that gains a partition
//! resumes the task from whatever its store (or a checkpoint) holds and
//! replays only the rest.
//!
//! [`SpreadVersion`] keeps the tasks in line with the assignment on a
//! thread of its own: a task whose partition went elsewhere stops at once
//! (after a final commit, on a thread of its own: a stop that hangs holds
//! up no partition gained) and is no longer read; a partition gained
//! starts its task. A task that fails is started again after
//! [`TASK_RETRY`]. Its progress is the union of its tasks' (the committed
//! offsets of partitions it does not own stay as last seen).
//!
//! A node may also keep *standbys* ([`Assignment::standbys`]): tasks of
//! partitions another node owns, run over the same input without any
//! output (only views have them: a derived stream's records are written by
//! the owner alone). A standby keeps a warm copy of the partition's state
//! in the very store its active task would use, so a node that takes the
//! partition over stops the standby and resumes the active task from
//! there, replaying only the few records the standby had not reached. A
//! standby's rows may be read where a reader accepts some staleness
//! ([`SpreadHandle::stores_within`]).
//!
//! Semantics differ from a whole version in one way, as in Kafka Streams:
//! each task's watermark is its partition's own (event time per task), so
//! a window closes when its partition's events pass it, not when every
//! partition's do.

pub mod checkpoint;
pub mod partition;
pub mod repartition;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{ProcessorError, Result};
use crate::plan::Plan;
use crate::progress::{Progress, ProgressSnapshot};
use crate::state::store::{Scope, Store};
use crate::version::{PartitionLag, RunningProcessor};

pub use checkpoint::{CheckpointPlan, Checkpoints};
pub use partition::{OnePartition, PartitionTopic};

/// Seconds a task's checkpoint took (made and saved), by view and version.
pub const CHECKPOINT_SECONDS: &str = "kappa_view_checkpoint_seconds";

/// Partitions a node took over whose standby ran there (resumed from it,
/// not rebuilt or restored), by view.
pub const STANDBY_TAKEOVERS: &str = "kappa_view_standby_takeovers_total";

/// Task checkpoints that failed, by view.
pub const CHECKPOINT_FAILURES: &str = "kappa_view_checkpoint_failures_total";

/// How long a task that failed waits before it is started again.
pub const TASK_RETRY: Duration = Duration::from_secs(1);

/// How often the tasks are put in line with the assignment and their
/// progress gathered.
const RECONCILE_EVERY: Duration = Duration::from_millis(20);

/// Which partitions of a version's stream topic this node owns.
pub trait Assignment: Send + Sync + fmt::Debug {
    /// The partitions owned now (`None` while not known yet: joining),
    /// with a number that changes whenever they do.
    fn owned(&self) -> (u64, Option<Vec<u32>>);

    /// Hands the partitions over to the other nodes (the version stops
    /// here).
    fn leave(&self);

    /// The partitions (of `partitions`) of other nodes this node keeps a
    /// standby of (none unless standbys are asked for); `None` while that
    /// is not known (partitions on the move): the standbys running stay.
    fn standbys(&self, partitions: u32) -> Option<Vec<u32>> {
        let _ = partitions;
        Some(Vec::new())
    }
}

/// What a task started by [`StartTask`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The partition's owner: the task whose rows are served and whose
    /// output is written.
    Active,
    /// A warm copy of another node's task: the same plan over the same
    /// input, without output (and without a first stage: a re-keyed view's
    /// standby reads the repartition topic the owner writes).
    Standby,
}

/// Where a version's [`Assignment`] comes from.
pub trait Assignments: Send + Sync + fmt::Debug {
    /// The assignment of version `scope` running `plan` on this node, or
    /// `None` when it runs whole here (its input is not shared by nodes).
    fn assignment(&self, plan: &Plan, scope: &Scope) -> Result<Option<Arc<dyn Assignment>>>;

    /// The name of version `scope`'s internal topic `what` (its
    /// repartition topic), unique to the Kappa cluster.
    fn internal_topic(&self, scope: &Scope, what: &str) -> String;

    /// Creates `topic` with `partitions` partitions on the cluster
    /// `cluster` unless it exists.
    fn create_topic(&self, cluster: &str, topic: &str, partitions: u32) -> Result<()>;
}

/// Refuses a plan whose state cannot be split by partition: an aggregate
/// grouping by another column than the record key is re-keyed through a
/// repartition topic ([`repartition`]), which is not built for one that
/// joins a table first. A join of two streams runs on one node: its
/// buffers are not split by partition yet; nor are the groups of an
/// aggregate over another aggregate's rows, nor several joins.
pub fn check_spreadable(plan: &Plan) -> Result<()> {
    if plan.then.is_some() {
        return Err(ProcessorError::InvalidPlan(
            "an aggregate over a subquery's rows runs on a single node: it cannot be spread over a Kappa cluster's nodes yet".into(),
        ));
    }
    if plan.join.as_ref().is_some_and(|j| j.joins_stream()) {
        return Err(ProcessorError::InvalidPlan(
            "a join of two streams (JOIN .. WITHIN) runs on a single node: it cannot be spread over a Kappa cluster's nodes yet".into(),
        ));
    }
    if !plan.more_joins.is_empty() {
        return Err(ProcessorError::InvalidPlan(
            "a query with several joins runs on a single node: it cannot be spread over a Kappa cluster's nodes yet".into(),
        ));
    }
    if repartition::needs_repartition(plan) {
        // Refuses what cannot be re-keyed (a join first).
        repartition::stages(plan, "", 0)?;
    }
    Ok(())
}

/// The scope of `scope`'s task for `partition`: `<name>#<partition>`,
/// same version (`#` is in no view name).
pub fn task_scope(scope: &Scope, partition: u32) -> Scope {
    Scope {
        name: format!("{}#{partition}", scope.name),
        version: scope.version,
    }
}

/// The scope of `scope`'s first-stage task for input `partition` of a
/// repartitioned view ([`repartition`]): `<name>#<partition>.in`.
pub fn first_stage_scope(scope: &Scope, partition: u32) -> Scope {
    Scope {
        name: format!("{}#{partition}.in", scope.name),
        version: scope.version,
    }
}

/// The version and partition of a task's scope ([`task_scope`],
/// [`first_stage_scope`]); `None` for a version's own scope.
pub fn parse_task_scope(scope: &Scope) -> Option<(Scope, u32)> {
    let (name, partition) = scope.name.rsplit_once('#')?;
    let partition = partition.strip_suffix(".in").unwrap_or(partition);
    Some((
        Scope {
            name: name.to_string(),
            version: scope.version,
        },
        partition.parse().ok()?,
    ))
}

/// A running task and the store it writes.
pub struct Task {
    /// The task's version.
    pub running: RunningProcessor,
    /// Its store (read for the partition's rows).
    pub store: Arc<Store>,
    /// The first stage feeding it through a repartition topic, if the
    /// view is re-keyed ([`repartition`]), and its store.
    pub upstream: Option<(RunningProcessor, Arc<Store>)>,
}

impl Task {
    /// The offset of the input partition processed and committed: the
    /// first stage's when there is one.
    fn input_committed(&self) -> Option<u64> {
        let running = self.head();
        running.progress().committed_offsets.first().copied()
    }

    /// The stage reading the input partition.
    fn head(&self) -> &RunningProcessor {
        self.upstream.as_ref().map_or(&self.running, |(u, _)| u)
    }

    /// True once either stage ended.
    fn is_finished(&self) -> bool {
        self.running.is_finished() || self.upstream.as_ref().is_some_and(|(u, _)| u.is_finished())
    }

    /// Stops the first stage, then the aggregate, each after a final
    /// commit; answers the stores (scope, store) to checkpoint.
    fn stop(self, scope: &Scope, partition: u32) -> (Result<()>, Vec<(Scope, Arc<Store>)>) {
        let mut stores = vec![(task_scope(scope, partition), self.store)];
        let first = match self.upstream {
            Some((u, store)) => {
                stores.push((first_stage_scope(scope, partition), store));
                u.stop()
            }
            None => Ok(()),
        };
        let second = self.running.stop();
        (first.and(second), stores)
    }

    /// Asks both stages to end without a final commit.
    fn abandon(&self) {
        if let Some((u, _)) = &self.upstream {
            u.abandon();
        }
        self.running.abandon();
    }
}

/// Starts the task of a partition (its store opened, or made), as its
/// owner or as a standby.
pub type StartTask = Box<dyn Fn(u32, Role) -> Result<Task> + Send + Sync>;

/// A standby task and when it last had nothing left to read.
struct Standby {
    task: Task,
    /// The last time its lag was 0 (`None`: not yet).
    caught_up: Option<Instant>,
}

impl Standby {
    /// How far behind its input the standby's rows may be: nothing while
    /// it has read everything, else the time since it last had.
    fn staleness(&self) -> Option<Duration> {
        self.caught_up.map(|at| at.elapsed())
    }
}

/// A task's partition and store, for reads.
#[derive(Clone)]
pub struct TaskStore {
    /// The input partition.
    pub partition: u32,
    /// The task's scope ([`task_scope`]).
    pub scope: Scope,
    /// Its store.
    pub store: Arc<Store>,
}

/// What the reconciling thread and the handle share.
struct Shared {
    scope: Scope,
    assignment: Arc<dyn Assignment>,
    start: StartTask,
    tasks: Mutex<BTreeMap<u32, Task>>,
    /// Standby tasks, by partition ([`Role::Standby`]); none unless the
    /// version keeps standbys.
    standbys: Mutex<BTreeMap<u32, Standby>>,
    /// Whether this version keeps standbys (a view does; a derived stream
    /// does not).
    keeps_standbys: bool,
    /// Partitions whose task failed to start or stopped with an error,
    /// with why and when.
    failed: Mutex<BTreeMap<u32, (String, Instant)>>,
    /// Partitions whose standby failed, and when (tried again after
    /// [`TASK_RETRY`]).
    failed_standbys: Mutex<BTreeMap<u32, Instant>>,
    /// Committed offsets of every partition (as last seen for the ones
    /// not owned) and the lowest watermark of the tasks.
    progress: Arc<Progress>,
    stopping: AtomicBool,
    /// How the tasks are checkpointed (none: they are not).
    checkpoint: Option<CheckpointPlan>,
    /// Per task (scope name), the offset and time (ms) of its last
    /// checkpoint saved from here.
    checkpointed: Mutex<BTreeMap<String, (u64, i64)>>,
    /// Told to end without a final commit (its state is being dropped):
    /// no final checkpoint either.
    abandoned: AtomicBool,
    /// Tasks of partitions handed over, being stopped (a final commit,
    /// then a checkpoint) on threads of their own, by partition. A stop
    /// can hang — a final transaction on a cluster that fenced it waits
    /// out its timeout — and must not hold up the partitions gained; a
    /// partition is not started here again, as task or standby, before
    /// its stop ended.
    handing_over: Mutex<BTreeMap<u32, JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A version whose partitions are spread over nodes: the tasks of the
/// partitions this node owns.
pub struct SpreadVersion {
    shared: Arc<Shared>,
    /// The reconciling thread, and the checkpointing one if any.
    threads: Vec<JoinHandle<()>>,
}

impl SpreadVersion {
    /// Starts following `assignment` for version `scope` (of an input of
    /// `partitions` partitions), starting each owned partition's task
    /// with `start` (and each standby the assignment asks for, when
    /// `keeps_standbys`).
    pub fn start(
        scope: Scope,
        partitions: usize,
        assignment: Arc<dyn Assignment>,
        start: StartTask,
        checkpoint: Option<CheckpointPlan>,
        keeps_standbys: bool,
    ) -> Result<SpreadVersion> {
        let shared = Arc::new(Shared {
            standbys: Mutex::new(BTreeMap::new()),
            keeps_standbys,
            checkpoint,
            checkpointed: Mutex::new(BTreeMap::new()),
            abandoned: AtomicBool::new(false),
            progress: Arc::new(Progress::new(partitions, &scope.name, scope.version)),
            scope,
            assignment,
            start,
            tasks: Mutex::new(BTreeMap::new()),
            failed: Mutex::new(BTreeMap::new()),
            failed_standbys: Mutex::new(BTreeMap::new()),
            stopping: AtomicBool::new(false),
            handing_over: Mutex::new(BTreeMap::new()),
        });
        let thread = std::thread::Builder::new()
            .name(format!(
                "kappa-spread-{}@{}",
                shared.scope.name, shared.scope.version
            ))
            .spawn({
                let shared = shared.clone();
                move || shared.follow()
            })
            .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?;
        let mut threads = vec![thread];
        if shared.checkpoint.is_some() {
            threads.push(
                std::thread::Builder::new()
                    .name(format!(
                        "kappa-ckpt-{}@{}",
                        shared.scope.name, shared.scope.version
                    ))
                    .spawn({
                        let shared = shared.clone();
                        move || shared.checkpoint_until_stopped()
                    })
                    .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?,
            );
        }
        Ok(SpreadVersion { shared, threads })
    }

    /// Per partition owned here, the offset and time (ms since the epoch)
    /// of its newest checkpoint saved from this node.
    pub fn checkpoints(&self) -> BTreeMap<u32, (u64, i64)> {
        let checkpointed = lock(&self.shared.checkpointed);
        (0..self.shared.progress.snapshot().committed_offsets.len() as u32)
            .filter_map(|p| {
                let name = task_scope(&self.shared.scope, p).name;
                checkpointed.get(&name).map(|c| (p, *c))
            })
            .collect()
    }

    /// The partitions whose tasks run here now.
    pub fn owned(&self) -> Vec<u32> {
        lock(&self.shared.tasks).keys().copied().collect()
    }

    /// The running tasks' stores, for reads.
    pub fn stores(&self) -> Vec<TaskStore> {
        self.shared.stores()
    }

    /// The partitions this node keeps a standby of, and how stale each is
    /// (`None`: it has not caught up yet).
    pub fn standbys(&self) -> Vec<(u32, Option<Duration>)> {
        lock(&self.shared.standbys)
            .iter()
            .map(|(&p, s)| (p, s.staleness()))
            .collect()
    }

    /// A handle for readers, valid until the version stops.
    pub fn handle(&self) -> SpreadHandle {
        SpreadHandle(self.shared.clone())
    }

    /// Partitions whose task is down, and why.
    pub fn failures(&self) -> Vec<(u32, String)> {
        lock(&self.shared.failed)
            .iter()
            .map(|(p, (why, _))| (*p, why.clone()))
            .collect()
    }

    /// Counters of the tasks running now and the committed position of
    /// every partition.
    pub fn progress(&self) -> ProgressSnapshot {
        let mut total = self.shared.progress.snapshot();
        for task in lock(&self.shared.tasks).values() {
            let p = task.running.progress();
            total.processed += p.processed;
            total.output += p.output;
            total.late_dropped += p.late_dropped;
            total.late_side_output += p.late_side_output;
            total.duplicates += p.duplicates;
            total.invalid += p.invalid;
            total.rate_per_second += p.rate_per_second;
        }
        total
    }

    /// The shared progress (committed offsets of every partition, woken
    /// as tasks commit).
    pub fn shared_progress(&self) -> Arc<Progress> {
        self.shared.progress.clone()
    }

    /// Committed position against the input's end of each partition
    /// owned here.
    pub fn lag(&self) -> Result<Vec<PartitionLag>> {
        let tasks = lock(&self.shared.tasks);
        let mut lags = Vec::with_capacity(tasks.len());
        for (&partition, task) in tasks.iter() {
            // Stage backlogs add up; positions are the input's.
            let behind: u64 = match &task.upstream {
                Some(_) => task.running.lag()?.iter().map(|l| l.lag).sum(),
                None => 0,
            };
            for lag in task.head().lag()? {
                lags.push(PartitionLag {
                    partition,
                    lag: lag.lag + behind,
                    ..lag
                });
            }
        }
        Ok(lags)
    }

    /// True once the following thread ended.
    pub fn is_finished(&self) -> bool {
        self.threads.first().is_none_or(JoinHandle::is_finished)
    }

    /// Asks every task to end without a final commit.
    pub fn abandon(&self) {
        self.shared.abandoned.store(true, Ordering::SeqCst);
        self.shared.stopping.store(true, Ordering::SeqCst);
        for task in lock(&self.shared.tasks).values() {
            task.abandon();
        }
        for standby in lock(&self.shared.standbys).values() {
            standby.task.abandon();
        }
    }

    /// Stops following the assignment, stops every task (after a final
    /// commit) and hands the partitions over.
    pub fn stop(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        self.shared.stopping.store(true, Ordering::SeqCst);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
        let handing_over = std::mem::take(&mut *lock(&self.shared.handing_over));
        for (_, thread) in handing_over {
            let _ = thread.join();
        }
        for (partition, standby) in std::mem::take(&mut *lock(&self.shared.standbys)) {
            let _ = standby.task.stop(&self.shared.scope, partition);
        }
        let tasks = std::mem::take(&mut *lock(&self.shared.tasks));
        let mut result = Ok(());
        let mut stores = Vec::new();
        for (partition, task) in tasks {
            let (stopped, task_stores) = task.stop(&self.shared.scope, partition);
            if let Err(e) = stopped {
                result = Err(e);
            }
            stores.extend(
                task_stores
                    .into_iter()
                    .map(|(s, store)| (partition, s, store)),
            );
        }
        // Stopping gracefully: whoever takes the partitions over starts
        // from where they are now.
        if !self.shared.abandoned.load(Ordering::SeqCst) {
            for (partition, scope, store) in stores {
                self.shared.checkpoint_one(&TaskStore {
                    partition,
                    scope,
                    store,
                });
            }
        }
        self.shared.assignment.leave();
        result
    }
}

impl Drop for SpreadVersion {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// What readers of a spread version hold: its tasks' stores while it runs.
#[derive(Clone)]
pub struct SpreadHandle(Arc<Shared>);

impl fmt::Debug for SpreadHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SpreadHandle").field(&self.0.scope).finish()
    }
}

impl SpreadHandle {
    /// The running tasks' stores.
    pub fn stores(&self) -> Vec<TaskStore> {
        self.0.stores()
    }

    /// True once the version was told to stop.
    pub fn is_stopped(&self) -> bool {
        self.0.stopping.load(Ordering::SeqCst)
    }

    /// The running tasks' stores and those of the standbys whose rows are
    /// at most `max_staleness` behind their input (for a read that
    /// accepts it), by partition.
    pub fn stores_within(&self, max_staleness: Duration) -> Vec<TaskStore> {
        let mut stores = self.0.stores();
        for (&partition, standby) in lock(&self.0.standbys).iter() {
            let fresh = standby.staleness().is_some_and(|s| s <= max_staleness);
            if fresh && !stores.iter().any(|t| t.partition == partition) {
                stores.push(TaskStore {
                    partition,
                    scope: task_scope(&self.0.scope, partition),
                    store: standby.task.store.clone(),
                });
            }
        }
        stores.sort_by_key(|t| t.partition);
        stores
    }

    /// The partitions whose standby runs here, and how stale each is
    /// (`None`: not caught up yet).
    pub fn standbys(&self) -> Vec<(u32, Option<Duration>)> {
        lock(&self.0.standbys)
            .iter()
            .map(|(&p, s)| (p, s.staleness()))
            .collect()
    }

    /// Partitions of the version's input.
    pub fn partitions(&self) -> usize {
        self.0.progress.snapshot().committed_offsets.len()
    }
}

impl Shared {
    fn stores(&self) -> Vec<TaskStore> {
        lock(&self.tasks)
            .iter()
            .map(|(&partition, task)| TaskStore {
                partition,
                scope: task_scope(&self.scope, partition),
                store: task.store.clone(),
            })
            .collect()
    }

    /// Keeps the tasks in line with the assignment until stopped.
    fn follow(self: &Arc<Self>) {
        let mut seen = None;
        while !self.stopping.load(Ordering::SeqCst) {
            let (generation, owned) = self.assignment.owned();
            let retry_due = lock(&self.failed)
                .values()
                .any(|(_, at)| at.elapsed() >= TASK_RETRY);
            let finished = lock(&self.tasks).values().any(Task::is_finished);
            let handed_over = self.handed_over();
            if let Some(owned) = owned {
                if seen != Some(generation) || retry_due || finished || handed_over {
                    self.reconcile(&owned);
                    seen = Some(generation);
                }
                if self.keeps_standbys {
                    self.keep_standbys(&owned);
                }
            }
            self.gather_progress();
            std::thread::sleep(RECONCILE_EVERY);
        }
    }

    /// Forgets the handovers whose stop ended; true if there were any
    /// (their partitions may be started here again).
    fn handed_over(&self) -> bool {
        let mut handing_over = lock(&self.handing_over);
        let before = handing_over.len();
        handing_over.retain(|_, thread| !thread.is_finished());
        handing_over.len() < before
    }

    /// True while the task of `partition` handed over is still stopping.
    fn is_handing_over(&self, partition: u32) -> bool {
        lock(&self.handing_over).contains_key(&partition)
    }

    /// Stops the task of `partition`, handed over, on a thread of its own
    /// (on this one if no thread can be made).
    fn hand_over(self: &Arc<Self>, partition: u32, task: Task) {
        let task = Arc::new(Mutex::new(Some(task)));
        let shared = self.clone();
        let taken = task.clone();
        let stop = move || {
            if let Some(task) = lock(&taken).take() {
                shared.stop_handed_over(partition, task);
            }
        };
        let name = format!("kappa-handover-{}-{partition}", self.scope.name);
        match std::thread::Builder::new().name(name).spawn(stop) {
            Ok(thread) => {
                lock(&self.handing_over).insert(partition, thread);
            }
            Err(e) => {
                tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "cannot start a thread to hand the partition over: stopping its task here");
                if let Some(task) = lock(&task).take() {
                    self.stop_handed_over(partition, task);
                }
            }
        }
    }

    /// Stops the task of `partition`, handed over, after a final commit,
    /// and checkpoints its stores: its new owner starts from there.
    fn stop_handed_over(&self, partition: u32, task: Task) {
        let (stopped, stores) = task.stop(&self.scope, partition);
        if let Err(e) = stopped {
            tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "task stopped with an error on handing over");
            return;
        }
        for (scope, store) in stores {
            self.checkpoint_one(&TaskStore {
                partition,
                scope,
                store,
            });
        }
        tracing::info!(view = %self.scope.name, version = self.scope.version, partition, "partition handed over")
    }

    /// Stops the tasks of partitions not in `owned` (off this thread:
    /// [`Shared::hand_over`]) and of tasks that ended; starts the missing
    /// ones (a failed one once its retry is due).
    fn reconcile(self: &Arc<Self>, owned: &[u32]) {
        let gone: Vec<(u32, Task)> = {
            let mut tasks = lock(&self.tasks);
            let ended: Vec<u32> = tasks
                .iter()
                .filter(|(p, t)| !owned.contains(p) || t.is_finished())
                .map(|(p, _)| *p)
                .collect();
            ended
                .into_iter()
                .filter_map(|p| tasks.remove(&p).map(|t| (p, t)))
                .collect()
        };
        for (partition, task) in gone {
            if !owned.contains(&partition) {
                self.hand_over(partition, task);
                continue;
            }
            // Ended: stopped here, and started again below.
            if let (Err(e), _) = task.stop(&self.scope, partition) {
                tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "task stopped; started again");
                lock(&self.failed).insert(partition, (e.to_string(), Instant::now()));
            }
        }
        lock(&self.failed).retain(|p, _| owned.contains(p));
        for &partition in owned {
            if self.stopping.load(Ordering::SeqCst) {
                return;
            }
            if lock(&self.tasks).contains_key(&partition) || self.is_handing_over(partition) {
                continue;
            }
            if lock(&self.failed)
                .get(&partition)
                .is_some_and(|(_, at)| at.elapsed() < TASK_RETRY)
            {
                continue;
            }
            // A standby of the partition ran here: its store is the
            // task's, warm; the task resumes from where it got.
            let standby = lock(&self.standbys).remove(&partition);
            if let Some(standby) = standby {
                if let (Err(e), _) = standby.task.stop(&self.scope, partition) {
                    tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "standby stopped with an error");
                }
                tracing::info!(view = %self.scope.name, version = self.scope.version, partition, "standby becomes the partition's task");
                metrics::counter!(STANDBY_TAKEOVERS, "view" => self.scope.name.clone())
                    .increment(1);
            }
            match (self.start)(partition, Role::Active) {
                Ok(task) => {
                    tracing::info!(view = %self.scope.name, version = self.scope.version, partition, "partition taken over");
                    lock(&self.failed).remove(&partition);
                    lock(&self.tasks).insert(partition, task);
                }
                Err(e) => {
                    tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "cannot start the partition's task");
                    lock(&self.failed).insert(partition, (e.to_string(), Instant::now()));
                }
            }
        }
    }

    /// Starts the standbys the assignment asks for (of partitions not
    /// owned here), stops the others, and notes which have caught up.
    fn keep_standbys(&self, owned: &[u32]) {
        let partitions = self.progress.snapshot().committed_offsets.len() as u32;
        let wanted: Vec<u32> = match self.assignment.standbys(partitions) {
            Some(wanted) => wanted.into_iter().filter(|p| !owned.contains(p)).collect(),
            // Partitions on the move: a standby about to be taken over
            // must still be there.
            None => lock(&self.standbys)
                .keys()
                .copied()
                .filter(|p| !owned.contains(p))
                .collect(),
        };
        let gone: Vec<(u32, Standby)> = {
            let mut standbys = lock(&self.standbys);
            let ended: Vec<u32> = standbys
                .iter()
                .filter(|(p, s)| !wanted.contains(p) || s.task.is_finished())
                .map(|(p, _)| *p)
                .collect();
            ended
                .into_iter()
                .filter_map(|p| standbys.remove(&p).map(|s| (p, s)))
                .collect()
        };
        for (partition, standby) in gone {
            let why = if wanted.contains(&partition) {
                "its task ended"
            } else {
                "another node keeps it now"
            };
            tracing::info!(view = %self.scope.name, version = self.scope.version, partition, why, "standby stopped");
            if let (Err(e), _) = standby.task.stop(&self.scope, partition) {
                tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "standby stopped with an error");
                lock(&self.failed_standbys).insert(partition, Instant::now());
            }
        }
        lock(&self.failed_standbys).retain(|p, at| wanted.contains(p) && at.elapsed() < TASK_RETRY);
        for partition in wanted {
            if self.stopping.load(Ordering::SeqCst)
                || lock(&self.standbys).contains_key(&partition)
                || lock(&self.failed_standbys).contains_key(&partition)
                || self.is_handing_over(partition)
            {
                continue;
            }
            match (self.start)(partition, Role::Standby) {
                Ok(task) => {
                    tracing::info!(view = %self.scope.name, version = self.scope.version, partition, "standby started");
                    lock(&self.standbys).insert(
                        partition,
                        Standby {
                            task,
                            caught_up: None,
                        },
                    );
                }
                Err(e) => {
                    tracing::warn!(view = %self.scope.name, version = self.scope.version, partition, error = %e, "cannot start a standby");
                    lock(&self.failed_standbys).insert(partition, Instant::now());
                }
            }
        }
        for standby in lock(&self.standbys).values_mut() {
            let lag = standby.task.running.lag();
            if lag.is_ok_and(|l| l.iter().all(|l| l.lag == 0)) {
                standby.caught_up = Some(Instant::now());
            }
        }
    }

    /// Checkpoints every task whose offset moved, every
    /// [`CheckpointPlan::every`], until stopped.
    fn checkpoint_until_stopped(&self) {
        let Some(plan) = &self.checkpoint else {
            return;
        };
        let mut next = Instant::now() + plan.every;
        while !self.stopping.load(Ordering::SeqCst) {
            if Instant::now() < next {
                std::thread::sleep(RECONCILE_EVERY.max(Duration::from_millis(50)));
                continue;
            }
            next = Instant::now() + plan.every;
            for task in self.checkpointable() {
                if self.stopping.load(Ordering::SeqCst) {
                    return;
                }
                self.checkpoint_one(&task);
            }
        }
    }

    /// The stores of every stage of the tasks running here.
    fn checkpointable(&self) -> Vec<TaskStore> {
        let tasks = lock(&self.tasks);
        let mut out = Vec::with_capacity(tasks.len() * 2);
        for (&partition, task) in tasks.iter() {
            out.push(TaskStore {
                partition,
                scope: task_scope(&self.scope, partition),
                store: task.store.clone(),
            });
            if let Some((_, store)) = &task.upstream {
                out.push(TaskStore {
                    partition,
                    scope: first_stage_scope(&self.scope, partition),
                    store: store.clone(),
                });
            }
        }
        out
    }

    /// Checkpoints one task's store if its offset moved since its last
    /// checkpoint from here (and checkpoints are kept).
    fn checkpoint_one(&self, task: &TaskStore) {
        let Some(plan) = &self.checkpoint else {
            return;
        };
        let offset = checkpoint::committed_offset(&task.store, &task.scope);
        let last = lock(&self.checkpointed).get(&task.scope.name).map(|c| c.0);
        if offset.as_ref().is_ok_and(|o| o.is_none() || *o == last) {
            return;
        }
        let started = Instant::now();
        match checkpoint::take(&task.store, &task.scope, plan) {
            Ok(offset) => {
                let labels = [
                    ("view", self.scope.name.clone()),
                    ("version", self.scope.version.to_string()),
                ];
                metrics::histogram!(CHECKPOINT_SECONDS, &labels)
                    .record(started.elapsed().as_secs_f64());
                lock(&self.checkpointed)
                    .insert(task.scope.name.clone(), (offset, kappa_log::now_ms()));
            }
            Err(e) => {
                metrics::counter!(CHECKPOINT_FAILURES, "view" => self.scope.name.clone())
                    .increment(1);
                tracing::warn!(view = %self.scope.name, version = self.scope.version, partition = task.partition, error = %e, "checkpoint failed");
            }
        }
    }

    /// Copies each task's committed offset into the version's progress.
    fn gather_progress(&self) {
        let mut offsets = self.progress.snapshot().committed_offsets;
        let mut watermark: Option<i64> = None;
        let mut changed = false;
        for (&p, task) in lock(&self.tasks).iter() {
            let snapshot = task.running.progress();
            if let (Some(slot), Some(committed)) =
                (offsets.get_mut(p as usize), task.input_committed())
            {
                changed |= *slot != committed;
                *slot = committed;
            }
            if let Some(w) = snapshot.watermark {
                watermark = Some(watermark.map_or(w, |m| m.min(w)));
            }
        }
        let before = self.progress.snapshot().watermark;
        if changed || before != watermark {
            self.progress
                .set_committed(&offsets, watermark.unwrap_or(i64::MIN));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_scopes_name_their_version_and_partition() {
        let version = Scope {
            name: "purchase_stats".into(),
            version: 3,
        };
        let task = task_scope(&version, 5);
        assert_eq!(task.name, "purchase_stats#5");
        assert_eq!(task.version, 3);
        assert_eq!(parse_task_scope(&task), Some((version.clone(), 5)));
        assert_eq!(parse_task_scope(&version), None);
    }
}
