//! The `kappa` binary: parses arguments and calls the library — `serve`
//! runs the server, the other subcommands are clients of a running server.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use kappa_server::config::{LogFormat, Overrides, ServerConfig};

/// Kappa: an event log and stream processor in one binary.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// URL of the server the client subcommands talk to.
    #[arg(
        long,
        env = "KAPPA_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    url: String,
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
    #[command(flatten)]
    Client(kappa_server::cli::ClientCommand),
}

fn init_tracing(format: LogFormat) {
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
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
    init_tracing(config.log_format);
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

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config, overrides } => serve(config, overrides),
        Command::Client(command) => kappa_server::cli::run(&cli.url, command),
    };
    if let Err(e) = result {
        eprintln!("{e:#}");
        std::process::exit(1);
    }
}
