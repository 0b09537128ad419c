//! One group's state machine: the transitions between Empty,
//! PreparingRebalance, CompletingRebalance and Stable, and the clock-driven
//! expiries (sessions, join phases, syncs, member ids handed out). The
//! request handlers that drive it are in `handlers.rs`.
//!
//! Invariants: a join phase exists exactly while PreparingRebalance; only
//! CompletingRebalance has sync waiters; join waiters exist only during a
//! join phase (a member's waiter is answered when the phase completes or the
//! member is removed); the leader, if any, is a member.

use bytes::Bytes;
use tokio::sync::oneshot;
use tracing::info;

use super::codes::{ErrorCode, NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID};
use super::config::GroupConfig;
use super::member::Member;
use super::types::{GroupState, JoinResponse, JoinedMember, SyncResponse};
use super::REBALANCES;

/// An answer available now, or one to wait for.
#[derive(Debug)]
pub(super) enum Reply<T> {
    /// The answer.
    Now(T),
    /// The answer arrives here when the phase it waits for ends.
    Wait(oneshot::Receiver<T>),
}

/// The join phase of a rebalance (PreparingRebalance).
#[derive(Debug)]
pub(super) struct JoinPhase {
    /// When it completes even if not everyone rejoined.
    pub deadline_ms: u64,
    /// Set for a group that was Empty: the phase only completes at its
    /// deadline, extended while new members keep arriving.
    pub initial: Option<InitialDelay>,
}

/// Kafka's `InitialDelayedJoin`: the wait of a new group for more members.
#[derive(Debug)]
pub(super) struct InitialDelay {
    /// How much longer the phase may still be extended.
    pub remaining_ms: u64,
    /// A member joined since the deadline was last set.
    pub new_member_added: bool,
}

/// A consumer group.
#[derive(Debug)]
pub(super) struct Group {
    /// The group id.
    pub id: String,
    /// Its state (never Dead: an unknown group is simply absent).
    pub state: GroupState,
    /// The generation: bumped each time a join phase completes.
    pub generation: i32,
    /// Set by the first member to join an Empty group; kept when it empties.
    pub protocol_type: Option<String>,
    /// The protocol chosen for the current generation (`None` when Empty).
    pub protocol_name: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// Members in the order they joined.
    pub members: Vec<Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pub pending: Vec<(String, u64)>,
    /// Members of this generation that have not sent SyncGroup yet.
    pub pending_sync: Vec<String>,
    /// The running join phase (exactly while PreparingRebalance).
    pub join_phase: Option<JoinPhase>,
    /// When members still in `pending_sync` are removed.
    pub sync_deadline_ms: Option<u64>,
}

impl Group {
    /// A new Empty group at generation 0.
    pub fn new(id: String) -> Self {
        Group {
            id,
            state: GroupState::Empty,
            generation: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: Vec::new(),
            pending: Vec::new(),
            pending_sync: Vec::new(),
            join_phase: None,
            sync_deadline_ms: None,
        }
    }

    /// The position of member `id`.
    pub fn member_index(&self, id: &str) -> Option<usize> {
        self.members.iter().position(|m| m.id == id)
    }

