//! The `nexmark` stream: the Nexmark benchmark's auction site (people
//! registering, auctions opening, bids), ported from the reference
//! generator of github.com/nexmark/nexmark (`nexmark-flink`, package
//! `com.github.nexmark.flink.generator`: `GeneratorConfig`,
//! `NexmarkGenerator`, `model/*Generator`) with its default configuration.
//!
//! Event `i` (from 0) is a person, an auction or a bid by `i % 50`: 0 a
//! person, 1..=3 auctions, 4..=49 bids (proportions 1:3:46). Its ids follow
//! from `i` alone (the reference's `lastBase0PersonId` /
//! `lastBase0AuctionId` arithmetic), its event time is
//! `start + floor(i * 1000 / rate)` ms, and its random fields come from a
//! PRNG seeded by `(seed, i)`, so event `i` is the same whatever was
//! generated before it (as Beam's Nexmark generator seeds
//! `new Random(eventId)`).
//!
//! [`model`] holds the event types, [`run`] the command line's outputs.
//!
//! Invariants (tested): person and auction ids are dense and increasing
//! from 1000; an auction's seller and a bid's bidder are among the last
//! [`NUM_ACTIVE_PEOPLE`] people or at most [`ID_LEAD`] ids past the newest
//! (the reference lets a choice run a little ahead: that person appears
//! shortly after); a bid's auction is among the last
//! [`NUM_IN_FLIGHT_AUCTIONS`] + 1 auctions or at most [`ID_LEAD`] past the
//! newest; `expires > date_time`; event time never decreases.

pub mod model;
pub mod run;
#[cfg(test)]
mod tests;

pub use model::{Auction, Bid, EventValue, Kind, NexmarkEvent, Person};

use super::DEFAULT_START_TIME_MS;
use crate::bench::keys::Rng;

/// People among every [`TOTAL_PROPORTION`] events.
pub const PERSON_PROPORTION: u64 = 1;
/// Auctions among every [`TOTAL_PROPORTION`] events.
pub const AUCTION_PROPORTION: u64 = 3;
/// Bids among every [`TOTAL_PROPORTION`] events.
pub const BID_PROPORTION: u64 = 46;
/// The length of the block in which the proportions hold exactly.
pub const TOTAL_PROPORTION: u64 = PERSON_PROPORTION + AUCTION_PROPORTION + BID_PROPORTION;
/// Id of the first person.
pub const FIRST_PERSON_ID: u64 = 1000;
/// Id of the first auction.
pub const FIRST_AUCTION_ID: u64 = 1000;
/// Id of the first category.
pub const FIRST_CATEGORY_ID: u64 = 10;
/// Categories: ids `FIRST_CATEGORY_ID..FIRST_CATEGORY_ID + NUM_CATEGORIES`.
pub const NUM_CATEGORIES: u64 = 5;
/// A random (not hot) bid is for one of this many latest auctions (or a lead).
pub const NUM_IN_FLIGHT_AUCTIONS: u64 = 100;
/// A random (not hot) seller or bidder is one of this many latest people (or a lead).
pub const NUM_ACTIVE_PEOPLE: u64 = 1000;
/// How far past the newest person or auction a random choice may go.
pub const ID_LEAD: u64 = 10;
/// Default event-time rate, events per second (nexmark's `firstEventRate`).
pub const DEFAULT_EVENT_RATE: f64 = 10_000.0;

/// A bid is for a hot auction with probability `1 - 1 / HOT_AUCTION_RATIO`.
const HOT_AUCTION_RATIO: u64 = 2;
/// An auction has a hot seller with probability `1 - 1 / HOT_SELLERS_RATIO`.
const HOT_SELLERS_RATIO: u64 = 4;
/// A bid has a hot bidder with probability `1 - 1 / HOT_BIDDERS_RATIO`.
const HOT_BIDDERS_RATIO: u64 = 4;
/// The hot auction / seller / bidder is the first (bidder: second) of the
/// newest batch of this many ids.
const HOT_BATCH: u64 = 100;
/// Average JSON-free byte sizes the `extra` padding aims at.
const AVG_PERSON_BYTES: usize = 200;
const AVG_AUCTION_BYTES: usize = 500;
const AVG_BID_BYTES: usize = 100;
/// Shortest random string before trimming.
const MIN_STRING_LENGTH: u64 = 3;
/// `extra` is a slice of one pad string this long (the reference's
/// `REUSABLE_EXTRA_STRING`).
const PAD_BYTES: usize = 1 << 20;
/// A bid comes through a hot channel with probability `1 - 1 / HOT_CHANNELS_RATIO`.
const HOT_CHANNELS_RATIO: u64 = 2;
const HOT_CHANNELS: [&str; 4] = ["Google", "Facebook", "Baidu", "Apple"];
/// Other channels: `channel-0` .. `channel-9999`.
const CHANNELS: u64 = 10_000;
const US_STATES: [&str; 6] = ["AZ", "CA", "ID", "OR", "WA", "WY"];
const US_CITIES: [&str; 10] = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
];
const FIRST_NAMES: [&str; 11] = [
    "Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter",
];
const LAST_NAMES: [&str; 9] = [
    "Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris",
];

