//! `kappa-bench summary`: the one-page summary of a `tools/bench.sh` results
//! directory, written into BENCHMARKS.md between [`START_MARKER`] and
//! [`END_MARKER`] (the rest of the file is kept).
//!
//! Inputs, all optional, in the results directory: the kappa-bench results
//! (`*.json`, one [`Report`] each: their key figures, median with min – max),
//! the Markdown the in-process benchmarks printed (`log-bench.md`,
//! `processor-bench.md`: their headings and tables, copied as they are — they
//! already hold medians) and `timings.tsv` (`step<TAB>seconds` lines from
//! bench.sh). Machine facts come from [`crate::machine`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::report::{self, Report};
use crate::machine;

/// First line of the generated section.
pub const START_MARKER: &str = "<!-- bench.sh summary start -->";
/// Last line of the generated section.
pub const END_MARKER: &str = "<!-- bench.sh summary end -->";

/// Options of `kappa-bench summary`.
#[derive(Debug, Clone, clap::Args)]
pub struct SummaryArgs {
    /// The results directory bench.sh wrote.
    #[arg(long)]
    pub results: PathBuf,
    /// The Markdown file whose marked section is replaced (printed to stdout when absent).
    #[arg(long)]
    pub benchmarks: Option<PathBuf>,
    /// The command line to show as how the results were made.
    #[arg(long, default_value = "tools/bench.sh")]
    pub command: String,
}

/// The figures shown per scenario, in order.
fn key_figures(scenario: &str) -> &'static [&'static str] {
    match scenario {
        "produce" => &["records/s", "MB/s", "p50", "p99", "failed requests"],
        "consume" | "replay" => &["records/s", "MB/s", "p99", "failed requests"],
        "e2e" => &[
            "records/s",
            "e2e p50",
            "e2e p99",
            "e2e p99.9",
            "e2e samples",
            "view_behind",
            "failed probes",
            "failed requests",
        ],
        "rebuild" => &["rebuild time", "events/s"],
        _ => &[],
    }
}

/// The rows of one kappa-bench result: `| name | scenario | figure | median | min – max |`.
fn report_rows(name: &str, r: &Report, out: &mut String) {
    let runs = r.runs.len();
    for figure in key_figures(&r.scenario) {
        let Some(row) = r.summary.iter().find(|s| s.name == *figure) else {
            continue;
        };
        let unit = match row.unit.as_str() {
            "ms" => " (ms)",
            "s" => " (s)",
            _ => "",
        };
        let v = |x| report::format_value(&row.unit, x);
        let s = row.spread;
        let _ = writeln!(
            out,
            "| `{name}` | {} | {}{unit} | {} | {} – {} | {runs} |",
            r.scenario,
            row.name,
            v(s.median),
            v(s.min),
            v(s.max)
        );
    }
}

/// Headings and tables of a Markdown text, without the prose between them.
pub fn headings_and_tables(md: &str) -> String {
    let mut out = String::new();
    let mut in_table = false;
    for line in md.lines() {
        let is_table = line.starts_with('|');
        if line.starts_with("###") {
            let _ = writeln!(out, "\n#{line}\n");
        } else if is_table {
            let _ = writeln!(out, "{line}");
        } else if in_table {
            out.push('\n');
        }
        in_table = is_table;
    }
    out
}

fn machine_facts(results: &Path) -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let fs = machine::filesystem(results).map_or("unknown filesystem".into(), |(d, t, _)| {
        format!("{d} ({t})")
    });
    format!(
        "{cpus} CPUs ({}), {}, {}; results directory on {fs}; load average {} when summarized",
        machine::cpu_model(),
        machine::memory(),
        machine::kernel(),
        machine::load_average()
    )
}

