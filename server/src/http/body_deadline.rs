//! A request body with a deadline for the whole body, not per read: the
//! body must be complete within `request_body_timeout_ms` of its request
//! head, and after a grace of [`MIN_RATE_GRACE`] it must keep arriving at
//! `request_body_min_bytes_per_s` on average. A client that drips a byte
//! every few seconds is cut off (one read at a time used to reset the
//! deadline). While the body arrives the connection counts as receiving a
//! body ([`super::standing`]): it may be closed to make room.
//!
//! A body cut off answers the handler's read with [`BodyTooSlow`]; the
//! router's body extraction turns it into `408 request_timeout`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::standing::{Standing, Standings};

/// How long a body may take before the minimum rate applies.
pub const MIN_RATE_GRACE: Duration = Duration::from_secs(2);

/// The limits of one body.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    /// The whole body's deadline from the request head.
    pub total: Duration,
    /// The least average rate after [`MIN_RATE_GRACE`], bytes per second.
    pub min_bytes_per_s: u64,
}

/// Why a body was cut off.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time ({received} bytes in {elapsed_ms} ms): the whole body must arrive within request_body_timeout_ms, at request_body_min_bytes_per_s on average")]
pub struct BodyTooSlow {
    /// Bytes received.
    pub received: u64,
    /// Time since the request head.
    pub elapsed_ms: u64,
}

pin_project_lite::pin_project! {
    /// `Incoming` under [`BodyLimits`].
    pub struct TimedBody {
        #[pin]
        inner: Incoming,
        #[pin]
        deadline: Sleep,
        started: Instant,
        received: u64,
        limits: BodyLimits,
        arriving: Option<(Arc<Standings>, Arc<Standing>)>,
    }

    impl PinnedDrop for TimedBody {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            finish(this.arriving);
        }
    }
}

/// The connection no longer receives this body.
fn finish(arriving: &mut Option<(Arc<Standings>, Arc<Standing>)>) {
    if let Some((standings, standing)) = arriving.take() {
        standings.body(&standing, false);
    }
}

impl TimedBody {
    /// `inner`, whose request head arrived now, on the connection of
    /// `standing`.
    pub fn new(
        inner: Incoming,
        limits: BodyLimits,
        standings: Arc<Standings>,
        standing: Arc<Standing>,
    ) -> TimedBody {
        let started = Instant::now();
        let arriving = (!inner.is_end_stream()).then(|| {
            standings.body(&standing, true);
            (standings, standing)
        });
        TimedBody {
            inner,
            deadline: tokio::time::sleep_until(deadline(started, 0, limits)),
            started,
            received: 0,
            limits,
            arriving,
        }
    }
}

/// When a body that started at `started` and has `received` bytes is cut
/// off: the total deadline, or earlier where the minimum rate says so.
fn deadline(started: Instant, received: u64, limits: BodyLimits) -> Instant {
    let total = started + limits.total;
    if limits.min_bytes_per_s == 0 {
        return total;
    }
    let earned = Duration::from_secs_f64(received as f64 / limits.min_bytes_per_s as f64);
    total.min(started + MIN_RATE_GRACE + earned)
}

impl Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let mut this = self.project();
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    *this.received += data.len() as u64;
                    let next = deadline(*this.started, *this.received, *this.limits);
                    this.deadline.as_mut().reset(next);
                }
                if this.inner.is_end_stream() {
                    finish(this.arriving);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                finish(this.arriving);
                Poll::Ready(Some(Err(e.into())))
            }
            Poll::Ready(None) => {
                finish(this.arriving);
                Poll::Ready(None)
            }
            Poll::Pending => match this.deadline.poll(cx) {
                Poll::Ready(()) => {
                    finish(this.arriving);
                    crate::metrics::count_connection_closed("body_too_slow");
                    Poll::Ready(Some(Err(Box::new(BodyTooSlow {
                        received: *this.received,
                        elapsed_ms: this.started.elapsed().as_millis() as u64,
                    }))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deadline_is_the_total_or_what_the_minimum_rate_has_earned() {
        let started = Instant::now();
        let limits = BodyLimits {
            total: Duration::from_secs(30),
            min_bytes_per_s: 1000,
        };
        assert_eq!(deadline(started, 0, limits), started + MIN_RATE_GRACE);
        assert_eq!(
            deadline(started, 5000, limits),
            started + MIN_RATE_GRACE + Duration::from_secs(5)
        );
        assert_eq!(
            deadline(started, 1 << 30, limits),
            started + Duration::from_secs(30),
            "never past the total"
        );
        let no_rate = BodyLimits {
            min_bytes_per_s: 0,
            ..limits
        };
        assert_eq!(
            deadline(started, 0, no_rate),
            started + Duration::from_secs(30)
        );
    }
}
