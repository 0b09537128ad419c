//! Honest progress: whether a version has caught up with its input once,
//! and whether it keeps up.
//!
//! The supervisor feeds every running version's total lag to its
//! [`CatchUp`] on each round, with the manager's clock (tests move it).
//! A version has **caught up** once its lag was at most `swap_max_lag`
//! (the same bar a rebuild must pass to be swapped in); until then it is
//! `catching_up` and its rows answers say so. A version that has not
//! caught up is **not keeping up** when its lag is larger now than it was
//! [`NOT_KEEPING_UP_WINDOW_MS`] ago: for a minute it processed fewer
//! records than arrived, so its ETA only grows.

use std::collections::VecDeque;

/// How long the lag must have grown before a version is `not_keeping_up`.
pub const NOT_KEEPING_UP_WINDOW_MS: i64 = 60_000;

/// One version's catch-up record.
#[derive(Debug, Clone, Default)]
pub struct CatchUp {
    caught_up: bool,
    /// (clock ms, lag) samples while not caught up, oldest first, covering
    /// a little more than the window.
    lags: VecDeque<(i64, u64)>,
}

impl CatchUp {
    /// Records the version's `lag` at `now_ms`; `at_end`: it is at its
    /// input's end now (lag within the threshold, and for a build, its
    /// targets reached).
    pub fn observe(&mut self, now_ms: i64, lag: u64, at_end: bool) {
        if self.caught_up {
            return;
        }
        if at_end {
            self.caught_up = true;
            self.lags.clear();
            return;
        }
        self.lags.push_back((now_ms, lag));
        // Keep the newest sample at least a window old, and what follows.
        while self.lags.len() > 2 && now_ms - self.lags[1].0 >= NOT_KEEPING_UP_WINDOW_MS {
            self.lags.pop_front();
        }
    }

    /// Whether the version reached its input's end (within the threshold)
    /// at least once.
    pub fn caught_up(&self) -> bool {
        self.caught_up
    }

    /// Whether the version has not caught up and its lag grew over the
    /// last window.
    pub fn not_keeping_up(&self, now_ms: i64) -> bool {
        if self.caught_up {
            return false;
        }
        let (Some(&(then, old)), Some(&(_, lag))) = (self.lags.front(), self.lags.back()) else {
            return false;
        };
        now_ms - then >= NOT_KEEPING_UP_WINDOW_MS && lag > old
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_catches_up_once_and_stays_caught_up() {
        let mut c = CatchUp::default();
        c.observe(0, 5_000, false);
        assert!(!c.caught_up());
        c.observe(1_000, 900, true);
        assert!(c.caught_up());
        // A later burst does not make it "catching up" again.
        c.observe(2_000, 50_000, false);
        assert!(c.caught_up() && !c.not_keeping_up(2_000));
    }

    #[test]
    fn a_lag_that_grew_for_a_minute_is_not_keeping_up() {
        let mut c = CatchUp::default();
        for s in 0..=59 {
            c.observe(s * 1_000, 10_000 + s as u64 * 100, false);
        }
        // Growing, but not yet for a whole minute.
        assert!(!c.not_keeping_up(59_000));
        c.observe(60_000, 16_000, false);
        assert!(c.not_keeping_up(60_000));
        // Shrinking over the last minute: keeping up again, if slowly.
        for s in 61..=125 {
            c.observe(s * 1_000, 16_000 - (s as u64 - 60) * 10, false);
        }
        assert!(!c.not_keeping_up(125_000));
    }
}
