//! Authentication of HTTP requests (route middleware): with `auth =
//! "tokens"` every route under `/v1` and `/metrics` needs `Authorization:
//! Bearer <token>`; `GET /` (the console and its files), `/health` and
//! `/ready` stay open. [`check`] works out what the request needs from its
//! method, route template and path parameters ([`need_of`]), resolves the
//! token through the token store, asks [`auth::authorize`] (the one
//! decision of every protocol) and answers:
//!
//! - `401 unauthorized` with `WWW-Authenticate: Bearer` — no token, not a
//!   bearer token, or an unknown (e.g. revoked) one;
//! - `403 forbidden` naming the grant the token lacks;
//! - otherwise the handler runs with the [`Principal`] in the request's
//!   extensions. Lists (`GET /v1/topics`, `/v1/views`, `/v1/groups`,
//!   `SHOW`) are filtered to what the principal may see; `POST
//!   /v1/statements` checks every statement before running any
//!   ([`auth::statement_need`]).
//!
//! A `GET` whose token is revoked before its answer is ready answers `401`
//! as a new request would (checked here, after the handler; a long-poll
//! stops waiting at the revocation), and a change feed ends with a
//! `revoked` event (`routes/changes.rs`). A request that changes something
//! and passed its check before the revocation completes.

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::RequestPartsExt;

use crate::auth::{self, audit, Need, Principal, Refusal};
use crate::config::AuthMode;
use crate::error::ApiError;
use crate::AppState;

/// What a request's `Authorization` header holds.
enum Bearer<'a> {
    Missing,
    Other,
    Token(&'a str),
}

fn bearer(headers: &HeaderMap) -> Bearer<'_> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Bearer::Missing;
    };
    let Ok(text) = value.to_str() else {
        return Bearer::Other;
    };
    match text.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Bearer::Token(token.trim())
        }
        _ => Bearer::Other,
    }
}

/// What a request to `route` (a template of the route table) with `method`
/// needs; `param` gives a path parameter's decoded value.
pub fn need_of(method: &Method, route: &str, param: impl Fn(&str) -> String) -> Need {
    let get = *method == Method::GET || *method == Method::HEAD;
    match route {
        "/metrics" | "/v1/history" => Need::Metrics,
        "/v1/openapi.json" | "/v1/topics" | "/v1/groups" | "/v1/views" | "/v1/statements"
            if get || route == "/v1/statements" =>
        {
            Need::Token
        }
        "/v1/topics/{topic}" if get => Need::ReadOrProduce(param("topic")),
        "/v1/topics/{topic}/records" => Need::Produce(param("topic")),
        "/v1/topics/{topic}/partitions/{partition}/records" => Need::Read(param("topic")),
        "/v1/groups/{group}/topics/{topic}/records" => Need::GroupRead {
            group: param("group"),
            topic: param("topic"),
        },
        "/v1/groups/{group}/offsets" | "/v1/groups/{group}/reset" => Need::Group(param("group")),
        "/v1/views/{view}"
        | "/v1/views/{view}/rows"
        | "/v1/views/{view}/changes"
        | "/v1/views/{view}/diff"
            if get =>
        {
            Need::ReadView(param("view"))
        }
        // Everything else under /v1 changes the server: topics, views'
        // replay/promote/rollback, tokens. Unknown /v1 routes fail closed.
        r if r.starts_with("/v1/") => Need::Admin,
        // The console page and its files, /health, /ready.
        _ => Need::Open,
    }
}

/// The most body bytes read (and dropped) from a refused request, so that
/// its connection stays usable; a larger body closes the connection.
const DRAIN_LIMIT: usize = 64 * 1024;

/// The challenge of a `401` for a token that is not valid.
const INVALID_TOKEN_CHALLENGE: &str = r#"Bearer realm="kappa", error="invalid_token""#;

/// A refusal, answered at once. A body that has already arrived whole (up
/// to [`DRAIN_LIMIT`]) is read and dropped first, so the connection can be
/// kept alive; any other body — larger, or still arriving — is not waited
/// for: the answer says `Connection: close` and the connection is closed
/// after it (a tokenless client cannot hold a connection by dripping a
/// body).
async fn refuse(request: Request, error: ApiError, challenge: Option<&'static str>) -> Response {
    // Only a body already received whole is drained (the connection can
    // then be kept alive); a refusal never waits for a body still arriving
    // — that let tokenless clients hold connections as long as they liked —
    // and closes the connection instead.
    use futures_util::FutureExt;
    let drained = axum::body::to_bytes(request.into_body(), DRAIN_LIMIT)
        .now_or_never()
        .is_some_and(|read| read.is_ok());
    let mut response = error.into_response();
    if let Some(challenge) = challenge {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(challenge),
        );
    }
    if !drained {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn unauthorized(
    request: Request,
    reason: &'static str,
    action: &str,
    message: String,
) -> Response {
    audit::denied(reason, None, action);
    let challenge = if reason == "invalid_token" {
        INVALID_TOKEN_CHALLENGE
    } else {
        r#"Bearer realm="kappa""#
    };
    refuse(
        request,
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message),
        Some(challenge),
    )
    .await
}

