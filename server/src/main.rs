//! The `kappa` binary: parses arguments and calls the library — `serve`
//! runs the server, `demo` runs one with a demo workload, the other
//! subcommands are clients of a running server.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kappa_server::config::{LogFormat, Overrides, ServerConfig};

/// Kappa: an event log and stream processor in one binary.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// URL of the server the client subcommands talk to (alias: --server).
    #[arg(
        long,
        visible_alias = "server",
        env = "KAPPA_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
    /// Bearer token for a server with `auth = "tokens"` (README, "Security").
    #[arg(long, env = "KAPPA_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// PEM file of the CA that signed an https:// server's certificate
    /// (instead of the built-in public roots).
    #[arg(long, env = "KAPPA_CA_CERT", global = true)]
    ca_cert: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server: the log, the processors and the HTTP API.
    Serve {
        /// TOML config file; flags and KAPPA_* variables override it.
        #[arg(long, env = "KAPPA_CONFIG")]
        config: Option<PathBuf>,
        #[command(flatten)]
        overrides: Overrides,
    },
    /// Run a server with a demo: the user_events stream, the purchase_stats
    /// table, the high_value_alerts stream and a purchases generator.
    Demo(kappa_server::cli::demo::DemoArgs),
    #[command(flatten)]
    Client(kappa_server::cli::ClientCommand),
}

/// Logs to stderr at `default_level` unless `RUST_LOG` says otherwise.
fn init_tracing(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_level.into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
    }
}

fn serve(config_file: Option<PathBuf>, overrides: Overrides) -> anyhow::Result<()> {
    let config = ServerConfig::load(config_file.as_deref(), &overrides)?;
    init_tracing(config.log_format, "info");
    if let (Some(cert), Some(key)) = (&config.tls_cert, &config.tls_key) {
        // Fail before the `listening on` line, not after opening the log;
        // the server loads the files again when it starts serving.
        kappa_server::http::Tls::load(cert, key)?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let address = listener.local_addr()?;
        tracing::info!(%address, data_dir = %config.data_dir.display(), "kappa serving");
        // The one line on stdout: tools and tests read the bound address here.
        println!("listening on {address}");
        kappa_server::run(config, listener, shutdown_signal()).await
    })
}

fn demo(args: kappa_server::cli::demo::DemoArgs) -> anyhow::Result<()> {
    // The demo's guide is on stdout: only warnings go to stderr.
    init_tracing(LogFormat::Text, "warn");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(kappa_server::cli::demo::run(args, shutdown_signal()))
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config, overrides } => serve(config, overrides),
        Command::Demo(args) => demo(args),
        Command::Client(command) => {
            let options = kappa_server::cli::http::ClientOptions {
                url: cli.url,
                token: cli.token,
                ca_cert: cli.ca_cert,
            };
            kappa_server::cli::run(&options, command)
        }
    };
    if let Err(e) = result {
        if e.downcast_ref::<kappa_server::cli::Reported>().is_none() {
            eprintln!("{e:#}");
        }
        std::process::exit(1);
    }
}
