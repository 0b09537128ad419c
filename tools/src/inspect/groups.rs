//! `groups`: the committed offsets of every consumer group, per topic and
//! partition, with the lag against the partition's end offset on disk.
//!
//! `groups/offsets.log` is replayed by kappa-log's own `OffsetStore`, but
//! from a private copy in a temporary directory: opening the store may
//! truncate a torn tail or compact the file, and the inspector must never
//! change the data directory.

use std::path::Path;

use anyhow::Context;
use kappa_log::offsets::OffsetStore;
use serde::Serialize;

use super::{layout, text, walk};

/// One committed offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupOffset {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Partition.
    pub partition: u32,
    /// The committed offset (the next one the group reads).
    pub offset: u64,
    /// When it was committed, ms.
    pub commit_time_ms: i64,
    /// End offset of the partition's valid data on disk (`None` if the
    /// topic or partition is gone).
    pub end_offset: Option<u64>,
    /// `end_offset - offset` (0 if the commit is ahead).
    pub lag: Option<u64>,
}

/// Every committed offset, by group, topic and partition.
pub fn groups(data_dir: &Path) -> anyhow::Result<Vec<GroupOffset>> {
    layout::check_data_dir(data_dir)?;
    let file = data_dir.join("groups").join("offsets.log");
    if !file.exists() {
        return Ok(Vec::new());
    }
    let scratch = tempfile::tempdir().context("creating a temporary directory")?;
    let copy_dir = scratch.path().join("groups");
    std::fs::create_dir(&copy_dir)?;
    std::fs::copy(&file, copy_dir.join("offsets.log"))
        .with_context(|| format!("copying {}", file.display()))?;
    let store = OffsetStore::open(&copy_dir)
        .with_context(|| format!("replaying (a copy of) {}", file.display()))?;
    let mut out = Vec::new();
    for group in store.groups() {
        for c in store.group_offsets(&group) {
            let end_offset = end_offset(data_dir, &c.topic, c.partition)?;
            out.push(GroupOffset {
                group: group.clone(),
                topic: c.topic,
                partition: c.partition,
                offset: c.offset,
                commit_time_ms: c.commit_time_ms,
                end_offset,
                lag: end_offset.map(|end| end.saturating_sub(c.offset)),
            });
        }
    }
    Ok(out)
}

/// The end offset of a partition's valid data: the end of the last
/// segment's valid batches.
fn end_offset(data_dir: &Path, topic: &str, partition: u32) -> anyhow::Result<Option<u64>> {
    let dir = data_dir
        .join("topics")
        .join(topic)
        .join(partition.to_string());
    if kappa_log::validate_topic_name(topic).is_err() || !dir.is_dir() {
        return Ok(None);
    }
    let Some(last) = layout::segments(&dir)?.pop() else {
        return Ok(None);
    };
    Ok(Some(
        walk::walk(&last.paths.log, last.base_offset, true)?.next_offset,
    ))
}

/// The text form: one table.
pub fn render(offsets: &[GroupOffset]) -> String {
    if offsets.is_empty() {
        return "no committed consumer group offsets\n".into();
    }
    let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| v.to_string());
    let rows: Vec<Vec<String>> = offsets
        .iter()
        .map(|o| {
            vec![
                o.group.clone(),
                o.topic.clone(),
                o.partition.to_string(),
                o.offset.to_string(),
                opt(o.end_offset),
                opt(o.lag),
                text::time(o.commit_time_ms),
            ]
        })
        .collect();
    text::table(
        &[
            "group",
            "topic",
            "partition",
            "committed",
            "end",
            "lag",
            "commit_time",
        ],
        &rows,
        &[2, 3, 4, 5],
    )
}
