//! Produce (`POST /v1/topics/{topic}/records`) and partition reads
//! (`GET /v1/topics/{topic}/partitions/{partition}/records`).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use bytes::Bytes;
use kappa_log::{Fetch, Header, NewRecord, ProduceFailure, ProduceRecord, Record, Topic};
use serde_json::json;

use super::{blocking, body, Params, ReadLimits};
use crate::auth::Principal;
use crate::config::ServerConfig;
use crate::dto::{
    ProduceBody, ProduceResponse, ProducedOut, ReadResponse, RecordIn, RecordOut, RecordOutExt,
};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Largest accepted record timestamp: 9999-12-31T23:59:59.999Z.
pub const MAX_TIMESTAMP_MS: i64 = 253_402_300_799_999;

/// `POST /v1/topics/{topic}/records`.
pub async fn produce(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(topic_name): Path<String>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let bytes = body(raw, state.config.max_body_bytes)?;
    let idempotency_key = idempotency_key(&headers)?;
    let ndjson = is_ndjson(&headers)?;
    let records = parse_records(&bytes, ndjson, &state.config)?;
    state
        .auth
        .admit_produce(&principal, records.len())
        .map_err(|wait| super::authenticate::rate_limited(&principal, wait))?;
    let (topic, created) = match crate::node::topics::existing(&state, &topic_name) {
        Some(topic) => (topic, false),
        None => {
            let (node, name) = (state.clone(), topic_name.clone());
            blocking(move || Ok(crate::node::topics::for_produce(&node, &name)?)).await?
        }
    };
    let count = records.len();
    let outcome = topic
        .produce_detailed(records, idempotency_key)
        .await
        .map_err(|failure| produce_error(&topic_name, failure))?;
    crate::metrics::record_produce(&topic_name, count, bytes.len(), started.elapsed());
    let response = ProduceResponse {
        topic: topic_name,
        records: outcome
            .records
            .iter()
            .map(|p| ProducedOut {
                partition: p.partition,
                offset: p.offset,
            })
            .collect(),
        duplicate: outcome.duplicate,
        created,
    };
    Ok(Json(response).into_response())
}

/// The answer to a failed produce. A partial append keeps the status of the
/// first failure but has its own code, `partially_appended`, and says
/// exactly what was appended: `records` (per record in request order, its
/// partition and offset, or null), `appended` and `failed` (per partition).
fn produce_error(topic: &str, failure: ProduceFailure) -> ApiError {
    let partial = match failure {
        ProduceFailure::Nothing(e) => return e.into(),
        ProduceFailure::Partial(p) => p,
    };
    let failed: Vec<serde_json::Value> = partial
        .failed
        .into_iter()
        .map(|(p, e)| {
            let e = ApiError::from(e);
            json!({"partition": p, "code": e.code, "message": e.message, "status": e.status.as_u16()})
        })
        .collect();
    let status = StatusCode::from_u16(failed[0]["status"].as_u64().unwrap_or(500) as u16)
        .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let appended_partitions: Vec<u32> = partial.appended.iter().map(|(p, _)| *p).collect();
    let failed_partitions: Vec<&serde_json::Value> =
        failed.iter().map(|f| &f["partition"]).collect();
    let mut error = ApiError::new(
        status,
        "partially_appended",
        format!(
            "topic {topic:?}: the records for partitions {appended_partitions:?} were appended, \
             those for partitions {failed_partitions:?} were not (see appended, failed and \
             records); retry with the same Idempotency-Key to append only the rest"
        ),
    );
    let records: Vec<serde_json::Value> = partial
        .records
        .iter()
        .map(|r| match r {
            Some(p) => json!({"partition": p.partition, "offset": p.offset}),
            None => serde_json::Value::Null,
        })
        .collect();
    let appended: Vec<serde_json::Value> = partial
        .appended
        .iter()
        .map(|(p, o)| {
            json!({"partition": p, "base_offset": o.base_offset, "count": o.record_count, "duplicate": o.duplicate})
        })
        .collect();
    error.details.insert("records".into(), json!(records));
    error.details.insert("appended".into(), json!(appended));
    error.details.insert("failed".into(), json!(failed));
    error
}

fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<Vec<u8>>> {
    match headers.get("idempotency-key") {
        None => Ok(None),
        Some(v) if (1..=255).contains(&v.len()) => Ok(Some(v.as_bytes().to_vec())),
        Some(_) => Err(ApiError::bad_request(
            "the Idempotency-Key header must be 1 to 255 bytes",
        )),
    }
}

fn is_ndjson(headers: &HeaderMap) -> ApiResult<bool> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(false);
    };
    let mime = value
        .to_str()
        .unwrap_or("")
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match mime.as_str() {
        "application/json" => Ok(false),
        "application/x-ndjson" | "application/ndjson" | "application/jsonl" => Ok(true),
        other => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("Content-Type {other:?} is not accepted: use application/json or application/x-ndjson"),
        )),
    }
}

/// Parses and validates the records; keys and values share `body`'s buffer.
pub(crate) fn parse_records(
    body: &Bytes,
    ndjson: bool,
    config: &ServerConfig,
) -> ApiResult<Vec<ProduceRecord>> {
    let parsed: Vec<RecordIn<'_>> = if ndjson {
        let mut records = Vec::new();
        for (i, line) in body.split(|&b| b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            if records.len() == config.max_records_per_request {
                return Err(too_many(config));
            }
            let record = serde_json::from_slice(line)
                .map_err(|e| ApiError::bad_request(format!("NDJSON line {}: {e}", i + 1)))?;
            records.push(record);
        }
        records
    } else {
        let parsed: ProduceBody<'_> = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
        parsed.records
    };
    if parsed.is_empty() {
        return Err(ApiError::bad_request("the request has no records"));
    }
    if parsed.len() > config.max_records_per_request {
        return Err(too_many(config));
    }
    parsed
        .iter()
        .enumerate()
        .map(|(i, r)| to_record(i, r, body, config))
        .collect()
}

fn too_many(config: &ServerConfig) -> ApiError {
    ApiError::too_large(format!(
        "more than {} records in one request (max_records_per_request)",
        config.max_records_per_request
    ))
}

/// A slice of `body` when `part` points into it (zero copy), else a copy.
fn share(body: &Bytes, part: &str) -> Bytes {
    let (start, base) = (part.as_ptr() as usize, body.as_ptr() as usize);
    if start >= base && start + part.len() <= base + body.len() {
        body.slice(start - base..start - base + part.len())
    } else {
        Bytes::copy_from_slice(part.as_bytes())
    }
}

fn to_record(
    i: usize,
    r: &RecordIn<'_>,
    body: &Bytes,
    config: &ServerConfig,
) -> ApiResult<ProduceRecord> {
    let value = r.value.get();
    config
        .check_record(
            r.key.as_ref().map(|k| k.len()),
            value.len(),
            r.headers.len(),
        )
        .map_err(|(_, why)| ApiError::too_large(format!("record {i}: {why}")))?;
    if let Some(ts) = r.timestamp {
        if !(0..=MAX_TIMESTAMP_MS).contains(&ts) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_timestamp",
                format!("record {i}: timestamp {ts} is not in 0..={MAX_TIMESTAMP_MS} (ms since the epoch)"),
            ));
        }
    }
    Ok(ProduceRecord {
        partition: r.partition,
        record: NewRecord {
            key: r.key.as_ref().map(|k| share(body, k)),
            value: share(body, value),
            timestamp: r.timestamp,
            headers: r
                .headers
                .iter()
                .map(|(name, value)| Header {
                    name: name.clone(),
                    value: Bytes::copy_from_slice(value.as_bytes()),
                })
                .collect(),
        },
    })
}

