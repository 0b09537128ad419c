//! `kappa topics`: list, create, describe and delete topics.

use std::io::Write;

use anyhow::bail;
use indicatif::HumanBytes;
use kappa_wire::{
    AlterTopic, CleanupPolicyType, CompressionType, CreateTopic, FsyncPolicy, TopicOut, TopicsOut,
};
use serde_json::{Map, Value};

use super::http::{self, segment, Client};
use super::table::{Align, Table};

/// Topic subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum TopicsCommand {
    /// List topics with their partition count, end offsets and size.
    List {
        /// Print the server's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Create a topic (unset options take the server's defaults).
    Create(CreateArgs),
    /// Show a topic's configuration and per-partition offsets and size.
    Describe {
        /// Topic name.
        name: String,
        /// Print the server's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Change a topic's retention (the next retention pass applies it).
    Alter(AlterArgs),
    /// Delete a topic, its data and every group's committed offsets for it.
    Delete {
        /// Topic name.
        name: String,
    },
}

/// A size or age limit: a number, or `none` for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No limit (sent as JSON `null`).
    Unlimited,
    /// This many milliseconds or bytes.
    Value(u64),
}

impl Limit {
    /// The limit as a request field: `None` for no limit (JSON `null`).
    pub fn value(self) -> Option<u64> {
        match self {
            Limit::Unlimited => None,
            Limit::Value(v) => Some(v),
        }
    }
}

/// Parses a [`Limit`]: a non-negative integer or `none`.
pub fn parse_limit(text: &str) -> Result<Limit, String> {
    match text {
        "none" => Ok(Limit::Unlimited),
        _ => text
            .parse()
            .map(Limit::Value)
            .map_err(|_| format!("expected a non-negative integer or `none`, got {text:?}")),
    }
}

/// When appended records reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fsync {
    /// Before each produce request is answered.
    Always,
    /// Every `--fsync-interval-ms`.
    Interval,
    /// Left to the operating system.
    Never,
}

/// How a topic's batches are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Codec {
    /// As encoded.
    None,
    /// Compressed with zstd.
    Zstd,
    /// Compressed with lz4.
    Lz4,
}

impl Codec {
    fn wire(self) -> CompressionType {
        match self {
            Codec::None => CompressionType::None,
            Codec::Zstd => CompressionType::Zstd,
            Codec::Lz4 => CompressionType::Lz4,
        }
    }
}

/// What happens to a topic's old records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Cleanup {
    /// Retention deletes old segments.
    Delete,
    /// The latest record of each key is kept.
    Compact,
    /// Both.
    #[value(name = "compact,delete")]
    CompactDelete,
}

impl Cleanup {
    fn wire(self) -> CleanupPolicyType {
        match self {
            Cleanup::Delete => CleanupPolicyType::Delete,
            Cleanup::Compact => CleanupPolicyType::Compact,
            Cleanup::CompactDelete => CleanupPolicyType::CompactDelete,
        }
    }
}

/// Arguments of `kappa topics create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    /// Topic name: 1 to 249 characters of [A-Za-z0-9._-].
    pub name: String,
    /// Number of partitions.
    #[arg(long)]
    pub partitions: Option<u32>,
    /// Delete segments older than this many milliseconds (`none`: keep forever).
    #[arg(long, value_parser = parse_limit)]
    pub retention_ms: Option<Limit>,
    /// Delete old segments while a partition is larger than this (`none`: no size limit).
    #[arg(long, value_parser = parse_limit)]
    pub retention_bytes: Option<Limit>,
    /// Roll a new segment when the active one reaches this size.
    #[arg(long)]
    pub segment_bytes: Option<u64>,
    /// Roll a new segment when the active one is this old.
    #[arg(long)]
    pub segment_ms: Option<u64>,
    /// When appended records are flushed to disk.
    #[arg(long, value_enum)]
    pub fsync: Option<Fsync>,
    /// Flush period for `--fsync interval`.
    #[arg(long)]
    pub fsync_interval_ms: Option<u64>,
    /// Store batches compressed.
    #[arg(long, value_enum)]
    pub compression: Option<Codec>,
    /// Keep the latest record of each key (`compact`), delete by retention
    /// (`delete`, the default), or both (`compact,delete`).
    #[arg(long, value_enum)]
    pub cleanup_policy: Option<Cleanup>,
    /// How long a compacted topic keeps tombstones (ms; default 1 day).
    #[arg(long)]
    pub delete_retention_ms: Option<u64>,
    /// How long a record stays uncompacted (ms; default 0).
    #[arg(long)]
    pub min_compaction_lag_ms: Option<u64>,
    /// Move sealed segments to tiered storage once this old, ms (needs the server's tiered_storage_url).
    #[arg(long)]
    pub local_retention_ms: Option<u64>,
    /// Move the oldest sealed segments to tiered storage while a partition's local bytes exceed this.
    #[arg(long)]
    pub local_retention_bytes: Option<u64>,
    /// Keep only each partition's newest this-many bytes in the page cache (with `--fsync always`).
    #[arg(long)]
    pub cached_tail_bytes: Option<u64>,
}

