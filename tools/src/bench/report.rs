//! Results: the per-run figures, their median/min/max summary, the Markdown
//! table printed on stdout, the JSON written by `--json`, and the change
//! against a previous JSON (`--compare`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};

use super::stats::{LatencySummary, Spread};

/// One figure of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// What it is, e.g. `records/s` or `p99`.
    pub name: String,
    /// Its unit: `/s`, `MB/s`, `ms` or `count`.
    pub unit: String,
    /// Whether a larger value is an improvement.
    pub higher_is_better: bool,
    /// The value.
    pub value: f64,
}

impl Metric {
    /// A figure named `name` in `unit` (`/s`, `MB/s`, `ms`, `s` or `count`).
    pub fn new(name: &str, unit: &str, higher_is_better: bool, value: f64) -> Metric {
        Metric {
            name: name.into(),
            unit: unit.into(),
            higher_is_better,
            value,
        }
    }
}

/// What one run counted, before it is turned into figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Requests answered 2xx.
    pub ok_requests: u64,
    /// Records in those requests (produce) or answers (consume).
    pub records: u64,
    /// Bytes of request (produce) or response (consume) bodies of those requests.
    pub bytes: u64,
    /// Requests that finally failed (non-2xx or transport error).
    pub failed_requests: u64,
}

/// The figures of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Throughput and latency figures, in display order.
    pub metrics: Vec<Metric>,
    /// Latency summary of the successful requests.
    pub latency: LatencySummary,
    /// Length of the measured window, in seconds.
    pub elapsed_s: f64,
    /// Requests answered 2xx, records and body bytes in the window.
    pub ok_requests: u64,
    /// Records in the window.
    pub records: u64,
    /// Body bytes in the window.
    pub bytes: u64,
    /// Non-2xx answers by status code (including 503s that were retried).
    pub statuses: BTreeMap<String, u64>,
    /// Requests that failed in transport (connection refused, reset, ...).
    pub transport_errors: u64,
    /// Wall-clock start of the run (ms since the Unix epoch), to correlate
    /// with other activity on the machine.
    #[serde(default)]
    pub started_unix_ms: u64,
    /// Wall-clock end of the run (ms since the Unix epoch).
    #[serde(default)]
    pub finished_unix_ms: u64,
    /// Scenario-specific detail (e.g. the rebuild's progress samples);
    /// null for produce and consume.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

impl RunResult {
    /// Figures from what a run counted over `elapsed`.
    pub fn new(
        counts: Counts,
        elapsed: Duration,
        latency: LatencySummary,
        statuses: BTreeMap<String, u64>,
        transport_errors: u64,
    ) -> RunResult {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let metrics = vec![
            Metric::new("requests/s", "/s", true, counts.ok_requests as f64 / secs),
            Metric::new("records/s", "/s", true, counts.records as f64 / secs),
            Metric::new("MB/s", "MB/s", true, counts.bytes as f64 / secs / 1e6),
            Metric::new("p50", "ms", false, latency.p50_ms),
            Metric::new("p90", "ms", false, latency.p90_ms),
            Metric::new("p99", "ms", false, latency.p99_ms),
            Metric::new("p99.9", "ms", false, latency.p999_ms),
            Metric::new("max", "ms", false, latency.max_ms),
            Metric::new(
                "failed requests",
                "count",
                false,
                counts.failed_requests as f64,
            ),
        ];
        RunResult {
            metrics,
            latency,
            elapsed_s: elapsed.as_secs_f64(),
            ok_requests: counts.ok_requests,
            records: counts.records,
            bytes: counts.bytes,
            statuses,
            transport_errors,
            started_unix_ms: 0,
            finished_unix_ms: 0,
            details: serde_json::Value::Null,
        }
    }

    /// Sets the wall-clock span of the run.
    pub fn with_span(mut self, started_unix_ms: u64, finished_unix_ms: u64) -> RunResult {
        self.started_unix_ms = started_unix_ms;
        self.finished_unix_ms = finished_unix_ms;
        self
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl RunResult {
    /// Requests that finally failed in the window.
    pub fn failed_requests(&self) -> u64 {
        self.metrics
            .iter()
            .find(|m| m.name == "failed requests")
            .map_or(0, |m| m.value as u64)
    }
}

/// One figure over all runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryRow {
    /// Figure name (as in [`Metric::name`]).
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Whether a larger value is an improvement.
    pub higher_is_better: bool,
    /// Median, min and max over the runs.
    pub spread: Spread,
}

/// Everything a benchmark invocation measured: what `--json` writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `produce`, `consume`, `e2e`, `rebuild` or `replay`.
    pub scenario: String,
    /// One line describing the configuration.
    pub title: String,
    /// The command line.
    pub command: String,
    /// The scenario's parameters.
    pub params: serde_json::Value,
    /// Free-form facts shown under the table (topic layout, pool size, ...).
    pub notes: Vec<String>,
    /// Each run's figures.
    pub runs: Vec<RunResult>,
    /// Median/min/max of each figure over the runs.
    pub summary: Vec<SummaryRow>,
}

