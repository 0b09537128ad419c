//! Server configuration: defaults, then an optional TOML file, then
//! environment variables, then flags (env and flags are merged by clap
//! into [`Overrides`]). Every field has a documented default and
//! [`ServerConfig::validate`] checks every range.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kappa_cluster::ClusterConfig;
use kappa_log::FsyncPolicy;
use serde::{Deserialize, Serialize};

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Who may call the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Anyone who can reach the port may do anything. Only allowed on a
    /// loopback address unless `insecure_no_auth` is set.
    #[default]
    None,
    /// Every API call needs `Authorization: Bearer <token>` with a grant
    /// for what it does (README, "Security").
    Tokens,
}

/// Everything `kappa serve` needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Data directory (default `./data`).
    pub data_dir: PathBuf,
    /// Address to listen on (default `127.0.0.1:8080`; loopback only unless asked).
    pub listen: SocketAddr,
    /// Log line format (default `text`).
    pub log_format: LogFormat,
    /// Create unknown topics on first produce, with `default_partitions`
    /// and `default_fsync` (default false: a produce to an unknown topic
    /// answers 404 `unknown_topic`, so a typo in a topic name is an error
    /// rather than a new topic).
    pub auto_create_topics: bool,
    /// Partitions of auto-created topics (default 1).
    pub default_partitions: u32,
    /// Auto-creation stops once this many partitions are in use in total
    /// (default 256), so that producing to made-up topic names cannot use up
    /// the log's `max_partitions` (1,024); explicit creates can still use the
    /// rest.
    pub auto_create_max_partitions: u32,
    /// fsync policy of auto-created topics (default `always`).
    pub default_fsync: FsyncPolicy,
    /// Retention by age of topics created without one, ms; absent keeps
    /// records forever (the default: views are replayed from the log).
    pub default_retention_ms: Option<u64>,
    /// How often retention deletes expired segments and compacted topics
    /// are compacted (default 60 s).
    pub retention_check_interval_ms: u64,
    /// How long a produce's idempotency key is remembered, per partition
    /// (default 15 minutes). Compaction leaves alone what is younger.
    pub idempotency_window_ms: u64,
    /// Memory of a compaction pass's key map (default 128 MiB).
    pub cleaner_buffer_bytes: usize,
    /// Share of a compacted partition's cleanable bytes that must be new
    /// before a pass compacts it (default 0.5).
    pub min_cleanable_dirty_ratio: f64,
    /// Bytes per second compaction reads and writes at most; absent = no
    /// limit (the default).
    pub cleaner_io_bytes_per_sec: Option<u64>,
    /// Largest request body (default 16 MiB).
    pub max_body_bytes: usize,
    /// Most records in one produce request (default 10,000).
    pub max_records_per_request: usize,
    /// Largest record key (default 16 KiB).
    pub max_key_bytes: usize,
    /// Largest record value as JSON text (default 1 MiB).
    pub max_value_bytes: usize,
    /// Most headers on one record (default 64).
    pub max_headers_per_record: usize,
    /// Most open client connections; more wait in the listen backlog
    /// (default 1024).
    pub max_connections: usize,
    /// Time a client has to send a request's headers (default 10 s).
    pub header_read_timeout_ms: u64,
    /// Time a new connection has to send its first request's headers
    /// (default 2 s): idle new connections are closed sooner than the
    /// `header_read_timeout_ms` that later requests get.
    pub first_request_timeout_ms: u64,
    /// Connections from one IP address that have not yet sent a complete
    /// request head (default 128). A new connection beyond it closes that
    /// address's oldest such connection; connections that sent a request are
    /// never closed for it. When `max_connections` is reached, the oldest
    /// such connection of any address is closed to make room.
    pub max_new_connections_per_ip: usize,
    /// Host names (with or without a port) accepted in the `Host` header
    /// besides `localhost`, `127.0.0.1`, `[::1]` and the listen address
    /// (default none). While the server listens on loopback, any other
    /// `Host` is refused (DNS rebinding); otherwise, when this list is not
    /// empty, only these and the loopback names are accepted.
    pub allowed_hosts: Vec<String>,
    /// Time a client has to send a request's whole body, from its request
    /// head (default 30 s; a deadline for the body, not for each read).
    pub request_body_timeout_ms: u64,
    /// The least average rate a request body must arrive at once it has
    /// taken 2 s, bytes per second (default 1024; 0 = only the deadline):
    /// a client dripping a body is cut off long before the deadline.
    pub request_body_min_bytes_per_s: u64,
    /// How long a produce waits for space in a full append queue before
    /// answering 503 (default 500 ms).
    pub append_queue_wait_ms: u64,
    /// Bytes of appends that may wait per partition (default 64 MiB).
    pub append_queue_bytes: usize,
    /// On shutdown, how long in-flight requests get to finish (default 10 s).
    pub shutdown_grace_ms: u64,
    /// A view's new version is swapped in once its total lag (records not
    /// yet processed, over all input partitions) is at most this (default 1,000).
    pub view_swap_max_lag: u64,
    /// How long a replaced view version stays readable with `?version=`
    /// before its state is dropped (default 60 s; 0 = dropped at the swap).
    pub view_grace_ms: u64,
    /// How many replaced versions of a view are kept (readable, following
    /// their input, available to roll back to) within `view_grace_ms`
    /// (default 1; 0 = none; a view's `KEEP_VERSIONS` overrides it).
    pub view_keep_versions: u32,
    /// How often processors commit state, rows and offsets (default 50 ms:
    /// it bounds how soon a produced record is visible in a view).
    pub view_commit_interval_ms: u64,
    /// Processors also commit as soon as they have caught up with their
    /// input (default true: at low load a record is visible a few
    /// milliseconds after its produce; under load commits batch at the
    /// interval). False: commit at the interval only.
    pub view_commit_when_caught_up: bool,
    /// Workers of each kind a view version runs with — source workers
    /// decoding and routing its input, key-shard workers holding its
    /// aggregate state (default: the number of cores; 1 = one thread per
    /// version; a view's `PARALLELISM` overrides it).
    pub processor_threads: u32,
    /// Who may call the API (default `none`: anyone who reaches the port;
    /// `tokens`: bearer tokens with grants).
    pub auth: AuthMode,
    /// Allow `auth = "none"` on a non-loopback address (default false: the
    /// server refuses to start, as anyone on the network could read, write
    /// and delete everything).
    pub insecure_no_auth: bool,
    /// PEM certificate chain: with `tls_key`, the API is served over HTTPS
    /// only (reloaded on SIGHUP). Default none: plain HTTP.
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// Origins (`https://dash.example.com`) whose pages may call the API
    /// from a browser, answered with CORS headers (default none: no CORS,
    /// and requests a browser marks cross-site are refused).
    pub allowed_origins: Vec<String>,
    /// Address of the Kafka-protocol listener (default none: off). Kafka
    /// clients (librdkafka, the Java client, kcat, ...) produce to and
    /// consume from the same log there; see docs/kafka.md.
    pub kafka_listen: Option<SocketAddr>,
    /// Address of the PostgreSQL-protocol listener (default none: off):
    /// `psql` and PostgreSQL drivers query views there; see docs/pg.md.
    pub pg_listen: Option<SocketAddr>,
    /// Kafka requests larger than this are refused and the connection
    /// closed (default 100 MiB, Kafka's `socket.request.max.bytes`).
    pub kafka_max_request_bytes: usize,
    /// Kafka-protocol clusters streams may live on, by name
    /// (`[clusters.NAME]` tables: `bootstrap_servers`, `security_protocol`,
    /// `sasl_mechanism`, `sasl_username`, `sasl_password_env` or
    /// `sasl_password_file`, `ssl_ca_location`, `ssl_certificate_location`,
    /// `ssl_key_location`; default none). See docs/clusters.md.
    pub clusters: BTreeMap<String, ClusterConfig>,
    /// Kappa cluster id: nodes started with the same id against the same
    /// Kafka cluster share the catalog and split each view's partitions
    /// (default none: this node runs alone). See docs/clusters.md.
    pub cluster_id: Option<String>,
    /// Where the other nodes reach this node's HTTP API
    /// (`http://host:port`); required with `cluster_id`.
    pub advertise_url: Option<String>,
    /// The configured cluster holding the Kappa cluster's control topic
    /// (default: the only configured cluster).
    pub coordination_cluster: Option<String>,
    /// Where the tasks of views spread over a Kappa cluster's nodes are
    /// checkpointed: `s3://bucket/prefix` (credentials and endpoint from
    /// the `AWS_*` environment variables) or `file:///dir` (default none:
    /// a node taking a partition over rebuilds it from the partition's
    /// start).
    pub checkpoint_url: Option<String>,
    /// How often each task is checkpointed (ms; default 10000).
    pub checkpoint_interval_ms: u64,
    /// Tiered storage: where topics with a `local_retention_ms` or
    /// `local_retention_bytes` move their old segments — `s3://bucket/prefix`
    /// (credentials and endpoint from the `AWS_*` environment variables)
    /// or `file:///dir` (default none: every segment stays local).
    pub tiered_storage_url: Option<String>,
    /// Standbys per partition of a view spread over a Kappa cluster's
    /// nodes: 0 (default) or 1, a warm copy on the node that takes the
    /// partition over when its owner is lost.
    pub standby_replicas: u32,
}

