//! Events of the brief's `user_events` stream as the view scenarios make
//! them: an [`Event`] per record, produced in one request or in chunks.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::{user_event, Client, Produced};

/// One input event of `user_events`.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The user (the record key).
    pub user: String,
    /// `event_type`: "purchase", "view", …
    pub kind: &'static str,
    /// The amount.
    pub amount: f64,
    /// Event time (and record timestamp), ms since the epoch.
    pub at: i64,
}

impl Event {
    /// The record to produce.
    pub fn record(&self) -> Value {
        user_event(&self.user, self.kind, self.amount, self.at)
    }
}

/// Produces `events` to `topic` on the Kafka cluster at `bootstrap` with
/// confluent-kafka (key: the user, timestamp: the event time), each in
/// the partition `partition_of` names (`None`: the client's partitioner),
/// every one acknowledged.
pub fn produce_to_cluster(
    bootstrap: &str,
    topic: &str,
    events: &[Event],
    partition_of: impl Fn(&Event) -> Option<u32>,
) {
    let records: Vec<Value> = events
        .iter()
        .map(|e| {
            let r = e.record();
            let mut record = serde_json::json!({"key": r["key"], "timestamp": r["timestamp"], "value": r["value"]});
            if let Some(p) = partition_of(e) {
                record["partition"] = p.into();
            }
            record
        })
        .collect();
    crate::produce_records(bootstrap, topic, &records);
}

/// Produces `events` to `user_events` in one request.
pub fn produce_events(client: &Client, events: &[Event]) -> Vec<Produced> {
    let records: Vec<Value> = events.iter().map(Event::record).collect();
    client.produce("user_events", &Value::Array(records))
}

/// Produces `events` in requests of at most `chunk` records.
pub fn produce_in_chunks(client: &Client, events: &[Event], chunk: usize) -> Vec<Produced> {
    events
        .chunks(chunk)
        .flat_map(|c| produce_events(client, c))
        .collect()
}

/// Every row of a `purchase_stats`-shaped view (`query` added to each
/// read, e.g. `version=1`), following cursors in pages of at most `page`
/// rows: (user, window start) → (purchase count, total amount); each row
/// must come once.
pub fn window_rows(
    client: &Client,
    view: &str,
    query: &str,
    page: usize,
) -> BTreeMap<(String, i64), (u64, f64)> {
    let mut out = BTreeMap::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100_000 {
        let q = match &cursor {
            Some(c) => format!("{query}&limit={page}&cursor={c}"),
            None => format!("{query}&limit={page}"),
        };
        let answer = client.view_rows(view, &q);
        let rows = answer["rows"].as_array().expect("rows");
        assert!(rows.len() <= page, "{answer}");
        for r in rows {
            let key = (
                r["key"].as_str().expect("a key").to_string(),
                r["window_start"].as_i64().expect("window_start"),
            );
            let value = (
                r["row"]["purchase_count"].as_u64().expect("purchase_count"),
                r["row"]["total_amount"].as_f64().expect("total_amount"),
            );
            assert!(out.insert(key, value).is_none(), "each row once: {answer}");
        }
        match answer["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
    panic!("more than 100,000 pages of {view}");
}
