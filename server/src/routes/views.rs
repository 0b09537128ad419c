//! `/v1/views`: list and describe views, read their rows (point, prefix,
//! a key's windows, all; paged; optionally after given offsets —
//! read-your-writes) and start a replay. Every manager call blocks
//! (RocksDB, joining threads), so it runs on the blocking pool.

use std::time::Duration;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use bytes::Bytes;
use kappa_processor::view::ViewQuery;

use super::{blocking, body, json, Params};
use crate::auth::Principal;
use crate::dto::{cursor_bytes, diff_out, DiffOut, ReplayRequest, RowsOut, ServedOut, ViewsOut};
use crate::error::{ApiError, ApiResult};
use crate::nodes::rows;
use crate::statements::versions::Versions;
use crate::views::RowsOutExt;
use crate::views::RowsRequest;
use crate::views::MAX_ROWS_PER_PAGE;
use crate::AppState;

/// Rows in one answer when `limit` is not given.
pub const DEFAULT_ROWS_PER_PAGE: u64 = 100;
/// Default wait of a read-your-writes read (`after`), ms.
pub const DEFAULT_AFTER_WAIT_MS: u64 = 5_000;
/// Longest wait of a read-your-writes read, ms.
pub const MAX_AFTER_WAIT_MS: u64 = 30_000;

/// `GET /v1/views`.
pub async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> ApiResult<Json<ViewsOut>> {
    let views = state.views.clone();
    let mut list = blocking(move || Ok(views.list())).await?;
    list.retain(|v| principal.may_see_view(&v.name));
    Ok(Json(ViewsOut { views: list }))
}

/// `GET /v1/views/{view}`.
pub async fn describe(
    State(state): State<AppState>,
    Path(view): Path<String>,
) -> ApiResult<Response> {
    let views = state.views.clone();
    let out = blocking(move || Ok(views.describe(&view)?)).await?;
    Ok(Json(out).into_response())
}

/// `GET /v1/views/{view}/rows`.
///
/// In a Kappa cluster a view's rows may live on other nodes: a key's read
/// goes to its partition's owner, a prefix or full read gathers every
/// node's (`crate::nodes::rows`). A read another node forwarded here
/// (header `kappa-forwarded`) is answered from this node's own partitions.
pub async fn rows(
    State(state): State<AppState>,
    Path(view): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let mut params = Params::parse(query.as_deref())?;
    let mut request = rows_request(&mut params)?;
    params.finish()?;
    let incoming = rows::Incoming {
        view: view.clone(),
        query: query.unwrap_or_default(),
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    let how = headers.get(rows::FORWARDED);
    let forwarded = how.is_some();
    // A pull query's window bounds and scan cap, forwarded by another node.
    if let Some(filter) = headers.get(rows::ROW_FILTER).filter(|_| forwarded) {
        request.filter = filter
            .to_str()
            .ok()
            .and_then(rows::parse_filter)
            .ok_or_else(|| {
                ApiError::bad_request(format!("{} is not a row filter", rows::ROW_FILTER))
            })?;
    }
    let to_owner = how.is_some_and(|v| v.as_bytes() == rows::TO_OWNER.as_bytes());
    let to_standby = how.is_some_and(|v| v.as_bytes() == rows::STANDBY.as_bytes());
    // Only a read sent to a standby may be answered from one: any other
    // forwarded read answers each partition from its owner.
    if forwarded && !to_standby {
        request.max_staleness = None;
    }
    blocking(move || {
        let spread = match &state.nodes {
            Some(_) => state.views.spread_of(&view, request.version)?,
            None => None,
        };
        match (spread, &state.nodes) {
            (Some(spread), _) if forwarded => {
                if (to_owner || to_standby)
                    && !rows::answers_read(&spread, &request.query, request.max_staleness)
                {
                    return Err(ApiError::new(
                        StatusCode::MISDIRECTED_REQUEST,
                        "not_owner",
                        format!("this node does not own that key's partition of view {view:?}"),
                    ));
                }
                let answer = state.views.rows(&view, &request)?;
                let read = answer.partitions_read.clone().unwrap_or_default();
                let mut response = Json(RowsOut::from_answer(view, answer)).into_response();
                if let Ok(held) = rows::partitions_text(&read).parse() {
                    response.headers_mut().insert(rows::PARTITIONS, held);
                }
                Ok(response)
            }
            (Some(spread), Some(nodes)) => {
                let out =
                    rows::rows(&state.views, nodes, &incoming, &request, &spread).map_err(|e| {
                        let status = StatusCode::from_u16(e.status)
                            .unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
                        ApiError::new(status, e.code, e.message)
                    })?;
                Ok(Json(out).into_response())
            }
            _ => {
                let answer = state.views.rows(&view, &request)?;
                Ok(Json(RowsOut::from_answer(view, answer)).into_response())
            }
        }
    })
    .await
}

fn rows_request(params: &mut Params) -> ApiResult<RowsRequest> {
    let key = params.take("key");
    let prefix = params.take("prefix");
    let from = params.take("from").map(|v| time("from", &v)).transpose()?;
    let to = params.take("to").map(|v| time("to", &v)).transpose()?;
    let query = match (key, prefix) {
        (Some(_), Some(_)) => return Err(ApiError::bad_request("give key or prefix, not both")),
        (Some(key), None) if from.is_some() || to.is_some() => ViewQuery::KeyWindows {
            key,
            from: from.unwrap_or(i64::MIN),
            to: to.unwrap_or(i64::MAX),
        },
        (Some(key), None) => ViewQuery::Key(key),
        (None, _) if from.is_some() || to.is_some() => {
            return Err(ApiError::bad_request(
                "from and to select a key's windows: give key too",
            ))
        }
        (None, Some(prefix)) => ViewQuery::Prefix(prefix),
        (None, None) => ViewQuery::All,
    };
    let limit =
        params.take_u64("limit", 1, MAX_ROWS_PER_PAGE as u64, DEFAULT_ROWS_PER_PAGE)? as usize;
    let cursor = params
        .take("cursor")
        .map(|c| {
            cursor_bytes(&c).ok_or_else(|| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_cursor",
                    format!("cursor {c:?} is not one this API answered"),
                )
            })
        })
        .transpose()?;
    let version = match params.take("version") {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("version must be a version number, got {v:?}"))
        })?),
    };
    let after = params.take("after").map(|a| after(&a)).transpose()?;
    let max_wait = params.take_u64("max_wait_ms", 0, MAX_AFTER_WAIT_MS, DEFAULT_AFTER_WAIT_MS)?;
    let max_staleness = match params.take("max_staleness_ms") {
        None => None,
        Some(v) => Some(v.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!(
                "max_staleness_ms must be a number of milliseconds, got {v:?}"
            ))
        })?),
    };
    if after.is_some() && version.is_some() {
        return Err(ApiError::bad_request(
            "after waits for the served version: do not give version too",
        ));
    }
    Ok(RowsRequest {
        query,
        filter: Default::default(),
        cursor,
        limit,
        version,
        after: after.unwrap_or_default(),
        max_wait: Duration::from_millis(max_wait),
        max_staleness: max_staleness.map(Duration::from_millis),
        test: None,
    })
}