/// Which per-record limit a produced record exceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordLimit {
    /// `max_value_bytes`.
    Value,
    /// `max_key_bytes`.
    Key,
    /// `max_headers_per_record`.
    Headers,
}

/// The number of cores this process may use (at least 1).
fn cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("./data"),
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            log_format: LogFormat::Text,
            auto_create_topics: false,
            default_partitions: 1,
            auto_create_max_partitions: 256,
            default_fsync: FsyncPolicy::Always,
            default_retention_ms: None,
            retention_check_interval_ms: 60_000,
            idempotency_window_ms: 15 * 60 * 1000,
            cleaner_buffer_bytes: 128 << 20,
            min_cleanable_dirty_ratio: 0.5,
            cleaner_io_bytes_per_sec: None,
            max_body_bytes: 16 << 20,
            max_records_per_request: 10_000,
            max_key_bytes: 16 << 10,
            max_value_bytes: 1 << 20,
            max_headers_per_record: 64,
            max_connections: 1024,
            header_read_timeout_ms: 10_000,
            first_request_timeout_ms: 2_000,
            max_new_connections_per_ip: 128,
            allowed_hosts: Vec::new(),
            request_body_timeout_ms: 30_000,
            request_body_min_bytes_per_s: 1024,
            append_queue_wait_ms: 500,
            append_queue_bytes: 64 << 20,
            shutdown_grace_ms: 10_000,
            view_swap_max_lag: 1_000,
            view_grace_ms: 60_000,
            view_keep_versions: 1,
            // Half the processor library's 100 ms: a row is visible at the next
            // commit, and 50 ms keeps produce-to-view p99 under 100 ms
            // (BENCHMARKS.md, "Views over HTTP").
            view_commit_interval_ms: 50,
            view_commit_when_caught_up: true,
            processor_threads: cores(),
            auth: AuthMode::None,
            insecure_no_auth: false,
            tls_cert: None,
            tls_key: None,
            allowed_origins: Vec::new(),
            kafka_listen: None,
            pg_listen: None,
            kafka_max_request_bytes: 100 << 20,
            clusters: BTreeMap::new(),
            cluster_id: None,
            advertise_url: None,
            coordination_cluster: None,
            checkpoint_url: None,
            tiered_storage_url: None,
            checkpoint_interval_ms: 10_000,
            standby_replicas: 0,
        }
    }
}

