//! The wire types of Kappa's HTTP API (docs/http-api.md): every request
//! body and response the server answers with, in one place for the
//! server (which serializes them), the `kappa` CLI and the tools (which
//! read them) and the served OpenAPI document (derived from them with
//! `utoipa::ToSchema`).
//!
//! The crate depends on serde and utoipa only — no RocksDB, no tokio, no
//! axum — so a client builds it in seconds. The server's own types (the
//! log's `TopicConfig`, the processor's `StartFrom`, the catalog's
//! `Failure`, ..) stay free to change: the server converts them into these
//! (`kappa_server::dto`). Changing a field here changes the API: the
//! contract test (`server/tests/http_contract.rs`) fails until
//! docs/http-api.md says so.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

pub mod admin;
pub mod clusters;
pub mod statements;

/// Distinguishes a missing field (`None`) from an explicit null (`Some(None)`).
fn double_option<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

// ---------------------------------------------------------------------------
// Topics
// ---------------------------------------------------------------------------

/// When the writer makes appended bytes durable with `fdatasync`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum FsyncPolicy {
    /// Acknowledged after an fdatasync that covers the append (survives
    /// power loss).
    #[default]
    Always,
    /// Acknowledged once written; fdatasync every `fsync_interval_ms`.
    Interval,
    /// Acknowledged once written; the OS writes back when it likes.
    Never,
}

/// How a topic's batches are stored (`log/FORMAT.md` §2.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CompressionType {
    /// As encoded.
    #[default]
    None,
    /// Each batch's records compressed with zstd.
    Zstd,
    /// Each batch's records compressed with lz4.
    Lz4,
}

/// What happens to a topic's old records (Kafka's `cleanup.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub enum CleanupPolicyType {
    /// Retention deletes old segments (when it is set).
    #[default]
    #[serde(rename = "delete")]
    Delete,
    /// The latest record of each key is kept; retention is not applied.
    #[serde(rename = "compact")]
    Compact,
    /// Both.
    #[serde(rename = "compact,delete")]
    CompactDelete,
}

/// `POST /v1/topics` body. Only `name` is required; the others default to
/// the server's topic defaults.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    /// Topic name: 1..=249 characters of `[A-Za-z0-9._-]`, not `.` or `..`.
    pub name: String,
    /// Partitions (the server's `default_partitions` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partitions: Option<u32>,
    /// Segment size before roll (bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_bytes: Option<u64>,
    /// Segment age before roll (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub segment_ms: Option<u64>,
    /// Retention by age (ms); null = forever; absent = the server's
    /// `default_retention_ms`.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub retention_ms: Option<Option<u64>>,
    /// Retention by size (bytes); null = no limit.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub retention_bytes: Option<Option<u64>>,
    /// fsync policy (the server's `default_fsync` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsync: Option<FsyncPolicy>,
    /// Interval of the `interval` policy (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fsync_interval_ms: Option<u64>,
    /// How batches are stored (`none` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compression_type: Option<CompressionType>,
    /// What happens to old records (`delete` when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleanup_policy: Option<CleanupPolicyType>,
    /// How long a compacted topic keeps tombstones (ms; 1 day when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete_retention_ms: Option<u64>,
    /// How long a record stays uncompacted (ms; 0 when absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_compaction_lag_ms: Option<u64>,
    /// Move sealed segments to tiered storage once their newest record is
    /// this old (ms); needs the server's `tiered_storage_url`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_retention_ms: Option<u64>,
    /// Move the oldest sealed segments to tiered storage while a
    /// partition's local bytes exceed this.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_retention_bytes: Option<u64>,
    /// Keep only each partition's newest this-many bytes in the page cache
    /// (under `fsync` `always`); absent = the page cache is the operating
    /// system's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_tail_bytes: Option<u64>,
}

