//! View queries (point, prefix, a key's windows in a range, paging, "as
//! of") and version building blocks (start from latest / a timestamp /
//! explicit offsets into separate column families, progress and lag, stop,
//! drop), and the view host a server runs versions through.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod common;

use std::time::Duration;

use common::{run_steps, Harness, Step};
use kappa_processor::dsl::{self, Pipeline, Tumbling};
use kappa_processor::expr::Expr;
use kappa_processor::host::ViewHost;
use kappa_processor::plan::Plan;
use kappa_processor::runner::{RunOptions, Runtime, StartFrom};
use kappa_processor::state::store::Scope;
use kappa_processor::view::{self, ViewQuery};
use serde_json::json;

fn windowed_plan() -> Plan {
    Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_secs(3600))
        .key_by([("page", Expr::field("page"))])
        .window(Tumbling::of(Duration::from_secs(1)))
        .aggregate([dsl::count("n")])
        .to_view("page_views")
}

/// Clicks per page in hopping windows of 3 s every 1 s.
fn hopping_plan() -> Plan {
    Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .max_out_of_orderness(Duration::from_secs(3600))
        .key_by([("page", Expr::field("page"))])
        .window(dsl::Hopping::of(
            Duration::from_secs(3),
            Duration::from_secs(1),
        ))
        .aggregate([dsl::count("n")])
        .to_view("hops")
}

fn click(page: &str, ts: i64) -> Step {
    Step::Produce {
        topic: "clicks".into(),
        partition: None,
        key: Some(page.into()),
        value: json!({"page": page, "ts": ts}),
        timestamp: Some(ts),
    }
}

#[test]
fn views_answer_point_prefix_window_range_and_pages() {
    let plan = windowed_plan();
    let mut steps = Vec::new();
    for (page, ts) in [
        ("home", 100),
        ("home", 1100),
        ("home", 2100),
        ("help", 50),
        ("about", 10),
        ("home", 2200),
    ] {
        steps.push(click(page, ts));
    }
    let h = run_steps(&plan, &steps, None);
    let scope = Scope {
        name: plan.name.clone(),
        version: 1,
    };
    let q = |query: ViewQuery| view::query(&h.store, &scope, &query, None, 100).unwrap().0;

    let home = q(ViewQuery::Key("home".into()));
    let starts: Vec<i64> = home.iter().map(|r| r.window_start.unwrap()).collect();
    assert_eq!(
        starts,
        vec![0, 1000, 2000],
        "a key's windows, in time order"
    );
    assert_eq!(home[2].row["n"], json!(2));

    let middle = q(ViewQuery::KeyWindows {
        key: "home".into(),
        from: 1000,
        to: 2000,
    });
    assert_eq!(middle.len(), 1);
    assert_eq!(middle[0].window_start, Some(1000));

    let prefixed: Vec<String> = q(ViewQuery::Prefix("h".into()))
        .into_iter()
        .map(|r| r.key)
        .collect();
    assert_eq!(prefixed, vec!["help", "home", "home", "home"]);
    assert!(
        q(ViewQuery::Key("ho".into())).is_empty(),
        "a point lookup is not a prefix match"
    );

    // Paging through everything two rows at a time returns each row once.
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (rows, next) =
            view::query(&h.store, &scope, &ViewQuery::All, cursor.as_deref(), 2).unwrap();
        seen.extend(rows.into_iter().map(|r| (r.key, r.window_start)));
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    assert_eq!(seen.len(), 5);
    let as_of = view::as_of(&h.store, &scope, 1).unwrap();
    assert_eq!(as_of.offsets, vec![6]);
    assert_eq!(as_of.watermark, Some(2200 - 3_600_000));
}

fn produce_all(h: &Harness, steps: &[Step]) {
    for s in steps {
        h.produce(s);
    }
}