/// Values given as flags or environment variables; `None` = not given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Overrides {
    /// Data directory [default: ./data].
    #[arg(long, env = "KAPPA_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, env = "KAPPA_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Log format [default: text].
    #[arg(long, env = "KAPPA_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Create unknown topics on first produce [default: false].
    #[arg(long, env = "KAPPA_AUTO_CREATE_TOPICS")]
    pub auto_create_topics: Option<bool>,
    /// Partitions of auto-created topics [default: 1].
    #[arg(long, env = "KAPPA_DEFAULT_PARTITIONS")]
    pub default_partitions: Option<u32>,
    /// fsync policy of auto-created topics: always, interval, never [default: always].
    #[arg(long, env = "KAPPA_DEFAULT_FSYNC", value_parser = parse_fsync)]
    pub default_fsync: Option<FsyncPolicy>,
    /// Retention by age of new topics, ms, or `none` to keep forever [default: none].
    #[arg(long, env = "KAPPA_DEFAULT_RETENTION_MS", value_parser = parse_retention)]
    pub default_retention_ms: Option<Retention>,
    /// Largest request body in bytes [default: 16777216].
    #[arg(long, env = "KAPPA_MAX_BODY_BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Most records in one produce request [default: 10000].
    #[arg(long, env = "KAPPA_MAX_RECORDS_PER_REQUEST")]
    pub max_records_per_request: Option<usize>,
    /// Most open client connections [default: 1024].
    #[arg(long, env = "KAPPA_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Connections from one IP that have not sent a request yet [default: 128].
    #[arg(long, env = "KAPPA_MAX_NEW_CONNECTIONS_PER_IP")]
    pub max_new_connections_per_ip: Option<usize>,
    /// Extra accepted `Host` names, comma-separated [default: none].
    #[arg(long, env = "KAPPA_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Option<Vec<String>>,
    /// Partitions in use beyond which auto-creation stops [default: 256].
    #[arg(long, env = "KAPPA_AUTO_CREATE_MAX_PARTITIONS")]
    pub auto_create_max_partitions: Option<u32>,
    /// Swap in a view's new version once its lag is at most this many records [default: 1000].
    #[arg(long, env = "KAPPA_VIEW_SWAP_MAX_LAG")]
    pub view_swap_max_lag: Option<u64>,
    /// How long a replaced view version stays readable, ms [default: 60000].
    #[arg(long, env = "KAPPA_VIEW_GRACE_MS")]
    pub view_grace_ms: Option<u64>,
    /// How many replaced view versions are kept within the grace [default: 1].
    #[arg(long, env = "KAPPA_VIEW_KEEP_VERSIONS")]
    pub view_keep_versions: Option<u32>,
    /// How often processors commit, ms [default: 50].
    #[arg(long, env = "KAPPA_VIEW_COMMIT_INTERVAL_MS")]
    pub view_commit_interval_ms: Option<u64>,
    /// Also commit as soon as a processor caught up with its input [default: true].
    #[arg(long, env = "KAPPA_VIEW_COMMIT_WHEN_CAUGHT_UP")]
    pub view_commit_when_caught_up: Option<bool>,
    /// Workers of each kind per view version (a view's PARALLELISM overrides) [default: the number of cores].
    #[arg(long, env = "KAPPA_PROCESSOR_THREADS")]
    pub processor_threads: Option<u32>,
    /// Who may call the API: none (anyone who reaches the port) or tokens [default: none].
    #[arg(long, env = "KAPPA_AUTH", value_enum)]
    pub auth: Option<AuthMode>,
    /// Allow --auth none on a non-loopback address (e.g. behind an authenticating proxy).
    #[arg(long, env = "KAPPA_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,
    /// PEM certificate chain: serve HTTPS (with --tls-key; reloaded on SIGHUP).
    #[arg(long, env = "KAPPA_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "KAPPA_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Origins whose pages may call the API (CORS), comma-separated [default: none].
    #[arg(long, env = "KAPPA_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Option<Vec<String>>,
    /// Serve the Kafka protocol on this address too (e.g. 127.0.0.1:9092) [default: off].
    #[arg(long, env = "KAPPA_KAFKA_LISTEN")]
    pub kafka_listen: Option<SocketAddr>,
    /// Serve the PostgreSQL protocol on this address too (e.g. 127.0.0.1:5432) [default: off].
    #[arg(long, env = "KAPPA_PG_LISTEN")]
    pub pg_listen: Option<SocketAddr>,
    /// A Kafka-protocol cluster streams may live on, NAME=host:port[,host:port...]
    /// (plain TCP; TLS and SASL in the config file); repeatable.
    #[arg(long = "cluster", value_name = "NAME=BROKERS")]
    pub clusters: Vec<String>,
    /// Join the Kappa cluster of this id: nodes with one id share the catalog and the views' partitions [default: none].
    #[arg(long, env = "KAPPA_CLUSTER_ID", requires = "advertise_url")]
    pub cluster_id: Option<String>,
    /// Where the other nodes of the Kappa cluster reach this node's API (http://host:port).
    #[arg(long, env = "KAPPA_ADVERTISE_URL")]
    pub advertise_url: Option<String>,
    /// The configured cluster holding the Kappa cluster's control topic [default: the only one].
    #[arg(long, env = "KAPPA_COORDINATION_CLUSTER")]
    pub coordination_cluster: Option<String>,
    /// Checkpoint the tasks of views spread over the Kappa cluster here: s3://bucket/prefix or file:///dir [default: none].
    #[arg(long, env = "KAPPA_CHECKPOINT_URL")]
    pub checkpoint_url: Option<String>,
    /// Move topics' old segments to tiered storage here: s3://bucket/prefix or file:///dir [default: none].
    #[arg(long, env = "KAPPA_TIERED_STORAGE_URL")]
    pub tiered_storage_url: Option<String>,
    /// How often each task is checkpointed, ms [default: 10000].
    #[arg(long, env = "KAPPA_CHECKPOINT_INTERVAL_MS")]
    pub checkpoint_interval_ms: Option<u64>,
    /// Keep a warm standby of each view partition on another node: 0 or 1 [default: 0].
    #[arg(long, env = "KAPPA_STANDBY_REPLICAS")]
    pub standby_replicas: Option<u32>,
}

