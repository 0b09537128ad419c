//! `CreateTopics`, `DeleteTopics`, `DescribeConfigs`,
//! `IncrementalAlterConfigs` and `AlterConfigs` (topics): the same operations as the HTTP
//! topic API, under the `admin` grant for changes.
//!
//! Topic configs understood at creation and described: `retention.ms`,
//! `retention.bytes`, `segment.bytes`, `segment.ms` (Kafka's names; `-1`
//! = no limit), `compression.type` (`zstd`, `lz4`, or `uncompressed` /
//! `producer` / `none`: how Kappa stores the batches, whatever the
//! producers sent; `gzip` and `snappy` are not stored), `cleanup.policy`
//! (`delete`, `compact`, `compact,delete`), `delete.retention.ms` and
//! `min.compaction.lag.ms` (compacted topics, `log/FORMAT.md` §8.3),
//! `local.retention.ms` and `local.retention.bytes` (tiered storage, §8.4). Others are
//! refused at creation (`INVALID_CONFIG`) rather than silently ignored. Replication factor: -1 or 1 (one node).
//! `IncrementalAlterConfigs` sets or deletes (back to the default) what
//! `PATCH /v1/topics/{topic}` can change: retention, `compression.type`,
//! the compaction and tiering settings; the legacy `AlterConfigs` replaces
//! them (what it does not name goes back to its default).

use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    alter_configs_response, AlterConfigsRequest, AlterConfigsResponse, CreateTopicsRequest,
    CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
    TopicName,
};
use kappa_log::{Compression, TopicChanges, TopicConfig};

use super::conn::Session;
use super::{errors, metadata, text, Broker};
use crate::auth::Need;

/// `DescribeConfigs` resource type of a topic.
const RESOURCE_TOPIC: i8 = 2;
/// `DescribeConfigs` resource type of a broker.
const RESOURCE_BROKER: i8 = 4;
/// Config source: the topic's own setting.
const SOURCE_TOPIC: i8 = 1;
/// Config source: a server default.
const SOURCE_DEFAULT: i8 = 5;

/// Applies Kafka topic configs to `config`, or says which one is wrong.
fn apply_configs(
    config: &mut TopicConfig,
    configs: &[(String, Option<String>)],
) -> Result<(), String> {
    for (name, value) in configs {
        let Some(value) = value else { continue };
        let number = || {
            value
                .parse::<i64>()
                .map_err(|_| format!("{name} must be a number, got {value:?}"))
        };
        let limit = |n: i64| (n >= 0).then_some(n as u64);
        match name.as_str() {
            "retention.ms" => config.retention_ms = limit(number()?),
            "retention.bytes" => config.retention_bytes = limit(number()?),
            "segment.bytes" => config.segment_bytes = number()?.max(0) as u64,
            "segment.ms" => config.segment_ms = number()?.max(0) as u64,
            "compression.type" => {
                config.compression = value
                    .parse()
                    .map_err(|e| format!("compression.type: {e}"))?
            }
            "cleanup.policy" => {
                config.cleanup_policy = value.parse().map_err(|e| format!("cleanup.policy: {e}"))?
            }
            "delete.retention.ms" => config.delete_retention_ms = Some(number()?.max(0) as u64),
            "min.compaction.lag.ms" => config.min_compaction_lag_ms = Some(number()?.max(0) as u64),
            // KIP-405's names; a negative value (Kafka's -2, "as
            // retention.*", and -1) keeps segments local.
            "local.retention.ms" => config.local_retention_ms = limit(number()?),
            "local.retention.bytes" => config.local_retention_bytes = limit(number()?),
            other => return Err(format!("config {other:?} is not supported by Kappa")),
        }
    }
    Ok(())
}

