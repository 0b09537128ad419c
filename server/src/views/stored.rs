//! The catalog's stored form: `catalog.json` format 1, as types of its own.
//!
//! `catalog.json` used to be the serde JSON of the processor's in-memory
//! planner types, so renaming a field or a variant there silently changed
//! what every data directory holds. These types are that JSON spelled out,
//! each field and variant with the name, tagging, default and skip rule it
//! has in format 1 (docs/data-directory.md lists them), and the catalog is
//! read and written through them only ([`super::catalog::Catalog::decode`],
//! [`super::catalog::Catalog::encode`]).
//!
//! The conversions to and from the processor's types match every variant
//! and destructure every struct without `..`: a field or variant added to,
//! removed from or renamed in a planner type fails to compile here, where
//! the catalog's format must be decided (kept, or a new format with its
//! own reader), instead of changing the file. The golden data directory
//! (`server/tests/golden_datadir.rs`) checks that format 1 decodes and
//! encodes byte for byte as the fixture was written.
//!
//! Serde attributes are spelled out on every type even where they are
//! serde's default (`Option` fields are read as `None` when absent and
//! written as `null`; variants keep their Rust names unless renamed), so
//! the wire names are visible here.

use std::collections::BTreeMap;

use kappa_processor::accumulators::AggregateKind;
use kappa_processor::expr::{BinaryOp, DataType, Expr, Function, UnaryOp};
use kappa_processor::host::StartFrom;
use kappa_processor::plan::{
    AggregateColumn, AggregateSpec, ColumnSource, DedupSpec, Emit, EventTime, JoinKind, JoinSpec,
    LateHandling, Operation, Plan, RowsAggregate, RowsJoin, Sink, SourceSpec, TopSpec,
    WindowedSpec, WithinSpec,
};
use kappa_processor::sql::{ColumnDecl, ObjectKind, SourceDecl, SqlType};
use kappa_processor::window::WindowSpec;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::catalog::{BuildEntry, Catalog, Failure, GraceEntry, VersionEntry, ViewEntry};

/// `max_future_ms` of a stored source written before the field existed:
/// 1 day. Pinned here: the planner's default may change, what an old file
/// means may not.
pub const STORED_DEFAULT_MAX_FUTURE_MS: i64 = 86_400_000;

fn default_max_future_ms() -> i64 {
    STORED_DEFAULT_MAX_FUTURE_MS
}

// ---------------------------------------------------------------------
// The catalog.
// ---------------------------------------------------------------------

/// The whole file: `{"format", "sources", "views"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredCatalog {
    /// `format`: the format number, 1.
    #[serde(rename = "format")]
    pub format: u32,
    /// `sources`: declared streams and tables by name.
    #[serde(rename = "sources")]
    pub sources: BTreeMap<String, StoredSourceDecl>,
    /// `views`: views and derived streams by name.
    #[serde(rename = "views")]
    pub views: BTreeMap<String, StoredViewEntry>,
}

/// A view or derived stream with its live versions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredViewEntry {
    /// `name`.
    #[serde(rename = "name")]
    pub name: String,
    /// `served`: the version queries read.
    #[serde(rename = "served")]
    pub served: StoredVersionEntry,
    /// `building`: the version being built, or `null`.
    #[serde(rename = "building")]
    pub building: Option<StoredBuildEntry>,
    /// `grace`: replaced versions still readable, oldest first.
    #[serde(rename = "grace")]
    pub grace: Vec<StoredGraceEntry>,
    /// `failure`: the last failure, or `null`.
    #[serde(rename = "failure")]
    pub failure: Option<StoredFailure>,
    /// `next_version`: the number the next version gets.
    #[serde(rename = "next_version")]
    pub next_version: u64,
    /// `created_ms`: when the view was created.
    #[serde(rename = "created_ms")]
    pub created_ms: i64,
    /// `keep_versions` (`KEEP_VERSIONS`), absent when unset.
    #[serde(
        rename = "keep_versions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub keep_versions: Option<u32>,
    /// `version_grace_ms` (`VERSION_GRACE`), absent when unset.
    #[serde(
        rename = "version_grace_ms",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub version_grace_ms: Option<u64>,
    /// `parallelism` (`PARALLELISM`), absent when unset.
    #[serde(
        rename = "parallelism",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub parallelism: Option<u32>,
}

/// One version's definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredVersionEntry {
    /// `version`: its number.
    #[serde(rename = "version")]
    pub version: u64,
    /// `plan`: what it runs.
    #[serde(rename = "plan")]
    pub plan: StoredPlan,
    /// `sql`: the statement it was defined with, or `null` (a plan).
    #[serde(rename = "sql")]
    pub sql: Option<String>,
    /// `start`: where it starts without committed offsets.
    #[serde(rename = "start")]
    pub start: StoredStartFrom,
    /// `started_ms`: when it first started.
    #[serde(rename = "started_ms")]
    pub started_ms: i64,
    /// `first_offsets`: the input offset it started at per partition;
    /// absent in catalogs written before it was recorded.
    #[serde(
        rename = "first_offsets",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub first_offsets: Option<Vec<u64>>,
    /// `workers`: workers of each kind, absent for the server's setting.
    #[serde(rename = "workers", default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
}

/// A version being built: its [`StoredVersionEntry`] fields flattened
/// into the same object, plus these.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredBuildEntry {
    /// The version's fields.
    #[serde(flatten)]
    pub entry: StoredVersionEntry,
    /// `start_offsets`: where it started per input partition.
    #[serde(rename = "start_offsets")]
    pub start_offsets: Vec<u64>,
    /// `target_offsets`: the input's end offsets when it started.
    #[serde(rename = "target_offsets")]
    pub target_offsets: Vec<u64>,
    /// `manual`: waits for promote; `false` when absent.
    #[serde(rename = "manual", default)]
    pub manual: bool,
}

/// A replaced version still readable: its [`StoredVersionEntry`] fields
/// flattened, plus when it stops being readable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredGraceEntry {
    /// The version's fields.
    #[serde(flatten)]
    pub entry: StoredVersionEntry,
    /// `readable_until_ms`.
    #[serde(rename = "readable_until_ms")]
    pub readable_until_ms: i64,
}

/// Why a version stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredFailure {
    /// `version`: the version that failed.
    #[serde(rename = "version")]
    pub version: u64,
    /// `reason`: the processor's error.
    #[serde(rename = "reason")]
    pub reason: String,
    /// `at_ms`: when it was noticed.
    #[serde(rename = "at_ms")]
    pub at_ms: i64,
    /// `during_build`: it was a build.
    #[serde(rename = "during_build")]
    pub during_build: bool,
}

/// Where a version starts without committed offsets: `"earliest"`,
/// `"latest"`, `{"timestamp": ms}` or `{"offsets": [..]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredStartFrom {
    /// `"earliest"`.
    #[serde(rename = "earliest")]
    Earliest,
    /// `"latest"`.
    #[serde(rename = "latest")]
    Latest,
    /// `{"timestamp": ms}`.
    #[serde(rename = "timestamp")]
    Timestamp(i64),
    /// `{"offsets": [offset per partition]}`.
    #[serde(rename = "offsets")]
    Offsets(Vec<u64>),
}

// ---------------------------------------------------------------------
// Declared sources.
// ---------------------------------------------------------------------

/// A declared stream or table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredSourceDecl {
    /// `name`: normalized.
    #[serde(rename = "name")]
    pub name: String,
    /// `kind`: `"stream"` or `"table"`.
    #[serde(rename = "kind")]
    pub kind: StoredObjectKind,
    /// `columns`: declared columns in order.
    #[serde(rename = "columns")]
    pub columns: Vec<StoredColumnDecl>,
    /// `topic`.
    #[serde(rename = "topic")]
    pub topic: String,
    /// `cluster`: the Kafka cluster's name; absent for the built-in log.
    #[serde(rename = "cluster", default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `value_format`: `"JSON"`.
    #[serde(rename = "value_format")]
    pub value_format: String,
    /// `timestamp`: the event-time column, or `null`.
    #[serde(rename = "timestamp")]
    pub timestamp: Option<String>,
    /// `watermark_delay_ms`.
    #[serde(rename = "watermark_delay_ms")]
    pub watermark_delay_ms: i64,
    /// `idle_timeout_ms`.
    #[serde(rename = "idle_timeout_ms")]
    pub idle_timeout_ms: i64,
    /// `partitions`: `PARTITIONS`, or `null`.
    #[serde(rename = "partitions")]
    pub partitions: Option<u32>,
    /// `sql`: the statement's text.
    #[serde(rename = "sql")]
    pub sql: String,
}

