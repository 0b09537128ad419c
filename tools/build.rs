//! The same link settings as the `kappa` binary (compressed line tables in
//! release builds): see `server/build.rs`.

include!("../server/build.rs");
