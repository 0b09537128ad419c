//! Wire types of the HTTP API (docs/http-api.md), kept apart from the log's
//! domain types so the API can stay stable while the engine changes.

use std::borrow::Cow;
use std::collections::BTreeMap;

use kappa_log::{FsyncPolicy, Record, TopicConfig};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

pub mod statements;

/// Distinguishes a missing field (`None`) from an explicit null (`Some(None)`).
fn double_option<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// `POST /v1/topics` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateTopic {
    /// Topic name.
    pub name: String,
    /// Partitions.
    pub partitions: Option<u32>,
    /// Segment size before roll.
    pub segment_bytes: Option<u64>,
    /// Segment age before roll.
    pub segment_ms: Option<u64>,
    /// Retention by age; null = forever.
    #[serde(default, deserialize_with = "double_option")]
    pub retention_ms: Option<Option<u64>>,
    /// Retention by size; null = no limit.
    #[serde(default, deserialize_with = "double_option")]
    pub retention_bytes: Option<Option<u64>>,
    /// fsync policy.
    pub fsync: Option<FsyncPolicy>,
    /// Interval of the `interval` policy.
    pub fsync_interval_ms: Option<u64>,
}

impl CreateTopic {
    /// The topic config: defaults overlaid with what the request gives.
    pub fn config(&self, defaults: TopicConfig) -> TopicConfig {
        TopicConfig {
            partitions: self.partitions.unwrap_or(defaults.partitions),
            segment_bytes: self.segment_bytes.unwrap_or(defaults.segment_bytes),
            segment_ms: self.segment_ms.unwrap_or(defaults.segment_ms),
            retention_ms: self.retention_ms.unwrap_or(defaults.retention_ms),
            retention_bytes: self.retention_bytes.unwrap_or(defaults.retention_bytes),
            fsync: self.fsync.unwrap_or(defaults.fsync),
            fsync_interval_ms: self.fsync_interval_ms.unwrap_or(defaults.fsync_interval_ms),
        }
    }
}

/// `PATCH /v1/topics/{topic}`: the settings to change (retention only:
/// partitions cannot change, segment and fsync settings are fixed at
/// creation).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlterTopic {
    /// New retention by age; null = forever.
    #[serde(default, deserialize_with = "double_option")]
    pub retention_ms: Option<Option<u64>>,
    /// New retention by size; null = no limit.
    #[serde(default, deserialize_with = "double_option")]
    pub retention_bytes: Option<Option<u64>>,
}

impl AlterTopic {
    /// The log's change set; `None` when the request changes nothing.
    pub fn changes(&self) -> Option<kappa_log::TopicChanges> {
        if self.retention_ms.is_none() && self.retention_bytes.is_none() {
            return None;
        }
        Some(kappa_log::TopicChanges {
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
        })
    }
}

/// A topic's settings as answered (the log's `TopicConfig`, which is
/// also its on-disk form, stays free to change).
#[derive(Debug, Clone, Serialize)]
pub struct TopicConfigOut {
    /// Partitions.
    pub partitions: u32,
    /// Segment size before roll.
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
}

/// Offsets and size of one partition.
#[derive(Debug, Clone, Serialize)]
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
}

/// `GET /v1/topics/{topic}` (and the answer of create and alter).
#[derive(Debug, Clone, Serialize)]
pub struct TopicOut {
    /// Name.
    pub name: String,
    /// Settings.
    pub config: TopicConfigOut,
    /// Per partition.
    pub partitions: Vec<PartitionOut>,
}

impl From<kappa_log::topic::TopicDescription> for TopicOut {
    fn from(d: kappa_log::topic::TopicDescription) -> Self {
        let c = d.config;
        TopicOut {
            name: d.name,
            config: TopicConfigOut {
                partitions: c.partitions,
                segment_bytes: c.segment_bytes,
                segment_ms: c.segment_ms,
                retention_ms: c.retention_ms,
                retention_bytes: c.retention_bytes,
                fsync: c.fsync,
                fsync_interval_ms: c.fsync_interval_ms,
            },
            partitions: d
                .partitions
                .into_iter()
                .map(|p| PartitionOut {
                    partition: p.partition,
                    start_offset: p.start_offset,
                    end_offset: p.end_offset,
                    bytes: p.bytes,
                    segment_count: p.segment_count,
                })
                .collect(),
        }
    }
}

/// `GET /v1/topics`.
#[derive(Debug, Serialize)]
pub struct TopicsOut {
    /// Every topic, by name.
    pub topics: Vec<TopicOut>,
}

/// A string that borrows from the request body unless it holds escapes.
/// (serde borrows a `Cow<str>` field, but not one inside an `Option`: the
/// newtype makes the borrow happen there too.)
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct Text<'a>(#[serde(borrow)] pub Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// One record of a produce request; borrows from the request body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordIn<'a> {
    /// Key (partitioning).
    #[serde(default, borrow)]
    pub key: Option<Text<'a>>,
    /// Any JSON value, kept as its text.
    #[serde(borrow)]
    pub value: &'a RawValue,
    /// Timestamp in ms.
    #[serde(default)]
    pub timestamp: Option<i64>,
    /// Headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Explicit partition.
    #[serde(default)]
    pub partition: Option<u32>,
}

