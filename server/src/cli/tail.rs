//! `kappa tail`: print records as they arrive, one JSON object per line.
//!
//! Without `--group`, one thread per partition long-polls the partition read
//! endpoint and hands batches to the printing thread. With `--group`, a single
//! loop long-polls the group read endpoint and commits after printing each batch
//! (at-least-once).

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::mpsc::{self, SyncSender};
use std::thread;

use anyhow::bail;
use kappa_wire::TopicOut;
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

use super::http::{segment, Client};
use super::topics;

/// How long one read waits for records to arrive (the server allows up to 30 s).
const LONG_POLL_MS: u64 = 10_000;

/// Most records asked for in one read.
const BATCH: u64 = 1000;

/// Where to start reading a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartFrom {
    /// The first record still stored.
    Earliest,
    /// The end: only records appended from now on.
    Latest,
    /// The first record with a timestamp at or after this many ms since the epoch.
    Timestamp(u64),
}

/// Parses `--from`: `earliest`, `latest` or a timestamp in milliseconds.
pub fn parse_from(text: &str) -> Result<StartFrom, String> {
    match text {
        "earliest" => Ok(StartFrom::Earliest),
        "latest" => Ok(StartFrom::Latest),
        _ => text.parse().map(StartFrom::Timestamp).map_err(|_| {
            format!("expected `earliest`, `latest` or a timestamp in milliseconds, got {text:?}")
        }),
    }
}

/// Arguments of `kappa tail`.
#[derive(Debug, clap::Args)]
pub struct TailArgs {
    /// Topic to read.
    pub topic: String,
    /// Read only this partition (default: all partitions).
    #[arg(long, conflicts_with = "group")]
    pub partition: Option<u32>,
    /// Where to start: `earliest`, `latest` or a timestamp in ms since the epoch.
    #[arg(long, default_value = "latest", value_parser = parse_from, conflicts_with = "group")]
    pub from: StartFrom,
    /// Read from this consumer group's positions and commit after printing each batch.
    #[arg(long)]
    pub group: Option<String>,
    /// Stop after printing this many records.
    #[arg(long)]
    pub max: Option<u64>,
    /// Stop at the end offsets the topic has when the command starts.
    #[arg(long)]
    pub no_follow: bool,
}

/// A record in a read answer (`partition` only in group reads).
#[derive(Deserialize)]
struct Record {
    partition: Option<u32>,
    offset: u64,
    timestamp: i64,
    key: Option<Box<RawValue>>,
    value: Box<RawValue>,
    headers: Option<Box<RawValue>>,
}

/// One output line; the field order is the documented one.
#[derive(Serialize)]
struct Line<'a> {
    partition: u32,
    offset: u64,
    timestamp: i64,
    key: Option<&'a RawValue>,
    value: &'a RawValue,
    headers: &'a RawValue,
}

/// Formats a record as the JSON line `tail` prints; `value`, `key` and
/// `headers` are copied as the server sent them.
fn format_record(partition: u32, record: &Record) -> anyhow::Result<String> {
    let no_headers = RawValue::from_string("{}".to_string())?;
    let line = Line {
        partition,
        offset: record.offset,
        timestamp: record.timestamp,
        key: record.key.as_deref(),
        value: &record.value,
        headers: record.headers.as_deref().unwrap_or(&no_headers),
    };
    Ok(serde_json::to_string(&line)?)
}

/// Writes lines until `--max` is reached.
struct Sink<'a> {
    out: &'a mut dyn Write,
    remaining: Option<u64>,
}

impl Sink<'_> {
    fn emit(&mut self, lines: &[String]) -> io::Result<()> {
        for line in lines {
            if self.done() {
                break;
            }
            writeln!(self.out, "{line}")?;
            self.remaining = self.remaining.map(|r| r - 1);
        }
        self.out.flush()
    }

    fn done(&self) -> bool {
        self.remaining == Some(0)
    }

    /// How many records to ask for in the next read.
    fn limit(&self) -> u64 {
        self.remaining.map_or(BATCH, |r| r.min(BATCH))
    }
}