/// Route middleware: authenticates the request and checks what its route
/// needs (see the module documentation).
pub async fn check(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let route = parts
        .extensions
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| parts.uri.path().to_string());
    let params = parts.extract::<RawPathParams>().await.ok();
    let param = |name: &str| {
        params
            .as_ref()
            .and_then(|p| {
                p.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            })
            .unwrap_or_default()
    };
    let method = parts.method.clone();
    let need = need_of(&method, &route, param);
    let mut request = Request::from_parts(parts, body);
    if need == Need::Open {
        return next.run(request).await;
    }
    // Only refusals and admin actions name the action.
    let action = || format!("{method} {route}");
    let principal = match state.auth.mode {
        AuthMode::None => Principal::anonymous(),
        AuthMode::Tokens => match bearer(request.headers()) {
            Bearer::Missing => {
                return unauthorized(
                    request,
                    "missing_token",
                    &action(),
                    format!(
                        "{} needs a token: send Authorization: Bearer <token> \
                         (this server runs with auth = \"tokens\")",
                        action()
                    ),
                )
                .await
            }
            Bearer::Other => {
                return unauthorized(
                    request,
                    "not_bearer",
                    &action(),
                    "the Authorization header must be `Bearer <token>`".into(),
                )
                .await
            }
            Bearer::Token(secret) => match state.auth.store.authenticate(secret) {
                Some(principal) => principal,
                None => {
                    return unauthorized(
                        request,
                        "invalid_token",
                        &action(),
                        "the token is not valid (unknown or revoked)".into(),
                    )
                    .await
                }
            },
        },
    };
    if let Err(refusal) = auth::authorize(Some(&principal), &need) {
        let error = refused(&principal, &refusal, &action());
        return refuse(request, error, None).await;
    }
    let audited =
        (need == Need::Admin).then(|| (principal.clone(), request.uri().path().to_string()));
    // A read answers nothing to a token revoked while it ran.
    let reader = (state.auth.mode == AuthMode::Tokens
        && (method == Method::GET || method == Method::HEAD))
        .then(|| principal.clone());
    request.extensions_mut().insert(principal);
    let mut response = next.run(request).await;
    if let Some((principal, path)) = audited {
        audit::admin_action(&principal, &action(), &path, response.status().as_u16());
    }
    if let Some(principal) = reader {
        if response.status() != StatusCode::UNAUTHORIZED && !state.auth.store.is_current(&principal)
        {
            response = revoked(&principal, &action()).into_response();
        }
    }
    if response.status() == StatusCode::UNAUTHORIZED
        && !response.headers().contains_key(header::WWW_AUTHENTICATE)
    {
        // A handler's 401 (a revoked long-poll) says what a new request would.
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(INVALID_TOKEN_CHALLENGE),
        );
    }
    response
}

/// `403 forbidden` (or `401` for nobody) for what [`auth::authorize`]
/// refused, logged and counted.
pub fn refused(principal: &Principal, refusal: &Refusal, action: &str) -> ApiError {
    match refusal {
        Refusal::Unauthenticated => revoked(principal, action),
        Refusal::Missing(need) => forbidden(principal, need, action),
    }
}

/// `403 forbidden` for `need`, logged and counted.
pub fn forbidden(principal: &Principal, need: &Need, action: &str) -> ApiError {
    audit::denied("forbidden", Some(&principal.name), action);
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!(
            "token {:?} may not {action}: it needs the grant {}",
            principal.name,
            need.describe()
        ),
    )
}

/// `Ok` if `principal` may do what `need` names, else `403 forbidden`
/// naming the grant it lacks (for a group's offsets of a topic: the
/// group's, else the topic's `read`).
pub fn require(principal: &Principal, need: &Need, action: &str) -> Result<(), ApiError> {
    auth::authorize(Some(principal), need).map_err(|refusal| refused(principal, &refusal, action))
}

/// `Ok` if `principal` may commit, reset or fetch `group`'s offsets of
/// `topic` ([`Principal::may_commit`]), else `403` naming what it lacks.
pub fn require_commit(
    principal: &Principal,
    group: &str,
    topic: &str,
    action: &str,
) -> Result<(), ApiError> {
    let need = Need::GroupRead {
        group: group.to_string(),
        topic: topic.to_string(),
    };
    require(principal, &need, action)
}

