//! Authentication and authorization: who calls, and whether they may.
//!
//! With `auth = "tokens"` every route under `/v1` and `/metrics` needs
//! `Authorization: Bearer <token>`; `GET /` (the console and its files),
//! `/health` and `/ready` stay open. [`check`] (route middleware) works out
//! what the request [`Need`]s from its method, route template and path
//! parameters ([`need_of`]), resolves the token through the
//! [`TokenStore`], and answers:
//!
//! - `401 unauthorized` with `WWW-Authenticate: Bearer` — no token, not a
//!   bearer token, or an unknown (e.g. revoked) one;
//! - `403 forbidden` naming the grant the token lacks;
//! - otherwise the handler runs with the [`Principal`] in the request's
//!   extensions. Lists (`GET /v1/topics`, `/v1/views`, `/v1/groups`,
//!   `SHOW`) are filtered to what the principal may see; `POST
//!   /v1/statements` checks every statement before running any
//!   ([`statement_need`]).
//!
//! With `auth = "none"` the principal is `anonymous` with every grant.
//!
//! **Revocation** ends what a token opened ([`TokenStore::is_current`],
//! [`TokenStore::revoked`]): a `GET` whose token is revoked before its
//! answer is ready answers `401` as a new request would (checked here,
//! after the handler; a long-poll stops waiting at the revocation), and a
//! change feed ends with a `revoked` event (`routes/changes.rs`). A request
//! that changes something and passed its check before the revocation
//! completes.
//!
//! **Consumer-group offsets** of a topic — committing, resetting, fetching
//! — need `group` on the group and `read` on the topic
//! ([`Principal::may_commit`]), over HTTP as over Kafka.
//!
//! **Audit** ([`audit`]): every request that needs `admin` (and every SQL
//! statement that changes something) is logged at info on the
//! `kappa::audit` target with the token's name, the action and its status;
//! every 401 and 403 at warn, with the token's name when known. Secrets
//! are never logged nor echoed. Counters: `kappa_auth_denied_total{reason}`
//! and `kappa_admin_actions_total{action}`.

pub mod grants;
pub mod limits;
pub mod store;