/// Runs `kappa tail`, printing records to `out`. A closed `out` (e.g. piped into
/// `head`) ends the command without error.
pub fn run(client: &Client, args: TailArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    if args.max == Some(0) {
        return Ok(());
    }
    let topic = topics::describe(client, &args.topic)?;
    let mut sink = Sink {
        out,
        remaining: args.max,
    };
    let result = match &args.group {
        Some(group) => tail_group(client, &args, &topic, group, &mut sink),
        None => tail_partitions(client, &args, &topic, &mut sink),
    };
    match result {
        Err(e)
            if e.downcast_ref::<io::Error>().map(io::Error::kind)
                == Some(io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        other => other,
    }
}

fn tail_partitions(
    client: &Client,
    args: &TailArgs,
    topic: &TopicOut,
    sink: &mut Sink,
) -> anyhow::Result<()> {
    let chosen: Vec<_> = match args.partition {
        None => topic.partitions.iter().collect(),
        Some(p) => match topic.partitions.iter().find(|info| info.partition == p) {
            Some(info) => vec![info],
            None => bail!(
                "topic {:?} has no partition {p} (it has {})",
                topic.name,
                topic.partitions.len()
            ),
        },
    };
    let (tx, rx) = mpsc::sync_channel(16);
    for info in chosen {
        let reader = PartitionReader {
            client: client.clone(),
            path: format!(
                "{}/partitions/{}/records",
                topics::topic_path(&topic.name),
                info.partition
            ),
            partition: info.partition,
            from: args.from,
            stop_at: args.no_follow.then_some(info.end_offset),
            limit: sink.limit(),
        };
        let tx = tx.clone();
        thread::spawn(move || reader.run(tx));
    }
    drop(tx);
    for batch in rx {
        sink.emit(&batch?)?;
        if sink.done() {
            break;
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct ReadAnswer {
    records: Vec<Record>,
    next_offset: u64,
}

/// Reads one partition in a loop and sends formatted lines to the printer.
struct PartitionReader {
    client: Client,
    path: String,
    partition: u32,
    from: StartFrom,
    stop_at: Option<u64>,
    limit: u64,
}

impl PartitionReader {
    fn run(self, tx: SyncSender<anyhow::Result<Vec<String>>>) {
        if let Err(error) = self.read(&tx) {
            let _ = tx.send(Err(error));
        }
    }

    /// Reads until `stop_at` (or forever), returning early once the printer is gone.
    fn read(&self, tx: &SyncSender<anyhow::Result<Vec<String>>>) -> anyhow::Result<()> {
        let wait = if self.stop_at.is_some() {
            0
        } else {
            LONG_POLL_MS
        };
        let mut start = match self.from {
            StartFrom::Earliest => ("offset", "earliest".to_string()),
            StartFrom::Latest => ("offset", "latest".to_string()),
            StartFrom::Timestamp(ms) => ("from_timestamp", ms.to_string()),
        };
        loop {
            let query = [
                start.clone(),
                ("max_records", self.limit.to_string()),
                ("max_wait_ms", wait.to_string()),
            ];
            let answer: ReadAnswer = self.client.get_json(&self.path, &query)?;
            let end = self.stop_at.unwrap_or(u64::MAX);
            let lines = answer
                .records
                .iter()
                .take_while(|r| r.offset < end)
                .map(|r| format_record(self.partition, r))
                .collect::<anyhow::Result<Vec<_>>>()?;
            if !lines.is_empty() && tx.send(Ok(lines)).is_err() {
                return Ok(());
            }
            if self.stop_at.is_some() && (answer.records.is_empty() || answer.next_offset >= end) {
                return Ok(());
            }
            start = ("offset", answer.next_offset.to_string());
        }
    }
}

#[derive(Deserialize)]
struct GroupAnswer {
    records: Vec<Record>,
    next_offsets: Vec<PartitionOffset>,
}

#[derive(Deserialize)]
struct PartitionOffset {
    partition: u32,
    offset: u64,
}

fn tail_group(
    client: &Client,
    args: &TailArgs,
    topic: &TopicOut,
    group: &str,
    sink: &mut Sink,
) -> anyhow::Result<()> {
    let path = format!(
        "/v1/groups/{}/topics/{}/records",
        segment(group),
        segment(&topic.name)
    );
    let commit_path = format!("/v1/groups/{}/offsets", segment(group));
    let ends: HashMap<u32, u64> = topic
        .partitions
        .iter()
        .filter(|_| args.no_follow)
        .map(|p| (p.partition, p.end_offset))
        .collect();
    let end_of = |partition: u32| ends.get(&partition).copied().unwrap_or(u64::MAX);
    let wait = if args.no_follow { 0 } else { LONG_POLL_MS };
    loop {
        let query = [
            ("max_records", sink.limit().to_string()),
            ("max_wait_ms", wait.to_string()),
        ];
        let answer: GroupAnswer = client.get_json(&path, &query)?;
        let mut lines = Vec::new();
        let mut read = Vec::new();
        for record in &answer.records {
            let partition = record.partition.unwrap_or(0);
            if record.offset < end_of(partition) {
                lines.push(format_record(partition, record)?);
                read.push(partition);
            }
        }
        sink.emit(&lines)?;
        let offsets: Vec<_> = answer
            .next_offsets
            .iter()
            .filter(|o| read.contains(&o.partition))
            .map(|o| json!({"partition": o.partition, "offset": o.offset.min(end_of(o.partition))}))
            .collect();
        if !offsets.is_empty() {
            client.post_json(
                &commit_path,
                &json!({"topic": topic.name, "offsets": offsets}),
            )?;
        }
        let at_end = answer
            .next_offsets
            .iter()
            .all(|o| o.offset >= end_of(o.partition));
        if sink.done() || (args.no_follow && (lines.is_empty() || at_end)) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::testserver::{Canned, FakeServer};
    use serde_json::Value;

    const DESCRIBE: &str = r#"{"name":"t","config":{"partitions":1,"segment_bytes":1,"segment_ms":1,
        "retention_ms":null,"retention_bytes":null,"fsync":"always","fsync_interval_ms":1},"partitions":[
        {"partition":0,"start_offset":0,"end_offset":3,"bytes":1,"segment_count":1}]}"#;

    fn args(extra: &[&str]) -> TailArgs {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            tail: TailArgs,
        }
        let argv = ["tail", "t"].iter().chain(extra);
        <Cli as clap::Parser>::try_parse_from(argv).unwrap().tail
    }

    #[test]
    fn parses_from() {
        assert_eq!(parse_from("earliest"), Ok(StartFrom::Earliest));
        assert_eq!(parse_from("latest"), Ok(StartFrom::Latest));
        assert_eq!(
            parse_from("1767225600000"),
            Ok(StartFrom::Timestamp(1_767_225_600_000))
        );
        assert!(parse_from("-5").is_err());
        assert!(parse_from("yesterday").is_err());
        assert_eq!(args(&[]).from, StartFrom::Latest);
    }

    #[test]
    fn group_conflicts_with_partition_and_from() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            tail: TailArgs,
        }
        let parse =
            |a: &[&str]| <Cli as clap::Parser>::try_parse_from(["tail", "t"].iter().chain(a));
        assert!(parse(&["--group", "g", "--from", "earliest"]).is_err());
        assert!(parse(&["--group", "g", "--partition", "0"]).is_err());
        assert!(parse(&["--group", "g", "--max", "3"]).is_ok());
    }

    #[test]
    fn formats_records_in_field_order_keeping_value_text() {
        let record: Record = serde_json::from_str(
            r#"{"offset": 17, "timestamp": 5, "key": null, "value": {"z": 1, "a": 12345678901234567890123}, "headers": {"h": "v"}}"#,
        )
        .unwrap();
        assert_eq!(
            format_record(2, &record).unwrap(),
            r#"{"partition":2,"offset":17,"timestamp":5,"key":null,"value":{"z": 1, "a": 12345678901234567890123},"headers":{"h": "v"}}"#
        );
    }

    #[test]
    fn no_follow_reads_to_the_end_from_earliest() {
        let server = FakeServer::start(vec![
            Canned::json(200, DESCRIBE),
            Canned::json(
                200,
                r#"{"topic":"t","partition":0,"records":[
                {"offset":0,"timestamp":1,"key":"a","value":1,"headers":{}},
                {"offset":1,"timestamp":2,"key":null,"value":"x","headers":{}}],
                "next_offset":2,"high_watermark":3,"start_offset":0}"#,
            ),
            Canned::json(
                200,
                r#"{"topic":"t","partition":0,"records":[
                {"offset":2,"timestamp":3,"key":null,"value":[],"headers":{}},
                {"offset":3,"timestamp":4,"key":null,"value":"after end","headers":{}}],
                "next_offset":4,"high_watermark":4,"start_offset":0}"#,
            ),
        ]);
        let mut out = Vec::new();
        run(
            &Client::new(&server.url),
            args(&["--from", "earliest", "--no-follow"]),
            &mut out,
        )
        .unwrap();
        let lines: Vec<Value> = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["key"], "a");
        assert_eq!(lines[2]["offset"], 2);
        let requests = server.requests();
        assert_eq!(
            requests[1].target,
            "/v1/topics/t/partitions/0/records?offset=earliest&max_records=1000&max_wait_ms=0"
        );
        assert_eq!(
            requests[2].target,
            "/v1/topics/t/partitions/0/records?offset=2&max_records=1000&max_wait_ms=0"
        );
    }

    #[test]
    fn follow_long_polls_from_a_timestamp_and_stops_at_max() {
        let server = FakeServer::start(vec![
            Canned::json(200, DESCRIBE),
            Canned::json(200, r#"{"records":[],"next_offset":3}"#),
            Canned::json(
                200,
                r#"{"records":[
                {"offset":3,"timestamp":9,"key":null,"value":1,"headers":{}},
                {"offset":4,"timestamp":9,"key":null,"value":2,"headers":{}}],"next_offset":5}"#,
            ),
        ]);
        let mut out = Vec::new();
        let tail = args(&["--partition", "0", "--from", "77", "--max", "1"]);
        run(&Client::new(&server.url), tail, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"partition\":0,\"offset\":3,\"timestamp\":9,\"key\":null,\"value\":1,\"headers\":{}}\n"
        );
        let requests = server.requests();
        assert_eq!(
            requests[1].target,
            "/v1/topics/t/partitions/0/records?from_timestamp=77&max_records=1&max_wait_ms=10000"
        );
        assert_eq!(
            requests[2].target,
            "/v1/topics/t/partitions/0/records?offset=3&max_records=1&max_wait_ms=10000"
        );
    }

    #[test]
    fn group_mode_commits_after_printing() {
        let server = FakeServer::start(vec![
            Canned::json(200, DESCRIBE),
            Canned::json(
                200,
                r#"{"group":"g","topic":"t","records":[
                {"partition":0,"offset":1,"timestamp":1,"key":null,"value":1,"headers":{}}],
                "next_offsets":[{"partition":0,"offset":2}]}"#,
            ),
            Canned::json(
                200,
                r#"{"group":"g","topic":"t","offsets":[{"partition":0,"offset":2}]}"#,
            ),
            Canned::json(
                200,
                r#"{"group":"g","topic":"t","records":[],
                "next_offsets":[{"partition":0,"offset":2}]}"#,
            ),
        ]);
        let mut out = Vec::new();
        run(
            &Client::new(&server.url),
            args(&["--group", "my g", "--no-follow"]),
            &mut out,
        )
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap().lines().count(), 1);
        let requests = server.requests();
        assert_eq!(requests.len(), 4);
        assert_eq!(
            requests[1].target,
            "/v1/groups/my%20g/topics/t/records?max_records=1000&max_wait_ms=0"
        );
        assert_eq!(
            (requests[2].method.as_str(), requests[2].target.as_str()),
            ("POST", "/v1/groups/my%20g/offsets")
        );
        let body: Value = serde_json::from_str(&requests[2].body).unwrap();
        assert_eq!(
            body,
            json!({"topic": "t", "offsets": [{"partition": 0, "offset": 2}]})
        );
    }

    #[test]
    fn unknown_partition_is_reported() {
        let server = FakeServer::start(vec![Canned::json(200, DESCRIBE)]);
        let error = run(
            &Client::new(&server.url),
            args(&["--partition", "5"]),
            &mut Vec::new(),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "topic \"t\" has no partition 5 (it has 1)"
        );
    }
}
