//! A topic: its partitions, its persisted metadata (`topic.json`), and
//! routing of produced records to partitions.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::batch::NewRecord;
use crate::cache::SegmentCache;
use crate::config::{LogConfig, TopicConfig};
use crate::error::{LogError, Result};
use crate::partition::{AppendOutcome, AppendRequest, Partition, PartitionDescription};
use crate::partitioner::{partition_for_key, StickyPartitioner};
use crate::tiered::RemotePlace;

/// Longest topic name.
pub const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name: 1..=249 characters of `[A-Za-z0-9._-]`, not `.` or
/// `..`. Such a name is always a single, harmless path component.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let bad = |reason| {
        Err(LogError::InvalidTopicName {
            name: name.chars().take(300).collect(),
            reason,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return bad("it is longer than 249 characters");
    }
    if name == "." || name == ".." {
        return bad("'.' and '..' are reserved");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return bad("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

/// Name of a topic's metadata file inside its directory.
pub const TOPIC_META_FILE: &str = "topic.json";

/// `topic.json`: what a topic directory holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TopicMeta {
    /// The topic name (equal to the directory name).
    pub name: String,
    /// Its settings.
    pub config: TopicConfig,
    /// When it was created (ms since the epoch).
    pub created_ms: i64,
}

/// A record to produce, with an optional explicit partition.
#[derive(Debug, Clone, Default)]
pub struct ProduceRecord {
    /// Explicit partition; else the key's murmur2 hash; else sticky.
    pub partition: Option<u32>,
    /// The record.
    pub record: NewRecord,
}

/// Where one produced record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Produced {
    /// Partition.
    pub partition: u32,
    /// Offset.
    pub offset: u64,
}

/// The result of a produce call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceOutcome {
    /// One entry per record, in request order.
    pub records: Vec<Produced>,
    /// True if the idempotency key matched earlier appends everywhere and
    /// nothing was written.
    pub duplicate: bool,
}

/// Why a produce failed.
#[derive(Debug)]
pub enum ProduceFailure {
    /// Nothing was appended anywhere.
    Nothing(LogError),
    /// Some partitions appended, others failed after the up-front checks.
    Partial(PartialProduce),
}

impl From<LogError> for ProduceFailure {
    fn from(e: LogError) -> Self {
        ProduceFailure::Nothing(e)
    }
}

impl ProduceFailure {
    /// The error (the first failed partition's, for a partial append).
    pub fn into_error(self) -> LogError {
        match self {
            ProduceFailure::Nothing(e) => e,
            ProduceFailure::Partial(mut p) => p.failed.remove(0).1,
        }
    }
}

/// A produce that appended on some partitions and failed on others.
#[derive(Debug)]
pub struct PartialProduce {
    /// Per record, in request order: where it landed, or `None` if its
    /// partition failed.
    pub records: Vec<Option<Produced>>,
    /// The partitions that appended, with what they did.
    pub appended: Vec<(u32, AppendOutcome)>,
    /// The partitions that failed (at least one), with why.
    pub failed: Vec<(u32, LogError)>,
}

/// A topic description.
#[derive(Debug, Clone, Serialize)]
pub struct TopicDescription {
    /// Name.
    pub name: String,
    /// Settings.
    pub config: TopicConfig,
    /// Per-partition offsets and sizes.
    pub partitions: Vec<PartitionDescription>,
}

/// An open topic.
#[derive(Debug)]
pub struct Topic {
    meta: TopicMeta,
    /// The settings as now set (retention can change: [`Topic::alter`]).
    config: std::sync::RwLock<TopicConfig>,
    dir: PathBuf,
    partitions: Vec<Partition>,
    sticky: StickyPartitioner,
}

