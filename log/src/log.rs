//! The log: the data directory, its topics, consumer groups, and the
//! background task that applies retention and compaction.
//!
//! Directory layout (see FORMAT.md):
//! ```text
//! <data_dir>/topics/<topic>/topic.json        topic metadata, written atomically
//! <data_dir>/topics/<topic>/<partition>/      segments: <base:020>.log/.index/.timeindex
//! <data_dir>/groups/offsets.log               committed consumer offsets
//! <data_dir>/trash/                           topics being deleted
//! ```
//! A topic directory without `topic.json` whose partitions hold no records
//! is a creation that did not finish and is removed at open. One whose
//! partitions hold records, or whose `topic.json` is damaged, makes `open`
//! fail with [`LogError::Metadata`], naming the file and the
//! `kappa-inspect repair-topic` command that rebuilds it ([`repair`]); a
//! start never deletes records. So does a partition directory that
//! `topic.json` names but that is missing or holds no segment (lost
//! records, not an empty partition), naming `kappa-inspect
//! repair-partition`. A damaged or lost offsets file is the offset
//! store's to refuse ([`crate::offsets`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::cache::SegmentCache;
use crate::cleaner::CompactionOutcome;
use crate::config::{LogConfig, TopicConfig};
use crate::error::{LogError, Result};
use crate::offsets::{CommittedOffset, OffsetStore};
use crate::topic::{validate_topic_name, Topic, TopicMeta, TOPIC_META_FILE};
use crate::{io, now_ms, repair};

/// Where a consumer group's offsets are reset to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// The first stored offset of each partition.
    Earliest,
    /// The end of each partition (only new records are read).
    Latest,
    /// The first offset whose record timestamp is at or after this (ms).
    Timestamp(i64),
    /// This offset on every partition, clamped to `[start, end]` as Kafka's
    /// reset tool does.
    Offset(u64),
}

/// A group's position on one partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupPartitionOffset {
    /// Partition.
    pub partition: u32,
    /// Committed offset, if the group committed one.
    pub committed: Option<u64>,
    /// First stored offset.
    pub start_offset: u64,
    /// End offset.
    pub end_offset: u64,
    /// Records the group has yet to consume: end minus its position, where
    /// the position is the committed offset (or the start when there is
    /// none, as a consumer that starts at the earliest offset would).
    pub lag: u64,
}

struct Inner {
    config: Arc<LogConfig>,
    topics: RwLock<BTreeMap<String, Arc<Topic>>>,
    offsets: OffsetStore,
    cache: Arc<SegmentCache>,
    trash_counter: AtomicU64,
    /// Serializes topic creation and deletion.
    admin: Mutex<()>,
}

/// An open log. Closing (or dropping) it stops the writers after they have
/// synced what they wrote.
pub struct Log {
    inner: Arc<Inner>,
    retention: Mutex<Option<(mpsc::Sender<()>, JoinHandle<()>)>>,
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("data_dir", &self.inner.config.data_dir)
            .finish()
    }
}

fn topics_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("topics")
}

