//! State and view storage: the one order-preserving key encoding
//! ([`key`]), the stored form of aggregate slots ([`slot`]) and the
//! RocksDB store of one version ([`store`]) and the directory of every
//! version's store ([`stores`]).

pub mod key;
pub mod slot;
pub mod store;
pub mod stores;
