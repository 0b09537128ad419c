//! `kappa replay`: rebuild a view from the start of its input (or a time)
//! as a new version, then follow the build until that version is served.
//!
//! On a terminal the build shows as a progress bar (records done / total,
//! rate, ETA); otherwise a progress line is printed every few seconds. The
//! command fails (non-zero exit) when the build fails or is superseded by a
//! newer one; `--no-wait` returns once the build has started.

use std::io::{IsTerminal, Write};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::bail;
use indicatif::{ProgressBar, ProgressStyle};
use kappa_wire::ViewOut;
use serde_json::{json, Value};

use super::http::Client;
use super::views::{progress_text, rate_text, view_path};

/// How often the build's progress is fetched.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// How often a progress line is printed when stderr is not a terminal.
const LINE_INTERVAL: Duration = Duration::from_secs(2);

/// Where a replay starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayFrom {
    /// The first record of every partition.
    Earliest,
    /// The first record at or after this time (ms), per partition.
    Timestamp(i64),
}

/// Parses `earliest`, ms since the epoch, or an RFC 3339 time.
pub fn parse_replay_from(text: &str) -> Result<ReplayFrom, String> {
    if text == "earliest" {
        return Ok(ReplayFrom::Earliest);
    }
    let ms = match text.parse::<i64>() {
        Ok(ms) => Some(ms),
        Err(_) => kappa_processor::expr::parse_timestamp(&Value::String(text.into())),
    };
    match ms {
        Some(ms) if ms >= 0 => Ok(ReplayFrom::Timestamp(ms)),
        _ => Err(format!(
            "expected earliest, ms since the epoch or an RFC 3339 time (2026-01-01T00:00:00Z), got {text:?}"
        )),
    }
}

/// Arguments of `kappa replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The view to rebuild.
    pub view: String,
    /// Where to start: `earliest`, ms since the epoch or an RFC 3339 time.
    #[arg(long, default_value = "earliest", value_parser = parse_replay_from)]
    pub from: ReplayFrom,
    /// Return once the build has started instead of following it.
    #[arg(long)]
    pub no_wait: bool,
    /// Replay even though retention deleted input the served version saw.
    #[arg(long)]
    pub allow_truncated: bool,
    /// Build the new version but wait for `kappa promote` to serve it
    /// (returns once it is ready).
    #[arg(long)]
    pub manual: bool,
}

/// The body of `POST /v1/views/{view}/replay`.
pub fn replay_body(from: &ReplayFrom, allow_truncated: bool) -> Value {
    let mut body = match from {
        ReplayFrom::Earliest => json!({"from": "earliest"}),
        ReplayFrom::Timestamp(ms) => json!({"from": {"timestamp": ms}}),
    };
    if allow_truncated {
        body["allow_truncated"] = json!(true);
    }
    body
}

/// Runs `kappa replay`, printing to `out` (the progress bar goes to stderr).
pub fn run(client: &Client, args: ReplayArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let path = format!("{}/replay", view_path(&args.view));
    let mut request = replay_body(&args.from, args.allow_truncated);
    if args.manual {
        request["swap"] = json!("manual");
    }
    let body = client.post_json(&path, &request)?;
    let started: kappa_wire::ReplayOut = super::http::parse(&path, &body)?;
    let version = match (started.building_version, started.served_version) {
        (Some(v), _) => v,
        (None, Some(v)) => {
            writeln!(
                out,
                "{}: version {v} took over at once (a derived stream: its topic gets the replayed records again)",
                args.view
            )?;
            return Ok(());
        }
        (None, None) => {
            writeln!(out, "{}: nothing to replay", args.view)?;
            return Ok(());
        }
    };
    writeln!(out, "{}: building version {version}", args.view)?;
    if args.manual {
        writeln!(
            out,
            "it waits, following its input, until `kappa promote {}` serves it (check it with: kappa views {})",
            args.view, args.view
        )?;
        return Ok(());
    }
    if args.no_wait {
        writeln!(out, "follow it with: kappa views {}", args.view)?;
        return Ok(());
    }
    let mut progress = Reporter::new(&args.view, version);
    let started_at = Instant::now();
    let outcome = follow(client, &args.view, version, &mut progress);
    progress.finish();
    match outcome? {
        Outcome::Served { processed } => {
            writeln!(
                out,
                "{}: version {version} is served ({processed} records in {:.1}s)",
                args.view,
                started_at.elapsed().as_secs_f64()
            )?;
            Ok(())
        }
        Outcome::Failed(reason) => bail!(
            "{}: the build of version {version} failed: {reason} (the previous version keeps serving)",
            args.view
        ),
        Outcome::Superseded(newer) => bail!(
            "{}: the build of version {version} was cancelled by a newer one (version {newer})",
            args.view
        ),
    }
}

/// How a followed build ended.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// The version is served; its processor had processed this many records.
    Served {
        /// Records processed by the version.
        processed: u64,
    },
    /// Its processor failed, with this reason.
    Failed(String),
    /// A newer build replaced it.
    Superseded(u64),
}

