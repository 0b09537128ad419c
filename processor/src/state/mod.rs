//! State and view storage: the one order-preserving key encoding
//! ([`key`]); the RocksDB store comes next.

pub mod key;
