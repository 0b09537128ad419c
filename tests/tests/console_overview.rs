//! The operator console in a real headless Chromium (issue 16, item 1),
//! against the real server with a running view:
//!
//! - the overview's charts draw the history the server samples every
//!   second (`GET /v1/history`) with data points;
//! - the topic page's message browser shows a produced record, follows new
//!   ones, and its form produces a test message; the consumer groups page
//!   shows a group's committed offsets and lag and resets them;
//! - the view page shows a replay's progress with its rate and ETA, warns
//!   when the view does not keep up or failed, drops it, and browses rows
//!   by key, by prefix and page by page;
//! - a SQL error shows a caret at the line and column the API names; SHOW
//!   and DESCRIBE answer as tables;
//! - no page is wider than the 1280 px window;
//! - `GET /v1/history` needs the `metrics` grant.
//!
//! Every wait polls the page or the API with a deadline; none sleeps. A
//! failing test leaves a screenshot (its path is printed);
//! `KAPPA_CONSOLE_SCREENSHOTS=DIR` saves one of every page checked.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod browser;

use std::time::Duration;

use browser::Browser;
use kappa_tests::{eventually, json, Server, Value};

/// The width of the browser's window (see `browser::Browser::start`).
const WIDTH: u64 = 1280;

/// A stream `clicks` (2 partitions), a table `per_page` counting clicks per
/// page, and `n` clicks over five pages.
fn clicks_and_a_view(server: &Server, n: usize) {
    server.sql_ok(
        "CREATE STREAM clicks (page VARCHAR) WITH (KAFKA_TOPIC='clicks', VALUE_FORMAT='JSON', PARTITIONS=2);
         CREATE TABLE per_page AS SELECT page, COUNT(*) AS n FROM clicks GROUP BY page;",
    );
    produce_clicks(server, n);
}

fn produce_clicks(server: &Server, n: usize) {
    let pages = ["home", "cart", "search", "help", "about"];
    for chunk in (0..n).collect::<Vec<_>>().chunks(5_000) {
        let records: Vec<Value> = chunk
            .iter()
            .map(|i| json!({"key": pages[i % 5], "value": {"page": pages[i % 5]}}))
            .collect();
        server.produce("clicks", &Value::Array(records));
    }
}

/// Opens page `hash` of the console.
fn open(browser: &Browser, server: &Server, hash: &str) {
    browser.goto(&format!("{}/{hash}", server.url()));
}

/// The page shown is no wider than the window: nothing scrolls sideways.
/// With `KAPPA_CONSOLE_SCREENSHOTS=DIR`, a picture of it is saved there
/// too (to look at the pages the test saw).
fn assert_fits(browser: &Browser, page: &str) {
    if let Some(dir) = std::env::var_os("KAPPA_CONSOLE_SCREENSHOTS") {
        let path = std::path::Path::new(&dir).join(format!("{}.png", page.replace(' ', "-")));
        assert!(
            browser.screenshot(&path),
            "no screenshot at {}",
            path.display()
        );
    }
    let widths = browser.execute(
        "return [document.documentElement.scrollWidth, window.innerWidth];",
        vec![],
    );
    let (scroll, inner) = (widths[0].as_u64().unwrap(), widths[1].as_u64().unwrap());
    assert!(
        inner <= WIDTH && scroll <= inner,
        "{page}: the page is {scroll} px wide in a {inner} px window"
    );
}

/// The number of points the chart `id` drew.
fn points(browser: &Browser, id: &str) -> u64 {
    let n = browser.execute(
        "const c = document.getElementById(arguments[0]); return Number(c.dataset.points || 0);",
        vec![json!(id)],
    );
    n.as_u64().unwrap_or(0)
}

