//! `/v1/groups`: consumer groups — read from committed positions, commit,
//! list offsets with lag, reset.
//!
//! Grants: the route needs `group` on the group (checked by `auth::check`);
//! reading, committing, resetting and fetching the offsets of a topic also
//! need `read` on the topic (`Principal::may_commit`, the rule Kafka's
//! `OffsetCommit`/`OffsetFetch` follow). A waiting read stops at its
//! token's revocation and answers `401` without committing.

use std::sync::Arc;

use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use bytes::Bytes;
use futures_util::future::select_all;
use kappa_log::{Record, ResetTo, Topic};

use super::{blocking, body, json, Params, ReadLimits};
use crate::auth::Principal;
use crate::dto::{
    CommitRequest, GroupOffsetsOut, GroupReadResponse, GroupTopicOffsets, GroupsOut, IntoWire,
    OffsetsResponse, PartitionOffset, RecordOut, RecordOutExt, ResetRequest,
};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// `GET /v1/groups`.
pub async fn list(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
) -> Json<GroupsOut> {
    let mut groups = state.log.groups();
    groups.retain(|g| principal.may_see_group(g));
    Json(GroupsOut { groups })
}

/// The group's position on each partition: committed, else the start;
/// never below the start (retention may have passed it).
fn positions(state: &AppState, group: &str, topic: &str) -> ApiResult<Vec<u64>> {
    Ok(state
        .log
        .group_offsets(group, topic)?
        .iter()
        .map(|o| {
            o.committed
                .unwrap_or(o.start_offset)
                .clamp(o.start_offset, o.end_offset)
        })
        .collect())
}

/// Records read for a group (with their partitions) and the next positions.
type GroupRead = (Vec<(u32, Record)>, Vec<PartitionOffset>);

/// Reads every partition from `positions` within the limits.
fn read_all(topic: &Topic, positions: &[u64], limits: &ReadLimits) -> ApiResult<GroupRead> {
    let mut records = Vec::new();
    let mut next = Vec::with_capacity(positions.len());
    let mut bytes = 0u64;
    // Start at a partition that moves as the group advances, so a busy
    // partition cannot starve the others of the record budget.
    let n = positions.len().max(1);
    let first = (positions.iter().sum::<u64>() % n as u64) as usize;
    let order = (0..n).map(|i| (first + i) % n);
    for i in order {
        let (p, position) = (&topic.partitions()[i], positions[i]);
        let left = limits.max_records.saturating_sub(records.len() as u64);
        let mut offset = position;
        if left > 0 && bytes < limits.max_bytes {
            let fetch = p.read(position, left, limits.max_bytes - bytes)?;
            for r in fetch.records() {
                bytes += (r.value.len() + r.key.as_ref().map_or(0, |k| k.len())) as u64;
                records.push((p.id(), r));
            }
            offset = fetch.next_offset;
        }
        next.push(PartitionOffset {
            partition: p.id(),
            offset,
        });
    }
    next.sort_by_key(|o| o.partition);
    Ok((records, next))
}

/// The group read's route, as refusals name it.
const GROUP_READ: &str = "GET /v1/groups/{group}/topics/{topic}/records";