/// Median/min/max of every figure of the first run, over all runs.
pub fn summarize(runs: &[RunResult]) -> Vec<SummaryRow> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    first
        .metrics
        .iter()
        .filter_map(|m| {
            let values: Vec<f64> = runs
                .iter()
                .filter_map(|r| r.metrics.iter().find(|x| x.name == m.name))
                .map(|x| x.value)
                .collect();
            Some(SummaryRow {
                name: m.name.clone(),
                unit: m.unit.clone(),
                higher_is_better: m.higher_is_better,
                spread: Spread::of(&values)?,
            })
        })
        .collect()
}

/// `1234567.8` → `1,234,568`.
pub fn thousands(value: f64) -> String {
    let digits = format!("{:.0}", value.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if value < 0.0 && digits != "0" {
        out.insert(0, '-');
    }
    out
}

/// `1234567.8` → `1.23 M`, `45678` → `46 k`: for ranges in narrow columns.
pub fn compact(value: f64) -> String {
    if value >= 1e6 {
        format!("{:.2} M", value / 1e6)
    } else if value >= 1e3 {
        format!("{:.0} k", value / 1e3)
    } else {
        format!("{value:.0}")
    }
}

/// `min – max` of a spread, [`compact`]ed.
pub fn compact_range(s: super::stats::Spread) -> String {
    format!("{} – {}", compact(s.min), compact(s.max))
}

/// A value formatted for its unit.
pub fn format_value(unit: &str, value: f64) -> String {
    match unit {
        "/s" | "count" => thousands(value),
        "MB/s" => format!("{value:.1}"),
        "ms" if value < 10.0 => format!("{value:.3}"),
        "ms" => format!("{value:.1}"),
        "s" => format!("{value:.2}"),
        _ => format!("{value}"),
    }
}

fn label(row: &SummaryRow) -> String {
    match row.unit.as_str() {
        "ms" => format!("latency {} (ms)", row.name),
        "s" => format!("{} (s)", row.name),
        _ => row.name.clone(),
    }
}

/// The Markdown section of a report: title, command, table, notes.
pub fn markdown(report: &Report) -> String {
    let mut out = String::new();
    let runs = report.runs.len();
    let _ = writeln!(out, "### {}: {}\n", report.scenario, report.title);
    let _ = writeln!(out, "`{}`\n", report.command);
    if runs == 1 {
        out.push_str("| figure | value |\n|---|--:|\n");
    } else {
        let _ = writeln!(
            out,
            "| figure | median of {runs} runs | min | max |\n|---|--:|--:|--:|"
        );
    }
    for row in &report.summary {
        let v = |x| format_value(&row.unit, x);
        if runs == 1 {
            let _ = writeln!(out, "| {} | {} |", label(row), v(row.spread.median));
        } else {
            let s = row.spread;
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                label(row),
                v(s.median),
                v(s.min),
                v(s.max)
            );
        }
    }
    out.push('\n');
    for note in report.notes.iter().chain([&status_note(&report.runs)]) {
        let _ = writeln!(out, "- {note}");
    }
    out
}

/// A note on non-2xx answers and transport errors over all runs.
fn status_note(runs: &[RunResult]) -> String {
    let mut statuses: BTreeMap<&str, u64> = BTreeMap::new();
    for run in runs {
        for (status, n) in &run.statuses {
            *statuses.entry(status).or_default() += n;
        }
    }
    let errors: u64 = runs.iter().map(|r| r.transport_errors).sum();
    if statuses.is_empty() && errors == 0 {
        return "every request was answered 2xx".into();
    }
    let list: Vec<String> = statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
    format!(
        "non-2xx answers over all runs: {}; transport errors: {errors}",
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    )
}

/// Percent change from `previous` to `current`; `None` when `previous` is 0
/// and `current` is not.
pub fn percent_change(previous: f64, current: f64) -> Option<f64> {
    if previous == current {
        return Some(0.0);
    }
    if previous == 0.0 {
        return None;
    }
    Some((current - previous) / previous.abs() * 100.0)
}

/// `better`, `worse` or `same` (within ±1%) for a change of a figure.
pub fn verdict(change: Option<f64>, higher_is_better: bool) -> &'static str {
    match change {
        None => "n/a",
        Some(c) if c.abs() < 1.0 => "same",
        Some(c) if (c > 0.0) == higher_is_better => "better",
        Some(_) => "worse",
    }
}

/// A Markdown table of the change of every median from `previous` to
/// `current`; fails when they are not of the same scenario.
pub fn compare(previous: &Report, current: &Report) -> anyhow::Result<String> {
    if previous.scenario != current.scenario {
        bail!(
            "cannot compare a {} result with a {} result",
            current.scenario,
            previous.scenario
        );
    }
    let mut out = String::from("#### Change against the previous result\n\n");
    if previous.params != current.params {
        let _ = writeln!(
            out,
            "Parameters differ: previous `{}`, now `{}`.\n",
            previous.title, current.title
        );
    }
    out.push_str("| figure | previous | now | change | |\n|---|--:|--:|--:|---|\n");
    for row in &current.summary {
        let Some(prev) = previous.summary.iter().find(|p| p.name == row.name) else {
            continue;
        };
        let change = percent_change(prev.spread.median, row.spread.median);
        let shown = change.map_or("n/a".to_string(), |c| format!("{c:+.1}%"));
        let _ = writeln!(
            out,
            "| {} | {} | {} | {shown} | {} |",
            label(row),
            format_value(&row.unit, prev.spread.median),
            format_value(&row.unit, row.spread.median),
            verdict(change, row.higher_is_better)
        );
    }
    Ok(out)
}

