//! Tests of the batch format: encoding and decoding, validation of
//! damaged batches, and the borrowing reader against the owned one.

use super::*;
use proptest::prelude::*;

fn sample() -> Vec<NewRecord> {
    vec![
        NewRecord {
            key: Some(Bytes::from_static(b"user-1")),
            value: Bytes::from_static("{\"amount\":42,\"name\":\"ß😀\"}".as_bytes()),
            timestamp: Some(1_700_000_000_000),
            headers: vec![Header {
                name: "trace".into(),
                value: Bytes::from_static(b"abc"),
            }],
        },
        NewRecord::value("second"),
    ]
}

fn encode_one(records: &[NewRecord], key: Option<&[u8]>) -> Bytes {
    let mut out = Vec::new();
    encode(
        &mut out,
        BatchMeta {
            base_offset: 7,
            append_time: 1_800_000_000_000,
            idempotency_key: key,
        },
        records,
    );
    Bytes::from(out)
}

#[test]
fn roundtrip_keeps_every_field() {
    let bytes = encode_one(&sample(), Some(b"req-1"));
    let view = BatchView::parse(&bytes).unwrap();
    assert_eq!(view.base_offset(), 7);
    assert_eq!(view.record_count(), 2);
    assert_eq!(view.next_offset(), 9);
    assert_eq!(view.idempotency_key(), Some(&b"req-1"[..]));
    assert_eq!(view.first_timestamp(), 1_700_000_000_000);
    assert_eq!(view.max_timestamp(), 1_800_000_000_000);
    assert_eq!(view.append_time(), 1_800_000_000_000);
    let records: Vec<Record> = view.records().collect();
    assert_eq!(records[0].offset, 7);
    assert_eq!(records[0].key.as_deref(), Some(&b"user-1"[..]));
    assert_eq!(records[0].headers[0].name, "trace");
    assert_eq!(records[1].offset, 8);
    assert_eq!(records[1].key, None);
    assert_eq!(records[1].timestamp, 1_800_000_000_000);
    assert_eq!(records[1].value, Bytes::from_static(b"second"));
}

/// The worked example of FORMAT.md section 2.7, byte for byte.
#[test]
fn batch_bytes_match_the_documented_example() {
    let records = vec![
        NewRecord {
            key: Some(Bytes::from_static(b"k")),
            value: Bytes::from_static(b"hello"),
            timestamp: None,
            headers: vec![Header {
                name: "h".into(),
                value: Bytes::from_static(b"1"),
            }],
        },
        NewRecord {
            key: None,
            value: Bytes::new(),
            timestamp: Some(1_600_000_000_000),
            headers: vec![],
        },
    ];
    let mut out = Vec::new();
    let meta = BatchMeta {
        base_offset: 42,
        append_time: 1_700_000_000_000,
        idempotency_key: Some(b"req-1"),
    };
    assert_eq!(encode(&mut out, meta, &records), 107);
    let expected = "6b0000008dd8ad224b01000002000000\
                    2a000000000000000068e5cf8b010000\
                    0068e5cf8b0100000068e5cf8b010000\
                    050000007265712d310068e5cf8b0100\
                    0001000000 6b 0500000068656c6c6f\
                    0100010068010000003100806e877401\
                    0000ffffffff000000000000";
    let expected: String = expected.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    let got: String = out.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(got, expected);
}

#[test]
fn every_single_byte_flip_is_detected() {
    let bytes = encode_one(&sample(), Some(b"k"));
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut copy = bytes.to_vec();
            copy[i] ^= 1 << bit;
            let copy = Bytes::from(copy);
            assert!(
                BatchView::parse(&copy).is_err(),
                "flip of bit {bit} in byte {i} went unnoticed"
            );
        }
    }
}

