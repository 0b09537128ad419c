//! The router: one file per resource, and the helpers they share (blocking
//! calls off the async workers, strict query parameters, body extraction).

mod admin;
pub mod authenticate;
pub mod browser;
mod changes;
mod clusters;
mod cors;
mod groups;
mod history;
pub mod openapi;
pub(crate) mod records;
mod statements;
mod tokens;
mod topics;
mod views;

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::handler::Handler;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use bytes::Bytes;
use tracing::Instrument;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// One route: a method and a path template, served by `service`.
struct Route {
    method: &'static str,
    path: &'static str,
    service: MethodRouter<AppState>,
}

/// A route of `method` on `path` served by `handler`.
fn route<H, T>(method: &'static str, path: &'static str, handler: H) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let filter = match method {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        other => unreachable!("no route uses method {other}"),
    };
    Route {
        method,
        path,
        service: on(filter, handler),
    }
}

/// The route table: the router is built from it and [`routes`] lists it,
/// so the OpenAPI test checks the document against what is served.
fn table() -> Vec<Route> {
    vec![
        route("GET", "/", admin::console),
        route("GET", "/console.js", admin::console_js),
        route("GET", "/console.css", admin::console_css),
        route("GET", "/health", admin::health),
        route("GET", "/ready", admin::ready),
        route("GET", "/metrics", admin::metrics),
        route("GET", "/v1/openapi.json", admin::openapi),
        route("GET", "/v1/history", history::history),
        route("GET", "/v1/clusters", clusters::list),
        route("GET", "/v1/cluster", clusters::kappa_cluster),
        route("POST", "/v1/topics", topics::create),
        route("GET", "/v1/topics", topics::list),
        route("GET", "/v1/topics/{topic}", topics::describe),
        route("PATCH", "/v1/topics/{topic}", topics::alter),
        route("DELETE", "/v1/topics/{topic}", topics::delete),
        route("POST", "/v1/topics/{topic}/records", records::produce),
        route(
            "GET",
            "/v1/topics/{topic}/partitions/{partition}/records",
            records::read,
        ),
        route("GET", "/v1/groups", groups::list),
        route(
            "GET",
            "/v1/groups/{group}/topics/{topic}/records",
            groups::read,
        ),
        route("POST", "/v1/groups/{group}/offsets", groups::commit),
        route("GET", "/v1/groups/{group}/offsets", groups::offsets),
        route("POST", "/v1/groups/{group}/reset", groups::reset),
        route("POST", "/v1/statements", statements::run),
        route("GET", "/v1/views", views::list),
        route("GET", "/v1/views/{view}", views::describe),
        route("GET", "/v1/views/{view}/rows", views::rows),
        route("GET", "/v1/views/{view}/changes", changes::changes),
        route("POST", "/v1/views/{view}/replay", views::replay),
        route("GET", "/v1/views/{view}/diff", views::diff),
        route("POST", "/v1/views/{view}/promote", views::promote),
        route("POST", "/v1/views/{view}/rollback", views::rollback),
        route("POST", "/v1/tokens", tokens::create),
        route("GET", "/v1/tokens", tokens::list),
        route("DELETE", "/v1/tokens/{name}", tokens::revoke),
    ]
}

/// Every (method, path template) the router serves, from the table the
/// router is built from.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    table().into_iter().map(|r| (r.method, r.path)).collect()
}

/// Builds the router over `state`.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config.max_body_bytes;
    table()
        .into_iter()
        // Routes of one path merge into one method router.
        .fold(Router::new(), |router, r| router.route(r.path, r.service))
        .route_layer(axum::middleware::from_fn(admit))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate::check,
        ))
        .route_layer(axum::middleware::from_fn(trace_request))
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed on this route",
            )
        })
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_response(finish_response))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            browser::check_host,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            cors::cors,
        ))
        .with_state(state)
}

/// Route middleware inside authentication, one layer for three steps (each
/// layer costs every request clones of the routes below it): a request on
/// a reserved slot takes a regular one ([`crate::http::take_regular_slot`]),
/// an authenticated one marks its connection
/// ([`crate::http::mark_authenticated`]), and a body of a type a browser
/// could send across sites is refused ([`browser::check_type`]).
async fn admit(request: Request, next: Next) -> Response {
    crate::http::take_regular_slot(&request).await;
    crate::http::mark_authenticated(&request);
    if let Some(refused) = browser::check_type(&request) {
        return refused;
    }
    next.run(request).await
}