/// Reads a report written by `--json`.
pub fn load(path: &Path) -> anyhow::Result<Report> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a kappa-bench result", path.display()))
}

/// Writes a report as pretty JSON.
pub fn save(report: &Report, path: &Path) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(records_per_s: f64, p99: f64) -> RunResult {
        let latency = LatencySummary {
            count: 10,
            mean_ms: 1.0,
            p50_ms: 1.0,
            p90_ms: 2.0,
            p99_ms: p99,
            p999_ms: p99,
            max_ms: p99,
        };
        let counts = Counts {
            ok_requests: 10,
            records: records_per_s as u64,
            bytes: 2_000_000,
            failed_requests: 0,
        };
        RunResult::new(counts, Duration::from_secs(1), latency, BTreeMap::new(), 0)
    }

    fn report(runs: Vec<RunResult>) -> Report {
        Report {
            scenario: "produce".into(),
            title: "t".into(),
            command: "kappa-bench produce".into(),
            params: serde_json::json!({"batch": 1000}),
            notes: vec![],
            summary: summarize(&runs),
            runs,
        }
    }

    fn median(r: &Report, name: &str) -> f64 {
        r.summary
            .iter()
            .find(|s| s.name == name)
            .unwrap()
            .spread
            .median
    }

    #[test]
    fn rates_divide_by_elapsed() {
        let counts = Counts {
            ok_requests: 50,
            records: 50_000,
            bytes: 6_000_000,
            failed_requests: 2,
        };
        let latency = LatencySummary::from_histogram(&super::super::stats::new_histogram());
        let r = RunResult::new(counts, Duration::from_secs(2), latency, BTreeMap::new(), 0);
        let get = |n: &str| r.metrics.iter().find(|m| m.name == n).unwrap().value;
        assert_eq!(get("requests/s"), 25.0);
        assert_eq!(get("records/s"), 25_000.0);
        assert_eq!(get("MB/s"), 3.0);
        assert_eq!(get("failed requests"), 2.0);
    }

    #[test]
    fn summary_takes_medians() {
        let r = report(vec![run(100.0, 5.0), run(300.0, 1.0), run(200.0, 9.0)]);
        assert_eq!(median(&r, "records/s"), 200.0);
        assert_eq!(median(&r, "p99"), 5.0);
        let row = r.summary.iter().find(|s| s.name == "records/s").unwrap();
        assert_eq!((row.spread.min, row.spread.max), (100.0, 300.0));
    }

    #[test]
    fn percent_change_and_verdicts() {
        assert_eq!(percent_change(200.0, 250.0), Some(25.0));
        assert_eq!(percent_change(200.0, 150.0), Some(-25.0));
        assert_eq!(percent_change(0.0, 5.0), None);
        assert_eq!(percent_change(0.0, 0.0), Some(0.0));
        assert_eq!(verdict(Some(25.0), true), "better");
        assert_eq!(verdict(Some(25.0), false), "worse");
        assert_eq!(verdict(Some(-25.0), false), "better");
        assert_eq!(verdict(Some(0.4), true), "same");
        assert_eq!(verdict(None, true), "n/a");
    }

    #[test]
    fn compare_reports_change_of_medians() {
        let previous = report(vec![run(1000.0, 4.0)]);
        let current = report(vec![run(1500.0, 2.0)]);
        let table = compare(&previous, &current).unwrap();
        assert!(
            table.contains("| records/s | 1,000 | 1,500 | +50.0% | better |"),
            "{table}"
        );
        assert!(
            table.contains("| latency p99 (ms) | 4.000 | 2.000 | -50.0% | better |"),
            "{table}"
        );
        assert!(!table.contains("Parameters differ"));
        let mut other = current.clone();
        other.scenario = "consume".into();
        assert!(compare(&previous, &other).is_err());
    }

    #[test]
    fn json_round_trip() {
        let r = report(vec![run(1000.0, 4.0), run(2000.0, 3.0)]);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
    }

    #[test]
    fn formatting() {
        assert_eq!(thousands(1_234_567.8), "1,234,568");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(0.2), "0");
        assert_eq!(thousands(-1234.0), "-1,234");
        assert_eq!(format_value("ms", 1.23456), "1.235");
        assert_eq!(format_value("ms", 123.456), "123.5");
        assert_eq!(format_value("MB/s", 88.88), "88.9");
        let md = markdown(&report(vec![run(1000.0, 4.0), run(2000.0, 3.0)]));
        assert!(md.contains("| records/s | 1,500 | 1,000 | 2,000 |"), "{md}");
        assert!(md.contains("every request was answered 2xx"), "{md}");
    }
}
