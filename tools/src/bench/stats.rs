//! Latency histograms (HDR, microseconds, 3 significant digits) and their
//! summaries, and the median / min / max of a figure over several runs.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Highest latency the histograms hold: one hour, in microseconds. Longer
/// ones are recorded as this value.
const MAX_LATENCY_US: u64 = 3_600_000_000;

/// An empty latency histogram in microseconds.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).expect("valid histogram bounds")
}

/// Records one latency (clamped to the histogram's range).
pub fn record(histogram: &mut Histogram<u64>, latency: Duration) {
    let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    histogram.saturating_record(us.clamp(1, MAX_LATENCY_US));
}

/// Latency percentiles of one run, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of latencies recorded.
    pub count: u64,
    /// Mean.
    pub mean_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// 99.9th percentile.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
}

impl LatencySummary {
    /// Summarises a histogram of microseconds (all zeros when it is empty).
    pub fn from_histogram(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary {
                count: 0,
                mean_ms: 0.0,
                p50_ms: 0.0,
                p90_ms: 0.0,
                p99_ms: 0.0,
                p999_ms: 0.0,
                max_ms: 0.0,
            };
        }
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: h.len(),
            mean_ms: h.mean() / 1000.0,
            p50_ms: ms(h.value_at_quantile(0.50)),
            p90_ms: ms(h.value_at_quantile(0.90)),
            p99_ms: ms(h.value_at_quantile(0.99)),
            p999_ms: ms(h.value_at_quantile(0.999)),
            max_ms: ms(h.max()),
        }
    }
}

/// Median, minimum and maximum of one figure over the runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Median (the mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(values: &[f64]) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: sorted[0],
            max: sorted[n - 1],
        })
    }

    /// The spread of the runs' values; panics without any (a benchmark
    /// reports at least one run).
    pub fn of_runs(values: impl IntoIterator<Item = f64>) -> Spread {
        let values: Vec<f64> = values.into_iter().collect();
        Spread::of(&values).expect("at least one run")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_latencies() {
        let mut h = new_histogram();
        // 1..=1000 ms, one each.
        for ms in 1..=1000u64 {
            record(&mut h, Duration::from_millis(ms));
        }
        let s = LatencySummary::from_histogram(&h);
        assert_eq!(s.count, 1000);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 0.001;
        assert!(close(s.p50_ms, 500.0), "{s:?}");
        assert!(close(s.p90_ms, 900.0), "{s:?}");
        assert!(close(s.p99_ms, 990.0), "{s:?}");
        assert!(close(s.p999_ms, 999.0), "{s:?}");
        assert!(close(s.max_ms, 1000.0), "{s:?}");
        assert!(close(s.mean_ms, 500.5), "{s:?}");
    }

    #[test]
    fn summary_of_nothing_is_zero_and_extremes_are_clamped() {
        let mut h = new_histogram();
        assert_eq!(LatencySummary::from_histogram(&h).count, 0);
        record(&mut h, Duration::ZERO);
        record(&mut h, Duration::from_secs(10 * 3600));
        let s = LatencySummary::from_histogram(&h);
        assert_eq!(s.count, 2);
        assert!(s.p50_ms <= 0.002, "{s:?}");
        assert!((s.max_ms - 3_600_000.0).abs() < 3_600.0, "{s:?}");
    }

    #[test]
    fn spread_median_min_max() {
        assert_eq!(Spread::of(&[]), None);
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
        let s = Spread::of(&[4.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 10.0));
        assert_eq!(Spread::of(&[5.0]).unwrap().median, 5.0);
    }
}
