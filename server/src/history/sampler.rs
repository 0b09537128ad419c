//! The sampler: once a second it reads the counters of every topic (end
//! offsets, bytes, groups' committed offsets) and view (records processed
//! per running version, lag, status) and records them in the ring, until
//! shutdown starts. Reading blocks (the views' state sizes, the offsets
//! store), so it runs on the blocking pool.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kappa_log::Log;

use super::ring::{Counters, Ring, TopicCounters, ViewCounters, INTERVAL_MS};
use crate::node::AppState;
use crate::views::ViewManager;

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

/// Milliseconds since the Unix epoch, by the wall clock.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Samples into `ring` every [`INTERVAL_MS`] until shutdown starts. Sample
/// times are the wall clock at the start plus the monotonic time since, so
/// they always increase (a wall clock stepped back does not stop the
/// history) and rates divide by the time that really passed.
pub fn spawn(state: AppState, ring: Arc<Mutex<Ring>>) -> tokio::task::JoinHandle<()> {
    let (origin_ms, origin) = (now_ms(), Instant::now());
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
            let at_ms = origin_ms + origin.elapsed().as_millis() as i64;
            ring.lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(at_ms, counters);
        }
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use kappa_log::{NewRecord, ProduceRecord, TopicConfig};

    use super::*;
    use crate::ServerConfig;

    #[test]
    fn counters_are_the_logs_end_offsets_bytes_and_committed_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig {
            data_dir: dir.path().to_path_buf(),
            ..ServerConfig::default()
        };
        let log = Arc::new(Log::open(config.log_config().unwrap()).unwrap());
        let views = ViewManager::open(log.clone(), config.manager_config()).unwrap();
        let config = TopicConfig {
            partitions: 2,
            ..TopicConfig::default()
        };
        let topic = log.create_topic("clicks", config).unwrap();
        log.create_topic("idle", TopicConfig::default()).unwrap();
        let records = (0..5u32)
            .map(|i| ProduceRecord {
                partition: Some(i % 2),
                record: NewRecord {
                    key: None,
                    value: Bytes::from_static(b"{}"),
                    timestamp: None,
                    headers: Vec::new(),
                },
            })
            .collect();
        let io = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        io.block_on(topic.produce(records, None)).unwrap();
        log.commit_offsets("a", "clicks", &[(0, 2), (1, 1)])
            .unwrap();
        log.commit_offsets("b", "clicks", &[(0, 3)]).unwrap();

        let counters = read_counters(&log, &views);
        let clicks = counters.topics["clicks"];
        assert_eq!((clicks.appended, clicks.committed), (5, 6));
        assert!(clicks.bytes > 0);
        assert_eq!(counters.topics["idle"], TopicCounters::default());
        assert!(counters.views.is_empty());
        views.close();
        log.close();
    }
}
