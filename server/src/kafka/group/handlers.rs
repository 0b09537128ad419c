//! The group side of each request: JoinGroup, SyncGroup, Heartbeat,
//! LeaveGroup, the OffsetCommit check and the descriptions, checked in the
//! order Kafka's `GroupCoordinator` checks them. Group-independent checks
//! (closed, group id, session timeout range, unknown group) are made by
//! the caller in `mod.rs`.

use bytes::Bytes;
use tokio::sync::oneshot;

use super::codes::{
    ErrorCode, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED, ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL, MEMBER_ID_REQUIRED, NONE, REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
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
    /// a known one rejoins; both wait for the join phase to complete. A
    /// static member (with a group instance id) that joins without a member
    /// id replaces the member holding that static id.
    pub fn join(
        &mut self,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        let instance = req.group_instance_id.as_deref();
        let returning = instance.and_then(|iid| self.static_member_index(iid));
        let reply = if returning.is_none() && !self.accepts(&req.member_id, config.members_max) {
            if let Some(i) = self.member_index(&req.member_id) {
                self.remove_member(i, now, config, "group is full");
            }
            Reply::Now(JoinResponse::error("", GROUP_MAX_SIZE_REACHED))
        } else if !req.member_id.is_empty() && self.is_fenced(instance, &req.member_id) {
            Reply::Now(JoinResponse::error(req.member_id, FENCED_INSTANCE_ID))
        } else if let (true, Some(i)) = (req.member_id.is_empty(), returning) {
            self.replace_static_member(i, req, now, config)
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
        // A static member's id starts with its static id (as Kafka's), and
        // it needs no MEMBER_ID_REQUIRED round trip: its static id already
        // tells its retries apart.
        let id = new_member_id(req.group_instance_id.as_ref().unwrap_or(&req.client_id));
        if req.require_known_member_id && req.group_instance_id.is_none() {
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

    /// Kafka's `updateStaticMemberAndRebalance`: the static member at `i`
    /// restarted and joins with no member id. It gets a new member id; its
    /// old id is fenced (its waiting calls and later requests are answered
    /// FENCED_INSTANCE_ID). A Stable group whose protocols it still fits
    /// gives it the current generation at once — no rebalance, and its
    /// SyncGroup returns its earlier assignment; otherwise it rejoins as a
    /// known member would.
    fn replace_static_member(
        &mut self,
        i: usize,
        req: JoinRequest,
        now: u64,
        config: &GroupConfig,
    ) -> Reply<JoinResponse> {
        if !self.supports_protocols(&req.protocol_type, &req.protocols) {
            return Reply::Now(JoinResponse::error("", INCONSISTENT_GROUP_PROTOCOL));
        }
        let instance = req.group_instance_id.clone().unwrap_or_default();
        let new_id = new_member_id(&instance);
        let old_id = std::mem::replace(&mut self.members[i].id, new_id.clone());
        tracing::info!(group = %self.id, instance = %instance, old = %old_id, new = %new_id,
            "a static member rejoined and replaced its earlier self");
        let member = &mut self.members[i];
        member.answer_join(JoinResponse::error(old_id.clone(), FENCED_INSTANCE_ID));
        member.answer_sync(SyncResponse::error(FENCED_INSTANCE_ID));
        member.client_id = req.client_id.clone();
        member.client_host = req.client_host.clone();
        if self.leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        for pending in &mut self.pending_sync {
            if *pending == old_id {
                pending.clone_from(&new_id);
            }
        }
        let member = &mut self.members[i];
        if self.state == GroupState::Stable && member.protocols == req.protocols {
            member.session_timeout_ms = ms(req.session_timeout_ms);
            member.rebalance_timeout_ms = ms(req.rebalance_timeout_ms);
            member.heartbeat_deadline_ms = now + member.session_timeout_ms;
            return Reply::Now(self.join_response(&new_id));
        }
        self.update_member_and_rebalance(i, req, now, config)
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
            instance_id: req.group_instance_id,
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
        if self.is_fenced(req.group_instance_id.as_deref(), &req.member_id) {
            return Reply::Now(SyncResponse::error(FENCED_INSTANCE_ID));
        }
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
    pub fn heartbeat(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: u64,
    ) -> ErrorCode {
        if self.is_fenced(instance_id, member_id) {
            return FENCED_INSTANCE_ID;
        }
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

    /// LeaveGroup for one member, by member id or (v3+) by group instance
    /// id; answers the member id removed (or asked about) and the outcome.
    pub fn leave(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        now: u64,
        config: &GroupConfig,
    ) -> (String, ErrorCode) {
        if let Some(iid) = instance_id {
            // Kafka's static leave: the static id decides; a member id, if
            // given, must be the one that holds it.
            return match self.static_member_index(iid) {
                None => (member_id.to_string(), UNKNOWN_MEMBER_ID),
                Some(i) if !member_id.is_empty() && self.members[i].id != member_id => {
                    (member_id.to_string(), FENCED_INSTANCE_ID)
                }
                Some(i) => {
                    let id = self.members[i].id.clone();
                    self.remove_member(i, now, config, "static member left");
                    (id, NONE)
                }
            };
        }
        (
            member_id.to_string(),
            self.leave_dynamic(member_id, now, config),
        )
    }

    fn leave_dynamic(&mut self, member_id: &str, now: u64, config: &GroupConfig) -> ErrorCode {
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
    pub fn check_commit(
        &mut self,
        generation: i32,
        member_id: &str,
        instance_id: Option<&str>,
        now: u64,
    ) -> ErrorCode {
        if self.is_fenced(instance_id, member_id) {
            return FENCED_INSTANCE_ID;
        }
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
                group_instance_id: m.instance_id.clone(),
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
