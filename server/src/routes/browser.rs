//! Browser safety: what keeps a web page on another origin from driving the
//! API. Three checks run before any handler:
//!
//! - **`Host`** (every request): while the server listens on loopback, only
//!   `localhost`, `127.0.0.1`, `[::1]`, the listen address and the configured
//!   `allowed_hosts` are accepted (any port) — a page whose DNS name was
//!   rebound to 127.0.0.1 sends its own name and gets `421 host_not_allowed`.
//! - **`Sec-Fetch-Site`** (every request but the console page `GET /`): a
//!   request a browser marks `cross-site` or `same-site` (a page of another
//!   site or port: a form, an image tag, a `fetch`) gets `403
//!   cross_site_request` — this covers state-changing `GET`s such as a group
//!   read with `commit=true`. Non-browser clients do not send the header.
//!   The one exception is a request whose `Origin` is one of the configured
//!   `allowed_origins` (CORS, [`super::cors`]): an operator trusts those
//!   pages. Browsers send `Origin` on every `fetch` and form `POST` but not
//!   on an image tag or a link, so those stay refused.
//! - **Body type** (every `POST`/`PUT`/`PATCH` route): only the media types
//!   the route documents (`application/json`, plus `application/x-ndjson` for
//!   produce and `application/sql` for statements). Everything a browser may
//!   send cross-origin without a CORS preflight — `text/plain`,
//!   `application/x-www-form-urlencoded`, `multipart/form-data`, or no
//!   `Content-Type` at all — gets `415 unsupported_media_type`. A page can
//!   only send the accepted types after a preflight, which the server
//!   answers only for the `allowed_origins` (none by default), so for any
//!   other page the browser does not send the request.
//!
//! Invariants: no state-changing request reaches a handler unless it carries
//! an accepted `Content-Type` and (on loopback) an accepted `Host`; no
//! request a browser sent from another site's page reaches a handler unless
//! that page's origin is listed in `allowed_origins` (or it opens the
//! console page). The console page itself is guarded by its
//! Content-Security-Policy ([`super::admin::CONSOLE_CSP`]): it runs only its
//! own script, which puts API data into the page as text only.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::AppState;

/// The media types of a JSON body.
pub const JSON: &[&str] = &["application/json"];
/// Produce: a JSON body or newline-delimited JSON records.
pub const JSON_OR_NDJSON: &[&str] = &[
    "application/json",
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
];
/// Statements: `{"sql": ..}` or the SQL text itself.
pub const JSON_OR_SQL: &[&str] = &["application/json", "application/sql"];

/// The body types the route serving `path` accepts (only called for paths
/// the router matched, so the one `POST` under `/v1/topics/` ending in
/// `/records` is produce).
pub fn accepted_types(path: &str) -> &'static [&'static str] {
    if path == "/v1/statements" {
        JSON_OR_SQL
    } else if path.starts_with("/v1/topics/") && path.ends_with("/records") {
        JSON_OR_NDJSON
    } else {
        JSON
    }
}

/// The media type of `Content-Type`, lowercased, without parameters.
pub fn media_type(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::CONTENT_TYPE)?;
    let text = String::from_utf8_lossy(value.as_bytes());
    let mime = text.split(';').next().unwrap_or("").trim();
    Some(mime.to_ascii_lowercase())
}

/// Refuses a body type the route does not accept (routes with a body only).
pub fn check_body_type(method: &Method, route: &str, headers: &HeaderMap) -> Result<(), ApiError> {
    if !matches!(*method, Method::POST | Method::PUT | Method::PATCH) {
        return Ok(());
    }
    let accepted = accepted_types(route);
    let list = accepted.join(", ");
    match media_type(headers) {
        Some(mime) if accepted.contains(&mime.as_str()) => Ok(()),
        Some(mime) => Err(unsupported(format!(
            "Content-Type {mime:?} is not accepted on {method} {route}: use {list} \
             (types a browser may send cross-origin without a preflight are refused)"
        ))),
        None => Err(unsupported(format!(
            "a Content-Type header is required on {method} {route}: use {list}"
        ))),
    }
}

fn unsupported(message: String) -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        message,
    )
}

