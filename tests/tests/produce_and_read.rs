//! Produce and read: records produced as JSON and as NDJSON read back
//! identical (offsets, explicit and defaulted timestamps, keys, headers,
//! unicode, nested JSON, null keys); a key always lands on the partition
//! Kafka's murmur2 partitioner gives it; an explicit partition is honoured;
//! unkeyed requests rotate over the partitions; `offset=latest` and
//! `from_timestamp=` start at the right offsets, also across many segments
//! and after restarts.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::{BTreeMap, BTreeSet};

use kappa_tests::{json, now_ms, Produced, Rng, Server, Value};

/// Kafka's `Utils.murmur2`, written independently of the server's copy.
fn kafka_murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    let length = data.len();
    let mut h: u32 = SEED ^ length as u32;
    for i in 0..length / 4 {
        let i4 = i * 4;
        let mut k = u32::from(data[i4])
            | (u32::from(data[i4 + 1]) << 8)
            | (u32::from(data[i4 + 2]) << 16)
            | (u32::from(data[i4 + 3]) << 24);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = length & !3;
    let rest = length % 4;
    if rest == 3 {
        h ^= u32::from(data[tail + 2]) << 16;
    }
    if rest >= 2 {
        h ^= u32::from(data[tail + 1]) << 8;
    }
    if rest >= 1 {
        h ^= u32::from(data[tail]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// Kafka's default partitioner for a keyed record.
fn kafka_partition(key: &str, partitions: u32) -> u32 {
    ((kafka_murmur2(key.as_bytes()) & 0x7fff_ffff) as u32) % partitions
}

#[test]
fn reference_murmur2_matches_kafkas_own_test_vectors() {
    // From Kafka's UtilsTest.testMurmur2.
    let cases: [(&[u8], i32); 6] = [
        (b"21", -973_932_308),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
        (
            b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
            -58_897_971,
        ),
        (b"abc", 479_470_107),
    ];
    for (data, expected) in cases {
        assert_eq!(
            kafka_murmur2(data),
            expected,
            "{}",
            String::from_utf8_lossy(data)
        );
    }
}

/// What a record should read back as.
struct Expected {
    key: Value,
    value: Value,
    headers: Value,
    /// `None`: defaulted to the append time.
    timestamp: Option<i64>,
}

fn expected(record: &Value) -> Expected {
    Expected {
        key: record.get("key").cloned().unwrap_or(Value::Null),
        value: record["value"].clone(),
        headers: record.get("headers").cloned().unwrap_or_else(|| json!({})),
        timestamp: record.get("timestamp").and_then(Value::as_i64),
    }
}

fn deep_array(depth: usize) -> Value {
    let mut v = json!("bottom");
    for _ in 0..depth {
        v = json!([v]);
    }
    v
}

#[test]
fn json_and_ndjson_records_read_back_identically() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "exact", "partitions": 1}));

    let json_records = json!([
        {"key": "user-1", "timestamp": 1_767_225_600_000_i64, "headers": {"source": "web", "ünï": "çødé 😀"},
         "value": {"amount": 42, "nested": {"list": [1, 2.5, -3, true, false, null, "ß😀中文"], "empty": {}, "none": null}}},
        {"key": null, "value": "ß😀中文"},
        {"value": 0, "timestamp": 0},
        {"key": "ß😀中文", "value": [], "timestamp": 253_402_300_799_999_i64},
        {"key": "", "value": null, "headers": {}},
        {"key": "user-1", "value": true, "headers": {"": "", "empty-value": ""}},
        {"value": 12_345_678_901_234_567_890_u64},
        {"value": -1.5e-7},
        {"value": "line\nbreak \"quoted\" \\ tab\t nul\u{0} bell\u{7} 😀"},
        {"value": deep_array(60)},
        {"value": {"a": {"b": {"c": {"d": [{"e": "f"}, {}, [[]]]}}}}}
    ]);
    let before = now_ms();
    let produced = server.produce("exact", &json_records);
    let after_json = now_ms();
    let n_json = json_records.as_array().unwrap().len();
    assert_eq!(
        produced,
        (0..n_json as u64)
            .map(|offset| Produced {
                partition: 0,
                offset
            })
            .collect::<Vec<_>>()
    );

    // NDJSON, with blank and whitespace-only lines (ignored) and compact,
    // spaced and escaped spellings of the same kinds of values.
    let ndjson_records = [
        json!({"key": "nd-1", "value": {"amount": 7, "tags": ["a", "b"]}, "headers": {"h1": "v1", "h2": "ß"}}),
        json!({"key": "nd-2", "value": "any JSON value", "timestamp": 1_767_225_600_001_i64}),
        json!({"value": {"emoji": "😀", "cjk": "中文", "german": "ß"}, "key": null}),
        json!({"value": [1, [2, [3, [4]]]], "timestamp": 42}),
        json!({"key": "😀", "value": false}),
    ];
    let mut body = String::new();
    for (i, r) in ndjson_records.iter().enumerate() {
        body.push_str(&serde_json::to_string(r).unwrap());
        body.push('\n');
        if i == 1 {
            body.push('\n');
        }
        if i == 3 {
            body.push_str("   \t \n");
        }
    }
    let (status, answer) = server.post_ndjson("/v1/topics/exact/records", &body);
    let after = now_ms();
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["topic"], "exact");
    assert_eq!(answer["duplicate"], false);
    let nd_produced = kappa_tests::produced_of(&answer);
    let n_total = n_json + ndjson_records.len();
    assert_eq!(
        nd_produced,
        (n_json as u64..n_total as u64)
            .map(|offset| Produced {
                partition: 0,
                offset
            })
            .collect::<Vec<_>>()
    );

    let mut all: Vec<(Expected, i64)> = json_records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (expected(r), after_json))
        .collect();
    all.extend(ndjson_records.iter().map(|r| (expected(r), after)));

    let read = server.read_all("exact", 0);
    assert_eq!(read.len(), n_total);
    for (i, (record, (want, latest))) in read.iter().zip(&all).enumerate() {
        assert_eq!(record["offset"], json!(i), "{record}");
        assert_eq!(record["key"], want.key, "offset {i}: key");
        assert_eq!(record["value"], want.value, "offset {i}: value");
        assert_eq!(record["headers"], want.headers, "offset {i}: headers");
        let ts = record["timestamp"].as_i64().expect("integer timestamp");
        match want.timestamp {
            Some(t) => assert_eq!(ts, t, "offset {i}: explicit timestamp"),
            None => assert!(
                (before..=*latest).contains(&ts),
                "offset {i}: defaulted timestamp {ts} not in [{before}, {latest}]"
            ),
        }
        assert!(
            record.get("partition").is_none(),
            "partition reads carry no partition field"
        );
    }

    // The answer's envelope, and paging with max_records.
    let page = server.read("exact", 0, "offset=earliest&max_records=3");
    assert_eq!(page["topic"], "exact");
    assert_eq!(page["partition"], 0);
    assert_eq!(page["start_offset"], 0);
    assert_eq!(page["high_watermark"], json!(n_total));
    assert_eq!(page["next_offset"], 3);
    assert_eq!(page["records"].as_array().unwrap().len(), 3);
    let mut paged = Vec::new();
    let mut next = 0u64;
    for _ in 0..100 {
        if next == n_total as u64 {
            break;
        }
        let page = server.read("exact", 0, &format!("offset={next}&max_records=4"));
        let records = page["records"].as_array().unwrap();
        assert!(!records.is_empty() && records.len() <= 4, "{page}");
        paged.extend(records.iter().cloned());
        next = page["next_offset"].as_u64().unwrap();
    }
    assert_eq!(paged, read, "paging yields the same records");

    // Nothing beyond the end: a read at the end is empty.
    let end = server.read("exact", 0, &format!("offset={n_total}"));
    assert_eq!(end["records"], json!([]));
    assert_eq!(end["next_offset"], json!(n_total));
}

