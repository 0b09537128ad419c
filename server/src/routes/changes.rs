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
//!
//! **A slow client holds a bounded buffer.** A task of each connection
//! reads the feed into the connection's [`outbox`] as the view commits; the
//! answer sends from there as fast as the client reads. When more than
//! [`outbox::BUFFER_BYTES`] of events wait for the client, it has fallen
//! behind: the waiting events are dropped and the stream ends with one
//! `behind` event (`{"reason", "buffer_bytes"}`) whose id is the last event
//! the client was handed — reconnecting with it (`Last-Event-ID`, which
//! `EventSource` sends by itself) goes on without loss while that position
//! is in the feed's ring. Counted in `kappa_change_feed_clients_behind_total`.
//!
//! **Revocation ends the stream.** When the token that opened it is
//! revoked (or replaced), the stream drops what it had not sent and ends
//! with one `revoked` event (`{"reason"}`, no id), checked before every
//! read of the feed and every second (to see a revocation made offline).

mod outbox;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use futures_util::stream::{self, Stream};
use kappa_processor::changes::Since;
use kappa_processor::progress::Progress;
use serde_json::json;
use tokio::sync::oneshot::error::TryRecvError;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use self::outbox::{Behind, Outbox, Outgoing};
use super::{blocking, Params};
use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// Most changes read from the feed at once (each is cloned out of the
/// ring, then turned into an event and queued).
const BATCH: usize = 256;
/// How often the feed's task checks that the served version did not
/// change and that its token still stands (revoked by another process).
const RECHECK: Duration = Duration::from_secs(1);
/// The route, as audit lines name it.
const ROUTE: &str = "GET /v1/views/{view}/changes";

/// A position in a view's feed: version and last sequence number seen.
fn parse_position(text: &str) -> ApiResult<(u64, u64)> {
    let bad = || ApiError::bad_request(format!("from: position {text:?} is not <version>:<seq>"));
    let (v, s) = text.split_once(':').ok_or_else(bad)?;
    Ok((v.parse().map_err(|_| bad())?, s.parse().map_err(|_| bad())?))
}

/// The feed's task: reads the view's changes into one connection's outbox.
struct Feed {
    state: AppState,
    /// Who opened the stream; it ends when this stops being current.
    principal: Principal,
    view: String,
    version: u64,
    progress: Arc<Progress>,
    /// Last sequence number queued.
    after: u64,
    /// A reset to send before anything else.
    pending_reset: Option<String>,
    shutdown: watch::Receiver<bool>,
    revocations: watch::Receiver<u64>,
    outbox: Arc<Outbox>,
}

/// Why the feed's task stopped.
enum Stop {
    /// Shutdown, or the client went away: the stream just ends.
    Quietly,
    /// The token that opened the stream was revoked.
    Revoked,
    /// The client fell behind by more than its outbox.
    Behind(Behind),
}

