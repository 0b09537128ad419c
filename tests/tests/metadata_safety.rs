//! Faults at rest never cost acknowledged data or reuse an offset, and a
//! start never destroys metadata (issue 11, items 3, 4 and 11), end to end
//! with the real binary:
//! - a flipped byte in the middle of the active segment: the batches after
//!   it stay readable, the damaged range is named with the next readable
//!   offset, new records get new offsets, and a consumer group positioned
//!   past the damage sees every new record;
//! - a missing `topic.json`: the start refuses, names the file and the
//!   repair, deletes nothing; `kappa-inspect repair-topic` brings every
//!   record back.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::process::Command;

use kappa_tests::{assert_error, inspect_bin, refused_start, Server};
use serde_json::json;

fn values(records: &[serde_json::Value]) -> Vec<serde_json::Value> {
    records.iter().map(|r| r["value"].clone()).collect()
}

#[test]
fn a_flipped_byte_in_the_active_segment_loses_only_its_batch_and_reuses_no_offset() {
    let mut server = Server::start(&[]);
    let c = server.client();
    c.create_topic(&json!({"name": "events", "partitions": 1}));
    for batch in 0..3 {
        let records: Vec<_> = (0..4)
            .map(|i| json!({"value": {"batch": batch, "i": i}}))
            .collect();
        c.produce("events", &json!(records));
    }
    // A group has consumed everything.
    let (status, body) = c.post_json(
        "/v1/groups/g/offsets",
        &json!({"topic": "events", "offsets": [{"partition": 0, "offset": 12}]}),
    );
    assert_eq!(status, 200, "{body}");
    server.kill9();

    let segment = server
        .data_dir()
        .join("topics/events/0/00000000000000000000.log");
    let mut bytes = std::fs::read(&segment).unwrap();
    let first_len = u32::from_le_bytes(bytes[0..4].try_into().unwrap()) as usize;
    bytes[first_len + 70] ^= 0x20; // inside the second batch
    std::fs::write(&segment, &bytes).unwrap();

    let server = server.restart();
    let c = server.client();
    // Nothing was truncated and no offset goes back.
    assert_eq!(c.end_offsets("events"), vec![12]);
    // Before the damage: its records, then the read stops.
    let page = c.read("events", 0, "offset=0&max_records=100");
    assert_eq!(page["records"].as_array().unwrap().len(), 4);
    assert_eq!(page["next_offset"], json!(4));
    // At the damage: an error naming the range and where to go on.
    let (status, body) = c.get("/v1/topics/events/partitions/0/records?offset=4");
    assert_error("read at the damage", status, &body, 500, "damaged_data");
    assert_eq!(body["error"]["first_offset"], json!(4), "{body}");
    assert_eq!(body["error"]["next_offset"], json!(8), "{body}");
    // After it: every record, unchanged.
    let after = c.read("events", 0, "offset=8&max_records=100");
    let expect: Vec<_> = (0..4).map(|i| json!({"batch": 2, "i": i})).collect();
    assert_eq!(values(after["records"].as_array().unwrap()), expect);
    // New records get new offsets, and the group positioned at 12 sees them.
    let produced = c.produce("events", &json!([{"value": {"new": 1}}]));
    assert_eq!(produced[0].offset, 12);
    let (status, body) = c.get("/v1/groups/g/topics/events/records?max_records=10");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        values(body["records"].as_array().unwrap()),
        vec![json!({"new": 1})]
    );
}

#[test]
fn a_missing_topic_json_refuses_the_start_and_the_repair_restores_every_record() {
    let mut server = Server::start(&[]);
    let c = server.client();
    c.create_topic(&json!({"name": "orders", "partitions": 2}));
    let records: Vec<_> = (0..20)
        .map(|i| json!({"key": format!("k{i}"), "value": {"i": i}}))
        .collect();
    c.produce("orders", &json!(records));
    let before: Vec<_> = (0..2).map(|p| c.read_all("orders", p)).collect();
    server.terminate_ok();
    let data = server.data_dir().to_path_buf();
    let meta = data.join("topics/orders/topic.json");
    std::fs::remove_file(&meta).unwrap();

    let stderr = refused_start(&data);
    assert!(stderr.contains(&meta.display().to_string()), "{stderr}");
    assert!(stderr.contains("kappa-inspect repair-topic"), "{stderr}");
    assert!(data.join("topics/orders/0").is_dir(), "nothing deleted");

    let repair = Command::new(inspect_bin())
        .arg("repair-topic")
        .arg(&data)
        .args(["--topic", "orders"])
        .output()
        .unwrap();
    assert!(
        repair.status.success(),
        "{}",
        String::from_utf8_lossy(&repair.stderr)
    );
    let server = server.restart();
    let c = server.client();
    let described = c.describe("orders");
    assert_eq!(described["partitions"].as_array().unwrap().len(), 2);
    let after: Vec<_> = (0..2).map(|p| c.read_all("orders", p)).collect();
    assert_eq!(after, before);
}
