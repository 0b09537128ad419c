//! Changing which version of a view is built and served — replay, promote,
//! rollback — on this node, or in a Kappa cluster on every node in the
//! control topic's order. `POST /v1/views/{view}/replay|promote|rollback`
//! and the SQL statements `REPLAY`, `PROMOTE` and `ROLLBACK` both run
//! here, so both frontends check and answer the same.
//!
//! A replay's start is checked before anything changes: offsets beyond
//! the input's end are refused (`offset_out_of_range`), and a replay over
//! history retention deleted is refused (`history_truncated`) unless the
//! request allows it.
//!
//! Everything here blocks (the catalog, RocksDB, the control topic).

use kappa_log::Log;
use kappa_processor::host::StartFrom;

use super::StatementError;
use crate::dto::{ReplayOut, ReplayRequest, ServedOut, SwapMode};
use crate::nodes::record::Operation;
use crate::nodes::{Nodes, Outcome};
use crate::views::manager::{Change, Swap};
use crate::views::review::Served;
use crate::views::{ViewError, ViewManager};

/// What a version change needs: the log (a replay's input), the views,
/// and the Kappa cluster's nodes when this node is in one.
pub struct Versions<'a> {
    /// The log.
    pub log: &'a Log,
    /// The views.
    pub views: &'a ViewManager,
    /// The Kappa cluster's nodes (`None`: this node alone).
    pub nodes: Option<&'a Nodes>,
}

impl Versions<'_> {
    /// Starts a new version of `view` from `request.from`: a table's is
    /// built (and served once caught up, or on promote with
    /// `swap: manual`), a derived stream's serves at once.
    pub fn replay(&self, view: &str, request: ReplayRequest) -> Result<ReplayOut, StatementError> {
        let from = crate::dto::start_from(request.from.clone());
        self.check_start(view, &from)?;
        if !request.allow_truncated {
            self.check_history(view, &from)?;
        }
        let change = match self.nodes {
            // In a Kappa cluster every node builds the new version.
            Some(nodes) => match nodes.operate(Operation::Replay {
                view: view.to_string(),
                request: request.clone(),
            })? {
                Outcome::Replayed(change) => change?,
                other => return Err(unexpected(other)),
            },
            None => {
                let swap = match request.swap {
                    SwapMode::Auto => Swap::Auto,
                    SwapMode::Manual => Swap::Manual,
                };
                self.views.replay(view, from, swap)?
            }
        };
        let (building_version, served_version) = match change {
            Change::Building(version) => (Some(version), None),
            Change::Served(version) => (None, Some(version)),
            Change::Unchanged => (None, None),
        };
        Ok(ReplayOut {
            view: view.to_string(),
            building_version,
            served_version,
            from: request.from,
        })
    }

    /// Serves the version of `view` being built now.
    pub fn promote(&self, view: &str) -> Result<ServedOut, StatementError> {
        let served = match self.nodes {
            Some(nodes) => {
                let building = self
                    .views
                    .describe(view)?
                    .building_version
                    .map(|b| b.version.version)
                    .ok_or_else(|| nothing_to_promote(view))?;
                served_everywhere(
                    nodes,
                    Operation::Promote {
                        view: view.to_string(),
                        version: building,
                    },
                    view,
                )?
            }
            None => self.views.promote(view)?,
        };
        Ok(served_out(view, served))
    }

    /// Serves the version of `view` served before the current one again.
    pub fn rollback(&self, view: &str) -> Result<ServedOut, StatementError> {
        let served = match self.nodes {
            Some(nodes) => served_everywhere(
                nodes,
                Operation::Rollback {
                    view: view.to_string(),
                },
                view,
            )?,
            None => self.views.rollback(view)?,
        };
        Ok(served_out(view, served))
    }

    /// `from`'s offsets must give at most one offset per partition of the
    /// view's input topic, none beyond the partition's end (one below the
    /// start begins at the start, as the processor does). Other starts
    /// are always valid.
    fn check_start(&self, view: &str, from: &StartFrom) -> Result<(), StatementError> {
        let StartFrom::Offsets(offsets) = from else {
            return Ok(());
        };
        let topic_name = self
            .views
            .with_view(view, |entry| entry.latest().plan.source.topic.clone())
            .ok_or_else(|| ViewError::UnknownView(view.to_string()))?;
        let topic = self.log.topic(&topic_name)?;
        if offsets.len() > topic.partitions().len() {
            return Err(StatementError::OffsetOutOfRange(format!(
                "replay of {view:?}: {} offsets given, topic {topic_name:?} has {} partitions",
                offsets.len(),
                topic.partitions().len()
            )));
        }
        for (p, (&offset, partition)) in offsets.iter().zip(topic.partitions()).enumerate() {
            let end = partition.end_offset();
            if offset > end {
                return Err(StatementError::OffsetOutOfRange(format!(
                    "replay of {view:?}: topic {topic_name:?} partition {p}: offset {offset} is beyond the end ({end})"
                )));
            }
        }
        Ok(())
    }

    /// A replay from earliest (or from offsets below what the log holds)
    /// over input the log no longer holds would serve less than the
    /// version it replaces: refused (`history_truncated`, naming what is
    /// gone) unless the request allows it.
    fn check_history(&self, view: &str, from: &StartFrom) -> Result<(), StatementError> {
        let horizon = self
            .views
            .with_view(view, |entry| {
                crate::views::horizon::horizon(self.log, &entry.served)
            })
            .ok_or_else(|| ViewError::UnknownView(view.to_string()))?;
        let mut missing = match from {
            StartFrom::Earliest => horizon.describe_missing(),
            _ => Vec::new(),
        };
        if let (StartFrom::Offsets(offsets), Some(input)) = (from, horizon.topics.first()) {
            for (p, (&offset, h)) in offsets.iter().zip(&input.partitions).enumerate() {
                if offset < h.earliest_offset {
                    missing.push(format!(
                        "{}/{p}: offsets {offset}..{} are gone",
                        input.topic, h.earliest_offset
                    ));
                }
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(ViewError::Refused {
            code: "history_truncated",
            message: format!(
                "replay of {view:?} would read less input than its served version saw: {}; \
                 retention deleted it. Replay anyway with {{\"allow_truncated\": true}} \
                 (SQL: REPLAY {view} WITH (ALLOW_TRUNCATED = TRUE))",
                missing.join("; ")
            ),
        }
        .into())
    }
}

/// Runs a promote or rollback on every node of the Kappa cluster: the
/// version this node serves after it.
fn served_everywhere(nodes: &Nodes, op: Operation, view: &str) -> Result<Served, StatementError> {
    match nodes.operate(op)? {
        Outcome::Served(Ok(Some(served))) => Ok(served),
        Outcome::Served(Ok(None)) => Err(ViewError::Refused {
            code: "nothing_to_promote",
            message: format!("view {view:?}: the version is no longer being built"),
        }
        .into()),
        Outcome::Served(Err(e)) => Err(e.into()),
        other => Err(unexpected(other)),
    }
}

fn nothing_to_promote(view: &str) -> ViewError {
    ViewError::Refused {
        code: "nothing_to_promote",
        message: format!("view {view:?} has no version being built to promote"),
    }
}

fn unexpected(outcome: Outcome) -> StatementError {
    StatementError::Unavailable(format!(
        "the control topic answered another record's outcome: {outcome:?}"
    ))
}

fn served_out(view: &str, served: Served) -> ServedOut {
    ServedOut {
        view: view.to_string(),
        served_version: served.served,
        previous_version: served.previous,
    }
}
