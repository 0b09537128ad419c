//! A view version's share of its input's partitions among the Kappa nodes
//! of one cluster id, through Kafka's group protocol
//! ([`kappa_processor::spread::Assignment`]).
//!
//! Each node running the version joins the consumer group
//! `kappa-<cluster id>-<view>@<version>` on the cluster holding its input
//! and subscribes to the input topic, with the `range` assignor: with
//! several co-partitioned topics (same partition count) it gives each
//! member the same partition numbers of every topic, as Kafka Streams'
//! tasks need. The group is used for membership only: the member pauses
//! every partition it is given (the version's tasks read them with
//! consumers of their own, at the offsets their state committed) and
//! never commits offsets to the cluster. A member that stops heart-beating
//! (a node killed) loses its partitions after the session timeout
//! ([`SESSION_TIMEOUT_MS`]); one that leaves ([`Assignment::leave`]) hands
//! them over at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use kappa_processor::error::{ProcessorError, Result};
use kappa_processor::spread::Assignment;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::ClientContext;

use crate::{client_config, ClusterConfig};

/// How long a node may go without a heartbeat before its partitions go
/// to the others (Kafka's `session.timeout.ms`).
pub const SESSION_TIMEOUT_MS: u32 = 6_000;

/// How often a member heart-beats (Kafka's `heartbeat.interval.ms`).
const HEARTBEAT_INTERVAL_MS: u32 = 1_000;

/// How long one poll of the membership consumer waits.
const POLL: Duration = Duration::from_millis(50);

/// The partitions a member owns, and how many times they changed.
#[derive(Debug, Default)]
struct Owned {
    generation: u64,
    partitions: Option<Vec<u32>>,
}

/// Called with the partitions a member owns whenever they change.
pub type OnChange = Arc<dyn Fn(&[u32]) + Send + Sync>;

/// What the consumer's rebalance callbacks write.
struct Membership {
    owned: Arc<Mutex<Owned>>,
    on_change: OnChange,
    group: String,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ClientContext for Membership {}

impl ConsumerContext for Membership {
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let partitions = match rebalance {
            Rebalance::Assign(tpl) => {
                // Membership only: the tasks read with consumers of their own.
                if let Err(e) = consumer.pause(tpl) {
                    tracing::warn!(group = %self.group, error = %e, "cannot pause the group's partitions");
                }
                let mut partitions: Vec<u32> = tpl
                    .elements()
                    .iter()
                    .filter_map(|e| u32::try_from(e.partition()).ok())
                    .collect();
                partitions.sort_unstable();
                partitions.dedup();
                partitions
            }
            Rebalance::Revoke(_) => Vec::new(),
            Rebalance::Error(e) => {
                tracing::warn!(group = %self.group, error = %e, "group rebalance failed");
                return;
            }
        };
        tracing::info!(group = %self.group, ?partitions, "partitions assigned");
        {
            let mut owned = lock(&self.owned);
            owned.generation += 1;
            owned.partitions = Some(partitions.clone());
        }
        (self.on_change)(&partitions);
    }
}

/// This node's membership in one version's group.
pub struct GroupAssignment {
    group: String,
    owned: Arc<Mutex<Owned>>,
    leaving: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for GroupAssignment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupAssignment")
            .field("group", &self.group)
            .finish()
    }
}

impl GroupAssignment {
    /// Joins `group` on the cluster `name` as member `member` (the node's
    /// id, its client id), subscribed to `topics`; `on_change` hears each
    /// new assignment.
    pub fn join(
        name: &str,
        config: &ClusterConfig,
        group: &str,
        topics: &[&str],
        member: &str,
        on_change: OnChange,
    ) -> Result<Arc<GroupAssignment>> {
        let waiting = |what: String| {
            ProcessorError::WaitingForSource(format!(
                "cluster '{name}' ({}), group '{group}': {what}",
                config.bootstrap_servers
            ))
        };
        let mut client =
            client_config(name, config).map_err(|e| ProcessorError::InvalidPlan(e.to_string()))?;
        client
            .set("client.id", member)
            .set("group.id", group)
            .set("partition.assignment.strategy", "range")
            .set("session.timeout.ms", SESSION_TIMEOUT_MS.to_string())
            .set("heartbeat.interval.ms", HEARTBEAT_INTERVAL_MS.to_string())
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "latest");
        let owned = Arc::new(Mutex::new(Owned::default()));
        let consumer: BaseConsumer<Membership> = client
            .create_with_context(Membership {
                owned: owned.clone(),
                on_change,
                group: group.to_string(),
            })
            .map_err(|e| waiting(format!("cannot make a client: {e}")))?;
        consumer
            .subscribe(topics)
            .map_err(|e| waiting(format!("cannot subscribe: {e}")))?;
        let leaving = Arc::new(AtomicBool::new(false));
        let thread = std::thread::Builder::new()
            .name(format!("kappa-group-{group}"))
            .spawn({
                let leaving = leaving.clone();
                let group = group.to_string();
                move || {
                    while !leaving.load(Ordering::SeqCst) {
                        // Serves the rebalance callbacks and heartbeats;
                        // the partitions are paused, so no record comes.
                        if let Some(Err(e)) = consumer.poll(POLL) {
                            tracing::debug!(group = %group, error = %e, "group member");
                        }
                    }
                    // Leaves the group: the others get the partitions now,
                    // not after the session timeout.
                    consumer.unsubscribe();
                    let _ = consumer.poll(Duration::from_millis(10));
                }
            })
            .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?;
        Ok(Arc::new(GroupAssignment {
            group: group.to_string(),
            owned,
            leaving,
            thread: Mutex::new(Some(thread)),
        }))
    }
}

impl Assignment for GroupAssignment {
    fn owned(&self) -> (u64, Option<Vec<u32>>) {
        let owned = lock(&self.owned);
        (owned.generation, owned.partitions.clone())
    }

    fn leave(&self) {
        self.leaving.store(true, Ordering::SeqCst);
        if let Some(thread) = lock(&self.thread).take() {
            let _ = thread.join();
        }
    }
}

impl Drop for GroupAssignment {
    fn drop(&mut self) {
        self.leave();
    }
}
