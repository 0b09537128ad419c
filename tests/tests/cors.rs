//! CORS only when configured (issue 15, item 4): a server with
//! `allowed_origins` answers those origins' preflights and lets their pages
//! read its answers; every other origin gets no CORS header and keeps the
//! cross-site refusal; a server without the setting sends no CORS header at
//! all. With `--auth tokens` a preflight needs no token and a listed page
//! can read its 401. The browser test shows it in a real browser: a page of
//! a listed origin reads and writes through `fetch`, a page of another
//! origin cannot.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

mod browser;

use browser::Browser;
use kappa_tests::{assert_error, json, raw_request, RawResponse, Server};

const DASH: &str = "https://dash.example.com";

/// The `Access-Control-*` headers of an answer.
fn cors_headers(response: &RawResponse) -> Vec<(String, String)> {
    response
        .headers
        .iter()
        .filter(|(name, _)| name.starts_with("access-control-"))
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect()
}

/// A preflight of `POST path` from `origin`, as a browser sends it.
fn preflight(server: &Server, origin: &str, path: &str) -> RawResponse {
    raw_request(
        server.addr(),
        "OPTIONS",
        path,
        &[
            ("Origin", origin),
            ("Access-Control-Request-Method", "POST"),
            (
                "Access-Control-Request-Headers",
                "authorization,content-type,idempotency-key",
            ),
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "cors"),
        ],
        b"",
    )
}

/// `GET /v1/topics` as a `fetch` from a page of `origin`.
fn cross_site_get(server: &Server, origin: &str) -> RawResponse {
    raw_request(
        server.addr(),
        "GET",
        "/v1/topics",
        &[
            ("Origin", origin),
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "cors"),
        ],
        b"",
    )
}

#[test]
fn an_allowed_origin_gets_cors_headers_and_a_working_preflight() {
    let server = Server::start(&[
        "--allowed-origins",
        &format!("{DASH},http://localhost:3000"),
    ]);
    for path in [
        "/v1/statements",
        "/v1/topics/t/records",
        "/v1/views/v/promote",
    ] {
        let answer = preflight(&server, DASH, path);
        assert_eq!(answer.status, 204, "{path}: {:?}", answer.headers);
        let h = &answer.headers;
        assert_eq!(h["access-control-allow-origin"], DASH);
        let methods: Vec<&str> = h["access-control-allow-methods"]
            .split(',')
            .map(str::trim)
            .collect();
        for m in ["GET", "POST", "PATCH", "DELETE"] {
            assert!(methods.contains(&m), "{path}: {methods:?}");
        }
        let allowed = h["access-control-allow-headers"].to_ascii_lowercase();
        for name in ["authorization", "content-type", "idempotency-key"] {
            assert!(allowed.contains(name), "{path}: {allowed}");
        }
        assert!(h["access-control-max-age"].parse::<u32>().unwrap() > 0);
        assert!(h["vary"].to_ascii_lowercase().contains("origin"));
        assert!(!h.contains_key("access-control-allow-credentials"));
    }

    // The request after it: served, and readable by the page.
    let answer = raw_request(
        server.addr(),
        "POST",
        "/v1/statements",
        &[
            ("Origin", DASH),
            ("Sec-Fetch-Site", "cross-site"),
            ("Content-Type", "application/json"),
        ],
        br#"{"sql": "SHOW TABLES;"}"#,
    );
    assert_eq!(
        answer.status,
        200,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(answer.headers["access-control-allow-origin"], DASH);
    assert!(answer.headers["vary"]
        .to_ascii_lowercase()
        .contains("origin"));
    assert!(!answer
        .headers
        .contains_key("access-control-allow-credentials"));

    // Errors are readable too (the page can show them).
    let missing = raw_request(
        server.addr(),
        "GET",
        "/v1/topics/nope",
        &[
            ("Origin", "http://localhost:3000"),
            ("Sec-Fetch-Site", "same-site"),
        ],
        b"",
    );
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.headers["access-control-allow-origin"],
        "http://localhost:3000"
    );
    // The body-type refusal still holds for a listed origin.
    let form = raw_request(
        server.addr(),
        "POST",
        "/v1/statements",
        &[
            ("Origin", DASH),
            ("Sec-Fetch-Site", "cross-site"),
            ("Content-Type", "text/plain"),
        ],
        b"SHOW TABLES;",
    );
    assert_eq!(form.status, 415);
}

#[test]
fn another_origin_gets_no_cors_headers_and_the_cross_site_refusal() {
    let server = Server::start(&["--allowed-origins", DASH]);
    server.create_topic(&json!({"name": "t", "partitions": 1}));
    server.produce("t", &json!([{"value": 1}]));
    for origin in [
        "https://evil.example",
        "http://dash.example.com",
        "https://dash.example.com:8443",
        "https://dash.example.com.evil.example",
        "null",
    ] {
        let answer = preflight(&server, origin, "/v1/statements");
        assert_ne!(answer.status, 204, "{origin}");
        assert_eq!(cors_headers(&answer), vec![], "{origin}");
        let answer = cross_site_get(&server, origin);
        assert_error(
            origin,
            answer.status,
            &answer.json(),
            403,
            "cross_site_request",
        );
        assert_eq!(cors_headers(&answer), vec![], "{origin}");
    }
    // A page of the listed origin cannot commit a group's position with an
    // image tag either: browsers send no Origin with one.
    let image = raw_request(
        server.addr(),
        "GET",
        "/v1/groups/g/topics/t/records?commit=true",
        &[
            ("Sec-Fetch-Site", "cross-site"),
            ("Sec-Fetch-Mode", "no-cors"),
        ],
        b"",
    );
    assert_eq!(image.status, 403);
    let (_, offsets) = server.get("/v1/groups/g/offsets?topic=t");
    assert!(
        offsets["topics"][0]["partitions"][0]["committed"].is_null(),
        "{offsets}"
    );
    // A client that is not a browser may send any Origin: it is served, and
    // given no CORS header.
    let tool = raw_request(
        server.addr(),
        "GET",
        "/v1/topics",
        &[("Origin", "https://evil.example")],
        b"",
    );
    assert_eq!(tool.status, 200);
    assert_eq!(cors_headers(&tool), vec![]);
}