#[test]
fn versions_start_where_asked_into_their_own_state() {
    let plan = windowed_plan();
    let h = Harness::new();
    h.create_topic("clicks", 1);
    produce_all(&h, &[click("a", 100), click("a", 200), click("a", 5000)]);
    let open = |version, start| {
        Runtime::open(
            plan.clone(),
            version,
            h.log.clone(),
            h.store.clone(),
            RunOptions {
                start,
                ..RunOptions::default()
            },
        )
        .unwrap()
    };
    let mut v1 = open(1, StartFrom::Earliest);
    let mut v2 = open(2, StartFrom::Latest);
    let mut v3 = open(3, StartFrom::Timestamp(150));
    let mut v4 = open(4, StartFrom::Offsets(vec![2]));
    for rt in [&mut v1, &mut v2, &mut v3, &mut v4] {
        h.run_to_end(rt, &plan);
    }
    let rows = |version| {
        let scope = Scope {
            name: plan.name.clone(),
            version,
        };
        view::query(&h.store, &scope, &ViewQuery::All, None, 100)
            .unwrap()
            .0
            .len()
    };
    assert_eq!((rows(1), rows(2), rows(3), rows(4)), (2, 0, 2, 1));
    // Dropping a version removes its state; the others are untouched.
    drop(v3);
    h.store
        .drop_scope(&Scope {
            name: plan.name.clone(),
            version: 3,
        })
        .unwrap();
    assert!(!h.store.has(&Scope {
        name: plan.name.clone(),
        version: 3
    }));
    assert_eq!(rows(1), 2);
}

#[test]
fn a_running_version_reports_progress_and_lag_and_stops_cleanly() {
    let plan = windowed_plan();
    let h = Harness::new();
    h.create_topic("clicks", 1);
    produce_all(&h, &(0..50).map(|i| click("p", i * 10)).collect::<Vec<_>>());
    let host = ViewHost::open(
        &h.dir.path().join("views"),
        &h.dir.path().join("no-shared-store"),
        h.log.clone(),
    )
    .unwrap();
    let running = host
        .start_fresh(plan.clone(), 1, RunOptions::default())
        .unwrap();
    // Woken by the processor's commits; bounded.
    assert!(running.wait_committed(&[50], Duration::from_secs(30)));
    let lag = running.lag().unwrap();
    assert_eq!(
        (lag[0].committed, lag[0].end, lag[0].lag),
        (50, 50, 0),
        "{lag:?}"
    );
    assert_eq!(running.progress().processed, 50);
    running.stop().unwrap();
    let scope = Scope {
        name: plan.name.clone(),
        version: 1,
    };
    assert_eq!(host.on_disk(), vec![scope.clone()]);
    let reader = host.reader(&scope).expect("the version's store is open");
    assert!(reader.size_bytes() > 0);
    assert_eq!(reader.as_of(1).unwrap().offsets, vec![50]);
    let (rows, _) = reader.rows(&ViewQuery::All, None, 100).unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r.row["n"].as_u64().unwrap())
            .sum::<u64>(),
        50
    );
    drop(reader);
    host.remove(&scope).unwrap();
    assert!(host.on_disk().is_empty() && host.reader(&scope).is_none());
}

/// The change feed of a view carries every row change of each commit once
/// enabled, in commit order; replaying it over an empty map gives the view.
#[test]
fn the_change_feed_replays_to_the_view() {
    use kappa_processor::changes::Since;

    let plan = windowed_plan();
    let h = Harness::new();
    h.create_topic("clicks", 1);
    let mut rt = h.open_runtime(&plan, RunOptions::default());
    let progress = rt.progress();
    assert_eq!(progress.changes.enable(), 1);
    let mut seen = std::collections::BTreeMap::new();
    let mut after = 0;
    for (round, batch) in [
        vec![("home", 100), ("help", 50)],
        vec![("home", 900), ("home", 1100)],
        vec![("about", 1200), ("help", 1999)],
    ]
    .into_iter()
    .enumerate()
    {
        for (page, ts) in batch {
            h.produce(&click(page, ts));
        }
        h.run_to_end(&mut rt, &plan);
        let Since::Changes(changes) = progress.changes.since(after, 1000) else {
            panic!("round {round}: a gap in a fresh feed");
        };
        assert!(
            !changes.is_empty(),
            "round {round}: commits publish changes"
        );
        for c in changes {
            assert_eq!(c.seq, after + 1, "sequence numbers are dense");
            after = c.seq;
            let k = (c.key.clone(), c.window_start);
            match c.row {
                Some(row) => seen.insert(k, row),
                None => seen.remove(&k),
            };
        }
    }
    let from_feed: Vec<serde_json::Value> = seen
        .into_iter()
        .map(|((key, start), row)| json!({"key": key, "window_start": start, "row": row}))
        .collect();
    let from_view: Vec<serde_json::Value> = h
        .view_rows(&plan)
        .into_iter()
        .map(|r| json!({"key": r["key"], "window_start": r["window_start"], "row": r["row"]}))
        .collect();
    assert_eq!(from_feed, from_view);
}