/// Arguments of `kappa topics alter`.
#[derive(Debug, clap::Args)]
pub struct AlterArgs {
    /// Topic name.
    pub name: String,
    /// Delete segments older than this many milliseconds (`none`: keep forever).
    #[arg(long, value_parser = parse_limit)]
    pub retention_ms: Option<Limit>,
    /// Delete old segments while a partition is larger than this (`none`: no size limit).
    #[arg(long, value_parser = parse_limit)]
    pub retention_bytes: Option<Limit>,
    /// Store the batches appended from now on compressed (or not).
    #[arg(long, value_enum)]
    pub compression: Option<Codec>,
    /// Keep the latest record of each key (`compact`), delete by retention
    /// (`delete`), or both (`compact,delete`).
    #[arg(long, value_enum)]
    pub cleanup_policy: Option<Cleanup>,
    /// How long a compacted topic keeps tombstones (ms).
    #[arg(long)]
    pub delete_retention_ms: Option<u64>,
    /// How long a record stays uncompacted (ms).
    #[arg(long)]
    pub min_compaction_lag_ms: Option<u64>,
    /// Move sealed segments to tiered storage once this old, ms (`none`: keep them local).
    #[arg(long, value_parser = parse_limit)]
    pub local_retention_ms: Option<Limit>,
    /// Move the oldest sealed segments to tiered storage while a partition's local bytes exceed this (`none`: no limit).
    #[arg(long, value_parser = parse_limit)]
    pub local_retention_bytes: Option<Limit>,
    /// Keep only each partition's newest this-many bytes in the page cache (`none`: leave it to the operating system).
    #[arg(long, value_parser = parse_limit)]
    pub cached_tail_bytes: Option<Limit>,
}

impl TopicsCommand {
    /// The existing topic this command names (not `create`'s new one).
    pub fn topic(&self) -> Option<&str> {
        match self {
            TopicsCommand::Describe { name, .. } | TopicsCommand::Delete { name, .. } => Some(name),
            TopicsCommand::Alter(args) => Some(&args.name),
            TopicsCommand::List { .. } | TopicsCommand::Create(_) => None,
        }
    }
}

/// Runs a topics subcommand, printing to `out`.
pub fn run(client: &Client, command: TopicsCommand, out: &mut dyn Write) -> anyhow::Result<()> {
    match command {
        TopicsCommand::List { json } => {
            let body = client.get("/v1/topics", &[])?;
            if json {
                writeln!(out, "{}", body.trim_end())?;
            } else {
                let list: TopicsOut = http::parse("/v1/topics", &body)?;
                out.write_all(render_list(&list.topics).as_bytes())?;
            }
        }
        TopicsCommand::Create(args) => {
            let body = client.post_json("/v1/topics", &create_body(&args))?;
            let topic: TopicOut = http::parse("/v1/topics", &body)?;
            let n = topic.partitions.len();
            writeln!(
                out,
                "created topic {} with {n} partition{}",
                topic.name,
                plural(n)
            )?;
        }
        TopicsCommand::Describe { name, json } => {
            let path = topic_path(&name);
            let body = client.get(&path, &[])?;
            if json {
                writeln!(out, "{}", body.trim_end())?;
            } else {
                let topic: TopicOut = http::parse(&path, &body)?;
                out.write_all(render_description(&topic).as_bytes())?;
            }
        }
        TopicsCommand::Alter(args) => {
            let body = AlterTopic {
                retention_ms: args.retention_ms.map(Limit::value),
                retention_bytes: args.retention_bytes.map(Limit::value),
                compression_type: args.compression.map(Codec::wire),
                cleanup_policy: args.cleanup_policy.map(Cleanup::wire),
                delete_retention_ms: args.delete_retention_ms.map(Some),
                min_compaction_lag_ms: args.min_compaction_lag_ms.map(Some),
                local_retention_ms: args.local_retention_ms.map(Limit::value),
                local_retention_bytes: args.local_retention_bytes.map(Limit::value),
                cached_tail_bytes: args.cached_tail_bytes.map(Limit::value),
            };
            if serde_json::to_value(&body)?
                .as_object()
                .is_some_and(|fields| fields.is_empty())
            {
                bail!("nothing to change: give --retention-ms, --retention-bytes, --compression, --cleanup-policy, --delete-retention-ms, --min-compaction-lag-ms, --local-retention-ms, --local-retention-bytes or --cached-tail-bytes");
            }
            let path = topic_path(&args.name);
            let answer = client.patch_json(&path, &serde_json::to_value(body)?)?;
            let topic: TopicOut = http::parse(&path, &answer)?;
            out.write_all(render_description(&topic).as_bytes())?;
        }
        TopicsCommand::Delete { name } => {
            client.delete(&topic_path(&name))?;
            writeln!(out, "deleted topic {name}")?;
        }
    }
    Ok(())
}