#[test]
fn the_same_key_always_lands_on_kafkas_partition() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "keyed", "partitions": 4}));
    let mut keys: Vec<String> = (0..150).map(|i| format!("key-{i}")).collect();
    keys.extend((0..30).map(|i| format!("ß😀中文-{i}")));
    keys.extend(["".to_string(), "21".into(), "foobar".into(), "abc".into()]);

    // Round 1 in one request, round 2 in reverse order split over several
    // requests: each key is produced twice, in different requests.
    let round1: Vec<Value> = keys
        .iter()
        .map(|k| json!({"key": k, "value": {"key": k, "round": 1}}))
        .collect();
    let first = server.produce("keyed", &Value::Array(round1));
    let mut second: BTreeMap<&str, Produced> = BTreeMap::new();
    let reversed: Vec<&String> = keys.iter().rev().collect();
    for chunk in reversed.chunks(37) {
        let records: Vec<Value> = chunk
            .iter()
            .map(|k| json!({"key": k, "value": {"key": k, "round": 2}}))
            .collect();
        for (k, p) in chunk
            .iter()
            .zip(server.produce("keyed", &Value::Array(records)))
        {
            second.insert(k.as_str(), p);
        }
    }
    let mut used = BTreeSet::new();
    for (k, p1) in keys.iter().zip(&first) {
        let p2 = second[k.as_str()];
        assert_eq!(
            p1.partition, p2.partition,
            "key {k:?} moved between requests"
        );
        assert_eq!(
            p1.partition,
            kafka_partition(k, 4),
            "key {k:?} is not on Kafka's partition"
        );
        used.insert(p1.partition);
    }
    assert_eq!(
        used.len(),
        4,
        "{} keys should use every partition",
        keys.len()
    );

    // Reading back: every record sits on its key's partition, both rounds.
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for p in 0..4 {
        for r in server.read_all("keyed", p) {
            let key = r["key"].as_str().unwrap().to_string();
            assert_eq!(r["value"]["key"], json!(key));
            assert_eq!(kafka_partition(&key, 4), p, "{r}");
            seen.entry(key)
                .or_default()
                .push(r["value"]["round"].as_u64().unwrap());
        }
    }
    assert_eq!(seen.len(), keys.len());
    assert!(
        seen.values().all(|rounds| rounds == &[1, 2]),
        "each key once per round, in order"
    );
}

