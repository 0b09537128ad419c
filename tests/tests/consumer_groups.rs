//! Consumer groups: a group read does not commit by default; committed
//! offsets survive a graceful restart and a SIGKILL, and the group endpoint
//! continues from them; `commit=true` commits the answer's `next_offsets`;
//! reset to a timestamp lands on the first record at or after it, and
//! earliest / latest / offset (clamped) land where documented; `lag` in
//! `GET …/offsets` is end − position throughout.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::collections::BTreeMap;

use kappa_tests::{json, Client, Server, Value};

/// Base timestamp of the records (2026-01-01T00:00:00Z).
const BASE: i64 = 1_767_225_600_000;
/// A group name with a space, a slash and non-ASCII characters, and its
/// percent-encoded path segment.
const UNICODE_GROUP: &str = "team a/ß😀";
const UNICODE_GROUP_PATH: &str = "team%20a%2F%C3%9F%F0%9F%98%80";
/// Records on partitions 0 and 1.
const COUNTS: [u64; 2] = [10, 6];

/// The offsets of `body[field]`, a list of `{"partition", "offset"}` that
/// must be in partition order from 0.
fn offsets_in_partition_order(body: &Value, field: &str) -> Vec<u64> {
    body[field]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, o)| {
            assert_eq!(o["partition"], json!(i), "{body}");
            o["offset"].as_u64().unwrap()
        })
        .collect()
}

/// Timestamp of record `i` of partition `p`: strictly increasing per
/// partition, partition 1 half a second after partition 0.
fn timestamp(p: u64, i: u64) -> i64 {
    BASE + (i as i64) * 1000 + (p as i64) * 500
}

fn setup(server: &Server, topic: &str) {
    server.create_topic(&json!({"name": topic, "partitions": 2}));
    // Several requests, records of both partitions interleaved.
    for chunk in 0..2u64 {
        let mut records = Vec::new();
        for p in 0..2u64 {
            let half = COUNTS[p as usize] / 2;
            let range = if chunk == 0 {
                0..half
            } else {
                half..COUNTS[p as usize]
            };
            for i in range {
                records.push(
                    json!({"key": format!("k{p}-{i}"), "partition": p, "timestamp": timestamp(p, i),
                                    "value": {"p": p, "i": i}}),
                );
            }
        }
        server.produce(topic, &Value::Array(records));
    }
    assert_eq!(server.end_offsets(topic), COUNTS.to_vec());
}

