//! The Nexmark event types: [`Person`], [`Auction`], [`Bid`], and the
//! [`NexmarkEvent`] that holds one of them. Field names and order are the
//! JSON's: snake_case, times as ms since the epoch, prices in cents.

use serde::Serialize;

use super::{AUCTION_PROPORTION, PERSON_PROPORTION, TOTAL_PROPORTION};

/// The three kinds of Nexmark event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A new person (account).
    Person,
    /// A new auction.
    Auction,
    /// A bid on an auction.
    Bid,
}

impl Kind {
    /// All kinds, in the order of [`Kind::index`].
    pub const ALL: [Kind; 3] = [Kind::Person, Kind::Auction, Kind::Bid];

    /// The kind of event number `n`.
    pub fn of_event(n: u64) -> Kind {
        let rem = n % TOTAL_PROPORTION;
        if rem < PERSON_PROPORTION {
            Kind::Person
        } else if rem < PERSON_PROPORTION + AUCTION_PROPORTION {
            Kind::Auction
        } else {
            Kind::Bid
        }
    }

    /// `person`, `auction` or `bid`: file stem, topic name and JSON tag.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Person => "person",
            Kind::Auction => "auction",
            Kind::Bid => "bid",
        }
    }

    /// Position in [`Kind::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// A person: someone who sells or bids.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Person {
    /// Person id, dense from [`super::FIRST_PERSON_ID`].
    pub id: u64,
    /// First and last name.
    pub name: String,
    /// A random address `xxx@yyy.com`.
    pub email_address: String,
    /// Four groups of four digits.
    pub credit_card: String,
    /// A US city.
    pub city: &'static str,
    /// A US state (not necessarily the city's).
    pub state: &'static str,
    /// Event time, ms since the epoch.
    pub date_time: i64,
    /// Padding towards the average size.
    pub extra: String,
}

/// An auction of one item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Auction {
    /// Auction id, dense from [`super::FIRST_AUCTION_ID`].
    pub id: u64,
    /// Item name.
    pub item_name: String,
    /// Item description.
    pub description: String,
    /// Starting price, cents.
    pub initial_bid: u64,
    /// Reserve price (above `initial_bid`), cents.
    pub reserve: u64,
    /// Event time, ms since the epoch.
    pub date_time: i64,
    /// End of the auction, ms since the epoch (after `date_time`).
    pub expires: i64,
    /// The seller's person id.
    pub seller: u64,
    /// Category id.
    pub category: u64,
    /// Padding towards the average size.
    pub extra: String,
}

/// A bid on an auction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bid {
    /// The auction's id.
    pub auction: u64,
    /// The bidder's person id.
    pub bidder: u64,
    /// Price, cents.
    pub price: u64,
    /// Channel the bid came through.
    pub channel: String,
    /// URL of the bid.
    pub url: String,
    /// Event time, ms since the epoch.
    pub date_time: i64,
    /// Padding towards the average size.
    pub extra: String,
}

/// One Nexmark event; serialized tagged, e.g. `{"bid":{...}}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NexmarkEvent {
    /// A person.
    Person(Person),
    /// An auction.
    Auction(Auction),
    /// A bid.
    Bid(Bid),
}

/// The bare JSON value of a [`NexmarkEvent`] (no kind tag).
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(untagged)]
pub enum EventValue<'a> {
    /// A person's fields.
    Person(&'a Person),
    /// An auction's fields.
    Auction(&'a Auction),
    /// A bid's fields.
    Bid(&'a Bid),
}

impl NexmarkEvent {
    /// Person, auction or bid.
    pub fn kind(&self) -> Kind {
        match self {
            NexmarkEvent::Person(_) => Kind::Person,
            NexmarkEvent::Auction(_) => Kind::Auction,
            NexmarkEvent::Bid(_) => Kind::Bid,
        }
    }

    /// The record key: the person's id, the auction's id, the bid's auction.
    pub fn key(&self) -> u64 {
        match self {
            NexmarkEvent::Person(p) => p.id,
            NexmarkEvent::Auction(a) => a.id,
            NexmarkEvent::Bid(b) => b.auction,
        }
    }

    /// Event time, ms since the epoch: also the record timestamp.
    pub fn date_time(&self) -> i64 {
        match self {
            NexmarkEvent::Person(p) => p.date_time,
            NexmarkEvent::Auction(a) => a.date_time,
            NexmarkEvent::Bid(b) => b.date_time,
        }
    }

    /// The event's fields without the kind tag.
    pub fn value(&self) -> EventValue<'_> {
        match self {
            NexmarkEvent::Person(p) => EventValue::Person(p),
            NexmarkEvent::Auction(a) => EventValue::Auction(a),
            NexmarkEvent::Bid(b) => EventValue::Bid(b),
        }
    }
}