/// With a retention, a window's row is deleted once the watermark passes
/// the window's end plus the retention — for tumbling and hopping views, and
/// after a restart for rows that closed before it.
#[test]
fn rows_are_deleted_after_their_retention() {
    let tumbling = Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .key_by([("page", Expr::field("page"))])
        .window(Tumbling::of(Duration::from_secs(1)))
        .retention(Duration::from_secs(2))
        .aggregate([dsl::count("n")])
        .to_view("kept");
    let hopping = Pipeline::from_topic("clicks")
        .event_time_field("ts")
        .key_by([("page", Expr::field("page"))])
        .window(dsl::Hopping::of(
            Duration::from_secs(2),
            Duration::from_secs(1),
        ))
        .retention(Duration::from_secs(1))
        .aggregate([dsl::count("n")])
        .to_view("hops");
    let starts = |h: &Harness, plan: &Plan| -> Vec<i64> {
        h.view_rows(plan)
            .iter()
            .map(|r| r["window_start"].as_i64().unwrap())
            .collect()
    };
    let mut h = Harness::new();
    h.create_topic("clicks", 1);
    for ts in [100, 1100, 2100] {
        h.produce(&click("home", ts));
    }
    for plan in [&tumbling, &hopping] {
        let mut rt = h.open_runtime(plan, RunOptions::default());
        h.run_to_end(&mut rt, plan);
    }
    // Watermark 2100: tumbling [0,1000) and [1000,2000) closed, kept until
    // 3000 and 4000; hopping [-1000,1000) and [0,2000) closed, kept until
    // 2000 and 3000: the first is gone.
    assert_eq!(starts(&h, &tumbling), vec![0, 1000, 2000]);
    assert_eq!(starts(&h, &hopping), vec![0, 1000, 2000]);

    // After a restart, a later event moves the watermark to 3900.
    h = h.reopen();
    h.produce(&click("home", 3900));
    for plan in [&tumbling, &hopping] {
        let mut rt = h.open_runtime(plan, RunOptions::default());
        h.run_to_end(&mut rt, plan);
    }
    // Tumbling: [0,1000) expired at 3000; [1000,2000) kept until 4000.
    assert_eq!(starts(&h, &tumbling), vec![1000, 2000, 3000]);
    // Hopping: [0,2000) expired at 3000, [1000,3000) closed at 3000 and kept
    // until 4000; open windows [2000,4000), [3000,5000) are computed.
    assert_eq!(starts(&h, &hopping), vec![1000, 2000, 3000]);
}