/// A batch read with its CRC computed along the reading: one larger than
/// several CRC stretches reads what checking it whole reads, and a changed
/// byte anywhere — in the first stretch, in a later one, in the last
/// bytes, in a record's framing — is the CRC mismatch that checking it
/// first reports, though records before it were given out.
#[test]
fn a_crc_checked_along_the_reading_finds_what_checking_it_first_finds() {
    let records: Vec<NewRecord> = (0..3_000)
        .map(|i| NewRecord {
            key: Some(Bytes::from(format!("user-{i}"))),
            value: Bytes::from(format!("{{\"n\":{i},\"pad\":\"{}\"}}", "x".repeat(i % 90))),
            timestamp: Some(i as i64),
            headers: vec![],
        })
        .collect();
    let bytes = encode_one(&records, None);
    assert!(bytes.len() > 3 * CRC_STRETCH, "{} bytes", bytes.len());
    let framed = FramedBatch::parse(&bytes).unwrap();
    let mut read = Vec::new();
    framed.read_checked(Crc::Check, |r| read.push(r)).unwrap();
    let view = framed.check(Crc::Check).unwrap();
    assert_eq!(read, view.record_refs().collect::<Vec<_>>());
    assert!(std::ptr::eq(
        framed.bytes_to_read(Crc::Check).unwrap(),
        &framed.bytes
    ));

    let records_start = HEADER_LEN;
    for at in [
        CRC_START,
        records_start,
        records_start + 100,
        CRC_STRETCH + 17,
        2 * CRC_STRETCH + 5,
        bytes.len() - 1,
    ] {
        for flip in [0x01u8, 0x80] {
            let mut damaged = bytes.to_vec();
            damaged[at] ^= flip;
            let damaged = Bytes::from(damaged);
            let Ok(framed) = FramedBatch::parse(&damaged) else {
                continue;
            };
            let expected = framed.check(Crc::Check).unwrap_err();
            assert!(
                matches!(&expected, DecodeError::Invalid(m) if m.starts_with("CRC mismatch")),
                "{expected}"
            );
            let mut given = 0;
            let read = framed.read_checked(Crc::Check, |_| given += 1);
            assert_eq!(read, Err(expected), "byte {at} flipped by {flip:#x}");
            // Not checking the CRC reads a byte flipped inside a value.
            if at > CRC_STRETCH {
                assert!(given > 0, "byte {at}: records before it were read");
            }
        }
    }
}

#[test]
fn record_refs_borrow_the_batch_and_tell_empty_keys_from_none() {
    let records = vec![
        NewRecord {
            key: Some(Bytes::new()),
            value: Bytes::from_static(b"v1"),
            timestamp: Some(9),
            headers: vec![
                Header {
                    name: "a".into(),
                    value: Bytes::from_static(b"x"),
                },
                Header {
                    name: String::new(),
                    value: Bytes::new(),
                },
            ],
        },
        NewRecord::value(Bytes::new()),
    ];
    let bytes = encode_one(&records, None);
    let view = BatchView::parse(&bytes).unwrap();
    let refs: Vec<RecordRef<'_>> = view.record_refs().collect();
    assert_eq!(refs.len(), 2);
    assert_eq!((refs[0].offset, refs[0].timestamp), (7, 9));
    assert_eq!(refs[0].key, Some(&b""[..]));
    assert_eq!(refs[0].value, b"v1");
    let headers: Vec<HeaderRef<'_>> = refs[0].headers.into_iter().collect();
    assert_eq!(
        headers,
        [
            HeaderRef {
                name: "a",
                value: b"x"
            },
            HeaderRef {
                name: "",
                value: b""
            }
        ]
    );
    assert_eq!(
        (refs[1].offset, refs[1].key, refs[1].value),
        (8, None, &b""[..])
    );
    assert!(refs[1].headers.is_empty());
    // The borrowed parts lie inside the batch's buffer.
    let range = view.as_bytes().as_ptr_range();
    assert!(range.contains(&refs[0].value.as_ptr()));
}

#[test]
fn every_truncation_is_incomplete_or_invalid() {
    let bytes = encode_one(&sample(), None);
    for cut in 0..bytes.len() {
        assert!(
            BatchView::parse(&bytes.slice(..cut)).is_err(),
            "cut at {cut}"
        );
    }
}

