//! A Kafka cluster's topics written and read with confluent-kafka from the
//! Kafka clients' venv, for the tests of views and streams over a cluster:
//! [`produce_records`] and [`read_committed`].

use std::io::Write;
use std::process::Command;

use serde_json::Value;

use crate::*;

/// Produces `records` (`{"key", "timestamp", "value"[, "partition"]}`) to
/// `topic` on the cluster at `bootstrap`, every one acknowledged
/// (`tests/kafka/produce_records.py`).
pub fn produce_records(bootstrap: &str, topic: &str, records: &[Value]) {
    let mut file = tempfile::NamedTempFile::new().expect("a temp file");
    for r in records {
        writeln!(file, "{r}").expect("writing the records");
    }
    file.flush().expect("writing the records");
    let out = Command::new(python())
        .arg(kafka_script("produce_records.py"))
        .args([bootstrap, topic])
        .arg(file.path())
        .output()
        .expect("running the venv's python");
    assert!(
        out.status.success(),
        "producing to the cluster failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every committed record's value of `topic` on the cluster at
/// `bootstrap`, parsed as JSON, read with a read-committed consumer to the
/// end of every partition; in no particular order.
pub fn read_committed(bootstrap: &str, topic: &str) -> Vec<Value> {
    read_committed_records(bootstrap, topic)
        .into_iter()
        .map(|(_, value)| value)
        .collect()
}

/// Like [`read_committed`], each value with its `kappa-outbox` header (the
/// outbox entry of a derived stream that wrote it; empty without one).
///
/// A broker that does not filter aborted transactions (Tansu 0.6) shows
/// their records here too: an entry whose transaction was aborted and
/// appended again then comes twice, under the same header.
pub fn read_committed_records(bootstrap: &str, topic: &str) -> Vec<(String, Value)> {
    let script = format!(
        "import json, time\n\
         from confluent_kafka import Consumer, TopicPartition\n\
         c = Consumer({{'bootstrap.servers': '{bootstrap}', 'group.id': 'check', \
           'isolation.level': 'read_committed', 'enable.partition.eof': True}})\n\
         parts = c.list_topics('{topic}', timeout=10).topics['{topic}'].partitions\n\
         c.assign([TopicPartition('{topic}', p, 0) for p in parts])\n\
         left, out, end = set(parts), [], time.time() + 60\n\
         while left and time.time() < end:\n\
         \x20   m = c.poll(0.5)\n\
         \x20   if m is None: continue\n\
         \x20   if m.error(): left.discard(m.partition()); continue\n\
         \x20   entry = dict(m.headers() or []).get('kappa-outbox', b'').decode()\n\
         \x20   out.append([entry, json.loads(m.value())])\n\
         assert not left, left\n\
         print(json.dumps(out))\n"
    );
    let stdout = run_python(&script, &format!("reading {topic}"));
    serde_json::from_slice(&stdout).expect("the records as JSON")
}
