//! Wire types of `POST /v1/statements`: one answer per statement kind,
//! gathered as [`StatementsOut`], and the SQL types they carry (the
//! processor's own types convert into these in the server).
//!
//! Every answer carries `statement` (what ran, e.g. `"CREATE TABLE AS"`);
//! the other fields are documented per statement in docs/http-api.md.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{RowsOut, ViewOut};

/// `POST /v1/statements` JSON body (the SQL text may also be sent as
/// `application/sql`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StatementsRequest {
    /// One or more statements separated by `;` (at most 100).
    pub sql: String,
}

/// `POST /v1/statements` answer: one result per statement, in order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StatementsOut {
    /// The results.
    pub results: Vec<StatementOut>,
}

/// The result of one statement.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum StatementOut {
    /// `CREATE STREAM|TABLE .. WITH (..)`.
    Declared(DeclaredOut),
    /// `CREATE [OR REPLACE] STREAM|TABLE .. AS SELECT`.
    Created(CreatedOut),
    /// `DROP STREAM|TABLE`.
    Dropped(DroppedOut),
    /// `SHOW ..`.
    Shown(ShownOut),
    /// `DESCRIBE name`.
    Described(Box<DescribedOut>),
    /// A pull query.
    Selected(SelectedOut),
    /// `EXPLAIN ..`.
    Explained(ExplainedOut),
    /// `REPLAY`, `PROMOTE` or `ROLLBACK` of a view.
    VersionChanged(VersionChangedOut),
}

/// `REPLAY`, `PROMOTE` or `ROLLBACK`: which versions of the view are built
/// and served after it (the answers of `POST /v1/views/{view}/replay`,
/// `/promote` and `/rollback`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct VersionChangedOut {
    /// `"REPLAY"`, `"PROMOTE"` or `"ROLLBACK"`.
    pub statement: String,
    /// The view.
    pub name: String,
    /// The version being built now (a replayed table).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub building_version: Option<u64>,
    /// The version served now, when it changed (a promote, a rollback, a
    /// replayed derived stream, which takes over at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub served_version: Option<u64>,
    /// The version served before a promote or rollback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_version: Option<u64>,
    /// Where a replay's new version starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<crate::StartFrom>,
}

/// Stream (an append-only sequence of events) or table (latest row per key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// `STREAM`.
    Stream,
    /// `TABLE`.
    Table,
}

/// A declared stream or table.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeclaredOut {
    /// `"CREATE STREAM"` or `"CREATE TABLE"`.
    pub statement: String,
    /// Name.
    pub name: String,
    /// Stream or table.
    pub kind: ObjectKind,
    /// The topic it reads.
    pub topic: String,
    /// `"created"`, or `"unchanged"` when declared identically before.
    pub status: String,
    /// True if the topic was created for it.
    pub topic_created: bool,
}

/// A view (or derived stream) created or replaced.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CreatedOut {
    /// `"CREATE TABLE AS"` or `"CREATE STREAM AS"`.
    pub statement: String,
    /// Name.
    pub name: String,
    /// Stream or table.
    pub kind: ObjectKind,
    /// `"created"`, `"unchanged"`, `"building"` or `"replaced"`.
    pub status: String,
    /// The version created, being built, serving, or unchanged.
    pub version: u64,
}

/// A dropped object.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DroppedOut {
    /// `"DROP STREAM"` or `"DROP TABLE"`.
    pub statement: String,
    /// Name.
    pub name: String,
    /// `"dropped"`, or `"not_found"` (with `IF EXISTS`).
    pub status: String,
}

/// A `SHOW` listing.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ShownOut {
    /// `"SHOW STREAMS"`, `"SHOW TABLES"`, `"SHOW VIEWS"`, `"SHOW TOPICS"`
    /// or `"SHOW CLUSTERS"`.
    pub statement: String,
    /// The rows, by name.
    pub rows: Vec<ShowRow>,
}