    /// The index of the member with static id `instance_id`.
    pub fn static_member_index(&self, instance_id: &str) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.instance_id.as_deref() == Some(instance_id))
    }

    /// Kafka's `isStaticMemberFenced`: a request naming `instance_id` comes
    /// from a member that was replaced when that static id now belongs to
    /// another member id.
    pub fn is_fenced(&self, instance_id: Option<&str>, member_id: &str) -> bool {
        instance_id
            .and_then(|iid| self.static_member_index(iid))
            .is_some_and(|i| self.members[i].id != member_id)
    }

    /// Whether `id` leads the group.
    pub fn is_leader(&self, id: &str) -> bool {
        self.leader.as_deref() == Some(id)
    }

    /// The group's rebalance timeout: the largest of its members'.
    fn rebalance_timeout_ms(&self) -> u64 {
        self.members
            .iter()
            .map(|m| m.rebalance_timeout_ms)
            .max()
            .unwrap_or(0)
    }

    /// Starts a rebalance unless one is already preparing.
    pub fn maybe_prepare_rebalance(&mut self, now: u64, config: &GroupConfig, reason: &str) {
        if matches!(
            self.state,
            GroupState::Empty | GroupState::Stable | GroupState::CompletingRebalance
        ) {
            self.prepare_rebalance(now, config, reason);
        }
    }

    /// Starts a join phase: members waiting for the leader's sync are told
    /// to rejoin, and everyone must rejoin before the rebalance timeout.
    pub fn prepare_rebalance(&mut self, now: u64, config: &GroupConfig, reason: &str) {
        if self.state == GroupState::CompletingRebalance {
            self.reset_assignments(REBALANCE_IN_PROGRESS, now);
        }
        self.sync_deadline_ms = None;
        let timeout = self.rebalance_timeout_ms();
        let delay = config.initial_rebalance_delay_ms;
        self.join_phase = Some(if self.state == GroupState::Empty && delay > 0 {
            JoinPhase {
                deadline_ms: now + delay,
                initial: Some(InitialDelay {
                    remaining_ms: timeout.saturating_sub(delay),
                    new_member_added: false,
                }),
            }
        } else {
            JoinPhase {
                deadline_ms: now + timeout,
                initial: None,
            }
        });
        self.state = GroupState::PreparingRebalance;
        metrics::counter!(REBALANCES, "group" => self.id.clone()).increment(1);
        info!(group = %self.id, generation = self.generation, reason, "rebalance started");
        self.maybe_complete_join(now);
    }

    /// Completes the join phase if every member rejoined and no handed-out
    /// member id is still expected (never early for a new group's delay).
    pub fn maybe_complete_join(&mut self, now: u64) {
        if self.state != GroupState::PreparingRebalance {
            return;
        }
        if !matches!(&self.join_phase, Some(phase) if phase.initial.is_none()) {
            return;
        }
        if self.pending.is_empty() && self.members.iter().all(|m| m.join_waiter.is_some()) {
            self.complete_join(now);
        }
    }

    /// Ends the join phase: members that did not rejoin are removed, the
    /// generation advances, a protocol is chosen and every waiting member
    /// gets its JoinGroup answer (the leader with the member list).
    fn complete_join(&mut self, now: u64) {
        self.join_phase = None;
        let (joined, gone): (Vec<Member>, Vec<Member>) = std::mem::take(&mut self.members)
            .into_iter()
            .partition(|m| m.join_waiter.is_some());
        self.members = joined;
        for member in gone {
            info!(group = %self.id, member = %member.id, "member removed: it did not rejoin in time");
        }
        // Kafka's `maybeElectNewJoinedLeader`: the lead passes on if the leader is gone.
        let leader_gone = self
            .leader
            .as_deref()
            .is_none_or(|l| self.member_index(l).is_none());
        if leader_gone {
            self.leader = self.members.first().map(|m| m.id.clone());
        }
        self.generation += 1;
        self.pending_sync.clear();
        self.sync_deadline_ms = None;
        if self.members.is_empty() {
            self.protocol_name = None;
            self.state = GroupState::Empty;
            info!(group = %self.id, generation = self.generation, "group is empty");
            return;
        }
        self.protocol_name = Some(self.select_protocol());
        self.state = GroupState::CompletingRebalance;
        self.pending_sync = self.members.iter().map(|m| m.id.clone()).collect();
        self.sync_deadline_ms = Some(now + self.rebalance_timeout_ms());
        let answers: Vec<JoinResponse> = self
            .members
            .iter()
            .map(|m| self.join_response(&m.id))
            .collect();
        for (member, answer) in self.members.iter_mut().zip(answers) {
            member.answer_join(answer);
            member.heartbeat_deadline_ms = now + member.session_timeout_ms;
            member.is_new = false;
        }
        info!(
            group = %self.id,
            generation = self.generation,
            members = self.members.len(),
            protocol = self.protocol_name.as_deref().unwrap_or(""),
            "join phase complete"
        );
    }

    /// The protocol every member supports that most members prefer (Kafka:
    /// each member votes for its first choice among the common ones; ties go
    /// to the first member's preference).
    fn select_protocol(&self) -> String {
        let Some(first) = self.members.first() else {
            return String::new();
        };
        let candidates: Vec<&str> = first
            .protocols
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| self.members.iter().all(|m| m.supports(name)))
            .collect();
        let mut votes = vec![0usize; candidates.len()];
        for member in &self.members {
            if let Some(choice) = member.vote(&candidates) {
                if let Some(i) = candidates.iter().position(|c| *c == choice) {
                    votes[i] += 1;
                }
            }
        }
        let mut best = 0;
        for (i, count) in votes.iter().enumerate() {
            if *count > votes[best] {
                best = i;
            }
        }
        // Joins are refused unless a protocol stays common to all members.
        debug_assert!(
            !candidates.is_empty(),
            "group {} has no common protocol",
            self.id
        );
        candidates
            .get(best)
            .map(|c| c.to_string())
            .unwrap_or_default()
    }

    /// The current generation's JoinGroup answer for member `id`; the
    /// leader's lists every member with its metadata for the chosen protocol.
    pub fn join_response(&self, id: &str) -> JoinResponse {
        let protocol = self.protocol_name.clone().unwrap_or_default();
        let members = if self.is_leader(id) {
            self.members
                .iter()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        };
        JoinResponse {
            error: NONE,
            generation_id: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: id.to_string(),
            members,
        }
    }

    /// Answers every waiting SyncGroup with the member's assignment
    /// (the leader's sync arrived); their sessions restart now.
    pub fn propagate_assignment(&mut self, now: u64) {
        for member in &mut self.members {
            let answer = SyncResponse {
                error: NONE,
                protocol_type: self.protocol_type.clone(),
                protocol_name: self.protocol_name.clone(),
                assignment: member.assignment.clone(),
            };
            if member.answer_sync(answer) {
                member.heartbeat_deadline_ms = now + member.session_timeout_ms;
            }
        }
    }

    /// Clears every assignment and answers waiting SyncGroups with `error`.
    fn reset_assignments(&mut self, error: ErrorCode, now: u64) {
        for member in &mut self.members {
            member.assignment = Bytes::new();
            if member.answer_sync(SyncResponse::error(error)) {
                member.heartbeat_deadline_ms = now + member.session_timeout_ms;
            }
        }
    }

    /// Takes member `i` out of the group, answering whatever it waits for
    /// with UNKNOWN_MEMBER_ID, and hands the lead to the first member left.
    fn detach_member(&mut self, i: usize) -> Member {
        let mut member = self.members.remove(i);
        member.answer_join(JoinResponse::error("", UNKNOWN_MEMBER_ID));
        member.answer_sync(SyncResponse::error(UNKNOWN_MEMBER_ID));
        self.pending_sync.retain(|id| *id != member.id);
        if self.is_leader(&member.id) {
            self.leader = self.members.first().map(|m| m.id.clone());
        }
        member
    }

    /// Removes member `i` and lets the group react: a rebalance if it was
    /// settled, or a join phase that may now be complete.
    pub fn remove_member(&mut self, i: usize, now: u64, config: &GroupConfig, reason: &str) {
        let member = self.detach_member(i);
        info!(group = %self.id, member = %member.id, reason, "member removed");
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.maybe_prepare_rebalance(now, config, reason)
            }
            GroupState::PreparingRebalance => self.maybe_complete_join(now),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// Applies every deadline that passed by `now`.
    pub fn tick(&mut self, now: u64, config: &GroupConfig) {
        let pending_before = self.pending.len();
        self.pending.retain(|(_, deadline)| *deadline > now);
        if self.pending.len() != pending_before {
            self.maybe_complete_join(now);
        }
        while let Some(i) = self
            .members
            .iter()
            .position(|m| m.heartbeat_deadline_ms <= now && !m.waiting_keeps_alive())
        {
            self.remove_member(i, now, config, "session timed out");
        }
        self.tick_join_phase(now, config);
        self.tick_sync(now, config);
    }

    /// Completes the join phase at its deadline, or extends a new group's
    /// delay when members arrived during it.
    fn tick_join_phase(&mut self, now: u64, config: &GroupConfig) {
        let Some(phase) = &mut self.join_phase else {
            return;
        };
        if phase.deadline_ms > now {
            return;
        }
        match &mut phase.initial {
            Some(delay) if delay.new_member_added && delay.remaining_ms > 0 => {
                let step = config.initial_rebalance_delay_ms.min(delay.remaining_ms);
                delay.remaining_ms -= step;
                delay.new_member_added = false;
                phase.deadline_ms = now + step;
            }
            _ => self.complete_join(now),
        }
    }

    /// Removes members that did not send SyncGroup within the rebalance
    /// timeout after the join phase, and starts a new rebalance.
    fn tick_sync(&mut self, now: u64, config: &GroupConfig) {
        if !matches!(self.sync_deadline_ms, Some(deadline) if deadline <= now) {
            return;
        }
        self.sync_deadline_ms = None;
        if !matches!(
            self.state,
            GroupState::CompletingRebalance | GroupState::Stable
        ) || self.pending_sync.is_empty()
        {
            return;
        }
        for id in std::mem::take(&mut self.pending_sync) {
            if let Some(i) = self.member_index(&id) {
                self.detach_member(i);
                info!(group = %self.id, member = %id, "member removed: no SyncGroup in time");
            }
        }
        self.prepare_rebalance(now, config, "members did not sync in time");
    }

    /// Answers every waiter with `error` (the coordinator is closing).
    pub fn close(&mut self, error: ErrorCode) {
        for member in &mut self.members {
            member.answer_join(JoinResponse::error(member.id.clone(), error));
            member.answer_sync(SyncResponse::error(error));
        }
    }

    /// Whether the group may be forgotten to make room: Empty and expecting no one.
    pub fn is_evictable(&self) -> bool {
        self.state == GroupState::Empty && self.members.is_empty() && self.pending.is_empty()
    }
}