/// A time as ms since the epoch or RFC 3339.
fn time(name: &str, value: &str) -> ApiResult<i64> {
    let parsed = match value.parse::<i64>() {
        Ok(ms) => Some(ms),
        Err(_) => kappa_processor::expr::parse_timestamp(&serde_json::Value::String(value.into())),
    };
    parsed.ok_or_else(|| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_timestamp",
            format!("{name} must be ms since the epoch or an RFC 3339 time, got {value:?}"),
        )
    })
}

/// `partition:offset,partition:offset`.
fn after(value: &str) -> ApiResult<Vec<(u32, u64)>> {
    let bad = || {
        ApiError::bad_request(format!(
            "after must be partition:offset pairs separated by commas (e.g. 0:17,2:5), got {value:?}"
        ))
    };
    let pairs: Vec<(u32, u64)> = value
        .split(',')
        .map(|pair| {
            let (p, o) = pair.trim().split_once(':').ok_or_else(bad)?;
            Ok((p.parse().map_err(|_| bad())?, o.parse().map_err(|_| bad())?))
        })
        .collect::<ApiResult<_>>()?;
    if pairs.is_empty() || pairs.len() > 10_000 {
        return Err(bad());
    }
    Ok(pairs)
}

/// `POST /v1/views/{view}/replay` ([`Versions::replay`]).
pub async fn replay(
    State(state): State<AppState>,
    Path(view): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let request: ReplayRequest = if bytes.iter().all(u8::is_ascii_whitespace) {
        ReplayRequest::default()
    } else {
        json(&bytes)?
    };
    let out = blocking(move || Ok(versions(&state).replay(&view, request)?)).await?;
    Ok((StatusCode::ACCEPTED, Json(out)).into_response())
}

/// The version changes of the node `state`.
fn versions(state: &AppState) -> Versions<'_> {
    Versions {
        log: &state.log,
        views: &state.views,
        nodes: state.nodes.as_deref(),
    }
}

/// `GET /v1/views/{view}/diff`: how the candidate's rows differ from the
/// base's — counts and the first examples, side by side.
pub async fn diff(
    State(state): State<AppState>,
    Path(view): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<DiffOut>> {
    // base: default the served version; candidate: default the one being
    // built; limit: most examples.
    let mut params = Params::parse(query.as_deref())?;
    let base = optional_u64(&mut params, "base")?;
    let candidate = optional_u64(&mut params, "candidate")?;
    let max = crate::views::review::MAX_DIFF_EXAMPLES as u64;
    let limit = params.take_u64("limit", 0, max, 20)? as usize;
    params.finish()?;
    let views = state.views.clone();
    let name = view.clone();
    let (base, candidate, diff) =
        blocking(move || Ok(views.diff(&name, base, candidate, limit)?)).await?;
    Ok(Json(diff_out(view, base, candidate, diff)))
}

/// A version number parameter, if given.
fn optional_u64(params: &mut Params, name: &str) -> ApiResult<Option<u64>> {
    params
        .take(name)
        .map(|raw| {
            raw.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!("{name} must be a version number, got {raw:?}"))
            })
        })
        .transpose()
}

/// `POST /v1/views/{view}/promote`: serves the version being built now.
pub async fn promote(
    State(state): State<AppState>,
    Path(view): Path<String>,
) -> ApiResult<Json<ServedOut>> {
    let out = blocking(move || Ok(versions(&state).promote(&view)?)).await?;
    Ok(Json(out))
}

/// `POST /v1/views/{view}/rollback`: serves the previous version again.
pub async fn rollback(
    State(state): State<AppState>,
    Path(view): Path<String>,
) -> ApiResult<Json<ServedOut>> {
    let out = blocking(move || Ok(versions(&state).rollback(&view)?)).await?;
    Ok(Json(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_parses_partition_offset_pairs() {
        assert_eq!(after("0:17, 2:5").unwrap(), vec![(0, 17), (2, 5)]);
        assert!(after("0-17").is_err());
        assert!(after("").is_err());
        assert!(after("x:1").is_err());
    }

    #[test]
    fn times_are_ms_or_rfc3339() {
        assert_eq!(time("from", "1000").unwrap(), 1000);
        assert_eq!(time("from", "1970-01-01T00:00:01Z").unwrap(), 1000);
        assert!(time("from", "yesterday").is_err());
    }
}
