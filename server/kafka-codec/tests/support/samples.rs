//! Well-formed request frames for every API and version served, with one
//! element in each array the tests' mutations reach into (a Produce also
//! carries a record batch of two records with headers).

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kappa_kafka_codec::versions::SUPPORTED;

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// A record batch (v2, uncompressed) of two records with a header each.
pub fn record_batch() -> Bytes {
    let record = |i: i64| {
        let mut headers = IndexMap::new();
        headers.insert(text("h"), Some(Bytes::from_static(b"v")));
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            // Sequences that follow the offsets keep both records in one batch.
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from_static(b"k")),
            value: Some(Bytes::from_static(b"{\"n\":1}")),
            headers,
        }
    };
    let records = [record(0), record(1)];
    let mut out = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut out,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .expect("encode a record batch");
    out.freeze()
}

/// `api`'s request with an element in each array (fields of other
/// versions left at their defaults).
fn populated(api: ApiKey) -> RequestKind {
    let topic = || TopicName(text("t"));
    match api {
        ApiKey::Produce => {
            let mut p = PartitionProduceData::default();
            p.records = Some(record_batch());
            let mut t = TopicProduceData::default();
            t.name = topic();
            t.partition_data = vec![p];
            let mut r = ProduceRequest::default();
            r.acks = -1;
            r.topic_data = vec![t];
            RequestKind::Produce(r)
        }
        ApiKey::Fetch => {
            let mut t = FetchTopic::default();
            t.topic = topic();
            t.partitions = vec![FetchPartition::default()];
            let mut r = FetchRequest::default();
            r.topics = vec![t];
            RequestKind::Fetch(r)
        }
        ApiKey::ListOffsets => {
            let mut t = ListOffsetsTopic::default();
            t.name = topic();
            t.partitions = vec![ListOffsetsPartition::default()];
            let mut r = ListOffsetsRequest::default();
            r.topics = vec![t];
            RequestKind::ListOffsets(r)
        }
        ApiKey::Metadata => {
            let mut t = MetadataRequestTopic::default();
            t.name = Some(topic());
            let mut r = MetadataRequest::default();
            r.topics = Some(vec![t]);
            RequestKind::Metadata(r)
        }
        ApiKey::OffsetCommit => {
            let mut t = OffsetCommitRequestTopic::default();
            t.name = topic();
            t.partitions = vec![OffsetCommitRequestPartition::default()];
            let mut r = OffsetCommitRequest::default();
            r.group_id = GroupId(text("g"));
            r.topics = vec![t];
            RequestKind::OffsetCommit(r)
        }
        ApiKey::OffsetFetch => {
            let mut t = OffsetFetchRequestTopic::default();
            t.name = topic();
            t.partition_indexes = vec![0];
            let mut r = OffsetFetchRequest::default();
            r.group_id = GroupId(text("g"));
            r.topics = Some(vec![t]);
            RequestKind::OffsetFetch(r)
        }
        ApiKey::JoinGroup => {
            let mut p = JoinGroupRequestProtocol::default();
            p.name = text("range");
            p.metadata = Bytes::from_static(b"\0\x01");
            let mut r = JoinGroupRequest::default();
            r.group_id = GroupId(text("g"));
            r.protocol_type = text("consumer");
            r.protocols = vec![p];
            RequestKind::JoinGroup(r)
        }
        ApiKey::SyncGroup => {
            let mut a = SyncGroupRequestAssignment::default();
            a.member_id = text("m");
            a.assignment = Bytes::from_static(b"\0\x01");
            let mut r = SyncGroupRequest::default();
            r.group_id = GroupId(text("g"));
            r.assignments = vec![a];
            RequestKind::SyncGroup(r)
        }
        ApiKey::LeaveGroup => {
            let mut m = MemberIdentity::default();
            m.member_id = text("m");
            let mut r = LeaveGroupRequest::default();
            r.group_id = GroupId(text("g"));
            r.members = vec![m];
            RequestKind::LeaveGroup(r)
        }
        ApiKey::DescribeGroups => {
            let mut r = DescribeGroupsRequest::default();
            r.groups = vec![GroupId(text("g"))];
            RequestKind::DescribeGroups(r)
        }
        ApiKey::CreateTopics => {
            let mut c = CreatableTopicConfig::default();
            c.name = text("retention.ms");
            c.value = Some(text("1000"));
            let mut a = CreatableReplicaAssignment::default();
            a.broker_ids = vec![BrokerId(0)];
            let mut t = CreatableTopic::default();
            t.name = topic();
            t.num_partitions = -1;
            t.replication_factor = -1;
            t.assignments = vec![a];
            t.configs = vec![c];
            let mut r = CreateTopicsRequest::default();
            r.topics = vec![t];
            RequestKind::CreateTopics(r)
        }
        ApiKey::DeleteTopics => {
            let mut r = DeleteTopicsRequest::default();
            r.topic_names = vec![topic()];
            RequestKind::DeleteTopics(r)
        }
        ApiKey::DescribeConfigs => {
            let mut c = DescribeConfigsResource::default();
            c.resource_type = 2;
            c.resource_name = text("t");
            c.configuration_keys = Some(vec![text("retention.ms")]);
            let mut r = DescribeConfigsRequest::default();
            r.resources = vec![c];
            RequestKind::DescribeConfigs(r)
        }
        ApiKey::SaslAuthenticate => {
            let mut r = SaslAuthenticateRequest::default();
            r.auth_bytes = Bytes::from_static(b"\0u\0kp_x");
            RequestKind::SaslAuthenticate(r)
        }
        ApiKey::SaslHandshake => {
            let mut r = SaslHandshakeRequest::default();
            r.mechanism = text("PLAIN");
            RequestKind::SaslHandshake(r)
        }
        ApiKey::FindCoordinator => {
            let mut r = FindCoordinatorRequest::default();
            r.key = text("g");
            RequestKind::FindCoordinator(r)
        }
        other => default_request(other),
    }
}

