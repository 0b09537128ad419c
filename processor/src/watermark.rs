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
    /// The candidate (the furthest event time the partitions agree on)
    /// last computed and the log time it was computed at, while it still
    /// holds: an event that moves no minimum leaves it as it is, so most
    /// events cost no pass over the partitions. Unused with one partition
    /// (the candidate is its largest event time).
    memo: Option<Memo>,
}

/// See [`WatermarkTracker::memo`].
#[derive(Debug, Clone, Copy)]
struct Memo {
    log_time: i64,
    candidate: Option<i64>,
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
            memo: None,
        }
    }

    /// Records an event of `partition` with `event_time`, appended at log
    /// time `log_time`.
    pub fn observe(&mut self, partition: usize, event_time: i64, log_time: i64) {
        let started = self.started;
        self.started.get_or_insert(log_time);
        let p = &mut self.partitions[partition];
        let before = *p;
        p.max_event_time = Some(
            before
                .max_event_time
                .map_or(event_time, |m| m.max(event_time)),
        );
        p.last_event_at = Some(log_time);
        let after = *p;
        if let Some(memo) = self.memo {
            // At the memo's log time, the candidate still holds if this
            // partition is as active as before and its largest event time
            // either stayed or rose from above the (active) minimum.
            let active = |p: &PartitionProgress, started| {
                is_active(p, started, memo.log_time, self.idle_timeout_ms)
            };
            let was_active = active(&before, started);
            // (Before the first event no partition has a largest event
            // time: the first always changes one.)
            let holds = was_active == active(&after, self.started)
                && (before.max_event_time == after.max_event_time
                    || (was_active
                        && matches!(
                            (before.max_event_time, memo.candidate),
                            (Some(m), Some(c)) if m > c
                        )));
            if !holds {
                self.memo = None;
            }
        }
    }

    /// The watermark at log time `log_time`: no event at or before it is
    /// expected any more (later ones are late). `i64::MIN` until every
    /// active partition has seen an event. For given events it never
    /// decreases as `log_time` grows (partitions only turn idle), which is
    /// why evaluating it at more or fewer log times gives the same answer.
    pub fn watermark(&mut self, log_time: i64) -> i64 {
        let candidate = match (self.memo, &self.partitions[..]) {
            // Active or idle, one partition's largest event time.
            (_, [only]) => only.max_event_time,
            (Some(memo), _) if memo.log_time == log_time => memo.candidate,
            _ => {
                let candidate = self.candidate(log_time);
                self.memo = Some(Memo {
                    log_time,
                    candidate,
                });
                candidate
            }
        };
        if let Some(max) = candidate {
            self.emitted = self
                .emitted
                .max(max.saturating_sub(self.out_of_orderness_ms));
        }
        self.emitted
    }

    /// The furthest event time the partitions agree on at `log_time`: the
    /// smallest largest event time of the active partitions (`None` while
    /// one has none), or with every partition idle, the largest.
    fn candidate(&self, log_time: i64) -> Option<i64> {
        let (mut any_active, mut active_min, mut all_max) = (false, Some(i64::MAX), None::<i64>);
        for p in &self.partitions {
            all_max = match (all_max, p.max_event_time) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            if is_active(p, self.started, log_time, self.idle_timeout_ms) {
                any_active = true;
                active_min = match (active_min, p.max_event_time) {
                    (Some(m), Some(t)) => Some(m.min(t)),
                    _ => None,
                };
            }
        }
        // Everything idle: the watermark follows the furthest partition.
        if any_active {
            active_min
        } else {
            all_max
        }
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
        self.memo = None;
        if state.partitions.len() == self.partitions.len() {
            self.started = state.started;
            self.partitions = state.partitions;
        }
    }
}

/// True if partition `p` holds the watermark back at `log_time`: it had
/// an event (or, without one, the version its first) within the idle
/// timeout.
fn is_active(
    p: &PartitionProgress,
    started: Option<i64>,
    log_time: i64,
    idle_timeout: i64,
) -> bool {
    match p.last_event_at.or(started) {
        Some(t) => log_time.saturating_sub(t) < idle_timeout,
        None => true,
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

    proptest::proptest! {
        /// The memo and the one-partition shortcut change nothing: after
        /// any events and log times, the candidate and the watermark are
        /// what a full pass over the partitions gives (the runtime's
        /// calls: an event at its append time, then the watermark at the
        /// log time; or log time moving on alone).
        #[test]
        fn the_memo_gives_what_a_full_pass_gives(
            partitions in 1usize..5,
            out_of_orderness in 0i64..30,
            idle_timeout in 0i64..150,
            steps in proptest::collection::vec(
                (proptest::bool::weighted(0.85), 0usize..4, 0i64..400, 0i64..40),
                1..300,
            ),
        ) {
            let mut tracker = WatermarkTracker::new(partitions, out_of_orderness, idle_timeout);
            // Events only: its candidate is always computed by a full pass.
            let mut full = tracker.clone();
            let (mut log_time, mut expected) = (0i64, i64::MIN);
            for (is_event, partition, event_time, later) in steps {
                log_time += later;
                if is_event {
                    let partition = partition % partitions;
                    tracker.observe(partition, event_time, log_time);
                    full.observe(partition, event_time, log_time);
                }
                let candidate = full.candidate(log_time);
                if let Some(max) = candidate {
                    expected = expected.max(max.saturating_sub(out_of_orderness));
                }
                proptest::prop_assert_eq!(tracker.watermark(log_time), expected);
                if partitions > 1 {
                    proptest::prop_assert_eq!(tracker.memo.map(|m| m.candidate), Some(candidate));
                }
            }
        }
    }
}
