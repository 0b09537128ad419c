//! `kappa-processor`: stream processors and materialized views.
//!
//! Built so far: window assignment ([`window`]) and watermarks
//! ([`watermark`]) — the event-time core that the operators, RocksDB state
//! and exactly-once runtime build on. It depends only on `kappa-log`, as
//! DESIGN.md's one-way dependency rule asks.

pub mod aggregate;
pub mod state;
pub mod watermark;
pub mod window;
