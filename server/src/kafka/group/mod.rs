//! The consumer-group coordinator of Kafka's classic group protocol
//! (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, and the group checks of
//! OffsetCommit, ListGroups and DescribeGroups), with the semantics of the
//! Java broker's `GroupCoordinator` and `GroupMetadata`. Plain Rust types in
//! and out; the connection code converts them from and to the wire.
//!
//! # The state machine (per group)
//!
//! ```text
//!         join           all rejoined, or the           leader's
//!  Empty ──────► Preparing ─── rebalance timeout ──► Completing ── SyncGroup ──► Stable
//!    ▲           Rebalance                           Rebalance                     │
//!    │            │  ▲  ▲                                │                         │
//!    └────────────┘  │  └──── a join that changes ───────┘                         │
//!   (no member left) │        things, a leave, an expiry                           │
//!                    └─────────────────────────────────────────────────────────────┘
//! ```
//!
//! A settled group (CompletingRebalance or Stable) goes back to
//! PreparingRebalance on a new member's join, the leader's rejoin, a rejoin
//! with changed protocols, a leave, a session expiry or a missing SyncGroup.
//!
//! - **Empty**: no members. The first JoinGroup starts a join phase that, for
//!   a group that was Empty, lasts [`GroupConfig::initial_rebalance_delay_ms`]
//!   (extended by the same again while more members arrive, up to the
//!   rebalance timeout) so that consumers started together share one
//!   generation.
//! - **PreparingRebalance**: every member must (re)join. JoinGroup calls wait.
//!   The phase completes when every member has rejoined and no member id
//!   handed out with MEMBER_ID_REQUIRED is still expected, or when the
//!   rebalance timeout (the largest of the members') passes in [`Coordinator::tick`]:
//!   members that did not rejoin are removed, the generation advances, a
//!   protocol every member supports is chosen by vote, and every waiting
//!   JoinGroup is answered — the leader's with every member's metadata.
//!   Heartbeats answer REBALANCE_IN_PROGRESS, which is how members learn to rejoin.
//! - **CompletingRebalance** (Kafka's AwaitingSync): SyncGroup calls wait for
//!   the leader's, which carries the assignment; then each gets its own and
//!   the group is Stable. Members that send no SyncGroup within the
//!   rebalance timeout are removed and a new rebalance starts.
//! - **Stable**: heartbeats keep sessions alive; a member silent for its
//!   session timeout is removed and a rebalance starts. A member waiting in
//!   a join or sync phase counts as alive (the phase has its own timeout),
//!   except a new member's first join, which has
//!   [`GroupConfig::new_member_join_timeout_ms`].
//! - **Dead** is only answered for groups that do not exist. A group whose
//!   members all left is kept, Empty (its committed offsets live elsewhere).
//!
//! **Static members** (KIP-345, `group.instance.id`): a member that joins
//! with a group instance id held by another member and no member id is
//! that member restarted. It takes the member's place under a new member
//! id — in a Stable group whose protocols it fits, at once, with no
//! rebalance and its earlier assignment — and the old id is fenced: its
//! waiting calls and any later JoinGroup, SyncGroup, Heartbeat,
//! OffsetCommit or LeaveGroup naming the instance id with the old member
//! id are answered FENCED_INSTANCE_ID. A static member needs no
//! MEMBER_ID_REQUIRED round trip, leaves by its instance id (LeaveGroup
//! v3+), and is removed when its session times out like any member.
//!
//! Not implemented: the new consumer protocol (KIP-848). One deliberate difference from Kafka:
//! the initial delay is extended by later arrivals whenever the group was
//! Empty, not only at generation 0.
//!
//! Time comes from an injectable [`Clock`]; every expiry happens in
//! [`Coordinator::tick`], which the server calls on an interval, so tests
//! are deterministic. The groups sit behind one `std` mutex that is never
//! held across an await: a call decides under the lock and, if it must
//! wait, awaits a `oneshot` answer after releasing it.

mod clock;
mod codes;
mod config;
mod handlers;
mod member;
#[cfg(test)]
mod random_tests;
mod state;
#[cfg(test)]
mod tests;
mod types;

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

