//! The metrics history ring: the last [`CAPACITY`] samples (one a second:
//! 15 minutes) of per-topic throughput and per-view processing rate and
//! lag, for the console's charts.
//!
//! The sampler reads cumulative [`Counters`] (records appended, bytes on
//! disk, offsets committed by groups, records processed by each view
//! version) and hands them to [`Ring::record`] with the time it read them;
//! the ring turns two consecutive readings into rates. Time is always
//! passed in, never read here, so tests drive the ring with any clock.
//!
//! Invariants: samples are in time order, at most `capacity` of them (the
//! oldest is dropped first); a rate is `None` where it cannot be known —
//! the first reading of a series, a counter that went backwards (a topic
//! deleted and created again, a view replaced), or no time between two
//! readings. Bytes on disk shrink when retention deletes a segment: that
//! second's byte rate is 0, not negative.

use std::collections::{BTreeMap, VecDeque};

pub use kappa_wire::admin::{HistoryOut, TopicSeries, ViewSeries};

/// Samples kept: 15 minutes at one a second.
pub const CAPACITY: usize = 900;
/// Time between two samples, ms.
pub const INTERVAL_MS: u64 = 1_000;
/// Most topics, and most views, one sample holds (names in order; the rest
/// are left out and the answer says `truncated`).
pub const MAX_SERIES: usize = 500;

/// Cumulative counters of one topic.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TopicCounters {
    /// Sum over partitions of the end offset: records ever appended.
    pub appended: u64,
    /// Bytes of all segments.
    pub bytes: u64,
    /// Sum over consumer groups and partitions of the committed offset.
    pub committed: u64,
}

/// Counters and state of one view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewCounters {
    /// Records processed since this server started it, per running version
    /// (served and building).
    pub processed: BTreeMap<u64, u64>,
    /// Input records the served version has yet to process.
    pub lag: u64,
    /// Input records the version being built has yet to process.
    pub build_lag: Option<u64>,
    /// The view's status (`running`, `catching_up`, `not_keeping_up`, …).
    pub status: String,
}

/// One reading of every topic and view.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counters {
    /// By topic name.
    pub topics: BTreeMap<String, TopicCounters>,
    /// By view name.
    pub views: BTreeMap<String, ViewCounters>,
}

/// A topic's rates at one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
struct TopicPoint {
    records_per_second: Option<f64>,
    bytes_per_second: Option<f64>,
    consumed_per_second: Option<f64>,
}

/// A view's rate and lag at one sample.
#[derive(Debug, Clone, PartialEq)]
struct ViewPoint {
    records_per_second: Option<f64>,
    lag: u64,
    build_lag: Option<u64>,
    status: String,
}

/// One sample: rates since the previous reading.
#[derive(Debug, Clone)]
struct Sample {
    at_ms: i64,
    topics: BTreeMap<String, TopicPoint>,
    views: BTreeMap<String, ViewPoint>,
}

/// The bounded ring of samples and the last reading.
#[derive(Debug)]
pub struct Ring {
    capacity: usize,
    samples: VecDeque<Sample>,
    last: Option<(i64, Counters)>,
    truncated: bool,
}

/// `(new - old) / seconds`, or `None` when the counter went backwards or
/// no time passed.
fn rate(old: u64, new: u64, seconds: f64) -> Option<f64> {
    (new >= old && seconds > 0.0).then(|| (new - old) as f64 / seconds)
}

impl Ring {
    /// An empty ring of at most `capacity` samples (at least 1).
    pub fn new(capacity: usize) -> Ring {
        Ring {
            capacity: capacity.max(1),
            samples: VecDeque::with_capacity(capacity.clamp(1, CAPACITY)),
            last: None,
            truncated: false,
        }
    }