/// `"stream"` or `"table"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredObjectKind {
    /// `"stream"`.
    #[serde(rename = "stream")]
    Stream,
    /// `"table"`.
    #[serde(rename = "table")]
    Table,
}

/// A declared column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredColumnDecl {
    /// `name`: as declared.
    #[serde(rename = "name")]
    pub name: String,
    /// `sql_type`.
    #[serde(rename = "sql_type")]
    pub sql_type: StoredSqlType,
    /// `key`: the column is the record key.
    #[serde(rename = "key")]
    pub key: bool,
}

/// A declared column type, tagged by `type`: `{"type": "varchar"}`,
/// `{"type": "decimal", "precision": 10, "scale": 2}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum StoredSqlType {
    /// `boolean`.
    #[serde(rename = "boolean")]
    Boolean,
    /// `integer`.
    #[serde(rename = "integer")]
    Integer,
    /// `big_int`.
    #[serde(rename = "big_int")]
    BigInt,
    /// `double`.
    #[serde(rename = "double")]
    Double,
    /// `decimal` with `precision` and `scale`.
    #[serde(rename = "decimal")]
    Decimal {
        /// `precision`.
        #[serde(rename = "precision")]
        precision: u32,
        /// `scale`.
        #[serde(rename = "scale")]
        scale: u32,
    },
    /// `varchar`.
    #[serde(rename = "varchar")]
    Varchar,
    /// `timestamp`.
    #[serde(rename = "timestamp")]
    Timestamp,
    /// `json`.
    #[serde(rename = "json")]
    Json,
}

// ---------------------------------------------------------------------
// Plans.
// ---------------------------------------------------------------------

/// A version's plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredPlan {
    /// `name`: of the processor and its view or topic.
    #[serde(rename = "name")]
    pub name: String,
    /// `source`: the input.
    #[serde(rename = "source")]
    pub source: StoredSourceSpec,
    /// `dedup`, or `null`.
    #[serde(rename = "dedup")]
    pub dedup: Option<StoredDedupSpec>,
    /// `join`, or `null`.
    #[serde(rename = "join")]
    pub join: Option<StoredJoinSpec>,
    /// `more_joins`: the tables joined after `join`, in order, each a
    /// join as `join` is; absent when the query joins at most once.
    #[serde(rename = "more_joins", default, skip_serializing_if = "Vec::is_empty")]
    pub more_joins: Vec<StoredJoinSpec>,
    /// `filter`, or `null`.
    #[serde(rename = "filter")]
    pub filter: Option<StoredExpr>,
    /// `operation`.
    #[serde(rename = "operation")]
    pub operation: StoredOperation,
    /// `sink`.
    #[serde(rename = "sink")]
    pub sink: StoredSink,
    /// `late`.
    #[serde(rename = "late")]
    pub late: StoredLateHandling,
    /// `sink_cluster`: the Kafka cluster a topic sink lives on; absent for
    /// the built-in log.
    #[serde(
        rename = "sink_cluster",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub sink_cluster: Option<String>,
    /// `partition_by`: the expression keying a derived stream's output
    /// records (`PARTITION BY`); absent when they keep their input keys.
    #[serde(
        rename = "partition_by",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub partition_by: Option<StoredExpr>,
    /// `then`: the aggregate over the rows of `operation` (a subquery or
    /// CTE in `FROM`); absent when the view is one aggregate.
    #[serde(rename = "then", default, skip_serializing_if = "Option::is_none")]
    pub then: Option<StoredRowsAggregate>,
}

/// What follows the plan's operation: an aggregate over its rows, a top-N
/// or each row (`{"filter"?, "aggregate", "top"?, "each_row"?, "join"?}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRowsAggregate {
    /// `filter`: the outer `WHERE` over the inner rows; absent without one.
    #[serde(rename = "filter", default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<StoredExpr>,
    /// `aggregate`: the outer aggregate, ending with the hidden `#rows`
    /// count; of a top-N, its columns (a `latest` of each).
    #[serde(rename = "aggregate")]
    pub aggregate: StoredAggregateSpec,
    /// `top`: the top-N per partition kept instead of aggregating; absent
    /// for an aggregate.
    #[serde(rename = "top", default, skip_serializing_if = "Option::is_none")]
    pub top: Option<StoredTopSpec>,
    /// `each_row`: `true` when each row is a view row of `aggregate`'s
    /// columns (a query over a declared table's rows without `GROUP BY`);
    /// absent otherwise.
    #[serde(
        rename = "each_row",
        default,
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub each_row: bool,
    /// `join`: the declared table the rows are joined with; absent
    /// without a table-table join.
    #[serde(rename = "join", default, skip_serializing_if = "Option::is_none")]
    pub join: Option<StoredRowsJoin>,
}

/// A join of a declared table's rows with another table's: `{"topic",
/// "on", "alias", "kind", "key_column"?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRowsJoin {
    /// `topic`: the joined table's topic.
    #[serde(rename = "topic")]
    pub topic: String,
    /// `on`: the expression over a row naming the joined row's key.
    #[serde(rename = "on")]
    pub on: StoredExpr,
    /// `alias`: the column the joined row appears under.
    #[serde(rename = "alias")]
    pub alias: String,
    /// `kind`: `"inner"` or `"left"`.
    #[serde(rename = "kind")]
    pub kind: StoredJoinKind,
    /// `key_column`: the joined table's key column; absent without one.
    #[serde(
        rename = "key_column",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub key_column: Option<String>,
}

impl From<RowsJoin> for StoredRowsJoin {
    fn from(j: RowsJoin) -> Self {
        let RowsJoin {
            topic,
            on,
            alias,
            kind,
            key_column,
        } = j;
        StoredRowsJoin {
            topic,
            on: on.into(),
            alias,
            kind: kind.into(),
            key_column,
        }
    }
}

impl From<StoredRowsJoin> for RowsJoin {
    fn from(j: StoredRowsJoin) -> Self {
        let StoredRowsJoin {
            topic,
            on,
            alias,
            kind,
            key_column,
        } = j;
        RowsJoin {
            topic,
            on: on.into(),
            alias,
            kind: kind.into(),
            key_column,
        }
    }
}

/// A top-N per partition: `{"partition_by", "order_by", "descending",
/// "limit", "ties"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredTopSpec {
    /// `partition_by`: `PARTITION BY` expressions (empty: one partition).
    #[serde(rename = "partition_by")]
    pub partition_by: Vec<StoredExpr>,
    /// `order_by`: what rows are ranked by.
    #[serde(rename = "order_by")]
    pub order_by: StoredExpr,
    /// `descending`: largest first.
    #[serde(rename = "descending")]
    pub descending: bool,
    /// `limit`: ranks kept.
    #[serde(rename = "limit")]
    pub limit: u64,
    /// `ties`: `RANK()` (ties of the last rank kept too), else
    /// `ROW_NUMBER()`.
    #[serde(rename = "ties")]
    pub ties: bool,
}

impl From<RowsAggregate> for StoredRowsAggregate {
    fn from(r: RowsAggregate) -> Self {
        let RowsAggregate {
            filter,
            aggregate,
            top,
            each_row,
            join,
        } = r;
        StoredRowsAggregate {
            each_row,
            join: join.map(Into::into),
            filter: filter.map(Into::into),
            aggregate: aggregate.into(),
            top: top.map(|t| {
                let TopSpec {
                    partition_by,
                    order_by,
                    descending,
                    limit,
                    ties,
                } = t;
                StoredTopSpec {
                    partition_by: partition_by.into_iter().map(Into::into).collect(),
                    order_by: order_by.into(),
                    descending,
                    limit,
                    ties,
                }
            }),
        }
    }
}

impl From<StoredRowsAggregate> for RowsAggregate {
    fn from(r: StoredRowsAggregate) -> Self {
        let StoredRowsAggregate {
            filter,
            aggregate,
            top,
            each_row,
            join,
        } = r;
        RowsAggregate {
            each_row,
            join: join.map(Into::into),
            filter: filter.map(Into::into),
            aggregate: aggregate.into(),
            top: top.map(|t| {
                let StoredTopSpec {
                    partition_by,
                    order_by,
                    descending,
                    limit,
                    ties,
                } = t;
                TopSpec {
                    partition_by: partition_by.into_iter().map(Into::into).collect(),
                    order_by: order_by.into(),
                    descending,
                    limit,
                    ties,
                }
            }),
        }
    }
}