/// Runs a routed request inside a `request` span (method, route template)
/// and logs its status and duration at debug level when it is answered
/// (`RUST_LOG=kappa=debug`). A streamed answer (the change feed) is
/// answered when its headers are.
async fn trace_request(request: Request, next: Next) -> Response {
    let route = request.extensions().get::<MatchedPath>().map_or_else(
        || request.uri().path().to_string(),
        |m| m.as_str().to_string(),
    );
    let span = tracing::debug_span!("request", method = %request.method(), route = %route);
    let started = std::time::Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    tracing::debug!(
        parent: &span,
        status = response.status().as_u16(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "answered"
    );
    response
}

/// Turns any error answer that is not already our JSON shape (extractor
/// rejections, e.g. a path segment that is not UTF-8, a body timeout) into
/// `{"error": {"code", "message"}}` with the same status.
/// Every answer's last touches, in one layer (each layer costs every
/// request clones of the routes below it): errors as JSON
/// ([`json_errors`]), then the connection closed after a refusal
/// ([`close_after_refusal`]).
async fn finish_response(response: Response) -> Response {
    close_after_refusal(json_errors(response).await).await
}

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

/// A request refused for who sent it (401), for its body's size (413) or
/// pace (408) closes its connection: its body, perhaps still arriving, is
/// not read, and the peer gets no second try on the same connection.
async fn close_after_refusal(mut response: Response) -> Response {
    use axum::http::header::{HeaderValue, CONNECTION};
    if matches!(
        response.status(),
        StatusCode::UNAUTHORIZED | StatusCode::PAYLOAD_TOO_LARGE | StatusCode::REQUEST_TIMEOUT
    ) {
        response
            .headers_mut()
            .insert(CONNECTION, HeaderValue::from_static("close"));
    }
    response
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
        } else if let Some(slow) = too_slow(&rejection) {
            ApiError::new(StatusCode::REQUEST_TIMEOUT, "timeout", slow.to_string())
        } else {
            ApiError::bad_request(format!(
                "could not read the request body: {}",
                rejection.body_text()
            ))
        }
    })
}

/// The body deadline's error behind a rejection, if that is its cause.
fn too_slow(rejection: &BytesRejection) -> Option<&crate::http::BodyTooSlow> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(rejection);
    while let Some(error) = source {
        if let Some(slow) = error.downcast_ref::<crate::http::BodyTooSlow>() {
            return Some(slow);
        }
        source = error.source();
    }
    None
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use tower::ServiceExt;

    use super::*;
    use crate::views::ViewManager;
    use crate::ServerConfig;

    /// A tracing writer into memory.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[test]
    fn a_routed_request_is_logged_with_its_method_route_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            ..ServerConfig::default()
        };
        let log = Arc::new(kappa_log::Log::open(config.log_config().unwrap()).unwrap());
        let views = ViewManager::open(log.clone(), config.manager_config()).unwrap();
        let config_for_auth = config.clone();
        let (_down, shutting_down) = tokio::sync::watch::channel(false);
        let state = AppState {
            log: log.clone(),
            views: views.clone(),
            config: Arc::new(config),
            metrics: crate::metrics::install(),
            auth: crate::auth::open(&config_for_auth).unwrap(),
            shutting_down,
            history: crate::history::History::default(),
            clusters: crate::clusters::Clusters::default(),
            nodes: None,
        };
        let captured = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(captured.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::DEBUG)
            .finish();
        let _default = tracing::subscriber::set_default(subscriber);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let request = axum::http::Request::get("/v1/topics/nope")
            .header("host", "localhost")
            .body(Body::empty())
            .unwrap();
        let response = runtime.block_on(router(state).oneshot(request)).unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(
            text.contains("request{method=GET route=/v1/topics/{topic}}"),
            "{text}"
        );
        assert!(text.contains("answered status=404"), "{text}");
        views.close();
        log.close();
    }
}
