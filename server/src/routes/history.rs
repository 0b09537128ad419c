//! `GET /v1/history[?since_ms=]`: the last 15 minutes of per-topic
//! throughput and per-view rate and lag, one sample a second (see
//! `crate::history`); with `since_ms`, only the samples taken after it (a
//! page that has the history asks for what is new). It needs the `metrics`
//! grant: like `/metrics`, it names every topic and view.

use axum::extract::{RawQuery, State};
use axum::Json;

use super::Params;
use crate::error::{ApiError, ApiResult};
use crate::history::HistoryOut;
use crate::AppState;

/// `GET /v1/history`.
pub async fn history(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<HistoryOut>> {
    let mut params = Params::parse(query.as_deref())?;
    let since_ms = params
        .take("since_ms")
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "query parameter since_ms must be a time in ms since the epoch, got {v:?}"
                ))
            })
        })
        .transpose()?;
    params.finish()?;
    Ok(Json(state.history.series(since_ms)))
}
