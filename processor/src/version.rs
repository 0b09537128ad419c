//! A processor version running on its own thread (the coordinator of its
//! workers when it runs in parallel, [`crate::parallel`]), and the building blocks
//! of replay: start a version from earliest, latest, a timestamp or explicit
//! offsets into its own column families; watch its progress and lag; stop
//! it. [`crate::host`] offers it to servers.

use std::sync::Arc;
use std::thread::JoinHandle;

use kappa_log::Log;
use serde::Serialize;

use crate::error::{ProcessorError, Result};
use crate::plan::Plan;
use crate::progress::{Progress, ProgressSnapshot};
use crate::runner::{RunOptions, Runtime};
use crate::sink::OutputSink;
use crate::source::{Source, SourceTopic};
use crate::spread::SpreadVersion;
use crate::state::store::{Scope, Store};
use crate::stop::StopSignal;

/// One input partition's position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartitionLag {
    /// Partition.
    pub partition: u32,
    /// Committed offset.
    pub committed: u64,
    /// End offset of the input now.
    pub end: u64,
    /// Records not yet processed and committed.
    pub lag: u64,
}

/// A running processor version: whole on this node, or spread over
/// several nodes ([`crate::spread`]).
pub struct RunningProcessor {
    scope: Scope,
    plan: Plan,
    how: How,
}

/// How a version runs.
enum How {
    /// On a thread of its own, every input partition.
    Whole(Whole),
    /// As one task per partition this node owns.
    Spread(SpreadVersion),
}

/// A version running whole on its own thread.
struct Whole {
    /// The input topic the version reads, as its runtime opened it (a
    /// cluster's keeps its partitions' ends cached).
    input: Arc<dyn SourceTopic>,
    progress: Arc<Progress>,
    stop: Arc<StopSignal>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl RunningProcessor {
    /// Opens the version (restoring its state) on the caller's thread, so
    /// errors surface here, then runs it on a thread of its own.
    /// Its inputs are read from `source`, its sink topic appended to
    /// `cluster_sink` when it lives on a cluster, its other output topics
    /// to `log`.
    pub fn start(
        plan: Plan,
        version: u64,
        log: Arc<Log>,
        source: Arc<dyn Source>,
        cluster_sink: Option<Arc<dyn OutputSink>>,
        store: Arc<Store>,
        options: RunOptions,
    ) -> Result<Self> {
        let runtime = Runtime::open_with_source(
            plan.clone(),
            version,
            log,
            source,
            cluster_sink,
            store,
            options,
        )?;
        let scope = runtime.scope().clone();
        let input = runtime.input_topic();
        let progress = runtime.progress();
        let stop = runtime.stop_signal();
        let thread = std::thread::Builder::new()
            .name(format!("kappa-proc-{}@{}", scope.name, scope.version))
            .spawn(move || {
                let result = runtime.run();
                if let Err(e) = &result {
                    tracing::error!(error = %e, "processor stopped with an error");
                }
                result
            })
            .map_err(|e| ProcessorError::Stopped(format!("cannot start a thread: {e}")))?;
        Ok(RunningProcessor {
            scope,
            plan,
            how: How::Whole(Whole {
                input,
                progress,
                stop,
                thread: Some(thread),
            }),
        })
    }

    /// A version spread over nodes, running `plan` as `spread`'s tasks.
    pub fn spread(plan: Plan, scope: Scope, spread: SpreadVersion) -> Self {
        RunningProcessor {
            scope,
            plan,
            how: How::Spread(spread),
        }
    }

    /// The tasks, when the version is spread over nodes.
    pub fn as_spread(&self) -> Option<&SpreadVersion> {
        match &self.how {
            How::Spread(s) => Some(s),
            How::Whole(_) => None,
        }
    }

    /// Name and version.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// The plan it runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Counters and the last commit's position.
    pub fn progress(&self) -> ProgressSnapshot {
        match &self.how {
            How::Whole(w) => w.progress.snapshot(),
            How::Spread(s) => s.progress(),
        }
    }

    /// The shared progress, so a caller can wait for commits
    /// ([`Progress::wait_committed`]) without holding the processor.
    pub fn shared_progress(&self) -> Arc<Progress> {
        match &self.how {
            How::Whole(w) => w.progress.clone(),
            How::Spread(s) => s.shared_progress(),
        }
    }

    /// Committed position against the input's end, per partition.
    pub fn lag(&self) -> Result<Vec<PartitionLag>> {
        let w = match &self.how {
            How::Whole(w) => w,
            How::Spread(s) => return s.lag(),
        };
        let committed = w.progress.snapshot().committed_offsets;
        committed
            .into_iter()
            .enumerate()
            .map(|(p, c)| {
                let end = w.input.end_offset(p as u32)?;
                Ok(PartitionLag {
                    partition: p as u32,
                    committed: c,
                    end,
                    lag: end.saturating_sub(c),
                })
            })
            .collect()
    }

    /// Waits (woken by commits) until every partition's committed offset
    /// reaches `targets`, or `timeout`; returns whether it did.
    pub fn wait_committed(&self, targets: &[u64], timeout: std::time::Duration) -> bool {
        self.shared_progress().wait_committed(timeout, |offsets| {
            offsets.iter().zip(targets).all(|(c, t)| c >= t)
        })
    }

    /// True once the thread ended (stopped, or failed).
    pub fn is_finished(&self) -> bool {
        match &self.how {
            How::Whole(w) => w.thread.as_ref().is_none_or(JoinHandle::is_finished),
            How::Spread(s) => s.is_finished(),
        }
    }

    /// Stops after a final commit and waits for the thread.
    pub fn stop(self) -> Result<()> {
        match self.how {
            How::Whole(mut w) => {
                w.stop.stop();
                w.join()
            }
            How::Spread(s) => s.stop(),
        }
    }

    /// Asks the version to end at its next batch boundary without a final
    /// commit (its state is about to be dropped); returns at once.
    /// [`RunningProcessor::stop`] or dropping the handle then waits for the
    /// thread.
    pub fn abandon(&self) {
        match &self.how {
            How::Whole(w) => w.stop.abandon(),
            How::Spread(s) => s.abandon(),
        }
    }
}

impl Whole {
    fn join(&mut self) -> Result<()> {
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| ProcessorError::Stopped("the processor thread panicked".into()))?,
            None => Ok(()),
        }
    }
}

impl Drop for Whole {
    fn drop(&mut self) {
        self.stop.stop();
        let _ = self.join();
    }
}