/// Answers `CreateTopics`.
pub async fn create_topics(
    broker: &Broker,
    session: &Session,
    request: CreateTopicsRequest,
    version: i16,
) -> CreateTopicsResponse {
    let mut response = CreateTopicsResponse::default();
    let admin = session.allows(&Need::Admin);
    for wanted in request.topics {
        let name = wanted.name.0.to_string();
        let mut result = CreatableTopicResult::default();
        result.name = wanted.name.clone();
        let mut config = broker.app.config.topic_defaults();
        if wanted.num_partitions > 0 {
            config.partitions = wanted.num_partitions as u32;
        }
        let configs: Vec<(String, Option<String>)> = wanted
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect();
        let refused = if !admin {
            Some((
                errors::TOPIC_AUTHORIZATION_FAILED,
                "the admin grant is needed".to_string(),
            ))
        } else if wanted.num_partitions == 0 || wanted.num_partitions < -1 {
            Some((
                errors::INVALID_PARTITIONS,
                "partitions must be positive".into(),
            ))
        } else if wanted.replication_factor > 1 || wanted.replication_factor == 0 {
            Some((
                errors::INVALID_REPLICATION_FACTOR,
                "Kappa is one node: the replication factor is 1".into(),
            ))
        } else if !wanted.assignments.is_empty() {
            Some((
                errors::INVALID_REQUEST,
                "manual replica assignments are not supported".into(),
            ))
        } else {
            apply_configs(&mut config, &configs)
                .err()
                .map(|m| (errors::INVALID_CONFIG, m))
        };
        if let Some((code, message)) = refused {
            result.error_code = code;
            result.error_message = Some(text(message));
            response.topics.push(result);
            continue;
        }
        if request.validate_only {
            if broker.app.log.topic(&name).is_ok() {
                result.error_code = errors::TOPIC_ALREADY_EXISTS;
            } else if let Err(e) = kappa_log::validate_topic_name(&name) {
                result.error_code = errors::of_log(&e);
                result.error_message = Some(text(e.to_string()));
            }
            if version >= 5 {
                result.num_partitions = config.partitions as i32;
                result.replication_factor = 1;
            }
            response.topics.push(result);
            continue;
        }
        let log = broker.app.log.clone();
        let created = tokio::task::spawn_blocking(move || log.create_topic(&name, config)).await;
        match created {
            Ok(Ok(topic)) => {
                crate::auth::audit::admin_action(
                    session.principal().expect("checked above"),
                    "kafka create topic",
                    topic.name(),
                    201,
                );
                if version >= 7 {
                    result.topic_id = metadata::topic_id(&topic);
                }
                if version >= 5 {
                    result.num_partitions = topic.partition_count() as i32;
                    result.replication_factor = 1;
                }
            }
            Ok(Err(e)) => {
                result.error_code = errors::of_log(&e);
                result.error_message = Some(text(e.to_string()));
            }
            Err(_) => result.error_code = errors::UNKNOWN_SERVER_ERROR,
        }
        response.topics.push(result);
    }
    response
}

/// Answers `DeleteTopics` (by name; topic ids of v6+ are not served). A
/// topic a view or a declared stream reads is refused with
/// `POLICY_VIOLATION`, naming what to drop first.
pub async fn delete_topics(
    broker: &Broker,
    session: &Session,
    request: DeleteTopicsRequest,
    version: i16,
) -> DeleteTopicsResponse {
    let mut response = DeleteTopicsResponse::default();
    let admin = session.allows(&Need::Admin);
    let names: Vec<TopicName> = request
        .topic_names
        .into_iter()
        .chain(request.topics.into_iter().filter_map(|t| t.name))
        .collect();
    for name in names {
        let mut result = DeletableTopicResult::default();
        result.name = Some(name.clone());
        let topic = name.0.to_string();
        if !admin {
            result.error_code = errors::TOPIC_AUTHORIZATION_FAILED;
            response.responses.push(result);
            continue;
        }
        let (log, views, owned) = (
            broker.app.log.clone(),
            broker.app.views.clone(),
            topic.clone(),
        );
        let deleted = tokio::task::spawn_blocking(move || {
            if let Err(e) = views.check_topic_unused(&owned) {
                let e = crate::statements::dependents::explain(
                    e,
                    &views.catalog(),
                    &format!("topic {owned:?}"),
                );
                return Err((errors::POLICY_VIOLATION, e.to_string()));
            }
            log.delete_topic(&owned)
                .map_err(|e| (errors::of_log(&e), e.to_string()))
        })
        .await;
        match deleted {
            Ok(Ok(())) => crate::auth::audit::admin_action(
                session.principal().expect("checked above"),
                "kafka delete topic",
                &topic,
                204,
            ),
            Ok(Err((code, message))) => {
                tracing::info!(topic, %message, "a Kafka client's topic delete was refused");
                result.error_code = code;
                if version >= 5 {
                    result.error_message = Some(text(message));
                }
            }
            Err(_) => result.error_code = errors::UNKNOWN_SERVER_ERROR,
        }
        response.responses.push(result);
    }
    response
}