#[test]
fn explicit_partitions_are_honoured_and_unkeyed_requests_rotate() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "explicit", "partitions": 4}));
    let hashed = kafka_partition("k", 4);
    let records: Vec<Value> = [3u32, 1, 0, 2, 3, hashed]
        .iter()
        .enumerate()
        .map(|(i, p)| json!({"key": "k", "value": i, "partition": p}))
        .collect();
    let produced = server.produce("explicit", &Value::Array(records));
    let partitions: Vec<u32> = produced.iter().map(|p| p.partition).collect();
    assert_eq!(
        partitions,
        vec![3, 1, 0, 2, 3, hashed],
        "answers come in request order"
    );
    // An unkeyed record with a partition.
    let unkeyed = server.produce("explicit", &json!([{"value": "x", "partition": 2}]));
    assert_eq!(unkeyed[0].partition, 2);
    for p in 0..4u32 {
        let got: Vec<Value> = server
            .read_all("explicit", p)
            .iter()
            .map(|r| r["value"].clone())
            .collect();
        let mut want: Vec<Value> = produced
            .iter()
            .enumerate()
            .filter(|(_, pr)| pr.partition == p)
            .map(|(i, _)| json!(i))
            .collect();
        if p == 2 {
            want.push(json!("x"));
        }
        assert_eq!(got, want, "partition {p}");
    }

    // Unkeyed records without a partition: one partition per request,
    // rotating between requests (4 requests cover the 4 partitions).
    let mut rotation = BTreeSet::new();
    for request in 0..4 {
        let records: Vec<Value> = (0..3).map(|i| json!({"value": [request, i]})).collect();
        let produced = server.produce("explicit", &Value::Array(records));
        let p = produced[0].partition;
        assert!(
            produced.iter().all(|r| r.partition == p),
            "one partition per request: {produced:?}"
        );
        assert!(
            produced.windows(2).all(|w| w[1].offset == w[0].offset + 1),
            "consecutive offsets: {produced:?}"
        );
        rotation.insert(p);
    }
    assert_eq!(
        rotation.len(),
        4,
        "unkeyed requests rotate over all partitions: {rotation:?}"
    );
}

