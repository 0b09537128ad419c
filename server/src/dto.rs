//! Wire types of the HTTP API (docs/http-api.md): they live in the
//! `kappa-wire` crate, shared with the CLI, the tools and the served
//! OpenAPI document; this module re-exports them and converts the log's
//! and the processor's own types into them, so those stay free to change
//! while the API stays stable.
//!
//! (The view catalog's types convert where the views are read:
//! `crate::views::reads`. This module knows nothing of `crate::views`.)

use std::borrow::Cow;

use kappa_log::{CleanupPolicy, Compression, Record, TopicConfig};
use kappa_processor::host;
use kappa_processor::{diff, plan, progress, sql, view, window};
use serde_json::value::RawValue;

pub use kappa_wire::*;

pub mod statements;

/// A server type's wire form, for the log's and the processor's types
/// (neither those nor the wire types are this crate's, so `From` cannot
/// be implemented between them).
pub trait IntoWire {
    /// The wire type.
    type Wire;
    /// The wire form.
    fn into_wire(self) -> Self::Wire;
}

impl IntoWire for kappa_log::FsyncPolicy {
    type Wire = FsyncPolicy;
    fn into_wire(self) -> FsyncPolicy {
        match self {
            kappa_log::FsyncPolicy::Always => FsyncPolicy::Always,
            kappa_log::FsyncPolicy::Interval => FsyncPolicy::Interval,
            kappa_log::FsyncPolicy::Never => FsyncPolicy::Never,
        }
    }
}

/// The log's fsync policy of a wire one.
pub fn fsync_policy(f: FsyncPolicy) -> kappa_log::FsyncPolicy {
    match f {
        FsyncPolicy::Always => kappa_log::FsyncPolicy::Always,
        FsyncPolicy::Interval => kappa_log::FsyncPolicy::Interval,
        FsyncPolicy::Never => kappa_log::FsyncPolicy::Never,
    }
}

impl IntoWire for host::StartFrom {
    type Wire = StartFrom;
    fn into_wire(self) -> StartFrom {
        match self {
            host::StartFrom::Earliest => StartFrom::Earliest,
            host::StartFrom::Latest => StartFrom::Latest,
            host::StartFrom::Timestamp(t) => StartFrom::Timestamp(t),
            host::StartFrom::Offsets(o) => StartFrom::Offsets(o),
        }
    }
}

/// The processor's start of a wire one.
pub fn start_from(s: StartFrom) -> host::StartFrom {
    match s {
        StartFrom::Earliest => host::StartFrom::Earliest,
        StartFrom::Latest => host::StartFrom::Latest,
        StartFrom::Timestamp(t) => host::StartFrom::Timestamp(t),
        StartFrom::Offsets(o) => host::StartFrom::Offsets(o),
    }
}

impl IntoWire for progress::WorkerRole {
    type Wire = WorkerRole;
    fn into_wire(self) -> WorkerRole {
        match self {
            progress::WorkerRole::Source { partitions } => WorkerRole::Source { partitions },
            progress::WorkerRole::Shard {
                first_key_group,
                end_key_group,
            } => WorkerRole::Shard {
                first_key_group,
                end_key_group,
            },
        }
    }
}

impl IntoWire for sql::ObjectKind {
    type Wire = statements::ObjectKind;
    fn into_wire(self) -> statements::ObjectKind {
        match self {
            sql::ObjectKind::Stream => statements::ObjectKind::Stream,
            sql::ObjectKind::Table => statements::ObjectKind::Table,
        }
    }
}

impl IntoWire for sql::SqlType {
    type Wire = statements::SqlType;
    fn into_wire(self) -> statements::SqlType {
        use statements::SqlType as W;
        match self {
            sql::SqlType::Boolean => W::Boolean,
            sql::SqlType::Integer => W::Integer,
            sql::SqlType::BigInt => W::BigInt,
            sql::SqlType::Double => W::Double,
            sql::SqlType::Decimal { precision, scale } => W::Decimal { precision, scale },
            sql::SqlType::Varchar => W::Varchar,
            sql::SqlType::Timestamp => W::Timestamp,
            sql::SqlType::Json => W::Json,
        }
    }
}

impl IntoWire for sql::SourceDecl {
    type Wire = statements::SourceDecl;
    fn into_wire(self) -> statements::SourceDecl {
        statements::SourceDecl {
            name: self.name,
            kind: self.kind.into_wire(),
            columns: self
                .columns
                .into_iter()
                .map(|c| statements::ColumnDecl {
                    name: c.name,
                    sql_type: c.sql_type.into_wire(),
                    key: c.key,
                })
                .collect(),
            topic: self.topic,
            cluster: self.cluster,
            value_format: self.value_format,
            timestamp: self.timestamp,
            watermark_delay_ms: self.watermark_delay_ms,
            idle_timeout_ms: self.idle_timeout_ms,
            partitions: self.partitions,
            sql: self.sql,
        }
    }
}

