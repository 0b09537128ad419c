//! The `purchases` stream: e-commerce events of users choosing products.
//!
//! Fits `CREATE STREAM user_events (user_id VARCHAR, event_type VARCHAR,
//! amount DECIMAL(10,2), event_time TIMESTAMP)`. Users follow the Zipf
//! skew; 70% views, 20% cart additions, 10% purchases. `amount` is the
//! product's price (log-normal, median about 40, capped below
//! [`HIGH_VALUE_MIN`]), except that a purchase is *high value*, uniform in
//! `HIGH_VALUE_MIN..HIGH_VALUE_MAX`, with probability
//! `high_value_fraction`. So `WHERE amount > 100000` selects exactly the
//! high-value purchases.

use serde_json::{json, Value};

use super::source::{cents, Ctx, Source};
use super::{Arrival, Event};

/// High-value purchases are strictly above this amount.
pub const HIGH_VALUE_MIN: f64 = 100_000.0;
/// Largest high-value amount (well inside DECIMAL(10,2)).
pub const HIGH_VALUE_MAX: f64 = 1_000_000.0;
/// Largest ordinary price.
const PRICE_MAX: f64 = 20_000.0;
/// Products in the catalogue.
const PRODUCTS: u64 = 5_000;

/// Generates `purchases` events.
#[derive(Debug)]
pub struct Purchases {
    high_value_fraction: f64,
}

impl Purchases {
    /// A generator where `high_value_fraction` of purchases exceed 100000.
    pub fn new(high_value_fraction: f64) -> Purchases {
        Purchases {
            high_value_fraction,
        }
    }
}

/// The price of a product: log-normal with median 40 (σ = 1.1), in cents.
fn price(ctx: &mut Ctx) -> f64 {
    let z = ctx.normal();
    cents((40f64.ln() + 1.1 * z).exp().clamp(0.5, PRICE_MAX))
}

impl Source for Purchases {
    fn next_event(&mut self, ctx: &mut Ctx) -> Event {
        let time = ctx.tick();
        let user = format!("user-{}", ctx.keys.next_rank());
        let roll = ctx.rng.next_f64();
        let event_type = if roll < 0.7 {
            "view"
        } else if roll < 0.9 {
            "cart"
        } else {
            "purchase"
        };
        let product = ctx.rng.below(PRODUCTS);
        let mut amount = price(ctx);
        if event_type == "purchase" && ctx.chance(self.high_value_fraction) {
            // Strictly above the threshold even after rounding to cents.
            amount = cents(ctx.uniform(HIGH_VALUE_MIN + 0.01, HIGH_VALUE_MAX));
        }
        let fields: Vec<(&'static str, Value)> = vec![
            ("user_id", json!(user)),
            ("event_type", json!(event_type)),
            ("product_id", json!(format!("p-{product}"))),
            ("amount", json!(amount)),
            ("currency", json!("EUR")),
        ];
        Event {
            event_id: ctx.next_event_id(),
            key: user,
            event_time_ms: time,
            fields,
            arrival: Arrival::OnTime,
        }
    }
}
