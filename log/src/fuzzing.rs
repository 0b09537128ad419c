//! The bodies of the log's fuzz targets (`fuzz/fuzz_targets/`), shared with
//! the tests that replay their corpora on stable (`log/tests/fuzz_corpus.rs`)
//! so that a target and its replay cannot drift. Each takes arbitrary bytes
//! and panics only on a broken invariant.

use std::path::Path;

use bytes::Bytes;

use crate::batch::{self, BatchView};
use crate::segment;

/// Record-batch decoder and segment scan: `data` as it is (almost always
/// rejected by the CRC), and again with its length and CRC fields made to
/// match so the structure checks behind the CRC are reached. A batch that
/// parses yields exactly its record count; a scan never claims more bytes
/// than it was given and its damaged stretches are ordered and non-empty.
pub fn batch_decode(data: &[u8]) {
    check_batch(Bytes::copy_from_slice(data));
    if data.len() >= batch::HEADER_LEN {
        let mut fixed = data.to_vec();
        let len = fixed.len() as u32;
        fixed[batch::LENGTH_OFFSET..batch::LENGTH_OFFSET + 4].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&fixed[batch::CRC_START..]);
        fixed[batch::CRC_OFFSET..batch::CRC_START].copy_from_slice(&crc.to_le_bytes());
        check_batch(Bytes::from(fixed));
    }
}

fn check_batch(bytes: Bytes) {
    if let Ok(view) = BatchView::parse(&bytes) {
        assert!(view.len() <= bytes.len());
        assert_eq!(
            view.records().count() as u64,
            u64::from(view.record_count())
        );
    }
    let base = 1000;
    let scanned = segment::scan(&bytes, base, 4096);
    assert!(scanned.valid_bytes as usize <= bytes.len());
    assert!(scanned.next_offset >= base);
    let mut last = 0;
    for damage in &scanned.damaged {
        assert!(damage.position >= last && damage.position < damage.next_position);
        assert!(damage.first_offset <= damage.next_offset);
        last = damage.next_position;
    }
}

/// Consumer-offsets file replay: any bytes give a state or a `Corrupt`
/// error, never a panic, and never a valid prefix longer than the input.
pub fn offsets_replay(data: &[u8]) {
    crate::offsets::check_replay(Path::new("offsets.log"), data);
}