#[test]
fn the_overview_charts_draw_the_servers_history() {
    let server = Server::start(&[]);
    clicks_and_a_view(&server, 200);
    // The sampler needs two readings for a rate: wait for the API first.
    eventually(
        "a rate of clicks and a lag of per_page",
        Duration::from_secs(30),
        || {
            let (status, h) = server.get("/v1/history");
            assert_eq!(status, 200, "{h}");
            let has = |list: &str, name: &str, field: &str| {
                h[list].as_array().into_iter().flatten().any(|s| {
                    s["name"] == name
                        && s[field]
                            .as_array()
                            .is_some_and(|v| v.iter().any(|x| !x.is_null()))
                })
            };
            (has("topics", "clicks", "records_per_second")
                && has("views", "per_page", "lag")
                && has("views", "per_page", "records_per_second"))
            .then_some(h)
        },
    );

    let browser = Browser::start();
    open(&browser, &server, "#/overview");
    for chart in [
        "chart-produce",
        "chart-consume",
        "chart-view-rate",
        "chart-view-lag",
    ] {
        browser.until(&format!("{chart} to draw points"), || {
            (points(&browser, chart) > 0).then_some(())
        });
    }
    browser.text_until("#chart-produce-legend", |t| {
        t.contains("clicks") && t.contains("rec/s")
    });
    browser.text_until("#chart-view-lag-legend", |t| t.contains("per_page"));
    // The canvas has pixels of the first series' colour (#2356a8).
    let coloured = browser.execute(
        "const c = document.getElementById('chart-produce');
         const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
         let n = 0;
         for (let i = 0; i < d.length; i += 4)
           if (d[i + 3] > 200 && Math.abs(d[i] - 0x23) < 30 && Math.abs(d[i + 1] - 0x56) < 30 && Math.abs(d[i + 2] - 0xa8) < 30) n++;
         return n;",
        vec![],
    );
    assert!(
        coloured.as_u64().unwrap_or(0) > 0,
        "no line drawn: {coloured}"
    );
    browser.text_until("#history-state", |t| t.contains("one sample a second"));
    let formats = browser.execute(
        "return [int(1234567), perSecond(1234.4), perSecond(12.34), bytes(12345678), bytes(999),
                 duration(185000), duration(900000), duration(7380000)];",
        vec![],
    );
    assert_eq!(
        formats,
        json!([
            "1,234,567",
            "1,234 rec/s",
            "12.3 rec/s",
            "12.3 MB",
            "999 B",
            "3 min 5 s",
            "15 min",
            "2 h 3 min"
        ])
    );
    // The page asks only for new samples once it has the history: what it
    // put together is what the server holds.
    let held = |b: &Browser| {
        b.execute(
            "return historyData ? historyData.times_ms.length : 0;",
            vec![],
        )
        .as_u64()
        .unwrap_or(0)
    };
    let first = held(&browser);
    browser.until("the page to add samples", || {
        (held(&browser) >= first + 2).then_some(())
    });
    let compared = browser.execute_async(
        "const done = arguments[arguments.length - 1];
         const held = historyData;
         const k = held.times_ms.length;
         const pick = (h) => [
           h.times_ms.slice(0, k),
           h.topics.find((s) => s.name === 'clicks').records_per_second.slice(0, k),
           h.views.find((s) => s.name === 'per_page').lag.slice(0, k),
           h.views.find((s) => s.name === 'per_page').status.slice(0, k),
         ];
         api('/v1/history').then((full) => done([pick(held), pick(full), full.times_ms[0] === held.times_ms[0]]));",
        vec![],
    );
    assert_eq!(compared[0], compared[1], "merged against full: {compared}");
    assert_eq!(compared[2], json!(true), "{compared}");
    // A chart draws the 8 busiest of many series.
    let drawn = browser.execute(
        "const many = [];
         for (let i = 0; i < 10; i++) many.push({name: 't' + i, values: [null, i % 5, i]});
         return busiest(many).map((s) => s.name);",
        vec![],
    );
    assert_eq!(
        drawn,
        json!(["t9", "t8", "t7", "t6", "t5", "t4", "t3", "t2"])
    );
    // Numbers carry thousands separators and units.
    produce_clicks(&server, 1_000);
    browser.text_until("#topics", |t| t.contains("1,200") && t.contains(" kB"));
    browser.text_until("#views", |t| t.contains("per_page"));
    assert_fits(&browser, "overview");
}

