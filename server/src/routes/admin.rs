//! Health, readiness, metrics, the OpenAPI document and the web console.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::AppState;

/// The OpenAPI document, compiled into the binary.
pub const OPENAPI: &str = include_str!("../../openapi.json");

/// The web console: one page that reads this server's JSON API (topics,
/// views and their lag, SQL, view rows), compiled into the binary.
pub const CONSOLE_HTML: &str = include_str!("../console.html");

/// The web console page.
pub async fn console() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        CONSOLE_HTML,
    )
        .into_response()
}

/// Liveness.
pub async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: the log is open and no partition stopped accepting writes.
pub async fn ready(State(state): State<AppState>) -> Response {
    let mut failed = Vec::new();
    for topic in state.log.topics() {
        for p in topic.partitions() {
            if let Some(reason) = p.failure() {
                failed.push(json!({"topic": topic.name(), "partition": p.id(), "reason": reason}));
            }
        }
    }
    let views = state.views.clone();
    let failed_views: Vec<serde_json::Value> =
        match tokio::task::spawn_blocking(move || views.failed_views()).await {
            Ok(list) => list
                .into_iter()
                .map(|(view, reason)| json!({"view": view, "reason": reason}))
                .collect(),
            Err(_) => vec![json!({"view": null, "reason": "the view check panicked"})],
        };
    if failed.is_empty() && failed_views.is_empty() {
        Json(json!({"status": "ready"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "degraded", "failed_partitions": failed,
                        "failed_views": failed_views})),
        )
            .into_response()
    }
}

/// Prometheus text.
pub async fn metrics(State(state): State<AppState>) -> Response {
    let views = state.views.clone();
    if let Ok(lags) = tokio::task::spawn_blocking(move || views.lags()).await {
        crate::metrics::set_view_lags(&lags);
    }
    let text = crate::metrics::render(&state.metrics, &state.log);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}

/// `GET /v1/openapi.json`.
pub async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}