/// Where event time comes from: `"record_timestamp"` or `{"field": [path]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredEventTime {
    /// `"record_timestamp"`.
    #[serde(rename = "record_timestamp")]
    RecordTimestamp,
    /// `{"field": ["a", "b"]}`.
    #[serde(rename = "field")]
    Field(Vec<String>),
}

/// The input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSourceSpec {
    /// `topic`.
    #[serde(rename = "topic")]
    pub topic: String,
    /// `cluster`: the Kafka cluster's name; absent for the built-in log.
    #[serde(rename = "cluster", default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// `event_time`.
    #[serde(rename = "event_time")]
    pub event_time: StoredEventTime,
    /// `out_of_orderness_ms`.
    #[serde(rename = "out_of_orderness_ms")]
    pub out_of_orderness_ms: i64,
    /// `idle_timeout_ms`.
    #[serde(rename = "idle_timeout_ms")]
    pub idle_timeout_ms: i64,
    /// `max_future_ms`; [`STORED_DEFAULT_MAX_FUTURE_MS`] when absent.
    #[serde(rename = "max_future_ms", default = "default_max_future_ms")]
    pub max_future_ms: i64,
    /// `typed_fields`: `[[field, type], ..]`, absent when empty.
    #[serde(
        rename = "typed_fields",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub typed_fields: Vec<(String, StoredDataType)>,
}

/// Deduplication.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredDedupSpec {
    /// `id`.
    #[serde(rename = "id")]
    pub id: StoredExpr,
    /// `ttl_ms`.
    #[serde(rename = "ttl_ms")]
    pub ttl_ms: i64,
}

/// `"inner"`, `"left"` or `"full"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredJoinKind {
    /// `"inner"`.
    #[serde(rename = "inner")]
    Inner,
    /// `"left"`.
    #[serde(rename = "left")]
    Left,
    /// `"full"` (stream-stream joins).
    #[serde(rename = "full")]
    Full,
}

/// A stream–table join.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredJoinSpec {
    /// `table_topic`.
    #[serde(rename = "table_topic")]
    pub table_topic: String,
    /// `stream_key`.
    #[serde(rename = "stream_key")]
    pub stream_key: StoredExpr,
    /// `alias`.
    #[serde(rename = "alias")]
    pub alias: String,
    /// `kind`.
    #[serde(rename = "kind")]
    pub kind: StoredJoinKind,
    /// `table_time`: the table's time column path, absent for the record
    /// timestamp.
    #[serde(
        rename = "table_time",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub table_time: Option<Vec<String>>,
    /// `history_ms`, absent for the default.
    #[serde(
        rename = "history_ms",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub history_ms: Option<i64>,
    /// `within`: a stream-stream join's time bound, absent for a
    /// stream-table join.
    #[serde(rename = "within", default, skip_serializing_if = "Option::is_none")]
    pub within: Option<StoredWithinSpec>,
}

/// A stream-stream join's time bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredWithinSpec {
    /// `before_ms`.
    #[serde(rename = "before_ms")]
    pub before_ms: i64,
    /// `after_ms`.
    #[serde(rename = "after_ms")]
    pub after_ms: i64,
    /// `grace_ms`.
    #[serde(rename = "grace_ms")]
    pub grace_ms: i64,
    /// `joined_key`: the joined stream's join key.
    #[serde(rename = "joined_key")]
    pub joined_key: StoredExpr,
    /// `typed_fields`: the joined stream's `[[field, type], ..]`, absent
    /// when empty.
    #[serde(
        rename = "typed_fields",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub typed_fields: Vec<(String, StoredDataType)>,
}

/// What each event becomes: `{"project": {"columns": [..]}}` or
/// `{"aggregate": {..}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StoredOperation {
    /// `{"project": {"columns": [[name, expr], ..]}}`.
    #[serde(rename = "project")]
    Project {
        /// `columns`.
        #[serde(rename = "columns")]
        columns: Vec<(String, StoredExpr)>,
    },
    /// `{"aggregate": spec}`.
    #[serde(rename = "aggregate")]
    Aggregate(StoredAggregateSpec),
}

/// `"changes"` or `"final"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredEmit {
    /// `"changes"`.
    #[serde(rename = "changes")]
    Changes,
    /// `"final"`.
    #[serde(rename = "final")]
    Final,
}

/// A window kind and its sizes, tagged by `kind`:
/// `{"kind": "tumbling", "size_ms": ..}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum StoredWindowSpec {
    /// `tumbling` with `size_ms`.
    #[serde(rename = "tumbling")]
    Tumbling {
        /// `size_ms`.
        #[serde(rename = "size_ms")]
        size_ms: i64,
    },
    /// `hopping` with `size_ms` and `advance_ms`.
    #[serde(rename = "hopping")]
    Hopping {
        /// `size_ms`.
        #[serde(rename = "size_ms")]
        size_ms: i64,
        /// `advance_ms`.
        #[serde(rename = "advance_ms")]
        advance_ms: i64,
    },
    /// `session` with `gap_ms`.
    #[serde(rename = "session")]
    Session {
        /// `gap_ms`.
        #[serde(rename = "gap_ms")]
        gap_ms: i64,
    },
}

/// Windowing of an aggregate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredWindowedSpec {
    /// `window`.
    #[serde(rename = "window")]
    pub window: StoredWindowSpec,
    /// `grace_ms`.
    #[serde(rename = "grace_ms")]
    pub grace_ms: i64,
    /// `emit`.
    #[serde(rename = "emit")]
    pub emit: StoredEmit,
    /// `retention_ms`, absent when rows are kept forever.
    #[serde(
        rename = "retention_ms",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub retention_ms: Option<i64>,
}

/// Which aggregate: `"count_all"`, .., `{"sum_decimal": {"scale": 2}}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredAggregateKind {
    /// `"count_all"`.
    #[serde(rename = "count_all")]
    CountAll,
    /// `"count"`.
    #[serde(rename = "count")]
    Count,
    /// `"sum"`.
    #[serde(rename = "sum")]
    Sum,
    /// `"avg"`.
    #[serde(rename = "avg")]
    Avg,
    /// `"min"`.
    #[serde(rename = "min")]
    Min,
    /// `"max"`.
    #[serde(rename = "max")]
    Max,
    /// `"count_distinct"`.
    #[serde(rename = "count_distinct")]
    CountDistinct,
    /// `"latest"`.
    #[serde(rename = "latest")]
    Latest,
    /// `"earliest"`.
    #[serde(rename = "earliest")]
    Earliest,
    /// `{"sum_decimal": {"scale": s}}`.
    #[serde(rename = "sum_decimal")]
    SumDecimal {
        /// `scale`.
        #[serde(rename = "scale")]
        scale: u32,
    },
    /// `{"avg_decimal": {"scale": s}}`.
    #[serde(rename = "avg_decimal")]
    AvgDecimal {
        /// `scale`.
        #[serde(rename = "scale")]
        scale: u32,
    },
}

/// One aggregate output column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAggregateColumn {
    /// `name`.
    #[serde(rename = "name")]
    pub name: String,
    /// `kind`.
    #[serde(rename = "kind")]
    pub kind: StoredAggregateKind,
    /// `input`, `null` for `COUNT(*)`.
    #[serde(rename = "input")]
    pub input: Option<StoredExpr>,
}

/// Where an output column comes from: `{"group_key": i}`,
/// `"window_start"`, `"window_end"`, `{"aggregate": i}`, `{"computed":
/// expr}` (an expression over the aggregates, read by name, `#key<i>` for
/// the i-th group key, `#window_start` and `#window_end`; `#agg<i>` names
/// an aggregate only an expression reads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StoredColumnSource {
    /// `{"group_key": i}`.
    #[serde(rename = "group_key")]
    GroupKey(usize),
    /// `"window_start"`.
    #[serde(rename = "window_start")]
    WindowStart,
    /// `"window_end"`.
    #[serde(rename = "window_end")]
    WindowEnd,
    /// `{"aggregate": i}`.
    #[serde(rename = "aggregate")]
    Aggregate(usize),
    /// `{"computed": expr}`.
    #[serde(rename = "computed")]
    Computed(StoredExpr),
}