/// The summary section (markers included).
pub fn render(args: &SummaryArgs) -> anyhow::Result<String> {
    let dir = &args.results;
    let mut json: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    json.sort();
    let mut out = format!(
        "{START_MARKER}\n\n## Summary of the last `tools/bench.sh` run ({})\n\n",
        machine::today()
    );
    let _ = writeln!(
        out,
        "Command: `{}`; raw results in `{}`.\n",
        args.command,
        dir.display()
    );
    let _ = writeln!(out, "Machine: {}.\n", machine_facts(dir));
    if let Ok(t) = std::fs::read_to_string(dir.join("timings.tsv")) {
        out.push_str("| step | seconds |\n|---|--:|\n");
        for (step, secs) in t.lines().filter_map(|l| l.split_once('\t')) {
            let _ = writeln!(out, "| {step} | {secs} |");
        }
        out.push('\n');
    }
    if !json.is_empty() {
        out.push_str("### HTTP (kappa-bench; median of the runs)\n\n");
        out.push_str("| result | scenario | figure | median | min – max | runs |\n|---|---|---|--:|--:|--:|\n");
        for path in &json {
            let r = report::load(path)?;
            let name = path.file_stem().map_or("?".into(), |s| s.to_string_lossy());
            report_rows(&name, &r, &mut out);
        }
        out.push('\n');
        for path in &json {
            let r = report::load(path)?;
            let name = path.file_stem().map_or("?".into(), |s| s.to_string_lossy());
            let _ = writeln!(out, "- `{name}`: {}", r.title);
        }
    }
    for (file, title) in [
        ("log-bench.md", "Log (kappa-log-bench)"),
        (
            "processor-bench.md",
            "Processor (kappa-processor-bench suite)",
        ),
    ] {
        if let Ok(md) = std::fs::read_to_string(dir.join(file)) {
            let _ = writeln!(out, "\n### {title}\n{}", headings_and_tables(&md));
        }
    }
    let _ = writeln!(out, "\n{END_MARKER}");
    Ok(collapse_blank_lines(&out))
}

/// `text` with runs of blank lines shortened to one.
fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = false;
    for line in text.lines() {
        if line.trim().is_empty() && blank {
            continue;
        }
        blank = line.trim().is_empty();
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `text` with the marked section replaced by `section`; without markers the
/// section goes before the first `## ` heading (or at the end).
pub fn splice(text: &str, section: &str) -> anyhow::Result<String> {
    match (text.find(START_MARKER), text.find(END_MARKER)) {
        (Some(a), Some(b)) if a < b => {
            let end = b + END_MARKER.len();
            let end = end + usize::from(text[end..].starts_with('\n'));
            Ok(format!("{}{section}{}", &text[..a], &text[end..]))
        }
        (None, None) => {
            let at = text.find("\n## ").map_or(text.len(), |i| i + 1);
            Ok(format!("{}{section}\n{}", &text[..at], &text[at..]))
        }
        _ => bail!("the summary markers are unbalanced or out of order"),
    }
}

/// Runs `kappa-bench summary`.
pub fn run(args: &SummaryArgs) -> anyhow::Result<()> {
    let section = render(args)?;
    match &args.benchmarks {
        None => print!("{section}"),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            let spliced = splice(&text, &section)?;
            std::fs::write(path, spliced).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("summary written to {}", path.display());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splice_replaces_only_the_marked_section() {
        let section = format!("{START_MARKER}\nnew\n{END_MARKER}\n");
        let text = format!("# B\n\nintro\n\n{START_MARKER}\nold\n{END_MARKER}\n\n## Log\nkept\n");
        let out = splice(&text, &section).unwrap();
        assert_eq!(out, format!("# B\n\nintro\n\n{section}\n## Log\nkept\n"));
        assert_eq!(splice(&out, &section).unwrap(), out, "idempotent");
        let fresh = splice("# B\n\nintro\n\n## Log\n", &section).unwrap();
        assert_eq!(fresh, format!("# B\n\nintro\n\n{section}\n## Log\n"));
        assert!(splice(&format!("{END_MARKER}{START_MARKER}"), &section).is_err());
    }

    #[test]
    fn tables_keep_headings_and_drop_prose() {
        let md = "## Top\n\nprose\n\n### Append\n\nmore prose\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\nafter\n";
        assert_eq!(
            headings_and_tables(md),
            "\n#### Append\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        );
    }
}