impl IntoWire for window::WindowSpec {
    type Wire = statements::WindowSpec;
    fn into_wire(self) -> statements::WindowSpec {
        use statements::WindowSpec as W;
        match self {
            window::WindowSpec::Tumbling { size_ms } => W::Tumbling { size_ms },
            window::WindowSpec::Hopping {
                size_ms,
                advance_ms,
            } => W::Hopping {
                size_ms,
                advance_ms,
            },
            window::WindowSpec::Session { gap_ms } => W::Session { gap_ms },
        }
    }
}

impl IntoWire for plan::Emit {
    type Wire = statements::Emit;
    fn into_wire(self) -> statements::Emit {
        match self {
            plan::Emit::Changes => statements::Emit::Changes,
            plan::Emit::Final => statements::Emit::Final,
        }
    }
}

impl IntoWire for plan::LateHandling {
    type Wire = statements::LateHandling;
    fn into_wire(self) -> statements::LateHandling {
        match self {
            plan::LateHandling::Drop => statements::LateHandling::Drop,
            plan::LateHandling::SideOutput(t) => statements::LateHandling::SideOutput(t),
        }
    }
}

impl IntoWire for kappa_log::GroupPartitionOffset {
    type Wire = GroupPartitionOffsets;
    fn into_wire(self) -> GroupPartitionOffsets {
        GroupPartitionOffsets {
            partition: self.partition,
            committed: self.committed,
            start_offset: self.start_offset,
            end_offset: self.end_offset,
            lag: self.lag,
        }
    }
}

impl IntoWire for view::AsOf {
    type Wire = DiffAsOf;
    fn into_wire(self) -> DiffAsOf {
        DiffAsOf {
            offsets: self.offsets,
            watermark: self.watermark,
        }
    }
}

impl IntoWire for diff::DiffExample {
    type Wire = DiffExample;
    fn into_wire(self) -> DiffExample {
        DiffExample {
            change: self.change.to_string(),
            key: self.key,
            window_start: self.window_start,
            window_end: self.window_end,
            base: self.base,
            candidate: self.candidate,
        }
    }
}

/// The wire form of a diff of `view`'s versions `base` and `candidate`.
pub fn diff_out(view: String, base: u64, candidate: u64, d: diff::Diff) -> DiffOut {
    DiffOut {
        view,
        base: DiffSide {
            version: base,
            as_of: d.base_as_of.into_wire(),
        },
        candidate: DiffSide {
            version: candidate,
            as_of: d.candidate_as_of.into_wire(),
        },
        added: d.added,
        removed: d.removed,
        changed: d.changed,
        unchanged: d.unchanged,
        examples: d.examples.into_iter().map(IntoWire::into_wire).collect(),
    }
}

impl<T: IntoWire> IntoWire for Option<T> {
    type Wire = Option<T::Wire>;
    fn into_wire(self) -> Option<T::Wire> {
        self.map(IntoWire::into_wire)
    }
}

/// The topic config of a create request: the defaults overlaid with what
/// the request gives.
pub trait CreateTopicExt {
    /// The topic config.
    fn config(&self, defaults: TopicConfig) -> TopicConfig;
}

impl CreateTopicExt for CreateTopic {
    fn config(&self, defaults: TopicConfig) -> TopicConfig {
        TopicConfig {
            partitions: self.partitions.unwrap_or(defaults.partitions),
            segment_bytes: self.segment_bytes.unwrap_or(defaults.segment_bytes),
            segment_ms: self.segment_ms.unwrap_or(defaults.segment_ms),
            retention_ms: self.retention_ms.unwrap_or(defaults.retention_ms),
            retention_bytes: self.retention_bytes.unwrap_or(defaults.retention_bytes),
            fsync: self.fsync.map(fsync_policy).unwrap_or(defaults.fsync),
            fsync_interval_ms: self.fsync_interval_ms.unwrap_or(defaults.fsync_interval_ms),
            compression: self
                .compression_type
                .map(compression_of)
                .unwrap_or(defaults.compression),
            cleanup_policy: self
                .cleanup_policy
                .map(cleanup_policy_of)
                .unwrap_or(defaults.cleanup_policy),
            delete_retention_ms: self.delete_retention_ms.or(defaults.delete_retention_ms),
            min_compaction_lag_ms: self
                .min_compaction_lag_ms
                .or(defaults.min_compaction_lag_ms),
            local_retention_ms: self.local_retention_ms.or(defaults.local_retention_ms),
            local_retention_bytes: self
                .local_retention_bytes
                .or(defaults.local_retention_bytes),
            cached_tail_bytes: self.cached_tail_bytes.or(defaults.cached_tail_bytes),
        }
    }
}

/// The log's cleanup policy of a wire one.
fn cleanup_policy_of(c: CleanupPolicyType) -> CleanupPolicy {
    match c {
        CleanupPolicyType::Delete => CleanupPolicy::Delete,
        CleanupPolicyType::Compact => CleanupPolicy::Compact,
        CleanupPolicyType::CompactDelete => CleanupPolicy::CompactDelete,
    }
}

