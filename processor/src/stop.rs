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
//! one batch's processing time whatever the version is doing; an idle
//! version waiting for input is woken by it ([`StopSignal::asked`]), so a
//! DROP, a replaced version or a shutdown does not wait out the idle wait.

use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::Notify;

/// A request to end a running version, with or without a final commit.
#[derive(Debug, Default)]
pub struct StopSignal {
    stop: AtomicBool,
    abandon: AtomicBool,
    /// Wakes [`StopSignal::asked`].
    asked: Notify,
}

impl StopSignal {
    /// Ask the version to end after a final commit.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.asked.notify_one();
    }

    /// Ask the version to end without committing (its state is dropped).
    pub fn abandon(&self) {
        self.abandon.store(true, Ordering::Release);
        self.stop.store(true, Ordering::Release);
        self.asked.notify_one();
    }

    /// Completes once a stop or abandon was asked (at once if one was).
    /// For the one loop the signal ends: a request made before the wait
    /// starts leaves a permit ([`Notify::notify_one`]), so none is missed.
    pub async fn asked(&self) {
        while !self.is_set() {
            self.asked.notified().await;
        }
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
    fn a_wait_ends_on_a_stop_asked_before_or_during_it() {
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let before = StopSignal::default();
        before.stop();
        io.block_on(before.asked());
        let during = std::sync::Arc::new(StopSignal::default());
        let asker = std::thread::spawn({
            let during = during.clone();
            move || during.abandon()
        });
        io.block_on(during.asked());
        asker.join().unwrap();
        assert!(during.is_abandoned());
    }

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
