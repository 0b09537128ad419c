//! Produce rate limits per token: a token may carry
//! `produce_records_per_second`; [`ProduceLimiter`] keeps one token bucket
//! per token name, in memory (a restart refills every bucket).
//!
//! The bucket holds at most one second of records. A request is admitted
//! while the bucket is not in debt, and takes all its records at once —
//! possibly into debt, so a batch larger than one second's worth is not
//! refused forever; the next request waits until the debt is repaid.
//! Refused requests answer `429 rate_limited` with `Retry-After` (whole
//! seconds until the bucket is out of debt). Time is passed in (`now`), so
//! the arithmetic is tested without a clock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One token's bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// Records available (negative: debt).
    level: f64,
    /// When `level` was computed.
    at: Instant,
}

/// The buckets of every rate-limited token.
#[derive(Debug, Default)]
pub struct ProduceLimiter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl ProduceLimiter {
    /// Admits `records` for token `name` limited to `rate` records/s at
    /// `now`, or answers how long to wait.
    pub fn admit(
        &self,
        name: &str,
        rate: u64,
        records: usize,
        now: Instant,
    ) -> Result<(), Duration> {
        let rate = rate.max(1) as f64;
        let mut buckets = self.buckets.lock().expect("limiter lock");
        let bucket = buckets.entry(name.to_string()).or_insert(Bucket {
            level: rate,
            at: now,
        });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.level = (bucket.level + elapsed * rate).min(rate);
        bucket.at = now;
        if bucket.level < 0.0 {
            return Err(Duration::from_secs_f64(-bucket.level / rate));
        }
        bucket.level -= records as f64;
        Ok(())
    }

    /// Forgets a token's bucket (it was revoked).
    pub fn forget(&self, name: &str) {
        self.buckets.lock().expect("limiter lock").remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_of_records_passes_then_the_debt_must_be_repaid() {
        let limiter = ProduceLimiter::default();
        let t0 = Instant::now();
        assert!(limiter.admit("w", 10, 10, t0).is_ok());
        // Level 0, not in debt: one more request passes and goes into debt.
        assert!(limiter.admit("w", 10, 5, t0).is_ok());
        let wait = limiter.admit("w", 10, 1, t0).unwrap_err();
        assert_eq!(wait, Duration::from_millis(500));
        assert!(limiter
            .admit("w", 10, 1, t0 + Duration::from_millis(499))
            .is_err());
        assert!(limiter
            .admit("w", 10, 1, t0 + Duration::from_millis(500))
            .is_ok());
        // Other tokens have their own buckets.
        assert!(limiter.admit("other", 10, 10, t0).is_ok());
    }

    #[test]
    fn a_batch_larger_than_a_second_is_admitted_once_then_waits() {
        let limiter = ProduceLimiter::default();
        let t0 = Instant::now();
        assert!(limiter.admit("w", 1, 100, t0).is_ok());
        let wait = limiter
            .admit("w", 1, 1, t0 + Duration::from_secs(1))
            .unwrap_err();
        assert_eq!(wait, Duration::from_secs(98));
        // The bucket never holds more than a second's worth.
        assert!(limiter
            .admit("w", 1, 1, t0 + Duration::from_secs(1000))
            .is_ok());
        assert!(limiter
            .admit("w", 1, 1, t0 + Duration::from_secs(1000))
            .is_ok());
        assert!(limiter
            .admit("w", 1, 1, t0 + Duration::from_secs(1000))
            .is_err());
    }
}