/// `PATCH /v1/topics/{topic}`: the settings to change (retention,
/// compression, compaction and the page cache tail: partitions cannot change, segment and fsync settings are
/// fixed at creation). A field left out is unchanged; null removes the
/// limit.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlterTopic {
    /// New retention by age (ms); null = forever.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub retention_ms: Option<Option<u64>>,
    /// New retention by size (bytes); null = no limit.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub retention_bytes: Option<Option<u64>>,
    /// How the batches appended from now on are stored (those stored stay
    /// as they are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compression_type: Option<CompressionType>,
    /// New cleanup policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleanup_policy: Option<CleanupPolicyType>,
    /// New tombstone retention (ms); null = the default (1 day).
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub delete_retention_ms: Option<Option<u64>>,
    /// New compaction lag (ms); null = none.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub min_compaction_lag_ms: Option<Option<u64>>,
    /// New local retention by age (ms); null = segments stay local.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub local_retention_ms: Option<Option<u64>>,
    /// New local retention by size (bytes); null = no limit.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub local_retention_bytes: Option<Option<u64>>,
    /// New page cache tail (bytes); null = the page cache is the
    /// operating system's.
    #[serde(
        default,
        deserialize_with = "double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(value_type = Option<u64>)]
    pub cached_tail_bytes: Option<Option<u64>>,
}

/// A topic's settings as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicConfigOut {
    /// Partitions.
    pub partitions: u32,
    /// Segment size before roll (bytes).
    pub segment_bytes: u64,
    /// Segment age before roll (ms).
    pub segment_ms: u64,
    /// Retention by age (ms); null = forever.
    pub retention_ms: Option<u64>,
    /// Retention by size; null = no limit.
    pub retention_bytes: Option<u64>,
    /// fsync policy.
    pub fsync: FsyncPolicy,
    /// Interval of the `interval` policy (ms).
    pub fsync_interval_ms: u64,
    /// How batches appended now are stored (`none` from a server that
    /// does not say).
    #[serde(default)]
    pub compression_type: CompressionType,
    /// What happens to old records (`delete` from a server that does not
    /// say).
    #[serde(default)]
    pub cleanup_policy: CleanupPolicyType,
    /// How long a compacted topic keeps tombstones (ms).
    #[serde(default)]
    pub delete_retention_ms: u64,
    /// How long a record stays uncompacted (ms).
    #[serde(default)]
    pub min_compaction_lag_ms: u64,
    /// Age at which sealed segments move to tiered storage (ms); null =
    /// they stay local.
    #[serde(default)]
    pub local_retention_ms: Option<u64>,
    /// Local bytes above which the oldest sealed segments move to tiered
    /// storage; null = no limit.
    #[serde(default)]
    pub local_retention_bytes: Option<u64>,
    /// Each partition's newest bytes kept in the page cache, the older
    /// dropped from it once on disk (derived streams' topics: 8 MiB); null
    /// = the page cache is the operating system's.
    #[serde(default)]
    pub cached_tail_bytes: Option<u64>,
}

/// Offsets and size of one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PartitionOut {
    /// Partition.
    pub partition: u32,
    /// First stored offset.
    pub start_offset: u64,
    /// Offset the next record gets.
    pub end_offset: u64,
    /// Bytes of all segments.
    pub bytes: u64,
    /// Segments.
    pub segment_count: usize,
    /// Bytes of the segments in tiered storage (counted in `bytes` too);
    /// left out when none are.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub remote_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// `GET /v1/topics/{topic}` (and the answer of create and alter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicOut {
    /// Name.
    pub name: String,
    /// Settings.
    pub config: TopicConfigOut,
    /// Per partition.
    pub partitions: Vec<PartitionOut>,
}

/// `GET /v1/topics`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TopicsOut {
    /// Every topic, by name.
    pub topics: Vec<TopicOut>,
}

// ---------------------------------------------------------------------------
// Produce and read
// ---------------------------------------------------------------------------