/// `(committed, lag)` per partition from `GET /v1/groups/{g}/offsets?topic=`,
/// checking start, end and `lag = end - position`.
fn group_offsets(client: &Client, group: &str, topic: &str) -> Vec<(Option<u64>, u64)> {
    let (status, body) = client.get(&format!("/v1/groups/{group}/offsets?topic={topic}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["group"], group);
    let topics = body["topics"].as_array().unwrap();
    assert_eq!(topics.len(), 1, "{body}");
    assert_eq!(topics[0]["topic"], topic);
    let ends = client.end_offsets(topic);
    topics[0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            assert_eq!(p["partition"], json!(i), "{body}");
            assert_eq!(p["start_offset"], 0, "{body}");
            assert_eq!(p["end_offset"], json!(ends[i]), "{body}");
            let committed = p["committed"].as_u64();
            assert!(committed.is_some() || p["committed"].is_null(), "{body}");
            let lag = p["lag"].as_u64().unwrap();
            assert_eq!(
                lag,
                ends[i] - committed.unwrap_or(0),
                "lag = end - position: {body}"
            );
            (committed, lag)
        })
        .collect()
}

/// Records of a group read by partition, as (offset, value).
type ByPartition = BTreeMap<u64, Vec<(u64, Value)>>;

/// A group read; checks that the records of each partition are contiguous
/// from `from[p]` and that `next_offsets` follows them. Returns
/// (records by partition as (offset, value), next offsets).
fn group_read(
    client: &Client,
    group: &str,
    topic: &str,
    query: &str,
    from: &[u64],
) -> (ByPartition, Vec<u64>) {
    let path = format!("/v1/groups/{group}/topics/{topic}/records?{query}");
    let (status, body) = client.get(&path);
    assert_eq!(status, 200, "GET {path}: {body}");
    assert_eq!(body["group"], group);
    assert_eq!(body["topic"], topic);
    let mut by_partition = ByPartition::new();
    for r in body["records"].as_array().unwrap() {
        let p = r["partition"].as_u64().unwrap();
        let offset = r["offset"].as_u64().unwrap();
        assert_eq!(r["value"], json!({"p": p, "i": offset}), "{r}");
        assert_eq!(r["key"], json!(format!("k{p}-{offset}")));
        assert_eq!(r["timestamp"], json!(timestamp(p, offset)));
        by_partition
            .entry(p)
            .or_default()
            .push((offset, r["value"].clone()));
    }
    let next = offsets_in_partition_order(&body, "next_offsets");
    assert_eq!(next.len(), from.len(), "{body}");
    for (p, &start) in from.iter().enumerate() {
        let offsets: Vec<u64> = by_partition
            .get(&(p as u64))
            .map(|v| v.iter().map(|(o, _)| *o).collect())
            .unwrap_or_default();
        let want: Vec<u64> = (start..start + offsets.len() as u64).collect();
        assert_eq!(
            offsets, want,
            "partition {p} reads contiguously from the position {start}: {body}"
        );
        assert_eq!(
            next[p],
            start + offsets.len() as u64,
            "next offset of partition {p}: {body}"
        );
    }
    (by_partition, next)
}

fn commit(client: &Client, group: &str, topic: &str, offsets: &[u64]) {
    let offsets: Vec<Value> = offsets
        .iter()
        .enumerate()
        .map(|(p, o)| json!({"partition": p, "offset": o}))
        .collect();
    let (status, body) = client.post_json(
        &format!("/v1/groups/{group}/offsets"),
        &json!({"topic": topic, "offsets": offsets}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"group": group, "topic": topic, "offsets": offsets})
    );
}

fn reset(client: &Client, group: &str, topic: &str, to: Value) -> Vec<u64> {
    let (status, body) = client.post_json(
        &format!("/v1/groups/{group}/reset"),
        &json!({"topic": topic, "to": to}),
    );
    assert_eq!(status, 200, "reset to {to}: {body}");
    assert_eq!(body["group"], group);
    assert_eq!(body["topic"], topic);
    let offsets = offsets_in_partition_order(&body, "offsets");
    // The reset is what GET offsets reports from now on.
    let committed: Vec<Option<u64>> = group_offsets(client, group, topic)
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(
        committed,
        offsets.iter().map(|&o| Some(o)).collect::<Vec<_>>(),
        "after reset to {to}"
    );
    offsets
}

