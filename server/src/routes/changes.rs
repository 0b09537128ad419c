//! `GET /v1/views/{view}/changes`: the view's change feed as Server-Sent
//! Events.
//!
//! Each row change is one `change` event whose data is
//! `{"version", "seq", "key", "window_start", "window_end", "row"}` (`row`
//! null when the row went away) and whose id is `<version>:<seq>`. A client
//! resumes by sending that id back (`Last-Event-ID`, as browsers do, or
//! `?from=<id>`). When the position cannot be resumed — it fell out of the
//! feed's buffer, it belongs to another server run, or the served version
//! changed (a replay swapped in) — the stream sends one `reset` event
//! (`{"version", "reason"}`): the client re-reads the rows and continues
//! with the events that follow. Only changes committed after the feed was
//! first subscribed are recorded.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream};
use kappa_processor::changes::Since;
use kappa_processor::progress::Progress;
use serde_json::json;

use super::{blocking, Params};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Most changes sent per wake-up.
const BATCH: usize = 1_000;
/// How often the stream checks that the served version did not change
/// while no changes arrive.
const RECHECK: Duration = Duration::from_secs(1);

/// A position in a view's feed: version and last sequence number seen.
fn parse_position(text: &str) -> ApiResult<(u64, u64)> {
    let bad = || ApiError::bad_request(format!("from: position {text:?} is not <version>:<seq>"));
    let (v, s) = text.split_once(':').ok_or_else(bad)?;
    Ok((v.parse().map_err(|_| bad())?, s.parse().map_err(|_| bad())?))
}

/// What the stream needs between events.
struct Feed {
    state: AppState,
    view: String,
    version: u64,
    progress: Arc<Progress>,
    /// Last sequence number sent.
    after: u64,
    /// A reset to send before anything else.
    pending_reset: Option<String>,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

fn change_event(version: u64, change: &kappa_processor::changes::Change) -> Event {
    Event::default()
        .event("change")
        .id(format!("{version}:{}", change.seq))
        .data(
            json!({
                "version": version,
                "seq": change.seq,
                "key": change.key,
                "window_start": change.window_start,
                "window_end": change.window_end,
                "row": change.row,
            })
            .to_string(),
        )
}

fn reset_event(version: u64, next: u64, reason: &str) -> Event {
    Event::default()
        .event("reset")
        .id(format!("{version}:{}", next.saturating_sub(1)))
        .data(json!({"version": version, "reason": reason}).to_string())
}

impl Feed {
    /// The next events to send, waiting for changes; `None` ends the stream.
    async fn next(mut self) -> Option<(Vec<Event>, Feed)> {
        if let Some(reason) = self.pending_reset.take() {
            let next = self.progress.changes.enable();
            self.after = next - 1;
            return Some((vec![reset_event(self.version, next, &reason)], self));
        }
        let mut published = self.progress.changes.subscribe();
        loop {
            if *self.shutdown.borrow() {
                return None;
            }
            match self.progress.changes.since(self.after, BATCH) {
                Since::Changes(changes) if !changes.is_empty() => {
                    self.after = changes.last().expect("non-empty").seq;
                    let events = changes
                        .iter()
                        .map(|c| change_event(self.version, c))
                        .collect();
                    return Some((events, self));
                }
                Since::Changes(_) => {}
                Since::Gap { next } => {
                    self.after = next - 1;
                    let reset = reset_event(self.version, next, "changes were lost");
                    return Some((vec![reset], self));
                }
            }
            tokio::select! {
                _ = published.changed() => {}
                _ = tokio::time::sleep(RECHECK) => {
                    if let Some(events) = self.follow_swap().await {
                        return Some((events, self));
                    }
                }
                _ = self.shutdown.changed() => return None,
            }
        }
    }

    /// If the served version changed, switches to it and returns the reset
    /// to send.
    async fn follow_swap(&mut self) -> Option<Vec<Event>> {
        let views = self.state.views.clone();
        let view = self.view.clone();
        let (version, progress) = blocking(move || Ok(views.served_progress(&view)?))
            .await
            .ok()?;
        let progress = progress?;
        if version == self.version {
            return None;
        }
        self.version = version;
        self.progress = progress;
        let next = self.progress.changes.enable();
        self.after = next - 1;
        Some(vec![reset_event(version, next, "a new version is served")])
    }
}

/// `GET /v1/views/{view}/changes[?from=<version>:<seq>]`.
pub async fn changes(
    State(state): State<AppState>,
    Path(view): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let mut params = Params::parse(query.as_deref())?;
    let from = params.take("from");
    params.finish()?;
    let resume = match from.or_else(|| {
        headers
            .get("last-event-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    }) {
        Some(text) => Some(parse_position(&text)?),
        None => None,
    };
    let views = state.views.clone();
    let name = view.clone();
    let (version, progress) = blocking(move || Ok(views.served_progress(&name)?)).await?;
    let progress = progress.ok_or_else(|| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "view_not_running",
            format!("view {view:?}: its served version {version} is not running"),
        )
    })?;
    let next = progress.changes.enable();
    let (after, pending_reset) = match resume {
        None => (next - 1, None),
        Some((v, seq)) if v == version => (seq, None),
        Some(_) => (next - 1, Some("a new version is served".to_string())),
    };
    let feed = Feed {
        shutdown: state.shutting_down.clone(),
        state,
        view,
        version,
        progress,
        after,
        pending_reset,
    };
    Ok(Sse::new(events(feed))
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn events(feed: Feed) -> impl Stream<Item = Result<Event, Infallible>> {
    use futures_util::StreamExt;
    stream::unfold(feed, Feed::next).flat_map(|events| stream::iter(events.into_iter().map(Ok)))
}
