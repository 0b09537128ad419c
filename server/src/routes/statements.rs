//! `POST /v1/statements`: runs SQL (ksqlDB flavour) — declarations,
//! `CREATE [OR REPLACE] .. AS SELECT`, `DROP`, `SHOW`, `DESCRIBE` and pull
//! queries — and answers one result per statement.
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
use kappa_log::LogError;
use kappa_processor::plan::{ColumnSource, Operation, Plan, Sink};
use kappa_processor::sql::{
    self, CreateAs, ObjectKind, PullQuery, ShowWhat, SourceCatalog, SourceDecl, Statement,
};
use kappa_processor::view::ViewRow;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body;
use super::topics::default_topic_config;
use super::views::MAX_ROWS_PER_PAGE;
use crate::error::{ApiError, ApiResult};
use crate::views::catalog::Catalog;
use crate::views::manager::{Change, Swap, ViewSettings};
use crate::views::{RowsRequest, ViewError};
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
        let mut results = Vec::new();
        for (i, statement) in statements.into_iter().enumerate() {
            match execute(&state, statement) {
                Ok(r) => results.push(r),
                Err(mut e) => {
                    e.details.insert("statement".into(), json!(i));
                    return Err(e);
                }
            }
        }
        Ok(results)
    })
    .await?;
    Ok(Json(json!({ "results": results })).into_response())
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

/// Declared sources, plus every derived stream as a schemaless stream over
/// its output topic (so queries can read `FROM` it).
struct Sources(Catalog);

impl SourceCatalog for Sources {
    fn source(&self, name: &str) -> Option<SourceDecl> {
        if let Some(decl) = self.0.sources.get(name) {
            return Some(decl.clone());
        }
        let view = self.0.views.get(name)?;
        let topic = view.output_topic()?;
        Some(SourceDecl {
            name: name.to_string(),
            kind: ObjectKind::Stream,
            columns: Vec::new(),
            topic: topic.to_string(),
            value_format: sql::defaults::VALUE_FORMAT.to_string(),
            timestamp: None,
            watermark_delay_ms: sql::defaults::WATERMARK_DELAY_MS,
            idle_timeout_ms: sql::defaults::IDLE_TIMEOUT_MS,
            partitions: None,
            sql: view.served.sql.clone().unwrap_or_default(),
        })
    }
}

fn execute(state: &AppState, statement: Statement) -> ApiResult<Value> {
    match statement {
        Statement::CreateSource(decl) => declare(state, decl),
        Statement::CreateAs(create) => create_as(state, create),
        Statement::Drop {
            kind,
            name,
            if_exists,
        } => drop_object(state, kind, &name, if_exists),
        Statement::Show(what) => Ok(show(state, what)),
        Statement::Describe(name) => describe(state, &name),
        Statement::Select(query) => select(state, &query),
    }
}

