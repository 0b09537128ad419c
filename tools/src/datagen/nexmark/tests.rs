//! Unit tests of the Nexmark generator: determinism, the 1:3:46 blocks,
//! the id arithmetic and its reference bounds, event time, the JSON shape,
//! and the command line (three files, refused flags).

use std::collections::HashMap;
use std::path::Path;

use super::run as nexmark_run;
use super::*;
use crate::datagen::args::{self, DatagenArgs};
use crate::datagen::{Config, Generator, StreamKind, DEFAULT_START_TIME_MS};

fn config(seed: u64, count: u64) -> NexmarkConfig {
    NexmarkConfig {
        seed,
        count: Some(count),
        ..NexmarkConfig::default()
    }
}

fn events(config: NexmarkConfig) -> Vec<NexmarkEvent> {
    Nexmark::new(config).unwrap().collect()
}

/// The tagged stream, as stdout carries it.
fn render(config: NexmarkConfig) -> Vec<u8> {
    let mut out = Vec::new();
    for event in Nexmark::new(config).unwrap() {
        serde_json::to_writer(&mut out, &event).unwrap();
        out.push(b'\n');
    }
    out
}

#[test]
fn same_seed_gives_identical_bytes_and_another_seed_differs() {
    let a = render(config(7, 3_000));
    assert_eq!(a, render(config(7, 3_000)));
    assert_ne!(a, render(config(8, 3_000)));
    assert_eq!(a.iter().filter(|&&b| b == b'\n').count(), 3_000);
}

#[test]
fn an_event_does_not_depend_on_the_events_before_it() {
    let generator = Nexmark::new(config(5, 1_000)).unwrap();
    let all: Vec<NexmarkEvent> = generator.clone().collect();
    for n in [0, 1, 4, 777, 999] {
        assert_eq!(generator.event(n), all[n as usize]);
    }
}

#[test]
fn every_block_of_50_has_1_person_then_3_auctions_then_46_bids() {
    let all = events(config(2, 5_000));
    for block in all.chunks(50) {
        let kinds: Vec<Kind> = block.iter().map(NexmarkEvent::kind).collect();
        assert_eq!(kinds[0], Kind::Person);
        assert_eq!(kinds[1..4], [Kind::Auction; 3]);
        assert!(kinds[4..].iter().all(|k| *k == Kind::Bid), "{kinds:?}");
        assert_eq!(kinds.len(), 50);
    }
}

#[test]
fn person_and_auction_ids_are_dense_and_increasing() {
    let all = events(config(3, 10_000));
    let (mut person, mut auction) = (FIRST_PERSON_ID, FIRST_AUCTION_ID);
    for e in &all {
        match e {
            NexmarkEvent::Person(p) => {
                assert_eq!(p.id, person);
                person += 1;
            }
            NexmarkEvent::Auction(a) => {
                assert_eq!(a.id, auction);
                auction += 1;
            }
            NexmarkEvent::Bid(_) => {}
        }
    }
    assert_eq!(
        (person - FIRST_PERSON_ID, auction - FIRST_AUCTION_ID),
        (200, 600)
    );
}

/// A person reference must be one of the last `NUM_ACTIVE_PEOPLE` people
/// or at most `ID_LEAD` past the newest; returns whether it exists yet.
fn check_person(id: u64, people: u64) -> bool {
    let lowest = FIRST_PERSON_ID + people.saturating_sub(NUM_ACTIVE_PEOPLE);
    let newest = FIRST_PERSON_ID + people - 1;
    assert!(
        (lowest..=newest + ID_LEAD).contains(&id),
        "person {id} with {people} people"
    );
    id <= newest
}

#[test]
fn references_stay_within_the_reference_generators_bounds() {
    // 60,000 events: 1,200 people, so the active window slides.
    let all = events(config(4, 60_000));
    let (mut people, mut auctions) = (0u64, 0u64);
    let (mut refs, mut existing) = (0u32, 0u32);
    for e in &all {
        match e {
            NexmarkEvent::Person(_) => people += 1,
            NexmarkEvent::Auction(a) => {
                auctions += 1;
                existing += u32::from(check_person(a.seller, people));
                refs += 1;
            }
            NexmarkEvent::Bid(b) => {
                let newest = FIRST_AUCTION_ID + auctions - 1;
                let lowest = newest
                    .saturating_sub(NUM_IN_FLIGHT_AUCTIONS)
                    .max(FIRST_AUCTION_ID);
                assert!(
                    (lowest..=newest + ID_LEAD).contains(&b.auction),
                    "auction {} with {auctions} auctions",
                    b.auction
                );
                existing += u32::from(b.auction <= newest);
                existing += u32::from(check_person(b.bidder, people));
                refs += 2;
            }
        }
    }
    // Hot ids dominate and exist; the leads are there but rare.
    let share = f64::from(existing) / f64::from(refs);
    assert!((0.9..1.0).contains(&share), "existing share {share}");
}

