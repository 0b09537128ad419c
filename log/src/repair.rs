//! Operator repairs of log metadata, run knowingly with the server stopped
//! (`kappa-inspect repair-topic`), and the checks `Log::open` uses to tell
//! an unfinished topic creation from lost metadata.
//!
//! Nothing here deletes records: a rebuilt `topic.json` keeps the damaged
//! one beside it as `topic.json.damaged-<ms>`.

use std::path::{Path, PathBuf};

use crate::config::TopicConfig;
use crate::error::{LogError, Result};
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