    /// Samples held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.samples.len()
    }

    /// Records the counters read at `at_ms` as a sample of rates since the
    /// previous reading. A reading not later than the previous one is
    /// ignored (the sampler's clock only moves forward; this keeps the
    /// samples in time order whatever a caller passes).
    pub fn record(&mut self, at_ms: i64, mut counters: Counters) {
        let previous = self.last.take();
        if let Some((then, _)) = &previous {
            if at_ms <= *then {
                self.last = previous;
                return;
            }
        }
        self.truncated = counters.topics.len() > MAX_SERIES || counters.views.len() > MAX_SERIES;
        counters.topics = counters.topics.into_iter().take(MAX_SERIES).collect();
        counters.views = counters.views.into_iter().take(MAX_SERIES).collect();
        let (seconds, old) = match &previous {
            Some((then, old)) => ((at_ms - then) as f64 / 1000.0, Some(old)),
            None => (0.0, None),
        };
        let topics = counters
            .topics
            .iter()
            .map(|(name, new)| {
                let old = old.and_then(|o| o.topics.get(name));
                let point = TopicPoint {
                    records_per_second: old.and_then(|o| rate(o.appended, new.appended, seconds)),
                    bytes_per_second: old
                        .and_then(|o| rate(o.bytes.min(new.bytes), new.bytes, seconds)),
                    consumed_per_second: old
                        .and_then(|o| rate(o.committed, new.committed, seconds)),
                };
                (name.clone(), point)
            })
            .collect();
        let views = counters
            .views
            .iter()
            .map(|(name, new)| {
                let old = old.and_then(|o| o.views.get(name));
                let point = ViewPoint {
                    records_per_second: old.and_then(|o| view_rate(o, new, seconds)),
                    lag: new.lag,
                    build_lag: new.build_lag,
                    status: new.status.clone(),
                };
                (name.clone(), point)
            })
            .collect();
        if self.samples.len() == self.capacity {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            at_ms,
            topics,
            views,
        });
        self.last = Some((at_ms, counters));
    }

    /// The samples taken after `since_ms` (all of them when `None`) as
    /// series, oldest first: one array per measure, with `null` where a
    /// topic or view did not exist or its rate is unknown.
    pub fn series(&self, since_ms: Option<i64>) -> HistoryOut {
        let first = since_ms.map_or(0, |since| {
            self.samples.partition_point(|s| s.at_ms <= since)
        });
        let samples = self.samples.range(first..);
        let times_ms: Vec<i64> = samples.clone().map(|s| s.at_ms).collect();
        let n = times_ms.len();
        let mut topics: BTreeMap<&str, TopicSeries> = BTreeMap::new();
        let mut views: BTreeMap<&str, ViewSeries> = BTreeMap::new();
        for (i, sample) in samples.enumerate() {
            for (name, p) in &sample.topics {
                let s = topics
                    .entry(name)
                    .or_insert_with(|| empty_topic_series(name, n));
                s.records_per_second[i] = p.records_per_second;
                s.bytes_per_second[i] = p.bytes_per_second;
                s.consumed_per_second[i] = p.consumed_per_second;
            }
            for (name, p) in &sample.views {
                let s = views
                    .entry(name)
                    .or_insert_with(|| empty_view_series(name, n));
                s.records_per_second[i] = p.records_per_second;
                s.lag[i] = Some(p.lag);
                s.build_lag[i] = p.build_lag;
                s.status[i] = Some(p.status.clone());
            }
        }
        HistoryOut {
            interval_ms: INTERVAL_MS,
            capacity: self.capacity,
            truncated: self.truncated,
            times_ms,
            topics: topics.into_values().collect(),
            views: views.into_values().collect(),
        }
    }
}

/// Records per second a view's versions processed: the sum over versions
/// running in both readings (a version that started or stopped in between
/// counts from its next reading on).
fn view_rate(old: &ViewCounters, new: &ViewCounters, seconds: f64) -> Option<f64> {
    let mut total = None;
    for (version, now) in &new.processed {
        if let Some(then) = old.processed.get(version) {
            if let Some(r) = rate(*then, *now, seconds) {
                total = Some(total.unwrap_or(0.0) + r);
            }
        }
    }
    total
}

