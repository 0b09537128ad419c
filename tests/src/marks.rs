//! Error positions written into test SQL (`¦` marks where an error must
//! point): the processor's helper, compiled in by path (one copy).

#[path = "../../processor/src/sql/marks.rs"]
mod shared;

pub use shared::{marked, MARK};