impl Log {
    /// Opens (creating) the log in `config.data_dir`, recovering every
    /// partition, and starts the retention task.
    pub fn open(config: LogConfig) -> Result<Log> {
        config.validate()?;
        let config = Arc::new(config);
        let data = &config.data_dir;
        let topics_dir = topics_dir(data);
        let trash = data.join("trash");
        for dir in [&topics_dir, &trash] {
            std::fs::create_dir_all(dir).map_err(|e| LogError::io(dir, e))?;
        }
        clear_dir(&trash)?;
        // Downloaded tiered segments: fetched again when read.
        let remote_cache = data.join(crate::tiered::REMOTE_CACHE_DIR);
        if remote_cache.exists() {
            std::fs::remove_dir_all(&remote_cache).map_err(|e| LogError::io(&remote_cache, e))?;
        }
        let offsets = OffsetStore::open_with_faults(&data.join("groups"), config.faults.clone())?;
        let cache = Arc::new(SegmentCache::new(
            config.max_open_segments,
            config.max_mapped_bytes,
        ));
        let mut topics = BTreeMap::new();
        for entry in std::fs::read_dir(&topics_dir).map_err(|e| LogError::io(&topics_dir, e))? {
            let entry = entry.map_err(|e| LogError::io(&topics_dir, e))?;
            let dir = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if validate_topic_name(&name).is_err() || !dir.is_dir() {
                tracing::warn!(path = %dir.display(), "ignoring an entry that is not a topic");
                continue;
            }
            let meta_path = dir.join(TOPIC_META_FILE);
            if !meta_path.exists() {
                if repair::holds_records(&dir)? {
                    return Err(LogError::Metadata {
                        path: meta_path,
                        problem: "missing, but the topic's partitions hold records".into(),
                        recovery: repair::rebuild_hint(data, &name),
                    });
                }
                tracing::warn!(topic = %name, "removing a topic whose creation did not finish (no topic.json, no records)");
                std::fs::remove_dir_all(&dir).map_err(|e| LogError::io(&dir, e))?;
                continue;
            }
            let meta = read_meta(&meta_path).map_err(|e| LogError::Metadata {
                path: meta_path.clone(),
                problem: format!("not a valid topic.json: {e}"),
                recovery: repair::rebuild_hint(data, &name),
            })?;
            repair::check_partition_dirs(data, &dir, &meta)?;
            let topic = Topic::open(&dir, meta, config.clone(), cache.clone())?;
            topics.insert(name, Arc::new(topic));
        }
        let inner = Arc::new(Inner {
            config: config.clone(),
            topics: RwLock::new(topics),
            offsets,
            cache,
            trash_counter: AtomicU64::new(0),
            admin: Mutex::new(()),
        });
        let retention =
            start_retention(Arc::downgrade(&inner), config.retention_check_interval_ms)?;
        Ok(Log {
            inner,
            retention: Mutex::new(Some(retention)),
        })
    }

    /// The log's settings.
    pub fn config(&self) -> &LogConfig {
        &self.inner.config
    }

    /// Creates a topic; fails if it exists or the partition limit is hit.
    pub fn create_topic(&self, name: &str, config: TopicConfig) -> Result<Arc<Topic>> {
        validate_topic_name(name)?;
        config.validate()?;
        crate::tiered::check_tiering(&config, &self.inner.config)?;
        let _admin = self.inner.admin.lock().expect("admin");
        if self.inner.topics.read().expect("topics").contains_key(name) {
            return Err(LogError::TopicExists(name.to_string()));
        }
        let in_use: u32 = self.topics().iter().map(|t| t.partition_count()).sum();
        if in_use + config.partitions > self.inner.config.max_partitions {
            return Err(LogError::PartitionBudget {
                requested: config.partitions,
                max: self.inner.config.max_partitions,
                in_use,
            });
        }
        let topics_dir = topics_dir(&self.inner.config.data_dir);
        let dir = topics_dir.join(name);
        io::crash::step(&dir, "create topic directory")?;
        std::fs::create_dir(&dir).map_err(|e| LogError::io(&dir, e))?;
        let meta = TopicMeta {
            name: name.to_string(),
            config,
            created_ms: now_ms(),
        };
        let topic = Topic::open(
            &dir,
            meta.clone(),
            self.inner.config.clone(),
            self.inner.cache.clone(),
        )?;
        let json = serde_json::to_vec_pretty(&meta).expect("topic metadata serializes");
        io::write_atomic(&dir.join(TOPIC_META_FILE), &json)?;
        io::sync_dir(&topics_dir)?;
        let topic = Arc::new(topic);
        self.inner
            .topics
            .write()
            .expect("topics")
            .insert(name.to_string(), topic.clone());
        tracing::info!(
            topic = name,
            partitions = meta.config.partitions,
            "created topic"
        );
        Ok(topic)
    }

    /// The topic called `name`.
    pub fn topic(&self, name: &str) -> Result<Arc<Topic>> {
        self.inner
            .topics
            .read()
            .expect("topics")
            .get(name)
            .cloned()
            .ok_or_else(|| LogError::UnknownTopic(name.to_string()))
    }

    /// All topics, by name.
    pub fn topics(&self) -> Vec<Arc<Topic>> {
        self.inner
            .topics
            .read()
            .expect("topics")
            .values()
            .cloned()
            .collect()
    }