impl Topic {
    /// Opens the topic in `dir` (recovering every partition).
    pub fn open(
        dir: &Path,
        meta: TopicMeta,
        log_config: Arc<LogConfig>,
        cache: Arc<SegmentCache>,
    ) -> Result<Topic> {
        let mut partitions = Vec::with_capacity(meta.config.partitions as usize);
        for p in 0..meta.config.partitions {
            let remote = log_config.remote_store.as_ref().map(|store| {
                RemotePlace::new(
                    store.clone(),
                    &log_config.data_dir,
                    &meta.name,
                    meta.created_ms,
                    p,
                )
            });
            partitions.push(Partition::open(
                &meta.name,
                p,
                dir.join(p.to_string()),
                meta.config.clone(),
                log_config.clone(),
                cache.clone(),
                remote,
            )?);
        }
        Ok(Topic {
            config: std::sync::RwLock::new(meta.config.clone()),
            meta,
            dir: dir.to_path_buf(),
            partitions,
            sticky: StickyPartitioner::new(),
        })
    }

    /// Name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// When the topic was created (ms since the epoch).
    pub fn created_ms(&self) -> i64 {
        self.meta.created_ms
    }

    /// Settings, as now set.
    pub fn config(&self) -> TopicConfig {
        self.config.read().expect("config").clone()
    }

    /// Applies `changes`: checks the result, writes it to `topic.json`
    /// (atomically; the crash-safe order of every metadata write) and then
    /// to every partition, so the next retention pass uses it. Answers the
    /// new settings. Concurrent changes are serialized.
    pub fn alter(&self, changes: &crate::config::TopicChanges) -> Result<TopicConfig> {
        let mut config = self.config.write().expect("config");
        let new = changes.apply(&config);
        new.validate()?;
        if let Some(p) = self.partitions.first() {
            p.check_tiering(&new)?;
        }
        let meta = TopicMeta {
            config: new.clone(),
            ..self.meta.clone()
        };
        let json = serde_json::to_vec_pretty(&meta).expect("topic metadata serializes");
        crate::io::write_atomic(&self.dir.join(TOPIC_META_FILE), &json)?;
        for p in &self.partitions {
            p.set_settings(&new);
        }
        *config = new.clone();
        tracing::info!(
            topic = %self.meta.name,
            retention_ms = ?new.retention_ms,
            retention_bytes = ?new.retention_bytes,
            compression = %new.compression,
            cleanup_policy = %new.cleanup_policy,
            "changed topic settings"
        );
        Ok(new)
    }

