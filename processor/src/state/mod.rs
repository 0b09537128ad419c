//! State and view storage: the one order-preserving key encoding
//! ([`key`]) and the RocksDB store ([`store`]).

pub mod key;
pub mod store;