#[test]
fn without_allowed_origins_no_cors_header_is_ever_sent() {
    let server = Server::start(&[]);
    let answer = preflight(&server, DASH, "/v1/statements");
    assert_error(
        "a preflight",
        answer.status,
        &answer.json(),
        403,
        "cross_site_request",
    );
    assert_eq!(cors_headers(&answer), vec![]);
    let answer = cross_site_get(&server, DASH);
    assert_eq!(answer.status, 403);
    assert_eq!(cors_headers(&answer), vec![]);
    for (method, path) in [
        ("GET", "/v1/topics"),
        ("OPTIONS", "/v1/topics"),
        ("GET", "/"),
    ] {
        let answer = raw_request(
            server.addr(),
            method,
            path,
            &[("Origin", DASH), ("Access-Control-Request-Method", "GET")],
            b"",
        );
        assert_eq!(cors_headers(&answer), vec![], "{method} {path}");
        assert!(!answer.headers.contains_key("vary"), "{method} {path}");
    }
}

/// In a page of `page`, `fetch`es `api` twice — a plain GET, and a POST
/// with a JSON body (which needs a preflight) — and answers what the page
/// could read: `["ok", status]` or `["error", name]` for each.
fn fetch_from(browser: &Browser, page: &str, api: &str) -> serde_json::Value {
    // A page of that origin without the console's CSP (which allows calls
    // to its own server only).
    browser.goto(&format!("{page}/health"));
    browser.execute_async(
        "const [api, done] = arguments;
         const read = (p) => p.then((r) => ['ok', r.status], (e) => ['error', e.name]);
         Promise.all([
           read(fetch(api + '/v1/topics')),
           read(fetch(api + '/v1/topics', {
             method: 'POST',
             headers: {'Content-Type': 'application/json'},
             body: JSON.stringify({name: 'from-the-page', partitions: 1}),
           })),
         ]).then(done);",
        vec![json!(api)],
    )
}

#[test]
fn a_browser_page_of_a_listed_origin_calls_the_api_and_others_cannot() {
    // Two other servers give the browser two origins to load pages from.
    let listed = Server::start(&[]);
    let other = Server::start(&[]);
    let listed_origin = listed.url();
    let server = Server::start(&["--allowed-origins", &listed_origin]);
    // The API by a name other than its pages' (127.0.0.1): cross-origin.
    let api = format!("http://localhost:{}", server.addr().port());

    let browser = Browser::start();
    let refused = fetch_from(&browser, &other.url(), &api);
    assert_eq!(
        refused,
        json!([["error", "TypeError"], ["error", "TypeError"]]),
        "a page of another origin reads nothing and sends no POST"
    );
    assert_eq!(server.get("/v1/topics/from-the-page").0, 404);

    let allowed = fetch_from(&browser, &listed_origin, &api);
    assert_eq!(allowed, json!([["ok", 200], ["ok", 201]]));
    assert_eq!(server.get("/v1/topics/from-the-page").0, 200);
}

#[test]
fn with_tokens_a_preflight_needs_none_and_a_listed_page_reads_the_401() {
    const SECRET: &str = "cors-test-bootstrap-0123456789";
    let server = Server::start_env(
        &["--auth", "tokens", "--allowed-origins", DASH],
        &[("KAPPA_BOOTSTRAP_TOKEN", SECRET)],
    );
    // A preflight carries no credentials: it is answered before the token
    // check.
    let answer = preflight(&server, DASH, "/v1/statements");
    assert_eq!(answer.status, 204, "{:?}", answer.headers);
    // Without a token: a 401 the page can read, with its challenge.
    let answer = cross_site_get(&server, DASH);
    assert_eq!(answer.status, 401);
    assert_eq!(answer.headers["access-control-allow-origin"], DASH);
    assert!(answer.headers["access-control-expose-headers"].contains("www-authenticate"));
    assert!(answer.headers["www-authenticate"].starts_with("Bearer"));
    // With one: served.
    let bearer = format!("Bearer {SECRET}");
    let answer = raw_request(
        server.addr(),
        "GET",
        "/v1/topics",
        &[
            ("Origin", DASH),
            ("Sec-Fetch-Site", "cross-site"),
            ("Authorization", &bearer),
        ],
        b"",
    );
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["access-control-allow-origin"], DASH);
    // Another origin's page gets neither the 401 nor a readable answer.
    let answer = cross_site_get(&server, "https://evil.example");
    assert_eq!(answer.status, 403);
    assert_eq!(cors_headers(&answer), vec![]);
}
