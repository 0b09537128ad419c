//! `kappa-bench`: HTTP load generator and benchmark reporter for a running
//! kappa server (docs/http-api.md is the contract it relies on).
//!
//! ```text
//! kappa-bench [--server URL] [--json out.json] [--compare previous.json] <SCENARIO> [options]
//!   produce   POST NDJSON batches over N keep-alive connections (throughput, latency)
//!   consume   read a topic from the start, one connection per partition
//!   replay    re-read a topic through a consumer group reset to earliest
//!   e2e       produce at a rate into a topic with an aggregate view; latency
//!             from produce to visible in the view (read-your-writes probes)
//!   rebuild   replay a view from earliest; rebuild time, events/s, progress
//!   build     load an NDJSON file of user_events, build the seed's
//!             purchase_stats view from it; build time, events/s, rows
//!   kafka-produce  the produce scenario's records over the Kafka protocol
//!             (--kafka HOST:PORT; the topic is created over HTTP)
//!   kafka-consume  the consume scenario over the Kafka protocol (Fetch)
//! kappa-bench summary --results DIR [--benchmarks BENCHMARKS.md]
//!             (no server: writes the summary of a tools/bench.sh run)
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
use kappa_tools::bench::build::{self, BuildArgs};
use kappa_tools::bench::consume::{self, ConsumeArgs};
use kappa_tools::bench::e2e::{self, E2eArgs};
use kappa_tools::bench::http::Target;
use kappa_tools::bench::kafka_consume::{self, KafkaConsumeArgs};
use kappa_tools::bench::kafka_produce::{self, KafkaProduceArgs};
use kappa_tools::bench::produce::{self, ProduceArgs};
use kappa_tools::bench::rebuild::{self, RebuildArgs};
use kappa_tools::bench::replay::{self, ReplayArgs};
use kappa_tools::bench::report::{self, Report};
use kappa_tools::bench::summary::{self, SummaryArgs};

/// HTTP load generator and benchmark reporter for a kappa server.
#[derive(Debug, Parser)]
#[command(name = "kappa-bench", version, about)]
struct Cli {
    /// The server's root URL (http only); the only server it talks to.
    #[arg(
        long,
        visible_alias = "server",
        env = "KAPPA_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// Bearer token for a server with `auth = "tokens"`.
    #[arg(long, env = "KAPPA_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
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
    /// Re-read a topic through a consumer group reset to earliest (reads commit).
    Replay(ReplayArgs),
    /// Produce at a rate into a topic with an aggregate view; report the latency
    /// from a produce request to its records being visible in the view.
    E2e(E2eArgs),
    /// Load a topic, build a view over it, replay the view from earliest; report
    /// the rebuild time, events/s and the progress the server showed.
    Rebuild(RebuildArgs),
    /// Load an NDJSON file of user_events into a topic and build the seed's
    /// purchase_stats view from it; report the build time, events/s and rows.
    Build(BuildArgs),
    /// Produce the same records over the Kafka wire protocol (Produce v9,
    /// pipelined); report throughput and latency.
    KafkaProduce(KafkaProduceArgs),
    /// Read a topic from the start up to its current end over the Kafka
    /// protocol (Fetch, one connection per partition).
    KafkaConsume(KafkaConsumeArgs),
    /// Summarize a tools/bench.sh results directory into BENCHMARKS.md (no server).
    Summary(SummaryArgs),
}

impl Scenario {
    /// The name results files carry.
    fn name(&self) -> &'static str {
        match self {
            Scenario::Produce(_) => "produce",
            Scenario::Consume(_) => "consume",
            Scenario::Replay(_) => "replay",
            Scenario::E2e(_) => "e2e",
            Scenario::Rebuild(_) => "rebuild",
            Scenario::Build(_) => "build",
            Scenario::KafkaProduce(_) => "kafka-produce",
            Scenario::KafkaConsume(_) => "kafka-consume",
            Scenario::Summary(_) => "summary",
        }
    }
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
            Scenario::Replay(args) => replay::run(args, target, command).await,
            Scenario::E2e(args) => e2e::run(args, target, command).await,
            Scenario::Rebuild(args) => rebuild::run(args, target, command).await,
            Scenario::Build(args) => build::run(args, target, command).await,
            Scenario::KafkaProduce(args) => kafka_produce::run(args, target, command).await,
            Scenario::KafkaConsume(args) => kafka_consume::run(args, target, command).await,
            Scenario::Summary(_) => unreachable!("summary runs without a server"),
        }
    })
}

fn main_result() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Scenario::Summary(args) = &cli.scenario {
        return summary::run(args);
    }
    let target = Target::parse(&cli.url)?.with_token(cli.token.as_deref());
    // Read the comparison first: a bad path should not cost a whole run.
    let previous = cli.compare.as_deref().map(report::load).transpose()?;
    let scenario = cli.scenario.name();
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