/// Everything that determines a Nexmark run.
#[derive(Debug, Clone, PartialEq)]
pub struct NexmarkConfig {
    /// PRNG seed.
    pub seed: u64,
    /// Stop after this many events (all three kinds).
    pub count: Option<u64>,
    /// Stop at the first event at or past `start_time_ms + duration_ms`.
    pub duration_ms: Option<u64>,
    /// Events per second of event time.
    pub events_per_second: f64,
    /// Event time of event 0, ms since the epoch.
    pub start_time_ms: i64,
}

impl Default for NexmarkConfig {
    fn default() -> Self {
        NexmarkConfig {
            seed: 1,
            count: Some(1000),
            duration_ms: None,
            events_per_second: DEFAULT_EVENT_RATE,
            start_time_ms: DEFAULT_START_TIME_MS,
        }
    }
}

impl NexmarkConfig {
    /// Checks ranges; the message names the flag.
    pub fn validate(&self) -> anyhow::Result<()> {
        if !(self.events_per_second.is_finite() && self.events_per_second > 0.0) {
            anyhow::bail!("--event-rate must be > 0, got {}", self.events_per_second);
        }
        if self.count.is_none() && self.duration_ms.is_none() {
            anyhow::bail!("give --count or --duration (or both)");
        }
        Ok(())
    }
}

/// The newest person id (base 0) at event `n`: the person's own id when
/// `n` is a person.
pub fn last_base0_person_id(n: u64) -> u64 {
    let epoch = n / TOTAL_PROPORTION;
    let offset = n % TOTAL_PROPORTION;
    // During the epoch's auctions and bids: its last person.
    let offset = if offset < PERSON_PROPORTION {
        offset
    } else {
        PERSON_PROPORTION - 1
    };
    epoch * PERSON_PROPORTION + offset
}

/// The newest auction id (base 0) at event `n`: the auction's own id when
/// `n` is an auction. Meaningful from the first auction on.
pub fn last_base0_auction_id(n: u64) -> u64 {
    let epoch = n / TOTAL_PROPORTION;
    let offset = n % TOTAL_PROPORTION;
    if offset < PERSON_PROPORTION {
        // The last auction of the previous epoch.
        (epoch * AUCTION_PROPORTION).saturating_sub(1)
    } else if offset >= PERSON_PROPORTION + AUCTION_PROPORTION {
        epoch * AUCTION_PROPORTION + AUCTION_PROPORTION - 1
    } else {
        epoch * AUCTION_PROPORTION + offset - PERSON_PROPORTION
    }
}

/// A random active person (base 0), possibly a few ids ahead.
fn next_base0_person_id(n: u64, rng: &mut Rng) -> u64 {
    let people = last_base0_person_id(n) + 1;
    let active = people.min(NUM_ACTIVE_PEOPLE);
    people - active + rng.below(active + ID_LEAD)
}

/// A random in-flight auction (base 0), possibly a few ids ahead.
fn next_base0_auction_id(n: u64, rng: &mut Rng) -> u64 {
    let last = last_base0_auction_id(n);
    let min = last.saturating_sub(NUM_IN_FLIGHT_AUCTIONS);
    min + rng.below(last - min + 1 + ID_LEAD)
}

/// A price in cents, log-uniform from 1.00 to 1,000,000.00.
fn next_price(rng: &mut Rng) -> u64 {
    (10f64.powf(rng.next_f64() * 6.0) * 100.0).round() as u64
}

/// A lowercase letter.
fn letter(rng: &mut Rng) -> char {
    char::from(b'a' + rng.below(26) as u8)
}

/// A random string of `MIN_STRING_LENGTH..max_len` letters, one in 13 of
/// them `special`, trimmed of spaces at both ends.
fn next_string(rng: &mut Rng, max_len: u64, special: char) -> String {
    let len = MIN_STRING_LENGTH + rng.below(max_len - MIN_STRING_LENGTH);
    let s: String = (0..len)
        .map(|_| {
            if rng.below(13) == 0 {
                special
            } else {
                letter(rng)
            }
        })
        .collect();
    s.trim_matches(' ').to_owned()
}

