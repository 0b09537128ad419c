//! The tasks' checkpoints of a Kappa cluster's views in object storage
//! (`--checkpoint-url`): the cluster crate's [`CheckpointStore`] as the
//! processor's [`Checkpoints`]. A checkpoint's manifest carries the task's
//! committed offset as `meta.offset`, which decides whether a node taking
//! a partition over restores it (it is ahead of the store the node has).

use std::path::Path;

use kappa_cluster::CheckpointStore;
use kappa_processor::error::{ProcessorError, Result};
use kappa_processor::spread::Checkpoints;
use serde_json::json;

/// Restores of a task's checkpoint onto this node, by view (a partition
/// taken over, or a store behind the cluster's newest checkpoint).
pub const CHECKPOINT_RESTORES: &str = "kappa_view_checkpoint_restores_total";

/// The checkpoint store of the Kappa cluster's tasks.
pub struct TaskCheckpoints(CheckpointStore);

impl std::fmt::Debug for TaskCheckpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("TaskCheckpoints")
            .field(&self.0.url())
            .finish()
    }
}

impl TaskCheckpoints {
    /// The store at `url` (`s3://bucket/prefix` or `file:///dir`).
    pub fn open(url: &str) -> anyhow::Result<TaskCheckpoints> {
        CheckpointStore::open(url)
            .map(TaskCheckpoints)
            .map_err(|e| anyhow::anyhow!("checkpoint_url: {e}"))
    }
}

fn failed(what: &str, task: &str, e: String) -> ProcessorError {
    ProcessorError::Stopped(format!("{what} the checkpoint of {task}: {e}"))
}

/// The view a task name (`<view>#<partition>@<version>`) belongs to.
fn view_of(task: &str) -> String {
    task.split(['#', '@']).next().unwrap_or(task).to_string()
}

impl Checkpoints for TaskCheckpoints {
    fn save(&self, task: &str, dir: &Path, offset: u64) -> Result<()> {
        self.0
            .save(task, dir, json!({ "offset": offset }))
            .map(|saved| {
                tracing::debug!(
                    task,
                    offset,
                    seq = saved.seq,
                    bytes = saved.bytes_uploaded,
                    "checkpoint saved"
                );
            })
            .map_err(|e| failed("saving", task, e))
    }

    fn newest(&self, task: &str) -> Result<Option<u64>> {
        let info = self
            .0
            .newest(task)
            .map_err(|e| failed("reading", task, e))?;
        Ok(info.and_then(|i| i.meta["offset"].as_u64()))
    }

    fn restore(&self, task: &str, dir: &Path) -> Result<Option<u64>> {
        let info = self
            .0
            .restore(task, dir)
            .map_err(|e| failed("restoring", task, e))?;
        if info.is_some() {
            metrics::counter!(CHECKPOINT_RESTORES, "view" => view_of(task)).increment(1);
        }
        Ok(info.and_then(|i| i.meta["offset"].as_u64()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saves_and_restores_through_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("file://{}", dir.path().join("store").display());
        let store = TaskCheckpoints::open(&url).unwrap();
        let task = "purchase_stats#3@1";
        assert_eq!(store.newest(task).unwrap(), None);
        let source = dir.path().join("ckpt");
        std::fs::create_dir(&source).unwrap();
        std::fs::write(source.join("000001.sst"), b"table").unwrap();
        std::fs::write(source.join("CURRENT"), b"MANIFEST-000001\n").unwrap();
        store.save(task, &source, 42).unwrap();
        assert_eq!(store.newest(task).unwrap(), Some(42));
        let restored = dir.path().join("restored");
        assert_eq!(store.restore(task, &restored).unwrap(), Some(42));
        assert_eq!(
            std::fs::read(restored.join("000001.sst")).unwrap(),
            b"table"
        );
        assert_eq!(view_of(task), "purchase_stats");
    }
}
