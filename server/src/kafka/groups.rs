//! Consumer groups over the Kafka protocol: `FindCoordinator` (this node),
//! the classic membership APIs (`JoinGroup`, `SyncGroup`, `Heartbeat`,
//! `LeaveGroup`, `ListGroups`, `DescribeGroups`) answered by
//! [`super::group::Coordinator`], and `OffsetCommit` / `OffsetFetch` on the
//! log's offsets store — the one the HTTP groups API and `/metrics` read,
//! so a Kafka consumer group's position and lag show there too.
//!
//! Grants (with `auth = "tokens"`): `group:<group>` for membership and
//! commits, plus `read:<topic>` for committing or fetching a topic's offsets.
//! Commit metadata strings are not stored (fetched back as null).

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeGroupsRequest, DescribeGroupsResponse, FindCoordinatorRequest,
    FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest,
    JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest,
    OffsetFetchResponse, SyncGroupRequest, SyncGroupResponse, TopicName,
};
use kappa_log::LogError;

use super::conn::Session;
use super::group;
use super::metadata::NODE_ID;
use super::{errors, text, Broker};
use crate::auth::Need;

fn may_group(session: &Session, group: &str) -> bool {
    session.allows(&Need::Group(group.to_string()))
}

/// `FindCoordinator`: this node coordinates every group (and would every
/// transaction, were they served).
pub fn find_coordinator(
    session: &Session,
    request: FindCoordinatorRequest,
    _version: i16,
) -> FindCoordinatorResponse {
    let mut response = FindCoordinatorResponse::default();
    if request.key_type == 0 && !may_group(session, request.key.as_str()) {
        response.error_code = errors::GROUP_AUTHORIZATION_FAILED;
        response.node_id = BrokerId(-1);
        response.port = -1;
        return response;
    }
    response.node_id = BrokerId(NODE_ID);
    response.host = text(session.advertised_host());
    response.port = i32::from(session.local.port());
    response
}

/// `JoinGroup`: waits until the group's join phase completes.
pub async fn join(
    broker: &Broker,
    session: &Session,
    request: JoinGroupRequest,
    version: i16,
) -> JoinGroupResponse {
    let mut response = JoinGroupResponse::default();
    response.member_id = request.member_id.clone();
    response.generation_id = -1;
    let group_id = request.group_id.0.to_string();
    if !may_group(session, &group_id) {
        response.error_code = errors::GROUP_AUTHORIZATION_FAILED;
        return response;
    }
    let joined = broker
        .groups
        .join(group::JoinRequest {
            group_id,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.map(|i| i.to_string()),
            client_id: session.client_id.clone(),
            client_host: session.peer.ip().to_string(),
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .into_iter()
                .map(|p| (p.name.to_string(), p.metadata))
                .collect(),
            session_timeout_ms: request.session_timeout_ms,
            // v0 has no rebalance timeout: the session timeout serves.
            rebalance_timeout_ms: if version >= 1 {
                request.rebalance_timeout_ms
            } else {
                request.session_timeout_ms
            },
            require_known_member_id: version >= 4,
        })
        .await;
    response.error_code = joined.error;
    response.generation_id = joined.generation_id;
    if version >= 7 {
        response.protocol_type = joined.protocol_type.map(text);
    }
    response.protocol_name = joined.protocol_name.map(text);
    response.leader = text(joined.leader);
    response.member_id = text(joined.member_id);
    response.members = joined
        .members
        .into_iter()
        .map(|m| {
            let mut member = JoinGroupResponseMember::default();
            member.member_id = text(m.member_id);
            member.group_instance_id = m.group_instance_id.map(text);
            member.metadata = m.metadata;
            member
        })
        .collect();
    response
}

/// `SyncGroup`: the leader hands out assignments; everyone waits for its own.
pub async fn sync(
    broker: &Broker,
    session: &Session,
    request: SyncGroupRequest,
    version: i16,
) -> SyncGroupResponse {
    let mut response = SyncGroupResponse::default();
    let group_id = request.group_id.0.to_string();
    if !may_group(session, &group_id) {
        response.error_code = errors::GROUP_AUTHORIZATION_FAILED;
        return response;
    }
    let synced = broker
        .groups
        .sync(group::SyncRequest {
            group_id,
            generation_id: request.generation_id,
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.map(|i| i.to_string()),
            protocol_type: request.protocol_type.map(|p| p.to_string()),
            protocol_name: request.protocol_name.map(|p| p.to_string()),
            assignments: request
                .assignments
                .into_iter()
                .map(|a| (a.member_id.to_string(), a.assignment))
                .collect(),
        })
        .await;
    response.error_code = synced.error;
    if version >= 5 {
        response.protocol_type = synced.protocol_type.map(text);
        response.protocol_name = synced.protocol_name.map(text);
    }
    response.assignment = synced.assignment;
    response
}

