//! The `iot` stream: readings of temperature/humidity sensors.
//!
//! Each device (chosen by the key distribution) has its own state, created
//! at its first reading: a base temperature (10..30 °C) and humidity
//! (30..70 %) that drift as a slow random walk, plus a little noise per
//! reading. With probability [`SPIKE_PROBABILITY`] a reading is a spike,
//! 20..40 °C above normal; spikes are not flagged in the data, finding them
//! is the query's job. The battery drains a little with every
//! reading and is replaced (back to 100) when it reaches 5 %.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::source::{Ctx, Source};
use super::{Arrival, Event};

/// Probability that a reading is a temperature spike.
pub const SPIKE_PROBABILITY: f64 = 0.002;

#[derive(Debug, Clone, Copy)]
struct Device {
    temperature: f64,
    humidity: f64,
    battery: f64,
}

/// Generates `iot` events.
#[derive(Debug, Default)]
pub struct Iot {
    devices: HashMap<u64, Device>,
}

impl Iot {
    /// A generator with no device seen yet.
    pub fn new() -> Iot {
        Iot::default()
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

impl Source for Iot {
    fn next_event(&mut self, ctx: &mut Ctx) -> Event {
        let time = ctx.tick();
        let rank = ctx.keys.next_rank();
        let fresh = Device {
            temperature: ctx.uniform(10.0, 30.0),
            humidity: ctx.uniform(30.0, 70.0),
            battery: ctx.uniform(40.0, 100.0),
        };
        let device = self.devices.entry(rank).or_insert(fresh);
        // Drift: a slow random walk, kept in a plausible band.
        device.temperature = (device.temperature + 0.05 * ctx.normal()).clamp(-20.0, 45.0);
        device.humidity = (device.humidity + 0.1 * ctx.normal()).clamp(5.0, 95.0);
        device.battery -= ctx.uniform(0.0, 0.05);
        if device.battery < 5.0 {
            device.battery = 100.0;
        }
        let mut temperature = device.temperature + 0.2 * ctx.normal();
        if ctx.chance(SPIKE_PROBABILITY) {
            temperature += ctx.uniform(20.0, 40.0);
        }
        let humidity = device.humidity + 0.5 * ctx.normal();
        let device_id = format!("sensor-{rank}");
        let fields: Vec<(&'static str, Value)> = vec![
            ("device_id", json!(device_id)),
            ("temperature", json!(round1(temperature))),
            ("humidity", json!(round1(humidity.clamp(0.0, 100.0)))),
            ("battery", json!(round1(device.battery))),
        ];
        Event {
            event_id: ctx.next_event_id(),
            key: device_id,
            event_time_ms: time,
            fields,
            arrival: Arrival::OnTime,
        }
    }
}
