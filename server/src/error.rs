//! The one place where errors become HTTP responses: every error is JSON
//! `{"error": {"code", "message"}}` with a stable snake_case code.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use kappa_log::LogError;
use kappa_processor::error::ProcessorError;
use kappa_processor::sql::SqlError;
use serde_json::json;

use crate::statements::StatementError;
use crate::views::ViewError;

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable snake_case code.
    pub code: &'static str,
    /// What went wrong, naming the object.
    pub message: String,
    /// More fields of the `error` object (a SQL error's `line` and `column`).
    pub details: serde_json::Map<String, serde_json::Value>,
}

impl ApiError {
    /// An error with the given status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: serde_json::Map::new(),
        }
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 413 `too_large`, naming the limit.
    pub fn too_large(message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", message)
    }

    /// 500 `internal`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

impl From<LogError> for ApiError {
    fn from(e: LogError) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            LogError::InvalidTopicName { .. } => (S::BAD_REQUEST, "invalid_topic_name"),
            LogError::InvalidConfig(_) => (S::BAD_REQUEST, "invalid_config"),
            LogError::InvalidGroupName { .. } => (S::BAD_REQUEST, "invalid_group"),
            LogError::InvalidArgument(_) => (S::BAD_REQUEST, "bad_request"),
            LogError::KeyRequired { .. } => (S::BAD_REQUEST, "key_required"),
            LogError::UnknownTopic(_) => (S::NOT_FOUND, "unknown_topic"),
            LogError::TopicExists(_) => (S::CONFLICT, "topic_exists"),
            LogError::UnknownPartition { .. } => (S::BAD_REQUEST, "unknown_partition"),
            LogError::OffsetOutOfRange { .. } => (S::BAD_REQUEST, "offset_out_of_range"),
            LogError::Backpressure { .. } => (S::SERVICE_UNAVAILABLE, "overloaded"),
            LogError::IdempotencyKeyReused { .. } => (S::CONFLICT, "idempotency_key_reused"),
            // The partition budget is not a body size problem.
            LogError::PartitionBudget { .. } => (S::CONFLICT, "limit_exceeded"),
            LogError::LimitExceeded(_) => (S::PAYLOAD_TOO_LARGE, "too_large"),
            LogError::PartitionFailed { .. } => (S::SERVICE_UNAVAILABLE, "partition_failed"),
            // Only the processor chains appends; said as the failure it follows.
            LogError::ChainBroken { .. } => (S::SERVICE_UNAVAILABLE, "partition_failed"),
            LogError::Unavailable(_) => (S::SERVICE_UNAVAILABLE, "tiered_storage_unavailable"),
            LogError::Closed => (S::SERVICE_UNAVAILABLE, "shutting_down"),
            LogError::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                (S::INSUFFICIENT_STORAGE, "disk_full")
            }
            LogError::Damaged { .. } => (S::INTERNAL_SERVER_ERROR, "damaged_data"),
            LogError::Corrupt { .. } | LogError::Io { .. } | LogError::Metadata { .. } => {
                (S::INTERNAL_SERVER_ERROR, "internal")
            }
        };
        if status.is_server_error() && status != S::SERVICE_UNAVAILABLE {
            tracing::error!(error = %e, "request failed");
        }
        let mut error = ApiError::new(status, code, e.to_string());
        if let LogError::Damaged {
            partition,
            first_offset,
            next_offset,
            ..
        } = &e
        {
            // What a reader needs to pass over the damage knowingly.
            error.details.insert("partition".into(), json!(partition));
            error
                .details
                .insert("first_offset".into(), json!(first_offset));
            error
                .details
                .insert("next_offset".into(), json!(next_offset));
        }
        error
    }
}

impl From<SqlError> for ApiError {
    fn from(e: SqlError) -> Self {
        let mut error = ApiError::new(StatusCode::BAD_REQUEST, "sql_error", e.message);
        error.details.insert("line".into(), json!(e.line));
        error.details.insert("column".into(), json!(e.column));
        error
    }
}

impl From<ProcessorError> for ApiError {
    fn from(e: ProcessorError) -> Self {
        match e {
            ProcessorError::Log(e) => e.into(),
            ProcessorError::InvalidPlan(m) => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_plan",
                format!("invalid definition: {m}"),
            ),
            ProcessorError::StateDamaged(m) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "state_damaged", m)
            }
            e @ ProcessorError::WaitingForSource(_) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "source_unavailable",
                e.to_string(),
            ),
            e => {
                tracing::error!(error = %e, "request failed");
                ApiError::internal(e.to_string())
            }
        }
    }
}

impl From<ViewError> for ApiError {
    fn from(e: ViewError) -> Self {
        use StatusCode as S;
        let (status, code) = match &e {
            ViewError::UnknownView(_) => (S::NOT_FOUND, "unknown_view"),
            ViewError::UnknownSource(_) => (S::NOT_FOUND, "unknown_source"),
            ViewError::UnknownVersion { .. } => (S::NOT_FOUND, "unknown_version"),
            ViewError::Exists(_) => (S::CONFLICT, "already_exists"),
            ViewError::HasDependents { .. } => (S::CONFLICT, "has_dependents"),
            ViewError::InvalidPlan(_) => (S::BAD_REQUEST, "invalid_plan"),
            ViewError::BadRequest(_) => (S::BAD_REQUEST, "bad_request"),
            ViewError::NotATable(_) => (S::BAD_REQUEST, "not_a_table"),
            ViewError::Behind { .. } => (S::GATEWAY_TIMEOUT, "view_behind"),
            ViewError::Closed => (S::SERVICE_UNAVAILABLE, "shutting_down"),
            ViewError::Unavailable { .. } => (S::SERVICE_UNAVAILABLE, "view_unavailable"),
            ViewError::Refused { code, .. } => (S::CONFLICT, *code),
            ViewError::Processor(_) => {
                let ViewError::Processor(inner) = e else {
                    unreachable!("matched above")
                };
                return inner.into();
            }
            ViewError::Catalog(c) if c.is_disk_full() => (S::INSUFFICIENT_STORAGE, "disk_full"),
            ViewError::Catalog(_) => (S::INTERNAL_SERVER_ERROR, "internal"),
        };
        if status.is_server_error() && status != S::SERVICE_UNAVAILABLE {
            tracing::error!(error = %e, "request failed");
        }
        ApiError::new(status, code, e.to_string())
    }
}