#[test]
fn the_message_browser_shows_follows_and_produces_records() {
    let server = Server::start(&[]);
    clicks_and_a_view(&server, 20);
    server.produce(
        "clicks",
        &json!([{"key": "marked", "value": {"page": "marked-1"}, "headers": {"origin": "test"}, "partition": 1}]),
    );
    let browser = Browser::start();
    open(&browser, &server, "");
    // The header's picker opens the topic's page.
    browser.select("#topic-pick", "clicks");
    browser.text_until("#topic-title", |t| t == "Topic clicks");
    browser.text_until("#topic-partitions", |t| {
        t.contains("partition") && t.contains(" B")
    });
    browser.select("#partition", "1");
    browser.click("#read");
    let records = browser.text_until("#records", |t| t.contains("marked-1"));
    assert!(
        records.contains(r#"{"origin":"test"}"#),
        "headers shown: {records}"
    );
    // Bytes that are not JSON or not UTF-8 (from a Kafka client) are shown
    // as the API answers them, marked.
    let cells = browser.execute(
        "return recordRow({offset: 1234, timestamp: 0, key: 'AAE=', key_encoding: 'base64',
                           value: 'plain text', value_encoding: 'text',
                           headers: {h: '/w==', t: 'ok'}, base64_headers: ['h']})
                 .map((c) => (typeof c === 'object' ? c.text : c));",
        vec![],
    );
    assert_eq!(
        cells,
        json!([
            "1,234",
            "1970-01-01T00:00:00Z",
            "base64:AAE=",
            "plain text",
            r#"{"h":"base64:/w==","t":"ok"}"#
        ])
    );
    browser.until("the topic's chart to draw points", || {
        (points(&browser, "topic-chart") > 0).then_some(())
    });
    assert_fits(&browser, "topic");

    // Follow: a record produced now appears without another click.
    browser.click("#follow");
    browser.text_until("#read-state", |t| t.contains("following"));
    server.produce(
        "clicks",
        &json!([{"key": "later", "value": {"page": "followed-2"}, "partition": 1}]),
    );
    browser.text_until("#records", |t| t.contains("followed-2"));
    browser.click("#follow");

    // The form produces a test message, which the browser then shows.
    browser.type_into("#produce-key", "typed");
    browser.type_into("#produce-value", r#"{"page": "from-the-form"}"#);
    browser.select("#produce-partition", "0");
    browser.click("#produce");
    browser.text_until("#produce-result", |t| {
        t.starts_with("produced to partition 0 at offset")
    });
    browser.select("#partition", "0");
    browser.click("#read");
    browser.text_until("#records", |t| t.contains("from-the-form"));

    // Consumer groups: committed offsets and lag, and a reset.
    let (status, body) = server.post_json(
        "/v1/groups/audit/offsets",
        &json!({"topic": "clicks", "offsets": [{"partition": 0, "offset": 3}]}),
    );
    assert_eq!(status, 200, "{body}");
    open(&browser, &server, "#/groups");
    browser.text_until("#groups", |t| t.contains("audit") && t.contains("clicks"));
    assert_fits(&browser, "groups");
    open(&browser, &server, "#/groups/audit");
    let detail = browser.text_until("#group-topics", |t| {
        t.contains("committed") && t.contains("lag")
    });
    assert!(
        detail.contains("none"),
        "partition 1 has no commit: {detail}"
    );
    browser.click("#group-topics button");
    browser.text_until("#group-topics button", |t| t.starts_with("Click again"));
    browser.click("#group-topics button");
    browser.text_until("#group-topics", |t| t.contains("reset: 0:0 1:0"));
    assert_fits(&browser, "group");
}

