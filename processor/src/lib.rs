//! Stream processors and materialized views.
//!
//! Empty for now: the processor issue fills it (operators, event time,
//! windows, RocksDB views, exactly-once commits). It depends only on
//! `kappa-log`, as DESIGN.md's one-way dependency rule asks.
