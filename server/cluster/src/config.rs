//! A cluster's settings: where its brokers are and how to authenticate,
//! as the server's TOML config (`[clusters.NAME]`) and `--cluster
//! NAME=host:port,...` give them.
//!
//! Secrets never sit in the settings themselves: a SASL password is read,
//! when a client is made, from the environment variable or the file the
//! settings name. The settings (and their `Debug`) hold only those names,
//! so they can be logged and shown.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::ClusterError;

/// How a client talks to the brokers (Kafka's `security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecurityProtocol {
    /// Plain TCP, no authentication.
    #[default]
    Plaintext,
    /// TLS, no SASL.
    Ssl,
    /// SASL over plain TCP.
    SaslPlaintext,
    /// SASL over TLS.
    SaslSsl,
}

impl SecurityProtocol {
    /// librdkafka's name for it.
    pub fn as_kafka(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "plaintext",
            SecurityProtocol::Ssl => "ssl",
            SecurityProtocol::SaslPlaintext => "sasl_plaintext",
            SecurityProtocol::SaslSsl => "sasl_ssl",
        }
    }

    fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// A SASL mechanism a cluster may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SaslMechanism {
    /// `PLAIN`: user and password (use it over TLS).
    #[serde(rename = "PLAIN")]
    Plain,
    /// `SCRAM-SHA-256`.
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    /// `SCRAM-SHA-512`.
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    /// The mechanism's name on the wire.
    pub fn as_kafka(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// One cluster's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// `host:port` of one or more brokers, comma-separated: where a client
    /// starts (it learns the others from their metadata).
    pub bootstrap_servers: String,
    /// `plaintext` (default), `ssl`, `sasl_plaintext` or `sasl_ssl`.
    #[serde(default)]
    pub security_protocol: SecurityProtocol,
    /// `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512` (with a `sasl_*`
    /// protocol).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_mechanism: Option<SaslMechanism>,
    /// The SASL user name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_username: Option<String>,
    /// The environment variable holding the SASL password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_password_env: Option<String>,
    /// A file holding the SASL password (its first line; read when a
    /// client is made).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl_password_file: Option<PathBuf>,
    /// PEM file of the CA certificates that sign the brokers' (default:
    /// the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_ca_location: Option<PathBuf>,
    /// PEM client certificate, for brokers that ask for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_certificate_location: Option<PathBuf>,
    /// PEM private key of `ssl_certificate_location`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssl_key_location: Option<PathBuf>,
    /// How long (ms) a view waits for an input partition at its end before
    /// it processes other partitions' records past that partition's last
    /// one (Kafka Streams' `max.task.idle.ms`); see docs/clusters.md on
    /// when a replay reproduces the live run. Default 500.
    #[serde(default = "default_max_task_idle_ms")]
    pub max_task_idle_ms: u64,
}

/// Default of [`ClusterConfig::max_task_idle_ms`].
pub const DEFAULT_MAX_TASK_IDLE_MS: u64 = 500;

fn default_max_task_idle_ms() -> u64 {
    DEFAULT_MAX_TASK_IDLE_MS
}

/// Longest cluster name.
pub const MAX_NAME_LEN: usize = 64;

/// Checks a cluster's name: 1 to 64 ASCII letters, digits, `_` or `-`.
pub fn validate_name(name: &str) -> Result<(), ClusterError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ClusterError::Config(format!(
            "cluster name {name:?}: use 1 to {MAX_NAME_LEN} letters, digits, '_' or '-'"
        )))
    }
}

impl ClusterConfig {
    /// Plain-TCP settings for `bootstrap_servers`.
    pub fn plaintext(bootstrap_servers: &str) -> ClusterConfig {
        ClusterConfig {
            bootstrap_servers: bootstrap_servers.to_string(),
            security_protocol: SecurityProtocol::Plaintext,
            sasl_mechanism: None,
            sasl_username: None,
            sasl_password_env: None,
            sasl_password_file: None,
            ssl_ca_location: None,
            ssl_certificate_location: None,
            ssl_key_location: None,
            max_task_idle_ms: DEFAULT_MAX_TASK_IDLE_MS,
        }
    }

    /// Parses `--cluster NAME=host:port,...`: a name and plain-TCP
    /// settings.
    pub fn parse_flag(flag: &str) -> Result<(String, ClusterConfig), ClusterError> {
        let Some((name, servers)) = flag.split_once('=') else {
            return Err(ClusterError::Config(format!(
                "--cluster {flag:?}: expected NAME=host:port[,host:port...]"
            )));
        };
        validate_name(name)?;
        let config = ClusterConfig::plaintext(servers);
        config.validate(name)?;
        Ok((name.to_string(), config))
    }

