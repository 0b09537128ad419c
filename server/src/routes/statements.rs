//! `POST /v1/statements`: takes SQL (ksqlDB flavour) — declarations,
//! `CREATE [OR REPLACE] .. AS SELECT`, `DROP`, `SHOW`, `DESCRIBE` and pull
//! queries — from the body, has [`crate::statements::Executor`] run each
//! and answers one result per statement.
//!
//! The whole text is parsed before anything runs, so a syntax error
//! changes nothing. Statements then run in order; the first that fails
//! stops the run and is answered as the error (with its `statement`
//! index); the ones before it stay applied.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use kappa_processor::sql;
use serde::Deserialize;
use serde_json::json;

use super::body;
use crate::dto::statements::StatementsOut;
use crate::error::{ApiError, ApiResult};
use crate::statements::Executor;
use crate::AppState;

/// Most statements in one request.
pub const MAX_STATEMENTS: usize = 100;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlBody {
    sql: String,
}

/// `POST /v1/statements`.
pub async fn run(
    State(state): State<AppState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let text = sql_text(&headers, &bytes)?;
    let results = on_sql_thread(move || {
        let statements = sql::parse(&text)?;
        if statements.is_empty() {
            return Err(ApiError::bad_request("the request has no statements"));
        }
        if statements.len() > MAX_STATEMENTS {
            return Err(ApiError::too_large(format!(
                "more than {MAX_STATEMENTS} statements in one request"
            )));
        }
        let executor = Executor {
            log: &state.log,
            views: &state.views,
            topic_defaults: state.config.topic_defaults(),
        };
        let mut results = Vec::new();
        for (i, statement) in statements.into_iter().enumerate() {
            match executor.execute(statement) {
                Ok(r) => results.push(r),
                Err(e) => {
                    let mut e = ApiError::from(e);
                    e.details.insert("statement".into(), json!(i));
                    return Err(e);
                }
            }
        }
        Ok(results)
    })
    .await?;
    Ok(Json(StatementsOut { results }).into_response())
}

/// Most statement requests handled at once (one thread each); more wait.
pub const MAX_SQL_THREADS: usize = 8;

/// Runs `f` (parsing, planning, blocking calls into the views) on a thread
/// of its own with a [`sql::SQL_STACK_BYTES`] stack (the SQL front end
/// bounds its recursion well inside it), never on an async worker whose
/// stack size is not ours to know.
async fn on_sql_thread<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(MAX_SQL_THREADS);
    let _slot = SLOTS
        .acquire()
        .await
        .map_err(|e| ApiError::internal(format!("statement threads: {e}")))?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("kappa-sql".into())
        .stack_size(sql::SQL_STACK_BYTES)
        .spawn(move || {
            let _ = tx.send(f());
        })
        .map_err(|e| ApiError::internal(format!("starting a statement thread: {e}")))?;
    rx.await
        .map_err(|_| ApiError::internal("the statement thread ended without an answer"))?
}

fn sql_text(headers: &HeaderMap, bytes: &Bytes) -> ApiResult<String> {
    let mime = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    let as_text = || {
        String::from_utf8(bytes.to_vec())
            .map_err(|_| ApiError::bad_request("the SQL text is not valid UTF-8"))
    };
    match mime.as_deref() {
        Some("application/sql") => as_text(),
        Some("application/json") => {
            let body: SqlBody = super::json(bytes)?;
            Ok(body.sql)
        }
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "Content-Type {:?} is not accepted: send application/sql text or application/json {{\"sql\": ..}}",
                other.unwrap_or_default()
            ),
        )),
    }
}
