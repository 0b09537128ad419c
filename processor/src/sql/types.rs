//! The typed values statements parse into. Declarations ([`SourceDecl`],
//! [`CreateAs`]) are plain serializable data: the server persists them in
//! its catalog and re-plans a [`CreateAs`] from its SQL text.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::pull::PullQuery;

/// A parsed statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `CREATE STREAM|TABLE name (cols..) WITH (..)`: a schema over a topic.
    CreateSource(SourceDecl),
    /// `CREATE [OR REPLACE] STREAM|TABLE name [WITH (..)] AS SELECT ..`: a
    /// processor feeding a topic (stream) or a view (table).
    CreateAs(CreateAs),
    /// `DROP STREAM|TABLE [IF EXISTS] name`.
    Drop {
        /// Stream or table.
        kind: ObjectKind,
        /// The (normalized) name.
        name: String,
        /// `IF EXISTS` was given: dropping a missing object is not an error.
        if_exists: bool,
    },
    /// `SHOW STREAMS|TABLES|VIEWS|TOPICS`.
    Show(ShowWhat),
    /// `DESCRIBE name`: the (normalized) name of a stream, table or view.
    Describe(String),
    /// A pull query on a view.
    Select(PullQuery),
    /// `EXPLAIN ..`: a plan's operators.
    Explain(Explain),
    /// `INSERT INTO stream [WITH (QUERY_ID='id')] SELECT ..`: a processor
    /// appending to an existing stream's topic.
    InsertInto(InsertInto),
    /// `REPLAY`, `PROMOTE` or `ROLLBACK` of a view: which of its versions
    /// is built and served.
    ChangeVersion(VersionChange),
}

/// A change of which version of a view is built or served: the SQL forms
/// of `POST /v1/views/{view}/replay`, `/promote` and `/rollback`.
#[derive(Debug, Clone, PartialEq)]
pub enum VersionChange {
    /// `REPLAY [TABLE|STREAM] name [FROM ..] [WITH (SWAP = .., ALLOW_TRUNCATED = ..)]`:
    /// a new version of the view's definition, built from `from`.
    Replay {
        /// The (normalized) view name.
        name: String,
        /// Where the new version starts reading (default: earliest).
        from: crate::runner::StartFrom,
        /// `SWAP = 'MANUAL'`: the new version waits in `ready` for `PROMOTE`.
        swap_manual: bool,
        /// `ALLOW_TRUNCATED = TRUE`: replay even though retention deleted
        /// input the served version saw.
        allow_truncated: bool,
    },
    /// `PROMOTE [TABLE] name`: serve the version being built now.
    Promote {
        /// The (normalized) view name.
        name: String,
    },
    /// `ROLLBACK [TABLE] name`: serve the previous version again.
    Rollback {
        /// The (normalized) view name.
        name: String,
    },
}

impl VersionChange {
    /// The view it changes.
    pub fn name(&self) -> &str {
        match self {
            VersionChange::Replay { name, .. }
            | VersionChange::Promote { name }
            | VersionChange::Rollback { name } => name,
        }
    }

    /// The statement's keyword: `REPLAY`, `PROMOTE` or `ROLLBACK`.
    pub fn keyword(&self) -> &'static str {
        match self {
            VersionChange::Replay { .. } => "REPLAY",
            VersionChange::Promote { .. } => "PROMOTE",
            VersionChange::Rollback { .. } => "ROLLBACK",
        }
    }
}

/// `INSERT INTO target SELECT ..`: made a `CREATE STREAM .. AS` into the
/// target's topic once the target is known ([`super::insert_create`]).
#[derive(Debug, Clone, PartialEq)]
pub struct InsertInto {
    /// The (normalized) name of the stream written to.
    pub target: String,
    /// `QUERY_ID`: the name of the processor (and view) it makes; by
    /// default `insert_into_<target>`.
    pub query_id: Option<String>,
    /// The text from `SELECT` to the statement's end.
    pub select_sql: String,
    /// 1-based line of `SELECT` in the text given to [`super::parse`].
    pub line: u64,
    /// 1-based column of `SELECT`.
    pub column: u64,
}

/// What `EXPLAIN` explains.
#[derive(Debug, Clone, PartialEq)]
pub enum Explain {
    /// `EXPLAIN CREATE .. AS SELECT ..`: the plan it would run (nothing is
    /// created).
    Create(Box<CreateAs>),
    /// `EXPLAIN name`: the plan view `name` serves, with its state now.
    View(String),
    /// `EXPLAIN SELECT ..`: how a pull query reads its view (nothing is
    /// read).
    Select(Box<PullQuery>),
}

/// Stream (an append-only sequence of events) or table (latest row per key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// `STREAM`.
    Stream,
    /// `TABLE`.
    Table,
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ObjectKind::Stream => "stream",
            ObjectKind::Table => "table",
        })
    }
}

/// What `SHOW` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ShowWhat {
    /// `SHOW STREAMS`.
    Streams,
    /// `SHOW TABLES`.
    Tables,
    /// `SHOW VIEWS`.
    Views,
    /// `SHOW TOPICS`.
    Topics,
    /// `SHOW CLUSTERS`: the Kafka clusters the server knows.
    Clusters,
}