fn arb_record() -> impl Strategy<Value = NewRecord> {
    (
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..20)),
        proptest::collection::vec(any::<u8>(), 0..200),
        proptest::option::of(any::<i64>()),
        proptest::collection::vec(
            ("[a-z]{0,8}", proptest::collection::vec(any::<u8>(), 0..10)),
            0..3,
        ),
    )
        .prop_map(|(key, value, timestamp, headers)| NewRecord {
            key: key.map(Bytes::from),
            value: Bytes::from(value),
            timestamp,
            headers: headers
                .into_iter()
                .map(|(name, value)| Header {
                    name,
                    value: Bytes::from(value),
                })
                .collect(),
        })
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity(
        records in proptest::collection::vec(arb_record(), 1..20),
        base in 0u64..u64::MAX / 2,
        key in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..=MAX_IDEMPOTENCY_KEY_LEN)),
    ) {
        let mut out = Vec::new();
        let len = encode(&mut out, BatchMeta { base_offset: base, append_time: 5, idempotency_key: key.as_deref() }, &records);
        prop_assert_eq!(len, out.len());
        prop_assert_eq!(len, encoded_len(&records, key.as_deref()));
        let view = BatchView::parse(&Bytes::from(out)).unwrap();
        prop_assert_eq!(view.idempotency_key(), key.as_deref());
        let decoded: Vec<Record> = view.records().collect();
        prop_assert_eq!(decoded.len(), records.len());
        for (i, (d, r)) in decoded.iter().zip(&records).enumerate() {
            prop_assert_eq!(d.offset, base + i as u64);
            prop_assert_eq!(d.timestamp, r.timestamp.unwrap_or(5));
            prop_assert_eq!(&d.key, &r.key);
            prop_assert_eq!(&d.value, &r.value);
            prop_assert_eq!(&d.headers, &r.headers);
        }
    }

    #[test]
    fn record_refs_yield_what_records_yields(
        records in proptest::collection::vec(arb_record(), 1..20),
        base in 0u64..u64::MAX / 2,
        key in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..=MAX_IDEMPOTENCY_KEY_LEN)),
    ) {
        let mut out = Vec::new();
        encode(&mut out, BatchMeta { base_offset: base, append_time: 5, idempotency_key: key.as_deref() }, &records);
        let view = BatchView::parse(&Bytes::from(out)).unwrap();
        let owned: Vec<Record> = view.records().collect();
        let refs: Vec<RecordRef<'_>> = view.record_refs().collect();
        prop_assert_eq!(view.record_refs().size_hint(), (records.len(), Some(records.len())));
        prop_assert_eq!(refs.len(), owned.len());
        for (r, o) in refs.iter().zip(&owned) {
            prop_assert_eq!(r.offset, o.offset);
            prop_assert_eq!(r.timestamp, o.timestamp);
            prop_assert_eq!(r.key, o.key.as_deref());
            prop_assert_eq!(r.value, &o.value[..]);
            prop_assert_eq!(r.headers.len(), o.headers.len());
            let headers: Vec<(&str, &[u8])> = r.headers.iter().map(|h| (h.name, h.value)).collect();
            let expected: Vec<(&str, &[u8])> = o.headers.iter().map(|h| (h.name.as_str(), &h.value[..])).collect();
            prop_assert_eq!(headers, expected);
            prop_assert_eq!(&r.to_record(view.as_bytes()), o);
        }
    }

    #[test]
    fn decoding_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let data = Bytes::from(data);
        let _ = BatchView::parse(&data);
        if let Ok(framed) = FramedBatch::parse(&data) {
            let _ = framed.check(Crc::Check);
            let _ = framed.read_checked(Crc::Check, |_| {});
        }
    }

    /// Reading a framed batch's records checked one by one finds what
    /// checking it whole finds, where the damage is one the CRC does not
    /// show (the CRC is made again after the damage) or one it does (then
    /// the same CRC mismatch): a changed byte, or a batch cut short or
    /// made longer.
    #[test]
    fn checking_records_as_they_are_read_finds_what_checking_the_batch_finds(
        records in proptest::collection::vec(arb_record(), 1..8),
        key in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..=8)),
        damage in (any::<prop::sample::Index>(), any::<u8>(), -3i32..3),
        remake_crc in any::<bool>(),
    ) {
        let mut out = Vec::new();
        encode(&mut out, BatchMeta { base_offset: 7, append_time: 5, idempotency_key: key.as_deref() }, &records);
        let (at, byte, resize) = damage;
        let i = HEADER_LEN + at.index(out.len() - HEADER_LEN);
        out[i] = byte;
        let len = (out.len() as i64 + i64::from(resize)) as usize;
        out.resize(len.max(HEADER_LEN), 0);
        let len = out.len() as u32;
        out[LENGTH_OFFSET..LENGTH_OFFSET + 4].copy_from_slice(&len.to_le_bytes());
        if remake_crc {
            let crc = crc32fast::hash(&out[CRC_START..]);
            out[CRC_OFFSET..CRC_START].copy_from_slice(&crc.to_le_bytes());
        }
        let bytes = Bytes::from(out);
        let Ok(framed) = FramedBatch::parse(&bytes) else {
            return Ok(());
        };
        let mut records = Vec::new();
        let read = framed.read_checked(Crc::Check, |r| records.push(r)).map(|()| records);
        match framed.check(Crc::Check) {
            Ok(view) => {
                let read = read.expect("a batch that checks reads");
                prop_assert_eq!(read, view.record_refs().collect::<Vec<_>>());
            }
            // A CRC mismatch is reported as checking reports it.
            Err(e @ DecodeError::Invalid(_)) if !remake_crc => prop_assert_eq!(read, Err(e)),
            Err(_) => prop_assert!(read.is_err(), "damage checking found, reading did not"),
        }
    }
}
