//! The server's processors and views: the [`catalog`] of what is hosted
//! (persisted in the data directory) and the [`manager`] that runs every
//! live version on its own thread, builds new versions in the background
//! and swaps them in (blue/green), and answers reads.
//!
//! Everything here blocks (RocksDB, the log, joining threads): callers on
//! the async runtime go through `spawn_blocking`.

pub mod catalog;
pub mod catch_up;
pub mod horizon;
pub mod manager;
mod reads;
pub mod retry;
pub mod review;
pub mod stored;
mod supervisor;

use kappa_processor::error::ProcessorError;

pub use manager::{ManagerConfig, ViewManager};
pub use reads::{RowsAnswer, RowsOutExt, RowsRequest, RowsTest, SpreadRows, MAX_ROWS_PER_PAGE};
pub use retry::Clock;

/// What can go wrong hosting views; `crate::error` maps each to a status.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// No view or stream of that name.
    #[error("view {0:?} does not exist")]
    UnknownView(String),
    /// No declared stream or table of that name.
    #[error("stream or table {0:?} does not exist")]
    UnknownSource(String),
    /// The version is not (or no longer) readable.
    #[error("view {view:?} has no readable version {version}")]
    UnknownVersion {
        /// View.
        view: String,
        /// Version asked for.
        version: u64,
    },
    /// The name is taken.
    #[error("{0:?} already exists")]
    Exists(String),
    /// Something reads from what is being dropped.
    #[error("{name:?} is read by {dependents:?}: drop them first")]
    HasDependents {
        /// What was to be dropped.
        name: String,
        /// Views reading it.
        dependents: Vec<String>,
    },
    /// The definition cannot run.
    #[error("invalid definition: {0}")]
    InvalidPlan(String),
    /// A request that makes no sense for this view.
    #[error("{0}")]
    BadRequest(String),
    /// Rows were asked of a derived stream.
    #[error("{0:?} is a stream: its rows are records of its topic, read them there")]
    NotATable(String),
    /// Read-your-writes: the view did not reach the offsets in time.
    #[error("view {view:?} has not processed up to {wanted}; committed {committed}")]
    Behind {
        /// View.
        view: String,
        /// The offsets waited for.
        wanted: String,
        /// The offsets committed when the wait ended.
        committed: String,
    },
    /// The processor crate failed.
    #[error(transparent)]
    Processor(#[from] ProcessorError),
    /// The catalog could not be read or written.
    #[error("catalog: {0}")]
    Catalog(#[from] catalog::CatalogError),
    /// The server is shutting down.
    #[error("the server is shutting down")]
    Closed,
    /// The request conflicts with the view's state (`code` says how:
    /// nothing to promote or roll back, the version is behind).
    #[error("{message}")]
    Refused {
        /// Stable error code.
        code: &'static str,
        /// What and why.
        message: String,
    },
    /// The version's state is not open (it failed, or its store is
    /// damaged): nothing to read until it runs again or is rebuilt.
    #[error("view {view:?} version {version} cannot be read: its state is not available (GET /v1/views/{view} says why; POST /v1/views/{view}/replay rebuilds it from the log)")]
    Unavailable {
        /// View.
        view: String,
        /// Version asked for.
        version: u64,
    },
}

/// The failure reason of a version whose state is damaged: what RocksDB
/// or Kappa found, and the one command that rebuilds it from the log.
pub(crate) fn damaged_reason(view: &str, e: &dyn std::fmt::Display) -> String {
    format!("{e}; rebuild it from the log with POST /v1/views/{view}/replay")
}

/// Result alias of this module.
pub type Result<T, E = ViewError> = std::result::Result<T, E>;

/// Checks a view name: 1..=128 characters of `[A-Za-z0-9_.-]` (the names
/// SQL identifiers and topic names have in common), so it is safe inside
/// column family names (`<name>@<version>.state`).
pub fn validate_name(name: &str) -> Result<()> {
    let ok = (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(ViewError::BadRequest(format!(
            "name {name:?} must be 1 to 128 characters of A-Z a-z 0-9 _ . -"
        )))
    }
}

#[cfg(test)]
mod tests;