/// A declared column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum SqlType {
    /// `BOOLEAN`.
    Boolean,
    /// `INT`/`INTEGER` (32-bit in ksqlDB; evaluated as 64-bit here).
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
    /// `TIMESTAMP`: epoch milliseconds or an RFC 3339 string in the JSON.
    Timestamp,
    /// `BYTES`, `ARRAY<..>`, `MAP<..>`, `STRUCT<..>`: read as raw JSON.
    Json,
}

impl fmt::Display for SqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

/// One declared column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDecl {
    /// The name as declared: the JSON field it reads (quoted or not, the
    /// spelling is kept).
    pub name: String,
    /// Its type.
    pub sql_type: SqlType,
    /// `KEY` (stream) or `PRIMARY KEY` (table): the column is the record
    /// key, not a field of the value.
    pub key: bool,
}

/// A stream or table declared over a topic (`CREATE STREAM|TABLE .. WITH`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceDecl {
    /// Normalized name (lower-cased unless quoted).
    pub name: String,
    /// Stream or table.
    pub kind: ObjectKind,
    /// Declared columns, in order (empty: schemaless JSON, fields are read
    /// by the names queries use).
    pub columns: Vec<ColumnDecl>,
    /// The topic (`KAFKA_TOPIC` or `TOPIC`).
    pub topic: String,
    /// The Kafka cluster the topic lives on (`CLUSTER`), by the name the
    /// server configures it under; `None`: the built-in log.
    pub cluster: Option<String>,
    /// Value format; only `JSON`.
    pub value_format: String,
    /// Event-time column (`TIMESTAMP='col'`, declared spelling); `None`
    /// means the record timestamp.
    pub timestamp: Option<String>,
    /// Bounded out-of-orderness of the watermark (`WATERMARK_DELAY`).
    pub watermark_delay_ms: i64,
    /// A partition idle this long stops holding the watermark (`IDLE_TIMEOUT`).
    pub idle_timeout_ms: i64,
    /// Partitions to create the topic with if it does not exist (`PARTITIONS`).
    pub partitions: Option<u32>,
    /// The original statement text.
    pub sql: String,
}

impl SourceDecl {
    /// The key column (`KEY` / `PRIMARY KEY`), if declared.
    pub fn key_column(&self) -> Option<&ColumnDecl> {
        self.columns.iter().find(|c| c.key)
    }
}

/// Deduplication requested by `DEDUP_BY` (+ `DEDUP_TTL`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupDecl {
    /// The id expression's SQL text (usually a column name).
    pub by: String,
    /// How long an id is remembered (event time).
    pub ttl_ms: i64,
}

/// `CREATE [OR REPLACE] STREAM|TABLE name [WITH (..)] AS SELECT ..`.
///
/// The query itself stays SQL text ([`CreateAs::sql`]); [`super::plan`]
/// compiles it against the catalog of the moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateAs {
    /// Normalized name of the new stream or table (and of its processor).
    pub name: String,
    /// `STREAM` (sinks to a topic) or `TABLE` (sinks to a view).
    pub kind: ObjectKind,
    /// `OR REPLACE` was given: a new version replaces the running one.
    pub or_replace: bool,
    /// Normalized names of the sources read (`FROM`, then `JOIN`).
    pub sources: Vec<String>,
    /// Output topic of a stream (`KAFKA_TOPIC`, default: the name).
    pub topic: Option<String>,
    /// The Kafka cluster the output topic lives on (`CLUSTER`); `None`:
    /// the built-in log.
    #[serde(default)]
    pub cluster: Option<String>,
    /// Partitions of the output topic (`PARTITIONS`).
    pub partitions: Option<u32>,
    /// How the output topic is stored if the statement creates it
    /// (`COMPRESSION`); `None`: the server's topic defaults (uncompressed).
    #[serde(default)]
    pub compression: Option<kappa_log::Compression>,
    /// Topic for events too late for their window (`LATE_TOPIC`).
    pub late_topic: Option<String>,
    /// Deduplication (`DEDUP_BY`, `DEDUP_TTL`).
    pub dedup: Option<DedupDecl>,
    /// Overrides the source's watermark delay (`WATERMARK_DELAY`).
    pub watermark_delay_ms: Option<i64>,
    /// Overrides the source's idle timeout (`IDLE_TIMEOUT`).
    pub idle_timeout_ms: Option<i64>,
    /// How far after its append time an event time may be (`MAX_FUTURE`).
    #[serde(default)]
    pub max_future_ms: Option<i64>,
    /// `SWAP='MANUAL'`: a replacement waits for `promote` once caught up.
    #[serde(default)]
    pub swap_manual: bool,
    /// How far behind the watermark a join keeps table history
    /// (`JOIN_HISTORY`).
    #[serde(default)]
    pub join_history_ms: Option<i64>,
    /// Previous versions kept readable and available to roll back to
    /// (`KEEP_VERSIONS`; the server's `view_keep_versions` if unset).
    #[serde(default)]
    pub keep_versions: Option<u32>,
    /// How long a replaced version is kept (`VERSION_GRACE`; the server's
    /// `view_grace_ms` if unset).
    #[serde(default)]
    pub version_grace_ms: Option<i64>,
    /// Workers of each kind its versions run with (`PARALLELISM`; the
    /// server's `processor_threads` if unset).
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// The statement's original text, without the trailing `;`.
    pub sql: String,
    /// 1-based line of the statement's first character in the text given
    /// to [`super::parse`] (so planning errors point into that text).
    pub line: u64,
    /// 1-based column of the statement's first character.
    pub column: u64,
}
