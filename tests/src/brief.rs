//! The product brief's statements, as the end-to-end tests send them. This
//! crate talks to the binary over HTTP only and does not depend on the
//! product crates, so it compiles the processor's `sql/brief.rs` in by path:
//! the same `brief.sql`, one copy.

#[path = "../../processor/src/sql/brief.rs"]
mod shared;

pub use shared::{HIGH_VALUE_ALERTS, PURCHASE_STATS, SQL, USER_EVENTS};
