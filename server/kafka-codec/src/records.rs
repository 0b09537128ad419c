//! A partition's record batches in a Produce request, decoded with bounds:
//! counts never size an allocation beyond the bytes left (the workspace's
//! `kafka-protocol` patch) and a compressed batch expands to at most
//! `max_batch_bytes` ([`crate::decompress::bounded`]).

use bytes::{Buf, Bytes};
use kafka_protocol::records::{RecordBatchDecoder, RecordSet};

/// Every record batch in `bytes` (a Produce partition's `records`), each
/// compressed batch expanding to at most `max_batch_bytes`; an error names
/// what is damaged.
pub fn decode_record_batches(
    mut bytes: Bytes,
    max_batch_bytes: usize,
) -> anyhow::Result<Vec<RecordSet>> {
    let mut sets = Vec::new();
    while bytes.has_remaining() {
        let set = RecordBatchDecoder::decode_with_custom_compression(
            &mut bytes,
            Some(|b: &mut Bytes, codec| crate::decompress::bounded(b, codec, max_batch_bytes)),
        )?;
        sets.push(set);
    }
    Ok(sets)
}
