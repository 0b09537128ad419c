//! Kappa tools library part: the building blocks of the `kappa-bench` HTTP
//! load generator (see [`bench`]), the `kappa-datagen` event generator (see
//! [`datagen`]) and the `kappa-inspect` offline segment inspector (see
//! [`inspect`]). The binaries live in `src/bin/`.

#![warn(missing_docs)]

pub mod bench;
pub mod datagen;
pub mod inspect;
pub mod machine;
