//! Tests of the processor benchmark: the generated events, the case
//! syntax, the report's formats, the plans, and a small log run end to end.

use std::time::Duration;

use super::args::*;
use super::generate::*;
use super::report::*;
use super::run::*;
use super::suite::*;
use super::*;
use crate::bench::keys::Rng;
use crate::bench::report::thousands;

fn data(events: u64) -> DataArgs {
    DataArgs {
        events,
        keys: 1000,
        value_bytes: 100,
        disorder_ms: 20,
        seed: 7,
    }
}

#[test]
fn events_are_valid_json_of_the_requested_size() {
    let d = data(100);
    let mut rng = Rng::new(d.seed);
    for i in 0..100 {
        let (user, amount, ts) = event_fields(&mut rng, i, &d);
        let s = event_json(user, amount, ts, d.value_bytes, &mut rng);
        assert_eq!(s.len(), 100, "{s}");
        let f: UsedFields = serde_json::from_str(&s).unwrap();
        assert_eq!(f.user, format!("u{user}"));
        assert!((1..=100).contains(&f.amount));
        assert!(ts <= FIRST_EVENT_MS + i as i64 && ts >= FIRST_EVENT_MS + i as i64 - 20);
        assert!(user < 1000);
    }
}

#[test]
fn cases_parse() {
    assert_eq!(
        parse_case("tumbling:10000").unwrap(),
        (Scenario::Tumbling, Some(10_000))
    );
    assert_eq!(
        parse_case("json-fields").unwrap(),
        (Scenario::JsonFields, None)
    );
    assert!(parse_case("nope").is_err());
    assert!(parse_case("hopping:x").is_err());
}

#[test]
fn formats() {
    use crate::bench::report::compact;
    assert_eq!(thousands(1_234_567.4), "1,234,567");
    assert_eq!(mb(12_345_678), "12");
    assert_eq!(compact(2_345_678.0), "2.35 M");
    let s = summarize([3.0, 1.0, 2.0]);
    assert_eq!((s.median, s.min, s.max), (2.0, 1.0, 3.0));
    assert_eq!(duration_text(300), "5 min");
    assert_eq!(duration_text(90), "90 s");
}

#[test]
fn plans_validate() {
    for s in [
        Scenario::Tumbling,
        Scenario::TumblingWhere,
        Scenario::Hopping,
        Scenario::Session,
    ] {
        plan(s, 20, Duration::from_secs(300)).validate().unwrap();
    }
}

#[test]
fn a_small_log_runs_to_the_end() {
    let dir = std::env::temp_dir().join(format!("kpb-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let g = generate(&dir, &data(3000)).unwrap();
    assert_eq!(g.events, 3000);
    for scenario in [
        Scenario::LogRead,
        Scenario::JsonValue,
        Scenario::JsonFields,
        Scenario::DecodeFields,
        Scenario::DecodeFieldsSerde,
        Scenario::Tumbling,
        Scenario::TumblingWhere,
        Scenario::Hopping,
        Scenario::Session,
    ] {
        let r = run(&RunArgs {
            dir: dir.clone(),
            scenario,
            cache_entries: Some(100),
            runtime: RuntimeArgs {
                session_gap_secs: 1,
                commit_interval_ms: None,
                max_poll_records: Some(700),
            },
            keep_state: false,
            json: true,
        })
        .unwrap();
        assert_eq!(r.events, 3000, "{scenario:?}");
        assert_eq!((r.late, r.invalid), (0, 0), "{scenario:?}");
        if !scenario.is_baseline() {
            assert!(r.output_rows > 0 && r.state_dir_bytes > 0, "{scenario:?}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
