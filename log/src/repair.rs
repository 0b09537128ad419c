//! Operator repairs of log metadata, run knowingly with the server stopped
//! (`kappa-inspect repair-topic`, `kappa-inspect repair-partition`), and
//! the checks `Log::open` uses to tell an unfinished topic creation from
//! lost metadata, and a partition from a lost one.
//!
//! Nothing here deletes records: a rebuilt `topic.json` keeps the damaged
//! one beside it as `topic.json.damaged-<ms>`, and a partition is
//! recreated only where no segment is left.

use std::path::{Path, PathBuf};

use crate::config::TopicConfig;
use crate::error::{LogError, Result};
use crate::recovery::base_offset_of;
use crate::segment::SegmentPaths;
use crate::topic::{TopicMeta, TOPIC_META_FILE};
use crate::{io, now_ms};

/// The partition directories of a topic directory: `0`, `1`, … as numbers,
/// sorted.
fn partition_dirs(topic_dir: &Path) -> Result<Vec<u32>> {
    let mut partitions = Vec::new();
    for entry in std::fs::read_dir(topic_dir).map_err(|e| LogError::io(topic_dir, e))? {
        let entry = entry.map_err(|e| LogError::io(topic_dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let numeric = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
        if numeric && entry.path().is_dir() {
            if let Ok(p) = name.parse() {
                partitions.push(p);
            }
        }
    }
    partitions.sort_unstable();
    Ok(partitions)
}

/// True if any partition of the topic directory holds a non-empty segment
/// log (so it is more than an unfinished creation).
pub fn holds_records(topic_dir: &Path) -> Result<bool> {
    for p in partition_dirs(topic_dir)? {
        let dir = topic_dir.join(p.to_string());
        for entry in std::fs::read_dir(&dir).map_err(|e| LogError::io(&dir, e))? {
            let entry = entry.map_err(|e| LogError::io(&dir, e))?;
            let is_log = entry.file_name().to_string_lossy().ends_with(".log");
            let len = entry
                .metadata()
                .map_err(|e| LogError::io(entry.path(), e))?
                .len();
            if is_log && len > 0 {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The recovery step named when a topic's metadata is missing or damaged.
pub fn rebuild_hint(data_dir: &Path, topic: &str) -> String {
    format!(
        "stop the server, then run `kappa-inspect repair-topic {} --topic {topic}` \
         (it rebuilds topic.json from the partition directories with default settings \
         — pass --retention-ms/--fsync to choose others — and keeps any damaged file \
         beside it), or restore topic.json from a backup",
        data_dir.display()
    )
}

/// Rebuilds `topic.json` of `topic` in `data_dir` from its partition
/// directories (which must be `0..n` with no gap), with `config`'s settings
/// and `n` partitions. An existing `topic.json` is kept as
/// `topic.json.damaged-<ms>`. Returns what was written.
pub fn rebuild_topic_meta(data_dir: &Path, topic: &str, config: TopicConfig) -> Result<TopicMeta> {
    crate::topic::validate_topic_name(topic)?;
    let dir = data_dir.join("topics").join(topic);
    if !dir.is_dir() {
        return Err(LogError::UnknownTopic(topic.to_string()));
    }
    let partitions = partition_dirs(&dir)?;
    let count = partitions.len() as u32;
    if count == 0 || partitions.iter().enumerate().any(|(i, &p)| p != i as u32) {
        return Err(LogError::InvalidArgument(format!(
            "{}: the partition directories are {partitions:?}, not 0..n; repair by hand",
            dir.display()
        )));
    }
    let meta = TopicMeta {
        name: topic.to_string(),
        config: TopicConfig {
            partitions: count,
            ..config
        },
        created_ms: now_ms(),
    };
    meta.config.validate()?;
    let path = dir.join(TOPIC_META_FILE);
    if path.exists() {
        let aside = PathBuf::from(format!("{}.damaged-{}", path.display(), now_ms()));
        std::fs::rename(&path, &aside).map_err(|e| LogError::io(&path, e))?;
        tracing::warn!(kept = %aside.display(), "kept the old topic.json aside");
    }
    let json = serde_json::to_vec_pretty(&meta).expect("topic metadata serializes");
    io::write_atomic(&path, &json)?;
    Ok(meta)
}

/// True if the partition directory `dir` holds a segment file
/// (`<20 digits>.log`). Every partition of a topic whose `topic.json` was
/// written holds one: its creation made it before `topic.json`, and
/// retention never deletes the active segment.
fn has_segment(dir: &Path) -> Result<bool> {
    for entry in std::fs::read_dir(dir).map_err(|e| LogError::io(dir, e))? {
        let entry = entry.map_err(|e| LogError::io(dir, e))?;
        if base_offset_of(&entry.file_name().to_string_lossy()).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Refuses to open a topic one of whose partitions `topic.json` names is
/// lost — its directory missing or holding no segment — rather than let
/// recovery make it anew, empty, handing its offsets out again from 0.
pub fn check_partition_dirs(data_dir: &Path, topic_dir: &Path, meta: &TopicMeta) -> Result<()> {
    let partitions = meta.config.partitions;
    for p in 0..partitions {
        let dir = topic_dir.join(p.to_string());
        let problem = if !dir.is_dir() {
            "missing"
        } else if !has_segment(&dir)? {
            "holds no segment file"
        } else {
            continue;
        };
        return Err(LogError::Metadata {
            problem: format!(
                "{problem}, but the topic's topic.json names partition {p} (of {partitions}): \
                 its records are lost, and starting would make it anew, empty, handing its \
                 offsets out again from 0"
            ),
            recovery: recreate_partition_hint(data_dir, &meta.name, p),
            path: dir,
        });
    }
    Ok(())
}

/// The recovery step named when a partition directory is lost.
pub fn recreate_partition_hint(data_dir: &Path, topic: &str, partition: u32) -> String {
    let data = data_dir.display();
    format!(
        "stop the server and restore the directory from a backup; or, if its records are lost \
         for good, run `kappa-inspect repair-partition {data} --topic {topic} --partition \
         {partition} --start-offset N` with N past every offset it handed out — at least the \
         highest offset a consumer group committed on it (`kappa-inspect groups {data}`) or a \
         view read from it — so that no offset is handed out twice"
    )
}

/// Recreates the lost partition `partition` of `topic` in `data_dir`
/// (whose `topic.json` must name it): its directory with one empty segment
/// whose base offset is `start_offset`, so that the partition starts there
/// and new records get offsets from there on. Refuses a directory that
/// still holds a segment. Returns the segment file written.
pub fn recreate_partition(
    data_dir: &Path,
    topic: &str,
    partition: u32,
    start_offset: u64,
) -> Result<PathBuf> {
    crate::topic::validate_topic_name(topic)?;
    let topic_dir = data_dir.join("topics").join(topic);
    if !topic_dir.is_dir() {
        return Err(LogError::UnknownTopic(topic.to_string()));
    }
    let meta = crate::log::read_meta(&topic_dir.join(TOPIC_META_FILE))?;
    if partition >= meta.config.partitions {
        return Err(LogError::UnknownPartition {
            topic: topic.to_string(),
            partition,
            partitions: meta.config.partitions,
        });
    }
    let dir = topic_dir.join(partition.to_string());
    if dir.is_dir() && has_segment(&dir)? {
        return Err(LogError::InvalidArgument(format!(
            "{} holds segment files: the partition is not lost, nothing to recreate",
            dir.display()
        )));
    }
    if !dir.is_dir() {
        std::fs::create_dir(&dir).map_err(|e| LogError::io(&dir, e))?;
        io::sync_dir(&topic_dir)?;
    }
    let segment = SegmentPaths::new(&dir, start_offset).log;
    std::fs::File::create_new(&segment)
        .and_then(|f| f.sync_all())
        .map_err(|e| LogError::io(&segment, e))?;
    io::sync_dir(&dir)?;
    tracing::warn!(
        segment = %segment.display(),
        start_offset,
        "recreated a lost partition, empty"
    );
    Ok(segment)
}
