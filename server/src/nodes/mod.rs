//! The Kappa cluster: nodes started with one `--cluster-id` against the
//! same Kafka cluster, sharing the catalog and every view's work.
//!
//! - **The control topic** (`_kappa-<id>-control` on the coordination
//!   cluster, [`record`]) carries what the nodes agree on. Every node reads
//!   it from the start, in order: statements that change the catalog are
//!   run by every node at the same place in that order
//!   ([`Nodes::submit`]: the node that took the request appends it, waits
//!   until it has run it itself and answers that result); nodes say they
//!   are up, where they are, and which partitions they own.
//! - **Partitions** of a view over a cluster topic are split among the
//!   nodes running it through Kafka's group protocol
//!   ([`kappa_cluster::GroupAssignment`], one group per version); the
//!   version runs one task per partition owned here
//!   ([`kappa_processor::spread`]). Each rebalance is announced on the
//!   control topic, so any node knows which node to ask for a key.
//! - **Reads** ([`rows`]) of a key go to its partition's owner (the
//!   record key's partition, as Kafka's default partitioner puts it);
//!   prefix and full reads gather every node's rows.
//!
//! `<data>/cluster.json` ([`applied`]) keeps how far this node has run the
//! control topic's statements, so a restart runs only newer ones.

pub mod applied;
pub mod checkpoints;
pub mod record;
pub mod rows;
pub mod standby;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use kappa_cluster::{control_topic_name, ClusterConfig, ControlTopic, GroupAssignment, OnChange};
use kappa_processor::error::ProcessorError;
use kappa_processor::host::Scope;
use kappa_processor::plan::Plan;
use kappa_processor::spread::{Assignment, Assignments};

use crate::config::ServerConfig;
use crate::statements::{Applied, StatementError};
use crate::views::manager::{Change, Swap};
use crate::views::review::Served;
use crate::AppState;
use record::{ControlRecord, Operation};

/// How often a node says it is up.
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// A node not heard of for this long is taken as gone.
pub const NODE_SILENT_FOR: Duration = Duration::from_secs(35);

/// How long a statement's node waits for its own run of it.
const STATEMENT_WAIT: Duration = Duration::from_secs(60);

/// A node of the cluster as the control topic says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Where its HTTP API is.
    pub url: String,
    /// When it last said it is up (ms since the epoch, its clock).
    pub at_ms: i64,
}

/// What the control topic says of the nodes.
#[derive(Debug, Default)]
struct Table {
    nodes: BTreeMap<String, NodeInfo>,
    /// Per version (`view@version`), each partition's owner.
    owners: BTreeMap<String, BTreeMap<u32, String>>,
    /// Per build (`view@version`), per node, the partitions whose tasks
    /// there caught up, and the input's partition count.
    ready: BTreeMap<String, BTreeMap<String, (Vec<u32>, u32)>>,
}

impl Table {
    /// Whether every partition of build `version` has caught up on its
    /// owner.
    fn all_ready(&self, version: &str) -> bool {
        let Some(ready) = self.ready.get(version) else {
            return false;
        };
        let of = ready.values().map(|(_, of)| *of).max().unwrap_or(0);
        let owners = self.owners.get(version);
        of > 0
            && (0..of).all(|p| {
                owners.and_then(|o| o.get(&p)).is_some_and(|owner| {
                    ready
                        .get(owner)
                        .is_some_and(|(partitions, _)| partitions.contains(&p))
                })
            })
    }
}

/// What a record this node appended did here.
#[derive(Debug)]
pub enum Outcome {
    /// A statement record's statements.
    Statements(Applied),
    /// A promote (`None`: the version was no longer being built) or
    /// rollback.
    Served(crate::views::Result<Option<Served>>),
    /// A replay.
    Replayed(crate::views::Result<Change>),
}

