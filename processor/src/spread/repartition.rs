//! A view spread over nodes whose `GROUP BY` is not the record key runs
//! in two stages joined by a repartition topic, as Kafka Streams does:
//!
//! 1. **Repartition** (one task per input partition, `<view>#<p>.in`):
//!    each event that passes the filter is written to the repartition
//!    topic keyed by its group key (the view key), its value and record
//!    timestamp as read, and its input partition and offset in the header
//!    [`SOURCE_HEADER`] (`<partition>:<offset>`). The topic has as many
//!    partitions as the input and the key picks the partition as Kafka's
//!    Java partitioner does, so a group's records all meet in one
//!    partition — where reads of its key look.
//! 2. **Aggregate** (one task per repartition partition, `<view>#<p>`):
//!    the view's own plan over the repartition topic.
//!
//! Exactly once across the two: a first-stage task started again (after
//! a crash, or on the node that took its partition over) resumes from its
//! last commit and writes again what it wrote after it. Within one
//! repartition partition the records of one input partition come in that
//! partition's offset order, so the second stage drops a record whose
//! source offset is not past the last it took from that input partition
//! ([`SourceDedup`], committed with its state). Nothing is lost: a first
//! stage never resumes past what it wrote.

use std::collections::BTreeMap;

use crate::error::{ProcessorError, Result};
use crate::expr::Expr;
use crate::plan::{LateHandling, Operation, Plan, Sink, SpreadStage};
use crate::state::key::Meta;
use crate::state::store::{Batch, Store};

/// The header of a repartitioned record naming the input partition and
/// offset it was made from.
pub const SOURCE_HEADER: &str = "kappa-source";

/// The header of a repartitioned record of a view joining a table: the
/// table row the first stage joined the event with (JSON; `null` for a
/// LEFT JOIN without a match).
pub const JOINED_HEADER: &str = "kappa-joined";

/// Whether `plan` must be re-keyed before its aggregate can be split by
/// partition: an aggregate grouping by anything but the record key.
pub fn needs_repartition(plan: &Plan) -> bool {
    match &plan.operation {
        Operation::Aggregate(spec) => !matches!(&spec.group_by[..], [Expr::Key]),
        Operation::Project { .. } => false,
    }
}

/// The two stages of `plan` over `topic`: the first stage's plan for
/// input partition `partition`, and the aggregate's. A view joining a
/// table joins in the first stage (the table co-partitioned with the
/// input, or read whole) and passes the row it joined on in the header
/// [`JOINED_HEADER`]; the second stage neither joins nor filters again.
pub fn stages(plan: &Plan, topic: &str, partition: u32) -> Result<(Plan, Plan)> {
    let cluster = plan.source.cluster.clone().ok_or_else(|| {
        ProcessorError::InvalidPlan(format!(
            "view '{}' reads the built-in log: only views over a cluster are repartitioned",
            plan.name
        ))
    })?;
    let mut first = plan.clone();
    // Repeats of one id meet in the second stage (same group key).
    first.dedup = None;
    first.sink = Sink::Topic(topic.to_string());
    first.sink_cluster = Some(cluster.clone());
    first.late = LateHandling::Drop;
    first.spread_stage = Some(SpreadStage::Repartition {
        topic: topic.to_string(),
        partition,
    });
    let mut second = plan.clone();
    second.source.topic = topic.to_string();
    second.source.cluster = Some(cluster);
    second.spread_stage = Some(SpreadStage::AfterRepartition);
    if let Some(join) = second.join.take() {
        // The filter may name the table's columns: the first stage
        // applied it.
        second.filter = None;
        second.spread_stage = Some(SpreadStage::AfterJoinedRepartition { alias: join.alias });
    }
    Ok((first, second))
}

/// The last input offset the second stage took from each input
/// partition; committed with its state under [`Meta::SourcePositions`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SourceDedup {
    taken: BTreeMap<u32, u64>,
}

impl SourceDedup {
    /// The positions committed in `store` (`cf`: the version's state).
    pub(crate) fn restore(store: &Store, cf: &str) -> Result<SourceDedup> {
        let Some(bytes) = store.get(cf, &Meta::SourcePositions.key())? else {
            return Ok(SourceDedup::default());
        };
        let taken = serde_json::from_slice(&bytes).map_err(|e| ProcessorError::CorruptState {
            cf: cf.to_string(),
            reason: format!("meta {}: {e}", Meta::SourcePositions.name()),
        })?;
        Ok(SourceDedup { taken })
    }

    /// Whether the record with `header` (the value of [`SOURCE_HEADER`],
    /// if any) is new; records it as taken. A record without the header
    /// is taken (written by someone else than the first stage).
    pub(crate) fn admit(&mut self, header: Option<&[u8]>) -> bool {
        let Some((partition, offset)) = header.and_then(parse_source) else {
            return true;
        };
        match self.taken.get(&partition) {
            Some(&last) if offset <= last => false,
            _ => {
                self.taken.insert(partition, offset);
                true
            }
        }
    }

    /// Adds the positions to a commit.
    pub(crate) fn flush(&self, batch: &mut Batch, cf: &str) {
        if !self.taken.is_empty() {
            let json = serde_json::to_vec(&self.taken).expect("positions serialize");
            batch.put(cf, Meta::SourcePositions.key(), json);
        }
    }
}

/// `<partition>:<offset>`.
fn parse_source(header: &[u8]) -> Option<(u32, u64)> {
    let text = std::str::from_utf8(header).ok()?;
    let (p, o) = text.split_once(':')?;
    Some((p.parse().ok()?, o.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_of_a_source_are_dropped_in_its_offset_order() {
        let mut dedup = SourceDedup::default();
        assert!(dedup.admit(Some(b"0:5")));
        assert!(dedup.admit(Some(b"1:2")));
        assert!(dedup.admit(Some(b"0:6")));
        // The first stage of partition 0 replayed from offset 4.
        assert!(!dedup.admit(Some(b"0:4")));
        assert!(!dedup.admit(Some(b"0:6")));
        assert!(dedup.admit(Some(b"0:7")));
        assert!(dedup.admit(None));
        assert!(dedup.admit(Some(b"garbage")));
        assert_eq!(dedup.taken, BTreeMap::from([(0, 7), (1, 2)]));
    }
}
