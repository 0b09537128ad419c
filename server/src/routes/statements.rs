//! `POST /v1/statements`: takes SQL (ksqlDB flavour) — declarations,
//! `CREATE [OR REPLACE] .. AS SELECT`, `DROP`, `SHOW`, `DESCRIBE` and pull
//! queries — from the body, has [`crate::statements::Executor`] run each
//! and answers one result per statement.
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
use kappa_processor::sql;
use serde::Deserialize;
use serde_json::json;

use super::body;
use crate::auth::{self, Principal};
use crate::dto::statements::{ShowRow, StatementOut, StatementsOut};
use crate::error::{ApiError, ApiResult};
use crate::statements::{changes_catalog, Executor};
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

/// Runs the statements of `text` as `principal` (every statement checked
/// against its grants first): what `POST /v1/statements` and the
/// PostgreSQL listener answer. `authorization` is passed on with a pull
/// query's reads to the other nodes of a Kappa cluster. Blocks: call it on
/// a statement thread ([`on_sql_thread`]).
pub(crate) fn run_text(
    state: &AppState,
    principal: &Principal,
    text: &str,
    authorization: Option<String>,
) -> ApiResult<Vec<StatementOut>> {
    let statements = sql::parse(text)?;
    if statements.is_empty() {
        return Err(ApiError::bad_request("the request has no statements"));
    }
    if statements.len() > MAX_STATEMENTS {
        return Err(ApiError::too_large(format!(
            "more than {MAX_STATEMENTS} statements in one request"
        )));
    }
    for (i, statement) in statements.iter().enumerate() {
        let need = auth::statement_need(statement);
        if let Err(mut e) = super::authenticate::require(principal, &need, "run this statement") {
            e.details.insert("statement".into(), json!(i));
            return Err(e);
        }
    }
    // In a Kappa cluster, a request that changes the catalog runs on
    // every node, in the control topic's order; this node answers
    // what it did here.
    let audited: Vec<_> = statements
        .iter()
        .map(|s| {
            (auth::statement_need(s) == auth::Need::Admin)
                .then(|| (statement_kind(s), statement_object(s)))
        })
        .collect();
    let applied = match &state.nodes {
        Some(nodes) if statements.iter().any(changes_catalog) => {
            nodes.submit(text).map_err(ApiError::from)?
        }
        _ => Executor::across_nodes(state, authorization).execute_all(statements),
    };
    let failed = applied.failed.map(|(i, e)| (i, ApiError::from(e)));
    for (i, audit) in audited.into_iter().enumerate() {
        let status = match &failed {
            Some((f, e)) if *f == i => e.status,
            Some((f, _)) if *f < i => break,
            _ => StatusCode::OK,
        };
        if let Some((kind, object)) = audit {
            auth::audit::admin_action(principal, kind, &object, status.as_u16());
        }
    }
    if let Some((i, mut e)) = failed {
        e.details.insert("statement".into(), json!(i));
        return Err(e);
    }
    let results: Vec<StatementOut> = applied
        .results
        .into_iter()
        .map(|r| visible(r, principal))
        .collect();
    Ok(results)
}

/// The kind of a statement that changes the catalog, for the audit line.
fn statement_kind(statement: &sql::Statement) -> &'static str {
    match statement {
        sql::Statement::CreateSource(_) => "SQL CREATE (declaration)",
        sql::Statement::CreateAs(_) => "SQL CREATE AS SELECT",
        sql::Statement::Drop { .. } => "SQL DROP",
        sql::Statement::InsertInto(_) => "SQL INSERT INTO",
        _ => "SQL",
    }
}

/// The object a statement names, for the audit line.
fn statement_object(statement: &sql::Statement) -> String {
    match statement {
        sql::Statement::CreateSource(decl) => decl.name.clone(),
        sql::Statement::CreateAs(create) => create.name.clone(),
        sql::Statement::Drop { name, .. } | sql::Statement::Describe(name) => name.clone(),
        sql::Statement::Select(query) => query.view.clone(),
        sql::Statement::Explain(sql::Explain::Create(create)) => create.name.clone(),
        sql::Statement::Explain(sql::Explain::View(name)) => name.clone(),
        sql::Statement::InsertInto(insert) => insert.target.clone(),
        sql::Statement::Show(_) => String::new(),
    }
}

/// A statement's result as `principal` may see it: `SHOW` lists only the
/// topics and views it has a grant on.
fn visible(result: StatementOut, principal: &Principal) -> StatementOut {
    match result {
        StatementOut::Shown(mut shown) if !principal.is_admin() => {
            shown.rows.retain(|row| match row {
                ShowRow::Topic { name, .. } => principal.may_see_topic(name),
                // Brokers and their topics: for administrators.
                ShowRow::Cluster { .. } => false,
                ShowRow::Declared { name, .. } | ShowRow::Query { name, .. } => {
                    principal.may_see_view(name)
                }
            });
            StatementOut::Shown(shown)
        }
        other => other,
    }
}

/// Most statement requests handled at once (one thread each); more wait.
pub const MAX_SQL_THREADS: usize = 8;

/// Runs `f` (parsing, planning, blocking calls into the views) on a thread
/// of its own with a [`sql::SQL_STACK_BYTES`] stack (the SQL front end
/// bounds its recursion well inside it), never on an async worker whose
/// stack size is not ours to know.
pub(crate) async fn on_sql_thread<T: Send + 'static>(
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