/// A string that borrows from the request body unless it holds escapes.
/// (serde borrows a `Cow<str>` field, but not one inside an `Option`: the
/// newtype makes the borrow happen there too.)
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(value_type = String)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// One record of a produce request; borrows from the request body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordIn<'a> {
    /// Key (partitioning: records with one key go to one partition).
    #[serde(default, borrow, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub key: Option<Text<'a>>,
    /// Any JSON value, kept as its text.
    #[serde(borrow)]
    #[schema(value_type = serde_json::Value)]
    pub value: &'a RawValue,
    /// Timestamp in ms (the append time when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<i64>,
    /// Headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Explicit partition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
}

/// `POST /v1/topics/{topic}/records` JSON body.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProduceBody<'a> {
    /// The records.
    #[serde(borrow)]
    pub records: Vec<RecordIn<'a>>,
}

/// Where a produced record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProducedOut {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// Produce answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProduceResponse {
    /// Topic.
    pub topic: String,
    /// One entry per record, in request order.
    pub records: Vec<ProducedOut>,
    /// True when an idempotent retry appended nothing.
    pub duplicate: bool,
    /// True when this produce created the topic (`auto_create_topics`);
    /// absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub created: bool,
}

/// How a key, value or header that is not shown as is was encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Encoding {
    /// The bytes are UTF-8 text but not JSON: the value is that text.
    Text,
    /// Any other bytes: the standard base64 of them.
    Base64,
}

/// A record as answered to readers.
///
/// Every stored byte comes back: a value that is JSON is answered as that
/// JSON; one that is not (written by a Kafka client, say) is answered as a
/// string with `value_encoding` saying how: `"text"` (the UTF-8 text as
/// is) or `"base64"` (any other bytes). Keys and header values are strings
/// when UTF-8; otherwise base64, with `key_encoding: "base64"` or the
/// header's name in `base64_headers`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RecordOut<'a> {
    /// Partition (group reads only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// Offset.
    pub offset: u64,
    /// Timestamp (ms).
    pub timestamp: i64,
    /// Key (null if none).
    #[schema(value_type = Option<String>)]
    pub key: Option<Cow<'a, str>>,
    /// `"base64"` when the key is not UTF-8 (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_encoding: Option<Encoding>,
    /// The value: its JSON, or a string per `value_encoding`.
    #[schema(value_type = serde_json::Value)]
    pub value: Cow<'a, RawValue>,
    /// `"text"` or `"base64"` when the value is not JSON (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_encoding: Option<Encoding>,
    /// Headers.
    #[schema(value_type = BTreeMap<String, String>)]
    pub headers: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    /// Names of headers whose values are base64 (not UTF-8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<String>)]
    pub base64_headers: Vec<Cow<'a, str>>,
}

/// Partition read answer. (`topic` borrows: topic names hold no character
/// JSON escapes, so a client can read it borrowed from the body.)
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ReadResponse<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Partition.
    pub partition: u32,
    /// Records.
    pub records: Vec<RecordOut<'a>>,
    /// Where to read next.
    pub next_offset: u64,
    /// End offset when read.
    pub high_watermark: u64,
    /// First stored offset.
    pub start_offset: u64,
}

/// A (partition, offset) pair.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PartitionOffset {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// Group read answer.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct GroupReadResponse<'a> {
    /// Group.
    #[schema(value_type = String)]
    #[serde(borrow)]
    pub group: Cow<'a, str>,
    /// Topic.
    pub topic: &'a str,
    /// Records of all partitions.
    pub records: Vec<RecordOut<'a>>,
    /// Position after this read, per partition.
    pub next_offsets: Vec<PartitionOffset>,
}

/// `POST /v1/groups/{group}/offsets` body.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitRequest {
    /// Topic.
    pub topic: String,
    /// Offsets to commit.
    pub offsets: Vec<PartitionOffset>,
}

/// Offsets answer of commit and reset.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OffsetsResponse {
    /// Group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Offsets now committed.
    pub offsets: Vec<PartitionOffset>,
}

/// `POST /v1/groups/{group}/reset` body.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Topic.
    pub topic: String,
    /// Target: `"earliest"`, `"latest"`, `{"timestamp": ms}` or `{"offset": n}`.
    pub to: serde_json::Value,
}