/// One of `items`, uniformly.
fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.below(items.len() as u64) as usize]
}

/// A bid URL: `https://www.nexmark.com/xxx/yyy/zzz/item.htm?query=1`.
fn base_url(rng: &mut Rng) -> String {
    let mut url = String::from("https://www.nexmark.com/");
    for _ in 0..3 {
        url.push_str(&next_string(rng, 5, '_'));
        url.push('/');
    }
    url.push_str("item.htm?query=1");
    url
}

/// A well-mixed seed for the independent PRNG stream `b` under `a`.
fn mix(a: u64, b: u64) -> u64 {
    Rng::new(Rng::new(a).next_u64() ^ b).next_u64()
}

/// Nexmark events in event-time order: an iterator over a [`NexmarkConfig`].
#[derive(Clone)]
pub struct Nexmark {
    config: NexmarkConfig,
    /// Seed of the per-event PRNGs.
    events_key: u64,
    /// Seed of the per-channel URL PRNGs.
    channels_key: u64,
    /// What `extra` is sliced from.
    pad: String,
    /// URLs of [`HOT_CHANNELS`].
    hot_urls: [String; 4],
    /// Number of the next event the iterator yields.
    next_event: u64,
}

impl std::fmt::Debug for Nexmark {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the 1 MiB pad.
        f.debug_struct("Nexmark")
            .field("config", &self.config)
            .field("next_event", &self.next_event)
            .finish_non_exhaustive()
    }
}

