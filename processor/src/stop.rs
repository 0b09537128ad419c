//! How a running version is asked to end: [`StopSignal`], shared by the
//! version's handle and its run loop.
//!
//! - **Stop** (shutdown): the loop ends its poll at the next batch boundary
//!   and makes a final commit, so a restart resumes where it stopped.
//! - **Abandon** (DROP, a cancelled build, a replaced version): the loop
//!   ends at the next batch boundary and does not commit — its state is
//!   about to be deleted, so writing it would only delay the end (a big
//!   cache flush can take seconds).
//!
//! The loop checks the signal between input batches, so either ends within
//! one batch's processing time whatever the version is doing.

use std::sync::atomic::{AtomicBool, Ordering};

/// A request to end a running version, with or without a final commit.
#[derive(Debug, Default)]
pub struct StopSignal {
    stop: AtomicBool,
    abandon: AtomicBool,
}

impl StopSignal {
    /// Ask the version to end after a final commit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
    }

    /// Ask the version to end without committing (its state is dropped).
    pub fn abandon(&self) {
        self.abandon.store(true, Ordering::Release);
        self.stop.store(true, Ordering::Release);
    }

    /// True once either was asked: the loop ends its current poll.
    pub fn is_set(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// True if the version ends without a final commit.
    pub fn is_abandoned(&self) -> bool {
        self.abandon.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::StopSignal;

    #[test]
    fn abandon_also_stops_and_stop_does_not_abandon() {
        let s = StopSignal::default();
        assert!(!s.is_set() && !s.is_abandoned());
        s.stop();
        assert!(s.is_set() && !s.is_abandoned());
        let a = StopSignal::default();
        a.abandon();
        assert!(a.is_set() && a.is_abandoned());
    }
}