/// Answers `DescribeConfigs` for topics (their retention and segment
/// settings) and the broker (no settings listed).
pub fn describe_configs(
    broker: &Broker,
    session: &Session,
    request: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let mut response = DescribeConfigsResponse::default();
    for resource in request.resources {
        let mut result = DescribeConfigsResult::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name.clone();
        let name = resource.resource_name.to_string();
        match resource.resource_type {
            RESOURCE_TOPIC => {
                let allowed = session.allows(&Need::ReadOrProduce(name.clone()));
                match (allowed, broker.app.log.topic(&name)) {
                    (false, _) => result.error_code = errors::TOPIC_AUTHORIZATION_FAILED,
                    (true, Err(e)) => result.error_code = errors::of_log(&e),
                    (true, Ok(topic)) => {
                        let config = topic.config();
                        let wanted = resource
                            .configuration_keys
                            .as_ref()
                            .map(|keys| keys.iter().map(|k| k.to_string()).collect::<Vec<_>>());
                        result.configs = topic_configs(&config)
                            .into_iter()
                            .filter(|(k, _, _)| {
                                wanted.as_ref().is_none_or(|w| w.iter().any(|x| x == k))
                            })
                            .map(|(k, v, own)| {
                                let mut c = DescribeConfigsResourceResult::default();
                                c.name = text(k);
                                c.value = Some(text(v));
                                c.read_only = !CHANGEABLE.contains(&k);
                                c.config_source = if own { SOURCE_TOPIC } else { SOURCE_DEFAULT };
                                c
                            })
                            .collect();
                    }
                }
            }
            RESOURCE_BROKER => {}
            _ => {
                result.error_code = errors::INVALID_REQUEST;
                result.error_message = Some(text("only topic and broker resources are described"));
            }
        }
        response.results.push(result);
    }
    response
}

/// `IncrementalAlterConfigs` operation: set a value.
const OP_SET: i8 = 0;
/// `IncrementalAlterConfigs` operation: back to the default.
const OP_DELETE: i8 = 1;

/// The topic configs a change may name (Kafka's names).
const CHANGEABLE: [&str; 8] = [
    "retention.ms",
    "retention.bytes",
    "compression.type",
    "cleanup.policy",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "local.retention.ms",
    "local.retention.bytes",
];

/// The changes of one resource's `IncrementalAlterConfigs` operations to
/// a topic now set as `config`, or what is wrong with them.
fn alter_changes(
    config: &TopicConfig,
    ops: &[(String, i8, Option<String>)],
) -> Result<TopicChanges, String> {
    let mut new = config.clone();
    let defaults = TopicConfig::default();
    for (name, op, value) in ops {
        if !CHANGEABLE.contains(&name.as_str()) {
            return Err(format!(
                "config {name:?} cannot be changed (changeable: {})",
                CHANGEABLE.join(", ")
            ));
        }
        match *op {
            OP_SET => apply_configs(&mut new, &[(name.clone(), value.clone())])?,
            OP_DELETE => match name.as_str() {
                "retention.ms" => new.retention_ms = defaults.retention_ms,
                "retention.bytes" => new.retention_bytes = defaults.retention_bytes,
                "compression.type" => new.compression = defaults.compression,
                "cleanup.policy" => new.cleanup_policy = defaults.cleanup_policy,
                "delete.retention.ms" => new.delete_retention_ms = None,
                "min.compaction.lag.ms" => new.min_compaction_lag_ms = None,
                "local.retention.ms" => new.local_retention_ms = None,
                _ => new.local_retention_bytes = None,
            },
            other => {
                return Err(format!(
                    "operation {other} on {name:?} is not supported (0 SET and 1 DELETE are)"
                ))
            }
        }
    }
    Ok(TopicChanges {
        retention_ms: Some(new.retention_ms),
        retention_bytes: Some(new.retention_bytes),
        compression: Some(new.compression),
        cleanup_policy: Some(new.cleanup_policy),
        delete_retention_ms: Some(new.delete_retention_ms),
        min_compaction_lag_ms: Some(new.min_compaction_lag_ms),
        local_retention_ms: Some(new.local_retention_ms),
        local_retention_bytes: Some(new.local_retention_bytes),
        // Not a Kafka setting: unchanged.
        cached_tail_bytes: None,
    })
}

/// One operation on a topic config: its name, `OP_SET` or `OP_DELETE`,
/// and the value set.
type ConfigOp = (String, i8, Option<String>);

