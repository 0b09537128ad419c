//! `/v1/topics`: create, list, describe, change retention, delete.

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use bytes::Bytes;

use super::{blocking, body, json};
use crate::auth::Principal;
use crate::dto::{topic_out, AlterTopic, AlterTopicExt, CreateTopic, CreateTopicExt, TopicsOut};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// `POST /v1/topics`.
pub async fn create(
    State(state): State<AppState>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let request: CreateTopic = json(&bytes)?;
    let config = request.config(state.config.topic_defaults());
    let log = state.log.clone();
    let topic = blocking(move || Ok(log.create_topic(&request.name, config)?)).await?;
    Ok((StatusCode::CREATED, Json(topic_out(topic.describe()))).into_response())
}

/// `GET /v1/topics`: the topics the caller may read or produce to.
pub async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Json<TopicsOut> {
    let topics = state
        .log
        .topics()
        .iter()
        .filter(|t| principal.may_see_topic(t.name()))
        .map(|t| topic_out(t.describe()))
        .collect();
    Json(TopicsOut { topics })
}

/// `GET /v1/topics/{topic}`.
pub async fn describe(
    State(state): State<AppState>,
    Path(topic): Path<String>,
) -> ApiResult<Response> {
    Ok(Json(topic_out(state.log.topic(&topic)?.describe())).into_response())
}

/// `PATCH /v1/topics/{topic}`: changes retention; the next retention pass
/// applies it. Answers the topic description.
pub async fn alter(
    State(state): State<AppState>,
    Path(topic): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let request: AlterTopic = json(&bytes)?;
    let changes = request.changes().ok_or_else(|| {
        ApiError::bad_request(
            "nothing to change: give retention_ms, retention_bytes, compression_type, cleanup_policy, delete_retention_ms, min_compaction_lag_ms, local_retention_ms, local_retention_bytes or cached_tail_bytes (null removes a limit)",
        )
    })?;
    let topic = state.log.topic(&topic)?;
    let described = blocking(move || {
        topic.alter(&changes)?;
        Ok(topic_out(topic.describe()))
    })
    .await?;
    Ok(Json(described).into_response())
}

/// `DELETE /v1/topics/{topic}`.
pub async fn delete(
    State(state): State<AppState>,
    Path(topic): Path<String>,
) -> ApiResult<StatusCode> {
    let log = state.log.clone();
    let views = state.views.clone();
    blocking(move || {
        // A topic under a declared stream or a running view stays: 409,
        // naming the statements that drop them.
        views.check_topic_unused(&topic).map_err(|e| {
            crate::statements::dependents::explain(e, &views.catalog(), &format!("topic {topic:?}"))
        })?;
        Ok(log.delete_topic(&topic)?)
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