#[test]
fn hot_ids_are_as_frequent_as_the_ratios_say() {
    let all = events(config(6, 50_000));
    let bids: Vec<&Bid> = all
        .iter()
        .filter_map(|e| match e {
            NexmarkEvent::Bid(b) => Some(b),
            _ => None,
        })
        .collect();
    let mut per_auction: HashMap<u64, usize> = HashMap::new();
    for b in &bids {
        *per_auction.entry(b.auction).or_default() += 1;
    }
    // Half the bids go to the hot auction of the batch: ids ≡ 0 mod 100
    // (relative to the first), 30 of the 3,000 auctions.
    let hot: usize = per_auction
        .iter()
        .filter(|(id, _)| (*id - FIRST_AUCTION_ID).is_multiple_of(100))
        .map(|(_, n)| n)
        .sum();
    let share = hot as f64 / bids.len() as f64;
    assert!((0.48..0.53).contains(&share), "hot auction share {share}");
    let hot_channel = bids
        .iter()
        .filter(|b| !b.channel.starts_with("channel-"))
        .count();
    let share = hot_channel as f64 / bids.len() as f64;
    assert!((0.47..0.53).contains(&share), "hot channel share {share}");
}

#[test]
fn date_time_is_start_plus_i_times_the_delay_and_auctions_expire_later() {
    // Event-time rate, and the offset of event i from the start.
    type Case = (f64, fn(i64) -> i64);
    let cases: [Case; 3] = [
        (10_000.0, |i| i / 10),
        (3.0, |i| i * 1000 / 3),
        (0.5, |i| i * 2000),
    ];
    for (rate, expected) in cases {
        let c = NexmarkConfig {
            events_per_second: rate,
            start_time_ms: 1_000_000,
            ..config(1, 2_000)
        };
        let all = events(c);
        for (i, e) in all.iter().enumerate() {
            assert_eq!(
                e.date_time(),
                1_000_000 + expected(i as i64),
                "rate {rate} i {i}"
            );
            if let NexmarkEvent::Auction(a) = e {
                assert!(a.expires > a.date_time, "{a:?}");
            }
        }
        assert!(all.windows(2).all(|w| w[0].date_time() <= w[1].date_time()));
    }
    // At 10,000 events/s 100 more auctions take 166 ms: lengths average that
    // (uniform in 1..=2 * 166 or 2 * 167).
    let auctions: Vec<i64> = events(config(1, 50_000))
        .iter()
        .filter_map(|e| match e {
            NexmarkEvent::Auction(a) => Some(a.expires - a.date_time),
            _ => None,
        })
        .collect();
    let mean = auctions.iter().sum::<i64>() as f64 / auctions.len() as f64;
    assert!((150.0..185.0).contains(&mean), "mean auction length {mean}");
    assert!(auctions.iter().all(|&l| (1..=334).contains(&l)));
}

