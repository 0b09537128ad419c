//! Adaptive commit (issue 14): a running version commits as soon as a poll
//! has caught up with its input, so at low load a record is visible right
//! after its append — here with a commit interval of ten minutes, which
//! the commit would otherwise wait for.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::time::Duration;

use common::{Harness, Step};
use kappa_log::ManualTime;
use kappa_processor::dsl::{self, Pipeline};
use kappa_processor::expr::Expr;
use kappa_processor::plan::Plan;
use kappa_processor::runner::RunOptions;
use serde_json::json;

/// A click on `page`, for topic `clicks` (one partition).
fn click(page: &str) -> Step {
    Step::Produce {
        topic: "clicks".into(),
        partition: Some(0),
        key: None,
        value: json!({ "page": page }),
        timestamp: None,
    }
}

/// Clicks counted per page, into a view.
fn per_page() -> Plan {
    Pipeline::from_topic("clicks")
        .key_by([("page", Expr::field("page"))])
        .aggregate([dsl::count("n")])
        .to_view("per_page")
}

#[test]
fn a_caught_up_version_commits_at_once_not_at_the_interval() {
    let h = Harness::new();
    h.create_topic("clicks", 1);
    let plan = per_page();
    let options = RunOptions {
        commit_interval_ms: 600_000,
        ..RunOptions::default()
    };
    let rt = h.open_runtime(&plan, options);
    let progress = rt.progress();
    let stop = rt.stop_signal();
    let worker = std::thread::spawn(move || rt.run());
    for (i, page) in ["a", "b", "a"].iter().enumerate() {
        h.produce(&click(page));
        let want = i as u64 + 1;
        assert!(
            progress.wait_committed(Duration::from_secs(60), |o| o == [want]),
            "record {want} was not committed while the input was idle"
        );
    }
    stop.stop();
    worker.join().unwrap().unwrap();
    let rows = h.view_rows(&plan);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["row"]["n"], 2);
}

/// Options under which [`Runtime::commit_due`] tells the two intervals
/// apart: due at once when caught up (a commit interval of 0 ms), after an
/// hour while working through a backlog.
///
/// [`Runtime::commit_due`]: kappa_processor::runner::Runtime::commit_due
fn intervals_told_apart() -> RunOptions {
    RunOptions {
        commit_interval_ms: 0,
        catch_up_commit_interval_ms: 3_600_000,
        ..RunOptions::default()
    }
}

/// While a version works through a backlog (a poll stopped before the end
/// of its input) it commits at the longer catch-up interval; once caught
/// up, at its own.
#[test]
fn a_version_with_a_backlog_commits_at_the_catch_up_interval() {
    let h = Harness::new();
    h.create_topic("clicks", 1);
    for page in ["a", "b", "c", "d"] {
        h.produce(&click(page));
    }
    let plan = per_page();
    let options = RunOptions {
        max_poll_records: 1,
        ..intervals_told_apart()
    };
    let mut rt = h.open_runtime(&plan, options);
    rt.poll_once().unwrap();
    assert!(
        !rt.commit_due(),
        "a backlog waits for the catch-up interval"
    );
    while rt.positions() != [4] {
        rt.poll_once().unwrap();
    }
    rt.poll_once().unwrap();
    assert!(
        rt.commit_due(),
        "caught up: the commit interval (0 ms) applies"
    );
}