/// What one look at the view says about the build of `version`: the outcome
/// when it is over, else None.
pub fn check(view: &ViewOut, version: u64) -> Option<Outcome> {
    if let Some(f) = &view.failure {
        if f.version == version {
            return Some(Outcome::Failed(f.reason.clone()));
        }
    }
    let served = view.served_version.version;
    if served >= version {
        return Some(if served == version {
            Outcome::Served {
                processed: view.served_version.processed,
            }
        } else {
            Outcome::Superseded(served)
        });
    }
    match &view.building_version {
        Some(b) if b.version.version > version => Some(Outcome::Superseded(b.version.version)),
        Some(_) => None,
        None => Some(Outcome::Failed(
            "the build stopped without being served".into(),
        )),
    }
}

fn follow(
    client: &Client,
    view: &str,
    version: u64,
    progress: &mut Reporter,
) -> anyhow::Result<Outcome> {
    let path = view_path(view);
    loop {
        let info: ViewOut = client.get_json(&path, &[])?;
        if let Some(outcome) = check(&info, version) {
            return Ok(outcome);
        }
        if let Some(build) = &info.building_version {
            progress.update(&build.progress);
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Shows build progress: a bar on a terminal, periodic lines otherwise.
struct Reporter {
    bar: Option<ProgressBar>,
    label: String,
    last_line: Option<Instant>,
}

impl Reporter {
    fn new(view: &str, version: u64) -> Self {
        let label = format!("{view} v{version}");
        let bar = std::io::stderr().is_terminal().then(|| {
            let style =
                ProgressStyle::with_template("{prefix} [{wide_bar}] {pos}/{len} records, {msg}")
                    .expect("valid template")
                    .progress_chars("=> ");
            let bar = ProgressBar::new(0).with_style(style);
            bar.set_prefix(label.clone());
            bar
        });
        Reporter {
            bar,
            label,
            last_line: None,
        }
    }

    fn update(&mut self, p: &kappa_wire::BuildProgressOut) {
        match &self.bar {
            Some(bar) => {
                bar.set_length(p.total);
                bar.set_position(p.done.min(p.total));
                bar.set_message(rate_text(p));
            }
            None => {
                if self.last_line.is_none_or(|t| t.elapsed() >= LINE_INTERVAL) {
                    self.last_line = Some(Instant::now());
                    eprintln!("{}: {}, {}", self.label, progress_text(p), rate_text(p));
                }
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};

    fn view(served: u64, building: Option<u64>, failure: Option<u64>) -> ViewOut {
        let mut v: Value = serde_json::from_str(crate::cli::views::tests::VIEW).unwrap();
        v["served_version"]["version"] = json!(served);
        match building {
            Some(b) => v["building_version"]["version"] = json!(b),
            None => v["building_version"] = Value::Null,
        }
        if let Some(f) = failure {
            v["failure"] =
                json!({"version": f, "reason": "boom", "at_ms": 0, "during_build": true});
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn parses_from() {
        assert_eq!(parse_replay_from("earliest"), Ok(ReplayFrom::Earliest));
        assert_eq!(parse_replay_from("1000"), Ok(ReplayFrom::Timestamp(1000)));
        assert_eq!(
            parse_replay_from("2026-01-01T00:00:00Z"),
            Ok(ReplayFrom::Timestamp(1_767_225_600_000))
        );
        assert!(parse_replay_from("latest").is_err());
        assert!(parse_replay_from("-1").is_err());
        assert_eq!(
            replay_body(&ReplayFrom::Timestamp(5), false),
            json!({"from": {"timestamp": 5}})
        );
        assert_eq!(
            replay_body(&ReplayFrom::Earliest, true),
            json!({"from": "earliest", "allow_truncated": true})
        );
    }

    #[test]
    fn checks_how_a_build_ends() {
        assert_eq!(check(&view(1, Some(2), None), 2), None);
        assert_eq!(
            check(&view(2, None, None), 2),
            Some(Outcome::Served { processed: 1200 })
        );
        assert_eq!(
            check(&view(1, None, Some(2)), 2),
            Some(Outcome::Failed("boom".into()))
        );
        assert_eq!(
            check(&view(1, Some(3), None), 2),
            Some(Outcome::Superseded(3))
        );
        assert_eq!(check(&view(1, Some(2), Some(1)), 2), None);
    }

    #[test]
    fn follows_the_build_until_served() {
        let started = r#"{"view": "purchase_stats", "building_version": 2, "from": "earliest"}"#;
        let mut served: Value = serde_json::from_str(crate::cli::views::tests::VIEW).unwrap();
        served["served_version"]["version"] = json!(2);
        served["building_version"] = Value::Null;
        let server = FakeServer::start(vec![
            Canned::json(202, started),
            Canned::json(200, crate::cli::views::tests::VIEW),
            Canned::json(200, &served.to_string()),
        ]);
        let args = ReplayArgs {
            view: "purchase_stats".into(),
            from: ReplayFrom::Earliest,
            no_wait: false,
            allow_truncated: false,
            manual: false,
        };
        let mut out = Vec::new();
        run(&Client::new(&server.url), args, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with("purchase_stats: building version 2\n"),
            "{text}"
        );
        assert!(text.contains("version 2 is served"), "{text}");
        let requests = server.requests();
        assert_eq!(requests[0].target, "/v1/views/purchase_stats/replay");
        assert_eq!(requests[0].body, r#"{"from":"earliest"}"#);
    }
}
