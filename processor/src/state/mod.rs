//! State and view storage: the one order-preserving key encoding
//! ([`key`]), the stored form of aggregate slots ([`slot`]) and the
//! RocksDB store ([`store`]).

pub mod key;
pub mod slot;
pub mod store;