/// `GET /v1/groups`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupsOut {
    /// Every group with committed offsets, by name.
    pub groups: Vec<String>,
}

/// `GET /v1/groups/{group}/offsets`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupOffsetsOut {
    /// Group.
    pub group: String,
    /// Per topic the group committed on (or the one asked for).
    pub topics: Vec<GroupTopicOffsets>,
}

/// A group's position on one topic.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupTopicOffsets {
    /// Topic.
    pub topic: String,
    /// Per partition.
    pub partitions: Vec<GroupPartitionOffsets>,
}

/// A group's position on one partition.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GroupPartitionOffsets {
    /// Partition.
    pub partition: u32,
    /// Committed offset; null when the group never committed here.
    pub committed: Option<u64>,
    /// First stored offset.
    pub start_offset: u64,
    /// End offset.
    pub end_offset: u64,
    /// End minus the group's position.
    pub lag: u64,
}

// ---------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------

/// One input partition of a view version.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ViewPartitionOut {
    /// Partition.
    pub partition: u32,
    /// Committed input offset (the next record to process).
    pub committed: u64,
    /// End offset of the input.
    pub end: u64,
    /// `end - committed`.
    pub lag: u64,
}

/// A live version of a view.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct VersionOut {
    /// Version number.
    pub version: u64,
    /// Its SQL (null when defined by a plan).
    pub sql: Option<String>,
    /// When it started (ms).
    pub started_ms: i64,
    /// True while its processor runs.
    pub running: bool,
    /// Per input partition.
    pub partitions: Vec<ViewPartitionOut>,
    /// Sum of the partitions' lag.
    pub lag: u64,
    /// Committed watermark (ms), null before any event.
    pub watermark: Option<i64>,
    /// Approximate bytes of its state and rows.
    pub state_bytes: u64,
    /// Input records processed since this server started it.
    pub processed: u64,
    /// Late records dropped or sent aside since this server started it.
    pub late: u64,
    /// Records skipped (not JSON, no event time) since this server started it.
    pub invalid: u64,
    /// Workers of each kind it runs with (its view's `PARALLELISM`, else
    /// the server's `processor_threads`); 1 = one thread.
    pub parallelism: u32,
    /// Its workers while it runs in parallel (empty on one thread): source
    /// workers with the partitions they take and their lag, key-shard
    /// workers with the key groups they own.
    pub workers: Vec<WorkerOut>,
    /// True until it has reached its input's end once (lag within
    /// `view_swap_max_lag`; for a build, its targets reached): its rows
    /// are partial meanwhile.
    pub catching_up: bool,
    /// True when it has not caught up and its lag grew over the last
    /// minute: it processes fewer records than arrive.
    pub not_keeping_up: bool,
    /// A served version still catching up (its first build): how far it
    /// is, like a rebuild's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<BuildProgressOut>,
}

/// What a worker of a parallel version does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", tag = "role")]
pub enum WorkerRole {
    /// Decodes, filters and routes the batches of these input partitions.
    Source {
        /// The input partitions whose batches it takes.
        partitions: Vec<u32>,
    },
    /// Applies the events of the groups in these key groups (of 128).
    Shard {
        /// First key group owned.
        first_key_group: u32,
        /// End (exclusive) of the key groups owned.
        end_key_group: u32,
    },
}

/// One worker of a version running in parallel.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkerOut {
    /// `source-{i}` or `shard-{i}`.
    pub worker: String,
    /// `role`: `"source"` with `partitions`, or `"shard"` with
    /// `first_key_group` and `end_key_group` (of 128 key groups).
    #[serde(flatten)]
    pub role: WorkerRole,
    /// Records (source) or events (shard) handled since this server
    /// started the version.
    pub events: u64,
    /// Of those, per second since it started.
    pub rate_per_second: f64,
    /// Source workers: records not yet committed in the partitions they
    /// take (null for shards).
    pub lag: Option<u64>,
}

/// How far a build is.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildProgressOut {
    /// Records processed since the build started.
    pub done: u64,
    /// Records to process in all: `done` + lag.
    pub total: u64,
    /// Records per second over the last seconds.
    pub rate_records_per_second: f64,
    /// Estimated time to catch up (ms), null while unknown.
    pub eta_ms: Option<u64>,
}

