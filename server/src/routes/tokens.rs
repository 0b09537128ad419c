//! `/v1/tokens` (admin): create a token (its secret is answered once),
//! list tokens (never their secrets), revoke one (it stops working at
//! once, and after a restart).

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use bytes::Bytes;
use serde::Deserialize;

use super::{blocking, body, json};
use crate::dto::admin::{RevokedOut, TokensOut};
use crate::error::ApiResult;
use crate::AppState;

/// The body of `POST /v1/tokens`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateToken {
    name: String,
    grants: Vec<String>,
    #[serde(default)]
    produce_records_per_second: Option<u64>,
}

/// `POST /v1/tokens` `{"name", "grants": [..]}`: 201 with the secret.
pub async fn create(
    State(state): State<AppState>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let request: CreateToken = json(&bytes)?;
    let auth = state.auth.clone();
    let created = blocking(move || {
        Ok(auth.store.create(
            &request.name,
            &request.grants,
            request.produce_records_per_second,
        )?)
    })
    .await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// `GET /v1/tokens`: names, grants, creation times and sources.
pub async fn list(State(state): State<AppState>) -> ApiResult<Json<TokensOut>> {
    let auth = state.auth.clone();
    let tokens = blocking(move || Ok(auth.store.list())).await?;
    Ok(Json(TokensOut { tokens }))
}

/// `DELETE /v1/tokens/{name}`.
pub async fn revoke(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<RevokedOut>> {
    let auth = state.auth.clone();
    let revoked = name.clone();
    blocking(move || {
        auth.store.revoke(&revoked)?;
        auth.limiter.forget(&revoked);
        Ok(())
    })
    .await?;
    Ok(Json(RevokedOut {
        name,
        revoked: true,
    }))
}