/// `POST /v1/topics/{topic}/records` JSON body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProduceBody<'a> {
    /// The records.
    #[serde(borrow)]
    pub records: Vec<RecordIn<'a>>,
}

/// Where a produced record landed.
#[derive(Debug, Serialize)]
pub struct ProducedOut {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// Produce answer.
#[derive(Debug, Serialize)]
pub struct ProduceResponse {
    /// Topic.
    pub topic: String,
    /// One entry per record, in request order.
    pub records: Vec<ProducedOut>,
    /// True when an idempotent retry appended nothing.
    pub duplicate: bool,
    /// True when this produce created the topic (`auto_create_topics`);
    /// absent otherwise.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub created: bool,
}

/// A record as answered to readers.
///
/// Every stored byte comes back: a value that is JSON is answered as that
/// JSON; one that is not (written by a Kafka client, say) is answered as a
/// string with `value_encoding` saying how: `"text"` (the UTF-8 text as
/// is) or `"base64"` (any other bytes). Keys and header values are strings
/// when UTF-8; otherwise base64, with `key_encoding: "base64"` or the
/// header's name in `base64_headers`.
#[derive(Debug, Serialize)]
pub struct RecordOut<'a> {
    /// Partition (group reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// Offset.
    pub offset: u64,
    /// Timestamp (ms).
    pub timestamp: i64,
    /// Key (null if none).
    pub key: Option<Cow<'a, str>>,
    /// `"base64"` when the key is not UTF-8 (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_encoding: Option<&'static str>,
    /// The value: its JSON, or a string per `value_encoding`.
    pub value: Cow<'a, RawValue>,
    /// `"text"` or `"base64"` when the value is not JSON (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_encoding: Option<&'static str>,
    /// Headers.
    pub headers: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    /// Names of headers whose values are base64 (not UTF-8).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub base64_headers: Vec<&'a str>,
}

/// `bytes` as a string: the UTF-8 text, or base64 (then true).
fn text_or_base64(bytes: &[u8]) -> (Cow<'_, str>, bool) {
    use base64::Engine;
    match std::str::from_utf8(bytes) {
        Ok(text) => (Cow::Borrowed(text), false),
        Err(_) => (
            Cow::Owned(base64::engine::general_purpose::STANDARD.encode(bytes)),
            true,
        ),
    }
}

impl<'a> RecordOut<'a> {
    /// Wire form of a stored record.
    pub fn from_record(record: &'a Record, partition: Option<u32>) -> Self {
        let (value, value_encoding) = match serde_json::from_slice::<&RawValue>(&record.value) {
            Ok(raw) => (Cow::Borrowed(raw), None),
            Err(_) => {
                let (text, base64) = text_or_base64(&record.value);
                let json = serde_json::to_string(&text).expect("a string serializes");
                (
                    Cow::Owned(RawValue::from_string(json).expect("valid JSON")),
                    Some(if base64 { "base64" } else { "text" }),
                )
            }
        };
        let (key, key_encoding) = match &record.key {
            Some(k) => {
                let (text, base64) = text_or_base64(k);
                (Some(text), base64.then_some("base64"))
            }
            None => (None, None),
        };
        let mut base64_headers = Vec::new();
        let headers = record
            .headers
            .iter()
            .map(|h| {
                let (text, base64) = text_or_base64(&h.value);
                if base64 {
                    base64_headers.push(h.name.as_str());
                }
                (Cow::Borrowed(h.name.as_str()), text)
            })
            .collect();
        RecordOut {
            partition,
            offset: record.offset,
            timestamp: record.timestamp,
            key,
            key_encoding,
            value,
            value_encoding,
            headers,
            base64_headers,
        }
    }
}

/// Partition read answer.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PartitionOffset {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// Group read answer.
#[derive(Debug, Serialize)]
pub struct GroupReadResponse<'a> {
    /// Group.
    pub group: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Records of all partitions.
    pub records: Vec<RecordOut<'a>>,
    /// Position after this read, per partition.
    pub next_offsets: Vec<PartitionOffset>,
}

/// `POST /v1/groups/{group}/offsets` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommitRequest {
    /// Topic.
    pub topic: String,
    /// Offsets to commit.
    pub offsets: Vec<PartitionOffset>,
}

/// Offsets answer of commit and reset.
#[derive(Debug, Serialize)]
pub struct OffsetsResponse {
    /// Group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Offsets now committed.
    pub offsets: Vec<PartitionOffset>,
}

/// `POST /v1/groups/{group}/reset` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    /// Topic.
    pub topic: String,
    /// Target: `"earliest"`, `"latest"`, `{"timestamp": ms}` or `{"offset": n}`.
    pub to: serde_json::Value,
}

// ---------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------

/// One input partition of a view version.
#[derive(Debug, Clone, Serialize)]
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
#[derive(Debug, Clone, Serialize)]
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub catch_up: Option<BuildProgressOut>,
}