impl Nexmark {
    /// A generator for `config`; fails if the config is invalid.
    pub fn new(config: NexmarkConfig) -> anyhow::Result<Nexmark> {
        config.validate()?;
        let mut pad_rng = Rng::new(mix(config.seed, 4));
        let mut pad = String::with_capacity(PAD_BYTES + 13);
        while pad.len() < PAD_BYTES {
            // 26^13 < 2^64: thirteen letters from one draw.
            let mut r = pad_rng.next_u64();
            for _ in 0..13 {
                pad.push(char::from(b'a' + (r % 26) as u8));
                r /= 26;
            }
        }
        pad.truncate(PAD_BYTES);
        let mut url_rng = Rng::new(mix(config.seed, 3));
        Ok(Nexmark {
            events_key: mix(config.seed, 1),
            channels_key: mix(config.seed, 2),
            pad,
            hot_urls: std::array::from_fn(|_| base_url(&mut url_rng)),
            next_event: 0,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &NexmarkConfig {
        &self.config
    }

    /// Event time of event number `n`: `start + floor(n * 1000 / rate)` ms.
    pub fn timestamp_for_event(&self, n: u64) -> i64 {
        let offset_ms = (n as f64 * 1000.0 / self.config.events_per_second).floor();
        self.config.start_time_ms.saturating_add(offset_ms as i64)
    }

    /// Event number `n`, independent of the events before it.
    pub fn event(&self, n: u64) -> NexmarkEvent {
        let mut rng = Rng::new(mix(self.events_key, n));
        let date_time = self.timestamp_for_event(n);
        match Kind::of_event(n) {
            Kind::Person => NexmarkEvent::Person(self.person(n, &mut rng, date_time)),
            Kind::Auction => NexmarkEvent::Auction(self.auction(n, &mut rng, date_time)),
            Kind::Bid => NexmarkEvent::Bid(self.bid(n, &mut rng, date_time)),
        }
    }

    fn person(&self, n: u64, rng: &mut Rng, date_time: i64) -> Person {
        let name = format!("{} {}", pick(rng, &FIRST_NAMES), pick(rng, &LAST_NAMES));
        let email_address = format!(
            "{}@{}.com",
            next_string(rng, 7, ' '),
            next_string(rng, 5, ' ')
        );
        let credit_card = (0..4)
            .map(|_| format!("{:04}", rng.below(10_000)))
            .collect::<Vec<_>>()
            .join(" ");
        let city = pick(rng, &US_CITIES);
        let state = pick(rng, &US_STATES);
        let size =
            8 + name.len() + email_address.len() + credit_card.len() + city.len() + state.len();
        Person {
            id: last_base0_person_id(n) + FIRST_PERSON_ID,
            name,
            email_address,
            credit_card,
            city,
            state,
            date_time,
            extra: self.next_extra(rng, size, AVG_PERSON_BYTES),
        }
    }

    fn auction(&self, n: u64, rng: &mut Rng, date_time: i64) -> Auction {
        let seller = if rng.below(HOT_SELLERS_RATIO) > 0 {
            last_base0_person_id(n) / HOT_BATCH * HOT_BATCH
        } else {
            next_base0_person_id(n, rng)
        };
        let category = FIRST_CATEGORY_ID + rng.below(NUM_CATEGORIES);
        let initial_bid = next_price(rng);
        let expires = date_time + self.auction_length_ms(n, rng, date_time);
        let item_name = next_string(rng, 20, ' ');
        let description = next_string(rng, 100, ' ');
        let reserve = initial_bid + next_price(rng);
        let size = 8 + item_name.len() + description.len() + 5 * 8;
        Auction {
            id: last_base0_auction_id(n) + FIRST_AUCTION_ID,
            item_name,
            description,
            initial_bid,
            reserve,
            date_time,
            expires,
            seller: seller + FIRST_PERSON_ID,
            category,
            extra: self.next_extra(rng, size, AVG_AUCTION_BYTES),
        }
    }

    /// Random auction length averaging the event time it takes to open
    /// `NUM_IN_FLIGHT_AUCTIONS` more auctions; at least 1 ms.
    fn auction_length_ms(&self, n: u64, rng: &mut Rng, date_time: i64) -> i64 {
        let events_ahead = NUM_IN_FLIGHT_AUCTIONS * TOTAL_PROPORTION / AUCTION_PROPORTION;
        let horizon_ms = self.timestamp_for_event(n + events_ahead) - date_time;
        1 + rng.below(horizon_ms.saturating_mul(2).max(1) as u64) as i64
    }

    fn bid(&self, n: u64, rng: &mut Rng, date_time: i64) -> Bid {
        let auction = if rng.below(HOT_AUCTION_RATIO) > 0 {
            last_base0_auction_id(n) / HOT_BATCH * HOT_BATCH
        } else {
            next_base0_auction_id(n, rng)
        };
        let bidder = if rng.below(HOT_BIDDERS_RATIO) > 0 {
            // The second of the batch, so hot bidders and sellers differ.
            last_base0_person_id(n) / HOT_BATCH * HOT_BATCH + 1
        } else {
            next_base0_person_id(n, rng)
        };
        let price = next_price(rng);
        let (channel, url) = if rng.below(HOT_CHANNELS_RATIO) > 0 {
            let i = rng.below(HOT_CHANNELS.len() as u64) as usize;
            (HOT_CHANNELS[i].to_owned(), self.hot_urls[i].clone())
        } else {
            let c = rng.below(CHANNELS);
            (format!("channel-{c}"), self.channel_url(c))
        };
        Bid {
            auction: auction + FIRST_AUCTION_ID,
            bidder: bidder + FIRST_PERSON_ID,
            price,
            channel,
            url,
            date_time,
            extra: self.next_extra(rng, 4 * 8, AVG_BID_BYTES),
        }
    }

    /// The URL of `channel-c`, fixed per seed (the reference's channel
    /// cache): mostly with `&channel_id=<|bit-reversed c|>`, as Java's
    /// `Math.abs(Integer.reverse(c))` prints it.
    fn channel_url(&self, c: u64) -> String {
        let mut rng = Rng::new(mix(self.channels_key, c));
        let url = base_url(&mut rng);
        if rng.below(10) > 0 {
            let id = (c as i32).reverse_bits().wrapping_abs();
            format!("{url}&channel_id={id}")
        } else {
            url
        }
    }

    /// Padding such that `current + extra.len()` averages `average`
    /// (uniform within ±20% of the missing bytes).
    fn next_extra(&self, rng: &mut Rng, current: usize, average: usize) -> String {
        if current > average {
            return String::new();
        }
        let missing = average - current;
        let delta = (missing as f64 * 0.2).round() as usize;
        let len = missing - delta
            + if delta == 0 {
                0
            } else {
                rng.below(2 * delta as u64) as usize
            };
        let offset = rng.below((PAD_BYTES - len) as u64) as usize;
        self.pad[offset..offset + len].to_owned()
    }
}

impl Iterator for Nexmark {
    type Item = NexmarkEvent;

    fn next(&mut self) -> Option<NexmarkEvent> {
        let n = self.next_event;
        if self.config.count.is_some_and(|count| n >= count) {
            return None;
        }
        if let Some(duration) = self.config.duration_ms {
            let end = self
                .config
                .start_time_ms
                .saturating_add(duration.min(i64::MAX as u64) as i64);
            if self.timestamp_for_event(n) >= end {
                return None;
            }
        }
        self.next_event += 1;
        Some(self.event(n))
    }
}