/// `part`, or a failure naming the line that is not a progress line.
fn part<T>(part: Option<T>, line: &str) -> T {
    part.unwrap_or_else(|| panic!("not a progress line: {line:?}"))
}

/// Checks the form of a progress line: "v2 building: 1,234 / 5,000 records
/// (24.7%) · 1,234 rec/s · ETA 3 s".
fn assert_progress_line(line: &str) {
    let (label, rest) = part(line.split_once(": "), line);
    assert!(
        label == "v2 building" || label == "v2 caught up",
        "label of {line:?}"
    );
    let parts: Vec<&str> = rest.split(" · ").collect();
    assert_eq!(parts.len(), 3, "{line:?}");
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit() || c == ',');
    let (done, rest) = part(parts[0].split_once(" / "), line);
    let (total, pct) = part(rest.split_once(" records ("), line);
    assert!(digits(done) && digits(total), "{line:?}");
    assert!(pct.ends_with("%)"), "{line:?}");
    let rate = part(parts[1].strip_suffix(" rec/s"), line);
    assert!(
        rate.chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '.'),
        "{line:?}"
    );
    let eta = part(parts[2].strip_prefix("ETA "), line);
    assert!(
        eta == "done" || eta == "unknown" || eta.ends_with(" s") || eta.ends_with(" min"),
        "{line:?}"
    );
}

