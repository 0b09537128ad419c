//! `Metadata`: this node (id 0, at the address the client reached) leads
//! every partition of every topic the client may see. Unknown topics are
//! created when the server's `auto_create_topics` is on and the client
//! allows it (v4+), like the HTTP produce path does.

use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kappa_log::Topic;
use uuid::Uuid;

use super::conn::Session;
use super::{errors, Broker};
use crate::auth::Need;
use crate::node::topics::ProduceTopicError;

/// The one node's id.
pub const NODE_ID: i32 = 0;

/// A stable id for a topic (Metadata v10+ carries one): derived from its
/// name and creation time, so a topic made again under the same name gets
/// another id, as in Kafka.
pub fn topic_id(topic: &Topic) -> Uuid {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(b"kappa-topic\0");
    hash.update(topic.name().as_bytes());
    hash.update(topic.created_ms().to_le_bytes());
    let digest = hash.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// Answers a `Metadata` request.
pub async fn metadata(
    broker: &Broker,
    session: &Session,
    request: MetadataRequest,
    version: i16,
) -> MetadataResponse {
    let mut response = MetadataResponse::default();
    let mut node = MetadataResponseBroker::default();
    node.node_id = BrokerId(NODE_ID);
    node.host = StrBytes::from_string(session.advertised_host());
    node.port = i32::from(session.local.port());
    response.brokers = vec![node];
    if version >= 2 {
        response.cluster_id = Some(StrBytes::from_static_str("kappa"));
    }
    if version >= 1 {
        response.controller_id = BrokerId(NODE_ID);
    }
    response.topics = match request.topics {
        // All topics (v1+: null; v0: an empty list means all too).
        None => all_topics(broker, session, version),
        Some(list) if list.is_empty() && version == 0 => all_topics(broker, session, version),
        Some(list) => {
            let may_create = version < 4 || request.allow_auto_topic_creation;
            let mut out = Vec::with_capacity(list.len());
            for wanted in list {
                let name = match &wanted.name {
                    Some(name) => name.0.to_string(),
                    None => match find_by_id(broker, wanted.topic_id) {
                        Some(t) => t.name().to_string(),
                        None => {
                            let mut t = MetadataResponseTopic::default();
                            t.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION;
                            t.topic_id = wanted.topic_id;
                            out.push(t);
                            continue;
                        }
                    },
                };
                if !session.allows(&Need::ReadOrProduce(name.clone())) {
                    out.push(topic_error(&name, errors::TOPIC_AUTHORIZATION_FAILED));
                    continue;
                }
                match find_or_create(broker, session, &name, may_create).await {
                    Ok(topic) => out.push(describe(&topic, version)),
                    Err(code) => out.push(topic_error(&name, code)),
                }
            }
            out
        }
    };
    response
}

/// Every topic the session may see.
fn all_topics(broker: &Broker, session: &Session, version: i16) -> Vec<MetadataResponseTopic> {
    broker
        .app
        .log
        .topics()
        .iter()
        .filter(|t| session.allows(&Need::ReadOrProduce(t.name().to_string())))
        .map(|t| describe(t, version))
        .collect()
}

fn find_by_id(broker: &Broker, id: Uuid) -> Option<Arc<Topic>> {
    broker
        .app
        .log
        .topics()
        .into_iter()
        .find(|t| topic_id(t) == id)
}

/// The topic, created first if it is unknown and auto-creation is on for
/// the server and the request (and the session may produce to it: the
/// node's one rule for producers, [`crate::node::topics::for_produce`]).
pub async fn find_or_create(
    broker: &Broker,
    session: &Session,
    name: &str,
    may_create: bool,
) -> Result<Arc<Topic>, i16> {
    let create = may_create && session.allows(&Need::Produce(name.into()));
    if !create {
        return broker.app.log.topic(name).map_err(|e| errors::of_log(&e));
    }
    if let Some(topic) = crate::node::topics::existing(&broker.app, name) {
        return Ok(topic);
    }
    let (node, owned) = (broker.app.clone(), name.to_string());
    let found =
        tokio::task::spawn_blocking(move || crate::node::topics::for_produce(&node, &owned)).await;
    match found {
        Ok(Ok((topic, made))) => {
            if made {
                tracing::info!(topic = name, "topic created by a Kafka client");
            }
            Ok(topic)
        }
        Ok(Err(ProduceTopicError::Log(e))) => Err(errors::of_log(&e)),
        Ok(Err(ProduceTopicError::Unknown { .. })) => Err(errors::UNKNOWN_TOPIC_OR_PARTITION),
        Ok(Err(e @ ProduceTopicError::OverBudget { .. })) => {
            tracing::warn!(topic = name, error = %e, "Kafka auto-create refused");
            Err(errors::INVALID_PARTITIONS)
        }
        Err(_) => Err(errors::UNKNOWN_SERVER_ERROR),
    }
}

fn topic_error(name: &str, code: i16) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.error_code = code;
    t.name = Some(TopicName(StrBytes::from_string(name.to_string())));
    t
}

/// A topic's entry: every partition led by this node, in sync.
fn describe(topic: &Topic, version: i16) -> MetadataResponseTopic {
    let mut t = MetadataResponseTopic::default();
    t.name = Some(TopicName(StrBytes::from_string(topic.name().to_string())));
    t.topic_id = topic_id(topic);
    t.partitions = (0..topic.partition_count())
        .map(|p| {
            let mut part = MetadataResponsePartition::default();
            part.partition_index = p as i32;
            part.leader_id = BrokerId(NODE_ID);
            if version >= 7 {
                part.leader_epoch = 0;
            }
            part.replica_nodes = vec![BrokerId(NODE_ID)];
            part.isr_nodes = vec![BrokerId(NODE_ID)];
            part
        })
        .collect();
    t
}