/// The frame (without its size prefix) of `request` at `version`, or
/// `None` when `request` has a field `version` does not carry.
fn frame(api: ApiKey, version: i16, request: &RequestKind) -> Option<Bytes> {
    let mut header = RequestHeader::default();
    header.request_api_key = api as i16;
    header.request_api_version = version;
    header.correlation_id = 7;
    header.client_id = Some(text("c"));
    let mut out = BytesMut::new();
    header
        .encode(&mut out, api.request_header_version(version))
        .ok()?;
    request.encode(&mut out, version).ok()?;
    Some(out.freeze())
}

/// Every API and version served, with its well-formed frame: populated
/// where the version carries every field set, else the default request.
pub fn every_served_request() -> Vec<(ApiKey, i16, Bytes)> {
    let mut out = Vec::new();
    for &(api, min, max) in SUPPORTED {
        for version in min..=max {
            let bytes = frame(api, version, &populated(api))
                .or_else(|| frame(api, version, &default_request(api)))
                .unwrap_or_else(|| panic!("{api:?} v{version}: no frame encodes"));
            out.push((api, version, bytes));
        }
    }
    out
}

/// `api`'s default request (empty arrays).
fn default_request(api: ApiKey) -> RequestKind {
    match api {
        ApiKey::Produce => RequestKind::Produce(Default::default()),
        ApiKey::Fetch => RequestKind::Fetch(Default::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(Default::default()),
        ApiKey::Metadata => RequestKind::Metadata(Default::default()),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(Default::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(Default::default()),
        ApiKey::JoinGroup => RequestKind::JoinGroup(Default::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(Default::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(Default::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(Default::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(Default::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(Default::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(Default::default()),
        ApiKey::IncrementalAlterConfigs => RequestKind::IncrementalAlterConfigs(Default::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(Default::default()),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(Default::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(Default::default()),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(Default::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(Default::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(Default::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(Default::default()),
        ApiKey::InitProducerId => RequestKind::InitProducerId(Default::default()),
        other => panic!("{other:?} is not served"),
    }
}
