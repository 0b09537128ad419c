//! Where a derived stream's output topic lives when it is not the built-in
//! log: the one interface its outbox is appended through, exactly once.
//!
//! The commit writes the output records into the version's outbox in the
//! same RocksDB write as the state that made them ([`crate::commit`]);
//! after the write they are appended, then cleared. The built-in log
//! deduplicates a re-append by an idempotency key. A Kafka cluster's sink
//! (`kappa-cluster`) appends each outbox entry in one Kafka transaction,
//! the entry's number in a header, and skips on a restart the entries the
//! topic already holds.

use std::fmt;

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
}

/// A topic outside the built-in log that one version writes.
pub trait OutputSink: Send + Sync + fmt::Debug {
    /// Appends outbox entry `seq` (entries come in increasing order)
    /// exactly once: an entry the topic already holds (appended before a
    /// crash that came before the outbox was cleared) is skipped. An error
    /// stops the version; its retry appends the entry again.
    fn append(&self, seq: u64, records: &[OutputRecord<'_>]) -> Result<()>;

    /// What and where the topic is, for messages.
    fn describe(&self) -> String;
}
