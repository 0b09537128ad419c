//! `kappa-processor`: stream processors and materialized views.
//!
//! A processor is a [`plan::Plan`] — built with the Rust [`dsl`] or from
//! ksqlDB-flavoured SQL ([`sql`]) — run by a [`runner::Runtime`] that pulls its input topic from
//! the log in log order ([`order`]), pushes events through the operators ([`operator`]: dedup,
//! stream-table join, filter, projection, windowed or running aggregates
//! over [`window`]s driven by [`watermark`]s, with [`accumulators`]), and
//! commits ([`commit`]) state, view rows, input offsets and watermark in
//! one RocksDB write ([`state`]; [`state::key`] owns every key). Output
//! topics get records exactly once through the commit's outbox. [`view`]
//! reads the rows; [`version`] runs versions on threads for replay, each
//! on one thread or, with [`runner::RunOptions::workers`], on source and
//! key-shard workers ([`parallel`]) with the same results.
//! Expressions are [`expr`]; event times are read by [`time`].
//!
//! It depends only on `kappa-log`: the layering is server → processor →
//! log, each knowing only the one below (see `ARCHITECTURE.md` at the
//! repository root).

#![warn(missing_docs)]

pub mod accumulators;
pub mod changes;
pub mod commit;
mod decoder;
pub mod diff;
pub mod dsl;
pub mod error;
pub mod event;
pub mod expr;
pub mod limits;
pub mod metrics;
pub mod operator;
pub mod order;
pub mod parallel;
pub mod plan;
pub mod progress;
pub mod runner;
pub mod sql;
pub mod state;
pub mod stop;
pub mod time;
pub mod version;
pub mod view;
pub mod watermark;
pub mod window;
