//! `kappa-processor`: stream processors and materialized views.
//!
//! A processor is a [`plan::Plan`] — built with the Rust [`dsl`] or from
//! ksqlDB-flavoured SQL ([`sql`]) — run by a [`runner::Runtime`] that pulls its input topic from
//! the log, pushes events through the operators ([`operator`]: dedup,
//! stream-table join, filter, projection, windowed or running aggregates
//! over [`window`]s driven by [`watermark`]s), and commits state, view rows,
//! input offsets and watermark in one RocksDB write ([`state`]). Output
//! topics get records exactly once through an outbox. [`view`] reads the
//! rows; [`version`] runs versions on threads for replay.
//!
//! It depends only on `kappa-log`, as DESIGN.md's one-way dependency rule
//! asks.

#![warn(missing_docs)]

pub mod aggregate;
pub mod changes;
pub mod commit;
pub mod diff;
pub mod dsl;
pub mod error;
pub mod event;
pub mod expr;
pub mod limits;
pub mod metrics;
pub mod operator;
pub mod order;
pub mod plan;
pub mod progress;
pub mod runner;
pub mod sql;
pub mod state;
pub mod version;
pub mod view;
pub mod watermark;
pub mod window;
