//! Atomic produce (issue 11, item 8): a produce with records for several
//! partitions appends everywhere or nowhere where that can be checked up
//! front (a full append queue: 503, nothing appended), and where a write
//! fails after some partitions appended (disk full: 507), the answer says
//! exactly what was appended and never contradicts the log; a retry with the
//! same `Idempotency-Key` appends only the rest.
//!
//! The server runs in this process (`run_with_log_config`) so that the log's
//! fault-injection seam can make a write fail or hold syncs.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kappa_log::io::FaultInjector;
use kappa_server::ServerConfig;
use serde_json::{json, Value};

mod support;

use support::InProcess;

/// A server whose log injects `faults` and holds `append_queue_bytes` per
/// partition queue.
fn start(faults: Arc<FaultInjector>, append_queue_bytes: usize) -> InProcess {
    let config = ServerConfig {
        append_queue_wait_ms: 100,
        ..ServerConfig::default()
    };
    InProcess::start(config, move |log_config| {
        log_config.faults = Some(faults);
        log_config.append_queue_bytes = append_queue_bytes;
        log_config.max_batch_bytes = log_config.max_batch_bytes.min(append_queue_bytes);
    })
}

/// Every record value of a partition, by offset.
fn values(server: &InProcess, topic: &str, partition: u32) -> Vec<Value> {
    let (status, body) = server.get(&format!(
        "/v1/topics/{topic}/partitions/{partition}/records?offset=earliest"
    ));
    assert_eq!(status, 200, "{body}");
    body["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].clone())
        .collect()
}

/// Asserts that a produce answer agrees with the log: what it says was
/// appended is there at its offset, and a partition it says nothing about
/// holds nothing.
fn assert_answer_matches_log(server: &InProcess, records: &[Value], status: u16, answer: &Value) {
    let landed: Vec<Value> = if status == 200 {
        answer["records"].as_array().unwrap().clone()
    } else if answer["error"]["code"] == "partially_appended" {
        answer["error"]["records"].as_array().unwrap().clone()
    } else {
        vec![Value::Null; records.len()]
    };
    assert_eq!(landed.len(), records.len(), "{answer}");
    for p in 0..2u32 {
        let stored = values(server, "t", p);
        let said: Vec<(u64, &Value)> = landed
            .iter()
            .zip(records)
            .filter(|(l, _)| l["partition"] == json!(p))
            .map(|(l, r)| (l["offset"].as_u64().unwrap(), &r["value"]))
            .collect();
        assert_eq!(
            stored.len(),
            said.len(),
            "partition {p} holds {stored:?}, the answer ({status} {answer}) says {said:?}"
        );
        for (offset, value) in said {
            assert_eq!(
                &stored[offset as usize], value,
                "partition {p} offset {offset}"
            );
        }
    }
}

#[test]
fn a_write_failing_on_one_partition_is_answered_with_exactly_what_was_appended() {
    let faults = Arc::new(FaultInjector::new());
    let server = start(faults.clone(), 64 << 20);
    let (status, _) = server.post("/v1/topics", &json!({"name": "t", "partitions": 2}), None);
    assert_eq!(status, 201);
    let records = vec![
        json!({"partition": 0, "value": "a"}),
        json!({"partition": 1, "value": "b"}),
    ];
    let body = json!({ "records": records });
    // The next segment write (whichever partition writes first) hits a
    // full disk; the other partition's write succeeds.
    faults.fail_next_write_after.store(0, Ordering::SeqCst);
    let (status, answer) = server.post("/v1/topics/t/records", &body, Some("k1"));
    assert_eq!(status, 507, "{answer}");
    assert_answer_matches_log(&server, &records, status, &answer);
    assert_eq!(answer["error"]["code"], "partially_appended", "{answer}");
    let appended = &answer["error"]["appended"];
    let failed = &answer["error"]["failed"];
    assert_eq!(appended.as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(failed[0]["code"], "disk_full", "{answer}");

    // A retry with the same key appends only what is missing.
    let (status, retried) = server.post("/v1/topics/t/records", &body, Some("k1"));
    assert_eq!(status, 200, "{retried}");
    assert_answer_matches_log(&server, &records, status, &retried);
    let first = answer["error"]["records"]
        .as_array()
        .unwrap()
        .iter()
        .zip(retried["records"].as_array().unwrap())
        .find(|(before, _)| !before.is_null())
        .unwrap();
    assert_eq!(first.0, first.1, "the appended record keeps its offset");
}

#[test]
fn a_full_queue_on_one_partition_appends_nothing_anywhere() {
    let faults = Arc::new(FaultInjector::new());
    let server = start(faults.clone(), 64 << 10);
    let (status, _) = server.post("/v1/topics", &json!({"name": "t", "partitions": 2}), None);
    assert_eq!(status, 201);
    let big = "x".repeat(40 << 10);
    // Hold every fsync: an append to partition 1 keeps 40 KiB of its
    // 64 KiB queue until it is answered.
    let gate = faults.sync_gate.lock().unwrap();
    let syncs = faults.syncs_started.load(Ordering::SeqCst);
    let filler = {
        let addr = server.addr;
        let body = json!({"records": [{"partition": 1, "value": big}]});
        std::thread::spawn(move || {
            ureq::post(&format!("http://{addr}/v1/topics/t/records"))
                .set("Content-Type", "application/json")
                .send_string(&body.to_string())
                .map(|r| r.status())
                .unwrap_or_else(|e| panic!("{e}"))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while faults.syncs_started.load(Ordering::SeqCst) == syncs {
        assert!(
            Instant::now() < deadline,
            "the filler never reached its fsync"
        );
        std::thread::yield_now();
    }
    let records = vec![
        json!({"partition": 0, "value": "small"}),
        json!({"partition": 1, "value": big}),
    ];
    let (status, answer) =
        server.post("/v1/topics/t/records", &json!({ "records": records }), None);
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "overloaded", "{answer}");
    drop(gate);
    assert_eq!(filler.join().unwrap(), 200);
    // Partition 0's writer answers in order: the next append to it lands at
    // offset 0 only if the refused request left nothing in its queue.
    let (status, after) = server.post(
        "/v1/topics/t/records",
        &json!({"records": [{"partition": 0, "value": "after"}]}),
        None,
    );
    assert_eq!(status, 200, "{after}");
    assert_eq!(after["records"][0]["offset"], 0, "{after}");
    assert_eq!(values(&server, "t", 0), vec![json!("after")]);
    assert_eq!(values(&server, "t", 1).len(), 1, "only the filler");
}
