//! `POST /v1/statements`: takes SQL (ksqlDB flavour) — declarations,
//! `CREATE [OR REPLACE] .. AS SELECT`, `DROP`, `SHOW`, `DESCRIBE` and pull
//! queries — from the body, runs them as the caller
//! ([`crate::statements::run`]) and answers one result per statement.
//!
//! The whole text is parsed, and every statement checked against the
//! caller's grants, before anything runs: a syntax error or a statement the
//! token may not run changes nothing. Statements then run in order; the first that fails
//! stops the run and is answered as the error (with its `statement`
//! index); the ones before it stay applied.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::json;

use super::body;
use crate::auth::Principal;
use crate::dto::statements::{StatementOut, StatementsOut};
use crate::error::{ApiError, ApiResult};
use crate::statements::run::{run_as, RunError, MAX_STATEMENTS};
use crate::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SqlBody {
    sql: String,
}

/// `POST /v1/statements`.
pub async fn run(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let text = sql_text(&headers, &bytes)?;
    // Passed on with a pull query's reads to the other nodes of a Kappa
    // cluster.
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let results = on_sql_thread(move || run_text(&state, &principal, &text, authorization)).await?;
    Ok(Json(StatementsOut { results }).into_response())
}

/// Runs the statements of `text` as `principal`
/// ([`crate::statements::run::run_as`]) and answers what HTTP answers: a
/// failure as its error, naming the failed statement's index.
fn run_text(
    state: &AppState,
    principal: &Principal,
    text: &str,
    authorization: Option<String>,
) -> ApiResult<Vec<StatementOut>> {
    let statement = |mut e: ApiError, index: usize| {
        e.details.insert("statement".into(), json!(index));
        e
    };
    run_as(state, principal, text, authorization).map_err(|e| match e {
        RunError::Sql(e) => e.into(),
        RunError::Empty => ApiError::bad_request("the request has no statements"),
        RunError::TooMany => ApiError::too_large(format!(
            "more than {MAX_STATEMENTS} statements in one request"
        )),
        RunError::Refused { index, refusal } => statement(
            super::authenticate::refused(principal, &refusal, "run this statement"),
            index,
        ),
        RunError::Cluster(e) => e.into(),
        RunError::Failed {
            index,
            error,
            audit,
        } => {
            let e = ApiError::from(error);
            audit.record(principal, Some((index, e.status.as_u16())));
            statement(e, index)
        }
    })
}

/// [`crate::statements::run::on_sql_thread`] of a request: its failure to
/// run is an internal error.
async fn on_sql_thread<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    crate::statements::run::on_sql_thread(f)
        .await
        .map_err(ApiError::internal)?
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
            let body: SqlBody = super::json(bytes).map_err(|e| {
                // Raw SQL sent as JSON: say what to send instead.
                if bytes.trim_ascii_start().starts_with(b"{") {
                    e
                } else {
                    ApiError::bad_request(
                        "the body is not JSON: send {\"sql\": \"...\"} or use Content-Type: application/sql",
                    )
                }
            })?;
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