/// A retention setting given as a flag: milliseconds, or `none` (forever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<u64>);

fn parse_retention(s: &str) -> Result<Retention, String> {
    match s {
        "none" => Ok(Retention(None)),
        _ => match s.parse::<u64>() {
            Ok(0) | Err(_) => Err(format!(
                "expected a positive number of milliseconds or `none`, got {s:?}"
            )),
            Ok(ms) => Ok(Retention(Some(ms))),
        },
    }
}

fn parse_fsync(s: &str) -> Result<FsyncPolicy, String> {
    match s {
        "always" => Ok(FsyncPolicy::Always),
        "interval" => Ok(FsyncPolicy::Interval),
        "never" => Ok(FsyncPolicy::Never),
        other => Err(format!("expected always, interval or never, got {other:?}")),
    }
}

impl ServerConfig {
    /// Checks one produced record (key length if it has a key, value
    /// length, header count) against the per-record limits, whichever
    /// protocol brought it; names the limit and says why.
    pub fn check_record(
        &self,
        key: Option<usize>,
        value: usize,
        headers: usize,
    ) -> Result<(), (RecordLimit, String)> {
        if value > self.max_value_bytes {
            return Err((
                RecordLimit::Value,
                format!(
                    "value is {value} bytes, the limit is {} (max_value_bytes)",
                    self.max_value_bytes
                ),
            ));
        }
        if let Some(key) = key.filter(|k| *k > self.max_key_bytes) {
            return Err((
                RecordLimit::Key,
                format!(
                    "key is {key} bytes, the limit is {} (max_key_bytes)",
                    self.max_key_bytes
                ),
            ));
        }
        if headers > self.max_headers_per_record {
            return Err((
                RecordLimit::Headers,
                format!(
                    "{headers} headers, the limit is {} (max_headers_per_record)",
                    self.max_headers_per_record
                ),
            ));
        }
        Ok(())
    }