/// Creates `topic` with `partitions` (or the server default) if missing.
fn ensure_topic(state: &AppState, topic: &str, partitions: Option<u32>) -> ApiResult<bool> {
    if state.log.topic(topic).is_ok() {
        return Ok(false);
    }
    let mut config = default_topic_config(state);
    if let Some(p) = partitions {
        config.partitions = p;
    }
    match state.log.create_topic(topic, config) {
        Ok(_) => Ok(true),
        Err(LogError::TopicExists(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn declare(state: &AppState, decl: SourceDecl) -> ApiResult<Value> {
    let (name, kind, topic) = (decl.name.clone(), decl.kind, decl.topic.clone());
    kappa_log::topic::validate_topic_name(&topic)?;
    if let Some(existing) = state.views.catalog().sources.get(&name) {
        if *existing != decl {
            return Err(ViewError::Exists(name).into());
        }
    }
    let topic_created = ensure_topic(state, &topic, decl.partitions)?;
    let created = state.views.declare_source(decl, false)?;
    Ok(json!({
        "statement": format!("CREATE {}", kind.to_string().to_uppercase()),
        "name": name, "kind": kind, "topic": topic,
        "status": if created { "created" } else { "unchanged" },
        "topic_created": topic_created,
    }))
}

fn create_as(state: &AppState, create: CreateAs) -> ApiResult<Value> {
    let catalog = state.views.catalog();
    let mut plan = sql::plan(&create, &Sources(catalog.clone()))?;
    plan.name = create.name.clone();
    if let Sink::Topic(topic) = &plan.sink {
        kappa_log::topic::validate_topic_name(topic)?;
        ensure_topic(state, topic, create.partitions)?;
    }
    let name = create.name.clone();
    let statement = format!("CREATE {} AS", create.kind.to_string().to_uppercase());
    let settings = ViewSettings {
        keep_versions: create.keep_versions,
        version_grace_ms: create.version_grace_ms.map(|ms| ms as u64),
    };
    let exists = catalog.views.contains_key(&name) || catalog.sources.contains_key(&name);
    let (status, version) = if exists && !create.or_replace {
        return Err(ViewError::Exists(name).into());
    } else if exists {
        let swap = if create.swap_manual {
            Swap::Manual
        } else {
            Swap::Auto
        };
        match state
            .views
            .replace(&name, plan, Some(create.sql), swap, settings)?
        {
            Change::Unchanged => ("unchanged", catalog.views[&name].latest().version),
            Change::Building(v) => ("building", v),
            Change::Served(v) => ("replaced", v),
        }
    } else {
        (
            "created",
            state
                .views
                .create(&name, plan, Some(create.sql), settings)?,
        )
    };
    Ok(json!({
        "statement": statement, "name": name, "kind": create.kind,
        "status": status, "version": version,
    }))
}

fn drop_object(
    state: &AppState,
    kind: ObjectKind,
    name: &str,
    if_exists: bool,
) -> ApiResult<Value> {
    let catalog = state.views.catalog();
    let found = match (catalog.views.get(name), catalog.sources.get(name)) {
        (Some(view), _) => Some((
            if view.is_table() {
                ObjectKind::Table
            } else {
                ObjectKind::Stream
            },
            true,
        )),
        (None, Some(decl)) => Some((decl.kind, false)),
        (None, None) => None,
    };
    let statement = format!("DROP {}", kind.to_string().to_uppercase());
    let Some((actual, is_view)) = found else {
        if if_exists {
            return Ok(json!({"statement": statement, "name": name, "status": "not_found"}));
        }
        return Err(ViewError::UnknownView(name.to_string()).into());
    };
    if actual != kind {
        return Err(ApiError::bad_request(format!(
            "{name:?} is a {actual}: use DROP {}",
            actual.to_string().to_uppercase()
        )));
    }
    if is_view {
        state.views.drop_view(name)?;
    } else {
        state.views.drop_source(name)?;
    }
    Ok(json!({"statement": statement, "name": name, "status": "dropped"}))
}

fn show(state: &AppState, what: ShowWhat) -> Value {
    let catalog = state.views.catalog();
    let mut rows = Vec::new();
    let wanted = match what {
        ShowWhat::Streams => Some(ObjectKind::Stream),
        ShowWhat::Tables => Some(ObjectKind::Table),
        ShowWhat::Views | ShowWhat::Topics => None,
    };
    if what == ShowWhat::Topics {
        for t in state.log.topics() {
            rows.push(json!({"name": t.name(), "partitions": t.partition_count()}));
        }
        return json!({"statement": "SHOW TOPICS", "rows": rows});
    }
    if let Some(kind) = wanted {
        for decl in catalog.sources.values().filter(|d| d.kind == kind) {
            rows.push(json!({"name": decl.name, "kind": decl.kind, "topic": decl.topic, "defined_by": "declaration"}));
        }
    }
    for view in catalog.views.values() {
        let kind = if view.is_table() {
            ObjectKind::Table
        } else {
            ObjectKind::Stream
        };
        if wanted.is_none_or(|w| w == kind) && (wanted.is_some() || view.is_table()) {
            rows.push(json!({
                "name": view.name, "kind": kind, "topic": view.output_topic(),
                "source_topic": view.served.plan.source.topic,
                "defined_by": "query", "version": view.served.version,
            }));
        }
    }
    rows.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let label = match what {
        ShowWhat::Streams => "SHOW STREAMS",
        ShowWhat::Tables => "SHOW TABLES",
        _ => "SHOW VIEWS",
    };
    json!({"statement": label, "rows": rows})
}

/// The settings a plan runs with: watermark delay, idle timeout, window
/// grace, emit mode, late events, deduplication.
fn settings(plan: &Plan) -> Value {
    let window = match &plan.operation {
        Operation::Aggregate(a) => a.window.as_ref(),
        Operation::Project { .. } => None,
    };
    json!({
        "watermark_delay_ms": plan.source.out_of_orderness_ms,
        "idle_timeout_ms": plan.source.idle_timeout_ms,
        "max_future_ms": plan.source.max_future_ms,
        "window": window.map(|w| &w.window),
        "grace_ms": window.map(|w| w.grace_ms),
        "emit": window.map(|w| w.emit),
        "late_events": plan.late,
        "dedup_ttl_ms": plan.dedup.as_ref().map(|d| d.ttl_ms),
    })
}

fn defaults() -> Value {
    sql::defaults::table()
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::String(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn describe(state: &AppState, name: &str) -> ApiResult<Value> {
    let catalog = state.views.catalog();
    if let Some(view) = catalog.views.get(name) {
        let out = state.views.describe(name)?;
        return Ok(json!({
            "statement": "DESCRIBE", "name": name, "view": out,
            "settings": settings(&view.served.plan), "defaults": defaults(),
        }));
    }
    let decl = catalog
        .sources
        .get(name)
        .ok_or_else(|| ViewError::UnknownView(name.to_string()))?;
    Ok(json!({
        "statement": "DESCRIBE", "name": name, "source": decl, "defaults": defaults(),
    }))
}

/// Checks that a pull query's `WHERE col = ..` names the view's one
/// GROUP BY column: rows are looked up by that key.
fn check_key_column(state: &AppState, query: &PullQuery) -> ApiResult<()> {
    let Some(column) = &query.key_column else {
        return Ok(());
    };
    let catalog = state.views.catalog();
    let Some(view) = catalog.views.get(&query.view) else {
        return Err(ViewError::UnknownView(query.view.clone()).into());
    };
    let keys: Vec<&str> = match &view.served.plan.operation {
        Operation::Aggregate(a) => a
            .columns
            .iter()
            .filter(|(_, s)| matches!(s, ColumnSource::GroupKey(_)))
            .map(|(n, _)| n.as_str())
            .collect(),
        Operation::Project { .. } => Vec::new(),
    };
    match keys.as_slice() {
        [key] if key.eq_ignore_ascii_case(column) => Ok(()),
        _ => Err(ApiError::bad_request(format!(
            "a pull query on {:?} looks rows up by its key column {keys:?}, not {column:?}",
            query.view
        ))),
    }
}

fn select(state: &AppState, query: &PullQuery) -> ApiResult<Value> {
    check_key_column(state, query)?;
    let limit = query
        .limit
        .unwrap_or(MAX_ROWS_PER_PAGE as usize)
        .min(MAX_ROWS_PER_PAGE as usize);
    let mut request = RowsRequest {
        query: query.view_query(),
        cursor: None,
        limit: MAX_ROWS_PER_PAGE as usize,
        version: None,
        after: Vec::new(),
        max_wait: std::time::Duration::ZERO,
    };
    let mut rows = Vec::new();
    let mut first = None;
    let truncated = loop {
        let answer = state.views.rows(&query.view, &request)?;
        // Every page reads the version the first one did.
        request.version = Some(answer.version);
        let next = answer.next_cursor.clone();
        for row in answer.rows.iter().filter(|r| query.matches(r)) {
            if rows.len() == limit {
                break;
            }
            rows.push(project(row, query.columns.as_deref()));
        }
        first.get_or_insert(answer);
        match next {
            Some(c) if rows.len() < limit => request.cursor = Some(c),
            Some(_) => break true,
            None => break false,
        }
    };
    let first = first.expect("one page at least");
    let mut out = super::views::rows_out(query.view.clone(), first);
    out.rows = Vec::new();
    if let Some(selected) = &query.columns {
        out.columns = selected_columns(&out.columns, selected);
    }
    let mut value = serde_json::to_value(out).map_err(|e| ApiError::internal(e.to_string()))?;
    value["statement"] = json!("SELECT");
    value["rows"] = Value::Array(rows);
    value["truncated"] = json!(truncated);
    Ok(value)
}

/// The names `project` gives the selected columns: a view column's own
/// name when one matches (case-insensitively), else the name as written.
fn selected_columns(view_columns: &[String], selected: &[String]) -> Vec<String> {
    selected
        .iter()
        .map(|c| {
            view_columns
                .iter()
                .find(|v| v.eq_ignore_ascii_case(c))
                .unwrap_or(c)
                .clone()
        })
        .collect()
}

/// The selected columns of a row (all when `columns` is None), matched
/// case-insensitively; `WINDOWSTART` / `WINDOWEND` are the window bounds.
fn project(row: &ViewRow, columns: Option<&[String]>) -> Value {
    let mut out = json!({"key": row.key});
    if let Some(s) = row.window_start {
        out["window_start"] = json!(s);
        out["window_end"] = json!(row.window_end);
    }
    let Some(columns) = columns else {
        out["row"] = row.row.clone();
        return out;
    };
    let mut picked = serde_json::Map::new();
    for c in columns {
        if c.eq_ignore_ascii_case("windowstart") {
            picked.insert(c.clone(), json!(row.window_start));
        } else if c.eq_ignore_ascii_case("windowend") {
            picked.insert(c.clone(), json!(row.window_end));
        } else if let Some((k, v)) = row
            .row
            .as_object()
            .and_then(|o| o.iter().find(|(k, _)| k.eq_ignore_ascii_case(c)))
        {
            picked.insert(k.clone(), v.clone());
        } else {
            picked.insert(c.clone(), Value::Null);
        }
    }
    out["row"] = Value::Object(picked);
    out
}
