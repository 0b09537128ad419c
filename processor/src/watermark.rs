//! Watermarks: how far event time has progressed.
//!
//! Per partition, the watermark is the largest event time seen minus the
//! bounded out-of-orderness. The processor's watermark is the minimum over
//! its partitions — except partitions that have been idle (no event) for
//! longer than the idle timeout, which stop holding it back until they
//! receive events again.
//!
//! Idleness is judged on **log time** — the append times of the input, as
//! the runtime merges it (`crate::order`) — never on the processing
//! thread's clock, so a live run and a replay of the same log make the same
//! decisions. A partition that has not had an event since the version
//! started counts as silent since the version's first event. Time is passed
//! in, never read here.

use serde::{Deserialize, Serialize};

/// One partition's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
struct PartitionProgress {
    /// Largest event time seen, if any.
    max_event_time: Option<i64>,
    /// Log time (append time) of the last event, if any.
    last_event_at: Option<i64>,
}

/// What a commit keeps of a tracker beside the watermark itself, so a
/// restarted version judges idleness exactly as an uninterrupted one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrackerState {
    /// Log time of the version's first event.
    started: Option<i64>,
    /// Per partition, in partition order.
    partitions: Vec<PartitionProgress>,
}

/// Tracks event-time progress across partitions.
#[derive(Debug, Clone)]
pub struct WatermarkTracker {
    out_of_orderness_ms: i64,
    idle_timeout_ms: i64,
    partitions: Vec<PartitionProgress>,
    /// Log time of the first event observed: partitions without events
    /// are silent since then.
    started: Option<i64>,
    /// The watermark never goes back, even if an idle partition resumes.
    emitted: i64,
}

impl WatermarkTracker {
    /// A tracker for `partitions` partitions that have seen nothing.
    pub fn new(partitions: usize, out_of_orderness_ms: i64, idle_timeout_ms: i64) -> Self {
        WatermarkTracker {
            out_of_orderness_ms,
            idle_timeout_ms,
            partitions: vec![PartitionProgress::default(); partitions],
            started: None,
            emitted: i64::MIN,
        }
    }

    /// Records an event of `partition` with `event_time`, appended at log
    /// time `log_time`.
    pub fn observe(&mut self, partition: usize, event_time: i64, log_time: i64) {
        self.started.get_or_insert(log_time);
        let p = &mut self.partitions[partition];
        p.max_event_time = Some(p.max_event_time.map_or(event_time, |m| m.max(event_time)));
        p.last_event_at = Some(log_time);
    }

    /// The watermark at log time `log_time`: no event at or before it is
    /// expected any more (later ones are late). `i64::MIN` until every
    /// active partition has seen an event. For given events it never
    /// decreases as `log_time` grows (partitions only turn idle), which is
    /// why evaluating it at more or fewer log times gives the same answer.
    pub fn watermark(&mut self, log_time: i64) -> i64 {
        let started = self.started;
        let idle_timeout = self.idle_timeout_ms;
        let is_active = |p: &PartitionProgress| match p.last_event_at.or(started) {
            Some(t) => log_time.saturating_sub(t) < idle_timeout,
            None => true,
        };
        let (mut any_active, mut active_min, mut all_max) = (false, Some(i64::MAX), None::<i64>);
        for p in &self.partitions {
            all_max = match (all_max, p.max_event_time) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if is_active(p) {
                any_active = true;
                active_min = match (active_min, p.max_event_time) {
                    (Some(m), Some(t)) => Some(m.min(t)),
                    _ => None,
                };
            }
        }
        // Everything idle: the watermark follows the furthest partition.
        let candidate = if any_active { active_min } else { all_max };
        if let Some(max) = candidate {
            self.emitted = self
                .emitted
                .max(max.saturating_sub(self.out_of_orderness_ms));
        }
        self.emitted
    }

    /// The watermark most recently computed (without recomputing).
    pub fn current(&self) -> i64 {
        self.emitted
    }

    /// The watermark to start from after a restart (it is persisted with
    /// each commit).
    pub fn restore(&mut self, watermark: i64) {
        self.emitted = self.emitted.max(watermark);
    }

    /// The per-partition progress to persist with a commit.
    pub fn state(&self) -> TrackerState {
        TrackerState {
            started: self.started,
            partitions: self.partitions.clone(),
        }
    }

    /// Restores the per-partition progress of a commit (ignored if it was
    /// taken with another number of partitions).
    pub fn restore_state(&mut self, state: TrackerState) {
        if state.partitions.len() == self.partitions.len() {
            self.started = state.started;
            self.partitions = state.partitions;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_is_max_event_time_minus_disorder_min_over_partitions() {
        let mut t = WatermarkTracker::new(2, 10, 1000);
        t.observe(0, 100, 0);
        assert_eq!(t.watermark(0), i64::MIN, "partition 1 has seen nothing yet");
        t.observe(1, 50, 0);
        assert_eq!(t.watermark(0), 40);
        t.observe(1, 200, 1);
        assert_eq!(t.watermark(1), 90);
        // An older event does not move it back.
        t.observe(0, 20, 2);
        assert_eq!(t.watermark(2), 90);
    }

    #[test]
    fn an_idle_partition_stops_holding_the_watermark_back() {
        let mut t = WatermarkTracker::new(2, 0, 1000);
        t.observe(0, 100, 0);
        t.observe(1, 10, 0);
        assert_eq!(t.watermark(500), 10);
        t.observe(0, 500, 1500);
        // Partition 1's last event was appended at 0: idle at 1500.
        assert_eq!(t.watermark(1500), 500);
        // It comes back with old data: the watermark does not regress.
        t.observe(1, 20, 1600);
        assert_eq!(t.watermark(1600), 500);
    }

    #[test]
    fn a_partition_with_no_events_ever_is_idle_a_timeout_after_the_first_event() {
        let mut t = WatermarkTracker::new(2, 5, 100);
        assert_eq!(
            t.watermark(1_000_000),
            i64::MIN,
            "nothing seen, nothing idle"
        );
        t.observe(0, 1000, 50);
        assert_eq!(t.watermark(50), i64::MIN);
        assert_eq!(t.watermark(149), i64::MIN);
        assert_eq!(t.watermark(150), 995);
    }

    #[test]
    fn a_restored_state_judges_idleness_as_before() {
        let mut t = WatermarkTracker::new(2, 0, 100);
        t.observe(0, 1000, 50);
        t.observe(1, 10, 60);
        let state = t.state();
        let mut restored = WatermarkTracker::new(2, 0, 100);
        restored.restore_state(state);
        restored.restore(t.current());
        t.observe(0, 2000, 170);
        restored.observe(0, 2000, 170);
        assert_eq!(t.watermark(170), 2000, "partition 1 idle since 60");
        assert_eq!(restored.watermark(170), 2000);
    }
}