/// One worker of a version running in parallel.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerOut {
    /// `source-{i}` or `shard-{i}`.
    pub worker: String,
    /// `role`: `"source"` with `partitions`, or `"shard"` with
    /// `first_key_group` and `end_key_group` (of 128 key groups).
    #[serde(flatten)]
    pub role: kappa_processor::progress::WorkerRole,
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
#[derive(Debug, Clone, Serialize)]
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

/// The version being built.
#[derive(Debug, Clone, Serialize)]
pub struct BuildOut {
    /// The version.
    #[serde(flatten)]
    pub version: VersionOut,
    /// Where it was asked to start: `"earliest"`, `{"timestamp": ms}`, `{"offsets": [..]}`.
    pub start: kappa_processor::runner::StartFrom,
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
#[derive(Debug, Clone, Serialize)]
pub struct GraceOut {
    /// Version number.
    pub version: u64,
    /// Its SQL.
    pub sql: Option<String>,
    /// When it stops being readable (ms).
    pub readable_until_ms: i64,
}

/// `GET /v1/views/{view}`.
#[derive(Debug, Clone, Serialize)]
pub struct ViewOut {
    /// Name.
    pub name: String,
    /// `"table"` (rows you can query) or `"stream"` (records appended to a topic).
    pub kind: &'static str,
    /// SQL of the served version.
    pub sql: Option<String>,
    /// The topic it reads.
    pub source_topic: String,
    /// The topic a stream writes.
    pub output_topic: Option<String>,
    /// `running`, `building` or `failed` (the served version's processor stopped).
    pub status: &'static str,
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
    pub failure: Option<crate::views::catalog::Failure>,
    /// The served version is down and retried: attempts so far and when
    /// the next one is due.
    pub retry: Option<crate::views::retry::Retry>,
    /// What a replay from earliest would read now, against what the served
    /// version saw (`complete: false` once retention deleted some of it).
    pub replay_horizon: crate::views::horizon::ReplayHorizon,
}

/// One row of a view.
#[derive(Debug, Clone, Serialize)]
pub struct RowOut {
    /// The row's key.
    pub key: String,
    /// Window start (ms), windowed views only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_start: Option<i64>,
    /// Window end (ms, exclusive), windowed views only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_end: Option<i64>,
    /// The row's columns.
    pub row: serde_json::Value,
}

/// Where rows were read.
#[derive(Debug, Clone, Serialize)]
pub struct AsOfOut {
    /// Committed input offset per partition: every record before it is in the rows.
    pub offsets: Vec<PartitionOffset>,
    /// Committed watermark (ms), null before any event.
    pub watermark: Option<i64>,
}

/// `GET /v1/views/{view}/rows`.
#[derive(Debug, Clone, Serialize)]
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
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub catching_up: bool,
}

impl RowsOut {
    /// The wire form of a rows answer of `view`.
    pub fn from_answer(view: String, answer: crate::views::RowsAnswer) -> RowsOut {
        RowsOut {
            view,
            version: answer.version,
            columns: answer.columns,
            rows: answer
                .rows
                .into_iter()
                .map(|r| RowOut {
                    key: r.key,
                    window_start: r.window_start,
                    window_end: r.window_end,
                    row: r.row,
                })
                .collect(),
            next_cursor: answer.next_cursor.as_deref().map(cursor_text),
            as_of: AsOfOut {
                offsets: answer
                    .as_of
                    .offsets
                    .iter()
                    .enumerate()
                    .map(|(p, &offset)| PartitionOffset {
                        partition: p as u32,
                        offset,
                    })
                    .collect(),
                watermark: answer.as_of.watermark,
            },
            catching_up: answer.catching_up,
        }
    }
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

/// `POST /v1/views/{view}/replay` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    /// `"earliest"` (default), `"latest"`, `{"timestamp": ms}` or `{"offsets": [n, ..]}`.
    #[serde(default = "earliest")]
    pub from: kappa_processor::runner::StartFrom,
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapMode {
    /// Once caught up.
    #[default]
    Auto,
    /// On `promote`.
    Manual,
}

fn earliest() -> kappa_processor::runner::StartFrom {
    kappa_processor::runner::StartFrom::Earliest
}

#[cfg(test)]
mod borrow_tests {
    use super::*;

    #[test]
    fn record_keys_borrow_from_the_body_unless_escaped() {
        let body =
            r#"{"records":[{"key":"plain","value":1},{"key":"esc\"aped","value":2},{"value":3}]}"#;
        let parsed: ProduceBody<'_> = serde_json::from_str(body).unwrap();
        let keys: Vec<_> = parsed
            .records
            .iter()
            .map(|r| r.key.as_ref().map(|k| &k.0))
            .collect();
        assert!(matches!(keys[0], Some(Cow::Borrowed("plain"))));
        assert!(matches!(keys[1], Some(Cow::Owned(k)) if k == "esc\"aped"));
        assert!(keys[2].is_none());
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let key = vec![0u8, 1, 0xff, 0x7f];
        assert_eq!(cursor_bytes(&cursor_text(&key)), Some(key));
        assert_eq!(cursor_bytes("abc"), None);
        assert_eq!(cursor_bytes("zz"), None);
    }
}