pub use clock::Clock;
pub use codes::*;
pub use config::GroupConfig;
pub use types::{
    GroupDescription, GroupListing, GroupState, JoinRequest, JoinResponse, JoinedMember,
    LeaveResponse, MemberDescription, SyncRequest, SyncResponse,
};

use state::{Group, Reply};

/// Rebalances started, by group (a counter).
pub use crate::metrics::KAFKA_REBALANCES as REBALANCES;

/// The coordinator of every consumer group on this node. `Send + Sync`:
/// shared behind an `Arc` by all connection tasks.
#[derive(Debug)]
pub struct Coordinator {
    config: GroupConfig,
    clock: Clock,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    groups: HashMap<String, Group>,
    closed: bool,
}

impl Inner {
    /// Group `id`, created if absent and there is room (an Empty group is
    /// forgotten to make room if need be).
    fn group_or_create(&mut self, id: &str, groups_max: usize) -> Option<&mut Group> {
        if !self.groups.contains_key(id) {
            if self.groups.len() >= groups_max {
                let evict = self
                    .groups
                    .values()
                    .find(|g| g.is_evictable())
                    .map(|g| g.id.clone())?;
                self.groups.remove(&evict);
            }
            self.groups
                .insert(id.to_string(), Group::new(id.to_string()));
        }
        self.groups.get_mut(id)
    }
}