#[test]
fn latest_and_from_timestamp_start_at_the_right_offsets() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "times", "partitions": 1}));
    let base = 1_767_225_600_000_i64;
    // Offsets 0..7, in three requests (three batches); offset 5 is out of
    // timestamp order.
    let timestamps = [0, 1000, 1000, 2000, 5000, 3000, 6000];
    let record =
        |i: usize| json!({"key": format!("t{i}"), "value": i, "timestamp": base + timestamps[i]});
    server.produce("times", &json!([record(0), record(1)]));
    server.produce("times", &json!([record(2), record(3), record(4)]));
    server.produce("times", &json!([record(5), record(6)]));

    let first_offset = |query: &str| -> (Option<u64>, u64) {
        let page = server.read("times", 0, query);
        (
            page["records"]
                .as_array()
                .unwrap()
                .first()
                .map(|r| r["offset"].as_u64().unwrap()),
            page["next_offset"].as_u64().unwrap(),
        )
    };
    // (from_timestamp, first offset whose timestamp is at or after it)
    let cases = [
        (0, Some(0)),
        (base - 1, Some(0)),
        (base, Some(0)),
        (base + 1, Some(1)),
        (base + 1000, Some(1)),
        (base + 1001, Some(3)),
        (base + 2000, Some(3)),
        (base + 2500, Some(4)),
        (base + 3000, Some(4)),
        (base + 5000, Some(4)),
        (base + 5001, Some(6)),
        (base + 6000, Some(6)),
        (base + 6001, None),
    ];
    for (ts, want) in cases {
        let (got, next) = first_offset(&format!("from_timestamp={ts}"));
        assert_eq!(got, want, "from_timestamp={ts} (base{:+})", ts - base);
        if want.is_none() {
            assert_eq!(
                next, 7,
                "from_timestamp past every record starts at the end"
            );
        } else {
            assert_eq!(next, 7, "reads to the end from there");
        }
    }
    let page = server.read(
        "times",
        0,
        &format!("from_timestamp={}&max_records=1", base + 2000),
    );
    assert_eq!(page["records"].as_array().unwrap().len(), 1);
    assert_eq!(page["records"][0]["value"], 3);
    assert_eq!(page["next_offset"], 4);

    assert_eq!(first_offset("offset=earliest"), (Some(0), 7));
    assert_eq!(first_offset(""), (Some(0), 7), "the default is earliest");

    // latest: nothing now; exactly what is produced afterwards next.
    let latest = server.read("times", 0, "offset=latest");
    assert_eq!(latest["records"], json!([]));
    assert_eq!(latest["next_offset"], 7);
    assert_eq!(latest["high_watermark"], 7);
    server.produce("times", &json!([{"value": "new-1"}, {"value": "new-2"}]));
    let next = latest["next_offset"].as_u64().unwrap();
    let fresh = server.read("times", 0, &format!("offset={next}"));
    let values: Vec<&Value> = fresh["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(values, [&json!("new-1"), &json!("new-2")]);
    assert_eq!(fresh["records"][0]["offset"], 7);
    assert_eq!(server.read("times", 0, "offset=latest")["next_offset"], 9);
}

#[test]
fn from_timestamp_is_right_across_segments_and_restarts() {
    let mut server = Server::start(&[]);
    // Small segments: the lookups cross many segments and time indexes.
    server.create_topic(&json!({"name": "seg", "partitions": 1, "segment_bytes": 1024}));
    let base = 1_767_225_600_000_i64;
    let mut timestamps: Vec<i64> = Vec::new();
    let mut rng = Rng::new(7);
    for request in 0..60 {
        let n = 1 + rng.below(5) as usize;
        let records: Vec<Value> = (0..n)
            .map(|i| {
                // Rising by 100 ms per record, with jitter: some out of order.
                let t = base + timestamps.len() as i64 * 100 + rng.below(250) as i64 - 100;
                timestamps.push(t);
                json!({"value": {"request": request, "i": i, "pad": "p".repeat(40)}, "timestamp": t})
            })
            .collect();
        server.produce("seg", &Value::Array(records));
    }
    let segments = server.describe("seg")["partitions"][0]["segment_count"]
        .as_u64()
        .unwrap();
    assert!(segments > 5, "{segments} segments");

    let check = |server: &Server, when: &str| {
        let mut wrong = Vec::new();
        let last = base + timestamps.len() as i64 * 100 + 300;
        for ts in (base - 200..last).step_by(37) {
            let want = timestamps.iter().position(|&t| t >= ts).map(|o| o as u64);
            let page = server.read("seg", 0, &format!("from_timestamp={ts}&max_records=1"));
            let got = page["records"]
                .as_array()
                .unwrap()
                .first()
                .map(|r| r["offset"].as_u64().unwrap());
            if got != want {
                wrong.push((ts - base, want, got));
            }
        }
        assert!(
            wrong.is_empty(),
            "{when}: (from_timestamp - base, want, got): {wrong:?}"
        );
    };
    check(&server, "live");
    server.terminate_ok();
    let mut server = server.restart();
    check(&server, "after SIGTERM + restart");
    server.kill9();
    let server = server.restart();
    check(&server, "after SIGKILL + restart");
}
