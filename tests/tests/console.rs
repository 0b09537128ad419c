//! The web console: `GET /` serves one HTML page, with its script and styles
//! at `/console.js` and `/console.css`, that reads the JSON API of the same
//! server (nothing is loaded from elsewhere). Its safety is
//! `console_safety.rs`; its pages in a browser, `console_overview.rs`.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::{raw_request, Server};

#[test]
fn the_console_page_is_served_at_the_root() {
    let server = Server::start(&[]);
    let response = raw_request(server.addr(), "GET", "/", &[], b"");
    assert_eq!(response.status, 200);
    assert_eq!(
        response.headers.get("content-type").map(String::as_str),
        Some("text/html; charset=utf-8")
    );
    let page = String::from_utf8(response.body).expect("UTF-8");
    assert!(page.contains("<title>Kappa console</title>"), "{page}");
    let script = raw_request(server.addr(), "GET", "/console.js", &[], b"");
    assert_eq!(script.status, 200);
    let script = String::from_utf8(script.body).expect("UTF-8");
    // It reads this server's API...
    for path in [
        "/v1/topics",
        "/v1/views",
        "/v1/statements",
        "/v1/groups",
        "/v1/history",
        "/ready",
    ] {
        assert!(script.contains(path), "the console does not use {path}");
    }
    // ...and only this server: no scripts, styles or fonts from elsewhere.
    for text in [&page, &script] {
        assert!(!text.contains("http://") && !text.contains("https://"));
    }
}