/// This node's part in a Kappa cluster.
pub struct Nodes {
    /// This node's id (its advertised URL).
    node: String,
    cluster_id: String,
    clusters: BTreeMap<String, ClusterConfig>,
    control: Arc<ControlTopic>,
    data_dir: PathBuf,
    table: Arc<Mutex<Table>>,
    /// What the records this node appended did here, by id.
    results: Mutex<HashMap<String, Outcome>>,
    /// The node, once it runs ([`Nodes::follow`]).
    state: OnceLock<AppState>,
    /// The builds' partitions this node last said are ready.
    ready_said: Mutex<HashMap<String, Vec<u32>>>,
    /// Builds this node asked every node to swap in.
    promoted: Mutex<HashSet<String>>,
    results_ready: Condvar,
    /// Records for the announcer thread to append.
    announce: Mutex<mpsc::Sender<ControlRecord>>,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Standbys per partition of the views' versions (0 or 1).
    standby_replicas: u32,
}

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nodes")
            .field("node", &self.node)
            .field("cluster_id", &self.cluster_id)
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Nodes {
    /// Joins the Kappa cluster `config.cluster_id` names (`None` when it
    /// names none): opens the control topic (creating it) and starts
    /// saying this node is up. Statements are run once [`Nodes::follow`]
    /// starts.
    pub fn open(config: &ServerConfig) -> anyhow::Result<Option<Arc<Nodes>>> {
        let (Some(cluster_id), Some(url)) = (&config.cluster_id, &config.advertise_url) else {
            return Ok(None);
        };
        let coordination = config.coordination_cluster_name()?;
        let cluster = config
            .clusters
            .get(coordination)
            .context("the coordination cluster is not configured")?;
        let topic = control_topic_name(cluster_id);
        let control = ControlTopic::open(coordination, cluster, &topic)
            .map_err(|e| anyhow::anyhow!("cluster '{coordination}': {e}"))?;
        let (tx, rx) = mpsc::channel();
        let nodes = Arc::new(Nodes {
            node: url.clone(),
            cluster_id: cluster_id.clone(),
            clusters: config.clusters.clone(),
            control: Arc::new(control),
            data_dir: config.data_dir.clone(),
            table: Arc::new(Mutex::new(Table::default())),
            results: Mutex::new(HashMap::new()),
            state: OnceLock::new(),
            ready_said: Mutex::new(HashMap::new()),
            promoted: Mutex::new(HashSet::new()),
            results_ready: Condvar::new(),
            announce: Mutex::new(tx),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Mutex::new(Vec::new()),
            standby_replicas: config.standby_replicas,
        });
        applied::check_cluster_id(&config.data_dir, cluster_id)?;
        let announcer = std::thread::Builder::new()
            .name("kappa-announce".into())
            .spawn({
                let nodes = nodes.clone();
                move || nodes.announce_until_stopped(rx)
            })?;
        lock(&nodes.threads).push(announcer);
        tracing::info!(cluster_id = %cluster_id, node = %url, control = %topic, "joined the Kappa cluster");
        Ok(Some(nodes))
    }

    /// This node's id.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// Appends what it is given, and that this node is up every
    /// [`HEARTBEAT`]; says it leaves when stopped.
    fn announce_until_stopped(&self, rx: mpsc::Receiver<ControlRecord>) {
        let mut next_heartbeat = Instant::now();
        while !self.stop.load(Ordering::SeqCst) {
            if Instant::now() >= next_heartbeat {
                self.append(ControlRecord::Node {
                    node: self.node.clone(),
                    url: self.node.clone(),
                    at_ms: kappa_log::now_ms(),
                });
                next_heartbeat = Instant::now() + HEARTBEAT;
            }
            self.say_ready();
            let wait = next_heartbeat
                .saturating_duration_since(Instant::now())
                .min(Duration::from_millis(200));
            match rx.recv_timeout(wait) {
                Ok(record) => self.append(record),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        while let Ok(record) = rx.try_recv() {
            self.append(record);
        }
        self.append(ControlRecord::Leave {
            node: self.node.clone(),
        });
    }

    /// Says which partitions of the builds spread over nodes have caught
    /// up here, when that changed.
    fn say_ready(&self) {
        let Some(state) = self.state.get() else {
            return;
        };
        for (view, version, of, partitions) in state.views.spread_builds() {
            let key = format!("{view}@{version}");
            let mut said = lock(&self.ready_said);
            if said.get(&key) == Some(&partitions) {
                continue;
            }
            said.insert(key.clone(), partitions.clone());
            drop(said);
            self.append(ControlRecord::Ready {
                node: self.node.clone(),
                version: key,
                partitions,
                of,
            });
        }
    }

    /// Appends `record`, retrying a few times; says so when it cannot.
    fn append(&self, record: ControlRecord) {
        let value = record.encode();
        for attempt in 1..=5u32 {
            match self.control.append(&self.node, &value) {
                Ok(_) => return,
                Err(e) if attempt == 5 => {
                    tracing::warn!(error = %e, ?record, "cannot append to the control topic")
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100 * u64::from(attempt))),
            }
        }
    }

    /// Reads the control topic from its start on a thread of its own:
    /// records who is up and who owns what, and runs each statement not
    /// run here yet with `state`.
    pub fn follow(self: &Arc<Self>, state: AppState) -> anyhow::Result<()> {
        let _ = self.state.set(state.clone());
        let mut applied = applied::load(&self.data_dir)?;
        let nodes = self.clone();
        let apply = move |offset: u64, value: &[u8]| {
            let record = match ControlRecord::decode(value) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(offset, error = %e, "skipping a control record this node does not read");
                    return;
                }
            };
            match record {
                ControlRecord::Statement { node, id, sql } if offset >= applied => {
                    let result = crate::statements::apply_text(&state, &sql);
                    if let Some((i, e)) = &result.failed {
                        tracing::info!(offset, statement = i, error = %e, from = %node, "a cluster statement failed here");
                    }
                    applied = offset + 1;
                    if let Err(e) = applied::save(&nodes.data_dir, &nodes.cluster_id, applied) {
                        tracing::error!(error = %e, "cannot record how far the control topic was run");
                    }
                    nodes.done(&node, id, Outcome::Statements(result));
                }
                ControlRecord::Operation { node, id, op } if offset >= applied => {
                    let outcome = run_operation(&state, op);
                    applied = offset + 1;
                    if let Err(e) = applied::save(&nodes.data_dir, &nodes.cluster_id, applied) {
                        tracing::error!(error = %e, "cannot record how far the control topic was run");
                    }
                    nodes.done(&node, id, outcome);
                }
                ControlRecord::Statement { .. } | ControlRecord::Operation { .. } => {}
                other => nodes.learn(other),
            }
        };
        let handle = self
            .control
            .follow(
                0,
                apply,
                self.stop.clone(),
                kappa_processor::sql::SQL_STACK_BYTES,
            )
            .map_err(|e| anyhow::anyhow!(e))?;
        lock(&self.threads).push(handle);
        Ok(())
    }

    /// Hands what a record did to the request waiting for it, when this
    /// node appended it.
    fn done(&self, node: &str, id: String, outcome: Outcome) {
        if node == self.node && !id.is_empty() {
            lock(&self.results).insert(id, outcome);
            self.results_ready.notify_all();
        }
    }

    /// Records what a node said of itself; asks every node to swap a
    /// build in once every partition of it has caught up.
    fn learn(&self, record: ControlRecord) {
        let promote = match &record {
            ControlRecord::Ready { version, .. } | ControlRecord::Owns { version, .. } => {
                Some(version.clone())
            }
            _ => None,
        };
        self.record(record);
        let Some(version) = promote else {
            return;
        };
        if !lock(&self.table).all_ready(&version) || !lock(&self.promoted).insert(version.clone()) {
            return;
        }
        let Some((view, number)) = version
            .rsplit_once('@')
            .and_then(|(v, n)| Some((v.to_string(), n.parse().ok()?)))
        else {
            return;
        };
        tracing::info!(version = %version, "every partition caught up: swapping it in on every node");
        let op = Operation::Promote {
            view,
            version: number,
        };
        let _ = lock(&self.announce).send(ControlRecord::Operation {
            node: self.node.clone(),
            id: String::new(),
            op,
        });
    }

    fn record(&self, record: ControlRecord) {
        let mut table = lock(&self.table);
        match record {
            ControlRecord::Node { node, url, at_ms } => {
                table.nodes.insert(node, NodeInfo { url, at_ms });
            }
            ControlRecord::Owns {
                node,
                version,
                partitions,
            } => {
                let owners = table.owners.entry(version).or_default();
                owners.retain(|p, owner| *owner != node || partitions.contains(p));
                for p in partitions {
                    owners.insert(p, node.clone());
                }
            }
            ControlRecord::Ready {
                node,
                version,
                partitions,
                of,
            } => {
                table
                    .ready
                    .entry(version)
                    .or_default()
                    .insert(node, (partitions, of));
            }
            ControlRecord::Leave { node } => {
                table.nodes.remove(&node);
                for owners in table.owners.values_mut() {
                    owners.retain(|_, owner| *owner != node);
                }
            }
            ControlRecord::Statement { .. } | ControlRecord::Operation { .. } => {}
        }
    }

    /// Runs `sql` on every node: appends it to the control topic and
    /// waits until this node ran it, answering what it did here.
    pub fn submit(&self, sql: &str) -> Result<Applied, StatementError> {
        let outcome = self.run_everywhere(|node, id| ControlRecord::Statement {
            node,
            id,
            sql: sql.to_string(),
        })?;
        match outcome {
            Outcome::Statements(applied) => Ok(applied),
            other => Err(StatementError::Unavailable(format!(
                "the control topic answered another record's outcome: {other:?}"
            ))),
        }
    }

    /// Runs `op` on every node, like [`Nodes::submit`].
    pub fn operate(&self, op: Operation) -> Result<Outcome, StatementError> {
        self.run_everywhere(|node, id| ControlRecord::Operation { node, id, op })
    }

    /// Appends the record `make` makes (given this node and a new id) and
    /// waits until this node ran it.
    fn run_everywhere(
        &self,
        make: impl FnOnce(String, String) -> ControlRecord,
    ) -> Result<Outcome, StatementError> {
        let mut random = [0u8; 16];
        getrandom::fill(&mut random)
            .map_err(|e| StatementError::Unavailable(format!("no random id: {e}")))?;
        let id: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let record = make(self.node.clone(), id.clone());
        self.control
            .append(&self.node, &record.encode())
            .map_err(|e| {
                StatementError::Unavailable(format!("the Kappa cluster's control topic: {e}"))
            })?;
        let deadline = Instant::now() + STATEMENT_WAIT;
        let mut results = lock(&self.results);
        loop {
            if let Some(result) = results.remove(&id) {
                return Ok(result);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StatementError::Unavailable(format!(
                    "the statement is in the Kappa cluster's control topic but did not run here within {} s; it runs once this node reads that far",
                    STATEMENT_WAIT.as_secs()
                )));
            }
            results = self
                .results_ready
                .wait_timeout(results, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// The URL of the node owning `partition` of version `version`
    /// (`view@version`), as last announced.
    pub fn owner(&self, version: &str, partition: u32) -> Option<String> {
        let table = lock(&self.table);
        let node = table.owners.get(version)?.get(&partition)?;
        table.nodes.get(node).map(|n| n.url.clone())
    }

    /// The URL of the node keeping the standby of `partition` of version
    /// `version` (`view@version`, over `partitions`), when standbys are
    /// kept.
    pub fn standby_of(&self, version: &str, partitions: u32, partition: u32) -> Option<String> {
        if self.standby_replicas == 0 {
            return None;
        }
        let table = lock(&self.table);
        let node = standby::standby_of(table.owners.get(version)?, partitions, partition)?;
        table.nodes.get(&node).map(|n| n.url.clone())
    }

    /// The other nodes up now: id and URL.
    pub fn peers(&self) -> Vec<(String, NodeInfo)> {
        let now = kappa_log::now_ms();
        lock(&self.table)
            .nodes
            .iter()
            .filter(|(node, info)| {
                **node != self.node
                    && now.saturating_sub(info.at_ms) < NODE_SILENT_FOR.as_millis() as i64
            })
            .map(|(node, info)| (node.clone(), info.clone()))
            .collect()
    }

    /// Every node the control topic knows, and the partitions each owns
    /// per version.
    pub fn overview(
        &self,
    ) -> (
        BTreeMap<String, NodeInfo>,
        BTreeMap<String, BTreeMap<u32, String>>,
    ) {
        let table = lock(&self.table);
        (table.nodes.clone(), table.owners.clone())
    }

    /// Stops saying this node is up (saying it leaves) and reading the
    /// control topic. The views' groups are left when the views stop.
    pub fn close(&self) {
        self.stop.store(true, Ordering::SeqCst);
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Runs a change of a view's versions the cluster decided on.
fn run_operation(state: &AppState, op: Operation) -> Outcome {
    match op {
        Operation::Promote { view, version } => {
            Outcome::Served(state.views.promote_as_decided(&view, version))
        }
        Operation::Rollback { view } => {
            Outcome::Served(state.views.rollback_as_decided(&view).map(Some))
        }
        Operation::Replay { view, request } => {
            let from = crate::dto::start_from(request.from);
            let swap = match request.swap {
                crate::dto::SwapMode::Auto => Swap::Auto,
                crate::dto::SwapMode::Manual => Swap::Manual,
            };
            Outcome::Replayed(state.views.replay(&view, from, swap))
        }
    }
}

impl Assignments for Nodes {
    fn internal_topic(&self, scope: &Scope, what: &str) -> String {
        // Kafka topic names take letters, digits, `.`, `_` and `-`.
        format!(
            "_kappa-{}-{}-{}-{what}",
            self.cluster_id, scope.name, scope.version
        )
    }

    fn create_topic(
        &self,
        cluster: &str,
        topic: &str,
        partitions: u32,
    ) -> kappa_processor::error::Result<()> {
        let config = self.clusters.get(cluster).ok_or_else(|| {
            ProcessorError::InvalidPlan(format!(
                "cluster '{cluster}' is not configured on this server"
            ))
        })?;
        kappa_cluster::create_topic(cluster, config, topic, partitions)
            .map_err(|e| ProcessorError::WaitingForSource(format!("cluster '{cluster}': {e}")))
    }

    fn assignment(
        &self,
        plan: &Plan,
        scope: &Scope,
    ) -> kappa_processor::error::Result<Option<Arc<dyn Assignment>>> {
        let Some(cluster) = &plan.source.cluster else {
            return Ok(None);
        };
        let config = self.clusters.get(cluster).ok_or_else(|| {
            ProcessorError::InvalidPlan(format!(
                "cluster '{cluster}' is not configured on this server"
            ))
        })?;
        let version = format!("{}@{}", scope.name, scope.version);
        let group = format!("kappa-{}-{version}", self.cluster_id);
        let announce = lock(&self.announce).clone();
        let node = self.node.clone();
        let on_change: OnChange = Arc::new(move |partitions: &[u32]| {
            let _ = announce.send(ControlRecord::Owns {
                node: node.clone(),
                version: version.clone(),
                partitions: partitions.to_vec(),
            });
        });
        // A repartitioned view's repartition partition p goes with its
        // input partition p: owning one is owning both.
        let topics = [plan.source.topic.as_str()];
        let group: Arc<dyn Assignment> =
            GroupAssignment::join(cluster, config, &group, &topics, &self.node, on_change)?;
        if self.standby_replicas == 0 {
            return Ok(Some(group));
        }
        Ok(Some(Arc::new(standby::WithStandbys {
            group,
            table: self.table.clone(),
            node: self.node.clone(),
            version: format!("{}@{}", scope.name, scope.version),
        })))
    }
}
