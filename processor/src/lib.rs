//! `kappa-processor`: stream processors and materialized views.
//!
//! Built so far: the logical [`plan`] and the Rust [`dsl`] that builds it,
//! expressions ([`expr`]), aggregates ([`aggregate`]), window assignment
//! ([`window`]), watermarks ([`watermark`]) and the state key encoding
//! ([`state`]). It depends only on `kappa-log`, as DESIGN.md's one-way
//! dependency rule asks.

pub mod aggregate;
pub mod dsl;
pub mod error;
pub mod event;
pub mod expr;
pub mod metrics;
pub mod operator;
pub mod plan;
pub mod progress;
pub mod runner;
pub mod state;
pub mod version;
pub mod view;
pub mod watermark;
pub mod window;