/// `401 unauthorized` for a request whose token was revoked after its
/// check (a long-poll that was waiting): the answer a new request with
/// the token gets ([`check`] adds the `WWW-Authenticate` challenge);
/// logged and counted as `revoked`.
pub fn revoked(principal: &Principal, action: &str) -> ApiError {
    audit::denied("revoked", Some(&principal.name), action);
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        format!(
            "the token {:?} is not valid: it was revoked while the request ran",
            principal.name
        ),
    )
}

/// `429 rate_limited` for a produce over `principal`'s rate limit, with
/// the wait in `Retry-After` (whole seconds) and `retry_after_ms`.
pub fn rate_limited(principal: &Principal, wait: std::time::Duration) -> ApiError {
    let rate = principal.produce_records_per_second.unwrap_or_default();
    let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
    let mut error = ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!(
            "token {:?} may produce {rate} records per second: retry in {secs} s",
            principal.name
        ),
    );
    error.details.insert(
        "retry_after_ms".into(),
        serde_json::json!(wait.as_millis() as u64),
    );
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Grant;

    #[test]
    fn every_v1_route_needs_a_token_and_only_the_console_and_probes_are_open() {
        for (method, route) in crate::routes::routes() {
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let need = need_of(&method, route, |_| "x".into());
            let open = matches!(route, "/" | "/health" | "/ready")
                || !route.starts_with("/v1") && route != "/metrics";
            assert_eq!(need == Need::Open, open, "{method} {route}: {need:?}");
        }
    }

    #[test]
    fn routes_map_to_the_grants_the_readme_documents() {
        let p = |name: &str| format!("<{name}>");
        let need = |m: Method, r: &str| need_of(&m, r, p);
        assert_eq!(need(Method::POST, "/v1/topics"), Need::Admin);
        assert_eq!(need(Method::DELETE, "/v1/topics/{topic}"), Need::Admin);
        assert_eq!(need(Method::PATCH, "/v1/topics/{topic}"), Need::Admin);
        assert_eq!(
            need(Method::GET, "/v1/topics/{topic}"),
            Need::ReadOrProduce("<topic>".into())
        );
        assert_eq!(
            need(Method::POST, "/v1/topics/{topic}/records"),
            Need::Produce("<topic>".into())
        );
        assert_eq!(
            need(
                Method::GET,
                "/v1/topics/{topic}/partitions/{partition}/records"
            ),
            Need::Read("<topic>".into())
        );
        assert_eq!(
            need(Method::GET, "/v1/groups/{group}/topics/{topic}/records"),
            Need::GroupRead {
                group: "<group>".into(),
                topic: "<topic>".into()
            }
        );
        assert_eq!(
            need(Method::POST, "/v1/groups/{group}/reset"),
            Need::Group("<group>".into())
        );
        assert_eq!(
            need(Method::GET, "/v1/views/{view}/rows"),
            Need::ReadView("<view>".into())
        );
        assert_eq!(need(Method::POST, "/v1/views/{view}/replay"), Need::Admin);
        assert_eq!(need(Method::POST, "/v1/views/{view}/promote"), Need::Admin);
        assert_eq!(need(Method::POST, "/v1/statements"), Need::Token);
        assert_eq!(need(Method::GET, "/metrics"), Need::Metrics);
        assert_eq!(need(Method::GET, "/v1/history"), Need::Metrics);
        assert_eq!(need(Method::POST, "/v1/tokens"), Need::Admin);
        assert_eq!(need(Method::GET, "/v1/tokens"), Need::Admin);
        assert_eq!(need(Method::GET, "/v1/some/new/route"), Need::Admin);
    }

    #[test]
    fn a_refused_commit_names_the_grant_it_lacks() {
        let principal = |grants: &[&str]| {
            let mut p = Principal::anonymous();
            p.name = "t".into();
            p.grants = grants.iter().map(|g| Grant::parse(g).unwrap()).collect();
            p
        };
        let refused = require_commit(
            &principal(&["group:g1", "read:orders.*"]),
            "g1",
            "secret",
            "commit",
        )
        .unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert!(
            refused.message.contains(r#"read on topic "secret""#),
            "{}",
            refused.message
        );
        let refused =
            require_commit(&principal(&["read:*"]), "g1", "secret", "commit").unwrap_err();
        assert!(
            refused.message.contains(r#"group on consumer group "g1""#),
            "{}",
            refused.message
        );
    }

    #[test]
    fn only_bearer_tokens_are_read_from_the_header() {
        let mut headers = HeaderMap::new();
        assert!(matches!(bearer(&headers), Bearer::Missing));
        for (value, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer  abc ", Some("abc")),
            ("Basic dXNlcjpwYXNz", None),
            ("Bearer ", None),
            ("abc", None),
        ] {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
            match (bearer(&headers), token) {
                (Bearer::Token(t), Some(expected)) => assert_eq!(t, expected),
                (Bearer::Other, None) => {}
                _ => panic!("{value}"),
            }
        }
    }
}