    /// Checks the settings of the cluster `name` hang together (the
    /// secrets themselves are read only when a client is made).
    pub fn validate(&self, name: &str) -> Result<(), ClusterError> {
        let bad = |what: String| Err(ClusterError::Config(format!("cluster {name:?}: {what}")));
        let servers: Vec<&str> = self.bootstrap_servers.split(',').map(str::trim).collect();
        for server in &servers {
            match server.rsplit_once(':') {
                Some((host, port))
                    if !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0) => {}
                _ => {
                    return bad(format!(
                        "bootstrap_servers: {server:?} is not host:port (in {:?})",
                        self.bootstrap_servers
                    ))
                }
            }
        }
        let sasl = self.security_protocol.uses_sasl();
        if sasl && self.sasl_mechanism.is_none() {
            return bad(format!(
                "security_protocol {} needs sasl_mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)",
                self.security_protocol.as_kafka()
            ));
        }
        if !sasl && (self.sasl_mechanism.is_some() || self.sasl_username.is_some()) {
            return bad(format!(
                "sasl_* settings need security_protocol sasl_plaintext or sasl_ssl, not {}",
                self.security_protocol.as_kafka()
            ));
        }
        if sasl && self.sasl_username.is_none() {
            return bad("SASL needs sasl_username".into());
        }
        if sasl && self.sasl_password_env.is_some() == self.sasl_password_file.is_some() {
            return bad(
                "SASL needs exactly one of sasl_password_env and sasl_password_file".into(),
            );
        }
        if self.ssl_certificate_location.is_some() != self.ssl_key_location.is_some() {
            return bad("ssl_certificate_location and ssl_key_location go together".into());
        }
        Ok(())
    }

    /// The SASL password, read from where the settings say (never stored).
    pub(crate) fn sasl_password(&self, name: &str) -> Result<Option<String>, ClusterError> {
        if let Some(var) = &self.sasl_password_env {
            return match std::env::var(var) {
                Ok(p) => Ok(Some(p)),
                Err(_) => Err(ClusterError::Config(format!(
                    "cluster {name:?}: the environment variable {var} (sasl_password_env) is not set"
                ))),
            };
        }
        if let Some(path) = &self.sasl_password_file {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ClusterError::Config(format!(
                    "cluster {name:?}: cannot read sasl_password_file {}: {e}",
                    path.display()
                ))
            })?;
            return Ok(Some(text.lines().next().unwrap_or_default().to_string()));
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flag_names_a_plaintext_cluster() {
        let (name, config) = ClusterConfig::parse_flag("prod=127.0.0.1:9092,b2:9093").unwrap();
        assert_eq!(name, "prod");
        assert_eq!(config.bootstrap_servers, "127.0.0.1:9092,b2:9093");
        assert_eq!(config.security_protocol, SecurityProtocol::Plaintext);
    }

    #[test]
    fn bad_flags_and_settings_are_named() {
        for (flag, expect) in [
            ("prod", "expected NAME=host:port"),
            ("=h:1", "cluster name"),
            ("a b=h:1", "cluster name"),
            ("prod=localhost", "not host:port"),
            ("prod=h:0", "not host:port"),
            ("prod=h:1,", "not host:port"),
        ] {
            let e = ClusterConfig::parse_flag(flag).unwrap_err().to_string();
            assert!(e.contains(expect), "{flag}: {e}");
        }
        let mut c = ClusterConfig::plaintext("h:1");
        c.security_protocol = SecurityProtocol::SaslSsl;
        assert!(c
            .validate("x")
            .unwrap_err()
            .to_string()
            .contains("sasl_mechanism"));
        c.sasl_mechanism = Some(SaslMechanism::ScramSha512);
        c.sasl_username = Some("u".into());
        assert!(c
            .validate("x")
            .unwrap_err()
            .to_string()
            .contains("exactly one"));
        c.sasl_password_env = Some("KAPPA_TEST_NO_SUCH_VARIABLE".into());
        c.validate("x").unwrap();
        let e = c.sasl_password("x").unwrap_err().to_string();
        assert!(e.contains("KAPPA_TEST_NO_SUCH_VARIABLE"), "{e}");
    }

    #[test]
    fn settings_read_from_toml_hold_no_secret() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("password");
        std::fs::write(&secret, "s3cret\n").unwrap();
        let c: ClusterConfig = toml_like(&format!(
            r#"{{"bootstrap_servers": "b:9092", "security_protocol": "sasl_ssl",
                "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "kappa",
                "sasl_password_file": {:?}}}"#,
            secret.display().to_string()
        ));
        c.validate("prod").unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
        assert_eq!(c.sasl_password("prod").unwrap().as_deref(), Some("s3cret"));
    }

    /// Settings as a config file's deserializer reads them.
    fn toml_like(json: &str) -> ClusterConfig {
        serde_json::from_str(json).unwrap()
    }
}
