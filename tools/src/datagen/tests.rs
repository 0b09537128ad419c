//! Unit tests of the generator: determinism, the requested fractions, the
//! disorder bound, skew and the shape of each stream.

use std::collections::{HashMap, HashSet};

use super::output::{self, LineFormat};
use super::*;

fn config(stream: StreamKind, seed: u64, count: u64) -> Config {
    Config {
        stream,
        seed,
        count: Some(count),
        ..Config::default()
    }
}

fn render(config: &Config) -> Vec<u8> {
    let mut out = Vec::new();
    for event in Generator::new(config.clone()).unwrap() {
        output::write_line(&mut out, &event, config.time_format, LineFormat::Value).unwrap();
    }
    out
}

fn events(config: Config) -> Vec<Event> {
    Generator::new(config).unwrap().collect()
}

fn noisy(stream: StreamKind, seed: u64) -> Config {
    Config {
        out_of_order_ms: 5_000,
        late_fraction: 0.05,
        lateness_ms: 60_000,
        duplicate_fraction: 0.03,
        high_value_fraction: 0.02,
        ..config(stream, seed, 20_000)
    }
}

#[test]
fn same_seed_gives_identical_bytes_and_another_seed_differs() {
    for stream in [StreamKind::Purchases, StreamKind::Clicks, StreamKind::Iot] {
        let mut c = noisy(stream, 7);
        c.count = Some(2_000);
        let a = render(&c);
        assert_eq!(a, render(&c), "{stream:?}");
        c.seed = 8;
        assert_ne!(a, render(&c), "{stream:?}");
        assert_eq!(a.iter().filter(|&&b| b == b'\n').count(), 2_000);
    }
}

#[test]
fn fractions_of_late_duplicate_and_high_value_events_are_as_asked() {
    let all = events(noisy(StreamKind::Purchases, 3));
    assert_eq!(all.len(), 20_000);
    let share = |n: usize, of: usize| n as f64 / of as f64;
    let late = all.iter().filter(|e| e.arrival == Arrival::Late).count();
    let dups = all
        .iter()
        .filter(|e| e.arrival == Arrival::Duplicate)
        .count();
    assert!((share(late, all.len()) - 0.05).abs() < 0.01, "late {late}");
    assert!((share(dups, all.len()) - 0.03).abs() < 0.01, "dups {dups}");

    let amount = |e: &Event| field(e, "amount").as_f64().unwrap();
    let purchases: Vec<&Event> = all
        .iter()
        .filter(|e| e.arrival != Arrival::Duplicate && field(e, "event_type") == "purchase")
        .collect();
    let high = purchases.iter().filter(|e| amount(e) > 100_000.0).count();
    assert!(
        (share(high, purchases.len()) - 0.02).abs() < 0.01,
        "{high} of {}",
        purchases.len()
    );
    // Only purchases are ever high value.
    assert!(all
        .iter()
        .filter(|e| amount(e) > 100_000.0)
        .all(|e| field(e, "event_type") == "purchase"));
}

fn field<'a>(e: &'a Event, name: &str) -> &'a serde_json::Value {
    &e.fields.iter().find(|(n, _)| *n == name).unwrap().1
}

#[test]
fn duplicates_repeat_an_earlier_event_exactly() {
    let all = events(noisy(StreamKind::Iot, 5));
    let mut seen: HashMap<&str, &Event> = HashMap::new();
    for e in &all {
        match e.arrival {
            Arrival::Duplicate => {
                let first = seen[e.event_id.as_str()];
                assert_eq!(
                    (&first.fields, first.event_time_ms),
                    (&e.fields, e.event_time_ms)
                );
            }
            _ => assert!(seen.insert(&e.event_id, e).is_none(), "ids are unique"),
        }
    }
}

#[test]
fn disorder_stays_within_the_bound_and_late_events_are_beyond_lateness() {
    for stream in [StreamKind::Purchases, StreamKind::Clicks, StreamKind::Iot] {
        let c = noisy(stream, 11);
        let mut newest = i64::MIN;
        let mut max_lag = 0;
        for e in events(c.clone()) {
            let lag = newest.saturating_sub(e.event_time_ms);
            match e.arrival {
                Arrival::OnTime => {
                    assert!(lag <= c.out_of_order_ms as i64, "{stream:?}: lag {lag}");
                    max_lag = max_lag.max(lag);
                }
                Arrival::Late => assert!(lag > c.lateness_ms as i64, "{stream:?}: late lag {lag}"),
                Arrival::Duplicate => {}
            }
            newest = newest.max(e.event_time_ms);
        }
        assert!(
            max_lag > 1_000,
            "{stream:?}: disorder is really there ({max_lag})"
        );
    }
}

#[test]
fn without_disorder_event_time_never_goes_backwards() {
    let all = events(config(StreamKind::Clicks, 2, 5_000));
    assert!(all
        .windows(2)
        .all(|w| w[0].event_time_ms <= w[1].event_time_ms));
    assert_eq!(all[0].event_time_ms, DEFAULT_START_TIME_MS);
}

#[test]
fn zipf_skew_makes_the_top_key_far_more_frequent_than_uniform() {
    let top_share = |skew: f64| {
        let mut counts: HashMap<String, usize> = HashMap::new();
        let c = Config {
            skew,
            ..config(StreamKind::Purchases, 9, 20_000)
        };
        for e in events(c) {
            *counts.entry(e.key).or_default() += 1;
        }
        *counts.values().max().unwrap() as f64 / 20_000.0
    };
    let (uniform, zipf) = (top_share(0.0), top_share(1.2));
    assert!(uniform < 0.005, "uniform top share {uniform}");
    assert!(zipf > 10.0 * uniform, "zipf {zipf} vs uniform {uniform}");
}