/// `Heartbeat`: keeps the member's session; tells it when to rejoin.
pub fn heartbeat(
    broker: &Broker,
    session: &Session,
    request: HeartbeatRequest,
) -> HeartbeatResponse {
    let mut response = HeartbeatResponse::default();
    let group_id = request.group_id.0.to_string();
    response.error_code = if may_group(session, &group_id) {
        broker.groups.heartbeat(
            &group_id,
            request.generation_id,
            request.member_id.as_str(),
            request.group_instance_id.as_deref(),
        )
    } else {
        errors::GROUP_AUTHORIZATION_FAILED
    };
    response
}

/// `LeaveGroup`: one member (v0–v2) or a list (v3+).
pub fn leave(broker: &Broker, session: &Session, request: LeaveGroupRequest) -> LeaveGroupResponse {
    let mut response = LeaveGroupResponse::default();
    let group_id = request.group_id.0.to_string();
    if !may_group(session, &group_id) {
        response.error_code = errors::GROUP_AUTHORIZATION_FAILED;
        return response;
    }
    let listed = !request.members.is_empty();
    let asked: Vec<(String, Option<String>)> = if listed {
        request
            .members
            .iter()
            .map(|m| {
                let instance = m.group_instance_id.as_ref().map(|i| i.to_string());
                (m.member_id.to_string(), instance)
            })
            .collect()
    } else {
        vec![(request.member_id.to_string(), None)]
    };
    let results = broker.groups.leave(&group_id, &asked);
    response.error_code = results.error;
    if listed {
        response.members = results
            .members
            .iter()
            .zip(&asked)
            .map(|((id, code), (_, instance))| {
                let mut m = MemberResponse::default();
                m.member_id = text(id.clone());
                m.group_instance_id = instance.clone().map(text);
                m.error_code = *code;
                m
            })
            .collect();
    } else {
        response.error_code = results.single_error();
    }
    response
}

/// `ListGroups`: the groups the session may see, with their state —
/// also those that have committed offsets but no members here.
pub fn list(
    broker: &Broker,
    session: &Session,
    request: ListGroupsRequest,
    version: i16,
) -> ListGroupsResponse {
    let mut response = ListGroupsResponse::default();
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_string())
        .collect();
    // Groups the coordinator knows, then those that only committed offsets
    // (over HTTP, or over Kafka before a restart): Empty, no protocol.
    let mut groups = broker.groups.list();
    for name in broker.app.log.groups() {
        if !groups.iter().any(|g| g.group_id == name) {
            groups.push(group::GroupListing {
                group_id: name,
                protocol_type: String::new(),
                state: group::GroupState::Empty,
            });
        }
    }
    response.groups = groups
        .into_iter()
        .filter(|g| may_group(session, &g.group_id))
        .filter(|g| {
            states.is_empty()
                || states
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(g.state.as_str()))
        })
        .map(|g| {
            let mut listed = ListedGroup::default();
            listed.group_id = GroupId(text(g.group_id));
            listed.protocol_type = text(g.protocol_type);
            if version >= 4 {
                listed.group_state = text(g.state.as_str());
            }
            listed
        })
        .collect();
    response
}

/// `DescribeGroups`: state, protocol and members of each group.
pub fn describe(
    broker: &Broker,
    session: &Session,
    request: DescribeGroupsRequest,
) -> DescribeGroupsResponse {
    let mut response = DescribeGroupsResponse::default();
    for id in request.groups {
        let name = id.0.to_string();
        let mut described = DescribedGroup::default();
        described.group_id = id;
        if !may_group(session, &name) {
            described.error_code = errors::GROUP_AUTHORIZATION_FAILED;
            response.groups.push(described);
            continue;
        }
        let d = broker.groups.describe(&name);
        described.group_state = text(d.state.as_str());
        described.protocol_type = text(d.protocol_type);
        described.protocol_data = text(d.protocol);
        described.members = d
            .members
            .into_iter()
            .map(|m| {
                let mut member = DescribedGroupMember::default();
                member.member_id = text(m.member_id);
                member.group_instance_id = m.group_instance_id.map(text);
                member.client_id = text(m.client_id);
                member.client_host = text(m.client_host);
                member.member_metadata = m.metadata;
                member.member_assignment = m.assignment;
                member
            })
            .collect();
        response.groups.push(described);
    }
    response
}

