//! `kappa-datagen`: deterministic, realistic event streams for demos, tests
//! and benchmarks.
//!
//! Module map:
//!
//! * [`source`]: the shared generation context (seeded PRNG, key
//!   distribution, event-time clock) and the [`source::Source`] trait.
//! * [`purchases`], [`clicks`], [`iot`]: one file per stream kind, each
//!   producing fresh events in event-time order.
//! * [`nexmark`]: the Nexmark auction site (persons, auctions, bids), a
//!   generator of its own: three kinds of event, no disorder layer, sent
//!   to three files, three topics or stdout by [`nexmark::run`].
//! * [`disorder`]: turns the fresh, ordered events into what a real feed
//!   looks like: bounded out-of-order arrival, late events, duplicates.
//! * [`output`]: NDJSON to a writer, or batched produce to a running server.
//! * [`args`]: the command line of the binary and its `run`.
//!
//! Invariant: everything that decides an event's content comes from the
//! seed, the arguments and `start_time_ms`, never from the wall clock, so
//! the same seed and arguments give byte-identical output (pacing with
//! `--rate` only changes *when* lines are written).

pub mod args;
pub mod clicks;
pub mod disorder;
pub mod iot;
pub mod nexmark;
pub mod output;
pub mod purchases;
pub mod source;

use anyhow::bail;
use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

pub use disorder::Generator;

/// Default start of event time: 2026-01-01T00:00:00Z, fixed so output is
/// reproducible.
pub const DEFAULT_START_TIME_MS: i64 = 1_767_225_600_000;

/// Which stream to generate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StreamKind {
    /// E-commerce events: view, cart, purchase (with amounts).
    Purchases,
    /// Clickstream: page views grouped in per-user sessions.
    Clicks,
    /// Sensor readings: temperature, humidity, battery.
    Iot,
    /// The Nexmark auction site: persons, auctions and bids (see [`nexmark`]).
    Nexmark,
}

/// How `event_time` is written in the JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TimeFormat {
    /// `"2026-01-01T00:00:00.000Z"`.
    Rfc3339,
    /// Milliseconds since the Unix epoch, as a JSON integer.
    EpochMs,
}

/// Everything that determines the generated events.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Stream kind.
    pub stream: StreamKind,
    /// PRNG seed.
    pub seed: u64,
    /// Stop after this many events (duplicates included).
    pub count: Option<u64>,
    /// Stop when event time passes `start_time_ms + duration_ms`.
    pub duration_ms: Option<u64>,
    /// Mean events per second of event time (the event-time clock's rate).
    pub events_per_second: f64,
    /// Number of distinct entities (users, devices).
    pub keys: u64,
    /// Zipf exponent of the entity choice; 0 = uniform.
    pub skew: f64,
    /// Largest delay of a non-late event behind the newest one, ms.
    pub out_of_order_ms: u64,
    /// Fraction of events that arrive late.
    pub late_fraction: f64,
    /// A late event is more than this many ms behind the newest event.
    pub lateness_ms: u64,
    /// Fraction of events that re-emit an earlier event (same `event_id`).
    pub duplicate_fraction: f64,
    /// Purchases only: fraction of purchases with an amount over 100000.
    pub high_value_fraction: f64,
    /// Clicks only: least event-time gap between two sessions of a user, ms.
    pub session_gap_ms: u64,
    /// Event time of the first event, ms since the epoch.
    pub start_time_ms: i64,
    /// How `event_time` is written.
    pub time_format: TimeFormat,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            stream: StreamKind::Purchases,
            seed: 1,
            count: Some(1000),
            duration_ms: None,
            events_per_second: 1000.0,
            keys: 1000,
            skew: 1.0,
            out_of_order_ms: 0,
            late_fraction: 0.0,
            lateness_ms: 60_000,
            duplicate_fraction: 0.0,
            high_value_fraction: 0.001,
            session_gap_ms: 30_000,
            start_time_ms: DEFAULT_START_TIME_MS,
            time_format: TimeFormat::Rfc3339,
        }
    }
}

impl Config {
    /// Checks ranges; the message names the flag.
    pub fn validate(&self) -> anyhow::Result<()> {
        let fraction = |name: &str, v: f64| {
            if (0.0..=1.0).contains(&v) {
                Ok(())
            } else {
                Err(anyhow::anyhow!("--{name} must be in 0..=1, got {v}"))
            }
        };
        fraction("late-fraction", self.late_fraction)?;
        fraction("duplicate-fraction", self.duplicate_fraction)?;
        fraction("high-value-fraction", self.high_value_fraction)?;
        if self.late_fraction + self.duplicate_fraction > 1.0 {
            bail!("--late-fraction + --duplicate-fraction must be at most 1");
        }
        if self.keys == 0 || self.keys > source::MAX_KEYS {
            bail!(
                "--keys must be in 1..={}, got {}",
                source::MAX_KEYS,
                self.keys
            );
        }
        if !(self.skew.is_finite() && self.skew >= 0.0) {
            bail!("--skew must be >= 0, got {}", self.skew);
        }
        if !(self.events_per_second.is_finite() && self.events_per_second > 0.0) {
            bail!("the event-time rate must be > 0");
        }
        if self.late_fraction > 0.0 && self.lateness_ms == 0 {
            bail!("--lateness must be > 0 when --late-fraction is set");
        }
        if self.count.is_none() && self.duration_ms.is_none() {
            bail!("give --count or --duration (or both)");
        }
        Ok(())
    }
}

/// How an emitted event came about (kept for tests and statistics; not
/// written out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A new event, at most `out_of_order_ms` behind the newest one.
    OnTime,
    /// A new event more than `lateness_ms` behind the newest one.
    Late,
    /// A copy of an earlier event.
    Duplicate,
}

/// One generated event.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Unique id of the event (shared by its duplicates).
    pub event_id: String,
    /// The entity id (user_id / device_id): the record key.
    pub key: String,
    /// Event time, ms since the epoch: also the record timestamp.
    pub event_time_ms: i64,
    /// The stream's fields in output order, without `event_id` and
    /// `event_time`.
    pub fields: Vec<(&'static str, Value)>,
    /// How the event arrived.
    pub arrival: Arrival,
}

impl Event {
    /// The JSON value of the event (`event_id`, the fields, `event_time`).
    pub fn json(&self, format: TimeFormat) -> EventJson<'_> {
        EventJson {
            event: self,
            format,
        }
    }
}

/// Serializes an [`Event`] as a JSON object with a stable field order.
#[derive(Debug, Clone, Copy)]
pub struct EventJson<'a> {
    event: &'a Event,
    format: TimeFormat,
}

impl Serialize for EventJson<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let e = self.event;
        let mut map = serializer.serialize_map(Some(e.fields.len() + 2))?;
        map.serialize_entry("event_id", &e.event_id)?;
        for (name, value) in &e.fields {
            map.serialize_entry(name, value)?;
        }
        match self.format {
            TimeFormat::EpochMs => map.serialize_entry("event_time", &e.event_time_ms)?,
            TimeFormat::Rfc3339 => {
                let text = kappa_processor::expr::format_timestamp(e.event_time_ms)
                    .unwrap_or_else(|| e.event_time_ms.to_string());
                map.serialize_entry("event_time", &text)?
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests;