#[test]
fn the_view_page_shows_a_replays_progress_and_rows_and_sql_errors_get_a_caret() {
    let server = Server::start(&[]);
    clicks_and_a_view(&server, 20_000);
    // Caught up, and every count readable (rows are read from committed state).
    eventually("per_page caught up", Duration::from_secs(60), || {
        let done = server.describe_view("per_page")["status"] == "running"
            && server.view_rows("per_page", "key=search")["rows"][0]["row"]["n"] == 4000;
        done.then_some(())
    });
    let browser = Browser::start();
    open(&browser, &server, "");
    browser.select("#view-pick", "per_page");
    browser.text_until("#view-title", |t| t == "Table per_page");
    browser.text_until("#view-details", |t| {
        t.contains("state size") && t.contains("20,000 records")
    });
    browser.text_until("#view-partitions", |t| t.contains("committed"));
    browser.text_until("#view-versions", |t| t.contains("GROUP BY page"));

    // Rows, and a key search.
    browser.click("#load");
    browser.text_until("#rows", |t| t.contains("search") && t.contains("4000"));
    browser.type_into("#key", "help");
    browser.click("#load");
    // The key's row alone (the first answer had every page).
    browser.text_until("#rows", |t| t.contains("help") && !t.contains("search"));
    browser.text_until("#as-of", |t| t.starts_with("page 1 · 1 row of per_page"));
    browser.until("the view's charts to draw points", || {
        (points(&browser, "view-chart-rate") > 0 && points(&browser, "view-chart-lag") > 0)
            .then_some(())
    });
    assert_fits(&browser, "view");

    // A view that does not keep up, or failed, says so plainly. (Reaching
    // those states takes a minute or a fault: the page is shown the API's
    // answer with the status changed.)
    let warnings = browser.execute(
        "const shown = (change) => {
           const v = JSON.parse(JSON.stringify(viewData));
           change(v);
           renderView(v);
           const w = document.getElementById('view-warning');
           return [w.hidden, w.className, w.textContent];
         };
         const out = [
           shown((v) => { v.status = 'not_keeping_up'; v.served_version.not_keeping_up = true; }),
           shown((v) => {
             v.status = 'failed';
             v.served_version.running = false;
             v.failure = {version: 1, reason: 'disk full', at_ms: 0, during_build: false};
           }),
         ];
         renderView(viewData);
         return out;",
        vec![],
    );
    assert_eq!(warnings[0][0], json!(false), "{warnings}");
    assert_eq!(warnings[0][1], json!("banner bad"), "{warnings}");
    assert!(
        warnings[0][2]
            .as_str()
            .unwrap()
            .starts_with("Not keeping up: v1"),
        "{warnings}"
    );
    assert_eq!(
        warnings[1][2],
        json!("The served version v1 stopped: disk full"),
        "{warnings}"
    );

    // A replay that waits for promote: its progress shows while it builds
    // and after it caught up, always with a rate and an ETA.
    browser.click("#replay-manual");
    browser.click("#replay");
    browser.click("#replay");
    browser.text_until("#action-result", |t| t.contains("building v2"));
    let mut seen = Vec::new();
    browser.until("the build to catch up", || {
        let line = browser.text("#build-progress-text");
        if !line.is_empty() {
            assert_progress_line(&line);
            if seen.last() != Some(&line) {
                seen.push(line.clone());
            }
        }
        line.starts_with("v2 caught up").then_some(())
    });
    // Whether a line while building was seen depends on the machine's
    // speed; what was seen is printed, and each line had the form.
    eprintln!("progress lines seen: {seen:#?}");
    let last = seen.last().unwrap();
    assert!(
        last.contains("20,000 / 20,000 records (100%)") && last.ends_with("ETA done"),
        "{seen:?}"
    );
    browser.text_until("#build-progress-note", |t| t.contains("waits for Promote"));
    browser.text_until("#review-state", |t| t.contains("v2 ready"));
    assert_fits(&browser, "view with a build");
    browser.click("#promote");
    browser.text_until("#review-result", |t| t.contains("v2 served"));

    // A SQL error: the caret sits under the line and column the API names.
    let sql = "CREATE TABLE broken AS\n  SELECT page, COUNT(*) AS n FROM clicks GROUP page;";
    let (status, error) = server.sql(sql);
    assert_eq!(status, 400, "{error}");
    let (line, column) = (
        error["error"]["line"].as_u64().unwrap(),
        error["error"]["column"].as_u64().unwrap(),
    );
    assert_eq!(line, 2, "the error is on the second line: {error}");
    open(&browser, &server, "#/sql");
    browser.type_into("#sql", sql);
    browser.click("#run");
    browser.find("#sql-caret");
    let shown = browser.execute(
        "const c = document.getElementById('sql-caret');
         return [c.dataset.line, c.dataset.column, c.textContent];",
        vec![],
    );
    assert_eq!(shown[0], json!(line.to_string()));
    assert_eq!(shown[1], json!(column.to_string()));
    let text = shown[2].as_str().unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    let source = lines[1].strip_prefix("2 | ").expect("the line, numbered");
    assert_eq!(source, sql.lines().nth(1).unwrap());
    let mark = lines[2].strip_prefix("  | ").expect("the caret's gutter");
    assert_eq!(mark.find('^'), Some(column as usize - 1), "{text}");
    assert!(mark.trim_start() == "^", "{text}");
    // The editor selects that place too.
    let selected = browser.execute(
        "const a = document.getElementById('sql'); return a.value.slice(0, a.selectionStart);",
        vec![],
    );
    let before = format!(
        "{}\n{}",
        sql.lines().next().unwrap(),
        &sql.lines().nth(1).unwrap()[..column as usize - 1]
    );
    assert_eq!(selected, json!(before));
    assert_fits(&browser, "sql with an error");

    // SHOW and DESCRIBE answer as tables; the statements go to the history.
    browser.type_into("#sql", "SHOW TABLES;");
    browser.click("#run");
    browser.text_until("#sql-result table", |t| {
        t.contains("per_page") && t.contains("name")
    });
    browser.type_into("#sql", "DESCRIBE per_page;");
    browser.click("#run");
    browser.text_until("#sql-result", |t| {
        t.contains("Columns") && t.contains("page")
    });
    browser.text_until("#sql-history", |t| {
        t.contains("SHOW TABLES;") && t.contains("GROUP page;")
    });
    assert_fits(&browser, "sql");

    // Drop asks for a second click, then the view is gone.
    open(&browser, &server, "#/view/per_page");
    browser.text_until("#view-title", |t| t == "Table per_page");
    browser.click("#drop");
    browser.text_until("#drop", |t| t == "Click again to drop per_page");
    browser.click("#drop");
    // (The table's header shows once the overview is shown and loaded.)
    browser.text_until("#views", |t| {
        t.contains("watermark") && !t.contains("per_page")
    });
    assert_eq!(server.get("/v1/views/per_page").0, 404);
}

