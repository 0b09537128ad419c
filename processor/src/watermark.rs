//! Watermarks: how far event time has progressed.
//!
//! Per partition, the watermark is the largest event time seen minus the
//! bounded out-of-orderness. The processor's watermark is the minimum over
//! its partitions — except partitions that have been idle (no event) for
//! longer than the idle timeout, which stop holding it back until they
//! receive events again. Time is passed in (`now_ms`), never read here, so
//! tests control it.

/// One partition's progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartitionProgress {
    /// Largest event time seen, if any.
    max_event_time: Option<i64>,
    /// Processing time of the last event.
    last_event_at_ms: i64,
}

/// Tracks event-time progress across partitions.
#[derive(Debug, Clone)]
pub struct WatermarkTracker {
    out_of_orderness_ms: i64,
    idle_timeout_ms: i64,
    partitions: Vec<PartitionProgress>,
    /// The watermark never goes back, even if an idle partition resumes.
    emitted: i64,
}

impl WatermarkTracker {
    /// A tracker for `partitions` partitions, all starting at `now_ms`.
    pub fn new(
        partitions: usize,
        out_of_orderness_ms: i64,
        idle_timeout_ms: i64,
        now_ms: i64,
    ) -> Self {
        WatermarkTracker {
            out_of_orderness_ms,
            idle_timeout_ms,
            partitions: vec![
                PartitionProgress {
                    max_event_time: None,
                    last_event_at_ms: now_ms
                };
                partitions
            ],
            emitted: i64::MIN,
        }
    }

    /// Records an event of `partition` with `event_time`, seen at `now_ms`.
    pub fn observe(&mut self, partition: usize, event_time: i64, now_ms: i64) {
        let p = &mut self.partitions[partition];
        p.max_event_time = Some(p.max_event_time.map_or(event_time, |m| m.max(event_time)));
        p.last_event_at_ms = now_ms;
    }

    /// The watermark at `now_ms`: no event at or before it is expected any
    /// more (later ones are late). `i64::MIN` until every active partition
    /// has seen an event.
    pub fn watermark(&mut self, now_ms: i64) -> i64 {
        let is_active = |p: &PartitionProgress| {
            now_ms.saturating_sub(p.last_event_at_ms) < self.idle_timeout_ms
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_is_max_event_time_minus_disorder_min_over_partitions() {
        let mut t = WatermarkTracker::new(2, 10, 1000, 0);
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
        let mut t = WatermarkTracker::new(2, 0, 1000, 0);
        t.observe(0, 100, 0);
        t.observe(1, 10, 0);
        assert_eq!(t.watermark(500), 10);
        t.observe(0, 500, 1500);
        // Partition 1's last event was at 0: idle at 1500.
        assert_eq!(t.watermark(1500), 500);
        // It comes back with old data: the watermark does not regress.
        t.observe(1, 20, 1600);
        assert_eq!(t.watermark(1600), 500);
    }

    #[test]
    fn a_partition_with_no_events_ever_is_idle_after_the_timeout() {
        let mut t = WatermarkTracker::new(2, 5, 100, 0);
        t.observe(0, 1000, 50);
        assert_eq!(t.watermark(50), i64::MIN);
        assert_eq!(t.watermark(150), 995);
    }
}
