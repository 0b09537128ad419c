//! Topics as producers meet them: a produce to an unknown topic creates it
//! when `auto_create_topics` is on, within `auto_create_max_partitions`
//! partitions in use. The one rule for every protocol: `POST
//! /v1/topics/{topic}/records` and a Kafka `Produce` or `Metadata` with
//! `allow_auto_topic_creation` both come here.

use std::sync::Arc;

use kappa_log::{Log, LogError, Topic};

use super::AppState;

/// Why a producer's topic could not be had.
#[derive(Debug, thiserror::Error)]
pub enum ProduceTopicError {
    /// The topic does not exist and auto-creation is off.
    #[error(
        "topic {name:?} does not exist: create it first (POST /v1/topics, or kappa topics \
         create {name}), or start the server with auto_create_topics = true \
         (--auto-create-topics true) to create topics on first produce"
    )]
    Unknown {
        /// The topic asked for.
        name: String,
    },
    /// Creating it would put more partitions in use than the budget allows.
    #[error(
        "topic {name:?} does not exist, and auto-creating it would exceed \
         auto_create_max_partitions ({budget}; {in_use} partitions in use): create it with \
         POST /v1/topics"
    )]
    OverBudget {
        /// The topic asked for.
        name: String,
        /// `auto_create_max_partitions`.
        budget: u32,
        /// Partitions of every topic now.
        in_use: u32,
    },
    /// The log refused: an invalid name, a full disk, ...
    #[error(transparent)]
    Log(#[from] LogError),
}

/// The topic `name` if it exists: the producers' fast path, answered on
/// the async worker (a map lookup); only [`for_produce`]'s creation needs
/// the blocking pool — a trip there on every produce of one record cost
/// more than half the throughput of 32 connections producing one record
/// per request (BENCHMARKS.md).
pub fn existing(node: &AppState, name: &str) -> Option<Arc<Topic>> {
    node.log.topic(name).ok()
}

/// The topic `name` for a producer, created with the server's defaults if
/// it is unknown and auto-creation is on; true if this call created it.
/// Blocking (a creation writes and syncs files): call it off the async
/// workers.
pub fn for_produce(node: &AppState, name: &str) -> Result<(Arc<Topic>, bool), ProduceTopicError> {
    kappa_log::validate_topic_name(name)?;
    match node.log.topic(name) {
        Ok(t) => Ok((t, false)),
        Err(LogError::UnknownTopic(_)) if node.config.auto_create_topics => auto_create(
            &node.log,
            name,
            node.config.topic_defaults(),
            node.config.auto_create_max_partitions,
        ),
        Err(LogError::UnknownTopic(_)) => Err(ProduceTopicError::Unknown { name: name.into() }),
        Err(e) => Err(e.into()),
    }
}

/// Creates `name` unless that would put more than `budget` partitions in
/// use; true if this call created it. Auto-creations run one at a time so
/// that the budget holds.
fn auto_create(
    log: &Log,
    name: &str,
    config: kappa_log::TopicConfig,
    budget: u32,
) -> Result<(Arc<Topic>, bool), ProduceTopicError> {
    static AUTO_CREATE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = AUTO_CREATE.lock().unwrap_or_else(|e| e.into_inner());
    if let Ok(t) = log.topic(name) {
        return Ok((t, false));
    }
    let in_use: u32 = log.topics().iter().map(|t| t.partition_count()).sum();
    if in_use + config.partitions > budget {
        return Err(ProduceTopicError::OverBudget {
            name: name.into(),
            budget,
            in_use,
        });
    }
    match log.create_topic(name, config) {
        Ok(t) => {
            tracing::info!(topic = name, "topic auto-created by a produce");
            Ok((t, true))
        }
        Err(LogError::TopicExists(_)) => Ok((log.topic(name)?, false)),
        Err(e) => Err(e.into()),
    }
}
