//! The sampler: once a second it reads the counters of every topic (end
//! offsets, bytes, groups' committed offsets) and view (records processed
//! per running version, lag, status) and records them in the ring, until
//! shutdown starts. Reading blocks (the views' state sizes, the offsets
//! store), so it runs on the blocking pool.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kappa_log::Log;

use super::ring::{Counters, Ring, TopicCounters, ViewCounters, INTERVAL_MS};
use crate::views::ViewManager;
use crate::AppState;

/// Reads the counters of every topic and view now.
pub fn read_counters(log: &Log, views: &ViewManager) -> Counters {
    let mut topics: BTreeMap<String, TopicCounters> = log
        .topics()
        .iter()
        .map(|t| {
            let d = t.describe();
            let counters = TopicCounters {
                appended: d.partitions.iter().map(|p| p.end_offset).sum(),
                bytes: d.partitions.iter().map(|p| p.bytes).sum(),
                committed: 0,
            };
            (t.name().to_string(), counters)
        })
        .collect();
    for group in log.groups() {
        for c in log.committed(&group) {
            if let Some(t) = topics.get_mut(&c.topic) {
                t.committed += c.offset;
            }
        }
    }
    let views = views
        .list()
        .into_iter()
        .map(|v| {
            let served = &v.served_version;
            let mut processed = BTreeMap::new();
            if served.running {
                processed.insert(served.version, served.processed);
            }
            let building = v.building_version.as_ref().map(|b| &b.version);
            if let Some(b) = building.filter(|b| b.running) {
                processed.insert(b.version, b.processed);
            }
            let counters = ViewCounters {
                processed,
                lag: served.lag,
                build_lag: building.map(|b| b.lag),
                status: v.status.to_string(),
            };
            (v.name, counters)
        })
        .collect();
    Counters { topics, views }
}

/// Milliseconds since the Unix epoch, by the system clock.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Samples into `ring` every [`INTERVAL_MS`] until shutdown starts.
pub fn spawn(state: AppState, ring: Arc<Mutex<Ring>>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(INTERVAL_MS));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = state.shutdown_started() => return,
            }
            let (log, views) = (state.log.clone(), state.views.clone());
            let Ok(counters) =
                tokio::task::spawn_blocking(move || read_counters(&log, &views)).await
            else {
                tracing::warn!("reading the counters for the history failed");
                continue;
            };
            let at_ms = now_ms();
            ring.lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(at_ms, counters);
        }
    })
}
