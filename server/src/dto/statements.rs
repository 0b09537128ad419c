//! Wire types of `POST /v1/statements` (in `kappa-wire`): the statement
//! executor (`crate::statements`) builds them; the route only serializes
//! them.

pub use kappa_wire::statements::*;
