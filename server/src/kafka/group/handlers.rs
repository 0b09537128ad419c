//! The group side of each request: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, the OffsetCommit check and the descriptions, checked in the
//! order Kafka's `GroupCoordinator` checks them. Group-independent checks
//! (closed, group id, session timeout range, unknown group) are made by
//! the caller in `mod.rs`.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::codes::{
    ErrorCode, GROUP_MAX_SIZE_REACHED, ILLEGAL_GENERATION, INCONSISTENT_GROUP_PROTOCOL,
    MEMBER_ID_REQUIRED, NONE, REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER_ID,
};
use super::config::GroupConfig;
use super::member::{new_member_id, Member};
use super::state::{Group, Reply};
use super::types::{
    GroupDescription, GroupListing, GroupState, JoinRequest, JoinResponse, MemberDescription,
    SyncRequest, SyncResponse,
};

/// A millisecond count from the wire; negative counts as zero.
fn ms(value: i32) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

impl Group {
    /// JoinGroup: a new member gets an id (or MEMBER_ID_REQUIRED first),
    /// a known one rejoins; both wait for the join phase to complete.
    pub fn join(
        &mut self,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        let reply = if !self.accepts(&req.member_id, config.members_max) {
            if let Some(i) = self.member_index(&req.member_id) {
                self.remove_member(i, now, config, "group is full");
            }
            Reply::Now(JoinResponse::error("", GROUP_MAX_SIZE_REACHED))
        } else if req.member_id.is_empty() {
            self.join_new(req, now, config)
        } else {
            self.join_known(req, now, config)
        };
        self.maybe_complete_join(now);
        reply
    }

    /// Kafka's `acceptJoiningMember`: room for one more?
    fn accepts(&self, member_id: &str, members_max: usize) -> bool {
        let member = self.member_index(member_id).map(|i| &self.members[i]);
        match self.state {
            GroupState::Empty | GroupState::Dead => true,
            GroupState::PreparingRebalance => {
                member.is_some_and(|m| m.join_waiter.is_some())
                    || self
                        .members
                        .iter()
                        .filter(|m| m.join_waiter.is_some())
                        .count()
                        < members_max
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.is_some() || self.members.len() < members_max
            }
        }
    }

    /// Kafka's `supportsProtocols`: an Empty group takes any non-empty
    /// protocol type and list; otherwise the type must match and one of the
    /// protocols must be supported by every member.
    fn supports_protocols(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.state == GroupState::Empty {
            return !protocol_type.is_empty() && !protocols.is_empty();
        }
        self.protocol_type.as_deref() == Some(protocol_type)
            && protocols
                .iter()
                .any(|(name, _)| self.members.iter().all(|m| m.supports(name)))
    }

