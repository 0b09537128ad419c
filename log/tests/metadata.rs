//! A start never destroys metadata or the records it describes: a missing
//! or damaged `topic.json` refuses the open (naming the file and the
//! repair), and the repair rebuilds it without touching a record.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::path::Path;

use bytes::Bytes;
use kappa_log::{AppendRequest, Log, LogConfig, LogError, NewRecord, TopicConfig};

async fn topic_with_records(dir: &Path, partitions: u32) {
    let log = Log::open(LogConfig::new(dir)).unwrap();
    let config = TopicConfig {
        partitions,
        retention_ms: None,
        ..Default::default()
    };
    let topic = log.create_topic("orders", config).unwrap();
    for p in 0..partitions {
        let request = AppendRequest {
            records: (0..5)
                .map(|i| NewRecord {
                    value: Bytes::from(format!("{{\"p\":{p},\"i\":{i}}}")),
                    ..Default::default()
                })
                .collect(),
            idempotency_key: None,
            as_sent: None,
        };
        topic.partition(p).unwrap().append(request).await.unwrap();
    }
}

/// Every file under `dir`, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in walk(dir) {
        out.push((entry.display().to_string(), std::fs::read(&entry).unwrap()));
    }
    out.sort();
    out
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

fn assert_refused(dir: &Path, problem_has: &str) {
    let meta = dir.join("topics/orders/topic.json");
    match Log::open(LogConfig::new(dir)) {
        Err(e @ LogError::Metadata { .. }) => {
            let LogError::Metadata {
                path,
                problem,
                recovery,
            } = &e
            else {
                unreachable!()
            };
            assert_eq!(path, &meta);
            assert!(problem.contains(problem_has), "{problem}");
            assert!(
                recovery.contains("kappa-inspect repair-topic"),
                "{recovery}"
            );
            assert!(recovery.contains("--topic orders"), "{recovery}");
            assert!(e.to_string().contains("Nothing was changed"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_topic_json_refuses_the_start_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    topic_with_records(dir.path(), 2).await;
    std::fs::remove_file(dir.path().join("topics/orders/topic.json")).unwrap();
    let before = files(&dir.path().join("topics"));
    assert_refused(dir.path(), "missing");
    assert_refused(dir.path(), "missing");
    assert_eq!(files(&dir.path().join("topics")), before, "nothing changed");
}

#[tokio::test]
async fn a_damaged_topic_json_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    topic_with_records(dir.path(), 1).await;
    let meta = dir.path().join("topics/orders/topic.json");
    std::fs::write(&meta, b"{\"name\": \"orders\", \"conf").unwrap();
    assert_refused(dir.path(), "not a valid topic.json");
    assert_eq!(
        std::fs::read(&meta).unwrap(),
        b"{\"name\": \"orders\", \"conf"
    );
}

#[tokio::test]
async fn an_unfinished_creation_with_no_records_is_still_cleaned_up() {
    let dir = tempfile::tempdir().unwrap();
    {
        let log = Log::open(LogConfig::new(dir.path())).unwrap();
        log.create_topic("orders", TopicConfig::default()).unwrap();
    }
    std::fs::remove_file(dir.path().join("topics/orders/topic.json")).unwrap();
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    assert!(log.topic("orders").is_err());
    assert!(!dir.path().join("topics/orders").exists());
}

#[tokio::test]
async fn the_repair_rebuilds_topic_json_and_every_record_reads_again() {
    let dir = tempfile::tempdir().unwrap();
    topic_with_records(dir.path(), 3).await;
    let meta = dir.path().join("topics/orders/topic.json");
    std::fs::write(&meta, b"garbage").unwrap();
    let config = TopicConfig {
        retention_ms: None,
        ..Default::default()
    };
    let rebuilt = kappa_log::repair::rebuild_topic_meta(dir.path(), "orders", config).unwrap();
    assert_eq!(rebuilt.config.partitions, 3);
    let kept: Vec<_> = std::fs::read_dir(dir.path().join("topics/orders"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("topic.json.damaged-"))
        .collect();
    assert_eq!(kept.len(), 1, "the damaged file is kept aside");
    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.topic("orders").unwrap();
    assert_eq!(topic.partition_count(), 3);
    for p in 0..3 {
        let fetch = topic
            .partition(p)
            .unwrap()
            .read(0, u64::MAX, u64::MAX)
            .unwrap();
        let values: Vec<_> = fetch.records().map(|r| r.value).collect();
        let expect: Vec<_> = (0..5)
            .map(|i| Bytes::from(format!("{{\"p\":{p},\"i\":{i}}}")))
            .collect();
        assert_eq!(values, expect);
    }
}

/// Asserts that opening `dir` is refused for the lost partition directory
/// `partition` of topic `orders`, naming it and the repair.
fn assert_partition_refused(dir: &Path, partition: u32) {
    let expected = dir.join("topics/orders").join(partition.to_string());
    match Log::open(LogConfig::new(dir)) {
        Err(e @ LogError::Metadata { .. }) => {
            let LogError::Metadata { path, recovery, .. } = &e else {
                unreachable!()
            };
            assert_eq!(path, &expected);
            let repair = format!(
                "kappa-inspect repair-partition {} --topic orders --partition {partition} --start-offset",
                dir.display()
            );
            assert!(recovery.contains(&repair), "{recovery}");
            assert!(e.to_string().contains("Nothing was changed"), "{e}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_partition_directory_refuses_the_start_and_recreates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    topic_with_records(dir.path(), 2).await;
    let partition = dir.path().join("topics/orders/1");
    std::fs::remove_dir_all(&partition).unwrap();
    let before = files(&dir.path().join("topics"));
    assert_partition_refused(dir.path(), 1);
    assert_partition_refused(dir.path(), 1);
    assert!(!partition.exists(), "nothing was recreated");
    assert_eq!(files(&dir.path().join("topics")), before, "nothing changed");
}

#[tokio::test]
async fn a_partition_directory_without_segments_refuses_the_start() {
    let dir = tempfile::tempdir().unwrap();
    topic_with_records(dir.path(), 2).await;
    let partition = dir.path().join("topics/orders/0");
    for entry in std::fs::read_dir(&partition).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    assert_partition_refused(dir.path(), 0);
    assert_eq!(std::fs::read_dir(&partition).unwrap().count(), 0);
}

#[tokio::test]
async fn the_partition_repair_starts_past_every_offset_handed_out() {
    let dir = tempfile::tempdir().unwrap();
    topic_with_records(dir.path(), 2).await;
    let partition = dir.path().join("topics/orders/1");
    // Not lost: nothing to recreate, nothing touched.
    let refused = kappa_log::repair::recreate_partition(dir.path(), "orders", 1, 5);
    assert!(
        matches!(&refused, Err(LogError::InvalidArgument(m)) if m.contains("not lost")),
        "{refused:?}"
    );
    let refused = kappa_log::repair::recreate_partition(dir.path(), "orders", 2, 5);
    assert!(
        matches!(
            refused,
            Err(LogError::UnknownPartition { partition: 2, .. })
        ),
        "{refused:?}"
    );
    std::fs::remove_dir_all(&partition).unwrap();
    let segment = kappa_log::repair::recreate_partition(dir.path(), "orders", 1, 5).unwrap();
    assert_eq!(segment, partition.join("00000000000000000005.log"));

    let log = Log::open(LogConfig::new(dir.path())).unwrap();
    let topic = log.topic("orders").unwrap();
    let p1 = topic.partition(1).unwrap();
    assert_eq!((p1.start_offset(), p1.end_offset()), (5, 5));
    let request = AppendRequest {
        records: vec![NewRecord {
            value: Bytes::from_static(b"{\"new\":1}"),
            ..Default::default()
        }],
        idempotency_key: None,
        as_sent: None,
    };
    assert_eq!(p1.append(request).await.unwrap().base_offset, 5);
    // Partition 0 is as it was.
    let p0 = topic.partition(0).unwrap();
    assert_eq!((p0.start_offset(), p0.end_offset()), (0, 5));
}
