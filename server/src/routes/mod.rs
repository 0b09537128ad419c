//! The router: one file per resource, and the helpers they share (blocking
//! calls off the async workers, strict query parameters, body extraction).

mod admin;
pub mod browser;
mod changes;

pub use admin::OPENAPI as OPENAPI_JSON;
mod groups;
pub(crate) mod records;
mod replay;
mod statements;
mod topics;
mod views;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::Router;
use bytes::Bytes;
use tower_http::timeout::RequestBodyTimeoutLayer;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Every (method, path) the router serves; the OpenAPI document is checked
/// against this list by a test.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/"),
    ("GET", "/health"),
    ("GET", "/ready"),
    ("GET", "/metrics"),
    ("GET", "/v1/openapi.json"),
    ("POST", "/v1/topics"),
    ("GET", "/v1/topics"),
    ("GET", "/v1/topics/{topic}"),
    ("PATCH", "/v1/topics/{topic}"),
    ("DELETE", "/v1/topics/{topic}"),
    ("POST", "/v1/topics/{topic}/records"),
    ("GET", "/v1/topics/{topic}/partitions/{partition}/records"),
    ("GET", "/v1/groups"),
    ("GET", "/v1/groups/{group}/topics/{topic}/records"),
    ("POST", "/v1/groups/{group}/offsets"),
    ("GET", "/v1/groups/{group}/offsets"),
    ("POST", "/v1/groups/{group}/reset"),
    ("POST", "/v1/statements"),
    ("GET", "/v1/views"),
    ("GET", "/v1/views/{view}"),
    ("GET", "/v1/views/{view}/rows"),
    ("GET", "/v1/views/{view}/changes"),
    ("POST", "/v1/views/{view}/replay"),
    ("GET", "/v1/views/{view}/diff"),
    ("POST", "/v1/views/{view}/promote"),
    ("POST", "/v1/views/{view}/rollback"),
];

/// Builds the router over `state`.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.max_body_bytes;
    let body_timeout = Duration::from_millis(state.config.request_body_timeout_ms);
    Router::new()
        .route("/", get(admin::console))
        .route("/health", get(admin::health))
        .route("/ready", get(admin::ready))
        .route("/metrics", get(admin::metrics))
        .route("/v1/openapi.json", get(admin::openapi))
        .route("/v1/topics", post(topics::create).get(topics::list))
        .route(
            "/v1/topics/{topic}",
            get(topics::describe)
                .patch(topics::alter)
                .delete(topics::delete),
        )
        .route("/v1/topics/{topic}/records", post(records::produce))
        .route(
            "/v1/topics/{topic}/partitions/{partition}/records",
            get(records::read),
        )
        .route("/v1/groups", get(groups::list))
        .route(
            "/v1/groups/{group}/topics/{topic}/records",
            get(groups::read),
        )
        .route(
            "/v1/groups/{group}/offsets",
            post(groups::commit).get(groups::offsets),
        )
        .route("/v1/groups/{group}/reset", post(groups::reset))
        .route("/v1/statements", post(statements::run))
        .route("/v1/views", get(views::list))
        .route("/v1/views/{view}", get(views::describe))
        .route("/v1/views/{view}/rows", get(views::rows))
        .route("/v1/views/{view}/changes", get(changes::changes))
        .route("/v1/views/{view}/replay", post(views::replay))
        .route("/v1/views/{view}/diff", get(views::diff))
        .route("/v1/views/{view}/promote", post(views::promote))
        .route("/v1/views/{view}/rollback", post(views::rollback))
        .route_layer(axum::middleware::from_fn(browser::check_type))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(axum::middleware::map_response(json_errors))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(RequestBodyTimeoutLayer::new(body_timeout))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            browser::check_host,
        ))
        .with_state(state)
}

/// Turns any error answer that is not already our JSON shape (extractor
/// rejections, e.g. a path segment that is not UTF-8, a body timeout) into
/// `{"error": {"code", "message"}}` with the same status.
async fn json_errors(response: axum::response::Response) -> axum::response::Response {
    use axum::http::header::CONTENT_TYPE;
    use axum::response::IntoResponse;
    let status = response.status();
    let is_json = response
        .headers()
        .get(CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let body = axum::body::to_bytes(response.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_string();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    ApiError::new(status, code, message).into_response()
}

/// Runs blocking work (file I/O, fsync, page faults on mapped segments) on
/// the blocking pool, never on the async workers.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal(format!("blocking task failed: {e}")))?
}

/// The request body, or a JSON error naming the body limit.
pub fn body(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Bytes> {
    body.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large(format!(
                "request body is larger than the limit of {limit} bytes (max_body_bytes)"
            ))
        } else {
            ApiError::bad_request(format!(
                "could not read the request body: {}",
                rejection.body_text()
            ))
        }
    })
}

/// Parses a JSON body into `T`, naming the problem and its position.
pub fn json<'a, T: serde::Deserialize<'a>>(bytes: &'a [u8]) -> ApiResult<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// Strict query parameters: each known at most once, unknown ones refused.
pub struct Params {
    values: BTreeMap<String, String>,
}

impl Params {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> ApiResult<Params> {
        let mut values = BTreeMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let decode = |s: &str| {
                let s = s.replace('+', " ");
                percent_decode(&s).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "query parameter {k:?} is not valid percent-encoded UTF-8"
                    ))
                })
            };
            let (k, v) = (decode(k)?, decode(v)?);
            if values.insert(k.clone(), v).is_some() {
                return Err(ApiError::bad_request(format!(
                    "query parameter {k:?} is given twice"
                )));
            }
        }
        Ok(Params { values })
    }

    /// Removes and returns a parameter's raw value.
    pub fn take(&mut self, name: &str) -> Option<String> {
        self.values.remove(name)
    }

    /// An unsigned integer in `range`, or `default` when absent.
    pub fn take_u64(&mut self, name: &str, min: u64, max: u64, default: u64) -> ApiResult<u64> {
        match self.take(name) {
            None => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(ApiError::bad_request(format!(
                    "query parameter {name} must be an integer in {min}..={max}, got {v:?}"
                ))),
            },
        }
    }

    /// A boolean (`true`/`false`), or `default` when absent.
    pub fn take_bool(&mut self, name: &str, default: bool) -> ApiResult<bool> {
        match self.take(name).as_deref() {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!(
                "query parameter {name} must be true or false, got {v:?}"
            ))),
        }
    }

    /// Fails if any parameter was not taken.
    pub fn finish(self) -> ApiResult<()> {
        match self.values.keys().next() {
            None => Ok(()),
            Some(k) => Err(ApiError::bad_request(format!(
                "unknown query parameter {k:?}"
            ))),
        }
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Limits of one read, from the query.
pub struct ReadLimits {
    /// Most records.
    pub max_records: u64,
    /// About this many bytes.
    pub max_bytes: u64,
    /// Long-poll wait.
    pub max_wait: Duration,
}

impl ReadLimits {
    /// Takes `max_records`, `max_bytes` and `max_wait_ms` from the query.
    pub fn take(params: &mut Params) -> ApiResult<ReadLimits> {
        Ok(ReadLimits {
            max_records: params.take_u64("max_records", 1, 10_000, 100)?,
            max_bytes: params.take_u64("max_bytes", 1, 16 << 20, 1 << 20)?,
            max_wait: Duration::from_millis(params.take_u64("max_wait_ms", 0, 30_000, 0)?),
        })
    }
}
