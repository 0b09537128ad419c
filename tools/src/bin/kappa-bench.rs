//! `kappa-bench`: HTTP load generator and benchmark reporter for a running
//! kappa server (docs/http-api.md is the contract it relies on).
//!
//! ```text
//! kappa-bench [--url URL] [--json out.json] [--compare previous.json] <SCENARIO> [options]
//!   produce   POST NDJSON batches over N keep-alive connections (throughput, latency)
//!   consume   read a topic from the start, one connection per partition
//! ```
//!
//! Progress goes to stderr, a Markdown table of the results to stdout;
//! `--json` saves the results and `--compare` prints the change in percent
//! against a previous result of the same scenario. The load generator runs
//! in this process's own tokio runtime (`--threads` workers), so on a small
//! machine it shares the CPUs with the server: say so when quoting numbers.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use kappa_tools::bench::consume::{self, ConsumeArgs};
use kappa_tools::bench::http::Target;
use kappa_tools::bench::produce::{self, ProduceArgs};
use kappa_tools::bench::report::{self, Report};

/// HTTP load generator and benchmark reporter for a kappa server.
#[derive(Debug, Parser)]
#[command(name = "kappa-bench", version, about)]
struct Cli {
    /// The server's root URL (http only).
    #[arg(
        long,
        env = "KAPPA_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// Write the results as JSON to this file.
    #[arg(long, global = true)]
    json: Option<PathBuf>,
    /// Print the change against a previous `--json` result of the same scenario.
    #[arg(long, global = true)]
    compare: Option<PathBuf>,
    /// Worker threads of the load generator's runtime [default: one per CPU].
    #[arg(long, global = true)]
    threads: Option<usize>,
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// Produce NDJSON batches over keep-alive connections; report throughput and latency.
    Produce(ProduceArgs),
    /// Read a topic from the start up to its current end; report throughput and latency.
    Consume(ConsumeArgs),
}

/// Runs the chosen scenario on a fresh runtime.
fn measure(cli: &Cli, target: &Target) -> anyhow::Result<Report> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(n) = cli.threads {
        builder.worker_threads(n.max(1));
    }
    let runtime = builder.build()?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    runtime.block_on(async {
        match &cli.scenario {
            Scenario::Produce(args) => produce::run(args, target, command).await,
            Scenario::Consume(args) => consume::run(args, target, command).await,
        }
    })
}

fn main_result() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let target = Target::parse(&cli.url)?;
    // Read the comparison first: a bad path should not cost a whole run.
    let previous = cli.compare.as_deref().map(report::load).transpose()?;
    let scenario = match cli.scenario {
        Scenario::Produce(_) => "produce",
        Scenario::Consume(_) => "consume",
    };
    if let Some(previous) = previous.as_ref().filter(|p| p.scenario != scenario) {
        bail!(
            "--compare: the previous result is of the {} scenario, not {scenario}",
            previous.scenario
        );
    }
    let result = measure(&cli, &target)?;
    print!("{}", report::markdown(&result));
    if let Some(path) = &cli.json {
        report::save(&result, path)?;
        eprintln!("results written to {}", path.display());
    }
    if let Some(previous) = previous {
        let table = report::compare(&previous, &result).context("--compare")?;
        print!("\n{table}");
    }
    Ok(())
}

fn main() {
    if let Err(e) = main_result() {
        eprintln!("kappa-bench: {e:#}");
        std::process::exit(1);
    }
}
