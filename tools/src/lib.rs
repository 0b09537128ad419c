//! Kappa tools library part: the building blocks of the `kappa-bench` HTTP
//! load generator (see [`bench`]). The binaries live in `src/bin/`.

pub mod bench;
pub mod machine;