/// Asserts the keys of the JSON object `line` appear in this order.
fn assert_fields(line: &str, fields: &[&str]) {
    let at: Vec<usize> = fields
        .iter()
        .map(|f| {
            line.find(&format!("\"{f}\":"))
                .unwrap_or_else(|| panic!("{f} in {line}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "order in {line}");
    let value: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(value.as_object().unwrap().len(), fields.len(), "{line}");
}

#[test]
fn json_values_have_the_nexmark_fields_in_order() {
    let all = events(config(9, 50));
    let json = |e: &NexmarkEvent| serde_json::to_string(&e.value()).unwrap();
    assert_fields(
        &json(&all[0]),
        &[
            "id",
            "name",
            "email_address",
            "credit_card",
            "city",
            "state",
            "date_time",
            "extra",
        ],
    );
    assert_fields(
        &json(&all[1]),
        &[
            "id",
            "item_name",
            "description",
            "initial_bid",
            "reserve",
            "date_time",
            "expires",
            "seller",
            "category",
            "extra",
        ],
    );
    assert_fields(
        &json(&all[4]),
        &[
            "auction",
            "bidder",
            "price",
            "channel",
            "url",
            "date_time",
            "extra",
        ],
    );
    let tagged = serde_json::to_string(&all[4]).unwrap();
    assert!(tagged.starts_with("{\"bid\":{\"auction\":"), "{tagged}");
    let value: serde_json::Value = serde_json::from_str(&json(&all[0])).unwrap();
    assert_eq!(value["date_time"], serde_json::json!(DEFAULT_START_TIME_MS));
}

#[test]
fn values_follow_the_model_and_sizes_average_out() {
    let all = events(config(10, 20_000));
    let mut channel_urls: HashMap<&str, &str> = HashMap::new();
    let (mut bid_bytes, mut bids) = (0usize, 0usize);
    for e in &all {
        match e {
            NexmarkEvent::Person(p) => {
                assert_eq!(p.credit_card.len(), 19);
                assert!(p.email_address.ends_with(".com") && p.email_address.contains('@'));
                let size = 8 + p.name.len() + p.email_address.len() + 19 + p.city.len() + 2;
                assert!((160..=240).contains(&(size + p.extra.len())), "{p:?}");
            }
            NexmarkEvent::Auction(a) => {
                assert!(
                    (FIRST_CATEGORY_ID..FIRST_CATEGORY_ID + NUM_CATEGORIES).contains(&a.category)
                );
                assert!((100..=100_000_000).contains(&a.initial_bid));
                assert!(a.reserve > a.initial_bid);
                assert!(a.item_name.len() < 20 && a.description.len() < 100);
            }
            NexmarkEvent::Bid(b) => {
                assert!(b.url.starts_with("https://www.nexmark.com/"));
                let url = channel_urls
                    .entry(b.channel.as_str())
                    .or_insert(b.url.as_str());
                assert_eq!(*url, b.url, "one URL per channel");
                bid_bytes += 32 + b.extra.len();
                bids += 1;
            }
        }
    }
    let mean = bid_bytes as f64 / bids as f64;
    assert!((98.0..102.0).contains(&mean), "mean bid size {mean}");
    assert!(channel_urls.len() > 1_000, "many channels");
}

#[test]
fn duration_bounds_event_time() {
    let c = NexmarkConfig {
        count: None,
        duration_ms: Some(1_000),
        ..NexmarkConfig::default()
    };
    let all = events(c);
    assert_eq!(all.len(), 10_000);
    assert!(all
        .iter()
        .all(|e| e.date_time() < DEFAULT_START_TIME_MS + 1_000));
}

fn cli(argv: &[&str]) -> DatagenArgs {
    let mut full = vec!["kappa-datagen", "nexmark"];
    full.extend_from_slice(argv);
    DatagenArgs::parse_from_cli(full).unwrap()
}

fn read(dir: &Path, kind: Kind) -> String {
    std::fs::read_to_string(dir.join(format!("{}.ndjson", kind.name()))).unwrap()
}

#[test]
fn the_command_writes_three_files_whose_lines_add_up_to_count() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for dir in [&a, &b] {
        let args = cli(&[
            "--count",
            "1234",
            "--seed",
            "3",
            "--out-dir",
            dir.to_str().unwrap(),
        ]);
        assert_eq!(args::run(&args).unwrap(), 1234);
    }
    let mut lines = 0;
    for (kind, expected) in [(Kind::Person, 25), (Kind::Auction, 75), (Kind::Bid, 1134)] {
        let text = read(&a, kind);
        assert_eq!(text, read(&b, kind), "{kind:?} is reproducible");
        assert_eq!(text.lines().count(), expected, "{kind:?}");
        lines += text.lines().count();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        match kind {
            Kind::Bid => assert!(first["auction"].as_u64().unwrap() >= FIRST_AUCTION_ID),
            _ => assert_eq!(first["id"], serde_json::json!(1000), "{kind:?}"),
        }
    }
    assert_eq!(lines, 1234);

    let env = tmp.path().join("env");
    let args = cli(&[
        "--count",
        "60",
        "--envelope",
        "--out-dir",
        env.to_str().unwrap(),
    ]);
    args::run(&args).unwrap();
    let bid = read(&env, Kind::Bid);
    let line: serde_json::Value = serde_json::from_str(bid.lines().next().unwrap()).unwrap();
    assert_eq!(
        line["key"],
        serde_json::json!(line["value"]["auction"].to_string())
    );
    assert_eq!(line["timestamp"], line["value"]["date_time"]);
    assert_eq!(line["timestamp"], serde_json::json!(DEFAULT_START_TIME_MS));
}

#[test]
fn the_command_refuses_flags_that_do_not_apply() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_str().unwrap();
    for (argv, needle) in [
        (vec!["--keys", "1000"], "--keys does not apply"),
        (
            vec!["--late-fraction", "0"],
            "--late-fraction does not apply",
        ),
        (
            vec!["--time-format", "epoch-ms"],
            "--time-format does not apply",
        ),
        (vec!["--out", "x.ndjson"], "--out-dir"),
        (vec!["--envelope"], "--envelope needs --out-dir"),
        (
            vec!["--event-rate", "0", "--out-dir", dir],
            "--event-rate must be > 0",
        ),
    ] {
        let err = nexmark_run::config(&cli(&argv)).unwrap_err().to_string();
        assert!(err.contains(needle), "{argv:?}: {err}");
    }
    let purchases =
        DatagenArgs::parse_from_cli(["kappa-datagen", "purchases", "--out-dir", dir]).unwrap();
    let err = args::run(&purchases).unwrap_err().to_string();
    assert!(err.contains("for nexmark"), "{err}");
    // The other streams still need --topic with --produce (checked before connecting).
    let produce =
        DatagenArgs::parse_from_cli(["kappa-datagen", "iot", "--produce", "http://127.0.0.1:1"])
            .unwrap();
    assert!(args::run(&produce).is_err());
    assert!(nexmark_run::config(&cli(&["--produce", "http://127.0.0.1:1"])).is_ok());
    let nexmark_stream = Config {
        stream: StreamKind::Nexmark,
        ..Config::default()
    };
    assert!(Generator::new(nexmark_stream).is_err());
}
