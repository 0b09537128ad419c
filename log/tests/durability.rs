//! Durability: a child process appends with `fsync = always` from several
//! tasks and is SIGKILLed mid-way; a fresh open finds every append that was
//! acknowledged, at the offsets it was given, and offsets are dense.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use bytes::Bytes;
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, NewRecord, TopicConfig};

const CHILD_ENV: &str = "KAPPA_DURABILITY_CHILD_DIR";
const ACKS_BEFORE_KILL: usize = 2000;

fn value(writer: usize, seq: usize, i: usize) -> Bytes {
    Bytes::from(format!("writer {writer} append {seq} record {i}"))
}

/// The child: appends forever from 4 tasks, printing each acknowledgement.
fn child(dir: String) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async move {
        let log = Log::open(LogConfig::new(dir)).unwrap();
        let config = TopicConfig {
            partitions: 2,
            segment_bytes: 64 * 1024,
            fsync: FsyncPolicy::Always,
            ..Default::default()
        };
        let topic = log.create_topic("t", config).unwrap();
        let mut tasks = Vec::new();
        for writer in 0..4usize {
            let topic = topic.clone();
            tasks.push(tokio::spawn(async move {
                for seq in 0.. {
                    let partition = (writer + seq) % 2;
                    let records = (0..1 + seq % 5)
                        .map(|i| NewRecord::value(value(writer, seq, i)))
                        .collect::<Vec<_>>();
                    let n = records.len();
                    let request = AppendRequest {
                        records,
                        idempotency_key: None,
                        as_sent: None,
                    };
                    let outcome = topic
                        .partition(partition as u32)
                        .unwrap()
                        .append(request)
                        .await
                        .unwrap();
                    println!("ack {writer} {seq} {partition} {} {n}", outcome.base_offset);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
    });
}

#[test]
fn acknowledged_appends_survive_sigkill() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        child(dir);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "acknowledged_appends_survive_sigkill",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acks = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        let Some(rest) = line.strip_prefix("ack ") else {
            continue;
        };
        let f: Vec<u64> = rest.split(' ').map(|x| x.parse().unwrap()).collect();
        acks.push((
            f[0] as usize,
            f[1] as usize,
            f[2] as u32,
            f[3],
            f[4] as usize,
        ));
        if acks.len() == ACKS_BEFORE_KILL {
            child.kill().unwrap(); // SIGKILL
            break;
        }
    }
    child.wait().unwrap();
    assert_eq!(acks.len(), ACKS_BEFORE_KILL, "the child stopped early");

    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.topic("t").unwrap();
    for (writer, seq, partition, base, n) in acks {
        let p = topic.partition(partition).unwrap();
        let fetch = p.read(base, n as u64, u64::MAX).unwrap();
        let got: Vec<_> = fetch.records().collect();
        assert_eq!(got.len(), n, "append {writer}/{seq} at {partition}:{base}");
        for (i, r) in got.iter().enumerate() {
            assert_eq!(r.offset, base + i as u64);
            assert_eq!(
                r.value,
                value(writer, seq, i),
                "record {partition}:{}",
                r.offset
            );
        }
    }
    for p in topic.partitions() {
        // Dense: every offset up to the end reads back, in order.
        let fetch = p.read(0, u64::MAX, u64::MAX).unwrap();
        let offsets: Vec<u64> = fetch.records().map(|r| r.offset).collect();
        assert_eq!(offsets, (0..p.end_offset()).collect::<Vec<_>>());
        // Appends continue after the recovered end.
        let end = p.end_offset();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let outcome = rt.block_on(p.append(AppendRequest {
            records: vec![NewRecord::value("after")],
            idempotency_key: None,
            as_sent: None,
        }));
        assert_eq!(outcome.unwrap().base_offset, end);
    }
}