/// Parses a partition path segment.
pub fn partition_number(topic: &Topic, raw: &str) -> ApiResult<u32> {
    let p: u32 = raw.parse().map_err(|_| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "unknown_partition",
            format!("partition {raw:?} is not a partition number"),
        )
    })?;
    topic.partition(p)?;
    Ok(p)
}

/// The partition read's route, as refusals name it.
const PARTITION_READ: &str = "GET /v1/topics/{topic}/partitions/{partition}/records";

/// `GET /v1/topics/{topic}/partitions/{partition}/records`.
pub async fn read(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((topic_name, partition)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let mut params = Params::parse(query.as_deref())?;
    let limits = ReadLimits::take(&mut params)?;
    let offset = params.take("offset");
    let from_timestamp = params.take("from_timestamp");
    params.finish()?;
    let topic = state.log.topic(&topic_name)?;
    let p = partition_number(&topic, &partition)?;
    let offset = match (offset.as_deref(), from_timestamp) {
        (Some(_), Some(_)) => {
            return Err(ApiError::bad_request(
                "give offset or from_timestamp, not both",
            ))
        }
        (None, Some(ts)) => {
            let ts: i64 = ts.parse().map_err(|_| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "invalid_timestamp",
                    format!("from_timestamp must be an integer (ms), got {ts:?}"),
                )
            })?;
            let topic = topic.clone();
            blocking(move || Ok(topic.partition(p)?.offset_for_timestamp(ts)?)).await?
        }
        (None | Some("earliest"), None) => topic.partition(p)?.start_offset(),
        (Some("latest"), None) => topic.partition(p)?.end_offset(),
        (Some(n), None) => n.parse::<u64>().map_err(|_| {
            ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_offset",
                format!("offset must be a non-negative integer, earliest or latest, got {n:?}"),
            )
        })?,
    };
    let fetch = fetch(&state, &principal, &topic, p, offset, &limits).await?;
    let records: Vec<Record> = fetch.records().collect();
    crate::metrics::record_read(&topic_name, records.len());
    let response = ReadResponse {
        topic: &topic_name,
        partition: p,
        records: records
            .iter()
            .map(|r| RecordOut::from_record(r, None))
            .collect(),
        next_offset: fetch.next_offset,
        high_watermark: fetch.high_watermark,
        start_offset: fetch.start_offset,
    };
    Ok(Json(response).into_response())
}

/// Reads, and if nothing is there yet waits up to `max_wait` for a record
/// (woken by the writer, no polling; cut short by shutdown), then reads
/// again. A wait ended by the revocation of `principal`'s token — or one
/// after which the token is no longer current — answers `401`.
pub async fn fetch(
    state: &AppState,
    principal: &Principal,
    topic: &Arc<Topic>,
    p: u32,
    offset: u64,
    limits: &ReadLimits,
) -> ApiResult<Fetch> {
    let read = |topic: Arc<Topic>, max_records, max_bytes| {
        blocking(move || Ok(topic.partition(p)?.read(offset, max_records, max_bytes)?))
    };
    let fetch = read(topic.clone(), limits.max_records, limits.max_bytes).await?;
    if fetch.record_count() > 0 || limits.max_wait.is_zero() || offset != fetch.high_watermark {
        return Ok(fetch);
    }
    let partition = topic.partition(p)?;
    let waiting = crate::metrics::long_poll_waiting();
    let end = tokio::select! {
        end = partition.wait_for(offset, limits.max_wait) => Some(end?),
        () = state.shutdown_started() => return Ok(fetch),
        () = state.auth.store.revoked(principal) => None,
    };
    drop(waiting);
    // Re-checked before answering: a revocation by another process is
    // seen here even if nothing woke the wait for it.
    let Some(end) = end.filter(|_| state.auth.store.is_current(principal)) else {
        return Err(super::authenticate::revoked(principal, PARTITION_READ));
    };
    if end == offset {
        return Ok(fetch);
    }
    read(topic.clone(), limits.max_records, limits.max_bytes).await
}