/// Where a new version starts reading: `"earliest"`, `"latest"`,
/// `{"timestamp": ms}` or `{"offsets": [n, ..]}` (one per partition).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StartFrom {
    /// The start of every partition.
    #[default]
    Earliest,
    /// The end of every partition (new records only).
    Latest,
    /// The first record at or after this time (ms).
    Timestamp(i64),
    /// These offsets, one per partition.
    Offsets(Vec<u64>),
}

/// The version being built.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BuildOut {
    /// The version.
    #[serde(flatten)]
    pub version: VersionOut,
    /// Where it was asked to start.
    pub start: StartFrom,
    /// `"auto"`: swapped in once caught up; `"manual"`: waits for promote.
    pub swap: SwapMode,
    /// Caught up (reached `target_offsets`, lag within the swap bound): a
    /// manual build waits in this state, following its input.
    pub ready: bool,
    /// Where it started, per partition.
    pub start_offsets: Vec<u64>,
    /// The input's end offsets when it started: it is swapped in after
    /// reaching them, once its lag is at most `view_swap_max_lag`.
    pub target_offsets: Vec<u64>,
    /// Progress.
    pub progress: BuildProgressOut,
}

/// A replaced version, readable with `?version=` until `readable_until_ms`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct GraceOut {
    /// Version number.
    pub version: u64,
    /// Its SQL.
    pub sql: Option<String>,
    /// When it stops being readable (ms).
    pub readable_until_ms: i64,
}

/// Why a version stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Failure {
    /// The version that failed.
    pub version: u64,
    /// The processor's error.
    pub reason: String,
    /// When it was noticed (ms).
    pub at_ms: i64,
    /// True if it was a build (the served version kept serving).
    pub during_build: bool,
}

/// A served version that is down, and its retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Retry {
    /// The version that failed.
    pub version: u64,
    /// Why it failed (or why the last retry failed).
    pub reason: String,
    /// When it first failed (ms).
    pub failed_at_ms: i64,
    /// Retries made so far.
    pub attempts: u32,
    /// When the next retry is due (ms).
    pub next_attempt_ms: i64,
}

/// What a replay from earliest would read, per input topic.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
pub struct ReplayHorizon {
    /// True if the log still holds every input record the version saw: a
    /// replay from earliest reads all of it.
    pub complete: bool,
    /// The stream input and, for a join, the table it reads.
    pub topics: Vec<TopicHorizon>,
}

/// One input topic's horizon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TopicHorizon {
    /// Topic.
    pub topic: String,
    /// `"input"` (the stream) or `"table"` (a join's table, always read
    /// from its start).
    pub role: String,
    /// Per partition.
    pub partitions: Vec<PartitionHorizon>,
}

/// One partition's horizon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PartitionHorizon {
    /// Partition.
    pub partition: u32,
    /// The earliest offset still in the log.
    pub earliest_offset: u64,
    /// When the record there was appended (ms); null for an empty partition.
    pub earliest_append_ms: Option<i64>,
    /// The first offset the version read.
    pub first_seen: u64,
    /// Records the version saw that the log no longer holds.
    pub missing: u64,
}

