//! Health, readiness, metrics, the OpenAPI document (built in
//! `super::openapi`) and the web console (its page, script and styles,
//! compiled in; the page's security headers).

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::dto::admin::{DegradedOut, FailedPartition, FailedView, StatusOut};
use crate::AppState;

/// The web console: one page that reads this server's JSON API (overview
/// charts from `/v1/history`, topics and their messages, consumer groups,
/// views with their builds, rows and review, SQL), compiled into the
/// binary. Its script and styles are separate files so that the page can
/// forbid every inline script and style ([`CONSOLE_CSP`]).
pub const CONSOLE_HTML: &str = include_str!("../console/index.html");
/// The console's script, `GET /console.js`: one script made of the core
/// (`console.js`) and one file per part of the page, in this order (each
/// uses what the files before it define).
pub const CONSOLE_JS: &str = concat!(
    include_str!("../console/console.js"),
    include_str!("../console/charts.js"),
    include_str!("../console/overview.js"),
    include_str!("../console/topic.js"),
    include_str!("../console/groups.js"),
    include_str!("../console/cluster.js"),
    include_str!("../console/view.js"),
    include_str!("../console/sql.js"),
    include_str!("../console/main.js"),
);
/// The console's styles, `GET /console.css`.
pub const CONSOLE_CSS: &str = include_str!("../console/console.css");

/// The console page's Content-Security-Policy: scripts, styles and API
/// calls from this server only, nothing inline (no `<script>` body, no
/// `onclick=`, no `style=`), no plugins, frames, forms or `<base>`; and,
/// where the browser supports Trusted Types, no string may reach an HTML
/// sink (`innerHTML` and the like throw).
pub const CONSOLE_CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'; require-trusted-types-for 'script'; trusted-types 'none'";

/// Headers of every console file: no caching without revalidation (a new
/// binary serves a new console), and no content sniffing.
const STATIC_HEADERS: [(header::HeaderName, &str); 2] = [
    (header::CACHE_CONTROL, "no-cache"),
    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
];

/// The web console page, with its CSP; it may not be framed (clickjacking)
/// and sends no `Referer` (URLs can hold view and topic names).
pub async fn console() -> Response {
    (
        STATIC_HEADERS,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONSOLE_CSP),
            (header::REFERRER_POLICY, "no-referrer"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        CONSOLE_HTML,
    )
        .into_response()
}

/// `GET /console.js`.
pub async fn console_js() -> Response {
    (
        STATIC_HEADERS,
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        CONSOLE_JS,
    )
        .into_response()
}

/// `GET /console.css`.
pub async fn console_css() -> Response {
    (
        STATIC_HEADERS,
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        CONSOLE_CSS,
    )
        .into_response()
}

/// Liveness.
pub async fn health() -> Json<StatusOut> {
    Json(StatusOut {
        status: "ok".into(),
    })
}

/// Readiness: the log is open and no partition stopped accepting writes.
pub async fn ready(State(state): State<AppState>) -> Response {
    let mut failed = Vec::new();
    for topic in state.log.topics() {
        for p in topic.partitions() {
            if let Some(reason) = p.failure() {
                failed.push(FailedPartition {
                    topic: topic.name().to_string(),
                    partition: p.id(),
                    reason,
                });
            }
        }
    }
    let views = state.views.clone();
    let failed_views: Vec<FailedView> =
        match tokio::task::spawn_blocking(move || views.failed_views()).await {
            Ok(list) => list
                .into_iter()
                .map(|(view, reason)| FailedView {
                    view: Some(view),
                    reason,
                })
                .collect(),
            Err(_) => vec![FailedView {
                view: None,
                reason: Some("the view check panicked".into()),
            }],
        };
    if failed.is_empty() && failed_views.is_empty() {
        Json(StatusOut {
            status: "ready".into(),
        })
        .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(DegradedOut {
                status: "degraded".into(),
                failed_partitions: failed,
                failed_views,
            }),
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
    (
        [(header::CONTENT_TYPE, "application/json")],
        super::openapi::json(),
    )
        .into_response()
}