#[test]
fn the_history_needs_the_metrics_grant() {
    const SECRET: &str = "console-overview-bootstrap-0123456789";
    let server = Server::start_env(&["--auth", "tokens"], &[("KAPPA_BOOTSTRAP_TOKEN", SECRET)]);
    let admin = server.client().with_token(SECRET);
    let mut secrets = Vec::new();
    for (name, grant) in [("watcher", "metrics"), ("reader", "read:*")] {
        let (status, created) =
            admin.post_json("/v1/tokens", &json!({"name": name, "grants": [grant]}));
        assert_eq!(status, 201, "{created}");
        secrets.push(created["token"].as_str().unwrap().to_string());
    }
    let (status, history) = server.client().with_token(&secrets[0]).get("/v1/history");
    assert_eq!(status, 200, "{history}");
    assert_eq!(history["interval_ms"], 1000);
    assert_eq!(history["capacity"], 900);
    let (status, refused) = server.client().with_token(&secrets[1]).get("/v1/history");
    assert_eq!(status, 403, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("metrics"),
        "{refused}"
    );
    assert_eq!(server.client().get("/v1/history").0, 401);
    assert_eq!(admin.get("/v1/history?since=1").0, 400);
    assert_eq!(admin.get("/v1/history?since_ms=soon").0, 400);
    let (status, none) = admin.get(&format!("/v1/history?since_ms={}", i64::MAX));
    assert_eq!(status, 200, "{none}");
    assert_eq!(none["times_ms"], json!([]), "nothing after the end of time");
}

#[test]
fn the_rows_browser_pages_through_a_table_and_back() {
    let server = Server::start(&[]);
    server.sql_ok(
        "CREATE STREAM visits (user_id VARCHAR) WITH (KAFKA_TOPIC='visits', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE TABLE per_user AS SELECT user_id, COUNT(*) AS n FROM visits GROUP BY user_id;",
    );
    let records: Vec<Value> = (0..120)
        .map(|i| json!({"key": format!("u{i:03}"), "value": {"user_id": format!("u{i:03}")}}))
        .collect();
    server.produce("visits", &Value::Array(records));
    eventually("per_user has every user", Duration::from_secs(60), || {
        (server.view_rows("per_user", "key=u119")["rows"][0]["row"]["n"] == 1).then_some(())
    });
    let browser = Browser::start();
    open(&browser, &server, "#/view/per_user");
    browser.click("#load");
    browser.text_until("#as-of", |t| t.starts_with("page 1 · 50 rows of per_user"));
    assert!(browser.text("#rows").contains("u000"));
    browser.click("#rows-next");
    browser.text_until("#as-of", |t| t.starts_with("page 2 · 50 rows"));
    browser.click("#rows-next");
    browser.text_until("#as-of", |t| t.starts_with("page 3 · 20 rows"));
    let rows = browser.text("#rows");
    assert!(rows.contains("u119") && !rows.contains("u000"), "{rows}");
    let disabled = browser.execute(
        "return [document.getElementById('rows-next').disabled, document.getElementById('rows-prev').disabled];",
        vec![],
    );
    assert_eq!(disabled, json!([true, false]), "the last page");
    browser.click("#rows-prev");
    browser.text_until("#as-of", |t| t.starts_with("page 2 · 50 rows"));
    // A prefix search.
    browser.select("#key-mode", "prefix");
    browser.type_into("#key", "u11");
    browser.click("#load");
    browser.text_until("#as-of", |t| t.starts_with("page 1 · 10 rows"));
    assert_fits(&browser, "rows");
}
