//! Wire types of the error answer, health and readiness, tokens and the
//! history of the console's charts.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Every error answer: `{"error": {"code", "message", ..}}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong: a stable snake_case `code`, a message naming the
/// object and the problem, and for some codes more fields (`partition`,
/// `first_offset`, `next_offset` of `damaged_data`; `line`, `column` of
/// `sql_error`; `statement` of a failed statement batch; `retry_after_ms`
/// of `rate_limited`; `records`, `appended`, `failed` of
/// `partially_appended`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable snake_case code (docs/http-api.md lists them by status).
    pub code: String,
    /// What failed, for people.
    pub message: String,
    /// The fields some codes add.
    #[serde(flatten)]
    pub details: BTreeMap<String, serde_json::Value>,
}

/// `GET /health`, and `GET /ready` when ready.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StatusOut {
    /// `"ok"` (health) or `"ready"`.
    pub status: String,
}

/// `GET /ready` when not ready (`503`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DegradedOut {
    /// `"degraded"`.
    pub status: String,
    /// Partitions that stopped accepting writes.
    pub failed_partitions: Vec<FailedPartition>,
    /// Views whose served version is not running.
    pub failed_views: Vec<FailedView>,
}

/// A partition that stopped accepting writes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FailedPartition {
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// Why.
    pub reason: String,
}

/// A view whose served version is not running.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FailedView {
    /// View (null when the check itself failed).
    pub view: Option<String>,
    /// Why: the processor's error, or why the last retry failed (null
    /// when no failure of the served version is recorded).
    pub reason: Option<String>,
}

/// `POST /v1/tokens` body.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// Name: 1..=64 characters of `[A-Za-z0-9._-]`.
    pub name: String,
    /// Grants, e.g. `"admin"`, `"read:orders"`, `"produce:orders*"`,
    /// `"group:*"`, `"view:per_page"`, `"metrics"`.
    pub grants: Vec<String>,
    /// Most records per second it may produce (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce_records_per_second: Option<u64>,
}

/// `POST /v1/tokens` answer (`201`): the secret is shown this once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewToken {
    /// Name.
    pub name: String,
    /// The secret to send as `Authorization: Bearer <token>`.
    pub token: String,
    /// Grants.
    pub grants: Vec<String>,
    /// Creation time (ms since the epoch).
    pub created_at_ms: u64,
    /// Most records per second it may produce (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce_records_per_second: Option<u64>,
}

/// A token as listed (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TokenInfo {
    /// Name.
    pub name: String,
    /// Grants.
    pub grants: Vec<String>,
    /// Creation time (ms since the epoch); absent for the bootstrap token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at_ms: Option<u64>,
    /// `store` (the data directory) or `environment` (`KAPPA_BOOTSTRAP_TOKEN`).
    pub source: String,
    /// Most records per second it may produce (absent: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub produce_records_per_second: Option<u64>,
}

/// `GET /v1/tokens`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TokensOut {
    /// Every token, by name.
    pub tokens: Vec<TokenInfo>,
}

/// `DELETE /v1/tokens/{name}` answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RevokedOut {
    /// The token's name.
    pub name: String,
    /// Always true.
    pub revoked: bool,
}

/// `GET /v1/history`: the last samples, as series over `times_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct HistoryOut {
    /// Time between samples, ms.
    pub interval_ms: u64,
    /// Most samples kept.
    pub capacity: usize,
    /// More than 500 topics or views exist: the samples hold the first of
    /// them by name only.
    pub truncated: bool,
    /// When each sample was taken (ms since the epoch), oldest first.
    pub times_ms: Vec<i64>,
    /// One series per topic, by name.
    pub topics: Vec<TopicSeries>,
    /// One series per view, by name.
    pub views: Vec<ViewSeries>,
}

/// A topic's rates over the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct TopicSeries {
    /// The topic.
    pub name: String,
    /// Records appended per second.
    pub records_per_second: Vec<Option<f64>>,
    /// Growth of its bytes on disk per second (0 when retention deleted more).
    pub bytes_per_second: Vec<Option<f64>>,
    /// Offsets committed by consumer groups per second (records consumed).
    pub consumed_per_second: Vec<Option<f64>>,
}

/// A view's processing rate, lag and status over the samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ViewSeries {
    /// The view.
    pub name: String,
    /// Input records processed per second (served and building versions).
    pub records_per_second: Vec<Option<f64>>,
    /// Input records the served version has yet to process.
    pub lag: Vec<Option<u64>>,
    /// Input records a build has yet to process (null: no build).
    pub build_lag: Vec<Option<u64>>,
    /// The view's status at each sample.
    pub status: Vec<Option<String>>,
}
