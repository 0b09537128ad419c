//! Where a version's output topics live — the built-in log
//! ([`LogOutput`], here) or a Kafka cluster (`kappa-cluster`'s sink, which
//! the server hands in): the one interface its outbox is appended through,
//! exactly once.
//!
//! This is the stored outbox's path ([`crate::commit`]): the commit writes
//! the output records into the version's outbox in the same RocksDB write
//! as the state that made them; after the write they are appended, then
//! cleared. The built-in log deduplicates a re-append by an idempotency
//! key. A Kafka cluster's sink (`kappa-cluster`) appends each outbox entry
//! in one Kafka transaction, the entry's number in a header, and skips on a
//! restart the entries the topic already holds. A derived stream's (or a
//! late topic's) records over the built-in log take the faster sequenced
//! path instead, appended ahead of the commit (`crate::sequenced`); this
//! module then serves only what that path leaves: an aggregate's row
//! changes, cluster topics, and versions reading a cluster.

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use kappa_log::{Log, NewRecord, ProduceRecord};

use crate::error::Result;

/// One output record.
#[derive(Debug, Clone, Copy)]
pub struct OutputRecord<'a> {
    /// The record key.
    pub key: Option<&'a str>,
    /// The value (JSON text).
    pub value: &'a str,
    /// The record timestamp (ms).
    pub timestamp: i64,
    /// The input partition and offset it was made from, when the reader
    /// of the topic drops repeats by it (a repartition topic: header
    /// `kappa-source` = `<partition>:<offset>`).
    pub source: Option<(u32, u64)>,
    /// The table row the event was joined with (JSON text), for a
    /// repartition topic's reader (header `kappa-joined`).
    pub joined: Option<&'a str>,
}

/// What an output topic holds from one writer, as far as its sink knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The newest outbox entry the topic holds.
    pub entry: u64,
    /// The version's input positions (next offset per input partition)
    /// at the commit that made that entry, when the sink keeps them.
    pub reach: Option<Vec<u64>>,
}

/// A topic outside the built-in log that one version writes.
pub trait OutputSink: Send + Sync + fmt::Debug {
    /// Appends outbox entry `seq` (entries come in increasing order)
    /// exactly once: an entry the topic already holds (appended before a
    /// crash that came before the outbox was cleared) is skipped. `reach`
    /// is the version's input positions at the commit that made the entry
    /// (next offset per input partition). An error stops the version; its
    /// retry appends the entry again.
    fn append(&self, seq: u64, records: &[OutputRecord<'_>], reach: &[u64]) -> Result<()>;

    /// What the topic holds from this writer, when the sink knows it (a
    /// cluster's topic); `None` otherwise.
    fn written(&self) -> Option<Written> {
        None
    }

    /// What and where the topic is, for messages.
    fn describe(&self) -> String;
}

/// Records per append of the built-in log: an outbox entry larger than
/// this is appended in several, each with its own idempotency key.
const LOG_CHUNK: usize = 10_000;

/// A topic of the built-in log written by one version. Each outbox entry
/// is appended with the idempotency key `kappa:<writer>:<entry>:<topic>`
/// (`:<n>` added for the n-th chunk after the first): the log keeps the
/// first append of a key and answers a repeat with it, so a re-append
/// after a crash adds nothing.
#[derive(Debug)]
pub struct LogOutput {
    log: Arc<Log>,
    topic: String,
    writer: String,
}

impl LogOutput {
    /// `topic` of `log`, written by `writer` (`view@version`).
    pub fn shared(log: Arc<Log>, topic: &str, writer: &str) -> Arc<dyn OutputSink> {
        Arc::new(LogOutput {
            log,
            topic: topic.to_string(),
            writer: writer.to_string(),
        })
    }
}

impl OutputSink for LogOutput {
    fn append(&self, seq: u64, records: &[OutputRecord<'_>], _reach: &[u64]) -> Result<()> {
        let batch: Vec<ProduceRecord> = records
            .iter()
            .map(|r| ProduceRecord {
                partition: None,
                record: NewRecord {
                    key: r.key.map(|k| Bytes::copy_from_slice(k.as_bytes())),
                    value: Bytes::copy_from_slice(r.value.as_bytes()),
                    timestamp: Some(r.timestamp),
                    headers: Vec::new(),
                },
            })
            .collect();
        let key = format!("kappa:{}:{seq}:{}", self.writer, self.topic);
        let target = self.log.topic(&self.topic)?;
        for (i, chunk) in batch.chunks(LOG_CHUNK).enumerate() {
            let chunk_key = match i {
                0 => key.clone(),
                _ => format!("{key}:{i}"),
            };
            crate::blocking::block_on(
                target.produce(chunk.to_vec(), Some(chunk_key.into_bytes())),
            )??;
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!("topic '{}' of the built-in log", self.topic)
    }
}