    fn join_new(
        &mut self,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinResponse::error("", INCONSISTENT_GROUP_PROTOCOL));
        }
        let id = new_member_id(&req.client_id);
        if req.require_known_member_id {
            if self.pending.len() >= config.members_max {
                return Reply::Now(JoinResponse::error("", GROUP_MAX_SIZE_REACHED));
            }
            self.pending
                .push((id.clone(), now + ms(req.session_timeout_ms)));
            return Reply::Now(JoinResponse::error(id, MEMBER_ID_REQUIRED));
        }
        self.add_member_and_rebalance(id, req, now, config)
    }

    fn join_known(
        &mut self,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinResponse::error(
                req.member_id,
                INCONSISTENT_GROUP_PROTOCOL,
            ));
        }
        if let Some(p) = self.pending.iter().position(|(id, _)| *id == req.member_id) {
            self.pending.remove(p);
            let id = req.member_id.clone();
            return self.add_member_and_rebalance(id, req, now, config);
        }
        let Some(i) = self.member_index(&req.member_id) else {
            return Reply::Now(JoinResponse::error(req.member_id, UNKNOWN_MEMBER_ID));
        };
        let same_metadata = self.members[i].protocols == req.protocols;
        match self.state {
            GroupState::PreparingRebalance => self.update_member_and_rebalance(i, req, now, config),
            // The member missed its JoinGroup answer: give it again.
            GroupState::CompletingRebalance if same_metadata => {
                Reply::Now(self.join_response(&req.member_id))
            }
            GroupState::CompletingRebalance => {
                self.update_member_and_rebalance(i, req, now, config)
            }
            // A leader's rejoin asks for a rebalance (e.g. topic metadata changed).
            GroupState::Stable if same_metadata && !self.is_leader(&req.member_id) => {
                Reply::Now(self.join_response(&req.member_id))
            }
            GroupState::Stable => self.update_member_and_rebalance(i, req, now, config),
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(JoinResponse::error(req.member_id, UNKNOWN_MEMBER_ID))
            }
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        id: String,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        let (waiter, answer) = oneshot::channel();
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        if self.leader.is_none() {
            self.leader = Some(id.clone());
        }
        if let Some(delay) = self.join_phase.as_mut().and_then(|p| p.initial.as_mut()) {
            delay.new_member_added = true;
        }
        self.members.push(Member {
            id,
            client_id: req.client_id,
            client_host: req.client_host,
            protocols: req.protocols,
            session_timeout_ms: ms(req.session_timeout_ms),
            rebalance_timeout_ms: ms(req.rebalance_timeout_ms),
            assignment: Bytes::new(),
            heartbeat_deadline_ms: now + config.new_member_join_timeout_ms,
            is_new: true,
            join_waiter: Some(waiter),
            sync_waiter: None,
        });
        self.maybe_prepare_rebalance(now, config, "member joined");
        Reply::Wait(answer)
    }

    fn update_member_and_rebalance(
        &mut self,
        i: usize,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        let (waiter, answer) = oneshot::channel();
        let member = &mut self.members[i];
        member.protocols = req.protocols;
        member.session_timeout_ms = ms(req.session_timeout_ms);
        member.rebalance_timeout_ms = ms(req.rebalance_timeout_ms);
        if let Some(old) = member.join_waiter.replace(waiter) {
            // A second JoinGroup from the same member replaces the first.
            let _ = old.send(JoinResponse::error(
                member.id.clone(),
                REBALANCE_IN_PROGRESS,
            ));
        }
        self.maybe_prepare_rebalance(now, config, "member rejoined");
        Reply::Wait(answer)
    }

    /// SyncGroup: the leader's assignment is handed out; followers wait for it.
    pub fn sync(&mut self, req: SyncRequest, now: u64) -> Reply<SyncResponse> {
        let Some(i) = self.member_index(&req.member_id) else {
            return Reply::Now(SyncResponse::error(UNKNOWN_MEMBER_ID));
        };
        if req.generation_id != self.generation {
            return Reply::Now(SyncResponse::error(ILLEGAL_GENERATION));
        }
        let type_differs = req.protocol_type.is_some() && req.protocol_type != self.protocol_type;
        let name_differs = req.protocol_name.is_some() && req.protocol_name != self.protocol_name;
        if type_differs || name_differs {
            return Reply::Now(SyncResponse::error(INCONSISTENT_GROUP_PROTOCOL));
        }
        match self.state {
            GroupState::Empty | GroupState::Dead => {
                Reply::Now(SyncResponse::error(UNKNOWN_MEMBER_ID))
            }
            GroupState::PreparingRebalance => {
                Reply::Now(SyncResponse::error(REBALANCE_IN_PROGRESS))
            }
            GroupState::CompletingRebalance => {
                let (waiter, answer) = oneshot::channel();
                if let Some(old) = self.members[i].sync_waiter.replace(waiter) {
                    let _ = old.send(SyncResponse::error(REBALANCE_IN_PROGRESS));
                }
                self.pending_sync.retain(|id| *id != req.member_id);
                if self.is_leader(&req.member_id) {
                    for member in &mut self.members {
                        member.assignment = req
                            .assignments
                            .iter()
                            .rev()
                            .find(|(id, _)| *id == member.id)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    self.propagate_assignment(now);
                }
                Reply::Wait(answer)
            }
            GroupState::Stable => {
                self.pending_sync.retain(|id| *id != req.member_id);
                let member = &mut self.members[i];
                member.heartbeat_deadline_ms = now + member.session_timeout_ms;
                Reply::Now(SyncResponse {
                    error: NONE,
                    protocol_type: self.protocol_type.clone(),
                    protocol_name: self.protocol_name.clone(),
                    assignment: member.assignment.clone(),
                })
            }
        }
    }

    /// Heartbeat: restarts the member's session; REBALANCE_IN_PROGRESS
    /// tells it to rejoin.
    pub fn heartbeat(&mut self, generation: i32, member_id: &str, now: u64) -> ErrorCode {
        let Some(i) = self.member_index(member_id) else {
            return UNKNOWN_MEMBER_ID;
        };
        if generation != self.generation {
            return ILLEGAL_GENERATION;
        }
        let member = &mut self.members[i];
        match self.state {
            GroupState::Empty | GroupState::Dead => UNKNOWN_MEMBER_ID,
            GroupState::CompletingRebalance | GroupState::Stable => {
                member.heartbeat_deadline_ms = now + member.session_timeout_ms;
                NONE
            }
            GroupState::PreparingRebalance => {
                member.heartbeat_deadline_ms = now + member.session_timeout_ms;
                REBALANCE_IN_PROGRESS
            }
        }
    }

    /// LeaveGroup for one member (removal by group instance id, with an
    /// empty member id, is not supported: UNKNOWN_MEMBER_ID).
    pub fn leave(&mut self, member_id: &str, now: u64, config: &GroupConfig) -> ErrorCode {
        if let Some(p) = self.pending.iter().position(|(id, _)| id == member_id) {
            self.pending.remove(p);
            self.maybe_complete_join(now);
            return NONE;
        }
        match self.member_index(member_id) {
            Some(i) => {
                self.remove_member(i, now, config, "member left");
                NONE
            }
            None => UNKNOWN_MEMBER_ID,
        }
    }

    /// OffsetCommit's group check (Kafka's `validateOffsetCommit` and the
    /// state rules of `doCommitOffsets`); a member's commit restarts its session.
    pub fn check_commit(&mut self, generation: i32, member_id: &str, now: u64) -> ErrorCode {
        if generation >= 0 || !member_id.is_empty() {
            let Some(i) = self.member_index(member_id) else {
                return UNKNOWN_MEMBER_ID;
            };
            if generation != self.generation {
                return ILLEGAL_GENERATION;
            }
            let member = &mut self.members[i];
            return match self.state {
                GroupState::Stable | GroupState::PreparingRebalance => {
                    member.heartbeat_deadline_ms = now + member.session_timeout_ms;
                    NONE
                }
                GroupState::CompletingRebalance => REBALANCE_IN_PROGRESS,
                GroupState::Empty | GroupState::Dead => UNKNOWN_MEMBER_ID,
            };
        }
        // A commit from outside group management: only while no one is a member.
        if self.state == GroupState::Empty {
            NONE
        } else {
            UNKNOWN_MEMBER_ID
        }
    }

    /// The group's ListGroups entry.
    pub fn listing(&self) -> GroupListing {
        GroupListing {
            group_id: self.id.clone(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            state: self.state,
        }
    }

    /// The group's DescribeGroups entry: metadata and assignments only
    /// while Stable, as Kafka.
    pub fn describe(&self) -> GroupDescription {
        let stable = self.state == GroupState::Stable;
        let protocol = if stable {
            self.protocol_name.clone().unwrap_or_default()
        } else {
            String::new()
        };
        let members = self
            .members
            .iter()
            .map(|m| MemberDescription {
                member_id: m.id.clone(),
                group_instance_id: None,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: if stable {
                    m.metadata(&protocol)
                } else {
                    Bytes::new()
                },
                assignment: if stable {
                    m.assignment.clone()
                } else {
                    Bytes::new()
                },
            })
            .collect();
        GroupDescription {
            group_id: self.id.clone(),
            state: self.state,
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol,
            members,
        }
    }
}
