//! Kappa tools library part: the building blocks of the `kappa-bench` HTTP
//! load generator (see [`bench`]), the in-process benchmarks
//! `kappa-log-bench` ([`log_bench`]) and `kappa-processor-bench`
//! ([`processor_bench`]), the `kappa-datagen` event generator (see
//! [`datagen`]) and the `kappa-inspect` offline segment inspector (see
//! [`inspect`]). The binaries in `src/bin/` are short mains over these.

#![warn(missing_docs)]

pub mod bench;
pub mod datagen;
pub mod inspect;
pub mod log_bench;
pub mod machine;
pub mod processor_bench;