    /// Defaults, then the file (if any), then the overrides; validated.
    pub fn load(file: Option<&Path>, overrides: &Overrides) -> anyhow::Result<ServerConfig> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading config file {}", path.display()))?;
                toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?
            }
            None => ServerConfig::default(),
        };
        let o = overrides.clone();
        macro_rules! apply {
            ($($field:ident),*) => { $(if let Some(v) = o.$field { config.$field = v; })* };
        }
        apply!(
            data_dir,
            listen,
            log_format,
            auto_create_topics,
            default_partitions,
            default_fsync,
            max_body_bytes,
            max_records_per_request,
            max_connections,
            max_new_connections_per_ip,
            allowed_hosts,
            auto_create_max_partitions,
            view_swap_max_lag,
            view_grace_ms,
            view_keep_versions,
            view_commit_interval_ms,
            view_commit_when_caught_up,
            processor_threads,
            auth,
            allowed_origins
        );
        if o.insecure_no_auth {
            config.insecure_no_auth = true;
        }
        if o.tls_cert.is_some() {
            config.tls_cert = o.tls_cert;
            config.tls_key = o.tls_key;
        }
        if let Some(Retention(ms)) = o.default_retention_ms {
            config.default_retention_ms = ms;
        }
        if o.kafka_listen.is_some() {
            config.kafka_listen = o.kafka_listen;
        }
        if o.pg_listen.is_some() {
            config.pg_listen = o.pg_listen;
        }
        for flag in &o.clusters {
            let (name, cluster) = ClusterConfig::parse_flag(flag)?;
            config.clusters.insert(name, cluster);
        }
        if o.cluster_id.is_some() {
            config.cluster_id = o.cluster_id;
        }
        if o.advertise_url.is_some() {
            config.advertise_url = o.advertise_url;
        }
        if o.coordination_cluster.is_some() {
            config.coordination_cluster = o.coordination_cluster;
        }
        if o.checkpoint_url.is_some() {
            config.checkpoint_url = o.checkpoint_url;
        }
        if o.tiered_storage_url.is_some() {
            config.tiered_storage_url = o.tiered_storage_url;
        }
        if let Some(ms) = o.checkpoint_interval_ms {
            config.checkpoint_interval_ms = ms;
        }
        if let Some(n) = o.standby_replicas {
            config.standby_replicas = n;
        }
        config.validate()?;
        Ok(config)
    }

    /// The configured cluster holding the Kappa cluster's control topic:
    /// `coordination_cluster`, else the only configured cluster.
    pub fn coordination_cluster_name(&self) -> anyhow::Result<&str> {
        match &self.coordination_cluster {
            Some(name) if self.clusters.contains_key(name) => Ok(name),
            Some(name) => bail!("coordination_cluster {name:?} is not a configured cluster"),
            None if self.clusters.len() == 1 => {
                Ok(self.clusters.keys().next().map_or("", String::as_str))
            }
            None => bail!(
                "cluster_id needs a Kafka cluster for its control topic: configure one cluster, or name one as coordination_cluster"
            ),
        }
    }

    /// Checks every range.
    pub fn validate(&self) -> anyhow::Result<()> {
        for (name, cluster) in &self.clusters {
            kappa_cluster::validate_name(name)?;
            cluster.validate(name)?;
        }
        if let Some(id) = &self.cluster_id {
            kappa_cluster::validate_name(id).map_err(|e| anyhow::anyhow!("cluster_id: {e}"))?;
            match &self.advertise_url {
                Some(url) if url.starts_with("http://") || url.starts_with("https://") => {}
                Some(url) => bail!("advertise_url must be an http:// or https:// URL, got {url:?}"),
                None => {
                    bail!("cluster_id needs advertise_url: where the other nodes reach this one")
                }
            }
            self.coordination_cluster_name()?;
        }
        if self.checkpoint_url.is_some() && self.cluster_id.is_none() {
            bail!("checkpoint_url is for the nodes of a Kappa cluster: give cluster_id too");
        }
        if self.checkpoint_interval_ms < 100 {
            bail!("checkpoint_interval_ms must be at least 100");
        }
        if self.standby_replicas > 1 {
            bail!(
                "standby_replicas must be 0 or 1 (one warm copy per partition), got {}",
                self.standby_replicas
            );
        }
        if self.standby_replicas > 0 && self.cluster_id.is_none() {
            bail!("standby_replicas is for the nodes of a Kappa cluster: give cluster_id too");
        }
        if self.default_partitions == 0
            || self.default_partitions > kappa_log::MAX_PARTITIONS_PER_TOPIC
        {
            bail!(
                "default_partitions must be in 1..={}",
                kappa_log::MAX_PARTITIONS_PER_TOPIC
            );
        }
        if self.auto_create_max_partitions < self.default_partitions {
            bail!("auto_create_max_partitions must be at least default_partitions");
        }
        if let Some(host) = self.allowed_hosts.iter().find(|h| h.trim().is_empty()) {
            bail!("allowed_hosts holds an empty name: {host:?}");
        }
        if self.max_body_bytes < 1024 || self.max_body_bytes > 1 << 30 {
            bail!("max_body_bytes must be in 1024..=1073741824");
        }
        if self.max_records_per_request == 0 || self.max_records_per_request > 100_000 {
            bail!("max_records_per_request must be in 1..=100000");
        }
        if self.max_connections == 0 {
            bail!("max_connections must be positive");
        }
        if self.max_new_connections_per_ip == 0 {
            bail!("max_new_connections_per_ip must be positive");
        }
        if self.header_read_timeout_ms == 0
            || self.request_body_timeout_ms == 0
            || self.first_request_timeout_ms == 0
            || self.retention_check_interval_ms == 0
        {
            bail!("timeouts must be positive");
        }
        if self.idempotency_window_ms == 0 {
            bail!("idempotency_window_ms must be positive");
        }
        if self.cleaner_buffer_bytes < 1024 {
            bail!("cleaner_buffer_bytes must be at least 1024");
        }
        if !(0.0..=1.0).contains(&self.min_cleanable_dirty_ratio) {
            bail!("min_cleanable_dirty_ratio must be in 0..=1");
        }
        if self.cleaner_io_bytes_per_sec == Some(0) {
            bail!("cleaner_io_bytes_per_sec must be positive (leave it out for no limit)");
        }
        if self.append_queue_bytes < self.max_body_bytes * 2 {
            bail!("append_queue_bytes must be at least twice max_body_bytes");
        }
        if self.view_grace_ms > 7 * 24 * 3_600_000 {
            bail!("view_grace_ms must be at most 604800000 (7 days)");
        }
        let max_keep = kappa_processor::sql::MAX_KEEP_VERSIONS;
        if self.view_keep_versions > max_keep {
            bail!("view_keep_versions must be at most {max_keep}");
        }
        if !(1..=60_000).contains(&self.view_commit_interval_ms) {
            bail!("view_commit_interval_ms must be in 1..=60000");
        }
        let max_threads = kappa_processor::sql::MAX_PARALLELISM;
        if !(1..=max_threads).contains(&self.processor_threads) {
            bail!("processor_threads must be in 1..={max_threads}");
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            bail!("tls_cert and tls_key go together: give both (HTTPS) or neither (plain HTTP)");
        }
        if let Some(origin) = self.allowed_origins.iter().find(|o| {
            !(o.starts_with("http://") || o.starts_with("https://"))
                    || o.ends_with('/')
                    // Browsers leave a default port out of Origin.
                    || (o.starts_with("https://") && o.ends_with(":443"))
                    || (o.starts_with("http://") && o.ends_with(":80"))
        }) {
            bail!(
                "allowed_origins entries are origins like https://dash.example.com \
                 (scheme and host, a port only if not the scheme's default, no path): \
                 got {origin:?}"
            );
        }
        if !(1024..=1 << 30).contains(&self.kafka_max_request_bytes) {
            bail!("kafka_max_request_bytes must be in 1024..=1073741824");
        }
        if let Some(kafka) = self.kafka_listen {
            if self.auth == AuthMode::None && !kafka.ip().is_loopback() && !self.insecure_no_auth {
                bail!(
                    "refusing to serve Kafka on {kafka} with auth = \"none\": anyone who can reach \
                     it could read and write every topic. Use auth = \"tokens\" (clients log in \
                     with SASL/PLAIN, the token as password), a loopback address, or \
                     --insecure-no-auth"
                );
            }
        }
        if let Some(pg) = self.pg_listen {
            if self.auth == AuthMode::None && !pg.ip().is_loopback() && !self.insecure_no_auth {
                bail!(
                    "refusing to serve PostgreSQL clients on {pg} with auth = \"none\": anyone \
                     who can reach it could read every view and run any statement. Use auth = \
                     \"tokens\" (clients log in with a token as the password), a loopback \
                     address, or --insecure-no-auth"
                );
            }
        }
        if self.auth == AuthMode::None && !self.listen.ip().is_loopback() && !self.insecure_no_auth
        {
            bail!(
                "refusing to listen on {} with auth = \"none\": anyone who can reach it could \
                 read, write and delete everything. Use --auth tokens (README, \"Security\"), \
                 listen on a loopback address, or pass --insecure-no-auth \
                 (KAPPA_INSECURE_NO_AUTH=true) if a proxy in front authenticates every request",
                self.listen
            );
        }
        Ok(())
    }

    /// What every topic this server creates gets unless told otherwise: a
    /// `POST /v1/topics` without the setting, a topic auto-created by a
    /// produce, a statement's topic, and a processor's output topics (a
    /// derived stream's, a `LATE_TOPIC`). The one topic-defaults policy.
    pub fn topic_defaults(&self) -> kappa_log::TopicConfig {
        kappa_log::TopicConfig {
            partitions: self.default_partitions,
            fsync: self.default_fsync,
            retention_ms: self.default_retention_ms,
            ..kappa_log::TopicConfig::default()
        }
    }

    /// The view manager's configuration this server config implies.
    pub fn manager_config(&self) -> crate::views::ManagerConfig {
        crate::views::ManagerConfig {
            data_dir: self.data_dir.clone(),
            swap_max_lag: self.view_swap_max_lag,
            grace_ms: self.view_grace_ms,
            keep_versions: self.view_keep_versions,
            commit_interval_ms: self.view_commit_interval_ms,
            commit_when_caught_up: self.view_commit_when_caught_up,
            processor_threads: self.processor_threads,
            topic_defaults: self.topic_defaults(),
            clock: crate::views::Clock::system(),
            clusters: None,
            assignments: None,
            checkpoints: None,
        }
    }

    /// The log configuration this server config implies (opening the
    /// tiered store, if one is set).
    pub fn log_config(&self) -> anyhow::Result<kappa_log::LogConfig> {
        let remote_store = match &self.tiered_storage_url {
            Some(url) => {
                let store = kappa_cluster::ObjectSegmentStore::open(url)
                    .map_err(|e| anyhow::anyhow!("tiered_storage_url: {e}"))?;
                Some(std::sync::Arc::new(store) as std::sync::Arc<dyn kappa_log::SegmentStore>)
            }
            None => None,
        };
        Ok(kappa_log::LogConfig {
            append_queue_wait_ms: self.append_queue_wait_ms,
            append_queue_bytes: self.append_queue_bytes,
            // One request body may become one batch (JSON text is larger than
            // the stored records, so this always fits).
            max_batch_bytes: self.max_body_bytes * 2,
            // The records of one append stay the log's own limit, not
            // `max_records_per_request` (which the HTTP route checks): a
            // derived stream's output appends up to 4 MiB of records at a
            // time (`kappa_processor`'s sequenced outputs), and each is
            // synced on its own, so appends of 10,000 small records synced
            // its output several times more often.
            retention_check_interval_ms: self.retention_check_interval_ms,
            idempotency_window_ms: self.idempotency_window_ms,
            cleaner_buffer_bytes: self.cleaner_buffer_bytes,
            min_cleanable_dirty_ratio: self.min_cleanable_dirty_ratio,
            cleaner_io_bytes_per_sec: self.cleaner_io_bytes_per_sec,
            remote_store,
            ..kappa_log::LogConfig::new(&self.data_dir)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logs_append_limit_is_not_the_http_request_limit() {
        let c = ServerConfig::load(None, &Overrides::default()).unwrap();
        assert_eq!(c.max_records_per_request, 10_000);
        let log = c.log_config().unwrap();
        let default = kappa_log::LogConfig::new(&c.data_dir);
        assert_eq!(log.max_batch_records, default.max_batch_records);
        assert!(log.max_batch_records > c.max_records_per_request);
    }

    #[test]
    fn layers_apply_in_order_defaults_file_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kappa.toml");
        std::fs::write(
            &file,
            "data_dir = \"/from/file\"\ndefault_partitions = 4\nmax_connections = 7\n",
        )
        .unwrap();
        let overrides = Overrides {
            max_connections: Some(9),
            ..Default::default()
        };
        let c = ServerConfig::load(Some(&file), &overrides).unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/from/file"));
        assert_eq!(c.default_partitions, 4);
        assert_eq!(c.max_connections, 9);
        assert_eq!(c.listen, ServerConfig::default().listen);
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kappa.toml");
        std::fs::write(&file, "no_such_key = 1\n").unwrap();
        assert!(ServerConfig::load(Some(&file), &Overrides::default()).is_err());
        let bad = Overrides {
            default_partitions: Some(0),
            ..Default::default()
        };
        assert!(ServerConfig::load(None, &bad).is_err());
    }

    #[test]
    fn no_auth_on_a_public_address_needs_the_override() {
        let public = Overrides {
            listen: Some("0.0.0.0:8080".parse().unwrap()),
            ..Default::default()
        };
        let error = ServerConfig::load(None, &public).unwrap_err().to_string();
        assert!(error.contains("--insecure-no-auth"), "{error}");
        assert!(error.contains("0.0.0.0:8080"), "{error}");
        let overridden = Overrides {
            insecure_no_auth: true,
            ..public.clone()
        };
        ServerConfig::load(None, &overridden).unwrap();
        let tokens = Overrides {
            auth: Some(AuthMode::Tokens),
            ..public
        };
        ServerConfig::load(None, &tokens).unwrap();
    }

    #[test]
    fn tls_needs_both_files_and_origins_are_origins() {
        let mut config = ServerConfig {
            tls_cert: Some("cert.pem".into()),
            ..ServerConfig::default()
        };
        assert!(config.validate().is_err());
        config.tls_key = Some("key.pem".into());
        config.validate().unwrap();
        config.allowed_origins = vec!["https://dash.example.com/".into()];
        assert!(config.validate().is_err());
        config.allowed_origins = vec!["https://dash.example.com:443".into()];
        assert!(config.validate().is_err());
        config.allowed_origins = vec!["https://dash.example.com:8443".into()];
        config.validate().unwrap();
    }

    #[test]
    fn a_public_pg_listener_without_auth_needs_the_override() {
        let mut config = ServerConfig {
            pg_listen: Some("0.0.0.0:5432".parse().unwrap()),
            ..ServerConfig::default()
        };
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.contains("PostgreSQL clients on 0.0.0.0:5432"),
            "{error}"
        );
        config.auth = AuthMode::Tokens;
        config.validate().unwrap();
        config.auth = AuthMode::None;
        config.pg_listen = Some("127.0.0.1:5432".parse().unwrap());
        config.validate().unwrap();
    }

    #[test]
    fn defaults_bind_to_loopback() {
        assert!(ServerConfig::default().listen.ip().is_loopback());
        ServerConfig::default().validate().unwrap();
    }
}