/// One row of a `SHOW`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ShowRow {
    /// A view or derived stream.
    Query {
        /// Name.
        name: String,
        /// Stream or table.
        kind: ObjectKind,
        /// The topic a derived stream writes (null for a table).
        topic: Option<String>,
        /// The topic it reads.
        source_topic: String,
        /// `"query"`.
        defined_by: String,
        /// The served version.
        version: u64,
    },
    /// A declared stream or table.
    Declared {
        /// Name.
        name: String,
        /// Stream or table.
        kind: ObjectKind,
        /// The topic it reads.
        topic: String,
        /// `"declaration"`.
        defined_by: String,
    },
    /// A topic (`SHOW TOPICS`).
    Topic {
        /// Name.
        name: String,
        /// Partitions.
        partitions: u32,
    },
    /// A Kafka cluster (`SHOW CLUSTERS`).
    Cluster {
        /// Name.
        name: String,
        /// Where its clients start.
        bootstrap_servers: String,
        /// Whether it answered its last metadata request (null before the
        /// first answer).
        reachable: Option<bool>,
        /// Brokers its last answer named.
        brokers: u32,
        /// Topics its last answer named.
        topics: u32,
        /// Why it did not answer.
        error: Option<String>,
    },
}

impl ShowRow {
    /// The name the rows are sorted by.
    pub fn name(&self) -> &str {
        match self {
            ShowRow::Topic { name, .. }
            | ShowRow::Cluster { name, .. }
            | ShowRow::Declared { name, .. }
            | ShowRow::Query { name, .. } => name,
        }
    }
}

/// A declared column type, `{"type": "varchar"}` (`DECIMAL` adds
/// `precision` and `scale`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum SqlType {
    /// `BOOLEAN`.
    Boolean,
    /// `INT`/`INTEGER`.
    Integer,
    /// `BIGINT`.
    BigInt,
    /// `DOUBLE`.
    Double,
    /// `DECIMAL(precision, scale)`.
    Decimal {
        /// Significant digits.
        precision: u32,
        /// Digits after the point.
        scale: u32,
    },
    /// `VARCHAR`/`STRING`.
    Varchar,
    /// `TIMESTAMP`.
    Timestamp,
    /// `BYTES`, `ARRAY<..>`, `MAP<..>`, `STRUCT<..>`: read as raw JSON.
    Json,
}

/// One declared column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ColumnDecl {
    /// The name as declared (the JSON field it reads).
    pub name: String,
    /// Its type.
    pub sql_type: SqlType,
    /// `KEY` (stream) or `PRIMARY KEY` (table): the column is the record
    /// key, not a field of the value.
    pub key: bool,
}

/// A stream or table declared over a topic (`CREATE STREAM|TABLE .. WITH`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SourceDecl {
    /// Normalized name (lower-cased unless quoted).
    pub name: String,
    /// Stream or table.
    pub kind: ObjectKind,
    /// Declared columns, in order (empty: schemaless JSON).
    pub columns: Vec<ColumnDecl>,
    /// The topic (`KAFKA_TOPIC` or `TOPIC`).
    pub topic: String,
    /// The Kafka cluster the topic lives on (`CLUSTER`); absent for the
    /// built-in log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Value format; only `JSON`.
    pub value_format: String,
    /// Event-time column (`TIMESTAMP='col'`); null means the record timestamp.
    pub timestamp: Option<String>,
    /// Bounded out-of-orderness of the watermark (`WATERMARK_DELAY`, ms).
    pub watermark_delay_ms: i64,
    /// A partition idle this long stops holding the watermark (`IDLE_TIMEOUT`, ms).
    pub idle_timeout_ms: i64,
    /// Partitions to create the topic with if it does not exist (`PARTITIONS`).
    pub partitions: Option<u32>,
    /// The original statement text.
    pub sql: String,
}

/// A `DESCRIBE`: a view with its settings, or a declared source.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DescribedOut {
    /// `"DESCRIBE"`.
    pub statement: String,
    /// Name.
    pub name: String,
    /// The view, as `GET /v1/views/{view}` answers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<ViewOut>,
    /// The view's output columns, in SELECT order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<ColumnOut>>,
    /// The view's settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsOut>,
    /// The declaration of a declared source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceDecl>,
    /// The SQL defaults, by setting name.
    pub defaults: BTreeMap<String, String>,
}