impl Coordinator {
    /// A coordinator with no groups.
    pub fn new(config: GroupConfig, clock: Clock) -> Self {
        Coordinator {
            config,
            clock,
            inner: Mutex::new(Inner::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("group coordinator")
    }

    /// JoinGroup. Waits until the group's join phase completes (or the
    /// member is removed, or the coordinator closes).
    pub async fn join(&self, req: JoinRequest) -> JoinResponse {
        let member_id = req.member_id.clone();
        match self.start_join(req) {
            Reply::Now(answer) => answer,
            Reply::Wait(answer) => answer
                .await
                .unwrap_or_else(|_| JoinResponse::error(member_id, COORDINATOR_NOT_AVAILABLE)),
        }
    }

    fn start_join(&self, req: JoinRequest) -> Reply<JoinResponse> {
        let now = self.clock.now_ms();
        let session_ms = u64::try_from(req.session_timeout_ms).unwrap_or(0);
        let mut inner = self.lock();
        if inner.closed {
            return Reply::Now(JoinResponse::error(
                req.member_id,
                COORDINATOR_NOT_AVAILABLE,
            ));
        }
        if req.group_id.is_empty() {
            return Reply::Now(JoinResponse::error(req.member_id, INVALID_GROUP_ID));
        }
        if session_ms < self.config.session_timeout_min_ms
            || session_ms > self.config.session_timeout_max_ms
        {
            return Reply::Now(JoinResponse::error(req.member_id, INVALID_SESSION_TIMEOUT));
        }
        let group = if req.member_id.is_empty() {
            match inner.group_or_create(&req.group_id, self.config.groups_max) {
                Some(group) => group,
                None => return Reply::Now(JoinResponse::error("", COORDINATOR_NOT_AVAILABLE)),
            }
        } else {
            match inner.groups.get_mut(&req.group_id) {
                Some(group) => group,
                None => return Reply::Now(JoinResponse::error(req.member_id, UNKNOWN_MEMBER_ID)),
            }
        };
        group.join(req, now, &self.config)
    }

    /// SyncGroup. A follower waits for the leader's sync; everyone gets
    /// their own assignment.
    pub async fn sync(&self, req: SyncRequest) -> SyncResponse {
        let waiting = {
            let now = self.clock.now_ms();
            let mut inner = self.lock();
            if inner.closed {
                return SyncResponse::error(COORDINATOR_NOT_AVAILABLE);
            }
            if req.group_id.is_empty() {
                return SyncResponse::error(INVALID_GROUP_ID);
            }
            match inner.groups.get_mut(&req.group_id) {
                Some(group) => group.sync(req, now),
                None => return SyncResponse::error(UNKNOWN_MEMBER_ID),
            }
        };
        match waiting {
            Reply::Now(answer) => answer,
            Reply::Wait(answer) => answer
                .await
                .unwrap_or_else(|_| SyncResponse::error(COORDINATOR_NOT_AVAILABLE)),
        }
    }

    /// Heartbeat: NONE, or REBALANCE_IN_PROGRESS (rejoin), or why the
    /// member is not part of this generation (FENCED_INSTANCE_ID: a newer
    /// member took its static id).
    pub fn heartbeat(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> ErrorCode {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        if inner.closed {
            return COORDINATOR_NOT_AVAILABLE;
        }
        if group.is_empty() {
            return INVALID_GROUP_ID;
        }
        match inner.groups.get_mut(group) {
            Some(group) => group.heartbeat(generation, member_id, instance_id, now),
            None => UNKNOWN_MEMBER_ID,
        }
    }

    /// LeaveGroup for each of `members`: a member id and (v3+) a group
    /// instance id (v0-2 send one member; v3+ a list).
    pub fn leave(&self, group: &str, members: &[(String, Option<String>)]) -> LeaveResponse {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        let refuse = |error| LeaveResponse {
            error,
            members: Vec::new(),
        };
        if inner.closed {
            return refuse(COORDINATOR_NOT_AVAILABLE);
        }
        if group.is_empty() {
            return refuse(INVALID_GROUP_ID);
        }
        let group = inner.groups.get_mut(group);
        let members = match group {
            Some(group) => members
                .iter()
                .map(|(id, instance)| group.leave(id, instance.as_deref(), now, &self.config))
                .collect(),
            None => members
                .iter()
                .map(|(id, _)| (id.clone(), UNKNOWN_MEMBER_ID))
                .collect(),
        };
        LeaveResponse {
            error: NONE,
            members,
        }
    }

    /// Whether an OffsetCommit with this generation and member id may
    /// commit for `group`: generation -1 and an empty member id is a commit
    /// from outside group management, allowed while the group is Empty (an
    /// unknown group is created Empty, as Kafka does); otherwise the member
    /// must be in the current generation, and not between join and sync.
    pub fn check_commit(
        &self,
        group: &str,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> ErrorCode {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        if inner.closed {
            return COORDINATOR_NOT_AVAILABLE;
        }
        if let Some(group) = inner.groups.get_mut(group) {
            return group.check_commit(generation, member_id, instance_id, now);
        }
        if generation >= 0 {
            // An old generation of a group this coordinator no longer knows.
            return ILLEGAL_GENERATION;
        }
        if !member_id.is_empty() {
            return UNKNOWN_MEMBER_ID;
        }
        if !group.is_empty() {
            // No room for it is no reason to refuse the commit: it is just not listed.
            inner.group_or_create(group, self.config.groups_max);
        }
        NONE
    }

    /// ListGroups: every group, sorted by id.
    pub fn list(&self) -> Vec<GroupListing> {
        let inner = self.lock();
        let mut groups: Vec<GroupListing> = inner.groups.values().map(Group::listing).collect();
        groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        groups
    }

    /// DescribeGroups of one group; an unknown group is Dead with no members.
    pub fn describe(&self, group: &str) -> GroupDescription {
        let inner = self.lock();
        match inner.groups.get(group) {
            Some(group) => group.describe(),
            None => GroupDescription {
                group_id: group.to_string(),
                state: GroupState::Dead,
                protocol_type: String::new(),
                protocol: String::new(),
                members: Vec::new(),
            },
        }
    }

    /// Expires members past their session timeout, member ids handed out
    /// and never used, and members that did not sync; completes join phases
    /// whose time is up. The server calls it on an interval (e.g. 100 ms);
    /// deadlines are honoured to that granularity.
    pub fn tick(&self) {
        let now = self.clock.now_ms();
        let mut inner = self.lock();
        if inner.closed {
            return;
        }
        for group in inner.groups.values_mut() {
            group.tick(now, &self.config);
        }
    }

    /// Panics unless every group's invariants hold; returns `group`'s generation.
    #[cfg(test)]
    fn check_invariants(&self, group: &str) -> Option<i32> {
        let inner = self.lock();
        inner.groups.values().for_each(Group::check_invariants);
        inner.groups.get(group).map(|g| g.generation)
    }

    /// Shuts down: every waiting JoinGroup and SyncGroup is answered
    /// COORDINATOR_NOT_AVAILABLE, and so is every later call.
    pub fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        for group in inner.groups.values_mut() {
            group.close(COORDINATOR_NOT_AVAILABLE);
        }
    }
}