/// Grouped aggregation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredAggregateSpec {
    /// `group_by`.
    #[serde(rename = "group_by")]
    pub group_by: Vec<StoredExpr>,
    /// `window`, or `null`.
    #[serde(rename = "window")]
    pub window: Option<StoredWindowedSpec>,
    /// `aggregates`.
    #[serde(rename = "aggregates")]
    pub aggregates: Vec<StoredAggregateColumn>,
    /// `columns`: `[[name, source], ..]`.
    #[serde(rename = "columns")]
    pub columns: Vec<(String, StoredColumnSource)>,
    /// `having`, or `null`.
    #[serde(rename = "having")]
    pub having: Option<StoredExpr>,
}

/// Where results go: `"view"` or `{"topic": name}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredSink {
    /// `"view"`.
    #[serde(rename = "view")]
    View,
    /// `{"topic": name}`.
    #[serde(rename = "topic")]
    Topic(String),
}

/// Late events: `"drop"` or `{"side_output": topic}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredLateHandling {
    /// `"drop"`.
    #[serde(rename = "drop")]
    Drop,
    /// `{"side_output": topic}`.
    #[serde(rename = "side_output")]
    SideOutput(String),
}

// ---------------------------------------------------------------------
// Expressions: variant names are capitalized (`{"Binary": ["Gt", l, r]}`).
// ---------------------------------------------------------------------

/// A prefix operator: `"Not"` or `"Neg"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredUnaryOp {
    /// `"Not"`.
    #[serde(rename = "Not")]
    Not,
    /// `"Neg"`.
    #[serde(rename = "Neg")]
    Neg,
}

/// An infix operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredBinaryOp {
    /// `"Add"`.
    #[serde(rename = "Add")]
    Add,
    /// `"Sub"`.
    #[serde(rename = "Sub")]
    Sub,
    /// `"Mul"`.
    #[serde(rename = "Mul")]
    Mul,
    /// `"Div"`.
    #[serde(rename = "Div")]
    Div,
    /// `"Mod"`.
    #[serde(rename = "Mod")]
    Mod,
    /// `"Eq"`.
    #[serde(rename = "Eq")]
    Eq,
    /// `"NotEq"`.
    #[serde(rename = "NotEq")]
    NotEq,
    /// `"Lt"`.
    #[serde(rename = "Lt")]
    Lt,
    /// `"LtEq"`.
    #[serde(rename = "LtEq")]
    LtEq,
    /// `"Gt"`.
    #[serde(rename = "Gt")]
    Gt,
    /// `"GtEq"`.
    #[serde(rename = "GtEq")]
    GtEq,
    /// `"And"`.
    #[serde(rename = "And")]
    And,
    /// `"Or"`.
    #[serde(rename = "Or")]
    Or,
    /// `"Concat"`.
    #[serde(rename = "Concat")]
    Concat,
}

/// A `CAST` target or a typed field's type: `"Boolean"`,
/// `{"Decimal": {"precision": p, "scale": s}}`, ..
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredDataType {
    /// `"Boolean"`.
    #[serde(rename = "Boolean")]
    Boolean,
    /// `"Integer"`.
    #[serde(rename = "Integer")]
    Integer,
    /// `"Double"`.
    #[serde(rename = "Double")]
    Double,
    /// `{"Decimal": {"precision": p, "scale": s}}`.
    #[serde(rename = "Decimal")]
    Decimal {
        /// `precision`.
        #[serde(rename = "precision")]
        precision: u32,
        /// `scale`.
        #[serde(rename = "scale")]
        scale: u32,
    },
    /// `"String"`.
    #[serde(rename = "String")]
    String,
    /// `"Timestamp"`.
    #[serde(rename = "Timestamp")]
    Timestamp,
}

/// A built-in function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredFunction {
    /// `"Upper"`.
    #[serde(rename = "Upper")]
    Upper,
    /// `"Lower"`.
    #[serde(rename = "Lower")]
    Lower,
    /// `"Length"`.
    #[serde(rename = "Length")]
    Length,
    /// `"Trim"`.
    #[serde(rename = "Trim")]
    Trim,
    /// `"Substring"`.
    #[serde(rename = "Substring")]
    Substring,
    /// `"Concat"`.
    #[serde(rename = "Concat")]
    Concat,
    /// `"Replace"`.
    #[serde(rename = "Replace")]
    Replace,
    /// `"Abs"`.
    #[serde(rename = "Abs")]
    Abs,
    /// `"Round"`.
    #[serde(rename = "Round")]
    Round,
    /// `"Floor"`.
    #[serde(rename = "Floor")]
    Floor,
    /// `"Ceil"`.
    #[serde(rename = "Ceil")]
    Ceil,
    /// `"Sqrt"`.
    #[serde(rename = "Sqrt")]
    Sqrt,
    /// `"Coalesce"`.
    #[serde(rename = "Coalesce")]
    Coalesce,
    /// `"IfNull"`.
    #[serde(rename = "IfNull")]
    IfNull,
    /// `"Greatest"`.
    #[serde(rename = "Greatest")]
    Greatest,
    /// `"Least"`.
    #[serde(rename = "Least")]
    Least,
    /// `"ToTimestamp"`.
    #[serde(rename = "ToTimestamp")]
    ToTimestamp,
    /// `"FormatTimestamp"`.
    #[serde(rename = "FormatTimestamp")]
    FormatTimestamp,
    /// `"DateTrunc"`.
    #[serde(rename = "DateTrunc")]
    DateTrunc,
}

/// An expression, externally tagged by its capitalized variant name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredExpr {
    /// `{"Field": ["a", "b"]}`: a JSON path into the value.
    #[serde(rename = "Field")]
    Field(Vec<String>),
    /// `{"Column": name}`: a computed column.
    #[serde(rename = "Column")]
    Column(String),
    /// `"Key"`: `ROWKEY`.
    #[serde(rename = "Key")]
    Key,
    /// `"RecordTimestamp"`: `ROWTIME`.
    #[serde(rename = "RecordTimestamp")]
    RecordTimestamp,
    /// `{"Literal": json}`: a constant, any JSON value.
    #[serde(rename = "Literal")]
    Literal(Value),
    /// `{"Unary": [op, operand]}`.
    #[serde(rename = "Unary")]
    Unary(StoredUnaryOp, Box<StoredExpr>),
    /// `{"Binary": [op, left, right]}`.
    #[serde(rename = "Binary")]
    Binary(StoredBinaryOp, Box<StoredExpr>, Box<StoredExpr>),
    /// `{"IsNull": {"expr", "negated"}}`.
    #[serde(rename = "IsNull")]
    IsNull {
        /// `expr`.
        #[serde(rename = "expr")]
        expr: Box<StoredExpr>,
        /// `negated`: `IS NOT NULL`.
        #[serde(rename = "negated")]
        negated: bool,
    },
    /// `{"InList": {"expr", "list", "negated"}}`.
    #[serde(rename = "InList")]
    InList {
        /// `expr`.
        #[serde(rename = "expr")]
        expr: Box<StoredExpr>,
        /// `list`.
        #[serde(rename = "list")]
        list: Vec<StoredExpr>,
        /// `negated`: `NOT IN`.
        #[serde(rename = "negated")]
        negated: bool,
    },
    /// `{"Between": {"expr", "low", "high", "negated"}}`.
    #[serde(rename = "Between")]
    Between {
        /// `expr`.
        #[serde(rename = "expr")]
        expr: Box<StoredExpr>,
        /// `low`.
        #[serde(rename = "low")]
        low: Box<StoredExpr>,
        /// `high`.
        #[serde(rename = "high")]
        high: Box<StoredExpr>,
        /// `negated`: `NOT BETWEEN`.
        #[serde(rename = "negated")]
        negated: bool,
    },
    /// `{"Like": {"expr", "pattern", "negated"}}`.
    #[serde(rename = "Like")]
    Like {
        /// `expr`.
        #[serde(rename = "expr")]
        expr: Box<StoredExpr>,
        /// `pattern`.
        #[serde(rename = "pattern")]
        pattern: Box<StoredExpr>,
        /// `negated`: `NOT LIKE`.
        #[serde(rename = "negated")]
        negated: bool,
    },
    /// `{"Case": {"operand", "branches", "otherwise"}}`.
    #[serde(rename = "Case")]
    Case {
        /// `operand`, or `null`.
        #[serde(rename = "operand")]
        operand: Option<Box<StoredExpr>>,
        /// `branches`: `[[when, then], ..]`.
        #[serde(rename = "branches")]
        branches: Vec<(StoredExpr, StoredExpr)>,
        /// `otherwise`, or `null`.
        #[serde(rename = "otherwise")]
        otherwise: Option<Box<StoredExpr>>,
    },
    /// `{"Cast": [expr, type]}`.
    #[serde(rename = "Cast")]
    Cast(Box<StoredExpr>, StoredDataType),
    /// `{"Function": [function, [args]]}`.
    #[serde(rename = "Function")]
    Function(StoredFunction, Vec<StoredExpr>),
}