#[test]
fn pages_of_a_large_hopping_view_hold_every_open_window_once_in_order() {
    // 1,500 groups with a slice each at 0, 1000 and 2000: 4,500 slices,
    // more than one chunk of slices read at a time, so chunk boundaries
    // fall inside a group.
    let plan = hopping_plan();
    let groups = 1500;
    let mut steps = Vec::new();
    for ts in [100, 1100, 2100] {
        for g in 0..groups {
            steps.push(click(&format!("p{g:04}"), ts));
        }
    }
    let h = run_steps(&plan, &steps, None);
    let scope = Scope {
        name: plan.name.clone(),
        version: 1,
    };
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let (rows, next) =
            view::query(&h.store, &scope, &ViewQuery::All, cursor.as_deref(), 700).unwrap();
        seen.extend(rows);
        match next {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    // Every window is open: five per group, counting 1, 2, 3, 2, 1 slices.
    let mut expected = Vec::new();
    for g in 0..groups {
        for (start, n) in [(-2000, 1), (-1000, 2), (0, 3), (1000, 2), (2000, 1)] {
            expected.push((format!("p{g:04}"), start, n));
        }
    }
    let got: Vec<(String, i64, i64)> = seen
        .iter()
        .map(|r| {
            (
                r.key.clone(),
                r.window_start.unwrap(),
                r.row["n"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got.len(), expected.len());
    assert_eq!(got, expected);
    // One page with everything: a chunk boundary splits a group it reads.
    let (all, next) = view::query(&h.store, &scope, &ViewQuery::All, None, 100_000).unwrap();
    assert!(next.is_none());
    assert_eq!(all, seen);
}

/// Every page of `query` under `filter`, following cursors to the end.
fn all_pages(
    h: &Harness,
    scope: &Scope,
    query: &ViewQuery,
    filter: &view::RowFilter,
    limit: usize,
) -> Vec<view::Page> {
    let mut pages = Vec::new();
    let mut cursor: Option<Vec<u8>> = None;
    loop {
        let (page, _) = view::query_page_as_of(
            &h.store,
            scope,
            query,
            filter,
            None,
            cursor.as_deref(),
            limit,
            1,
        )
        .unwrap();
        cursor = page.next_cursor.clone();
        pages.push(page);
        if cursor.is_none() {
            return pages;
        }
    }
}

#[test]
fn window_bounds_filter_inside_the_read_and_the_scan_cap_pages_through_them() {
    let plan = windowed_plan();
    let mut steps = Vec::new();
    for page in ["about", "help", "home", "news"] {
        for ts in [100, 1100, 2100, 3100] {
            steps.push(click(page, ts));
        }
    }
    let h = run_steps(&plan, &steps, None);
    let scope = Scope {
        name: plan.name.clone(),
        version: 1,
    };
    let (all, _) = view::query(&h.store, &scope, &ViewQuery::All, None, 100).unwrap();
    assert_eq!(all.len(), 16);
    let bounds = |from: i64, to: i64| view::TimeRange {
        from_ms: Some(from),
        to_ms: Some(to),
    };
    // WINDOWSTART in [1000, 3000), no key: two windows of each page, in
    // key order, from one read.
    let starts = view::RowFilter {
        window_start: bounds(1000, 3000),
        ..Default::default()
    };
    let pages = all_pages(&h, &scope, &ViewQuery::All, &starts, 100);
    assert_eq!(pages.len(), 1);
    let expected: Vec<_> = all.iter().filter(|r| starts.admits(r)).cloned().collect();
    assert_eq!(expected.len(), 8);
    assert_eq!(pages[0].rows, expected);
    assert_eq!(pages[0].scanned, 16);
    assert!(!pages[0].scan_limited);

    // WINDOWEND bounds, and a limit: a full page's cursor continues after
    // its last row.
    let ends = view::RowFilter {
        window_end: bounds(4000, 4001),
        ..Default::default()
    };
    let pages = all_pages(&h, &scope, &ViewQuery::All, &ends, 3);
    let rows: Vec<_> = pages.iter().flat_map(|p| p.rows.clone()).collect();
    let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
    assert_eq!(keys, ["about", "help", "home", "news"]);
    assert!(rows.iter().all(|r| r.window_start == Some(3000)));
    assert_eq!(pages.len(), 2);
    assert!(
        !pages[0].scan_limited,
        "the first page stopped at its limit"
    );

    // A cap of 5 examined rows: each page examines at most 5, says it was
    // capped, and following the cursors yields the same rows.
    let capped = view::RowFilter {
        max_scanned: Some(5),
        ..starts
    };
    let pages = all_pages(&h, &scope, &ViewQuery::All, &capped, 100);
    assert!(pages.iter().all(|p| p.scanned <= 5));
    assert!(pages[..pages.len() - 1].iter().all(|p| p.scan_limited));
    assert_eq!(pages.iter().map(|p| p.scanned).sum::<usize>(), 16);
    let rows: Vec<_> = pages.into_iter().flat_map(|p| p.rows).collect();
    assert_eq!(rows, expected);

    // A key's windows with a start bound, filtered on the end too.
    let (page, as_of) = view::query_page_as_of(
        &h.store,
        &scope,
        &ViewQuery::Key("home".into()),
        &view::RowFilter {
            window_start: bounds(1000, 4000),
            window_end: bounds(0, 3000),
            max_scanned: None,
        },
        None,
        None,
        100,
        1,
    )
    .unwrap();
    let starts: Vec<_> = page.rows.iter().map(|r| r.window_start).collect();
    assert_eq!(starts, [Some(1000)]);
    assert_eq!(as_of.offsets, vec![16]);
}

#[test]
fn a_capped_filtered_read_pages_through_open_hopping_windows() {
    // Open hopping windows are computed from slices, not stored: the
    // filter and the cap apply to them as to stored rows.
    let plan = hopping_plan();
    let mut steps = Vec::new();
    for ts in [100, 1100, 2100] {
        for g in 0..20 {
            steps.push(click(&format!("p{g:02}"), ts));
        }
    }
    let h = run_steps(&plan, &steps, None);
    let scope = Scope {
        name: plan.name.clone(),
        version: 1,
    };
    let filter = view::RowFilter {
        window_start: view::TimeRange {
            from_ms: Some(0),
            to_ms: Some(1),
        },
        max_scanned: Some(7),
        ..Default::default()
    };
    let pages = all_pages(&h, &scope, &ViewQuery::All, &filter, 1000);
    assert!(pages.iter().all(|p| p.scanned <= 7));
    let got: Vec<(String, i64)> = pages
        .iter()
        .flat_map(|p| &p.rows)
        .map(|r| (r.key.clone(), r.row["n"].as_i64().unwrap()))
        .collect();
    let expected: Vec<(String, i64)> = (0..20).map(|g| (format!("p{g:02}"), 3)).collect();
    assert_eq!(got, expected, "the window [0, 3000) of every group, once");
}

#[test]
fn key_lists_ranges_and_row_tests_read_exactly_their_rows_page_by_page() {
    let plan = windowed_plan();
    let mut steps = Vec::new();
    for page in ["about", "help", "home", "news", "shop"] {
        for ts in [100, 1100, 2100] {
            steps.push(click(page, ts));
        }
    }
    let h = run_steps(&plan, &steps, None);
    let scope = Scope {
        name: plan.name.clone(),
        version: 1,
    };
    let (all, _) = view::query(&h.store, &scope, &ViewQuery::All, None, 100).unwrap();
    assert_eq!(all.len(), 15);
    let no_filter = view::RowFilter::default();
    let read = |query: &ViewQuery, limit: usize| -> Vec<view::ViewRow> {
        all_pages(&h, &scope, query, &no_filter, limit)
            .into_iter()
            .flat_map(|p| p.rows)
            .collect()
    };
    let naive = |keep: &dyn Fn(&str) -> bool| -> Vec<view::ViewRow> {
        all.iter().filter(|r| keep(&r.key)).cloned().collect()
    };
    for limit in [1, 2, 100] {
        // A key list (unsorted, repeated, one key absent), page by page:
        // the cursor of one key's range carries into the next.
        let keys = ViewQuery::Keys(vec![
            "news".into(),
            "about".into(),
            "news".into(),
            "nope".into(),
        ]);
        assert_eq!(
            read(&keys, limit),
            naive(&|k| k == "about" || k == "news"),
            "limit {limit}"
        );
        // Bounds included and excluded.
        let range = |lower: Option<(&str, bool)>, upper: Option<(&str, bool)>| ViewQuery::Range {
            lower: lower.map(|(k, i)| (k.to_string(), i)),
            upper: upper.map(|(k, i)| (k.to_string(), i)),
        };
        assert_eq!(
            read(&range(Some(("help", true)), Some(("news", false))), limit),
            naive(&|k| ("help".."news").contains(&k))
        );
        assert_eq!(
            read(&range(Some(("help", false)), Some(("news", true))), limit),
            naive(&|k| k > "help" && k <= "news")
        );
        assert_eq!(
            read(&range(None, Some(("home", true))), limit),
            naive(&|k| k <= "home")
        );
        assert!(read(&range(Some(("z", true)), Some(("a", true))), limit).is_empty());
    }
    // A row test inside the read: rows it rejects are examined, not
    // answered; it sees every row of the range once.
    let seen = std::sync::atomic::AtomicUsize::new(0);
    let test = |r: &view::ViewRow| {
        seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        r.window_start == Some(1000)
    };
    let (page, _) = view::query_page_as_of(
        &h.store,
        &scope,
        &ViewQuery::All,
        &no_filter,
        Some(&test),
        None,
        100,
        1,
    )
    .unwrap();
    assert_eq!(
        page.rows,
        all.iter()
            .filter(|r| r.window_start == Some(1000))
            .cloned()
            .collect::<Vec<_>>()
    );
    assert_eq!(page.scanned, 15);
    assert_eq!(seen.load(std::sync::atomic::Ordering::Relaxed), 15);
}
