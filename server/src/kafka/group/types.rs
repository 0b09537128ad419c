//! The coordinator's requests and answers: plain Rust types, converted
//! to and from the wire messages by the connection code.

use bytes::Bytes;

use super::codes::{ErrorCode, NONE};

/// A group's state, spelled as Kafka spells it in ListGroups and DescribeGroups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GroupState {
    /// No members (committed offsets may still exist elsewhere).
    Empty,
    /// A rebalance started: members must rejoin.
    PreparingRebalance,
    /// Everyone joined: waiting for the leader's assignment (Kafka's AwaitingSync).
    CompletingRebalance,
    /// The leader's assignment was handed out.
    Stable,
    /// The group does not exist (DescribeGroups of an unknown group).
    Dead,
}

impl GroupState {
    /// The state's name as Kafka spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A JoinGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinRequest {
    /// The group to join.
    pub group_id: String,
    /// The member's id, or empty for a member joining for the first time.
    pub member_id: String,
    /// The static member id (JoinGroup v5+, `group.instance.id`): a
    /// member that rejoins with it and no member id takes its earlier
    /// self's place (and assignment) without a rebalance.
    pub group_instance_id: Option<String>,
    /// The client's `client.id` (the prefix of a new member id).
    pub client_id: String,
    /// The client's address as DescribeGroups shows it (Kafka: `/127.0.0.1`).
    pub client_host: String,
    /// The protocol type (`consumer` for consumers, `connect` for Connect).
    pub protocol_type: String,
    /// Protocols the member supports, in its order of preference, with the
    /// member's metadata for each.
    pub protocols: Vec<(String, Bytes)>,
    /// How long the member may go without a heartbeat.
    pub session_timeout_ms: i32,
    /// How long a rebalance waits for the member to rejoin (JoinGroup v0
    /// has none: pass the session timeout, as Kafka does).
    pub rebalance_timeout_ms: i32,
    /// The request's version is 4 or more: a member without an id gets
    /// MEMBER_ID_REQUIRED and its id, and must rejoin with it.
    pub require_known_member_id: bool,
}

/// One member in the leader's JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinedMember {
    /// The member's id.
    pub member_id: String,
    /// The member's static id, if it has one.
    pub group_instance_id: Option<String>,
    /// The member's metadata for the chosen protocol.
    pub metadata: Bytes,
}

/// A JoinGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResponse {
    /// NONE, or why the member did not join.
    pub error: ErrorCode,
    /// The new generation (-1 on an error).
    pub generation_id: i32,
    /// The group's protocol type (JoinGroup v7+).
    pub protocol_type: Option<String>,
    /// The chosen protocol (`None` on an error).
    pub protocol_name: Option<String>,
    /// The leader's member id (empty on an error).
    pub leader: String,
    /// The member's id: the one assigned to a new member (also with
    /// MEMBER_ID_REQUIRED), empty when a new member failed to join.
    pub member_id: String,
    /// Every member with its metadata, for the leader only.
    pub members: Vec<JoinedMember>,
}

impl JoinResponse {
    /// An answer carrying only an error and the member id.
    pub fn error(member_id: impl Into<String>, error: ErrorCode) -> Self {
        JoinResponse {
            error,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.into(),
            members: Vec::new(),
        }
    }
}

/// A SyncGroup request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequest {
    /// The group.
    pub group_id: String,
    /// The generation the member joined.
    pub generation_id: i32,
    /// The member's id.
    pub member_id: String,
    /// The member's static id (SyncGroup v3+), checked against fencing.
    pub group_instance_id: Option<String>,
    /// SyncGroup v5+: the protocol type the member expects, checked if set.
    pub protocol_type: Option<String>,
    /// SyncGroup v5+: the protocol name the member expects, checked if set.
    pub protocol_name: Option<String>,
    /// The leader's assignment per member id (empty from followers).
    pub assignments: Vec<(String, Bytes)>,
}

/// A SyncGroup answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResponse {
    /// NONE, or why there is no assignment.
    pub error: ErrorCode,
    /// The group's protocol type (SyncGroup v5+; `None` on an error).
    pub protocol_type: Option<String>,
    /// The group's protocol (SyncGroup v5+; `None` on an error).
    pub protocol_name: Option<String>,
    /// The member's assignment as the leader wrote it (empty on an error).
    pub assignment: Bytes,
}

impl SyncResponse {
    /// An answer carrying only an error.
    pub fn error(error: ErrorCode) -> Self {
        SyncResponse {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A LeaveGroup answer: a top-level error and one per member asked about.
/// LeaveGroup v0-2 has one member and one error: use [`LeaveResponse::single_error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaveResponse {
    /// NONE, or an error for the whole request (then `members` is empty).
    pub error: ErrorCode,
    /// Each member asked about, in the request's order: its member id (the
    /// one found for a leave by group instance id) with NONE or why it was
    /// not removed.
    pub members: Vec<(String, ErrorCode)>,
}

impl LeaveResponse {
    /// The one error of LeaveGroup v0-2: the top-level error, else the
    /// first member's error (as Kafka's `LeaveGroupResponse` computes it).
    pub fn single_error(&self) -> ErrorCode {
        if self.error != NONE {
            return self.error;
        }
        self.members
            .iter()
            .map(|(_, error)| *error)
            .find(|error| *error != NONE)
            .unwrap_or(NONE)
    }
}

/// One group in ListGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    /// The group id.
    pub group_id: String,
    /// Its protocol type (empty if no member ever joined).
    pub protocol_type: String,
    /// Its state.
    pub state: GroupState,
}

/// One member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberDescription {
    /// The member's id.
    pub member_id: String,
    /// The member's static id, if it has one.
    pub group_instance_id: Option<String>,
    /// The client's `client.id`.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Its metadata for the group's protocol (empty unless Stable, as Kafka).
    pub metadata: Bytes,
    /// Its assignment (empty unless Stable, as Kafka).
    pub assignment: Bytes,
}

/// A group in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    /// The group id.
    pub group_id: String,
    /// Its state (Dead for an unknown group, with nothing else).
    pub state: GroupState,
    /// Its protocol type (empty if none).
    pub protocol_type: String,
    /// The chosen protocol while Stable, else empty (as Kafka).
    pub protocol: String,
    /// Its members.
    pub members: Vec<MemberDescription>,
}
