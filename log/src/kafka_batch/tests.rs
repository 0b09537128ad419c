use super::*;

/// One Kafka record (v2 layout) of `body` fields after its length.
fn record(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    // Zigzag: a length n is 2n.
    out.push((body.len() * 2) as u8);
    out.extend_from_slice(body);
    out
}

/// The body of a record at `offset_delta` (zigzag), timestamp delta 1,
/// key "k", value "v", no headers.
fn body(offset_delta: u8) -> Vec<u8> {
    vec![0, 2, offset_delta, 2, b'k', 2, b'v', 0]
}

#[test]
fn kafka_records_read_into_kappas_layout() {
    let section = [record(&body(0)), record(&body(2))].concat();
    let mut out = Vec::new();
    kafka_to_kappa(&section, 2, 100, &mut out).unwrap();
    let one = [
        &101i64.to_le_bytes()[..],
        &1i32.to_le_bytes(),
        b"k",
        &1u32.to_le_bytes(),
        b"v",
        &0u16.to_le_bytes(),
    ]
    .concat();
    assert_eq!(out, [one.clone(), one].concat());
}

#[test]
fn malformed_kafka_records_are_damage() {
    let fails = |section: &[u8], count: usize| {
        let mut out = Vec::new();
        kafka_to_kappa(section, count, 0, &mut out)
            .unwrap_err()
            .to_string()
    };
    // The second record's offset delta is 2, not 1.
    let skipped = [record(&body(0)), record(&body(4))].concat();
    assert!(fails(&skipped, 2).contains("offset delta 1"));
    // Fewer records than the header counts, or bytes left over.
    assert!(fails(&record(&body(0)), 2).contains("past its batch"));
    let extra = [record(&body(0)), vec![7]].concat();
    assert!(fails(&extra, 1).contains("do not fill"));
    // A record longer than its length says, and a varint of 11 bytes.
    let mut long = record(&body(0));
    long[0] -= 2;
    assert!(fails(&long, 1).contains("past its batch") || fails(&long, 1).contains("length says"));
    assert!(fails(&[0xff; 11], 1).contains("longer than 10 bytes"));
    // A negative length other than -1.
    assert!(fails(&[3], 1).contains("negative length"));
}
