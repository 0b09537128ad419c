//! The log's append clock: one time line for every partition of every
//! topic, and how far it is complete.
//!
//! Every batch carries the time it was appended (`append_time`, ms). All
//! partition writers take that time from this one clock, so append times
//! never go backwards across the whole log (within a process, and across
//! restarts as far as the recovered segments say — see
//! [`AppendClock::observe`]). A writer holds an [`AppendTicket`] from the
//! moment it takes a time until its batches are readable (or failed).
//!
//! That lets the log answer "every partition is complete up to time T"
//! ([`AppendClock::complete_up_to`]): no append at or before T is still
//! in flight, and every later append gets a time after T. Stream processors
//! use it to merge their inputs in append-time order while live exactly as
//! a replay of the stored log does (`kappa-processor`'s `order` module).
//!
//! The time source is injectable ([`ManualTime`]) so tests can move log
//! time without waiting.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Where the clock reads the current time (ms since the epoch).
pub type TimeSource = Arc<dyn Fn() -> i64 + Send + Sync>;

/// The log-wide append clock. See the module docs.
pub struct AppendClock {
    source: TimeSource,
    state: Mutex<ClockState>,
    /// Signalled when an in-flight append finishes.
    finished: Condvar,
}

#[derive(Debug, Default)]
struct ClockState {
    /// No append gets a time before this (the largest time handed out or
    /// promised complete).
    floor: i64,
    /// Times of appends in flight, with how many hold each.
    in_flight: BTreeMap<i64, usize>,
}

impl std::fmt::Debug for AppendClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.lock().expect("clock");
        f.debug_struct("AppendClock")
            .field("floor", &state.floor)
            .field("in_flight", &state.in_flight.len())
            .finish()
    }
}

impl Default for AppendClock {
    fn default() -> Self {
        AppendClock::system()
    }
}

impl AppendClock {
    /// A clock reading the system time.
    pub fn system() -> Self {
        AppendClock::with_source(Arc::new(crate::now_ms))
    }

    /// A clock reading `source`.
    pub fn with_source(source: TimeSource) -> Self {
        AppendClock {
            source,
            state: Mutex::new(ClockState {
                floor: i64::MIN,
                in_flight: BTreeMap::new(),
            }),
            finished: Condvar::new(),
        }
    }

    /// The current time of the source (not a promise about appends).
    pub fn now(&self) -> i64 {
        (self.source)()
    }

    /// Records that the log already holds an append at time `t` (a
    /// recovered segment): later appends get `t` or later even if the
    /// system clock was set back while the server was down.
    pub fn observe(&self, t: i64) {
        let mut state = self.state.lock().expect("clock");
        state.floor = state.floor.max(t);
    }

    /// Takes the time for an append; the append counts as in flight until
    /// the ticket is dropped (after its batches are readable, or failed).
    pub fn begin(self: &Arc<Self>) -> AppendTicket {
        let now = self.now();
        let mut state = self.state.lock().expect("clock");
        let time = now.max(state.floor);
        state.floor = time;
        *state.in_flight.entry(time).or_insert(0) += 1;
        AppendTicket {
            clock: self.clone(),
            time,
        }
    }

    /// The latest time T such that every append at or before T is readable
    /// and no later append will get a time at or before T: one less than
    /// the oldest append in flight, and than the current time.
    pub fn complete_up_to(&self) -> i64 {
        let now = self.now();
        let mut state = self.state.lock().expect("clock");
        // Appends from now on get at least `now`, even if the source steps
        // back: what is promised complete stays complete.
        state.floor = state.floor.max(now);
        let oldest = state.in_flight.keys().next().copied().unwrap_or(i64::MAX);
        state.floor.min(oldest).saturating_sub(1)
    }

    /// Waits until [`complete_up_to`](Self::complete_up_to) reaches `t`, at
    /// most `timeout`; returns whether it did. The wait is short: the
    /// current millisecond ending, or an append in flight finishing.
    pub fn wait_complete(&self, t: i64, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.complete_up_to() >= t {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            // Woken by a finished append, else in a millisecond (time moves).
            let state = self.state.lock().expect("clock");
            let _ = self
                .finished
                .wait_timeout(state, left.min(Duration::from_millis(1)))
                .expect("clock");
        }
    }