#[test]
fn purchases_fit_the_user_events_stream() {
    let c = Config {
        time_format: TimeFormat::Rfc3339,
        ..config(StreamKind::Purchases, 4, 500)
    };
    for line in String::from_utf8(render(&c)).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v["user_id"].as_str().unwrap().starts_with("user-"));
        assert!(["view", "cart", "purchase"].contains(&v["event_type"].as_str().unwrap()));
        let amount = v["amount"].as_f64().unwrap();
        assert!(amount > 0.0 && amount < 1e8, "DECIMAL(10,2): {amount}");
        assert_eq!((amount * 100.0).round() / 100.0, amount, "two decimals");
        assert!(kappa_processor::expr::parse_timestamp(&v["event_time"]).is_some());
    }
    let epoch = Config {
        time_format: TimeFormat::EpochMs,
        ..c
    };
    let first = render(&epoch);
    let v: serde_json::Value =
        serde_json::from_slice(first.split(|&b| b == b'\n').next().unwrap()).unwrap();
    assert_eq!(v["event_time"], serde_json::json!(DEFAULT_START_TIME_MS));
}

#[test]
fn clicks_come_in_sessions_separated_by_the_gap() {
    let c = Config {
        keys: 50,
        session_gap_ms: 30_000,
        ..config(StreamKind::Clicks, 6, 10_000)
    };
    // Per user: (session id, first and last event time) in order.
    let mut sessions: HashMap<String, Vec<(String, i64, i64)>> = HashMap::new();
    for e in events(c) {
        let sid = field(&e, "session_id").as_str().unwrap().to_owned();
        let list = sessions.entry(e.key.clone()).or_default();
        match list.last_mut() {
            Some((id, _, last)) if *id == sid => *last = e.event_time_ms,
            _ => list.push((sid, e.event_time_ms, e.event_time_ms)),
        }
    }
    let mut multi_view = 0;
    for list in sessions.values() {
        let ids: HashSet<&String> = list.iter().map(|(id, _, _)| id).collect();
        assert_eq!(
            ids.len(),
            list.len(),
            "a session's views are contiguous per user"
        );
        for w in list.windows(2) {
            assert!(w[1].1 - w[0].2 >= 30_000, "gap between sessions {w:?}");
        }
        multi_view += list.iter().filter(|(_, a, b)| b > a).count();
    }
    assert!(
        multi_view > 100,
        "sessions have several views ({multi_view})"
    );
}

#[test]
fn iot_readings_drift_and_sometimes_spike() {
    let all = events(Config {
        keys: 20,
        ..config(StreamKind::Iot, 12, 20_000)
    });
    let temps: Vec<f64> = all
        .iter()
        .map(|e| field(e, "temperature").as_f64().unwrap())
        .collect();
    assert!(temps.iter().any(|&t| t > 50.0), "a spike");
    assert!(temps.iter().all(|&t| (-25.0..90.0).contains(&t)));
    for e in &all {
        let battery = field(e, "battery").as_f64().unwrap();
        let humidity = field(e, "humidity").as_f64().unwrap();
        assert!((0.0..=100.0).contains(&battery) && (0.0..=100.0).contains(&humidity));
        assert!(e.key.starts_with("sensor-"));
    }
}

#[test]
fn duration_bounds_event_time() {
    let c = Config {
        count: None,
        duration_ms: Some(10_000),
        events_per_second: 100.0,
        ..Config::default()
    };
    let all = events(c);
    assert!((800..1200).contains(&all.len()), "{}", all.len());
    let end = DEFAULT_START_TIME_MS + 10_000;
    assert!(all.iter().all(|e| e.event_time_ms < end));
}

#[test]
fn envelope_lines_carry_key_value_and_timestamp() {
    let e = events(config(StreamKind::Iot, 1, 1)).remove(0);
    let mut out = Vec::new();
    output::write_line(&mut out, &e, TimeFormat::EpochMs, LineFormat::Envelope).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["key"], serde_json::json!(e.key));
    assert_eq!(v["timestamp"], serde_json::json!(e.event_time_ms));
    assert_eq!(v["value"]["device_id"], serde_json::json!(e.key));
    assert_eq!(v["value"]["event_id"], serde_json::json!(e.event_id));
}

#[test]
fn bad_configs_are_rejected() {
    let ok = Config::default();
    assert!(ok.validate().is_ok());
    for bad in [
        Config {
            late_fraction: 1.5,
            ..ok.clone()
        },
        Config {
            late_fraction: 0.6,
            duplicate_fraction: 0.6,
            ..ok.clone()
        },
        Config {
            keys: 0,
            ..ok.clone()
        },
        Config {
            skew: -1.0,
            ..ok.clone()
        },
        Config {
            count: None,
            ..ok.clone()
        },
    ] {
        assert!(Generator::new(bad).is_err());
    }
    assert_eq!(args::parse_duration_ms("90s"), Ok(90_000));
    assert_eq!(args::parse_duration_ms("2h"), Ok(7_200_000));
    assert_eq!(args::parse_duration_ms("15"), Ok(15_000));
    assert!(args::parse_duration_ms("5 parsecs").is_err());
    assert_eq!(
        args::parse_start_time("2026-01-01T00:00:00Z").unwrap(),
        DEFAULT_START_TIME_MS
    );
}
