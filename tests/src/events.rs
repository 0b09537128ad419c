//! Events of the brief's `user_events` stream as the view scenarios make
//! them: an [`Event`] per record, produced in one request or in chunks.

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