/// A topic's series of `n` unknown samples.
fn empty_topic_series(name: &str, n: usize) -> TopicSeries {
    TopicSeries {
        name: name.to_string(),
        records_per_second: vec![None; n],
        bytes_per_second: vec![None; n],
        consumed_per_second: vec![None; n],
    }
}

/// A view's series of `n` unknown samples.
fn empty_view_series(name: &str, n: usize) -> ViewSeries {
    ViewSeries {
        name: name.to_string(),
        records_per_second: vec![None; n],
        lag: vec![None; n],
        build_lag: vec![None; n],
        status: vec![None; n],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(appended: u64, bytes: u64, committed: u64) -> TopicCounters {
        TopicCounters {
            appended,
            bytes,
            committed,
        }
    }

    fn topics(list: &[(&str, TopicCounters)]) -> Counters {
        Counters {
            topics: list.iter().map(|(n, c)| (n.to_string(), *c)).collect(),
            views: BTreeMap::new(),
        }
    }

    fn view(versions: &[(u64, u64)], lag: u64, status: &str) -> ViewCounters {
        ViewCounters {
            processed: versions.iter().copied().collect(),
            lag,
            build_lag: None,
            status: status.to_string(),
        }
    }

    #[test]
    fn rates_come_from_two_readings_and_the_first_is_unknown() {
        let mut ring = Ring::new(CAPACITY);
        ring.record(10_000, topics(&[("a", topic(100, 5_000, 0))]));
        ring.record(11_000, topics(&[("a", topic(150, 6_000, 20))]));
        ring.record(13_000, topics(&[("a", topic(250, 6_000, 20))]));
        let out = ring.series(None);
        assert_eq!(out.times_ms, vec![10_000, 11_000, 13_000]);
        let a = &out.topics[0];
        assert_eq!(a.records_per_second, vec![None, Some(50.0), Some(50.0)]);
        assert_eq!(a.bytes_per_second, vec![None, Some(1_000.0), Some(0.0)]);
        assert_eq!(a.consumed_per_second, vec![None, Some(20.0), Some(0.0)]);
    }

    #[test]
    fn the_ring_keeps_the_newest_capacity_samples() {
        let mut ring = Ring::new(3);
        for s in 0..10u64 {
            ring.record(s as i64 * 1_000, topics(&[("a", topic(s * 10, 0, 0))]));
        }
        assert_eq!(ring.len(), 3);
        let out = ring.series(None);
        assert_eq!(out.times_ms, vec![7_000, 8_000, 9_000]);
        assert_eq!(out.topics[0].records_per_second, vec![Some(10.0); 3]);
        assert_eq!(out.capacity, 3);
    }

    #[test]
    fn a_counter_that_went_back_or_a_new_series_has_no_rate() {
        let mut ring = Ring::new(CAPACITY);
        ring.record(0, topics(&[("a", topic(100, 10, 0))]));
        // "a" deleted and created again; "b" is new.
        ring.record(
            1_000,
            topics(&[("a", topic(3, 5, 0)), ("b", topic(7, 0, 0))]),
        );
        ring.record(
            2_000,
            topics(&[("a", topic(5, 5, 0)), ("b", topic(9, 0, 0))]),
        );
        let out = ring.series(None);
        assert_eq!(
            out.topics[0].records_per_second,
            vec![None, None, Some(2.0)]
        );
        // Retention shrank "a" on disk: a byte rate of 0, not unknown.
        assert_eq!(
            out.topics[0].bytes_per_second,
            vec![None, Some(0.0), Some(0.0)]
        );
        assert_eq!(out.topics[1].name, "b");
        assert_eq!(
            out.topics[1].records_per_second,
            vec![None, None, Some(2.0)]
        );
    }

    #[test]
    fn a_reading_not_later_than_the_last_is_ignored() {
        let mut ring = Ring::new(CAPACITY);
        ring.record(5_000, topics(&[("a", topic(0, 0, 0))]));
        ring.record(5_000, topics(&[("a", topic(10, 0, 0))]));
        ring.record(4_000, topics(&[("a", topic(10, 0, 0))]));
        ring.record(6_000, topics(&[("a", topic(10, 0, 0))]));
        let out = ring.series(None);
        assert_eq!(out.times_ms, vec![5_000, 6_000]);
        assert_eq!(out.topics[0].records_per_second, vec![None, Some(10.0)]);
    }

    #[test]
    fn a_view_rate_sums_the_versions_running_in_both_readings() {
        let mut ring = Ring::new(CAPACITY);
        let mut c = Counters::default();
        c.views
            .insert("v".into(), view(&[(1, 1_000)], 50, "running"));
        ring.record(0, c.clone());
        // Version 2 starts building: it counts from its next reading on.
        let mut building = view(&[(1, 1_100), (2, 500)], 0, "building");
        building.build_lag = Some(9_000);
        c.views.insert("v".into(), building);
        ring.record(1_000, c.clone());
        c.views
            .insert("v".into(), view(&[(1, 1_150), (2, 2_500)], 0, "building"));
        ring.record(2_000, c.clone());
        // Swapped: version 2 alone, still counted.
        c.views
            .insert("v".into(), view(&[(2, 2_600)], 0, "running"));
        ring.record(3_000, c);
        let v = &ring.series(None).views[0];
        assert_eq!(
            v.records_per_second,
            vec![None, Some(100.0), Some(2_050.0), Some(100.0)]
        );
        assert_eq!(v.lag, vec![Some(50), Some(0), Some(0), Some(0)]);
        assert_eq!(v.build_lag, vec![None, Some(9_000), None, None]);
        assert_eq!(
            v.status,
            ["running", "building", "building", "running"]
                .map(|s| Some(s.to_string()))
                .to_vec()
        );
    }

    #[test]
    fn series_since_a_time_hold_only_the_later_samples() {
        let mut ring = Ring::new(CAPACITY);
        for s in 0..5u64 {
            ring.record(s as i64 * 1_000, topics(&[("a", topic(s * 10, 0, 0))]));
        }
        let out = ring.series(Some(2_000));
        assert_eq!(out.times_ms, vec![3_000, 4_000]);
        assert_eq!(out.topics[0].records_per_second, vec![Some(10.0); 2]);
        // Between samples, and before the oldest: from the next one on.
        assert_eq!(ring.series(Some(2_500)).times_ms, vec![3_000, 4_000]);
        assert_eq!(ring.series(Some(-1)).times_ms.len(), 5);
        // Nothing newer: no samples and no series.
        let none = ring.series(Some(4_000));
        assert!(none.times_ms.is_empty() && none.topics.is_empty());
    }

    #[test]
    fn a_series_missing_from_a_sample_is_null_there() {
        let mut ring = Ring::new(CAPACITY);
        ring.record(0, topics(&[("a", topic(0, 0, 0))]));
        ring.record(1_000, topics(&[("b", topic(0, 0, 0))]));
        let out = ring.series(None);
        assert_eq!(out.topics.len(), 2);
        assert_eq!(out.topics[0].name, "a");
        assert_eq!(out.topics[0].records_per_second.len(), 2);
        assert_eq!(out.topics[1].records_per_second, vec![None, None]);
    }

    #[test]
    fn more_series_than_the_limit_are_cut_and_said_so() {
        let mut ring = Ring::new(CAPACITY);
        let many: Vec<(String, TopicCounters)> = (0..MAX_SERIES + 3)
            .map(|i| (format!("t{i:04}"), topic(0, 0, 0)))
            .collect();
        let counters = Counters {
            topics: many.into_iter().collect(),
            views: BTreeMap::new(),
        };
        ring.record(0, counters);
        let out = ring.series(None);
        assert!(out.truncated);
        assert_eq!(out.topics.len(), MAX_SERIES);
    }
}