/// The log's codec of a wire compression type.
fn compression_of(c: CompressionType) -> Compression {
    match c {
        CompressionType::None => Compression::None,
        CompressionType::Zstd => Compression::Zstd,
        CompressionType::Lz4 => Compression::Lz4,
    }
}

/// The log's change set of an alter request.
pub trait AlterTopicExt {
    /// The changes; `None` when the request changes nothing.
    fn changes(&self) -> Option<kappa_log::TopicChanges>;
}

impl AlterTopicExt for AlterTopic {
    fn changes(&self) -> Option<kappa_log::TopicChanges> {
        if self.retention_ms.is_none()
            && self.retention_bytes.is_none()
            && self.compression_type.is_none()
            && self.cleanup_policy.is_none()
            && self.delete_retention_ms.is_none()
            && self.min_compaction_lag_ms.is_none()
            && self.local_retention_ms.is_none()
            && self.local_retention_bytes.is_none()
            && self.cached_tail_bytes.is_none()
        {
            return None;
        }
        Some(kappa_log::TopicChanges {
            retention_ms: self.retention_ms,
            retention_bytes: self.retention_bytes,
            compression: self.compression_type.map(compression_of),
            cleanup_policy: self.cleanup_policy.map(cleanup_policy_of),
            delete_retention_ms: self.delete_retention_ms,
            min_compaction_lag_ms: self.min_compaction_lag_ms,
            local_retention_ms: self.local_retention_ms,
            local_retention_bytes: self.local_retention_bytes,
            cached_tail_bytes: self.cached_tail_bytes,
        })
    }
}

/// The wire form of a topic's description.
pub fn topic_out(d: kappa_log::TopicDescription) -> TopicOut {
    let c = d.config;
    TopicOut {
        name: d.name,
        config: TopicConfigOut {
            partitions: c.partitions,
            segment_bytes: c.segment_bytes,
            segment_ms: c.segment_ms,
            retention_ms: c.retention_ms,
            retention_bytes: c.retention_bytes,
            fsync: c.fsync.into_wire(),
            fsync_interval_ms: c.fsync_interval_ms,
            compression_type: match c.compression {
                Compression::None => CompressionType::None,
                Compression::Zstd => CompressionType::Zstd,
                Compression::Lz4 => CompressionType::Lz4,
            },
            cleanup_policy: match c.cleanup_policy {
                CleanupPolicy::Delete => CleanupPolicyType::Delete,
                CleanupPolicy::Compact => CleanupPolicyType::Compact,
                CleanupPolicy::CompactDelete => CleanupPolicyType::CompactDelete,
            },
            delete_retention_ms: c.delete_retention_ms(),
            min_compaction_lag_ms: c.min_compaction_lag_ms.unwrap_or(0),
            local_retention_ms: c.local_retention_ms,
            local_retention_bytes: c.local_retention_bytes,
            cached_tail_bytes: c.cached_tail_bytes,
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
                remote_bytes: p.remote_bytes,
            })
            .collect(),
    }
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

/// The wire form of a stored record ([`RecordOut`] documents the
/// encodings).
pub trait RecordOutExt<'a> {
    /// Wire form of `record`, with its partition for group reads.
    fn from_record(record: &'a Record, partition: Option<u32>) -> RecordOut<'a>;
}

impl<'a> RecordOutExt<'a> for RecordOut<'a> {
    fn from_record(record: &'a Record, partition: Option<u32>) -> RecordOut<'a> {
        let (value, value_encoding) = match serde_json::from_slice::<&RawValue>(&record.value) {
            Ok(raw) => (Cow::Borrowed(raw), None),
            Err(_) => {
                let (text, base64) = text_or_base64(&record.value);
                let json = serde_json::to_string(&text).expect("a string serializes");
                (
                    Cow::Owned(RawValue::from_string(json).expect("valid JSON")),
                    Some(if base64 {
                        Encoding::Base64
                    } else {
                        Encoding::Text
                    }),
                )
            }
        };
        let (key, key_encoding) = match &record.key {
            Some(k) => {
                let (text, base64) = text_or_base64(k);
                (Some(text), base64.then_some(Encoding::Base64))
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
                    base64_headers.push(Cow::Borrowed(h.name.as_str()));
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

    #[test]
    fn a_record_that_is_not_json_says_how_it_is_encoded() {
        let record = Record {
            offset: 3,
            timestamp: 7,
            key: Some(vec![0xff].into()),
            value: b"plain text".to_vec().into(),
            headers: Vec::new(),
        };
        let json = serde_json::to_value(RecordOut::from_record(&record, None)).unwrap();
        assert_eq!(json["value"], "plain text");
        assert_eq!(json["value_encoding"], "text");
        assert_eq!(json["key"], "/w==");
        assert_eq!(json["key_encoding"], "base64");
        assert!(json.get("partition").is_none());
        assert!(json.get("base64_headers").is_none());
    }
}
