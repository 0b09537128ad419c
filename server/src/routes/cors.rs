//! CORS, only for the origins an operator lists (`allowed_origins`).
//!
//! By default the server sends no CORS header at all: a page of another
//! origin can neither read an answer nor pass a preflight, and
//! [`super::browser`] refuses what a browser marks cross-site. With
//! `allowed_origins` set, a request whose one `Origin` header equals a listed
//! origin (ASCII case aside; exactly as a browser sends it: scheme, host,
//! port only when not the default) is answered with
//! `Access-Control-Allow-Origin: <that origin>`, `Vary: Origin` and the
//! response headers a client needs (`Retry-After`, `WWW-Authenticate`), and
//! its preflight (`OPTIONS` with `Access-Control-Request-Method`) is answered
//! here with `204` and the methods and request headers the API reads.
//!
//! Invariants:
//! - Nothing here is sent to an origin that is not listed, nor when the list
//!   is empty; every answer varies by `Origin` when the list is not empty.
//! - `Access-Control-Allow-Credentials` is never sent: the API authenticates
//!   with bearer tokens a page sends itself, never with cookies, so a listed
//!   origin gets exactly what its page's token allows.
//! - `*` is never sent: an origin is echoed only when it is listed.
//!
//! This layer is the outermost one, so that a preflight is answered before
//! any check that needs the request's credentials or body (a preflight
//! carries neither), and every answer to a listed origin — a 401, a 403, a
//! refusal of the browser checks — is readable by its page.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AppState;

/// The methods the API serves.
pub const ALLOWED_METHODS: &str = "GET, POST, PATCH, DELETE";
/// The request headers the API reads beyond the CORS-safelisted ones: the
/// token, the body type, produce's idempotency key and the change feed's
/// resume position.
pub const ALLOWED_HEADERS: &str = "authorization, content-type, idempotency-key, last-event-id";
/// Response headers a page may read beyond the safelisted ones: when to
/// retry a 503, and how to authenticate after a 401.
pub const EXPOSED_HEADERS: &str = "retry-after, www-authenticate";
/// How long a browser may cache a preflight's answer.
pub const PREFLIGHT_MAX_AGE_SECS: u32 = 600;

/// The request's `Origin` if it is exactly one header equal to a listed
/// origin.
pub fn allowed_origin<'a>(headers: &'a HeaderMap, allowed: &[String]) -> Option<&'a HeaderValue> {
    let mut values = headers.get_all(header::ORIGIN).iter();
    let origin = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let text = origin.to_str().ok()?;
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(text))
        .then_some(origin)
}

/// Whether `request` is a CORS preflight.
fn is_preflight(method: &Method, headers: &HeaderMap) -> bool {
    *method == Method::OPTIONS && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
}

/// The answer to a listed origin's preflight.
fn preflight(origin: HeaderValue, request: &HeaderMap) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static(ALLOWED_METHODS),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOWED_HEADERS),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from(PREFLIGHT_MAX_AGE_SECS),
    );
    // Chrome asks before a public page calls a private address; a listed
    // origin may.
    if request
        .get("access-control-request-private-network")
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"))
    {
        headers.insert(
            "access-control-allow-private-network",
            HeaderValue::from_static("true"),
        );
    }
    vary_on_origin(headers);
    response
}

/// Adds `Origin` to `Vary` (once).
fn vary_on_origin(headers: &mut HeaderMap) {
    let already = headers.get_all(header::VARY).iter().any(|v| {
        v.to_str()
            .unwrap_or("")
            .split(',')
            .any(|name| name.trim().eq_ignore_ascii_case("origin"))
    });
    if !already {
        headers.append(header::VARY, HeaderValue::from_static("origin"));
    }
}

/// Middleware (every request, outermost): CORS for the listed origins.
pub async fn cors(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let allowed = &state.config.allowed_origins;
    if allowed.is_empty() {
        return next.run(request).await;
    }
    let origin = allowed_origin(request.headers(), allowed).cloned();
    if let Some(origin) = &origin {
        if is_preflight(request.method(), request.headers()) {
            return preflight(origin.clone(), request.headers());
        }
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    vary_on_origin(headers);
    if let Some(origin) = origin {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static(EXPOSED_HEADERS),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_origin(origins: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for o in origins {
            headers.append(header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        headers
    }

    #[test]
    fn only_a_listed_origin_is_allowed() {
        let allowed = vec![
            "https://dash.example.com".to_string(),
            "http://localhost:3000".to_string(),
        ];
        for (origins, ok) in [
            (&["https://dash.example.com"][..], true),
            (&["https://DASH.example.com"][..], true),
            (&["http://localhost:3000"][..], true),
            (&["http://dash.example.com"][..], false),
            (&["https://dash.example.com:443"][..], false),
            (&["https://dash.example.com.evil.example"][..], false),
            (&["https://evil.example"][..], false),
            (&["null"][..], false),
            (&[][..], false),
            (
                &["https://dash.example.com", "https://dash.example.com"][..],
                false,
            ),
        ] {
            let headers = with_origin(origins);
            assert_eq!(
                allowed_origin(&headers, &allowed).is_some(),
                ok,
                "{origins:?}"
            );
        }
        let headers = with_origin(&["https://dash.example.com"]);
        assert!(allowed_origin(&headers, &[]).is_none());
    }

    #[test]
    fn a_preflight_names_methods_and_headers_and_never_credentials() {
        let mut request = with_origin(&["https://dash.example.com"]);
        assert!(!is_preflight(&Method::OPTIONS, &request));
        request.insert(
            header::ACCESS_CONTROL_REQUEST_METHOD,
            HeaderValue::from_static("POST"),
        );
        assert!(is_preflight(&Method::OPTIONS, &request));
        assert!(!is_preflight(&Method::POST, &request));
        let response = preflight(
            HeaderValue::from_static("https://dash.example.com"),
            &request,
        );
        assert_eq!(response.status(), StatusCode::NO_CONTENT);
        let h = response.headers();
        assert_eq!(
            h[header::ACCESS_CONTROL_ALLOW_ORIGIN],
            "https://dash.example.com"
        );
        assert_eq!(h[header::ACCESS_CONTROL_ALLOW_METHODS], ALLOWED_METHODS);
        assert!(h[header::ACCESS_CONTROL_ALLOW_HEADERS]
            .to_str()
            .unwrap()
            .contains("authorization"));
        assert_eq!(h[header::ACCESS_CONTROL_MAX_AGE], "600");
        assert_eq!(h[header::VARY], "origin");
        assert!(!h.contains_key(header::ACCESS_CONTROL_ALLOW_CREDENTIALS));
        assert!(!h.contains_key("access-control-allow-private-network"));
    }

    #[test]
    fn vary_names_origin_once() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::VARY,
            HeaderValue::from_static("accept-encoding, Origin"),
        );
        vary_on_origin(&mut headers);
        assert_eq!(headers.get_all(header::VARY).iter().count(), 1);
        let mut headers = HeaderMap::new();
        vary_on_origin(&mut headers);
        vary_on_origin(&mut headers);
        assert_eq!(headers.get_all(header::VARY).iter().count(), 1);
    }
}
