//! Metrics history for the console: a bounded in-memory ring of one sample
//! a second over the last 15 minutes (`ring`), filled by a tokio task that
//! reads the log's and the views' counters (`sampler`), and read by
//! `GET /v1/history`. Nothing of it is persisted: a restarted server starts
//! with an empty history.

pub mod ring;
pub mod sampler;

use std::sync::{Arc, Mutex};

pub use ring::{HistoryOut, Ring, CAPACITY};

/// The ring shared by the sampler and the route.
#[derive(Debug, Clone)]
pub struct History {
    ring: Arc<Mutex<Ring>>,
}

impl Default for History {
    fn default() -> History {
        History::new(CAPACITY)
    }
}

impl History {
    /// An empty history of at most `capacity` samples.
    pub fn new(capacity: usize) -> History {
        History {
            ring: Arc::new(Mutex::new(Ring::new(capacity))),
        }
    }

    /// The samples taken after `since_ms` (all when `None`) as series.
    pub fn series(&self, since_ms: Option<i64>) -> HistoryOut {
        self.ring
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .series(since_ms)
    }

    /// Starts sampling the server of `state` every second, until shutdown.
    pub fn spawn_sampler(&self, state: crate::node::AppState) -> tokio::task::JoinHandle<()> {
        sampler::spawn(state, self.ring.clone())
    }
}
