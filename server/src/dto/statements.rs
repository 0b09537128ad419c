//! Wire types of `POST /v1/statements`: one answer per statement kind,
//! gathered as [`StatementsOut`]. The statement executor
//! (`crate::statements`) builds them; the route only serializes them.
//!
//! Every answer carries `statement` (what ran, e.g. `"CREATE TABLE AS"`);
//! the other fields are documented per statement in docs/http-api.md and
//! pinned by `server/openapi.json` and the end-to-end tests.

use std::collections::BTreeMap;

use kappa_processor::plan::{Emit, LateHandling};
use kappa_processor::sql::{ObjectKind, SourceDecl, SqlType};
use kappa_processor::window::WindowSpec;
use serde::Serialize;

use super::{RowsOut, ViewOut};

/// `POST /v1/statements` answer: one result per statement, in order.
#[derive(Debug, Serialize)]
pub struct StatementsOut {
    /// The results.
    pub results: Vec<StatementOut>,
}

/// The result of one statement.
#[derive(Debug, Serialize)]
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
}

/// A declared stream or table.
#[derive(Debug, Serialize)]
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
    pub status: &'static str,
    /// True if the topic was created for it.
    pub topic_created: bool,
}

/// A view (or derived stream) created or replaced.
#[derive(Debug, Serialize)]
pub struct CreatedOut {
    /// `"CREATE TABLE AS"` or `"CREATE STREAM AS"`.
    pub statement: String,
    /// Name.
    pub name: String,
    /// Stream or table.
    pub kind: ObjectKind,
    /// `"created"`, `"unchanged"`, `"building"` or `"replaced"`.
    pub status: &'static str,
    /// The version created, being built, serving, or unchanged.
    pub version: u64,
}

/// A dropped object.
#[derive(Debug, Serialize)]
pub struct DroppedOut {
    /// `"DROP STREAM"` or `"DROP TABLE"`.
    pub statement: String,
    /// Name.
    pub name: String,
    /// `"dropped"`, or `"not_found"` (with `IF EXISTS`).
    pub status: &'static str,
}

/// A `SHOW` listing.
#[derive(Debug, Serialize)]
pub struct ShownOut {
    /// `"SHOW STREAMS"`, `"SHOW TABLES"`, `"SHOW VIEWS"` or `"SHOW TOPICS"`.
    pub statement: &'static str,
    /// The rows, by name.
    pub rows: Vec<ShowRow>,
}

/// One row of a `SHOW`.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub enum ShowRow {
    /// A topic (`SHOW TOPICS`).
    Topic {
        /// Name.
        name: String,
        /// Partitions.
        partitions: u32,
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
        defined_by: &'static str,
    },
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
        defined_by: &'static str,
        /// The served version.
        version: u64,
    },
}

impl ShowRow {
    /// The name the rows are sorted by.
    pub fn name(&self) -> &str {
        match self {
            ShowRow::Topic { name, .. }
            | ShowRow::Declared { name, .. }
            | ShowRow::Query { name, .. } => name,
        }
    }
}

/// A `DESCRIBE`: a view with its settings, or a declared source.
#[derive(Debug, Serialize)]
pub struct DescribedOut {
    /// `"DESCRIBE"`.
    pub statement: &'static str,
    /// Name.
    pub name: String,
    /// The view, as `GET /v1/views/{view}` answers it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub view: Option<ViewOut>,
    /// The view's output columns, in SELECT order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<Vec<ColumnOut>>,
    /// The view's settings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<SettingsOut>,
    /// The declaration of a declared source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceDecl>,
    /// The SQL defaults, by setting name.
    pub defaults: BTreeMap<String, String>,
}

/// An output column of a view.
#[derive(Debug, Serialize)]
pub struct ColumnOut {
    /// Name.
    pub name: String,
    /// Its SQL type (`{"type": "varchar"}`, as a declared column's), null
    /// when the input is schemaless and the query fixes none.
    pub sql_type: Option<SqlType>,
    /// A GROUP BY column: the row key is made of these.
    pub key: bool,
}

/// The settings a view's plan runs with.
#[derive(Debug, Serialize)]
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
#[derive(Debug, Serialize)]
pub struct SelectedOut {
    /// `"SELECT"`.
    pub statement: &'static str,
    /// The rows and where they were read.
    #[serde(flatten)]
    pub rows: RowsOut,
    /// True when more rows matched than were answered.
    pub truncated: bool,
}