impl From<StatementError> for ApiError {
    fn from(e: StatementError) -> Self {
        match e {
            StatementError::Sql(e) => e.into(),
            StatementError::Log(e) => (*e).into(),
            StatementError::View(e) => (*e).into(),
            StatementError::BadRequest(m) => ApiError::bad_request(m),
            StatementError::Unavailable(m) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "cluster_unavailable", m)
            }
            StatementError::OffsetOutOfRange(m) => {
                ApiError::new(StatusCode::BAD_REQUEST, "offset_out_of_range", m)
            }
        }
    }
}

impl From<crate::node::topics::ProduceTopicError> for ApiError {
    fn from(e: crate::node::topics::ProduceTopicError) -> Self {
        use crate::node::topics::ProduceTopicError as E;
        match e {
            E::Unknown { .. } => {
                ApiError::new(StatusCode::NOT_FOUND, "unknown_topic", e.to_string())
            }
            E::OverBudget { .. } => {
                ApiError::new(StatusCode::CONFLICT, "limit_exceeded", e.to_string())
            }
            E::Log(e) => e.into(),
        }
    }
}

impl From<crate::auth::store::StoreError> for ApiError {
    fn from(e: crate::auth::store::StoreError) -> Self {
        let (status, code) = match &e {
            crate::auth::store::StoreError::Invalid(_) => {
                (StatusCode::BAD_REQUEST, "invalid_token_spec")
            }
            crate::auth::store::StoreError::Exists(_) => (StatusCode::CONFLICT, "token_exists"),
            crate::auth::store::StoreError::Unknown(_) => (StatusCode::NOT_FOUND, "unknown_token"),
            crate::auth::store::StoreError::Bootstrap => (StatusCode::CONFLICT, "bootstrap_token"),
            crate::auth::store::StoreError::Io(_) => {
                (StatusCode::INTERNAL_SERVER_ERROR, "internal")
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        crate::metrics::count_error(self.status.as_u16(), self.code);
        let retry_after_ms = self.details.get("retry_after_ms").and_then(|v| v.as_u64());
        let mut error = serde_json::Map::new();
        error.insert("code".into(), json!(self.code));
        error.insert("message".into(), json!(self.message));
        error.extend(self.details);
        let body = json!({ "error": error });
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            // Whole seconds, rounded up, from the wait the body states.
            let ms = retry_after_ms.unwrap_or(1_000);
            let secs = ms.div_ceil(1_000).max(1);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// Result of a handler.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_append_queue_sheds_with_503_and_retry_after() {
        let e = ApiError::from(LogError::Backpressure {
            topic: "t".into(),
            partition: 1,
        });
        assert_eq!(
            (e.status, e.code),
            (StatusCode::SERVICE_UNAVAILABLE, "overloaded")
        );
        let response = e.into_response();
        assert_eq!(response.headers().get(header::RETRY_AFTER).unwrap(), "1");
    }

    #[test]
    fn log_errors_map_to_their_documented_codes() {
        let cases = [
            (LogError::UnknownTopic("t".into()), 404, "unknown_topic"),
            (LogError::TopicExists("t".into()), 409, "topic_exists"),
            (LogError::InvalidConfig("x".into()), 400, "invalid_config"),
            (LogError::LimitExceeded("x".into()), 413, "too_large"),
            (
                LogError::PartitionBudget {
                    requested: 2,
                    max: 1024,
                    in_use: 1023,
                },
                409,
                "limit_exceeded",
            ),
            (LogError::Closed, 503, "shutting_down"),
            (
                LogError::Io {
                    path: "p".into(),
                    source: std::io::Error::new(std::io::ErrorKind::StorageFull, "full"),
                },
                507,
                "disk_full",
            ),
        ];
        for (error, status, code) in cases {
            let e = ApiError::from(error);
            assert_eq!((e.status.as_u16(), e.code), (status, code));
        }
    }

    #[test]
    fn a_catalog_write_on_a_full_disk_answers_507_not_500() {
        use crate::views::catalog::CatalogError;
        let write = |kind| {
            ViewError::Catalog(CatalogError::Write {
                what: "the catalog",
                path: "catalog.json".into(),
                source: Box::new(LogError::Io {
                    path: "catalog.json.tmp".into(),
                    source: std::io::Error::new(kind, "no"),
                }),
            })
        };
        let full = ApiError::from(write(std::io::ErrorKind::StorageFull));
        assert_eq!((full.status.as_u16(), full.code), (507, "disk_full"));
        assert!(
            full.message.contains("writing the catalog"),
            "{}",
            full.message
        );
        let other = ApiError::from(write(std::io::ErrorKind::PermissionDenied));
        assert_eq!((other.status.as_u16(), other.code), (500, "internal"));
    }
}
