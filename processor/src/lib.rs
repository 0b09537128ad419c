//! `kappa-processor`: stream processors and materialized views.
//!
//! A processor is a [`plan::Plan`] — built with the Rust [`dsl`] or from
//! ksqlDB-flavoured SQL ([`sql`]) — run by a [`runner::Runtime`] that pulls its input topic from
//! the log in log order, pushes events through the operators (dedup,
//! stream-table join, filter, projection, windowed or running aggregates
//! over [`window`]s driven by watermarks, with [`accumulators`]), and
//! commits state, view rows, input offsets and watermark in
//! one RocksDB write ([`state`]; [`state::key`] owns every key). Output
//! topics get records exactly once: appended ahead of the commit by
//! sequence number, or through the commit's outbox (`commit`). [`view`]
//! reads the rows. Each version runs on one thread or, with
//! [`runner::RunOptions::workers`], on source and key-shard workers with
//! the same results. Expressions are [`expr`].
//!
//! The public surface has three parts:
//! - the language: [`sql`], [`plan`], [`dsl`], [`expr`], [`window`],
//!   [`accumulators`], [`limits`];
//! - hosting: [`host`] is how a server runs view versions (start, stop,
//!   progress and lag) and reads their rows, sizes and differences, with
//!   the data it answers in ([`view`], [`changes`], [`diff`],
//!   [`progress`], [`event`], [`error`]); [`source`] is the interface
//!   inputs are read through (the built-in log, or a Kafka cluster's
//!   implementation the server hands in), [`stop`] the signal that ends a
//!   wait;
//! - the engine underneath, for benchmarks and the processor's own tests:
//!   [`runner`] (one version's runtime) and [`state`] (its RocksDB store).
//!   The server does not use these (`server/tests/layers.rs` checks it).
//!
//! Everything else (operators, ordering, commits, watermarks, parallel
//! workers, the version thread) is private.
//!
//! It depends only on `kappa-log`: the layering is server → processor →
//! log (see `ARCHITECTURE.md` at the repository root); a Kafka cluster's
//! source (`kappa-cluster`) implements [`source::Source`] from above.

#![warn(missing_docs)]

pub mod accumulators;
mod blocking;
pub mod changes;
mod commit;
mod decoder;
pub mod diff;
pub mod dsl;
pub mod error;
pub mod event;
pub mod expr;
pub mod host;
mod joined_tables;
pub mod limits;
mod metrics;
mod operator;
mod order;
mod parallel;
pub mod plan;
pub mod progress;
mod project;
pub mod read_cancel;
pub mod runner;
mod sequenced;
pub mod sink;
pub mod source;
pub mod spread;
pub mod sql;
pub mod state;
pub mod stop;
pub mod time;
mod version;
pub mod view;
mod watermark;
pub mod window;