/// Answers `IncrementalAlterConfigs` for topics (the broker's settings do
/// not change); needs the `admin` grant.
pub async fn incremental_alter_configs(
    broker: &Broker,
    session: &Session,
    request: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut response = IncrementalAlterConfigsResponse::default();
    for resource in request.resources {
        let ops: Vec<ConfigOp> = resource
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.config_operation,
                    c.value.as_ref().map(|v| v.to_string()),
                )
            })
            .collect();
        let name = resource.resource_name.to_string();
        let (error_code, error_message) = alter_topic(
            broker,
            session,
            (resource.resource_type, name),
            request.validate_only,
            move |_| Ok(ops),
        )
        .await;
        let mut result = AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name;
        result.error_code = error_code;
        result.error_message = error_message.map(text);
        response.responses.push(result);
    }
    response
}

/// Answers the legacy `AlterConfigs` for topics (the broker's settings do
/// not change); needs the `admin` grant. As in Kafka, a resource's
/// configs are *replaced*: what it names is set, and every other
/// changeable setting goes back to its default ([`replacing_ops`]).
pub async fn alter_configs(
    broker: &Broker,
    session: &Session,
    request: AlterConfigsRequest,
) -> AlterConfigsResponse {
    let mut response = AlterConfigsResponse::default();
    for resource in request.resources {
        let given: Vec<(String, Option<String>)> = resource
            .configs
            .iter()
            .map(|c| (c.name.to_string(), c.value.as_ref().map(|v| v.to_string())))
            .collect();
        let name = resource.resource_name.to_string();
        let (error_code, error_message) = alter_topic(
            broker,
            session,
            (resource.resource_type, name),
            request.validate_only,
            move |config| replacing_ops(config, &given),
        )
        .await;
        let mut result = alter_configs_response::AlterConfigsResourceResponse::default();
        result.resource_type = resource.resource_type;
        result.resource_name = resource.resource_name;
        result.error_code = error_code;
        result.error_message = error_message.map(text);
        response.responses.push(result);
    }
    response
}

/// The operations of a legacy `AlterConfigs` that gives `given` for a
/// topic now set as `config`: each changeable config given a value is
/// set, every other one deleted (back to its default). A setting that
/// cannot change may be given at its current value — as a client that
/// described the topic and sends its settings back does — and is left
/// alone; at another value, or unknown, it is refused.
fn replacing_ops(
    config: &TopicConfig,
    given: &[(String, Option<String>)],
) -> Result<Vec<ConfigOp>, String> {
    let current = topic_configs(config);
    let mut ops = Vec::new();
    for (name, value) in given {
        if CHANGEABLE.contains(&name.as_str()) {
            if value.is_some() {
                ops.push((name.clone(), OP_SET, value.clone()));
            }
            continue;
        }
        match current.iter().find(|(k, _, _)| k == name) {
            Some((_, now, _)) if value.as_ref() == Some(now) => {}
            _ => {
                return Err(format!(
                    "config {name:?} cannot be changed (changeable: {})",
                    CHANGEABLE.join(", ")
                ))
            }
        }
    }
    for name in CHANGEABLE {
        if !ops.iter().any(|(n, _, _)| n == name) {
            ops.push((name.to_string(), OP_DELETE, None));
        }
    }
    Ok(ops)
}

/// Changes the configs of the resource `(type, name)` by the operations
/// `ops_of` gives for its current config (or only checks them, with
/// `validate_only`): a topic's, under the `admin` grant. The error code
/// and message of the resource's answer.
async fn alter_topic(
    broker: &Broker,
    session: &Session,
    (resource_type, name): (i8, String),
    validate_only: bool,
    ops_of: impl FnOnce(&TopicConfig) -> Result<Vec<ConfigOp>, String> + Send + 'static,
) -> (i16, Option<String>) {
    let outcome = if resource_type != RESOURCE_TOPIC {
        Err((
            errors::INVALID_REQUEST,
            "only topic configs can change".to_string(),
        ))
    } else if !session.allows(&Need::Admin) {
        Err((
            errors::TOPIC_AUTHORIZATION_FAILED,
            "the admin grant is needed".to_string(),
        ))
    } else {
        let log = broker.app.log.clone();
        let owned = name.clone();
        tokio::task::spawn_blocking(move || {
            let topic = log
                .topic(&owned)
                .map_err(|e| (errors::of_log(&e), e.to_string()))?;
            let changes = ops_of(&topic.config())
                .and_then(|ops| alter_changes(&topic.config(), &ops))
                .map_err(|m| (errors::INVALID_CONFIG, m))?;
            if validate_only {
                return changes
                    .apply(&topic.config())
                    .validate()
                    .map_err(|e| (errors::of_log(&e), e.to_string()));
            }
            topic
                .alter(&changes)
                .map(|_| ())
                .map_err(|e| (errors::of_log(&e), e.to_string()))
        })
        .await
        .unwrap_or_else(|_| Err((errors::UNKNOWN_SERVER_ERROR, "the change failed".into())))
    };
    match outcome {
        Ok(()) if !validate_only => {
            crate::auth::audit::admin_action(
                session.principal().expect("checked above"),
                "kafka alter topic configs",
                &name,
                200,
            );
            (errors::NONE, None)
        }
        Ok(()) => (errors::NONE, None),
        Err((code, message)) => (code, Some(message)),
    }
}

