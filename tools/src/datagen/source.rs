//! The generation context shared by the stream kinds, and the trait each
//! stream implements.
//!
//! The context owns one seeded PRNG (SplitMix64, [`Rng`]), the entity
//! distribution ([`KeyGen`], uniform or Zipf) and the event-time clock,
//! which advances by exponentially distributed gaps (a Poisson process) of
//! mean `1000 / events_per_second` ms. Fresh events come out in
//! non-decreasing event time.

use crate::bench::keys::{KeyGen, Rng, Skew};

use super::{Config, Event};

/// Most distinct entities (`--keys`): the Zipf table holds one f64 per key.
pub const MAX_KEYS: u64 = 10_000_000;

/// What a stream kind needs to make its next event.
#[derive(Debug)]
pub struct Ctx {
    /// The PRNG every random choice comes from.
    pub rng: Rng,
    /// Entity choice (rank 0 is the most frequent under Zipf).
    pub keys: KeyGen,
    /// Event-time clock, ms since the epoch (fractional).
    clock_ms: f64,
    /// Mean gap between events, ms.
    mean_gap_ms: f64,
    /// Seed, part of every event id.
    seed: u64,
    /// Number of fresh events made so far.
    made: u64,
    /// Whether `tick` was called yet.
    ticked: bool,
}

impl Ctx {
    /// A context for `config` (which must be valid).
    pub fn new(config: &Config) -> Ctx {
        let skew = if config.skew == 0.0 {
            Skew::Uniform
        } else {
            Skew::Zipf(config.skew)
        };
        Ctx {
            rng: Rng::new(config.seed),
            // A different stream than `rng`, so key choice does not shift
            // when a stream draws more or fewer numbers per event.
            keys: KeyGen::new(config.keys, skew, config.seed ^ 0x005E_ED0F_CAFE),
            clock_ms: config.start_time_ms as f64,
            mean_gap_ms: 1000.0 / config.events_per_second,
            seed: config.seed,
            made: 0,
            ticked: false,
        }
    }

    /// Advances the clock by one exponential gap and returns the new time;
    /// the first call returns the start time.
    pub fn tick(&mut self) -> i64 {
        if !self.ticked {
            self.ticked = true;
            return self.now_ms();
        }
        // 1 - u is in (0, 1], so ln is finite.
        let u = 1.0 - self.rng.next_f64();
        self.clock_ms += -u.ln() * self.mean_gap_ms;
        self.now_ms()
    }

    /// The current event time, ms.
    pub fn now_ms(&self) -> i64 {
        self.clock_ms.floor() as i64
    }

    /// Moves the clock forward to `ms` (never backwards).
    pub fn advance_to(&mut self, ms: i64) {
        self.clock_ms = self.clock_ms.max(ms as f64);
    }

    /// A new, unique event id: `<seed hex>-<sequence>`.
    pub fn next_event_id(&mut self) -> String {
        let id = format!("{:x}-{:09}", self.seed, self.made);
        self.made += 1;
        id
    }

    /// A uniform float in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.rng.next_f64()
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.rng.next_f64() < p
    }

    /// A standard normal draw (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.rng.next_f64();
        let u2 = self.rng.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// One of `items`, uniformly.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.rng.below(items.len() as u64) as usize]
    }
}

/// Rounds to cents (two decimals), as a DECIMAL(10,2) column holds it.
pub fn cents(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A stream kind: makes fresh events in non-decreasing event time.
pub trait Source: Send {
    /// The next fresh event (its `arrival` is `OnTime`; the disorder layer
    /// may change its time and arrival).
    fn next_event(&mut self, ctx: &mut Ctx) -> Event;
}
