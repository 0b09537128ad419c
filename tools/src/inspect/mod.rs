//! `kappa-inspect`: an offline inspector of a kappa data directory. It
//! never writes to the directory: files are opened read-only (segment
//! `.log` files are read into memory, index files memory-mapped read-only
//! through kappa-log's own `OffsetIndex`/`TimeIndex`), and the consumer
//! offsets file is replayed from a private copy.
//!
//! All decoding is kappa-log's (`batch::BatchView::parse`, the index types,
//! `TopicMeta`, `OffsetStore`); this module only walks files in order and
//! says precisely where what it found differs from log/FORMAT.md.
//!
//! Module map:
//!
//! * [`layout`]: topics, partitions and segment files of a data directory.
//! * [`walk`]: one segment's batches, validated in order, stopping at the
//!   first bad one.
//! * [`indexes`]: checks of a segment's `.index` / `.timeindex` against its
//!   batches.
//! * [`segments`], [`dump`], [`verify`], [`groups`]: the four subcommands,
//!   each a function returning a serializable report plus its text form.
//! * [`text`]: small formatting helpers (tables, timestamps, bytes).
//! * [`sample`]: a small data directory written with kappa-log, for tests.

pub mod dump;
pub mod groups;
pub mod indexes;
pub mod layout;
pub mod sample;
pub mod segments;
pub mod text;
pub mod verify;
pub mod walk;

use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

/// The first thing found wrong in a file, said precisely.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The file.
    pub path: PathBuf,
    /// Byte position in that file where the problem starts.
    pub position: u64,
    /// Base offset of the batch concerned (the offset expected there when
    /// the batch itself is unreadable).
    pub batch_base_offset: Option<u64>,
    /// Index files: the number of the entry concerned (from 0).
    pub entry: Option<usize>,
    /// What is wrong, in a few words.
    pub what: String,
    /// What the format requires there.
    pub expected: String,
    /// What the file holds instead.
    pub found: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.path.display(), self.position)?;
        if let Some(entry) = self.entry {
            write!(f, " (entry {entry})")?;
        }
        if let Some(base) = self.batch_base_offset {
            write!(f, " (batch base offset {base})")?;
        }
        write!(
            f,
            ": {}: expected {}, found {}",
            self.what, self.expected, self.found
        )
    }
}

#[cfg(test)]
mod tests;