/// The host part of a `Host` value (`name`, `name:port`, `[v6]`,
/// `[v6]:port`), lowercased; `None` if it is malformed.
fn host_name(value: &str) -> Option<String> {
    let value = value.trim().to_ascii_lowercase();
    let (host, port) = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        (format!("[{inside}]"), after.strip_prefix(':'))
    } else {
        match value.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p)),
            None => (value.clone(), None),
        }
    };
    if host.is_empty() || port.is_some_and(|p| p.parse::<u16>().is_err()) {
        return None;
    }
    Some(host.trim_end_matches('.').to_string())
}

/// The form of `ip` in a `Host` header.
fn ip_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

/// Whether a request with `Host: value` may be served by a server listening
/// on `listen` with the extra `allowed` names.
pub fn host_allowed(value: Option<&str>, listen: SocketAddr, allowed: &[String]) -> bool {
    let Some(value) = value else {
        // HTTP/1.0 clients may omit it; browsers always send it.
        return true;
    };
    if !listen.ip().is_loopback() && allowed.is_empty() {
        return true;
    }
    let Some(host) = host_name(value) else {
        return false;
    };
    let loopback = ["localhost", "127.0.0.1", "[::1]"];
    loopback.contains(&host.as_str())
        || host == ip_host(listen.ip())
        || allowed
            .iter()
            .filter_map(|a| host_name(a))
            .any(|a| a == host)
}

/// Whether a request a browser sent from another site may be served: only
/// the console page may be opened from a link, and pages of the
/// `allowed_origins` may call anything.
pub fn cross_site_allowed(
    method: &Method,
    path: &str,
    headers: &HeaderMap,
    allowed_origins: &[String],
) -> bool {
    let site = headers
        .get("sec-fetch-site")
        .map(|v| v.as_bytes().to_ascii_lowercase());
    match site.as_deref() {
        Some(b"cross-site") | Some(b"same-site") => {
            (matches!(*method, Method::GET | Method::HEAD) && path == "/")
                || super::cors::allowed_origin(headers, allowed_origins).is_some()
        }
        _ => true,
    }
}

/// A refusal sent before the request body was read: the connection closes
/// after it (hyper would not reuse it anyway), and says so, so that a client
/// does not send its next request on it.
fn refuse(error: ApiError) -> Response {
    let mut response = error.into_response();
    response.headers_mut().insert(
        header::CONNECTION,
        axum::http::HeaderValue::from_static("close"),
    );
    response
}

/// Middleware (every request): the `Host` and `Sec-Fetch-Site` checks.
pub async fn check_host(State(state): State<AppState>, request: Request, next: Next) -> Response {
    if !cross_site_allowed(
        request.method(),
        request.uri().path(),
        request.headers(),
        &state.config.allowed_origins,
    ) {
        return refuse(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            format!(
                "{} {} was sent by a page of another site (Sec-Fetch-Site); \
                 the API is not served to other sites' pages (an operator may list \
                 a page's origin in allowed_origins)",
                request.method(),
                request.uri().path()
            ),
        ));
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let value = hosts
        .next()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    if hosts.next().is_some() {
        return refuse(ApiError::bad_request(
            "the request has more than one Host header",
        ));
    }
    if host_allowed(
        value.as_deref(),
        state.config.listen,
        &state.config.allowed_hosts,
    ) {
        return next.run(request).await;
    }
    let shown: String = value.unwrap_or_default().chars().take(100).collect();
    refuse(ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "host_not_allowed",
        format!(
            "Host {shown:?} is not served here: use localhost, 127.0.0.1 or [::1], \
             or add the name to allowed_hosts (a page from another site is not \
             allowed to call this server)"
        ),
    ))
}