// ---------------------------------------------------------------------
// Conversions: exhaustive both ways.
// ---------------------------------------------------------------------

/// Converts every element.
fn all<A, B: From<A>>(items: Vec<A>) -> Vec<B> {
    items.into_iter().map(B::from).collect()
}

/// Converts the second element of every pair.
fn seconds<A, B: From<A>>(items: Vec<(String, A)>) -> Vec<(String, B)> {
    items.into_iter().map(|(n, a)| (n, B::from(a))).collect()
}

/// Converts a boxed expression (they come boxed: unboxing at every call
/// would be noisier than this one allowance).
#[allow(clippy::boxed_local)]
fn boxed<A, B: From<A>>(b: Box<A>) -> Box<B> {
    Box::new(B::from(*b))
}

impl From<&Catalog> for StoredCatalog {
    fn from(c: &Catalog) -> Self {
        let Catalog {
            format,
            sources,
            views,
        } = c.clone();
        StoredCatalog {
            format,
            sources: sources.into_iter().map(|(k, v)| (k, v.into())).collect(),
            views: views.into_iter().map(|(k, v)| (k, v.into())).collect(),
        }
    }
}

impl From<StoredCatalog> for Catalog {
    fn from(c: StoredCatalog) -> Self {
        let StoredCatalog {
            format,
            sources,
            views,
        } = c;
        Catalog {
            format,
            sources: sources.into_iter().map(|(k, v)| (k, v.into())).collect(),
            views: views.into_iter().map(|(k, v)| (k, v.into())).collect(),
        }
    }
}

impl From<ViewEntry> for StoredViewEntry {
    fn from(v: ViewEntry) -> Self {
        let ViewEntry {
            name,
            served,
            building,
            grace,
            failure,
            next_version,
            created_ms,
            keep_versions,
            version_grace_ms,
            parallelism,
        } = v;
        StoredViewEntry {
            name,
            served: served.into(),
            building: building.map(Into::into),
            grace: all(grace),
            failure: failure.map(Into::into),
            next_version,
            created_ms,
            keep_versions,
            version_grace_ms,
            parallelism,
        }
    }
}

impl From<StoredViewEntry> for ViewEntry {
    fn from(v: StoredViewEntry) -> Self {
        let StoredViewEntry {
            name,
            served,
            building,
            grace,
            failure,
            next_version,
            created_ms,
            keep_versions,
            version_grace_ms,
            parallelism,
        } = v;
        ViewEntry {
            name,
            served: served.into(),
            building: building.map(Into::into),
            grace: all(grace),
            failure: failure.map(Into::into),
            next_version,
            created_ms,
            keep_versions,
            version_grace_ms,
            parallelism,
        }
    }
}

impl From<VersionEntry> for StoredVersionEntry {
    fn from(v: VersionEntry) -> Self {
        let VersionEntry {
            version,
            plan,
            sql,
            start,
            started_ms,
            first_offsets,
            workers,
        } = v;
        StoredVersionEntry {
            version,
            plan: plan.into(),
            sql,
            start: start.into(),
            started_ms,
            first_offsets,
            workers,
        }
    }
}

impl From<StoredVersionEntry> for VersionEntry {
    fn from(v: StoredVersionEntry) -> Self {
        let StoredVersionEntry {
            version,
            plan,
            sql,
            start,
            started_ms,
            first_offsets,
            workers,
        } = v;
        VersionEntry {
            version,
            plan: plan.into(),
            sql,
            start: start.into(),
            started_ms,
            first_offsets,
            workers,
        }
    }
}

impl From<BuildEntry> for StoredBuildEntry {
    fn from(b: BuildEntry) -> Self {
        let BuildEntry {
            entry,
            start_offsets,
            target_offsets,
            manual,
        } = b;
        StoredBuildEntry {
            entry: entry.into(),
            start_offsets,
            target_offsets,
            manual,
        }
    }
}

impl From<StoredBuildEntry> for BuildEntry {
    fn from(b: StoredBuildEntry) -> Self {
        let StoredBuildEntry {
            entry,
            start_offsets,
            target_offsets,
            manual,
        } = b;
        BuildEntry {
            entry: entry.into(),
            start_offsets,
            target_offsets,
            manual,
        }
    }
}

impl From<GraceEntry> for StoredGraceEntry {
    fn from(g: GraceEntry) -> Self {
        let GraceEntry {
            entry,
            readable_until_ms,
        } = g;
        StoredGraceEntry {
            entry: entry.into(),
            readable_until_ms,
        }
    }
}

impl From<StoredGraceEntry> for GraceEntry {
    fn from(g: StoredGraceEntry) -> Self {
        let StoredGraceEntry {
            entry,
            readable_until_ms,
        } = g;
        GraceEntry {
            entry: entry.into(),
            readable_until_ms,
        }
    }
}

impl From<Failure> for StoredFailure {
    fn from(f: Failure) -> Self {
        let Failure {
            version,
            reason,
            at_ms,
            during_build,
        } = f;
        StoredFailure {
            version,
            reason,
            at_ms,
            during_build,
        }
    }
}

impl From<StoredFailure> for Failure {
    fn from(f: StoredFailure) -> Self {
        let StoredFailure {
            version,
            reason,
            at_ms,
            during_build,
        } = f;
        Failure {
            version,
            reason,
            at_ms,
            during_build,
        }
    }
}

impl From<StartFrom> for StoredStartFrom {
    fn from(s: StartFrom) -> Self {
        match s {
            StartFrom::Earliest => StoredStartFrom::Earliest,
            StartFrom::Latest => StoredStartFrom::Latest,
            StartFrom::Timestamp(t) => StoredStartFrom::Timestamp(t),
            StartFrom::Offsets(o) => StoredStartFrom::Offsets(o),
        }
    }
}

impl From<StoredStartFrom> for StartFrom {
    fn from(s: StoredStartFrom) -> Self {
        match s {
            StoredStartFrom::Earliest => StartFrom::Earliest,
            StoredStartFrom::Latest => StartFrom::Latest,
            StoredStartFrom::Timestamp(t) => StartFrom::Timestamp(t),
            StoredStartFrom::Offsets(o) => StartFrom::Offsets(o),
        }
    }
}

impl From<SourceDecl> for StoredSourceDecl {
    fn from(d: SourceDecl) -> Self {
        let SourceDecl {
            name,
            kind,
            columns,
            topic,
            cluster,
            value_format,
            timestamp,
            watermark_delay_ms,
            idle_timeout_ms,
            partitions,
            sql,
        } = d;
        StoredSourceDecl {
            name,
            kind: kind.into(),
            columns: all(columns),
            topic,
            cluster,
            value_format,
            timestamp,
            watermark_delay_ms,
            idle_timeout_ms,
            partitions,
            sql,
        }
    }
}

impl From<StoredSourceDecl> for SourceDecl {
    fn from(d: StoredSourceDecl) -> Self {
        let StoredSourceDecl {
            name,
            kind,
            columns,
            topic,
            cluster,
            value_format,
            timestamp,
            watermark_delay_ms,
            idle_timeout_ms,
            partitions,
            sql,
        } = d;
        SourceDecl {
            name,
            kind: kind.into(),
            columns: all(columns),
            topic,
            cluster,
            value_format,
            timestamp,
            watermark_delay_ms,
            idle_timeout_ms,
            partitions,
            sql,
        }
    }
}

impl From<ObjectKind> for StoredObjectKind {
    fn from(k: ObjectKind) -> Self {
        match k {
            ObjectKind::Stream => StoredObjectKind::Stream,
            ObjectKind::Table => StoredObjectKind::Table,
        }
    }
}

impl From<StoredObjectKind> for ObjectKind {
    fn from(k: StoredObjectKind) -> Self {
        match k {
            StoredObjectKind::Stream => ObjectKind::Stream,
            StoredObjectKind::Table => ObjectKind::Table,
        }
    }
}

impl From<ColumnDecl> for StoredColumnDecl {
    fn from(c: ColumnDecl) -> Self {
        let ColumnDecl {
            name,
            sql_type,
            key,
        } = c;
        StoredColumnDecl {
            name,
            sql_type: sql_type.into(),
            key,
        }
    }
}