    fn finish(&self, time: i64) {
        let mut state = self.state.lock().expect("clock");
        if let Some(n) = state.in_flight.get_mut(&time) {
            *n -= 1;
            if *n == 0 {
                state.in_flight.remove(&time);
            }
        }
        drop(state);
        self.finished.notify_all();
    }
}

/// An append in flight at [`time`](Self::time); finished when dropped.
#[derive(Debug)]
pub struct AppendTicket {
    clock: Arc<AppendClock>,
    time: i64,
}

impl AppendTicket {
    /// The append time this append's batches carry.
    pub fn time(&self) -> i64 {
        self.time
    }
}

impl Drop for AppendTicket {
    fn drop(&mut self) {
        self.clock.finish(self.time);
    }
}

/// A time source tests set by hand.
#[derive(Debug, Clone)]
pub struct ManualTime(Arc<AtomicI64>);

impl ManualTime {
    /// Starts at `t` ms.
    pub fn new(t: i64) -> Self {
        ManualTime(Arc::new(AtomicI64::new(t)))
    }

    /// The time now.
    pub fn get(&self) -> i64 {
        self.0.load(Ordering::Acquire)
    }

    /// Moves the time forward by `ms`.
    pub fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::AcqRel);
    }

    /// Sets the time (tests may also step it back).
    pub fn set(&self, t: i64) {
        self.0.store(t, Ordering::Release);
    }

    /// This time as a clock source.
    pub fn source(&self) -> TimeSource {
        let time = self.0.clone();
        Arc::new(move || time.load(Ordering::Acquire))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manual(t: i64) -> (ManualTime, Arc<AppendClock>) {
        let time = ManualTime::new(t);
        let clock = Arc::new(AppendClock::with_source(time.source()));
        (time, clock)
    }

    #[test]
    fn complete_up_to_trails_the_clock_by_one_millisecond_when_nothing_is_in_flight() {
        let (time, clock) = manual(1_000);
        assert_eq!(clock.complete_up_to(), 999);
        time.advance(5);
        assert_eq!(clock.complete_up_to(), 1_004);
    }

    #[test]
    fn an_append_in_flight_holds_completeness_before_its_time() {
        let (time, clock) = manual(1_000);
        let first = clock.begin();
        time.advance(10);
        let second = clock.begin();
        assert_eq!((first.time(), second.time()), (1_000, 1_010));
        assert_eq!(clock.complete_up_to(), 999);
        drop(first);
        assert_eq!(clock.complete_up_to(), 1_009);
        drop(second);
        assert_eq!(clock.complete_up_to(), 1_009);
        time.advance(1);
        assert_eq!(clock.complete_up_to(), 1_010);
    }

    #[test]
    fn times_never_go_back_when_the_source_does() {
        let (time, clock) = manual(1_000);
        drop(clock.begin());
        time.set(500);
        assert_eq!(clock.begin().time(), 1_000);
        assert_eq!(clock.complete_up_to(), 999);
        clock.observe(2_000);
        assert_eq!(clock.begin().time(), 2_000);
    }

    #[test]
    fn what_was_promised_complete_stays_complete() {
        let (time, clock) = manual(1_000);
        assert_eq!(clock.complete_up_to(), 999);
        time.set(900);
        // An append now must not land at or before 999.
        assert_eq!(clock.begin().time(), 1_000);
    }

    #[test]
    fn wait_complete_returns_when_an_append_in_flight_finishes() {
        let (time, clock) = manual(1_000);
        let ticket = clock.begin();
        time.advance(10);
        assert!(!clock.wait_complete(1_005, Duration::ZERO));
        let waiter = {
            let clock = clock.clone();
            std::thread::spawn(move || clock.wait_complete(1_005, Duration::from_secs(60)))
        };
        drop(ticket);
        assert!(waiter.join().unwrap());
    }
}