#[cfg(test)]
impl Group {
    /// Panics unless the module's invariants hold.
    pub fn check_invariants(&self) {
        let id = &self.id;
        assert_ne!(
            self.state,
            GroupState::Dead,
            "{id}: a kept group is never Dead"
        );
        assert_eq!(
            self.join_phase.is_some(),
            self.state == GroupState::PreparingRebalance,
            "{id}: a join phase exists exactly while preparing"
        );
        match &self.leader {
            Some(leader) => assert!(
                self.member_index(leader).is_some(),
                "{id}: leader is a member"
            ),
            None => assert!(self.members.is_empty(), "{id}: members without a leader"),
        }
        if self.state == GroupState::Empty {
            assert!(self.members.is_empty(), "{id}: Empty with members");
        }
        for member in &self.members {
            if member.join_waiter.is_some() {
                assert_eq!(
                    self.state,
                    GroupState::PreparingRebalance,
                    "{id}: join waiter"
                );
            }
            if member.sync_waiter.is_some() {
                assert_eq!(
                    self.state,
                    GroupState::CompletingRebalance,
                    "{id}: sync waiter"
                );
            }
            if matches!(
                self.state,
                GroupState::CompletingRebalance | GroupState::Stable
            ) {
                assert!(!member.is_new, "{id}: new member in a settled group");
            }
        }
        for pending in &self.pending_sync {
            assert!(
                self.member_index(pending).is_some(),
                "{id}: pending sync of a non-member"
            );
        }
        let mut ids: Vec<&str> = self.members.iter().map(|m| m.id.as_str()).collect();
        ids.extend(self.pending.iter().map(|(p, _)| p.as_str()));
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            self.members.len() + self.pending.len(),
            "{id}: duplicate ids"
        );
        let mut instances: Vec<&str> = self
            .members
            .iter()
            .filter_map(|m| m.instance_id.as_deref())
            .collect();
        let statics = instances.len();
        instances.sort_unstable();
        instances.dedup();
        assert_eq!(
            instances.len(),
            statics,
            "{id}: two members share a static id"
        );
    }
}
