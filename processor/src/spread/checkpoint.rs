//! Checkpoints of a spread version's tasks, so that a node taking a
//! partition over loads its newest state and replays only the records
//! after it instead of the whole partition.
//!
//! Every [`CheckpointPlan::every`], each task whose committed offset moved
//! is copied with RocksDB's checkpoint (table files hard-linked) into a
//! scratch directory and handed to [`Checkpoints::save`] (the server's
//! object store: S3 or a shared directory; it uploads each table file
//! once). A task about to start restores the newest checkpoint of its
//! partition when that is ahead of the store this node has of it (or it
//! has none), then resumes from the checkpoint's commit like from its own.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::state::key::Meta;
use crate::state::store::{Scope, Store};
use crate::state::stores::Stores;

/// Where task checkpoints are kept.
pub trait Checkpoints: Send + Sync + fmt::Debug {
    /// Saves `dir`, a checkpoint of task `task` (`<view>#<p>@<version>`)
    /// whose committed offset is `offset`, as its newest.
    fn save(&self, task: &str, dir: &Path, offset: u64) -> Result<()>;

    /// The committed offset of `task`'s newest checkpoint, if it has one.
    fn newest(&self, task: &str) -> Result<Option<u64>>;

    /// Writes `task`'s newest checkpoint into `dir` (which must not
    /// exist); answers its committed offset, or `None` (nothing written)
    /// when it has none.
    fn restore(&self, task: &str, dir: &Path) -> Result<Option<u64>>;
}

/// How a spread version's tasks are checkpointed.
#[derive(Debug, Clone)]
pub struct CheckpointPlan {
    /// Where.
    pub checkpoints: Arc<dyn Checkpoints>,
    /// How often (a task whose offset did not move is skipped).
    pub every: Duration,
    /// Where checkpoints are made before they are saved (removed after).
    pub scratch: PathBuf,
}

/// A task's name in the checkpoint store: its scope,
/// `<view>#<partition>@<version>`.
pub fn task_name(task: &Scope) -> String {
    format!("{}@{}", task.name, task.version)
}

/// The committed offset of a task's store (its one partition).
pub(crate) fn committed_offset(store: &Store, task: &Scope) -> Result<Option<u64>> {
    Ok(store
        .get(&task.state_cf(), &Meta::Offset(0).key())?
        .and_then(|v| v.as_slice().try_into().ok())
        .map(u64::from_le_bytes))
}

/// Before task `task` starts: restores its newest checkpoint into its
/// store's place when that checkpoint is ahead of the store this node has
/// (or there is none). Answers the offset restored, if one was.
pub(crate) fn prepare(stores: &Stores, task: &Scope, plan: &CheckpointPlan) -> Result<Option<u64>> {
    let name = task_name(task);
    let Some(newest) = plan.checkpoints.newest(&name)? else {
        return Ok(None);
    };
    if stores.exists(task) {
        let local = {
            let store = stores.existing(task)?;
            committed_offset(&store, task)?
        };
        if local.is_some_and(|l| l >= newest) {
            return Ok(None);
        }
        stores.remove(task)?;
    }
    let restored = plan.checkpoints.restore(&name, &stores.path(task))?;
    if let Some(offset) = restored {
        tracing::info!(task = %name, offset, "restored the newest checkpoint");
    }
    Ok(restored)
}

/// Checkpoints task `task`'s `store` now; answers the offset saved.
pub(crate) fn take(store: &Store, task: &Scope, plan: &CheckpointPlan) -> Result<u64> {
    let name = task_name(task);
    let offset = committed_offset(store, task)?.unwrap_or(0);
    std::fs::create_dir_all(&plan.scratch).map_err(|e| {
        crate::error::ProcessorError::Stopped(format!(
            "cannot make {}: {e}",
            plan.scratch.display()
        ))
    })?;
    let dir = plan.scratch.join(format!("{name}-{}", kappa_log::now_ms()));
    let result = store
        .checkpoint(&dir)
        .and_then(|()| plan.checkpoints.save(&name, &dir, offset));
    let _ = std::fs::remove_dir_all(&dir);
    result.map(|()| offset)
}
