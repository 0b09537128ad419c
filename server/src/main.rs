//! The `kappa` binary: parses arguments and calls the library.

use clap::{Parser, Subcommand};

/// Kappa: an event log and stream processor in one binary.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Open the data directory (running crash recovery) and report each topic's partitions.
    Check {
        /// Data directory.
        #[arg(long, env = "KAPPA_DATA_DIR", default_value = "./data")]
        data_dir: std::path::PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Check { data_dir } => {
            let log = kappa_log::Log::open(kappa_log::LogConfig::new(data_dir))?;
            for topic in log.topics() {
                let d = topic.describe();
                for p in d.partitions {
                    println!(
                        "{} partition {}: offsets [{}, {}), {} bytes in {} segments",
                        d.name, p.partition, p.start_offset, p.end_offset, p.bytes, p.segment_count
                    );
                }
            }
            log.close();
            Ok(())
        }
    }
}