    /// Deletes a topic, its data and every group's offsets for it.
    pub fn delete_topic(&self, name: &str) -> Result<()> {
        let _admin = self.inner.admin.lock().expect("admin");
        let topic = self
            .inner
            .topics
            .write()
            .expect("topics")
            .remove(name)
            .ok_or_else(|| LogError::UnknownTopic(name.to_string()))?;
        topic.close();
        for p in topic.partitions() {
            p.delete_remote();
        }
        // Offsets first: a crash after this leaves the topic with no group
        // offsets (harmless), never a new topic of the same name inheriting
        // old ones.
        self.inner.offsets.delete_topic(name)?;
        let data = &self.inner.config.data_dir;
        let n = self.inner.trash_counter.fetch_add(1, Ordering::Relaxed);
        let doomed = data.join("trash").join(format!("{name}.{}.{n}", now_ms()));
        io::crash::step(topic.dir(), "rename to trash")?;
        std::fs::rename(topic.dir(), &doomed).map_err(|e| LogError::io(topic.dir(), e))?;
        io::sync_dir(&topics_dir(data))?;
        io::crash::step(&doomed, "remove")?;
        std::fs::remove_dir_all(&doomed).map_err(|e| LogError::io(&doomed, e))?;
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    /// The latest append time up to which every partition of every topic
    /// is complete: all its appends are readable and no later append gets
    /// a time at or before it ([`crate::clock::AppendClock::complete_up_to`]).
    pub fn complete_up_to(&self) -> i64 {
        self.inner.config.clock.complete_up_to()
    }

    /// Waits until the log is complete up to `t`, at most `timeout`;
    /// returns whether it is (a millisecond at most, or an append in
    /// flight finishing).
    pub fn wait_complete(&self, t: i64, timeout: Duration) -> bool {
        self.inner.config.clock.wait_complete(t, timeout)
    }

    /// Applies retention to every partition as of `now_ms`; returns the
    /// number of segments deleted.
    pub fn enforce_retention(&self, now_ms: i64) -> Result<usize> {
        enforce_retention(&self.inner, now_ms)
    }

    /// Moves every partition's sealed segments past its topic's local
    /// retention to tiered storage as of `now_ms` (what the background
    /// task does after each compaction pass); returns how many moved.
    pub fn tier(&self, now_ms: i64) -> Result<usize> {
        tier_all(&self.inner, now_ms)
    }

    /// Runs a compaction pass over every partition of every compacted
    /// topic as of `now_ms` (what the background task does after each
    /// retention pass); returns what the passes did together.
    pub fn compact(&self, now_ms: i64) -> Result<CompactionOutcome> {
        compact_all(&self.inner, now_ms)
    }

    /// Commits a group's offsets on one topic. An offset may be anything up
    /// to the partition's end (one below the start means "from the start",
    /// as retention may have passed it).
    pub fn commit_offsets(&self, group: &str, topic: &str, offsets: &[(u32, u64)]) -> Result<()> {
        let t = self.topic(topic)?;
        for &(p, offset) in offsets {
            let partition = t.partition(p)?;
            let (start, end) = (partition.start_offset(), partition.end_offset());
            if offset > end {
                return Err(LogError::OffsetOutOfRange {
                    topic: topic.to_string(),
                    partition: p,
                    offset,
                    start,
                    end,
                });
            }
        }
        let commits: Vec<(&str, u32, u64)> = offsets.iter().map(|&(p, o)| (topic, p, o)).collect();
        self.inner.offsets.commit(group, &commits, now_ms())
    }

    /// A group's position, end and lag on every partition of a topic.
    pub fn group_offsets(&self, group: &str, topic: &str) -> Result<Vec<GroupPartitionOffset>> {
        let t = self.topic(topic)?;
        Ok(t.partitions()
            .iter()
            .map(|p| {
                let committed = self.inner.offsets.committed(group, topic, p.id());
                let (start, end) = (p.start_offset(), p.end_offset());
                let position = committed.unwrap_or(start).max(start);
                GroupPartitionOffset {
                    partition: p.id(),
                    committed,
                    start_offset: start,
                    end_offset: end,
                    lag: end.saturating_sub(position),
                }
            })
            .collect())
    }

    /// Resets a group's offsets on every partition of a topic; returns the
    /// new (partition, offset) pairs.
    pub fn reset_offsets(&self, group: &str, topic: &str, to: ResetTo) -> Result<Vec<(u32, u64)>> {
        let t = self.topic(topic)?;
        let mut offsets = Vec::with_capacity(t.partitions().len());
        for p in t.partitions() {
            let (start, end) = (p.start_offset(), p.end_offset());
            let offset = match to {
                ResetTo::Earliest => start,
                ResetTo::Latest => end,
                ResetTo::Timestamp(ts) => p.offset_for_timestamp(ts)?,
                ResetTo::Offset(o) => o.clamp(start, end),
            };
            offsets.push((p.id(), offset));
        }
        self.commit_offsets(group, topic, &offsets)?;
        Ok(offsets)
    }

    /// Every committed offset of a group.
    pub fn committed(&self, group: &str) -> Vec<CommittedOffset> {
        self.inner.offsets.group_offsets(group)
    }

    /// Groups with committed offsets.
    pub fn groups(&self) -> Vec<String> {
        self.inner.offsets.groups()
    }

    /// Forgets a group.
    pub fn delete_group(&self, group: &str) -> Result<()> {
        self.inner.offsets.delete_group(group)
    }

    /// Number of sealed segments currently open (mapped), across all topics.
    pub fn open_sealed_segments(&self) -> usize {
        self.inner.cache.open_segments()
    }

    /// Stops retention and every writer (each syncs what it wrote).
    pub fn close(&self) {
        if let Some((stop, thread)) = self.retention.lock().expect("retention").take() {
            drop(stop);
            let _ = thread.join();
        }
        for topic in self.topics() {
            topic.close();
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.close();
    }
}

/// Reads and validates a `topic.json`.
pub(crate) fn read_meta(path: &Path) -> Result<TopicMeta> {
    let bytes = std::fs::read(path).map_err(|e| LogError::io(path, e))?;
    let meta: TopicMeta = serde_json::from_slice(&bytes)
        .map_err(|e| LogError::corrupt(path, e.column() as u64, format!("topic.json: {e}")))?;
    meta.config.validate()?;
    Ok(meta)
}

fn clear_dir(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let path = entry.map_err(|e| LogError::io(dir, e))?.path();
        std::fs::remove_dir_all(&path).map_err(|e| LogError::io(&path, e))?;
    }
    Ok(())
}

/// Runs `pass` over every partition of every topic `wanted` picks, adding
/// up what each did with `add`. One partition's failure must not stop the
/// pass for the others: each is tried (a failure logged, naming `what`),
/// and the first error is returned after all were.
fn each_partition<T: Default>(
    inner: &Inner,
    what: &str,
    wanted: impl Fn(&Topic) -> bool,
    pass: impl Fn(&crate::Partition) -> Result<T>,
    add: impl Fn(&mut T, T),
) -> Result<T> {
    let topics: Vec<Arc<Topic>> = inner
        .topics
        .read()
        .expect("topics")
        .values()
        .filter(|t| wanted(t))
        .cloned()
        .collect();
    let mut total = T::default();
    let mut first_error = None;
    for topic in topics {
        for p in topic.partitions() {
            match pass(p) {
                Ok(done) => add(&mut total, done),
                Err(e) => {
                    tracing::error!(topic = topic.name(), partition = p.id(), error = %e, "{what} failed");
                    first_error.get_or_insert(e);
                }
            }
        }
    }
    match first_error {
        None => Ok(total),
        Some(e) => Err(e),
    }
}

fn enforce_retention(inner: &Inner, now_ms: i64) -> Result<usize> {
    each_partition(
        inner,
        "retention",
        |_| true,
        |p| p.apply_retention(now_ms),
        |total, n| *total += n,
    )
}

fn compact_all(inner: &Inner, now_ms: i64) -> Result<CompactionOutcome> {
    each_partition(
        inner,
        "compaction",
        |t| t.config().cleanup_policy.compacts(),
        |p| p.compact(now_ms),
        CompactionOutcome::add,
    )
}

fn tier_all(inner: &Inner, now_ms: i64) -> Result<usize> {
    each_partition(
        inner,
        "moving segments to tiered storage",
        |_| true,
        |p| p.tier(now_ms),
        |total, n| *total += n,
    )
}

fn start_retention(
    inner: Weak<Inner>,
    interval_ms: u64,
) -> Result<(mpsc::Sender<()>, JoinHandle<()>)> {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("kappa-retention".into())
        .spawn(move || loop {
            match stopped.recv_timeout(Duration::from_millis(interval_ms)) {
                Err(RecvTimeoutError::Timeout) => {}
                _ => return,
            }
            let Some(inner) = inner.upgrade() else { return };
            if let Err(e) = enforce_retention(&inner, inner.config.clock.now()) {
                tracing::error!(error = %e, "retention failed");
            }
            if let Err(e) = compact_all(&inner, inner.config.clock.now()) {
                tracing::error!(error = %e, "compaction failed");
            }
            if let Err(e) = tier_all(&inner, inner.config.clock.now()) {
                tracing::error!(error = %e, "tiering failed");
            }
        })
        .map_err(|e| LogError::io("retention thread", e))?;
    Ok((stop, thread))
}
