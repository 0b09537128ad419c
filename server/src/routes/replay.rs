//! Checks a replay's start position at request time, so that a replay the
//! processor could not start is a 400 naming the problem instead of a 202
//! and a failed build later, and a replay over history retention deleted
//! is a 409 unless asked for knowingly.

use axum::http::StatusCode;
use kappa_processor::host::StartFrom;

use crate::error::{ApiError, ApiResult};
use crate::views::ViewError;
use crate::AppState;

/// A replay from earliest (or from offsets below what the log holds) over
/// input the log no longer holds would serve less than the version it
/// replaces: `409 history_truncated` naming what is gone, unless the
/// request says `"allow_truncated": true`.
pub fn check_history(state: &AppState, view: &str, from: &StartFrom) -> ApiResult<()> {
    let catalog = state.views.catalog();
    let entry = catalog
        .views
        .get(view)
        .ok_or_else(|| ViewError::UnknownView(view.to_string()))?;
    let horizon = crate::views::horizon::horizon(&state.log, &entry.served);
    let mut missing = match from {
        StartFrom::Earliest => horizon.describe_missing(),
        _ => Vec::new(),
    };
    if let (StartFrom::Offsets(offsets), Some(input)) = (from, horizon.topics.first()) {
        for (p, (&offset, h)) in offsets.iter().zip(&input.partitions).enumerate() {
            if offset < h.earliest_offset {
                missing.push(format!(
                    "{}/{p}: offsets {offset}..{} are gone",
                    input.topic, h.earliest_offset
                ));
            }
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "history_truncated",
        format!(
            "replay of {view:?} would read less input than its served version saw: {}; \
             retention deleted it. Send {{\"allow_truncated\": true}} to replay anyway",
            missing.join("; ")
        ),
    ))
}

/// `{"offsets": [..]}` must give at most one offset per partition of the
/// view's input topic, none beyond the partition's end (one below the
/// start begins at the start, as the processor does). Other starts are
/// always valid. An unknown view is left to the replay itself.
pub fn check_start(state: &AppState, view: &str, from: &StartFrom) -> ApiResult<()> {
    let StartFrom::Offsets(offsets) = from else {
        return Ok(());
    };
    let catalog = state.views.catalog();
    let entry = catalog
        .views
        .get(view)
        .ok_or_else(|| ViewError::UnknownView(view.to_string()))?;
    let topic_name = &entry.latest().plan.source.topic;
    let topic = state.log.topic(topic_name)?;
    let bad =
        |message: String| ApiError::new(StatusCode::BAD_REQUEST, "offset_out_of_range", message);
    if offsets.len() > topic.partitions().len() {
        return Err(bad(format!(
            "replay of {view:?}: {} offsets given, topic {topic_name:?} has {} partitions",
            offsets.len(),
            topic.partitions().len()
        )));
    }
    for (p, (&offset, partition)) in offsets.iter().zip(topic.partitions()).enumerate() {
        let end = partition.end_offset();
        if offset > end {
            return Err(bad(format!(
                "replay of {view:?}: topic {topic_name:?} partition {p}: offset {offset} is beyond the end ({end})"
            )));
        }
    }
    Ok(())
}