impl From<StoredColumnDecl> for ColumnDecl {
    fn from(c: StoredColumnDecl) -> Self {
        let StoredColumnDecl {
            name,
            sql_type,
            key,
        } = c;
        ColumnDecl {
            name,
            sql_type: sql_type.into(),
            key,
        }
    }
}

impl From<SqlType> for StoredSqlType {
    fn from(t: SqlType) -> Self {
        match t {
            SqlType::Boolean => StoredSqlType::Boolean,
            SqlType::Integer => StoredSqlType::Integer,
            SqlType::BigInt => StoredSqlType::BigInt,
            SqlType::Double => StoredSqlType::Double,
            SqlType::Decimal { precision, scale } => StoredSqlType::Decimal { precision, scale },
            SqlType::Varchar => StoredSqlType::Varchar,
            SqlType::Timestamp => StoredSqlType::Timestamp,
            SqlType::Json => StoredSqlType::Json,
        }
    }
}

impl From<StoredSqlType> for SqlType {
    fn from(t: StoredSqlType) -> Self {
        match t {
            StoredSqlType::Boolean => SqlType::Boolean,
            StoredSqlType::Integer => SqlType::Integer,
            StoredSqlType::BigInt => SqlType::BigInt,
            StoredSqlType::Double => SqlType::Double,
            StoredSqlType::Decimal { precision, scale } => SqlType::Decimal { precision, scale },
            StoredSqlType::Varchar => SqlType::Varchar,
            StoredSqlType::Timestamp => SqlType::Timestamp,
            StoredSqlType::Json => SqlType::Json,
        }
    }
}

impl From<Plan> for StoredPlan {
    fn from(p: Plan) -> Self {
        let Plan {
            name,
            source,
            dedup,
            join,
            more_joins,
            filter,
            operation,
            sink,
            late,
            sink_cluster,
            partition_by,
            // A stage of a spread view is made at run time, never stored.
            spread_stage: _,
            then,
        } = p;
        StoredPlan {
            name,
            source: source.into(),
            dedup: dedup.map(Into::into),
            join: join.map(Into::into),
            more_joins: more_joins.into_iter().map(Into::into).collect(),
            filter: filter.map(Into::into),
            operation: operation.into(),
            sink: sink.into(),
            late: late.into(),
            sink_cluster,
            partition_by: partition_by.map(Into::into),
            then: then.map(Into::into),
        }
    }
}

impl From<StoredPlan> for Plan {
    fn from(p: StoredPlan) -> Self {
        let StoredPlan {
            name,
            source,
            dedup,
            join,
            more_joins,
            filter,
            operation,
            sink,
            late,
            sink_cluster,
            partition_by,
            then,
        } = p;
        Plan {
            name,
            source: source.into(),
            dedup: dedup.map(Into::into),
            join: join.map(Into::into),
            more_joins: more_joins.into_iter().map(Into::into).collect(),
            filter: filter.map(Into::into),
            operation: operation.into(),
            sink: sink.into(),
            late: late.into(),
            sink_cluster,
            partition_by: partition_by.map(Into::into),
            spread_stage: None,
            then: then.map(Into::into),
        }
    }
}

impl From<EventTime> for StoredEventTime {
    fn from(e: EventTime) -> Self {
        match e {
            EventTime::RecordTimestamp => StoredEventTime::RecordTimestamp,
            EventTime::Field(path) => StoredEventTime::Field(path),
        }
    }
}

impl From<StoredEventTime> for EventTime {
    fn from(e: StoredEventTime) -> Self {
        match e {
            StoredEventTime::RecordTimestamp => EventTime::RecordTimestamp,
            StoredEventTime::Field(path) => EventTime::Field(path),
        }
    }
}

impl From<SourceSpec> for StoredSourceSpec {
    fn from(s: SourceSpec) -> Self {
        let SourceSpec {
            topic,
            cluster,
            event_time,
            out_of_orderness_ms,
            idle_timeout_ms,
            max_future_ms,
            typed_fields,
        } = s;
        StoredSourceSpec {
            topic,
            cluster,
            event_time: event_time.into(),
            out_of_orderness_ms,
            idle_timeout_ms,
            max_future_ms,
            typed_fields: seconds(typed_fields),
        }
    }
}

impl From<StoredSourceSpec> for SourceSpec {
    fn from(s: StoredSourceSpec) -> Self {
        let StoredSourceSpec {
            topic,
            cluster,
            event_time,
            out_of_orderness_ms,
            idle_timeout_ms,
            max_future_ms,
            typed_fields,
        } = s;
        SourceSpec {
            topic,
            cluster,
            event_time: event_time.into(),
            out_of_orderness_ms,
            idle_timeout_ms,
            max_future_ms,
            typed_fields: seconds(typed_fields),
        }
    }
}

impl From<DedupSpec> for StoredDedupSpec {
    fn from(d: DedupSpec) -> Self {
        let DedupSpec { id, ttl_ms } = d;
        StoredDedupSpec {
            id: id.into(),
            ttl_ms,
        }
    }
}

impl From<StoredDedupSpec> for DedupSpec {
    fn from(d: StoredDedupSpec) -> Self {
        let StoredDedupSpec { id, ttl_ms } = d;
        DedupSpec {
            id: id.into(),
            ttl_ms,
        }
    }
}

impl From<JoinKind> for StoredJoinKind {
    fn from(k: JoinKind) -> Self {
        match k {
            JoinKind::Inner => StoredJoinKind::Inner,
            JoinKind::Left => StoredJoinKind::Left,
            JoinKind::Full => StoredJoinKind::Full,
        }
    }
}

impl From<StoredJoinKind> for JoinKind {
    fn from(k: StoredJoinKind) -> Self {
        match k {
            StoredJoinKind::Inner => JoinKind::Inner,
            StoredJoinKind::Left => JoinKind::Left,
            StoredJoinKind::Full => JoinKind::Full,
        }
    }
}

impl From<JoinSpec> for StoredJoinSpec {
    fn from(j: JoinSpec) -> Self {
        let JoinSpec {
            table_topic,
            stream_key,
            alias,
            kind,
            table_time,
            history_ms,
            within,
        } = j;
        StoredJoinSpec {
            table_topic,
            stream_key: stream_key.into(),
            alias,
            kind: kind.into(),
            table_time,
            history_ms,
            within: within.map(Into::into),
        }
    }
}

impl From<WithinSpec> for StoredWithinSpec {
    fn from(w: WithinSpec) -> Self {
        let WithinSpec {
            before_ms,
            after_ms,
            grace_ms,
            joined_key,
            typed_fields,
        } = w;
        StoredWithinSpec {
            before_ms,
            after_ms,
            grace_ms,
            joined_key: joined_key.into(),
            typed_fields: seconds(typed_fields),
        }
    }
}

impl From<StoredWithinSpec> for WithinSpec {
    fn from(w: StoredWithinSpec) -> Self {
        let StoredWithinSpec {
            before_ms,
            after_ms,
            grace_ms,
            joined_key,
            typed_fields,
        } = w;
        WithinSpec {
            before_ms,
            after_ms,
            grace_ms,
            joined_key: joined_key.into(),
            typed_fields: seconds(typed_fields),
        }
    }
}

impl From<StoredJoinSpec> for JoinSpec {
    fn from(j: StoredJoinSpec) -> Self {
        let StoredJoinSpec {
            table_topic,
            stream_key,
            alias,
            kind,
            table_time,
            history_ms,
            within,
        } = j;
        JoinSpec {
            table_topic,
            stream_key: stream_key.into(),
            alias,
            kind: kind.into(),
            table_time,
            history_ms,
            within: within.map(Into::into),
        }
    }
}

impl From<Operation> for StoredOperation {
    fn from(o: Operation) -> Self {
        match o {
            Operation::Project { columns } => StoredOperation::Project {
                columns: seconds(columns),
            },
            Operation::Aggregate(spec) => StoredOperation::Aggregate(spec.into()),
        }
    }
}

impl From<StoredOperation> for Operation {
    fn from(o: StoredOperation) -> Self {
        match o {
            StoredOperation::Project { columns } => Operation::Project {
                columns: seconds(columns),
            },
            StoredOperation::Aggregate(spec) => Operation::Aggregate(spec.into()),
        }
    }
}

impl From<Emit> for StoredEmit {
    fn from(e: Emit) -> Self {
        match e {
            Emit::Changes => StoredEmit::Changes,
            Emit::Final => StoredEmit::Final,
        }
    }
}