fn change_event(version: u64, change: &kappa_processor::changes::Change) -> Outgoing {
    Outgoing::new(
        "change",
        Some(format!("{version}:{}", change.seq)),
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

fn reset_event(version: u64, next: u64, reason: &str) -> Outgoing {
    Outgoing::new(
        "reset",
        Some(format!("{version}:{}", next.saturating_sub(1))),
        json!({"version": version, "reason": reason}).to_string(),
    )
}

fn behind_event(behind: &Behind) -> Outgoing {
    Outgoing::new(
        "behind",
        Some(behind.handed.clone()),
        json!({
            "reason": format!(
                "the client fell behind: more than {} bytes of events waited for it; \
                 reconnect with Last-Event-ID {} to continue",
                outbox::BUFFER_BYTES,
                behind.handed
            ),
            "buffer_bytes": outbox::BUFFER_BYTES,
        })
        .to_string(),
    )
}

fn revoked_event(principal: &Principal) -> Outgoing {
    Outgoing::new(
        "revoked",
        None,
        json!({"reason": format!("the token {:?} was revoked", principal.name)}).to_string(),
    )
}

impl Feed {
    /// Runs until the stream ends, then ends the outbox accordingly.
    async fn run(mut self, mut gone: oneshot::Receiver<()>) {
        match self.pump(&mut gone).await {
            Stop::Quietly => self.outbox.end(None),
            Stop::Revoked => {
                crate::auth::audit::denied("revoked", Some(&self.principal.name), ROUTE);
                self.outbox.end_now(revoked_event(&self.principal));
            }
            Stop::Behind(behind) => {
                tracing::info!(
                    view = %self.view,
                    resume_from = %behind.handed,
                    buffer_bytes = outbox::BUFFER_BYTES,
                    "change feed client fell behind: stream ended"
                );
                crate::metrics::count_change_feed_behind(&self.view);
                self.outbox.end_now(behind_event(&behind));
            }
        }
    }

    /// Queues one event, or says the client fell behind.
    fn push(&self, event: Outgoing) -> Result<(), Stop> {
        self.outbox.push(event).map_err(Stop::Behind)
    }

    /// Whether the token that opened the stream still stands.
    fn token_stands(&self) -> Result<(), Stop> {
        if self.state.auth.store.is_current(&self.principal) {
            Ok(())
        } else {
            Err(Stop::Revoked)
        }
    }

    /// Reads the feed into the outbox until the stream must end.
    async fn pump(&mut self, gone: &mut oneshot::Receiver<()>) -> Stop {
        match self.pump_until_stopped(gone).await {
            Ok(()) => Stop::Quietly,
            Err(stop) => stop,
        }
    }

    async fn pump_until_stopped(&mut self, gone: &mut oneshot::Receiver<()>) -> Result<(), Stop> {
        if let Some(reason) = self.pending_reset.take() {
            let next = self.progress.changes.enable();
            self.after = next - 1;
            self.push(reset_event(self.version, next, &reason))?;
        }
        let mut published = self.progress.changes.subscribe();
        let mut recheck_at = Instant::now() + RECHECK;
        loop {
            // The client went away (checked here too: a busy feed may not
            // reach the `select!` below for a while).
            if *self.shutdown.borrow() || gone.try_recv() != Err(TryRecvError::Empty) {
                return Ok(());
            }
            // Before every read of the feed: nothing committed after a
            // revocation is queued.
            if self.revocations.has_changed().unwrap_or(false) {
                self.revocations.borrow_and_update();
                self.token_stands()?;
            }
            // Every second, also while changes keep coming.
            if Instant::now() >= recheck_at {
                self.token_stands()?;
                if let Some(reset) = self.follow_swap().await {
                    published = self.progress.changes.subscribe();
                    self.push(reset)?;
                }
                recheck_at = Instant::now() + RECHECK;
            }
            match self.progress.changes.since(self.after, BATCH) {
                Since::Changes(changes) if !changes.is_empty() => {
                    for change in &changes {
                        self.push(change_event(self.version, change))?;
                        self.after = change.seq;
                    }
                    // Let the other feeds (and the answer) run.
                    tokio::task::yield_now().await;
                    continue;
                }
                Since::Changes(_) => {}
                Since::Gap { next } => {
                    self.after = next - 1;
                    self.push(reset_event(self.version, next, "changes were lost"))?;
                    continue;
                }
            }
            tokio::select! {
                biased;
                // (`changed` marks the generation seen: check here.)
                _ = self.revocations.changed() => self.token_stands()?,
                _ = &mut *gone => return Ok(()),
                _ = self.shutdown.changed() => return Ok(()),
                _ = published.changed() => {}
                () = tokio::time::sleep_until(recheck_at) => {}
            }
        }
    }

    /// If the served version changed, switches to it and returns the reset
    /// to send.
    async fn follow_swap(&mut self) -> Option<Outgoing> {
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
        Some(reset_event(version, next, "a new version is served"))
    }
}

/// `GET /v1/views/{view}/changes[?from=<version>:<seq>]`.
pub async fn changes(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
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
    // Subscribed before the token is checked again below: a revocation
    // after that check wakes the feed's task.
    let revocations = state.auth.store.revocations();
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
    if !state.auth.store.is_current(&principal) {
        return Err(super::authenticate::revoked(&principal, ROUTE));
    }
    let next = progress.changes.enable();
    let (after, pending_reset) = match resume {
        None => (next - 1, None),
        Some((v, seq)) if v == version => (seq, None),
        Some(_) => (next - 1, Some("a new version is served".to_string())),
    };
    // Where the client stands before it is handed anything.
    let start = match resume {
        Some((v, seq)) => format!("{v}:{seq}"),
        None => format!("{version}:{after}"),
    };
    let outbox = Arc::new(Outbox::new(start, outbox::BUFFER_BYTES));
    let (answer_alive, gone) = oneshot::channel();
    let feed = Feed {
        shutdown: state.shutting_down.clone(),
        state,
        principal,
        view,
        version,
        progress,
        after,
        pending_reset,
        revocations,
        outbox: outbox.clone(),
    };
    tokio::spawn(feed.run(gone));
    Ok(Sse::new(events(outbox, answer_alive))
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// The answer's events, taken from the outbox. Dropping the stream (the
/// client went away, or the answer ended) drops `answer_alive`, which
/// stops the feed's task.
fn events(
    outbox: Arc<Outbox>,
    answer_alive: oneshot::Sender<()>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold((outbox, answer_alive), |(outbox, alive)| async move {
        let event = outbox.pop().await?;
        Some((Ok(event), (outbox, alive)))
    })
}
