//! Model-based property test: random appends, reads, rolls, reopens,
//! timestamp lookups and retention against a simple in-memory model. Every
//! read must equal the model.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use bytes::Bytes;
use kappa_log::{AppendRequest, FsyncPolicy, Log, LogConfig, LogError, NewRecord, TopicConfig};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Append a batch: (value length, keyed, timestamp) per record.
    Append(Vec<(usize, bool, i64)>),
    /// Read from a position (fraction of the stored range) up to n records.
    Read(f64, u64),
    Roll,
    Reopen,
    /// Look up a timestamp: an existing record's (if true) or any, picked
    /// by a fraction.
    LookupTimestamp(f64, bool),
    Retention,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => proptest::collection::vec((0usize..300, any::<bool>(), 0i64..20), 1..20).prop_map(Op::Append),
        4 => (0.0f64..=1.0, 1u64..50).prop_map(|(f, n)| Op::Read(f, n)),
        1 => Just(Op::Roll),
        1 => Just(Op::Reopen),
        2 => (0.0f64..=1.1, any::<bool>()).prop_map(|(f, exact)| Op::LookupTimestamp(f, exact)),
        1 => Just(Op::Retention),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct ModelRecord {
    key: Option<Bytes>,
    value: Bytes,
    timestamp: i64,
}

const RETENTION_BYTES: u64 = 8 * 1024;

fn topic_config() -> TopicConfig {
    TopicConfig {
        segment_bytes: 2048,
        retention_ms: None,
        retention_bytes: Some(RETENTION_BYTES),
        fsync: FsyncPolicy::Never,
        ..Default::default()
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let open = || {
        Log::open(LogConfig {
            index_interval_bytes: 256,
            ..LogConfig::new(dir.path())
        })
        .unwrap()
    };
    let mut log = open();
    log.create_topic("t", topic_config()).unwrap();
    // model[i] is the record at offset `start + i`.
    let mut model: Vec<ModelRecord> = Vec::new();
    let mut start = 0u64;
    let mut batch_bases = vec![0u64];
    let mut counter = 0u64;
    for op in ops {
        let topic = log.topic("t").unwrap();
        let p = topic.partition(0).unwrap();
        let end = start + model.len() as u64;
        match op {
            Op::Append(specs) => {
                let records: Vec<NewRecord> = specs
                    .iter()
                    .map(|&(len, keyed, jitter)| {
                        counter += 1;
                        // Mostly increasing, with bounded disorder.
                        let ts = (counter / 3) as i64 + jitter;
                        let fill = (counter % 251) as u8;
                        NewRecord {
                            key: keyed.then(|| Bytes::from(format!("k{counter}"))),
                            value: Bytes::from(vec![fill; len]),
                            timestamp: Some(ts),
                            headers: vec![],
                        }
                    })
                    .collect();
                let outcome = rt
                    .block_on(p.append(AppendRequest {
                        records: records.clone(),
                        idempotency_key: None,
                        as_sent: None,
                    }))
                    .unwrap();
                assert_eq!(outcome.base_offset, end);
                for r in records {
                    model.push(ModelRecord {
                        key: r.key,
                        value: r.value,
                        timestamp: r.timestamp.unwrap(),
                    });
                }
                batch_bases.push(start + model.len() as u64);
            }
            Op::Read(frac, max) => {
                let offset = start + ((model.len() as f64) * frac) as u64;
                let fetch = p.read(offset, max, 1 << 20).unwrap();
                let got: Vec<_> = fetch.records().collect();
                let expect = &model[(offset - start) as usize..];
                let n = (max as usize).min(expect.len());
                assert_eq!(got.len(), n, "read at {offset} max {max}");
                assert_eq!(fetch.next_offset, offset + n as u64);
                assert_eq!(fetch.high_watermark, end);
                for (i, (g, m)) in got.iter().zip(expect).enumerate() {
                    assert_eq!(g.offset, offset + i as u64);
                    assert_eq!(
                        (&g.key, &g.value, g.timestamp),
                        (&m.key, &m.value, m.timestamp)
                    );
                }
                if start > 0 {
                    assert!(matches!(
                        p.read(start - 1, 1, 1024),
                        Err(LogError::OffsetOutOfRange { .. })
                    ));
                }
                assert!(matches!(
                    p.read(end + 1, 1, 1024),
                    Err(LogError::OffsetOutOfRange { .. })
                ));
            }
            Op::Roll => rt.block_on(p.roll()).unwrap(),
            Op::Reopen => {
                drop(topic);
                log.close();
                drop(log);
                log = open();
                let topic = log.topic("t").unwrap();
                let p = topic.partition(0).unwrap();
                assert_eq!(
                    (p.start_offset(), p.end_offset()),
                    (start, end),
                    "offsets after reopen"
                );
            }
            Op::LookupTimestamp(f, exact) => {
                let ts = match (exact, model.is_empty()) {
                    (true, false) => {
                        model[((model.len() - 1) as f64 * f.min(1.0)) as usize].timestamp
                    }
                    _ => (f * (counter / 3 + 25) as f64) as i64,
                };
                let expect = model
                    .iter()
                    .position(|r| r.timestamp >= ts)
                    .map_or(end, |i| start + i as u64);
                assert_eq!(
                    p.offset_for_timestamp(ts).unwrap(),
                    expect,
                    "first offset at or after {ts}"
                );
            }
            Op::Retention => {
                log.enforce_retention(kappa_log::now_ms()).unwrap();
                let d = p.describe();
                let new_start = p.start_offset();
                assert!(new_start >= start && new_start <= end);
                assert!(
                    batch_bases.contains(&new_start),
                    "start {new_start} is not a batch boundary"
                );
                assert!(d.bytes <= RETENTION_BYTES || d.segment_count == 1, "{d:?}");
                model.drain(..(new_start - start) as usize);
                start = new_start;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn log_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
