//! A view's replay horizon: what a replay from earliest would read now,
//! against what the served version saw. Retention (or a repair) can delete
//! the oldest input; a replay after that would serve less than the version
//! it replaces, silently. The horizon says so up front, and a replay over
//! truncated history is refused unless asked for knowingly.

use kappa_log::Log;
use kappa_processor::source::PartitionOffsets;
use serde::Serialize;

use super::catalog::VersionEntry;

/// What a replay from earliest would read, per input topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayHorizon {
    /// True if the log still holds every input record the version saw: a
    /// replay from earliest reads all of it.
    pub complete: bool,
    /// The stream input and, for a join, the table it reads.
    pub topics: Vec<TopicHorizon>,
}

/// One input topic's horizon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicHorizon {
    /// Topic.
    pub topic: String,
    /// `"input"` (the stream) or `"table"` (a join's table, always read
    /// from its start).
    pub role: &'static str,
    /// Per partition.
    pub partitions: Vec<PartitionHorizon>,
}

/// One partition's horizon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionHorizon {
    /// Partition.
    pub partition: u32,
    /// The earliest offset still in the log.
    pub earliest_offset: u64,
    /// When the record there was appended (ms); null for an empty partition.
    pub earliest_append_ms: Option<i64>,
    /// The first offset the version read.
    pub first_seen: u64,
    /// Records the version saw that the log no longer holds.
    pub missing: u64,
}

impl ReplayHorizon {
    /// The partitions with missing records, as `topic/partition: n records
    /// (offsets a..b)` for messages.
    pub fn describe_missing(&self) -> Vec<String> {
        self.topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().filter(|p| p.missing > 0).map(|p| {
                    format!(
                        "{}/{}: {} records (offsets {}..{}) are gone",
                        t.topic, p.partition, p.missing, p.first_seen, p.earliest_offset
                    )
                })
            })
            .collect()
    }
}

/// The replay horizon of `entry` in `log` now. A topic that is gone
/// contributes nothing (the replay itself will fail and say so).
pub fn horizon(log: &Log, entry: &VersionEntry) -> ReplayHorizon {
    let plan = &entry.plan;
    let mut topics = vec![topic_horizon(
        log,
        &plan.source.topic,
        "input",
        entry.first_offsets.as_deref(),
    )];
    for joined in plan.joined_topics() {
        topics.push(topic_horizon(log, joined, "table", None));
    }
    let topics: Vec<TopicHorizon> = topics.into_iter().flatten().collect();
    ReplayHorizon {
        complete: topics
            .iter()
            .all(|t| t.partitions.iter().all(|p| p.missing == 0)),
        topics,
    }
}

/// The replay horizon of `entry`, whose input lives on a Kafka cluster,
/// from the cluster's `offsets` of its input topic (empty when the cluster
/// did not answer: nothing is known missing). The cluster's retention
/// deletes from the start of a partition as the built-in log's does; when
/// a record was appended there is not asked (`earliest_append_ms` null).
pub fn from_offsets(entry: &VersionEntry, offsets: &[PartitionOffsets]) -> ReplayHorizon {
    let first = entry.first_offsets.as_deref();
    let partitions: Vec<PartitionHorizon> = offsets
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let first_seen = first.and_then(|f| f.get(i).copied()).unwrap_or(0);
            PartitionHorizon {
                partition: i as u32,
                earliest_offset: p.start,
                earliest_append_ms: None,
                first_seen,
                missing: p.start.saturating_sub(first_seen),
            }
        })
        .collect();
    let topics = match partitions.is_empty() {
        true => Vec::new(),
        false => vec![TopicHorizon {
            topic: entry.plan.source.topic.clone(),
            role: "input",
            partitions,
        }],
    };
    ReplayHorizon {
        complete: topics
            .iter()
            .all(|t| t.partitions.iter().all(|p| p.missing == 0)),
        topics,
    }
}

/// `first` = where the version began per partition; `None` = offset 0
/// (a table, or a version recorded before first offsets were).
fn topic_horizon(
    log: &Log,
    name: &str,
    role: &'static str,
    first: Option<&[u64]>,
) -> Option<TopicHorizon> {
    let topic = log.topic(name).ok()?;
    let partitions = topic
        .partitions()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let earliest_offset = p.start_offset();
            let first_seen = first.and_then(|f| f.get(i).copied()).unwrap_or(0);
            let earliest_append_ms = p.earliest_append_time().ok().flatten();
            PartitionHorizon {
                partition: p.id(),
                earliest_offset,
                earliest_append_ms,
                first_seen,
                missing: earliest_offset.saturating_sub(first_seen),
            }
        })
        .collect();
    Some(TopicHorizon {
        topic: name.to_string(),
        role,
        partitions,
    })
}