/// An output column of a view.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ColumnOut {
    /// Name.
    pub name: String,
    /// Its SQL type (`{"type": "varchar"}`, as a declared column's), null
    /// when the input is schemaless and the query fixes none.
    pub sql_type: Option<SqlType>,
    /// A GROUP BY column: the row key is made of these.
    pub key: bool,
}

/// How events are grouped in time: `{"kind": "tumbling", "size_ms"}`,
/// `{"kind": "hopping", "size_ms", "advance_ms"}` or
/// `{"kind": "session", "gap_ms"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum WindowSpec {
    /// Fixed, non-overlapping windows of `size_ms`.
    Tumbling {
        /// Window length (ms).
        size_ms: i64,
    },
    /// Windows of `size_ms` starting every `advance_ms`.
    Hopping {
        /// Window length (ms).
        size_ms: i64,
        /// Distance between window starts (ms).
        advance_ms: i64,
    },
    /// Per key, events closer than `gap_ms` share a window.
    Session {
        /// Inactivity gap that closes a session (ms).
        gap_ms: i64,
    },
}

/// Emit a window's row on every change, or once when it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Emit {
    /// EMIT CHANGES.
    Changes,
    /// EMIT FINAL.
    Final,
}

/// Late events: `"drop"`, or `{"side_output": "topic"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum LateHandling {
    /// Dropped and counted.
    Drop,
    /// Appended to this topic (and counted).
    SideOutput(String),
}

/// The settings a view's plan runs with.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SettingsOut {
    /// How far behind the newest event the watermark trails (ms).
    pub watermark_delay_ms: i64,
    /// After how long without records a partition stops holding the watermark (ms).
    pub idle_timeout_ms: i64,
    /// How far ahead of the clock an event may be (ms).
    pub max_future_ms: i64,
    /// The window (null when not windowed).
    pub window: Option<WindowSpec>,
    /// The window's grace (ms).
    pub grace_ms: Option<i64>,
    /// When window rows are emitted.
    pub emit: Option<Emit>,
    /// What happens to late events.
    pub late_events: LateHandling,
    /// Deduplication time-to-live (ms), null without deduplication.
    pub dedup_ttl_ms: Option<i64>,
}

/// A pull query's rows: a `GET /v1/views/{view}/rows` answer whose rows
/// are the matching (and projected) ones.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SelectedOut {
    /// `"SELECT"`.
    pub statement: String,
    /// The rows and where they were read.
    #[serde(flatten)]
    pub rows: RowsOut,
    /// True when more rows matched than were answered.
    pub truncated: bool,
}

/// An `EXPLAIN`: the operators an event meets, in order.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ExplainedOut {
    /// `"EXPLAIN"`.
    pub statement: String,
    /// The view explained, or the one the explained statement would make.
    pub name: String,
    /// The operators, in the order an event meets them.
    pub operators: Vec<OperatorOut>,
    /// The version's state on disk (bytes): of the served version, for
    /// `EXPLAIN view`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_bytes: Option<u64>,
    /// The same as text, one operator per line and its state below it.
    pub text: String,
}

/// One operator of an `EXPLAIN`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct OperatorOut {
    /// `source`, `dedup`, `join`, `filter`, `aggregate`, `project` or
    /// `sink`.
    pub operator: String,
    /// What it does.
    pub detail: String,
    /// Where it runs when the version has several workers.
    pub runs_on: String,
    /// The state it keeps and what bounds it (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Entries its state holds in memory now (`EXPLAIN view` of a running
    /// version; absent when not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_entries: Option<u64>,
}

impl std::fmt::Display for SqlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlType::Boolean => f.write_str("BOOLEAN"),
            SqlType::Integer => f.write_str("INTEGER"),
            SqlType::BigInt => f.write_str("BIGINT"),
            SqlType::Double => f.write_str("DOUBLE"),
            SqlType::Decimal { precision, scale } => write!(f, "DECIMAL({precision}, {scale})"),
            SqlType::Varchar => f.write_str("VARCHAR"),
            SqlType::Timestamp => f.write_str("TIMESTAMP"),
            SqlType::Json => f.write_str("JSON"),
        }
    }
}

impl std::fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ObjectKind::Stream => "stream",
            ObjectKind::Table => "table",
        })
    }
}
