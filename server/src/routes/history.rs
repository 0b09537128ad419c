//! `GET /v1/history`: the last 15 minutes of per-topic throughput and
//! per-view rate and lag, one sample a second (see `crate::history`). It
//! needs the `metrics` grant: like `/metrics`, it names every topic and view.

use axum::extract::{RawQuery, State};
use axum::Json;

use super::Params;
use crate::error::ApiResult;
use crate::history::HistoryOut;
use crate::AppState;

/// `GET /v1/history`.
pub async fn history(
    State(state): State<AppState>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<HistoryOut>> {
    Params::parse(query.as_deref())?.finish()?;
    Ok(Json(state.history.series()))
}
