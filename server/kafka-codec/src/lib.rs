//! Kafka requests from network bytes, bounded. The one place where bytes a
//! Kafka client sent become typed requests and records; the listener in
//! `kappa-server` frames connections and serves what this crate decodes.
//!
//! Nothing a peer claims sizes an allocation beyond what its frame can
//! hold: array and record counts are checked against the bytes left (the
//! workspace patches `kafka-protocol` for that, see
//! `server/vendor/kafka-protocol/KAPPA-PATCH.md`), and compressed record
//! batches expand to at most the log's largest batch ([`decompress`]).
//! The fuzz target `kafka_request` drives [`fuzzing::kafka_request`] over
//! every API and version served ([`versions::SUPPORTED`]).
//!
//! Module map: [`versions`] (what is served) · [`request`] (a frame to a
//! [`Request`]) · [`records`] (a partition's record batches, bounded) ·
//! [`decompress`] (the bound on compressed batches).

pub mod decompress;
#[doc(hidden)]
pub mod fuzzing;
pub mod records;
pub mod request;
pub mod versions;

pub use records::decode_record_batches;
pub use request::{decode_request, DecodeError, Request, HEADER_PREFIX_LEN};