impl From<StoredEmit> for Emit {
    fn from(e: StoredEmit) -> Self {
        match e {
            StoredEmit::Changes => Emit::Changes,
            StoredEmit::Final => Emit::Final,
        }
    }
}

impl From<WindowSpec> for StoredWindowSpec {
    fn from(w: WindowSpec) -> Self {
        match w {
            WindowSpec::Tumbling { size_ms } => StoredWindowSpec::Tumbling { size_ms },
            WindowSpec::Hopping {
                size_ms,
                advance_ms,
            } => StoredWindowSpec::Hopping {
                size_ms,
                advance_ms,
            },
            WindowSpec::Session { gap_ms } => StoredWindowSpec::Session { gap_ms },
        }
    }
}

impl From<StoredWindowSpec> for WindowSpec {
    fn from(w: StoredWindowSpec) -> Self {
        match w {
            StoredWindowSpec::Tumbling { size_ms } => WindowSpec::Tumbling { size_ms },
            StoredWindowSpec::Hopping {
                size_ms,
                advance_ms,
            } => WindowSpec::Hopping {
                size_ms,
                advance_ms,
            },
            StoredWindowSpec::Session { gap_ms } => WindowSpec::Session { gap_ms },
        }
    }
}

impl From<WindowedSpec> for StoredWindowedSpec {
    fn from(w: WindowedSpec) -> Self {
        let WindowedSpec {
            window,
            grace_ms,
            emit,
            retention_ms,
        } = w;
        StoredWindowedSpec {
            window: window.into(),
            grace_ms,
            emit: emit.into(),
            retention_ms,
        }
    }
}

impl From<StoredWindowedSpec> for WindowedSpec {
    fn from(w: StoredWindowedSpec) -> Self {
        let StoredWindowedSpec {
            window,
            grace_ms,
            emit,
            retention_ms,
        } = w;
        WindowedSpec {
            window: window.into(),
            grace_ms,
            emit: emit.into(),
            retention_ms,
        }
    }
}

impl From<AggregateKind> for StoredAggregateKind {
    fn from(k: AggregateKind) -> Self {
        match k {
            AggregateKind::CountAll => StoredAggregateKind::CountAll,
            AggregateKind::Count => StoredAggregateKind::Count,
            AggregateKind::Sum => StoredAggregateKind::Sum,
            AggregateKind::Avg => StoredAggregateKind::Avg,
            AggregateKind::Min => StoredAggregateKind::Min,
            AggregateKind::Max => StoredAggregateKind::Max,
            AggregateKind::CountDistinct => StoredAggregateKind::CountDistinct,
            AggregateKind::Latest => StoredAggregateKind::Latest,
            AggregateKind::Earliest => StoredAggregateKind::Earliest,
            AggregateKind::SumDecimal { scale } => StoredAggregateKind::SumDecimal { scale },
            AggregateKind::AvgDecimal { scale } => StoredAggregateKind::AvgDecimal { scale },
        }
    }
}

impl From<StoredAggregateKind> for AggregateKind {
    fn from(k: StoredAggregateKind) -> Self {
        match k {
            StoredAggregateKind::CountAll => AggregateKind::CountAll,
            StoredAggregateKind::Count => AggregateKind::Count,
            StoredAggregateKind::Sum => AggregateKind::Sum,
            StoredAggregateKind::Avg => AggregateKind::Avg,
            StoredAggregateKind::Min => AggregateKind::Min,
            StoredAggregateKind::Max => AggregateKind::Max,
            StoredAggregateKind::CountDistinct => AggregateKind::CountDistinct,
            StoredAggregateKind::Latest => AggregateKind::Latest,
            StoredAggregateKind::Earliest => AggregateKind::Earliest,
            StoredAggregateKind::SumDecimal { scale } => AggregateKind::SumDecimal { scale },
            StoredAggregateKind::AvgDecimal { scale } => AggregateKind::AvgDecimal { scale },
        }
    }
}

impl From<AggregateColumn> for StoredAggregateColumn {
    fn from(c: AggregateColumn) -> Self {
        let AggregateColumn { name, kind, input } = c;
        StoredAggregateColumn {
            name,
            kind: kind.into(),
            input: input.map(Into::into),
        }
    }
}

impl From<StoredAggregateColumn> for AggregateColumn {
    fn from(c: StoredAggregateColumn) -> Self {
        let StoredAggregateColumn { name, kind, input } = c;
        AggregateColumn {
            name,
            kind: kind.into(),
            input: input.map(Into::into),
        }
    }
}

impl From<ColumnSource> for StoredColumnSource {
    fn from(c: ColumnSource) -> Self {
        match c {
            ColumnSource::GroupKey(i) => StoredColumnSource::GroupKey(i),
            ColumnSource::WindowStart => StoredColumnSource::WindowStart,
            ColumnSource::WindowEnd => StoredColumnSource::WindowEnd,
            ColumnSource::Aggregate(i) => StoredColumnSource::Aggregate(i),
            ColumnSource::Computed(e) => StoredColumnSource::Computed(e.into()),
        }
    }
}

impl From<StoredColumnSource> for ColumnSource {
    fn from(c: StoredColumnSource) -> Self {
        match c {
            StoredColumnSource::GroupKey(i) => ColumnSource::GroupKey(i),
            StoredColumnSource::WindowStart => ColumnSource::WindowStart,
            StoredColumnSource::WindowEnd => ColumnSource::WindowEnd,
            StoredColumnSource::Aggregate(i) => ColumnSource::Aggregate(i),
            StoredColumnSource::Computed(e) => ColumnSource::Computed(e.into()),
        }
    }
}

impl From<AggregateSpec> for StoredAggregateSpec {
    fn from(a: AggregateSpec) -> Self {
        let AggregateSpec {
            group_by,
            window,
            aggregates,
            columns,
            having,
        } = a;
        StoredAggregateSpec {
            group_by: all(group_by),
            window: window.map(Into::into),
            aggregates: all(aggregates),
            columns: seconds(columns),
            having: having.map(Into::into),
        }
    }
}

impl From<StoredAggregateSpec> for AggregateSpec {
    fn from(a: StoredAggregateSpec) -> Self {
        let StoredAggregateSpec {
            group_by,
            window,
            aggregates,
            columns,
            having,
        } = a;
        AggregateSpec {
            group_by: all(group_by),
            window: window.map(Into::into),
            aggregates: all(aggregates),
            columns: seconds(columns),
            having: having.map(Into::into),
        }
    }
}

impl From<Sink> for StoredSink {
    fn from(s: Sink) -> Self {
        match s {
            Sink::View => StoredSink::View,
            Sink::Topic(t) => StoredSink::Topic(t),
        }
    }
}

impl From<StoredSink> for Sink {
    fn from(s: StoredSink) -> Self {
        match s {
            StoredSink::View => Sink::View,
            StoredSink::Topic(t) => Sink::Topic(t),
        }
    }
}

impl From<LateHandling> for StoredLateHandling {
    fn from(l: LateHandling) -> Self {
        match l {
            LateHandling::Drop => StoredLateHandling::Drop,
            LateHandling::SideOutput(t) => StoredLateHandling::SideOutput(t),
        }
    }
}

impl From<StoredLateHandling> for LateHandling {
    fn from(l: StoredLateHandling) -> Self {
        match l {
            StoredLateHandling::Drop => LateHandling::Drop,
            StoredLateHandling::SideOutput(t) => LateHandling::SideOutput(t),
        }
    }
}

impl From<UnaryOp> for StoredUnaryOp {
    fn from(o: UnaryOp) -> Self {
        match o {
            UnaryOp::Not => StoredUnaryOp::Not,
            UnaryOp::Neg => StoredUnaryOp::Neg,
        }
    }
}

impl From<StoredUnaryOp> for UnaryOp {
    fn from(o: StoredUnaryOp) -> Self {
        match o {
            StoredUnaryOp::Not => UnaryOp::Not,
            StoredUnaryOp::Neg => UnaryOp::Neg,
        }
    }
}