/// `GET /v1/views/{view}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ViewOut {
    /// Name.
    pub name: String,
    /// `"table"` (rows you can query) or `"stream"` (records appended to a topic).
    pub kind: String,
    /// SQL of the served version.
    pub sql: Option<String>,
    /// The topic it reads.
    pub source_topic: String,
    /// The Kafka cluster its input topic lives on; absent for the built-in
    /// log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_cluster: Option<String>,
    /// The topic a stream writes.
    pub output_topic: Option<String>,
    /// The Kafka cluster a stream's output topic lives on; absent for the
    /// built-in log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_cluster: Option<String>,
    /// `running`, `catching_up`, `building`, `ready`, `not_keeping_up`,
    /// `waiting_for_source` (its cluster cannot be reached or lacks the
    /// topic) or `failed` (the served version's processor stopped).
    pub status: String,
    /// The version queries read.
    pub served_version: VersionOut,
    /// The version being built, if any.
    pub building_version: Option<BuildOut>,
    /// Replaced versions still readable.
    pub grace_versions: Vec<GraceOut>,
    /// How many replaced versions this view keeps (`KEEP_VERSIONS`, else
    /// the server's `view_keep_versions`).
    pub keep_versions: u32,
    /// For how long each (ms; `VERSION_GRACE`, else `view_grace_ms`).
    pub version_grace_ms: u64,
    /// The last failure.
    pub failure: Option<Failure>,
    /// The served version is down and retried: attempts so far and when
    /// the next one is due.
    pub retry: Option<Retry>,
    /// What a replay from earliest would read now, against what the served
    /// version saw (`complete: false` once retention deleted some of it).
    pub replay_horizon: ReplayHorizon,
}

/// `GET /v1/views`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ViewsOut {
    /// Every view and derived stream, by name.
    pub views: Vec<ViewOut>,
}

/// One row of a view.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RowOut {
    /// The row's key.
    pub key: String,
    /// Window start (ms), windowed views only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<i64>,
    /// Window end (ms, exclusive), windowed views only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<i64>,
    /// The row's columns.
    pub row: serde_json::Value,
}

/// Where rows were read.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct AsOfOut {
    /// Committed input offset per partition: every record before it is in the rows.
    pub offsets: Vec<PartitionOffset>,
    /// Committed watermark (ms), null before any event.
    pub watermark: Option<i64>,
}

/// `GET /v1/views/{view}/rows`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RowsOut {
    /// View.
    pub view: String,
    /// Version read.
    pub version: u64,
    /// The view's columns in SELECT order: the keys of each row's `row`
    /// (JSON objects do not keep an order).
    pub columns: Vec<String>,
    /// The rows, in key (then window start) order.
    pub rows: Vec<RowOut>,
    /// Give as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// Input position of the rows.
    pub as_of: AsOfOut,
    /// Present (true) while the version read has not yet reached its
    /// input's end once: the rows are partial.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub catching_up: bool,
}

/// A rows cursor (a store key) as answered: lowercase hex.
pub fn cursor_text(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A cursor given back by a client; `None` unless it is one
/// [`cursor_text`] could have answered (hex, at most 32 KiB of key).
pub fn cursor_bytes(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 64 * 1024 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// `POST /v1/views/{view}/replay` body (an empty body means all defaults).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// `"earliest"` (default), `"latest"`, `{"timestamp": ms}` or `{"offsets": [n, ..]}`.
    #[serde(default)]
    pub from: StartFrom,
    /// Replay even though the log no longer holds all the input the served
    /// version saw (refused with `409 history_truncated` otherwise).
    #[serde(default)]
    pub allow_truncated: bool,
    /// `"auto"` (default): swapped in once caught up; `"manual"`: waits,
    /// following its input, for `POST /v1/views/{view}/promote`.
    #[serde(default)]
    pub swap: SwapMode,
}

/// When a replayed version takes over.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum SwapMode {
    /// Once caught up.
    #[default]
    Auto,
    /// On `promote`.
    Manual,
}

/// `POST /v1/views/{view}/replay` answer (`202`): `building_version` for a
/// table, `served_version` for a derived stream (which takes over at
/// once); neither when nothing changed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReplayOut {
    /// View.
    pub view: String,
    /// The version being built (a table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub building_version: Option<u64>,
    /// The version now served (a derived stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_version: Option<u64>,
    /// Where the new version starts.
    pub from: StartFrom,
}

/// `POST /v1/views/{view}/promote` and `/rollback` answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ServedOut {
    /// View.
    pub view: String,
    /// The version now served.
    pub served_version: u64,
    /// The version served before.
    pub previous_version: u64,
}

/// One side of a diff: a version and where its rows were read.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DiffSide {
    /// Version.
    pub version: u64,
    /// Input position of its rows.
    pub as_of: DiffAsOf,
}

