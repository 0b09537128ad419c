//! Reaching a cluster with librdkafka (the `rdkafka` crate): the client
//! settings made from a [`ClusterConfig`], and the metadata probe that
//! says whether the cluster answers and what it holds.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use serde::Serialize;

use crate::{ClusterConfig, ClusterError};

/// A broker of a cluster, as its metadata names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Broker {
    /// The broker's id.
    pub id: i32,
    /// Host it advertises.
    pub host: String,
    /// Port it advertises.
    pub port: u16,
}

/// A topic of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterTopic {
    /// The topic's name.
    pub name: String,
    /// Its number of partitions.
    pub partitions: u32,
}

/// What a cluster answered to a metadata request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ClusterMetadata {
    /// The brokers, by id.
    pub brokers: Vec<Broker>,
    /// The topics (internal ones, `__`-prefixed, left out), by name.
    pub topics: Vec<ClusterTopic>,
}

/// librdkafka's settings for a client of the cluster `name`: brokers,
/// security and the SASL password read now from where the settings say.
pub fn client_config(name: &str, config: &ClusterConfig) -> Result<ClientConfig, ClusterError> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.bootstrap_servers)
        .set("client.id", format!("kappa-{name}"))
        .set("security.protocol", config.security_protocol.as_kafka())
        // Librdkafka's own log goes through `tracing`, at its levels.
        .set("log_level", "6");
    if let Some(mechanism) = config.sasl_mechanism {
        c.set("sasl.mechanism", mechanism.as_kafka());
    }
    if let Some(user) = &config.sasl_username {
        c.set("sasl.username", user);
    }
    if let Some(password) = config.sasl_password(name)? {
        c.set("sasl.password", password);
    }
    for (key, path) in [
        ("ssl.ca.location", &config.ssl_ca_location),
        ("ssl.certificate.location", &config.ssl_certificate_location),
        ("ssl.key.location", &config.ssl_key_location),
    ] {
        if let Some(path) = path {
            c.set(key, path.to_string_lossy());
        }
    }
    Ok(c)
}

/// Asks the cluster `name` for its brokers and topics, waiting at most
/// `timeout`; blocks the calling thread. An unreachable cluster is
/// [`ClusterError::Unreachable`], naming the cluster and the brokers
/// tried.
pub fn probe(
    name: &str,
    config: &ClusterConfig,
    timeout: Duration,
) -> Result<ClusterMetadata, ClusterError> {
    let consumer: BaseConsumer = client_config(name, config)?
        .create()
        .map_err(|e| ClusterError::Config(format!("cluster {name:?}: {e}")))?;
    let metadata =
        consumer
            .fetch_metadata(None, timeout)
            .map_err(|e| ClusterError::Unreachable {
                cluster: name.to_string(),
                bootstrap_servers: config.bootstrap_servers.clone(),
                reason: e.to_string(),
            })?;
    let mut brokers: Vec<Broker> = metadata
        .brokers()
        .iter()
        .map(|b| Broker {
            id: b.id(),
            host: b.host().to_string(),
            port: u16::try_from(b.port()).unwrap_or(0),
        })
        .collect();
    brokers.sort_by_key(|b| b.id);
    let mut topics: Vec<ClusterTopic> = metadata
        .topics()
        .iter()
        .filter(|t| !t.name().starts_with("__"))
        .map(|t| ClusterTopic {
            name: t.name().to_string(),
            partitions: t.partitions().len() as u32,
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(ClusterMetadata { brokers, topics })
}
