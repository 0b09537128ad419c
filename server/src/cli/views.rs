//! `kappa views`: list views (status, served and building version, build
//! progress, lag) or describe one (SQL, versions, per-partition progress,
//! watermark, state size, failure). The description is also how the SQL
//! shell prints `DESCRIBE` of a view.

use std::io::Write;

use indicatif::HumanBytes;
use kappa_wire::{BuildOut, BuildProgressOut, VersionOut, ViewOut, ViewsOut};
use serde_json::Value;

use super::http::{self, segment, Client};
use super::table::{Align, Table};

/// Arguments of `kappa views`.
#[derive(Debug, clap::Args)]
pub struct ViewsArgs {
    /// Describe this view; without it, list every view.
    pub name: Option<String>,
    /// Print the server's JSON answer instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The API path of a view.
pub fn view_path(name: &str) -> String {
    format!("/v1/views/{}", segment(name))
}

/// Runs `kappa views [name]`, printing to `out`.
pub fn run(client: &Client, args: ViewsArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = match &args.name {
        Some(name) => view_path(name),
        None => "/v1/views".to_string(),
    };
    let body = client.get(&path, &[])?;
    if args.json {
        writeln!(out, "{}", body.trim_end())?;
    } else if args.name.is_some() {
        let view: ViewOut = http::parse(&path, &body)?;
        out.write_all(render_description(&view).as_bytes())?;
    } else {
        let list: ViewsOut = http::parse(&path, &body)?;
        out.write_all(render_list(&list.views).as_bytes())?;
    }
    Ok(())
}

/// A time (ms) as RFC 3339, or the number when out of range.
pub fn time(ms: i64) -> String {
    kappa_processor::expr::format_timestamp(ms).unwrap_or_else(|| ms.to_string())
}

/// `done/total (p%)`.
pub fn progress_text(p: &BuildProgressOut) -> String {
    let percent = if p.total == 0 {
        100.0
    } else {
        p.done as f64 * 100.0 / p.total as f64
    };
    format!("{}/{} ({percent:.0}%)", p.done, p.total)
}

/// `5000 rec/s, eta 12s` (the ETA only when known).
pub fn rate_text(p: &BuildProgressOut) -> String {
    let mut text = format!("{:.0} rec/s", p.rate_records_per_second);
    if let Some(eta) = p.eta_ms {
        text.push_str(&format!(", eta {}", short_duration(eta)));
    }
    text
}

/// `0.1s`, `42.0s`, `3m05s`, `2h07m`.
pub fn short_duration(ms: u64) -> String {
    let secs = ms / 1000;
    match ms {
        0..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m", secs / 3600, secs / 60 % 60),
    }
}

/// The `kappa views` table.
pub fn render_list(views: &[ViewOut]) -> String {
    let mut table = Table::new(&[
        ("VIEW", Align::Left),
        ("KIND", Align::Left),
        ("STATUS", Align::Left),
        ("SERVED", Align::Right),
        ("BUILDING", Align::Right),
        ("PROGRESS", Align::Left),
        ("LAG", Align::Right),
    ]);
    for view in views {
        let (building, progress) = match &view.building_version {
            Some(b) => (
                b.version.version.to_string(),
                format!("{}, {}", progress_text(&b.progress), rate_text(&b.progress)),
            ),
            None => match &view.served_version.catch_up {
                // A new view working through its input's history.
                Some(p) => (
                    "-".into(),
                    format!("{}, {}", progress_text(p), rate_text(p)),
                ),
                None => ("-".into(), "-".into()),
            },
        };
        table.row(vec![
            view.name.clone(),
            view.kind.clone(),
            view.status.clone(),
            view.served_version.version.to_string(),
            building,
            progress,
            view.served_version.lag.to_string(),
        ]);
    }
    table.render()
}

fn version_line(label: &str, v: &VersionOut) -> String {
    let watermark = v.watermark.map_or("none yet".into(), time);
    format!(
        "{label}: version {} ({}), started {}, lag {}, watermark {watermark}, state {}, \
         processed {}, late {}, invalid {}\n",
        v.version,
        if v.running { "running" } else { "stopped" },
        time(v.started_ms),
        v.lag,
        HumanBytes(v.state_bytes),
        v.processed,
        v.late,
        v.invalid,
    )
}

fn partitions_table(v: &VersionOut, build: Option<&BuildOut>) -> String {
    let mut columns = vec![("  PARTITION", Align::Right)];
    if build.is_some() {
        columns.extend([("START", Align::Right), ("TARGET", Align::Right)]);
    }
    columns.extend([
        ("COMMITTED", Align::Right),
        ("END", Align::Right),
        ("LAG", Align::Right),
    ]);
    let mut table = Table::new(&columns);
    for (i, p) in v.partitions.iter().enumerate() {
        let mut row = vec![p.partition.to_string()];
        if let Some(b) = build {
            let at = |offsets: &[u64]| offsets.get(i).map_or("-".into(), u64::to_string);
            row.push(at(&b.start_offsets));
            row.push(at(&b.target_offsets));
        }
        row.extend([
            p.committed.to_string(),
            p.end.to_string(),
            p.lag.to_string(),
        ]);
        table.row(row);
    }
    table.render()
}

/// `text`'s lines, each indented by four spaces.
fn indent(text: &str) -> String {
    text.trim()
        .lines()
        .map(|l| format!("    {}\n", l.trim_end()))
        .collect()
}

/// The `kappa views NAME` text.
pub fn render_description(view: &ViewOut) -> String {
    let mut out = format!(
        "view: {} ({}), status {}\n",
        view.name, view.kind, view.status
    );
    out.push_str(&format!("reads: {}", view.source_topic));
    if let Some(topic) = &view.output_topic {
        out.push_str(&format!(", writes: {topic}"));
    }
    out.push('\n');
    if let Some(sql) = &view.sql {
        out.push_str(&format!("sql:\n{}", indent(sql)));
    }
    out.push_str(&version_line("served", &view.served_version));
    if let Some(p) = &view.served_version.catch_up {
        out.push_str(&format!(
            "catching up (first build; rows are partial until it is done): {}, {}\n",
            progress_text(p),
            rate_text(p)
        ));
    }
    out.push_str(&partitions_table(&view.served_version, None));
    if let Some(build) = &view.building_version {
        // As the server wrote it: `earliest`, or `{"timestamp":..}`.
        let start = match serde_json::to_value(&build.start) {
            Ok(Value::String(s)) => s,
            Ok(other) => other.to_string(),
            Err(_) => "?".to_string(),
        };
        out.push_str(&format!(
            "building: version {} from {start}: {}, {}\n",
            build.version.version,
            progress_text(&build.progress),
            rate_text(&build.progress)
        ));
        if build.version.sql != view.sql {
            if let Some(sql) = &build.version.sql {
                out.push_str(&format!("  new sql:\n{}", indent(sql)));
            }
        }
        out.push_str(&version_line("  state", &build.version));
        out.push_str(&partitions_table(&build.version, Some(build)));
    }
    for grace in &view.grace_versions {
        out.push_str(&format!(
            "replaced: version {} readable with --version {} until {}\n",
            grace.version,
            grace.version,
            time(grace.readable_until_ms)
        ));
    }
    if let Some(f) = &view.failure {
        let during = if f.during_build {
            " during its build (the served version kept serving)"
        } else {
            ""
        };
        out.push_str(&format!(
            "failure: version {}{during} at {}: {}\n",
            f.version,
            time(f.at_ms),
            f.reason
        ));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    /// The example of docs/http-api.md.
    pub(crate) const VIEW: &str = r#"{"name": "purchase_stats", "kind": "table", "sql": "CREATE TABLE purchase_stats AS ...",
 "source_topic": "user_events", "output_topic": null,
 "status": "building",
 "served_version": {"version": 1, "sql": "CREATE TABLE purchase_stats AS ...", "started_ms": 1767225600000, "running": true,
   "partitions": [{"partition": 0, "committed": 1200, "end": 1200, "lag": 0}], "lag": 0,
   "watermark": 1767225595000, "state_bytes": 81234, "processed": 1200, "late": 1, "invalid": 0,
   "parallelism": 1, "workers": [], "catching_up": false, "not_keeping_up": false},
 "building_version": {"version": 2, "sql": "CREATE OR REPLACE TABLE purchase_stats AS ...", "started_ms": 1767225700000, "running": true,
   "partitions": [{"partition": 0, "committed": 600, "end": 1200, "lag": 600}], "lag": 600,
   "watermark": null, "state_bytes": 1024, "processed": 600, "late": 0, "invalid": 0,
   "parallelism": 1, "workers": [], "catching_up": true, "not_keeping_up": false,
   "start": "earliest", "swap": "auto", "ready": false, "start_offsets": [0], "target_offsets": [1200],
   "progress": {"done": 600, "total": 1200, "rate_records_per_second": 5000.0, "eta_ms": 120}},
 "grace_versions": [], "keep_versions": 1, "version_grace_ms": 60000,
 "failure": null, "retry": null, "replay_horizon": {"complete": true, "topics": []}}"#;

    #[test]
    fn renders_the_list() {
        let view: ViewOut = serde_json::from_str(VIEW).unwrap();
        assert_eq!(
            render_list(&[view]),
            "VIEW            KIND   STATUS    SERVED  BUILDING  PROGRESS                              LAG\n\
             purchase_stats  table  building       1         2  600/1200 (50%), 5000 rec/s, eta 0.1s    0\n"
        );
    }

    #[test]
    fn short_durations() {
        assert_eq!(short_duration(120), "0.1s");
        assert_eq!(short_duration(185_000), "3m05s");
        assert_eq!(short_duration(7_620_000), "2h07m");
    }

    #[test]
    fn renders_a_description_with_the_build() {
        let mut view: ViewOut = serde_json::from_str(VIEW).unwrap();
        view.failure = Some(kappa_wire::Failure {
            version: 3,
            reason: "boom".into(),
            at_ms: 0,
            during_build: true,
        });
        let text = render_description(&view);
        assert!(
            text.starts_with("view: purchase_stats (table), status building\nreads: user_events\n"),
            "{text}"
        );
        assert!(text.contains("served: version 1 (running), started 2026-01-01T00:00:00.000Z, lag 0, watermark 2025-12-31T23:59:55.000Z, state 79.33 KiB"), "{text}");
        assert!(
            text.contains("building: version 2 from earliest: 600/1200 (50%), 5000 rec/s"),
            "{text}"
        );
        assert!(
            text.contains("  new sql:\n    CREATE OR REPLACE TABLE"),
            "{text}"
        );
        assert!(
            text.contains("  PARTITION  START  TARGET  COMMITTED   END  LAG\n"),
            "{text}"
        );
        assert!(
            text.contains("failure: version 3 during its build"),
            "{text}"
        );
    }

    #[test]
    fn describes_through_the_api() {
        let server = FakeServer::start(vec![Canned::json(200, VIEW)]);
        let mut out = Vec::new();
        let args = ViewsArgs {
            name: Some("purchase stats".into()),
            json: false,
        };
        run(&Client::new(&server.url), args, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .starts_with("view: purchase_stats"));
        assert_eq!(server.requests()[0].target, "/v1/views/purchase%20stats");
    }
}