/// The body-type check of a matched route: the refusal to answer, if any.
pub fn check_type(request: &Request) -> Option<Response> {
    check_body_type(request.method(), request.uri().path(), request.headers())
        .err()
        .map(refuse)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn loopback() -> SocketAddr {
        "127.0.0.1:8080".parse().unwrap()
    }

    #[test]
    fn loopback_names_pass_with_or_without_a_port() {
        for ok in [
            "localhost",
            "localhost:8080",
            "LOCALHOST:1",
            "127.0.0.1",
            "127.0.0.1:9",
            "[::1]",
            "[::1]:8080",
            "localhost.",
        ] {
            assert!(host_allowed(Some(ok), loopback(), &[]), "{ok}");
        }
        assert!(host_allowed(None, loopback(), &[]));
    }

    #[test]
    fn other_names_are_refused_on_loopback_unless_allowed() {
        for bad in [
            "evil.example",
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "localhost:x",
            "",
            "[::1",
            "10.0.0.1",
        ] {
            assert!(!host_allowed(Some(bad), loopback(), &[]), "{bad}");
        }
        let allowed = vec!["kappa.internal".to_string()];
        assert!(host_allowed(
            Some("kappa.internal:8080"),
            loopback(),
            &allowed
        ));
    }

    #[test]
    fn the_listen_address_is_accepted_and_others_check_only_when_configured() {
        let public: SocketAddr = "10.1.2.3:80".parse().unwrap();
        assert!(host_allowed(Some("anything"), public, &[]));
        let allowed = vec!["kappa.example".to_string()];
        assert!(host_allowed(Some("10.1.2.3"), public, &allowed));
        assert!(host_allowed(Some("kappa.example"), public, &allowed));
        assert!(!host_allowed(Some("evil.example"), public, &allowed));
    }

    #[test]
    fn pages_of_other_sites_only_open_the_console() {
        let mut headers = HeaderMap::new();
        assert!(cross_site_allowed(
            &Method::GET,
            "/v1/groups/g/topics/t/records",
            &headers,
            &[]
        ));
        for (site, ok) in [
            ("same-origin", true),
            ("none", true),
            ("cross-site", false),
            ("same-site", false),
        ] {
            headers.insert("sec-fetch-site", HeaderValue::from_static(site));
            assert_eq!(
                cross_site_allowed(&Method::POST, "/v1/statements", &headers, &[]),
                ok,
                "{site}"
            );
            assert_eq!(
                cross_site_allowed(&Method::GET, "/v1/groups/g/topics/t/records", &headers, &[]),
                ok,
                "{site}"
            );
            assert!(
                cross_site_allowed(&Method::GET, "/", &headers, &[]),
                "{site}"
            );
        }
    }

    #[test]
    fn pages_of_allowed_origins_pass_the_cross_site_check() {
        let allowed = vec!["https://dash.example.com".to_string()];
        let mut headers = HeaderMap::new();
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        // An image tag or a link sends no Origin: still refused.
        assert!(!cross_site_allowed(
            &Method::GET,
            "/v1/topics",
            &headers,
            &allowed
        ));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://evil.example"),
        );
        assert!(!cross_site_allowed(
            &Method::POST,
            "/v1/statements",
            &headers,
            &allowed
        ));
        headers.insert(
            header::ORIGIN,
            HeaderValue::from_static("https://dash.example.com"),
        );
        assert!(cross_site_allowed(
            &Method::POST,
            "/v1/statements",
            &headers,
            &allowed
        ));
        assert!(!cross_site_allowed(
            &Method::POST,
            "/v1/statements",
            &headers,
            &[]
        ));
    }

    #[test]
    fn body_types_a_browser_sends_without_a_preflight_are_refused() {
        let mut headers = HeaderMap::new();
        assert!(check_body_type(&Method::POST, "/v1/statements", &headers).is_err());
        for (route, mime, ok) in [
            ("/v1/statements", "text/plain", false),
            ("/v1/statements", "application/x-www-form-urlencoded", false),
            ("/v1/statements", "multipart/form-data; boundary=x", false),
            ("/v1/statements", "application/sql", true),
            ("/v1/statements", "Application/JSON; charset=utf-8", true),
            ("/v1/topics/t/records", "application/x-ndjson", true),
            ("/v1/topics", "application/x-ndjson", false),
            ("/v1/groups/records/reset", "application/x-ndjson", false),
            ("/v1/groups/g/reset", "application/json", true),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(mime));
            let result = check_body_type(&Method::POST, route, &headers);
            assert_eq!(result.is_ok(), ok, "{route} {mime}");
        }
        headers.remove(header::CONTENT_TYPE);
        assert!(check_body_type(&Method::GET, "/v1/topics", &headers).is_ok());
        assert!(check_body_type(&Method::DELETE, "/v1/topics/t", &headers).is_ok());
    }
}