/// A version's committed input position, as a diff answers it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DiffAsOf {
    /// Committed input offset per partition (index = partition).
    pub offsets: Vec<u64>,
    /// Committed watermark (ms), null before any event.
    pub watermark: Option<i64>,
}

/// One row that differs between the two versions of a diff.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DiffExample {
    /// `"added"`, `"removed"` or `"changed"`.
    pub change: String,
    /// The row's key.
    pub key: String,
    /// Window start, for windowed views.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<i64>,
    /// Window end, for windowed views.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<i64>,
    /// The base version's row (null when added).
    pub base: Option<serde_json::Value>,
    /// The candidate version's row (null when removed).
    pub candidate: Option<serde_json::Value>,
}

/// `GET /v1/views/{view}/diff`: how the candidate's rows differ from the
/// base's.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DiffOut {
    /// View.
    pub view: String,
    /// The version compared against (default: the served one).
    pub base: DiffSide,
    /// The version compared (default: the one being built).
    pub candidate: DiffSide,
    /// Rows only the candidate has.
    pub added: u64,
    /// Rows only the base has.
    pub removed: u64,
    /// Rows both have, with different values.
    pub changed: u64,
    /// Rows both have, equal.
    pub unchanged: u64,
    /// The first differences in key order (at most `limit`).
    pub examples: Vec<DiffExample>,
}

#[cfg(test)]
mod tests {
    use utoipa::OpenApi;

    use super::admin::*;
    use super::statements::*;
    use super::*;

    #[derive(OpenApi)]
    #[openapi(components(schemas(
        ErrorBody,
        StatusOut,
        DegradedOut,
        HistoryOut,
        CreateTopic,
        AlterTopic,
        TopicsOut,
        ProduceBody,
        ProduceResponse,
        ReadResponse,
        GroupReadResponse,
        GroupsOut,
        CommitRequest,
        OffsetsResponse,
        GroupOffsetsOut,
        ResetRequest,
        StatementsRequest,
        StatementsOut,
        ViewsOut,
        RowsOut,
        ReplayRequest,
        ReplayOut,
        ServedOut,
        DiffOut,
        CreateToken,
        NewToken,
        TokensOut,
        RevokedOut,
    )))]
    struct Doc;

    #[test]
    fn every_type_a_schema_holds_is_in_the_document() {
        let doc = serde_json::to_value(Doc::openapi()).unwrap();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in [
            "ViewOut",
            "VersionOut",
            "WorkerRole",
            "ReplayHorizon",
            "SqlType",
        ] {
            assert!(schemas.contains_key(name), "{name} missing");
        }
        if let Ok(path) = std::env::var("KAPPA_WIRE_DUMP") {
            std::fs::write(path, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        }
    }

    #[test]
    fn a_view_answer_reads_back() {
        let view = ViewOut {
            name: "v".into(),
            kind: "table".into(),
            sql: None,
            source_topic: "t".into(),
            source_cluster: None,
            output_topic: None,
            output_cluster: None,
            status: "running".into(),
            served_version: VersionOut {
                version: 1,
                sql: None,
                started_ms: 0,
                running: true,
                partitions: Vec::new(),
                lag: 0,
                watermark: None,
                state_bytes: 0,
                processed: 0,
                late: 0,
                invalid: 0,
                parallelism: 2,
                workers: vec![WorkerOut {
                    worker: "shard-0".into(),
                    role: WorkerRole::Shard {
                        first_key_group: 0,
                        end_key_group: 64,
                    },
                    events: 1,
                    rate_per_second: 1.0,
                    lag: None,
                }],
                catching_up: false,
                not_keeping_up: false,
                catch_up: None,
            },
            building_version: None,
            grace_versions: Vec::new(),
            keep_versions: 1,
            version_grace_ms: 0,
            failure: None,
            retry: None,
            replay_horizon: ReplayHorizon::default(),
        };
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["served_version"]["workers"][0]["role"], "shard");
        let back: ViewOut = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
    }
}
