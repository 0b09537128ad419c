//! Finds what a data directory holds, by the rules of log/FORMAT.md §1:
//! `topics/<topic>/topic.json`, partition directories `0 .. partitions`,
//! segments named `<base_offset:020>.log` (exactly 20 ASCII digits).
//! Only lists and reads; never creates or deletes anything.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kappa_log::segment::SegmentPaths;
use kappa_log::TopicMeta;

/// A topic found on disk.
#[derive(Debug, Clone)]
pub struct TopicDir {
    /// Topic name (the directory name).
    pub name: String,
    /// The topic directory.
    pub dir: PathBuf,
    /// Its `topic.json`.
    pub meta: TopicMeta,
}

impl TopicDir {
    /// The directory of partition `p`.
    pub fn partition_dir(&self, p: u32) -> PathBuf {
        self.dir.join(p.to_string())
    }
}

/// One segment's files.
#[derive(Debug, Clone)]
pub struct SegmentFiles {
    /// Base offset, from the file name.
    pub base_offset: u64,
    /// Paths of `.log`, `.index`, `.timeindex`.
    pub paths: SegmentPaths,
}

/// Checks that `data_dir` looks like a kappa data directory.
pub fn check_data_dir(data_dir: &Path) -> anyhow::Result<()> {
    if !data_dir.join("topics").is_dir() {
        bail!(
            "{} is not a kappa data directory (no topics/ inside)",
            data_dir.display()
        );
    }
    Ok(())
}

/// The topics of `data_dir` in name order (all, or only `only`). Topic
/// directories without `topic.json` (an unfinished creation, deleted at the
/// next open) are skipped.
pub fn topics(data_dir: &Path, only: Option<&str>) -> anyhow::Result<Vec<TopicDir>> {
    check_data_dir(data_dir)?;
    let root = data_dir.join("topics");
    let mut names = Vec::new();
    for entry in fs::read_dir(&root).with_context(|| format!("listing {}", root.display()))? {
        let entry = entry.with_context(|| format!("listing {}", root.display()))?;
        if let Some(name) = entry.file_name().to_str() {
            if entry.path().join("topic.json").is_file() {
                names.push(name.to_owned());
            }
        }
    }
    names.sort();
    if let Some(t) = only {
        if !names.iter().any(|n| n == t) {
            bail!(
                "topic {t:?} not found in {} (topics: {})",
                data_dir.display(),
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            );
        }
        names.retain(|n| n == t);
    }
    names
        .into_iter()
        .map(|name| {
            let dir = root.join(&name);
            let path = dir.join("topic.json");
            let text =
                fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            let meta: TopicMeta = serde_json::from_str(&text)
                .with_context(|| format!("{} is not a valid topic.json", path.display()))?;
            Ok(TopicDir { name, dir, meta })
        })
        .collect()
}

/// The partitions to look at: all of the topic's, or only `only`.
pub fn partitions(topic: &TopicDir, only: Option<u32>) -> anyhow::Result<Vec<u32>> {
    let count = topic.meta.config.partitions;
    match only {
        Some(p) if p >= count => bail!(
            "topic {:?} has {count} partition(s); there is no partition {p}",
            topic.name
        ),
        Some(p) => Ok(vec![p]),
        None => Ok((0..count).collect()),
    }
}

/// The segments of a partition directory, by base offset.
pub fn segments(partition_dir: &Path) -> anyhow::Result<Vec<SegmentFiles>> {
    let mut bases = Vec::new();
    let entries = fs::read_dir(partition_dir)
        .with_context(|| format!("listing {}", partition_dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", partition_dir.display()))?;
        if let Some(base) = entry.file_name().to_str().and_then(segment_base) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    Ok(bases
        .into_iter()
        .map(|base_offset| SegmentFiles {
            base_offset,
            paths: SegmentPaths::new(partition_dir, base_offset),
        })
        .collect())
}

/// The base offset of a segment file name: exactly 20 ASCII digits + `.log`.
pub fn segment_base(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    (stem.len() == 20 && stem.bytes().all(|b| b.is_ascii_digit()))
        .then(|| stem.parse().ok())
        .flatten()
}