/// A version at the live edge of its input — every readable record
/// processed, the newest append held back until the log is complete up to
/// it (its millisecond has not ended, or another append is in flight) —
/// is caught up: it commits at once, and at its own interval, not at the
/// catch-up interval of a backlog. Under a steady load of small appends
/// something is nearly always held back, and a version that took that for
/// a backlog committed once a second: produce → view latency jumped from
/// milliseconds to up to a second (a p99 of 140–311 ms at 100,000
/// events/s in `kappa-bench e2e`).
#[test]
fn a_version_whose_newest_input_is_held_back_is_caught_up() {
    let time = ManualTime::new(1_700_000_000_000);
    let h = Harness::with_time(&time);
    h.create_topic("clicks", 1);
    h.produce(&click("a"));
    time.advance(1);
    // Appended in the current millisecond: not readable yet.
    h.produce(&click("b"));
    let plan = per_page();
    let mut rt = h.open_runtime(&plan, intervals_told_apart());
    assert_eq!(rt.poll_once().unwrap(), 1, "the readable record");
    assert_eq!(rt.positions(), [1], "the newest record is held back");
    assert!(
        rt.caught_up_with_work(),
        "everything readable is processed: commit at once"
    );
    assert!(
        rt.commit_due(),
        "live, not a backlog: the commit interval (0 ms) applies"
    );
    rt.commit().unwrap();
    time.advance(1);
    assert_eq!(
        rt.poll_once().unwrap(),
        1,
        "readable once its millisecond ended"
    );
    assert!(rt.caught_up_with_work());
}

/// A commit with nothing new — no record read, no state, rows, outbox,
/// watermark or log time changed — writes nothing: an idle version does
/// not sync its store's WAL every interval. Shown with the store's writes
/// failing: the idle commits succeed, the first with new input fails.
#[test]
fn an_idle_commit_writes_nothing() {
    let h = Harness::new();
    h.create_topic("clicks", 1);
    h.produce(&click("a"));
    let plan = per_page();
    let mut rt = h.open_runtime(&plan, RunOptions::default());
    // A batch is read once the log is complete up to its append time.
    while rt.positions() != [1] {
        rt.poll_once().unwrap();
    }
    rt.commit().unwrap();
    h.store.fail_writes(Some("the disk is full".into()));
    for _ in 0..3 {
        rt.poll_once().unwrap();
        rt.commit().expect("an idle commit writes nothing");
    }
    h.produce(&click("b"));
    while rt.positions() != [2] {
        rt.poll_once().unwrap();
    }
    assert!(rt.commit().is_err(), "new input is written");
    // Its state went with the failed write: the same runtime never
    // commits again, even once the disk heals.
    h.store.fail_writes(None);
    let again = rt
        .commit()
        .expect_err("a runtime whose commit failed does not commit");
    assert!(
        again.to_string().contains("the disk is full"),
        "the error names the first failure: {again}"
    );
    // As the server does after a failed commit: a new runtime, from the
    // last commit.
    drop(rt);
    let mut rt = h.open_runtime(&plan, RunOptions::default());
    h.run_to_end(&mut rt, &plan);
    assert_eq!(h.view_rows(&plan).len(), 2);
}

/// An idle version waiting for input ends as soon as it is stopped or
/// abandoned (a DROP, a replaced version, a shutdown), not when its wait
/// would have timed out — here an hour.
#[test]
fn an_idle_version_ends_at_once_when_stopped_or_abandoned() {
    for abandon in [false, true] {
        let h = Harness::new();
        h.create_topic("clicks", 1);
        h.produce(&click("a"));
        let plan = per_page();
        let options = RunOptions {
            commit_interval_ms: 3_600_000,
            idle_wait_max_ms: 3_600_000,
            ..RunOptions::default()
        };
        let rt = h.open_runtime(&plan, options);
        let progress = rt.progress();
        let signal = rt.stop_signal();
        let (done_tx, done) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || done_tx.send(rt.run()));
        // Caught up and committed: the version now waits for input.
        assert!(progress.wait_committed(Duration::from_secs(60), |o| o == [1]));
        if abandon {
            signal.abandon();
        } else {
            signal.stop();
        }
        let ended = done.recv_timeout(Duration::from_secs(60));
        assert!(
            matches!(ended, Ok(Ok(()))),
            "abandon {abandon}: the version did not end at once: {ended:?}"
        );
        worker.join().unwrap().unwrap();
    }
}