/// `OffsetCommit`: checks the member's generation (a simple commit with
/// generation -1 and no member is allowed while the group has no members),
/// then commits each topic's offsets to the log's offsets store (fsynced).
pub async fn offset_commit(
    broker: &Broker,
    session: &Session,
    request: OffsetCommitRequest,
) -> OffsetCommitResponse {
    let mut response = OffsetCommitResponse::default();
    let group_id = request.group_id.0.to_string();
    let group_code = if !may_group(session, &group_id) {
        errors::GROUP_AUTHORIZATION_FAILED
    } else {
        broker.groups.check_commit(
            &group_id,
            request.generation_id_or_member_epoch,
            request.member_id.as_str(),
            request.group_instance_id.as_deref(),
        )
    };
    for topic in request.topics {
        let name = topic.name.0.to_string();
        let mut out = OffsetCommitResponseTopic::default();
        out.name = topic.name.clone();
        let may_read = session.allows(&Need::Read(name.clone()));
        let code = if group_code != errors::NONE {
            group_code
        } else if !may_read {
            errors::TOPIC_AUTHORIZATION_FAILED
        } else {
            let offsets: Vec<(u32, u64)> = topic
                .partitions
                .iter()
                .filter(|p| p.partition_index >= 0 && p.committed_offset >= 0)
                .map(|p| (p.partition_index as u32, p.committed_offset as u64))
                .collect();
            let (log, group, owned) = (broker.app.log.clone(), group_id.clone(), name.clone());
            let committed =
                tokio::task::spawn_blocking(move || log.commit_offsets(&group, &owned, &offsets))
                    .await;
            match committed {
                Ok(Ok(())) => errors::NONE,
                Ok(Err(LogError::InvalidGroupName { .. })) => errors::INVALID_GROUP_ID,
                Ok(Err(e)) => errors::of_log(&e),
                Err(_) => errors::UNKNOWN_SERVER_ERROR,
            }
        };
        out.partitions = topic
            .partitions
            .iter()
            .map(|p| {
                let mut part = OffsetCommitResponsePartition::default();
                part.partition_index = p.partition_index;
                part.error_code = code;
                part
            })
            .collect();
        response.topics.push(out);
    }
    response
}

/// `OffsetFetch` (one group, v1–v7): the committed offsets of the listed
/// partitions (-1 where none), or of every committed partition when the
/// topic list is null.
pub fn offset_fetch(
    broker: &Broker,
    session: &Session,
    request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    let mut response = OffsetFetchResponse::default();
    let group_id = request.group_id.0.to_string();
    if !may_group(session, &group_id) {
        if version >= 2 {
            response.error_code = errors::GROUP_AUTHORIZATION_FAILED;
        }
        return response;
    }
    let committed = broker.app.log.committed(&group_id);
    let offset_of = |topic: &str, partition: i32| {
        committed
            .iter()
            .find(|c| c.topic == topic && c.partition as i32 == partition)
            .map_or(-1, |c| c.offset as i64)
    };
    let may_read = |topic: &str| session.allows(&Need::Read(topic.to_string()));
    let wanted: Vec<(String, Vec<i32>)> = match request.topics {
        Some(topics) => topics
            .into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect(),
        None => {
            let mut all: Vec<(String, Vec<i32>)> = Vec::new();
            for c in committed.iter().filter(|c| may_read(&c.topic)) {
                match all.iter_mut().find(|(t, _)| *t == c.topic) {
                    Some((_, parts)) => parts.push(c.partition as i32),
                    None => all.push((c.topic.clone(), vec![c.partition as i32])),
                }
            }
            all
        }
    };
    for (topic, partitions) in wanted {
        let mut out = OffsetFetchResponseTopic::default();
        out.name = TopicName(text(topic.clone()));
        let allowed = may_read(&topic);
        out.partitions = partitions
            .into_iter()
            .map(|p| {
                let mut part = OffsetFetchResponsePartition::default();
                part.partition_index = p;
                part.committed_leader_epoch = -1;
                if allowed {
                    part.committed_offset = offset_of(&topic, p);
                } else {
                    part.committed_offset = -1;
                    part.error_code = errors::TOPIC_AUTHORIZATION_FAILED;
                }
                part
            })
            .collect();
        response.topics.push(out);
    }
    response
}