impl From<BinaryOp> for StoredBinaryOp {
    fn from(o: BinaryOp) -> Self {
        match o {
            BinaryOp::Add => StoredBinaryOp::Add,
            BinaryOp::Sub => StoredBinaryOp::Sub,
            BinaryOp::Mul => StoredBinaryOp::Mul,
            BinaryOp::Div => StoredBinaryOp::Div,
            BinaryOp::Mod => StoredBinaryOp::Mod,
            BinaryOp::Eq => StoredBinaryOp::Eq,
            BinaryOp::NotEq => StoredBinaryOp::NotEq,
            BinaryOp::Lt => StoredBinaryOp::Lt,
            BinaryOp::LtEq => StoredBinaryOp::LtEq,
            BinaryOp::Gt => StoredBinaryOp::Gt,
            BinaryOp::GtEq => StoredBinaryOp::GtEq,
            BinaryOp::And => StoredBinaryOp::And,
            BinaryOp::Or => StoredBinaryOp::Or,
            BinaryOp::Concat => StoredBinaryOp::Concat,
        }
    }
}

impl From<StoredBinaryOp> for BinaryOp {
    fn from(o: StoredBinaryOp) -> Self {
        match o {
            StoredBinaryOp::Add => BinaryOp::Add,
            StoredBinaryOp::Sub => BinaryOp::Sub,
            StoredBinaryOp::Mul => BinaryOp::Mul,
            StoredBinaryOp::Div => BinaryOp::Div,
            StoredBinaryOp::Mod => BinaryOp::Mod,
            StoredBinaryOp::Eq => BinaryOp::Eq,
            StoredBinaryOp::NotEq => BinaryOp::NotEq,
            StoredBinaryOp::Lt => BinaryOp::Lt,
            StoredBinaryOp::LtEq => BinaryOp::LtEq,
            StoredBinaryOp::Gt => BinaryOp::Gt,
            StoredBinaryOp::GtEq => BinaryOp::GtEq,
            StoredBinaryOp::And => BinaryOp::And,
            StoredBinaryOp::Or => BinaryOp::Or,
            StoredBinaryOp::Concat => BinaryOp::Concat,
        }
    }
}

impl From<DataType> for StoredDataType {
    fn from(t: DataType) -> Self {
        match t {
            DataType::Boolean => StoredDataType::Boolean,
            DataType::Integer => StoredDataType::Integer,
            DataType::Double => StoredDataType::Double,
            DataType::Decimal { precision, scale } => StoredDataType::Decimal { precision, scale },
            DataType::String => StoredDataType::String,
            DataType::Timestamp => StoredDataType::Timestamp,
        }
    }
}

impl From<StoredDataType> for DataType {
    fn from(t: StoredDataType) -> Self {
        match t {
            StoredDataType::Boolean => DataType::Boolean,
            StoredDataType::Integer => DataType::Integer,
            StoredDataType::Double => DataType::Double,
            StoredDataType::Decimal { precision, scale } => DataType::Decimal { precision, scale },
            StoredDataType::String => DataType::String,
            StoredDataType::Timestamp => DataType::Timestamp,
        }
    }
}

impl From<Function> for StoredFunction {
    fn from(f: Function) -> Self {
        match f {
            Function::Upper => StoredFunction::Upper,
            Function::Lower => StoredFunction::Lower,
            Function::Length => StoredFunction::Length,
            Function::Trim => StoredFunction::Trim,
            Function::Substring => StoredFunction::Substring,
            Function::Concat => StoredFunction::Concat,
            Function::Replace => StoredFunction::Replace,
            Function::Abs => StoredFunction::Abs,
            Function::Round => StoredFunction::Round,
            Function::Floor => StoredFunction::Floor,
            Function::Ceil => StoredFunction::Ceil,
            Function::Sqrt => StoredFunction::Sqrt,
            Function::Coalesce => StoredFunction::Coalesce,
            Function::IfNull => StoredFunction::IfNull,
            Function::Greatest => StoredFunction::Greatest,
            Function::Least => StoredFunction::Least,
            Function::ToTimestamp => StoredFunction::ToTimestamp,
            Function::FormatTimestamp => StoredFunction::FormatTimestamp,
            Function::DateTrunc => StoredFunction::DateTrunc,
        }
    }
}

impl From<StoredFunction> for Function {
    fn from(f: StoredFunction) -> Self {
        match f {
            StoredFunction::Upper => Function::Upper,
            StoredFunction::Lower => Function::Lower,
            StoredFunction::Length => Function::Length,
            StoredFunction::Trim => Function::Trim,
            StoredFunction::Substring => Function::Substring,
            StoredFunction::Concat => Function::Concat,
            StoredFunction::Replace => Function::Replace,
            StoredFunction::Abs => Function::Abs,
            StoredFunction::Round => Function::Round,
            StoredFunction::Floor => Function::Floor,
            StoredFunction::Ceil => Function::Ceil,
            StoredFunction::Sqrt => Function::Sqrt,
            StoredFunction::Coalesce => Function::Coalesce,
            StoredFunction::IfNull => Function::IfNull,
            StoredFunction::Greatest => Function::Greatest,
            StoredFunction::Least => Function::Least,
            StoredFunction::ToTimestamp => Function::ToTimestamp,
            StoredFunction::FormatTimestamp => Function::FormatTimestamp,
            StoredFunction::DateTrunc => Function::DateTrunc,
        }
    }
}

impl From<Expr> for StoredExpr {
    fn from(e: Expr) -> Self {
        match e {
            Expr::Field(path) => StoredExpr::Field(path),
            Expr::Column(name) => StoredExpr::Column(name),
            Expr::Key => StoredExpr::Key,
            Expr::RecordTimestamp => StoredExpr::RecordTimestamp,
            Expr::Literal(v) => StoredExpr::Literal(v),
            Expr::Unary(op, e) => StoredExpr::Unary(op.into(), boxed(e)),
            Expr::Binary(op, l, r) => StoredExpr::Binary(op.into(), boxed(l), boxed(r)),
            Expr::IsNull { expr, negated } => StoredExpr::IsNull {
                expr: boxed(expr),
                negated,
            },
            Expr::InList {
                expr,
                list,
                negated,
            } => StoredExpr::InList {
                expr: boxed(expr),
                list: all(list),
                negated,
            },
            Expr::Between {
                expr,
                low,
                high,
                negated,
            } => StoredExpr::Between {
                expr: boxed(expr),
                low: boxed(low),
                high: boxed(high),
                negated,
            },
            Expr::Like {
                expr,
                pattern,
                negated,
            } => StoredExpr::Like {
                expr: boxed(expr),
                pattern: boxed(pattern),
                negated,
            },
            Expr::Case {
                operand,
                branches,
                otherwise,
            } => StoredExpr::Case {
                operand: operand.map(boxed),
                branches: branches
                    .into_iter()
                    .map(|(w, t)| (w.into(), t.into()))
                    .collect(),
                otherwise: otherwise.map(boxed),
            },
            Expr::Cast(e, t) => StoredExpr::Cast(boxed(e), t.into()),
            Expr::Function(f, args) => StoredExpr::Function(f.into(), all(args)),
        }
    }
}

impl From<StoredExpr> for Expr {
    fn from(e: StoredExpr) -> Self {
        match e {
            StoredExpr::Field(path) => Expr::Field(path),
            StoredExpr::Column(name) => Expr::Column(name),
            StoredExpr::Key => Expr::Key,
            StoredExpr::RecordTimestamp => Expr::RecordTimestamp,
            StoredExpr::Literal(v) => Expr::Literal(v),
            StoredExpr::Unary(op, e) => Expr::Unary(op.into(), boxed(e)),
            StoredExpr::Binary(op, l, r) => Expr::Binary(op.into(), boxed(l), boxed(r)),
            StoredExpr::IsNull { expr, negated } => Expr::IsNull {
                expr: boxed(expr),
                negated,
            },
            StoredExpr::InList {
                expr,
                list,
                negated,
            } => Expr::InList {
                expr: boxed(expr),
                list: all(list),
                negated,
            },
            StoredExpr::Between {
                expr,
                low,
                high,
                negated,
            } => Expr::Between {
                expr: boxed(expr),
                low: boxed(low),
                high: boxed(high),
                negated,
            },
            StoredExpr::Like {
                expr,
                pattern,
                negated,
            } => Expr::Like {
                expr: boxed(expr),
                pattern: boxed(pattern),
                negated,
            },
            StoredExpr::Case {
                operand,
                branches,
                otherwise,
            } => Expr::Case {
                operand: operand.map(boxed),
                branches: branches
                    .into_iter()
                    .map(|(w, t)| (w.into(), t.into()))
                    .collect(),
                otherwise: otherwise.map(boxed),
            },
            StoredExpr::Cast(e, t) => Expr::Cast(boxed(e), t.into()),
            StoredExpr::Function(f, args) => Expr::Function(f.into(), all(args)),
        }
    }
}
