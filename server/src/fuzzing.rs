//! Fuzz entry points (hidden from the docs): one function per cargo-fuzz
//! target in `fuzz/`, also run over the committed corpus by
//! `tests/fuzz_corpus.rs`, so the target and the stable test cannot drift.

use bytes::Bytes;

use crate::config::ServerConfig;

/// The produce body parser (`POST /v1/topics/{topic}/records`) on arbitrary
/// bytes: the first byte picks JSON (even) or NDJSON (odd), the rest is the
/// body. Never panics; an accepted body has 1..=`max_records_per_request`
/// records within the key, value and header limits, and every value and
/// key is a slice of the body or its unescaped copy; a refused one is a 4xx
/// error with a code and a message.
pub fn produce_body(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else {
        return;
    };
    let config = ServerConfig::default();
    let body = Bytes::copy_from_slice(body);
    match crate::routes::records::parse_records(&body, mode & 1 == 1, &config) {
        Ok(records) => {
            assert!(!records.is_empty());
            assert!(records.len() <= config.max_records_per_request);
            for r in &records {
                assert!(r.record.value.len() <= config.max_value_bytes);
                assert!(r
                    .record
                    .key
                    .as_ref()
                    .is_none_or(|k| k.len() <= config.max_key_bytes));
                assert!(r.record.headers.len() <= config.max_headers_per_record);
                assert!(r.record.value.len() <= body.len());
            }
        }
        Err(e) => {
            assert!(e.status.is_client_error(), "{} {}", e.status, e.message);
            assert!(!e.code.is_empty() && !e.message.is_empty());
        }
    }
}