/// Fetches a topic's description.
pub fn describe(client: &Client, name: &str) -> anyhow::Result<TopicOut> {
    let topic: TopicOut = client.get_json(&topic_path(name), &[])?;
    if topic.partitions.is_empty() {
        bail!("topic {name:?} has no partitions");
    }
    Ok(topic)
}

/// The API path of a topic.
pub fn topic_path(name: &str) -> String {
    format!("/v1/topics/{}", segment(name))
}

/// The JSON body of `POST /v1/topics`: the name and only the options given.
pub fn create_body(args: &CreateArgs) -> Value {
    let body = CreateTopic {
        name: args.name.clone(),
        partitions: args.partitions,
        segment_bytes: args.segment_bytes,
        segment_ms: args.segment_ms,
        retention_ms: args.retention_ms.map(Limit::value),
        retention_bytes: args.retention_bytes.map(Limit::value),
        fsync: args.fsync.map(|f| match f {
            Fsync::Always => FsyncPolicy::Always,
            Fsync::Interval => FsyncPolicy::Interval,
            Fsync::Never => FsyncPolicy::Never,
        }),
        fsync_interval_ms: args.fsync_interval_ms,
        compression_type: args.compression.map(Codec::wire),
        cleanup_policy: args.cleanup_policy.map(Cleanup::wire),
        delete_retention_ms: args.delete_retention_ms,
        min_compaction_lag_ms: args.min_compaction_lag_ms,
        local_retention_ms: args.local_retention_ms,
        local_retention_bytes: args.local_retention_bytes,
        cached_tail_bytes: args.cached_tail_bytes,
    };
    serde_json::to_value(body).expect("a request serializes")
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The `topics list` table.
pub fn render_list(topics: &[TopicOut]) -> String {
    let mut table = Table::new(&[
        ("TOPIC", Align::Left),
        ("PARTITIONS", Align::Right),
        ("END_OFFSETS", Align::Right),
        ("BYTES", Align::Right),
    ]);
    for topic in topics {
        let ends: u64 = topic.partitions.iter().map(|p| p.end_offset).sum();
        let bytes: u64 = topic.partitions.iter().map(|p| p.bytes).sum();
        table.row(vec![
            topic.name.clone(),
            topic.partitions.len().to_string(),
            ends.to_string(),
            HumanBytes(bytes).to_string(),
        ]);
    }
    table.render()
}

/// The `topics describe` output: name, configuration line, partition table.
pub fn render_description(topic: &TopicOut) -> String {
    const ORDER: [&str; 14] = [
        "partitions",
        "segment_bytes",
        "segment_ms",
        "retention_ms",
        "retention_bytes",
        "fsync",
        "fsync_interval_ms",
        "compression_type",
        "cleanup_policy",
        "delete_retention_ms",
        "min_compaction_lag_ms",
        "local_retention_ms",
        "local_retention_bytes",
        "cached_tail_bytes",
    ];
    let config = match serde_json::to_value(&topic.config) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let known = ORDER.iter().filter_map(|k| config.get_key_value(*k));
    let others = config.iter().filter(|(k, _)| !ORDER.contains(&k.as_str()));
    let config: Vec<String> = known
        .chain(others)
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}={s}"),
            _ => format!("{k}={v}"),
        })
        .collect();
    let mut table = Table::new(&[
        ("PARTITION", Align::Right),
        ("START", Align::Right),
        ("END", Align::Right),
        ("BYTES", Align::Right),
        ("SEGMENTS", Align::Right),
    ]);
    for p in &topic.partitions {
        table.row(vec![
            p.partition.to_string(),
            p.start_offset.to_string(),
            p.end_offset.to_string(),
            HumanBytes(p.bytes).to_string(),
            p.segment_count.to_string(),
        ]);
    }
    let mut out = format!("topic: {}\n", topic.name);
    if !config.is_empty() {
        out.push_str(&format!("config: {}\n", config.join(" ")));
    }
    out + &table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};
    use crate::cli::ClientCommand;
    use clap::Parser;
    use serde_json::json;

    const DESCRIPTION: &str = r#"{"name": "orders",
        "config": {"partitions": 2, "segment_bytes": 134217728, "segment_ms": 604800000,
                   "retention_ms": 604800000, "retention_bytes": null, "fsync": "always", "fsync_interval_ms": 100},
        "partitions": [{"partition": 0, "start_offset": 0, "end_offset": 42, "bytes": 8190, "segment_count": 1},
                       {"partition": 1, "start_offset": 5, "end_offset": 7, "bytes": 100, "segment_count": 2}]}"#;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(subcommand)]
        command: ClientCommand,
    }

    fn parse_create(args: &[&str]) -> CreateArgs {
        let argv = ["kappa", "topics", "create"].iter().chain(args);
        match Cli::try_parse_from(argv).unwrap().command {
            ClientCommand::Topics(TopicsCommand::Create(args)) => args,
            other => panic!("parsed {other:?}"),
        }
    }

    #[test]
    fn create_body_has_only_the_given_options() {
        assert_eq!(
            create_body(&parse_create(&["orders"])),
            json!({"name": "orders"})
        );
        let args = parse_create(&[
            "orders",
            "--partitions=3",
            "--retention-ms=none",
            "--retention-bytes=1000",
            "--fsync=interval",
            "--fsync-interval-ms=50",
        ]);
        assert_eq!(
            create_body(&args),
            json!({"name": "orders", "partitions": 3, "retention_ms": null,
                   "retention_bytes": 1000, "fsync": "interval", "fsync_interval_ms": 50})
        );
    }

    #[test]
    fn rejects_bad_limits_and_fsync() {
        assert!(parse_limit("-1").is_err());
        assert_eq!(parse_limit("none"), Ok(Limit::Unlimited));
        let argv = ["kappa", "topics", "create", "t", "--fsync", "sometimes"];
        assert!(Cli::try_parse_from(argv).is_err());
    }

    #[test]
    fn renders_list_and_description() {
        let topic: TopicOut = serde_json::from_str(DESCRIPTION).unwrap();
        assert_eq!(
            render_list(std::slice::from_ref(&topic)),
            "TOPIC   PARTITIONS  END_OFFSETS     BYTES\n\
             orders           2           49  8.10 KiB\n"
        );
        assert_eq!(
            render_description(&topic),
            "topic: orders\n\
             config: partitions=2 segment_bytes=134217728 segment_ms=604800000 \
             retention_ms=604800000 retention_bytes=null fsync=always fsync_interval_ms=100 \
             compression_type=none cleanup_policy=delete delete_retention_ms=0 \
             min_compaction_lag_ms=0 local_retention_ms=null local_retention_bytes=null cached_tail_bytes=null\n\
             PARTITION  START  END     BYTES  SEGMENTS\n\
             \x20       0      0   42  8.00 KiB         1\n\
             \x20       1      5    7     100 B         2\n"
        );
    }

    #[test]
    fn describe_json_prints_the_raw_answer_and_errors_are_decoded() {
        let server = FakeServer::start(vec![
            Canned::json(200, DESCRIPTION),
            Canned::json(
                404,
                r#"{"error":{"code":"unknown_topic","message":"topic \"nope\" does not exist"}}"#,
            ),
        ]);
        let client = Client::new(&server.url);
        let mut out = Vec::new();
        let describe = |name: &str| TopicsCommand::Describe {
            name: name.into(),
            json: true,
        };
        run(&client, describe("orders"), &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), format!("{DESCRIPTION}\n"));
        let error = run(&client, describe("nope"), &mut Vec::new()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "error: unknown_topic: topic \"nope\" does not exist"
        );
        assert_eq!(server.requests()[1].target, "/v1/topics/nope");
    }

    #[test]
    fn create_posts_json_and_delete_sends_delete() {
        let server = FakeServer::start(vec![Canned::json(201, DESCRIPTION), Canned::json(204, "")]);
        let client = Client::new(&server.url);
        let mut out = Vec::new();
        let create = TopicsCommand::Create(parse_create(&["orders", "--partitions", "2"]));
        run(&client, create, &mut out).unwrap();
        run(
            &client,
            TopicsCommand::Delete {
                name: "orders".into(),
            },
            &mut out,
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "created topic orders with 2 partitions\ndeleted topic orders\n"
        );
        let requests = server.requests();
        assert_eq!(requests[0].method, "POST");
        assert_eq!(requests[0].header("content-type"), Some("application/json"));
        let body: Value = serde_json::from_str(&requests[0].body).unwrap();
        assert_eq!(body, json!({"name": "orders", "partitions": 2}));
        assert_eq!(
            (requests[1].method.as_str(), requests[1].target.as_str()),
            ("DELETE", "/v1/topics/orders")
        );
    }
}
