//! A derived stream's output topic on a Kafka cluster (Tansu) is written
//! exactly once ([`kappa_cluster::ClusterSink`]): each outbox entry in one
//! transaction, and an entry the topic already holds — appended before a
//! crash that came before the outbox was cleared — is skipped when the
//! version starts again and appends its pending outbox once more. What a
//! `kill -9` rarely hits (the moment between the transaction's commit and
//! the outbox's clear, or a crash inside a transaction), driven here step
//! by step.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::process::Command;

use kappa_cluster::{ClusterConfig, ClusterSink};
use kappa_processor::sink::{OutputRecord, OutputSink};
use kappa_tests::*;

/// Every committed record's value of `topic` as JSON text, sorted.
fn committed_values(bootstrap: &str, topic: &str) -> Vec<String> {
    let mut values: Vec<String> = read_committed(bootstrap, topic)
        .iter()
        .map(Value::to_string)
        .collect();
    values.sort();
    values
}

fn entry(seq: u64) -> Vec<(String, String)> {
    (0..5)
        .map(|i| (format!("k{i}"), format!("{{\"entry\":{seq},\"i\":{i}}}")))
        .collect()
}

fn append(sink: &ClusterSink, seq: u64) {
    let records = entry(seq);
    let out: Vec<OutputRecord<'_>> = records
        .iter()
        .map(|(k, v)| OutputRecord {
            key: Some(k),
            value: v,
            timestamp: 1_000 + seq as i64,
            source: None,
            joined: None,
        })
        .collect();
    // The input positions of the commit that made the entry.
    sink.append(seq, &out, &[10 * seq, 7]).unwrap();
}

#[test]
fn an_entry_the_topic_already_holds_is_not_appended_again_after_a_restart() {
    let tansu = Tansu::start();
    tansu.create_topic("out", 3);
    let config = ClusterConfig::plaintext(&tansu.bootstrap());

    let first = ClusterSink::open("prod", &config, "s@1", "out").unwrap();
    append(&first, 1);
    append(&first, 2);
    // "Crash" after entry 2's transaction committed, before the outbox
    // was cleared: the version starts again and re-appends entry 2.
    drop(first);
    let again = ClusterSink::open("prod", &config, "s@1", "out").unwrap();
    // The topic holds entry 2, made at input positions [20, 7]: kept as
    // the committed offset's metadata, which Tansu 0.6 drops (the reach is
    // then unknown; Apache Kafka keeps it).
    let written = again.written().unwrap();
    assert_eq!(written.entry, 2);
    assert!(
        written.reach.as_deref().is_none_or(|r| r == [20, 7]),
        "{written:?}"
    );
    append(&again, 2);
    append(&again, 3);
    // Another version's entries are its own.
    let other = ClusterSink::open("prod", &config, "s@2", "out").unwrap();
    append(&other, 1);

    let mut want: Vec<String> = [1, 2, 3, 1]
        .iter()
        .flat_map(|&seq| entry(seq).into_iter().map(|(_, v)| v))
        .collect();
    want.sort();
    assert_eq!(committed_values(&tansu.bootstrap(), "out"), want);
}

/// A writer `kappa-<writer>` that began a transaction holding outbox
/// entries `seqs` of `writer` (values `{"aborted": seq}`), sent them, and
/// died before the commit — what `kill -9` inside a transaction leaves.
fn die_inside_a_transaction(bootstrap: &str, topic: &str, writer: &str, seqs: &[u64]) {
    let sends: String = seqs
        .iter()
        .map(|seq| {
            format!(
                "p.produce('{topic}', key=b'k', value=b'{{\"aborted\":{seq}}}', \
                 headers=[('kappa-outbox', b'{writer}:{seq}')])\n"
            )
        })
        .collect();
    let script = format!(
        "import os\n\
         from confluent_kafka import Producer\n\
         p = Producer({{'bootstrap.servers': '{bootstrap}', 'transactional.id': 'kappa-{writer}'}})\n\
         p.init_transactions(30)\n\
         p.begin_transaction()\n\
         {sends}\
         p.flush(30)\n\
         os._exit(0)\n"
    );
    let out = Command::new(python())
        .args(["-c", &script])
        .output()
        .expect("running the venv's python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn an_entry_whose_transaction_died_open_is_appended_after_the_restart() {
    // The records of a transaction the restart aborts can stay readable to
    // read_committed consumers on brokers that do not filter aborted
    // transactions (Tansu 0.6 is one): they must not be taken for entries
    // the topic holds.
    let tansu = Tansu::start();
    tansu.create_topic("out", 2);
    let config = ClusterConfig::plaintext(&tansu.bootstrap());

    let first = ClusterSink::open("prod", &config, "s@1", "out").unwrap();
    append(&first, 1);
    drop(first);
    die_inside_a_transaction(&tansu.bootstrap(), "out", "s@1", &[2, 3]);
    let again = ClusterSink::open("prod", &config, "s@1", "out").unwrap();
    append(&again, 2);
    append(&again, 3);
    drop(again);
    // And a transaction that dies open before any entry was committed.
    die_inside_a_transaction(&tansu.bootstrap(), "out", "s@2", &[1]);
    let other = ClusterSink::open("prod", &config, "s@2", "out").unwrap();
    append(&other, 1);

    let mut want: Vec<String> = [1, 2, 3, 1]
        .iter()
        .flat_map(|&seq| entry(seq).into_iter().map(|(_, v)| v))
        .collect();
    want.sort();
    let written: Vec<String> = committed_values(&tansu.bootstrap(), "out")
        .into_iter()
        .filter(|v| !v.contains("aborted"))
        .collect();
    assert_eq!(written, want);
}

#[test]
fn a_missing_output_topic_is_named() {
    let tansu = Tansu::start();
    let config = ClusterConfig::plaintext(&tansu.bootstrap());
    let e = ClusterSink::open("prod", &config, "s@1", "nope").unwrap_err();
    let message = e.to_string();
    assert!(
        message.contains("cluster 'prod'")
            && message.contains("'nope'")
            && message.contains("does not exist"),
        "{message}"
    );
}