#[test]
fn commits_survive_a_restart_and_the_group_read_continues_from_them() {
    let mut server = Server::start(&[]);
    setup(&server, "orders");
    let client = server.client();

    // A new group: nothing committed, positioned at the start.
    assert_eq!(
        group_offsets(&client, "g1", "orders"),
        vec![(None, 10), (None, 6)]
    );
    let (first, next) = group_read(&client, "g1", "orders", "max_records=4", &[0, 0]);
    assert_eq!(
        first.values().map(Vec::len).sum::<usize>(),
        4,
        "max_records counts across partitions"
    );
    // Reading does not commit by default.
    assert_eq!(
        group_offsets(&client, "g1", "orders"),
        vec![(None, 10), (None, 6)]
    );
    let (again, next_again) = group_read(&client, "g1", "orders", "max_records=4", &[0, 0]);
    assert_eq!(
        (&again, &next_again),
        (&first, &next),
        "an uncommitted read repeats"
    );

    commit(&client, "g1", "orders", &next);
    let lags: Vec<u64> = COUNTS.iter().zip(&next).map(|(c, n)| c - n).collect();
    assert_eq!(
        group_offsets(&client, "g1", "orders"),
        vec![(Some(next[0]), lags[0]), (Some(next[1]), lags[1])]
    );
    // A second group is independent.
    commit(&client, "g2", "orders", &[1, 1]);
    // Any name of 1..=255 bytes without control characters, percent-encoded.
    let (status, body) = client.post_json(
        &format!("/v1/groups/{UNICODE_GROUP_PATH}/offsets"),
        &json!({"topic": "orders", "offsets": [{"partition": 0, "offset": 2}, {"partition": 1, "offset": 2}]}),
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["group"], UNICODE_GROUP);

    server.terminate_ok();
    let server = server.restart();
    let client = server.client();
    assert_eq!(
        group_offsets(&client, "g1", "orders"),
        vec![(Some(next[0]), lags[0]), (Some(next[1]), lags[1])],
        "committed offsets survive the restart"
    );
    assert_eq!(
        group_offsets(&client, "g2", "orders"),
        vec![(Some(1), 9), (Some(1), 5)]
    );
    let (status, groups) = client.get("/v1/groups");
    assert_eq!(status, 200);
    let groups: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.as_str().unwrap())
        .collect();
    assert!(
        groups.contains(&"g1") && groups.contains(&"g2") && groups.contains(&UNICODE_GROUP),
        "{groups:?}"
    );
    let (status, body) = client.get(&format!(
        "/v1/groups/{UNICODE_GROUP_PATH}/offsets?topic=orders"
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["group"], UNICODE_GROUP);
    assert_eq!(body["topics"][0]["partitions"][0]["committed"], 2, "{body}");
    assert_eq!(body["topics"][0]["partitions"][1]["committed"], 2, "{body}");

    // The group read continues at the commit and reaches the end.
    let (rest, end) = group_read(&client, "g1", "orders", "max_records=1000", &next);
    assert_eq!(end, COUNTS.to_vec());
    for p in 0..2u64 {
        let offsets: Vec<u64> = rest
            .get(&p)
            .map(|v| v.iter().map(|(o, _)| *o).collect())
            .unwrap_or_default();
        assert_eq!(
            offsets,
            (next[p as usize]..COUNTS[p as usize]).collect::<Vec<_>>()
        );
    }

    // GET offsets without a topic lists the topics the group committed on.
    let (status, body) = client.get("/v1/groups/g1/offsets");
    assert_eq!(status, 200, "{body}");
    let topics: Vec<&Value> = body["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["topic"])
        .collect();
    assert_eq!(topics, [&json!("orders")]);

    // A commit (plain and commit=true) acknowledged before a SIGKILL survives it too.
    commit(&client, "g1", "orders", &[7, 3]);
    let (_, next) = group_read(
        &client,
        "g2",
        "orders",
        "max_records=3&commit=true",
        &[1, 1],
    );
    let mut server = server;
    server.kill9();
    let server = server.restart();
    let client = server.client();
    assert_eq!(
        group_offsets(&client, "g1", "orders"),
        vec![(Some(7), 3), (Some(3), 3)]
    );
    let committed: Vec<Option<u64>> = group_offsets(&client, "g2", "orders")
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    assert_eq!(committed, next.iter().map(|&o| Some(o)).collect::<Vec<_>>());
}

#[test]
fn commit_true_commits_the_answers_next_offsets() {
    let server = Server::start(&[]);
    setup(&server, "auto");
    let client = server.client();
    let mut position = vec![0, 0];
    let mut seen: Vec<(u64, u64)> = Vec::new();
    for round in 0..20 {
        let (records, next) = group_read(
            &client,
            "ac",
            "auto",
            "max_records=5&commit=true",
            &position,
        );
        let committed: Vec<Option<u64>> = group_offsets(&client, "ac", "auto")
            .into_iter()
            .map(|(c, _)| c)
            .collect();
        assert_eq!(
            committed,
            next.iter().map(|&o| Some(o)).collect::<Vec<_>>(),
            "round {round}"
        );
        for (p, rs) in &records {
            seen.extend(rs.iter().map(|(o, _)| (*p, *o)));
        }
        position = next;
        if records.is_empty() {
            break;
        }
    }
    assert_eq!(position, COUNTS.to_vec());
    seen.sort_unstable();
    let all: Vec<(u64, u64)> = (0..2u64)
        .flat_map(|p| (0..COUNTS[p as usize]).map(move |o| (p, o)))
        .collect();
    assert_eq!(
        seen, all,
        "each record exactly once across the committed reads"
    );
    assert_eq!(
        group_offsets(&client, "ac", "auto"),
        vec![(Some(10), 0), (Some(6), 0)]
    );

    // commit=false (explicit) does not move the group.
    server.produce("auto", &json!([{"key": "k0-10", "partition": 0, "timestamp": timestamp(0, 10), "value": {"p": 0, "i": 10}}]));
    let (records, next) = group_read(&client, "ac", "auto", "commit=false", &[10, 6]);
    assert_eq!(records.values().map(Vec::len).sum::<usize>(), 1);
    assert_eq!(next, vec![11, 6]);
    assert_eq!(
        group_offsets(&client, "ac", "auto"),
        vec![(Some(10), 1), (Some(6), 0)]
    );
}

#[test]
fn reset_lands_on_timestamp_earliest_latest_and_clamped_offsets() {
    let server = Server::start(&[]);
    setup(&server, "events");
    let client = server.client();

    // Timestamps: p0 = BASE + i s, p1 = BASE + 0.5 s + i s.
    let cases = [
        (json!({"timestamp": BASE + 3500}), vec![4, 3]),
        (json!({"timestamp": BASE}), vec![0, 0]),
        (json!({"timestamp": 0}), vec![0, 0]),
        (json!({"timestamp": BASE + 1}), vec![1, 0]),
        (json!({"timestamp": BASE + 500}), vec![1, 0]),
        (json!({"timestamp": BASE + 501}), vec![1, 1]),
        (json!({"timestamp": BASE + 5000}), vec![5, 5]),
        (json!({"timestamp": BASE + 5501}), vec![6, 6]),
        (json!({"timestamp": BASE + 9000}), vec![9, 6]),
        (json!({"timestamp": BASE + 9001}), vec![10, 6]),
        (json!({"timestamp": BASE + 1_000_000}), vec![10, 6]),
        (json!("earliest"), vec![0, 0]),
        (json!("latest"), vec![10, 6]),
        (json!({"offset": 3}), vec![3, 3]),
        (json!({"offset": 8}), vec![8, 6]),
        (json!({"offset": 1_000_000}), vec![10, 6]),
        (json!({"offset": 0}), vec![0, 0]),
    ];
    for (to, want) in cases {
        let got = reset(&client, "r", "events", to.clone());
        assert_eq!(got, want, "reset to {to}");
        // Lag follows, and the group read starts exactly there.
        let lags: Vec<u64> = group_offsets(&client, "r", "events")
            .into_iter()
            .map(|(_, l)| l)
            .collect();
        assert_eq!(
            lags,
            vec![COUNTS[0] - want[0], COUNTS[1] - want[1]],
            "lag after reset to {to}"
        );
        let (records, next) = group_read(&client, "r", "events", "max_records=1000", &want);
        let read: usize = records.values().map(Vec::len).sum();
        assert_eq!(
            read as u64,
            lags.iter().sum::<u64>(),
            "reset to {to}: reads what the lag says"
        );
        assert_eq!(next, COUNTS.to_vec());
    }

    // At the end: lag 0; new records raise the lag and are what the group reads.
    reset(&client, "r", "events", json!("latest"));
    assert_eq!(
        group_offsets(&client, "r", "events"),
        vec![(Some(10), 0), (Some(6), 0)]
    );
    server.produce(
        "events",
        &json!([
            {"key": "k0-10", "partition": 0, "timestamp": timestamp(0, 10), "value": {"p": 0, "i": 10}},
            {"key": "k0-11", "partition": 0, "timestamp": timestamp(0, 11), "value": {"p": 0, "i": 11}}
        ]),
    );
    assert_eq!(
        group_offsets(&client, "r", "events"),
        vec![(Some(10), 2), (Some(6), 0)]
    );
    let (records, next) = group_read(&client, "r", "events", "", &[10, 6]);
    assert_eq!(
        records[&0].iter().map(|(o, _)| *o).collect::<Vec<_>>(),
        vec![10, 11]
    );
    assert_eq!(next, vec![12, 6]);
}