    /// Directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> u32 {
        self.partitions.len() as u32
    }

    /// Partition `p`.
    pub fn partition(&self, p: u32) -> Result<&Partition> {
        self.partitions
            .get(p as usize)
            .ok_or_else(|| LogError::UnknownPartition {
                topic: self.meta.name.clone(),
                partition: p,
                partitions: self.partition_count(),
            })
    }

    /// All partitions.
    pub fn partitions(&self) -> &[Partition] {
        &self.partitions
    }

    /// The partition of each record: explicit, else murmur2 of the key
    /// (Kafka's default partitioner), else one sticky partition for all
    /// unkeyed records of the call. With an idempotency key, unkeyed records
    /// go to the partition of the idempotency key's hash instead, so that a
    /// retry routes exactly like the original.
    pub fn route(
        &self,
        records: &[ProduceRecord],
        idempotency_key: Option<&[u8]>,
    ) -> Result<Vec<u32>> {
        let n = self.partition_count();
        let mut sticky = None;
        records
            .iter()
            .map(|r| match (r.partition, &r.record.key) {
                (Some(p), _) => self.partition(p).map(|_| p),
                (None, Some(key)) => Ok(partition_for_key(key, n)),
                (None, None) => Ok(*sticky.get_or_insert_with(|| match idempotency_key {
                    Some(k) => partition_for_key(k, n),
                    None => self.sticky.next_partition(n),
                })),
            })
            .collect()
    }

    /// Appends records, routed to partitions. See [`Topic::produce_detailed`];
    /// a partial append is reported as the first partition's error.
    pub async fn produce(
        &self,
        records: Vec<ProduceRecord>,
        idempotency_key: Option<Vec<u8>>,
    ) -> Result<ProduceOutcome> {
        self.produce_detailed(records, idempotency_key)
            .await
            .map_err(ProduceFailure::into_error)
    }

    /// Appends records, routed to partitions, everywhere or nowhere as far
    /// as that can be known up front: every partition's append is checked
    /// and its queue space reserved (in partition order) before any is sent,
    /// so a refusal (limits, a stopped partition, a full queue) appends
    /// nothing. The appends then proceed in parallel; a write that fails
    /// after that (disk full, I/O error) is reported as a
    /// [`PartialProduce`] saying exactly what was appended.
    pub async fn produce_detailed(
        &self,
        records: Vec<ProduceRecord>,
        idempotency_key: Option<Vec<u8>>,
    ) -> std::result::Result<ProduceOutcome, ProduceFailure> {
        let routes = self.route(&records, idempotency_key.as_deref())?;
        if let Some(key) = &idempotency_key {
            self.check_key_routing(key, &routes)?;
        }
        let mut per_partition: Vec<Vec<NewRecord>> = vec![Vec::new(); self.partitions.len()];
        for (record, &p) in records.into_iter().zip(&routes) {
            per_partition[p as usize].push(record.record);
        }
        let mut reserved = Vec::new();
        for (p, records) in per_partition.into_iter().enumerate() {
            if records.is_empty() {
                continue;
            }
            let request = AppendRequest {
                records,
                idempotency_key: idempotency_key.clone(),
                as_sent: None,
            };
            reserved.push((p as u32, self.partitions[p].reserve(request).await?));
        }
        let mut pending = Vec::with_capacity(reserved.len());
        for (p, reservation) in reserved {
            pending.push((p, reservation.send()));
        }
        let mut appended = Vec::new();
        let mut failed = Vec::new();
        for (p, sent) in pending {
            match sent {
                Ok(append) => match append.wait().await {
                    Ok(outcome) => appended.push((p, outcome)),
                    Err(e) => failed.push((p, e)),
                },
                Err(e) => failed.push((p, e)),
            }
        }
        let mut bases = vec![None; self.partitions.len()];
        for (p, outcome) in &appended {
            bases[*p as usize] = Some(outcome.base_offset);
        }
        let produced: Vec<Option<Produced>> = routes
            .iter()
            .map(|&p| {
                let base = bases[p as usize].as_mut()?;
                let offset = *base;
                *base += 1;
                Some(Produced {
                    partition: p,
                    offset,
                })
            })
            .collect();
        if failed.is_empty() {
            return Ok(ProduceOutcome {
                records: produced.into_iter().flatten().collect(),
                duplicate: appended.iter().all(|(_, o)| o.duplicate),
            });
        }
        // Duplicates wrote nothing: if nothing else succeeded, this request
        // appended nothing (e.g. a key reused for a different request).
        if appended.iter().all(|(_, o)| o.duplicate) {
            return Err(ProduceFailure::Nothing(failed.remove(0).1));
        }
        Err(ProduceFailure::Partial(PartialProduce {
            records: produced,
            appended,
            failed,
        }))
    }

    /// A retry must write to the same partitions as the first request: a key
    /// remembered by a partition this request does not write to means the
    /// key was used for a different request.
    fn check_key_routing(&self, key: &[u8], routes: &[u32]) -> Result<()> {
        for p in &self.partitions {
            if !routes.contains(&p.id()) && p.remembers_idempotency_key(key) {
                return Err(LogError::IdempotencyKeyReused {
                    key: String::from_utf8_lossy(key).into_owned(),
                    reason: format!(
                        "the first request wrote to partition {}, this one does not",
                        p.id()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Name, settings and per-partition offsets.
    pub fn describe(&self) -> TopicDescription {
        TopicDescription {
            name: self.meta.name.clone(),
            config: self.config(),
            partitions: self.partitions.iter().map(Partition::describe).collect(),
        }
    }

    /// Stops every partition's writer.
    pub fn close(&self) {
        for p in &self.partitions {
            p.close();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_are_validated() {
        for ok in ["orders", "a", "A.b_c-9", &"x".repeat(249)] {
            assert!(validate_topic_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "../etc",
            "a b",
            "naïve",
            "a\0b",
            "\\x",
            &"x".repeat(250),
        ] {
            assert!(validate_topic_name(bad).is_err(), "{bad:?}");
        }
    }
}
