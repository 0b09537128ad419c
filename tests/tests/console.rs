//! The web console: `GET /` serves one self-contained HTML page that reads
//! the JSON API of the same server (nothing is loaded from elsewhere).

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
    // It reads this server's API...
    for path in ["/v1/topics", "/v1/views", "/v1/statements", "/ready"] {
        assert!(page.contains(path), "the console does not use {path}");
    }
    // ...and only this server: no scripts, styles or fonts from elsewhere.
    assert!(!page.contains("http://") && !page.contains("https://"));
    // Text from the API is never parsed as HTML.
    assert!(!page.contains("innerHTML"));
}
