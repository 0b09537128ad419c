//! A derived stream's output topic on a Kafka cluster (Tansu) is written
//! exactly once ([`kappa_cluster::ClusterSink`]): each outbox entry in one
//! transaction, and an entry the topic already holds — appended before a
//! crash that came before the outbox was cleared — is skipped when the
//! version starts again and appends its pending outbox once more. What a
//! `kill -9` rarely hits (the moment between the transaction's commit and
//! the outbox's clear), driven here step by step.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

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
        })
        .collect();
    sink.append(seq, &out).unwrap();
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
