//! A small sample data directory written with kappa-log itself, for the
//! inspector's tests and for trying the inspector out: topic `orders` with
//! 2 partitions and 1 KiB segments (so partition 0 has several sealed
//! segments with dense indexes), and committed offsets of two groups.

use std::path::Path;

use bytes::Bytes;
use kappa_log::{
    AppendRequest, FsyncPolicy, Header, Log, LogConfig, NewRecord, Result, TopicConfig,
};

/// Topic of the sample.
pub const TOPIC: &str = "orders";
/// Records written to partition 0 (batches of [`BATCH_RECORDS`]).
pub const RECORDS_P0: u64 = 100;
/// Records written to partition 1 (one batch).
pub const RECORDS_P1: u64 = 3;
/// Records per append to partition 0.
pub const BATCH_RECORDS: u64 = 5;
/// Timestamp of record `i`: `BASE_TIME_MS + i`.
pub const BASE_TIME_MS: i64 = 1_767_225_600_000;

/// Record `i` of partition 0: key `user-<i % 7>`, a JSON value, one header
/// on even records; record 13's value is not UTF-8.
pub fn record(i: u64) -> NewRecord {
    let value = if i == 13 {
        Bytes::from_static(&[0xff, 0x00, 0x10])
    } else {
        Bytes::from(format!("{{\"n\":{i},\"amount\":{}.50}}", i * 3))
    };
    NewRecord {
        key: Some(Bytes::from(format!("user-{}", i % 7))),
        value,
        timestamp: Some(BASE_TIME_MS + i as i64),
        headers: if i.is_multiple_of(2) {
            vec![Header {
                name: "source".into(),
                value: Bytes::from_static(b"web"),
            }]
        } else {
            Vec::new()
        },
    }
}

/// Writes the sample into `data_dir` (which should be empty) and closes
/// the log.
pub fn write(data_dir: &Path) -> Result<()> {
    let mut config = LogConfig::new(data_dir);
    config.index_interval_bytes = 64;
    let log = Log::open(config)?;
    let topic = log.create_topic(
        TOPIC,
        TopicConfig {
            partitions: 2,
            segment_bytes: 1024,
            fsync: FsyncPolicy::Never,
            ..TopicConfig::default()
        },
    )?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| kappa_log::LogError::io(data_dir, e))?;
    runtime.block_on(async {
        let p0 = topic.partition(0)?;
        for start in (0..RECORDS_P0).step_by(BATCH_RECORDS as usize) {
            let records = (start..start + BATCH_RECORDS).map(record).collect();
            let idempotency_key = (start == 10).then(|| b"req-10".to_vec());
            p0.append(AppendRequest {
                records,
                idempotency_key,
                as_sent: None,
            })
            .await?;
        }
        let p1 = topic.partition(1)?;
        let records = (0..RECORDS_P1)
            .map(|i| NewRecord::value(format!("p1-{i}")))
            .collect();
        p1.append(AppendRequest {
            records,
            idempotency_key: None,
            as_sent: None,
        })
        .await?;
        Ok::<_, kappa_log::LogError>(())
    })?;
    log.commit_offsets("billing", TOPIC, &[(0, 40), (1, 3)])?;
    log.commit_offsets("audit", TOPIC, &[(0, 100)])?;
    log.close();
    Ok(())
}