use axum::extract::{MatchedPath, RawPathParams, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::RequestPartsExt;
use kappa_processor::sql::Statement;

pub use grants::{Grant, Need};
pub use store::{Principal, TokenStore};

use crate::config::AuthMode;
use crate::error::ApiError;
use crate::AppState;

/// The server's authentication: the mode and the token store.
pub struct Auth {
    /// `none` or `tokens`.
    pub mode: AuthMode,
    /// The tokens of the data directory (managed in either mode).
    pub store: TokenStore,
    /// Produce rate limits of the tokens that have one.
    pub limiter: limits::ProduceLimiter,
}

impl Auth {
    /// Admits `records` produced by `principal` under its rate limit, or
    /// answers `429 rate_limited` with the wait (`Retry-After`).
    pub fn admit_produce(&self, principal: &Principal, records: usize) -> Result<(), ApiError> {
        let Some(rate) = principal.produce_records_per_second else {
            return Ok(());
        };
        let now = std::time::Instant::now();
        self.limiter
            .admit(&principal.name, rate, records, now)
            .map_err(|wait| {
                audit::denied("rate_limited", Some(&principal.name), "produce");
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
            })
    }
}

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

/// What running `statement` needs: `admin` for anything that changes the
/// catalog, `read-view` on the view a `SELECT` or `DESCRIBE` reads; `SHOW`
/// needs a token and is filtered (`Principal::may_see_topic`, `may_see_view`).
pub fn statement_need(statement: &Statement) -> Need {
    match statement {
        Statement::CreateSource(_) | Statement::CreateAs(_) | Statement::Drop { .. } => Need::Admin,
        Statement::Show(_) => Need::Token,
        Statement::Describe(name) => Need::ReadView(name.clone()),
        Statement::Select(query) => Need::ReadView(query.view.clone()),
    }
}

impl Principal {
    /// Whether this principal may do what `need` names.
    pub fn may(&self, need: &Need) -> bool {
        need.allowed_by(&self.grants)
    }

    /// Whether this principal has the `admin` grant.
    pub fn is_admin(&self) -> bool {
        self.grants.contains(&Grant::Admin)
    }

    /// Whether a topic shows in this principal's lists (it may read or
    /// produce to it).
    pub fn may_see_topic(&self, topic: &str) -> bool {
        self.may(&Need::ReadOrProduce(topic.to_string()))
    }

    /// Whether a view, table or stream shows in this principal's lists.
    pub fn may_see_view(&self, view: &str) -> bool {
        self.may(&Need::ReadView(view.to_string()))
    }

    /// Whether a consumer group shows in this principal's lists.
    pub fn may_see_group(&self, group: &str) -> bool {
        self.may(&Need::Group(group.to_string()))
    }

    /// Whether this principal may commit, reset or fetch `group`'s offsets
    /// of `topic`: it needs `group` on the group and `read` on the topic —
    /// the one rule for HTTP (`/v1/groups/{group}/offsets`, `…/reset`) and
    /// Kafka (`OffsetCommit`, `OffsetFetch`).
    pub fn may_commit(&self, group: &str, topic: &str) -> bool {
        self.may(&Need::GroupRead {
            group: group.to_string(),
            topic: topic.to_string(),
        })
    }

    /// `Ok` if [`Principal::may_commit`], else `403 forbidden` naming the
    /// grant it lacks (the group's, else the topic's `read`).
    pub fn check_commit(&self, group: &str, topic: &str, action: &str) -> Result<(), ApiError> {
        if self.may_commit(group, topic) {
            return Ok(());
        }
        let group_need = Need::Group(group.to_string());
        let missing = if self.may(&group_need) {
            Need::Read(topic.to_string())
        } else {
            group_need
        };
        Err(self.forbidden(&missing, action))
    }

    /// `401 unauthorized` for a request whose token was revoked after its
    /// check (a long-poll that was waiting): the answer a new request with
    /// the token gets ([`check`] adds the `WWW-Authenticate` challenge);
    /// logged and counted as `revoked`.
    pub fn revoked(&self, action: &str) -> ApiError {
        audit::denied("revoked", Some(&self.name), action);
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!(
                "the token {:?} is not valid: it was revoked while the request ran",
                self.name
            ),
        )
    }

    /// `403 forbidden` for `need`, logged and counted.
    pub fn forbidden(&self, need: &Need, action: &str) -> ApiError {
        audit::denied("forbidden", Some(&self.name), action);
        ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "token {:?} may not {action}: it needs the grant {}",
                self.name,
                need.describe()
            ),
        )
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
    if !principal.may(&need) {
        let error = principal.forbidden(&need, &action());
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
        audit::admin_action(&principal, &action(), &path, response.status());
    }
    if let Some(principal) = reader {
        if response.status() != StatusCode::UNAUTHORIZED && !state.auth.store.is_current(&principal)
        {
            response = principal.revoked(&action()).into_response();
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

/// Audit lines and counters.
pub mod audit {
    use axum::http::StatusCode;

    use super::Principal;

    /// Logs and counts an admin action (`action` = method and route
    /// template, or the SQL statement kind) on `target` (the request path,
    /// or the object a statement names) and its outcome.
    pub fn admin_action(principal: &Principal, action: &str, target: &str, status: StatusCode) {
        tracing::info!(
            target: "kappa::audit",
            token = %principal.name,
            action,
            on = target,
            status = status.as_u16(),
            "admin action"
        );
        crate::metrics::count_admin_action(action);
    }

    /// Logs and counts a refused request (401 or 403).
    pub fn denied(reason: &'static str, token: Option<&str>, action: &str) {
        tracing::warn!(
            target: "kappa::audit",
            token = token.unwrap_or("-"),
            reason,
            action,
            "request denied"
        );
        crate::metrics::count_auth_denied(reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn committing_a_groups_offsets_needs_the_group_and_read_on_the_topic() {
        let principal = |grants: &[&str]| {
            let mut p = Principal::anonymous();
            p.name = "t".into();
            p.grants = grants.iter().map(|g| Grant::parse(g).unwrap()).collect();
            p
        };
        let consumer = principal(&["group:g1", "read:orders.*"]);
        assert!(consumer.may_commit("g1", "orders.a"));
        assert!(!consumer.may_commit("g1", "secret"));
        assert!(!consumer.may_commit("g2", "orders.a"));
        let refused = consumer.check_commit("g1", "secret", "commit").unwrap_err();
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        assert!(
            refused.message.contains(r#"read on topic "secret""#),
            "{}",
            refused.message
        );
        let refused = principal(&["read:*"])
            .check_commit("g1", "secret", "commit")
            .unwrap_err();
        assert!(
            refused.message.contains(r#"group on consumer group "g1""#),
            "{}",
            refused.message
        );
        assert!(principal(&["admin"]).may_commit("g", "t"));
    }

    #[test]
    fn statements_that_change_the_catalog_need_admin() {
        let parsed = kappa_processor::sql::parse(
            "CREATE STREAM s (a INT) WITH (KAFKA_TOPIC='t', VALUE_FORMAT='JSON'); \
             DROP TABLE x; SHOW TABLES; DESCRIBE v; SELECT * FROM v2;",
        )
        .unwrap();
        let needs: Vec<Need> = parsed.iter().map(statement_need).collect();
        assert_eq!(
            needs,
            vec![
                Need::Admin,
                Need::Admin,
                Need::Token,
                Need::ReadView("v".into()),
                Need::ReadView("v2".into()),
            ]
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