/// `GET /v1/groups/{group}/topics/{topic}/records`.
pub async fn read(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path((group, topic_name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let mut params = Params::parse(query.as_deref())?;
    let limits = ReadLimits::take(&mut params)?;
    let commit = params.take_bool("commit", false)?;
    params.finish()?;
    kappa_log::offsets::validate_group(&group)?;
    let topic = state.log.topic(&topic_name)?;
    let positions = Arc::new(positions(&state, &group, &topic_name)?);
    let run = |topic: Arc<Topic>, positions: Arc<Vec<u64>>, limits: ReadLimits| {
        blocking(move || read_all(&topic, &positions, &limits))
    };
    let copy = |l: &ReadLimits| ReadLimits {
        max_records: l.max_records,
        max_bytes: l.max_bytes,
        max_wait: l.max_wait,
    };
    let (mut records, mut next) = run(topic.clone(), positions.clone(), copy(&limits)).await?;
    if records.is_empty() && !limits.max_wait.is_zero() {
        let waits = topic
            .partitions()
            .iter()
            .zip(positions.iter())
            .map(|(p, &pos)| Box::pin(p.wait_for(pos, limits.max_wait)));
        let waiting = crate::metrics::long_poll_waiting();
        tokio::select! {
            _ = select_all(waits) => {}
            () = state.shutdown_started() => {}
            () = state.auth.store.revoked(&principal) => {}
        }
        drop(waiting);
        (records, next) = run(topic.clone(), positions.clone(), copy(&limits)).await?;
    }
    // Revoked since its check (while it waited, here or by another
    // process): no records, no commit.
    if !state.auth.store.is_current(&principal) {
        return Err(super::authenticate::revoked(&principal, GROUP_READ));
    }
    if commit {
        let offsets: Vec<(u32, u64)> = next.iter().map(|o| (o.partition, o.offset)).collect();
        let (log, g, t) = (state.log.clone(), group.clone(), topic_name.clone());
        blocking(move || Ok(log.commit_offsets(&g, &t, &offsets)?)).await?;
    }
    crate::metrics::record_read(&topic_name, records.len());
    let response = GroupReadResponse {
        group: std::borrow::Cow::Borrowed(&group),
        topic: &topic_name,
        records: records
            .iter()
            .map(|(p, r)| RecordOut::from_record(r, Some(*p)))
            .collect(),
        next_offsets: next,
    };
    Ok(Json(response).into_response())
}

/// `POST /v1/groups/{group}/offsets`.
pub async fn commit(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(group): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<OffsetsResponse>> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let request: CommitRequest = json(&bytes)?;
    super::authenticate::require_commit(
        &principal,
        &group,
        &request.topic,
        "POST /v1/groups/{group}/offsets",
    )?;
    if request.offsets.is_empty() {
        return Err(ApiError::bad_request("offsets is empty"));
    }
    let offsets: Vec<(u32, u64)> = request
        .offsets
        .iter()
        .map(|o| (o.partition, o.offset))
        .collect();
    let (log, g, t) = (state.log.clone(), group.clone(), request.topic.clone());
    blocking(move || Ok(log.commit_offsets(&g, &t, &offsets)?)).await?;
    Ok(Json(OffsetsResponse {
        group,
        topic: request.topic,
        offsets: request.offsets,
    }))
}

/// `GET /v1/groups/{group}/offsets[?topic=]`: without `topic`, the
/// topics the group committed on that the token may read.
pub async fn offsets(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(group): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<GroupOffsetsOut>> {
    let mut params = Params::parse(query.as_deref())?;
    let topic = params.take("topic");
    params.finish()?;
    kappa_log::offsets::validate_group(&group)?;
    let topics = match topic {
        Some(t) => {
            super::authenticate::require_commit(
                &principal,
                &group,
                &t,
                "GET /v1/groups/{group}/offsets",
            )?;
            vec![t]
        }
        None => {
            let mut names: Vec<String> = state
                .log
                .committed(&group)
                .into_iter()
                .map(|c| c.topic)
                .filter(|t| principal.may_commit(&group, t))
                .collect();
            names.dedup();
            names
        }
    };
    let mut out = Vec::new();
    for t in topics {
        let partitions = state.log.group_offsets(&group, &t)?;
        out.push(GroupTopicOffsets {
            topic: t,
            partitions: partitions.into_iter().map(IntoWire::into_wire).collect(),
        });
    }
    Ok(Json(GroupOffsetsOut { group, topics: out }))
}

/// Parses `to`: `"earliest"`, `"latest"`, `{"timestamp": ms}` or
/// `{"offset": n}` — exactly one of them.
fn reset_target(to: &serde_json::Value) -> ApiResult<ResetTo> {
    use serde_json::Value;
    let target = match to {
        Value::String(s) if s == "earliest" => Some(ResetTo::Earliest),
        Value::String(s) if s == "latest" => Some(ResetTo::Latest),
        Value::Object(o) if o.len() == 1 => match (o.get("timestamp"), o.get("offset")) {
            (Some(t), None) => t.as_i64().map(ResetTo::Timestamp),
            (None, Some(n)) => n.as_u64().map(ResetTo::Offset),
            _ => None,
        },
        _ => None,
    };
    target.ok_or_else(|| {
        ApiError::bad_request(format!(
            "to must be \"earliest\", \"latest\", {{\"timestamp\": ms}} or {{\"offset\": n}} (n >= 0), got {to}"
        ))
    })
}

/// `POST /v1/groups/{group}/reset`.
pub async fn reset(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    Path(group): Path<String>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<OffsetsResponse>> {
    let bytes = body(raw, state.config.max_body_bytes)?;
    let request: ResetRequest = json(&bytes)?;
    super::authenticate::require_commit(
        &principal,
        &group,
        &request.topic,
        "POST /v1/groups/{group}/reset",
    )?;
    let to = reset_target(&request.to)?;
    let (log, g, t) = (state.log.clone(), group.clone(), request.topic.clone());
    let offsets = blocking(move || Ok(log.reset_offsets(&g, &t, to)?)).await?;
    Ok(Json(OffsetsResponse {
        group,
        topic: request.topic,
        offsets: offsets
            .into_iter()
            .map(|(partition, offset)| PartitionOffset { partition, offset })
            .collect(),
    }))
}
