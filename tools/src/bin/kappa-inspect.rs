//! `kappa-inspect`: an offline inspector of a kappa data directory (no
//! running server needed; nothing is modified, except by `repair-topic`
//! and `repair-partition`, which an operator runs knowingly with the
//! server stopped). See tools/README.md and `kappa_tools::inspect`.
//!
//! ```text
//! kappa-inspect segments <data-dir> [--topic T] [--partition P] [--json]
//! kappa-inspect dump <data-dir> --topic T --partition P [--from OFFSET] [--max N] [--records] [--json]
//! kappa-inspect verify <data-dir> [--topic T] [--json]     exit 0 = clean, 1 = a problem
//! kappa-inspect groups <data-dir> [--json]
//! kappa-inspect repair-topic <data-dir> --topic T [--retention-ms MS] [--fsync always|interval|never]
//! kappa-inspect repair-partition <data-dir> --topic T --partition P --start-offset N
//! ```

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use kappa_log::{FsyncPolicy, TopicConfig};
use kappa_tools::inspect::{dump, groups, segments, verify};
use serde::Serialize;

/// Offline inspector of a kappa data directory (read-only).
#[derive(Debug, Parser)]
#[command(name = "kappa-inspect", version, about)]
struct Cli {
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A table per partition of its segments: offsets, timestamps, size, counts, index entries.
    Segments {
        /// The data directory (as given to `kappa serve --data-dir`).
        data_dir: PathBuf,
        /// Only this topic.
        #[arg(long)]
        topic: Option<String>,
        /// Only this partition.
        #[arg(long)]
        partition: Option<u32>,
    },
    /// The batches (and with --records the records) of one partition.
    Dump {
        /// The data directory.
        data_dir: PathBuf,
        /// Topic.
        #[arg(long)]
        topic: String,
        /// Partition.
        #[arg(long)]
        partition: u32,
        /// First offset.
        #[arg(long, default_value_t = 0)]
        from: u64,
        /// Most records to cover.
        #[arg(long, default_value_t = 100)]
        max: u64,
        /// Print the records (key, value, headers, timestamp).
        #[arg(long)]
        records: bool,
    },
    /// Check every batch (CRC, magic, version), offset continuity and every index entry; exit 1 on the first problem.
    Verify {
        /// The data directory.
        data_dir: PathBuf,
        /// Only this topic.
        #[arg(long)]
        topic: Option<String>,
    },
    /// Committed consumer group offsets per topic and partition, with lag.
    Groups {
        /// The data directory.
        data_dir: PathBuf,
    },
    /// Rebuild a missing or damaged topic.json from the partition
    /// directories (the server must be stopped). Records are not touched;
    /// a damaged topic.json is kept beside it as topic.json.damaged-<ms>.
    RepairTopic {
        /// The data directory.
        data_dir: PathBuf,
        /// The topic whose topic.json to rebuild.
        #[arg(long)]
        topic: String,
        /// Retention by time in milliseconds (default: none, keep every record).
        #[arg(long)]
        retention_ms: Option<u64>,
        /// Durability policy.
        #[arg(long, value_enum, default_value_t = Fsync::Always)]
        fsync: Fsync,
    },
    /// Recreate a lost partition directory (missing, or holding no segment)
    /// empty, starting at --start-offset, so that no offset it handed out
    /// is handed out again (the server must be stopped). Its records are
    /// not brought back: restore them from a backup if there is one.
    RepairPartition {
        /// The data directory.
        data_dir: PathBuf,
        /// The topic.
        #[arg(long)]
        topic: String,
        /// The lost partition.
        #[arg(long)]
        partition: u32,
        /// The offset the next record gets: past every offset the lost
        /// partition handed out (see `groups` for the committed ones).
        #[arg(long)]
        start_offset: u64,
    },
}

/// `--fsync` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Fsync {
    Always,
    Interval,
    Never,
}

fn print<T: Serialize>(
    json: bool,
    value: &T,
    text: impl FnOnce(&T) -> String,
) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(value)?);
    } else {
        print!("{}", text(value));
    }
    Ok(())
}

/// Runs the command; `Ok(false)` when it found a problem in the data.
fn run(cli: Cli) -> anyhow::Result<bool> {
    let json = cli.json;
    match cli.command {
        Command::Segments {
            data_dir,
            topic,
            partition,
        } => {
            let report = segments::segments(&data_dir, topic.as_deref(), partition)?;
            print(json, &report, |r| segments::render(r))?;
            Ok(true)
        }
        Command::Dump {
            data_dir,
            topic,
            partition,
            from,
            max,
            records,
        } => {
            let request = dump::DumpRequest {
                topic: &topic,
                partition,
                from,
                max_records: max,
                records,
            };
            let report = dump::dump(&data_dir, request)?;
            print(json, &report, dump::render)?;
            Ok(report.problem.is_none())
        }
        Command::Verify { data_dir, topic } => {
            let report = verify::verify(&data_dir, topic.as_deref())?;
            print(json, &report, verify::render)?;
            Ok(report.clean)
        }
        Command::Groups { data_dir } => {
            let report = groups::groups(&data_dir)?;
            print(json, &report, |r| groups::render(r))?;
            Ok(true)
        }
        Command::RepairTopic {
            data_dir,
            topic,
            retention_ms,
            fsync,
        } => {
            let config = TopicConfig {
                retention_ms,
                fsync: match fsync {
                    Fsync::Always => FsyncPolicy::Always,
                    Fsync::Interval => FsyncPolicy::Interval,
                    Fsync::Never => FsyncPolicy::Never,
                },
                ..TopicConfig::default()
            };
            let meta = kappa_log::repair::rebuild_topic_meta(&data_dir, &topic, config)?;
            print(json, &meta, |m| {
                format!(
                    "rebuilt topics/{}/topic.json: {} partitions, retention_ms {:?}, fsync {:?}\n",
                    m.name, m.config.partitions, m.config.retention_ms, m.config.fsync
                )
            })?;
            Ok(true)
        }
        Command::RepairPartition {
            data_dir,
            topic,
            partition,
            start_offset,
        } => {
            let segment =
                kappa_log::repair::recreate_partition(&data_dir, &topic, partition, start_offset)?;
            #[derive(Serialize)]
            struct Recreated {
                segment: PathBuf,
                start_offset: u64,
            }
            let report = Recreated {
                segment,
                start_offset,
            };
            print(json, &report, |r| {
                format!(
                    "recreated topics/{topic}/{partition} empty ({}): the next record gets offset {}\n",
                    r.segment.display(),
                    r.start_offset
                )
            })?;
            Ok(true)
        }
    }
}

fn main() {
    match run(Cli::parse()) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("kappa-inspect: {e:#}");
            std::process::exit(2);
        }
    }
}
