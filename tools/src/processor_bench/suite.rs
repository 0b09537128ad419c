//! `suite`: every case as a child process of this binary (so peak RSS is
//! per case), `--runs` times each.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::ValueEnum;

use crate::bench::report::thousands;
use crate::machine::{filesystem, load_average};

use super::args::*;
use super::generate::*;
use super::report::*;
use super::run::*;

/// One line of the table: a scenario and cache size, with its runs.
#[derive(Debug)]
pub(super) struct Case {
    pub(super) scenario: Scenario,
    pub(super) cache_entries: Option<usize>,
    pub(super) runs: Vec<RunResult>,
    pub(super) note: Option<String>,
}

impl Case {
    pub(super) fn label(&self) -> String {
        match self.cache_entries {
            Some(c) => format!(
                "{} (cache {} entries)",
                self.scenario.name(),
                thousands(c as f64)
            ),
            None => self.scenario.name().to_string(),
        }
    }
}

pub(super) fn parse_case(s: &str) -> Result<(Scenario, Option<usize>)> {
    let (name, cache) = match s.split_once(':') {
        Some((n, c)) => (
            n,
            Some(
                c.parse::<usize>()
                    .with_context(|| format!("bad cache size in case {s}"))?,
            ),
        ),
        None => (s, None),
    };
    let scenario = Scenario::from_str(name.trim(), true)
        .map_err(|e| anyhow::anyhow!("bad scenario in case {s}: {e}"))?;
    Ok((scenario, cache))
}

pub(super) fn run_child(
    exe: &Path,
    dir: &Path,
    scenario: Scenario,
    cache: Option<usize>,
    r: &RuntimeArgs,
) -> Result<RunResult> {
    let mut cmd = Command::new(exe);
    cmd.arg("run")
        .arg("--dir")
        .arg(dir)
        .args(["--scenario", scenario.name(), "--json"])
        .args(["--session-gap-secs", &r.session_gap_secs.to_string()]);
    if let Some(c) = cache {
        cmd.args(["--cache-entries", &c.to_string()]);
    }
    if let Some(c) = r.commit_interval_ms {
        cmd.args(["--commit-interval-ms", &c.to_string()]);
    }
    if let Some(m) = r.max_poll_records {
        cmd.args(["--max-poll-records", &m.to_string()]);
    }
    let out = cmd
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", exe.display()))?;
    if !out.status.success() {
        bail!("run {} failed: {}", scenario.name(), out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("the run printed no result")?;
    serde_json::from_str(line).context("parsing the run's result")
}

pub(super) fn suite(a: &SuiteArgs, argv: &[String]) -> Result<()> {
    ensure!(a.runs >= 1, "--runs must be at least 1");
    let cases: Vec<(Scenario, Option<usize>)> = a
        .cases
        .iter()
        .map(|c| parse_case(c))
        .collect::<Result<_>>()?;
    std::fs::create_dir_all(&a.dir).with_context(|| format!("creating {}", a.dir.display()))?;
    let dir = a
        .dir
        .canonicalize()
        .with_context(|| format!("resolving {}", a.dir.display()))?;
    let exe = std::env::current_exe().context("locating this binary")?;
    let load_start = load_average();
    let suite_started = Instant::now();
    let progress = |msg: String| {
        eprintln!("[{:>7.1}s] {msg}", suite_started.elapsed().as_secs_f64());
    };

    let generated = match read_generated(&dir) {
        Some(g) if g.matches(&a.data) && dir.join("log").exists() => {
            progress(format!(
                "reusing the {} events already in {}",
                thousands(g.events as f64),
                dir.display()
            ));
            g
        }
        _ => {
            let log_dir = dir.join("log");
            if log_dir.exists() {
                std::fs::remove_dir_all(&log_dir)
                    .with_context(|| format!("removing {}", log_dir.display()))?;
            }
            progress(format!(
                "generating {} events over {} keys",
                thousands(a.data.events as f64),
                thousands(a.data.keys as f64)
            ));
            let d = &a.data;
            let status = Command::new(&exe)
                .arg("generate")
                .arg("--dir")
                .arg(&dir)
                .args(["--events", &d.events.to_string()])
                .args(["--keys", &d.keys.to_string()])
                .args(["--value-bytes", &d.value_bytes.to_string()])
                .args(["--disorder-ms", &d.disorder_ms.to_string()])
                .args(["--seed", &d.seed.to_string()])
                .status()
                .context("running generate")?;
            ensure!(status.success(), "generate failed: {status}");
            read_generated(&dir).context("generate wrote no generated.json")?
        }
    };

    let mut results: Vec<Case> = Vec::new();
    for (scenario, cache) in cases {
        let mut case = Case {
            scenario,
            cache_entries: cache,
            runs: Vec::new(),
            note: None,
        };
        let mut runs = a.runs;
        let mut run = 1;
        while run <= runs {
            let r = run_child(&exe, &dir, scenario, cache, &a.runtime)
                .with_context(|| format!("{} run {run}", case.label()))?;
            progress(format!(
                "{} run {run}/{runs}: {} events/s, {:.1} s, state dir {} MB, peak RSS {} MB (anon {} MB)",
                case.label(),
                thousands(r.rate()),
                r.secs,
                mb(r.state_dir_bytes),
                mb(r.peak_rss_bytes),
                mb(r.peak_anon_bytes)
            ));
            if run == 1 && runs > 1 && r.secs > a.max_run_secs as f64 {
                case.note = Some(format!(
                    "one run took {:.0} s (> {} s): 1 run instead of {runs}",
                    r.secs, a.max_run_secs
                ));
                progress(format!(
                    "{}: {}",
                    case.label(),
                    case.note.as_deref().unwrap_or("")
                ));
                runs = 1;
            }
            case.runs.push(r);
            run += 1;
        }
        results.push(case);
    }
    let env = Environment {
        fs: filesystem(&dir),
        load_start,
        load_end: load_average(),
        suite_secs: suite_started.elapsed().as_secs_f64(),
    };
    let md = report(a, argv, &dir, &generated, &env, &results);
    print!("{md}");
    if let Some(path) = &a.output {
        std::fs::write(path, &md).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
