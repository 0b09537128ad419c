//! The coordinator's clock: milliseconds on a monotonic scale, injectable
//! so tests move time by hand instead of sleeping.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// Where the coordinator reads the time from. Only differences matter
/// (deadlines are `now + timeout`), so the scale's origin is arbitrary.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// Milliseconds since the first reading in this process (monotonic:
    /// wall-clock steps do not expire sessions).
    #[default]
    System,
    /// The value of the shared counter; tests advance it.
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The process's monotonic clock.
    pub fn system() -> Clock {
        Clock::System
    }

    /// A manual clock starting at `start_ms`, and the handle that moves it.
    pub fn manual(start_ms: u64) -> (Clock, Arc<AtomicU64>) {
        let now = Arc::new(AtomicU64::new(start_ms));
        (Clock::Manual(now.clone()), now)
    }

    /// The current time in milliseconds.
    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => {
                static ORIGIN: OnceLock<Instant> = OnceLock::new();
                let origin = ORIGIN.get_or_init(Instant::now);
                u64::try_from(origin.elapsed().as_millis()).unwrap_or(u64::MAX)
            }
            Clock::Manual(now) => now.load(Ordering::SeqCst),
        }
    }
}
