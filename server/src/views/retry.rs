//! Retrying failed served versions: a served version whose processor
//! ended with an error (a full disk, a store write that failed) is started
//! again from its last commit with exponential backoff — 1 s, 2 s, 4 s, …
//! up to 1 minute — until it runs. What failed, how often it was retried
//! and when the next attempt is are kept in memory (so they are reported
//! even when the catalog cannot be written, as on a full disk) and shown
//! by `GET /v1/views/{view}`.
//!
//! Time comes from a [`Clock`] in the manager's config, so tests drive the
//! backoff without sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde::Serialize;

/// First retry delay.
pub const RETRY_BASE_MS: i64 = 1_000;
/// Longest retry delay.
pub const RETRY_MAX_MS: i64 = 60_000;

/// Milliseconds since the epoch, from the system or a test.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> i64 + Send + Sync>);

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", self.now_ms())
    }
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock(Arc::new(kappa_log::now_ms))
    }

    /// A clock that reads `ms` (tests move it).
    pub fn manual(ms: Arc<AtomicI64>) -> Clock {
        Clock(Arc::new(move || ms.load(Ordering::Acquire)))
    }

    /// Now, in ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        (self.0)()
    }
}

/// The delay before retry number `attempts + 1`.
pub fn backoff_ms(attempts: u32) -> i64 {
    RETRY_BASE_MS
        .saturating_mul(1_i64 << attempts.min(20))
        .min(RETRY_MAX_MS)
}

/// A served version that is down, and its retries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retry {
    /// The version that failed.
    pub version: u64,
    /// Why it failed (or why the last retry failed).
    pub reason: String,
    /// When it first failed (ms).
    pub failed_at_ms: i64,
    /// Retries made so far.
    pub attempts: u32,
    /// When the next retry is due (ms).
    pub next_attempt_ms: i64,
}

impl Retry {
    /// A fresh failure of `version` at `now`: first retry after the base delay.
    pub fn new(version: u64, reason: String, now: i64) -> Retry {
        Retry {
            version,
            reason,
            failed_at_ms: now,
            attempts: 0,
            next_attempt_ms: now.saturating_add(backoff_ms(0)),
        }
    }

    /// A retry at `now` failed with `reason`: the next one waits longer.
    pub fn failed_again(&mut self, reason: String, now: i64) {
        self.attempts = self.attempts.saturating_add(1);
        self.reason = reason;
        self.next_attempt_ms = now.saturating_add(backoff_ms(self.attempts));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let delays: Vec<i64> = (0..8).map(backoff_ms).collect();
        assert_eq!(
            delays,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
        );
        assert_eq!(backoff_ms(u32::MAX), 60_000);
        let mut r = Retry::new(3, "disk full".into(), 100);
        assert_eq!(r.next_attempt_ms, 1_100);
        r.failed_again("still full".into(), 1_100);
        assert_eq!((r.attempts, r.next_attempt_ms), (1, 3_100));
    }
}