/// A topic's settings under Kafka's names: (name, value, set on the topic).
fn topic_configs(config: &TopicConfig) -> Vec<(&'static str, String, bool)> {
    let limit = |v: Option<u64>| v.map_or("-1".to_string(), |n| n.to_string());
    vec![
        ("retention.ms", limit(config.retention_ms), true),
        ("retention.bytes", limit(config.retention_bytes), true),
        ("segment.bytes", config.segment_bytes.to_string(), true),
        ("segment.ms", config.segment_ms.to_string(), true),
        (
            "compression.type",
            match config.compression {
                Compression::None => "producer".into(),
                other => other.name().into(),
            },
            true,
        ),
        (
            "cleanup.policy",
            config.cleanup_policy.name().into(),
            !config.cleanup_policy.is_delete(),
        ),
        (
            "delete.retention.ms",
            config.delete_retention_ms().to_string(),
            config.delete_retention_ms.is_some(),
        ),
        (
            "min.compaction.lag.ms",
            config.min_compaction_lag_ms.unwrap_or(0).to_string(),
            config.min_compaction_lag_ms.is_some(),
        ),
        (
            "local.retention.ms",
            limit(config.local_retention_ms),
            config.local_retention_ms.is_some(),
        ),
        (
            "local.retention.bytes",
            limit(config.local_retention_bytes),
            config.local_retention_bytes.is_some(),
        ),
        ("message.timestamp.type", "CreateTime".into(), false),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_topic_configs_map_onto_the_topic_settings_and_unknown_ones_are_refused() {
        let mut config = TopicConfig::default();
        let set = |k: &str, v: &str| (k.to_string(), Some(v.to_string()));
        apply_configs(
            &mut config,
            &[
                set("retention.ms", "60000"),
                set("retention.bytes", "-1"),
                set("segment.bytes", "1048576"),
            ],
        )
        .unwrap();
        assert_eq!(config.retention_ms, Some(60_000));
        assert_eq!(config.retention_bytes, None);
        assert_eq!(config.segment_bytes, 1 << 20);
        apply_configs(&mut config, &[set("compression.type", "zstd")]).unwrap();
        assert_eq!(config.compression, Compression::Zstd);
        let error = apply_configs(&mut config, &[set("compression.type", "gzip")]).unwrap_err();
        assert!(
            error.contains("compression.type") && error.contains("zstd"),
            "{error}"
        );
        apply_configs(
            &mut config,
            &[
                set("cleanup.policy", "compact,delete"),
                set("delete.retention.ms", "1000"),
                set("min.compaction.lag.ms", "2000"),
            ],
        )
        .unwrap();
        assert_eq!(
            config.cleanup_policy,
            kappa_log::CleanupPolicy::CompactDelete
        );
        assert_eq!(config.delete_retention_ms, Some(1000));
        assert_eq!(config.min_compaction_lag_ms, Some(2000));
        let described = topic_configs(&config);
        assert!(described.contains(&("cleanup.policy", "compact,delete".into(), true)));
        let error = apply_configs(&mut config, &[set("cleanup.policy", "purge")]).unwrap_err();
        assert!(error.contains("cleanup.policy"), "{error}");
        let error = apply_configs(&mut config, &[set("min.insync.replicas", "2")]).unwrap_err();
        assert!(error.contains("min.insync.replicas"), "{error}");
        assert!(apply_configs(&mut config, &[set("retention.ms", "soon")]).is_err());
    }
}
