//! Browser safety (issue 11, item 7): a web page on another origin cannot
//! drive the API. Bodies a browser sends cross-origin without a preflight
//! (`text/plain`, forms, multipart, no `Content-Type`) are refused with 415
//! on every state-changing route and change nothing; a `Host` other than the
//! loopback names (DNS rebinding) gets 421; a request a browser marks as
//! cross-site gets 403. The documented clients' requests still pass.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{assert_error, json, raw_request, Server};

/// Bodies a page may send to any origin without a CORS preflight.
const SIMPLE_TYPES: [Option<&str>; 4] = [
    Some("text/plain"),
    Some("application/x-www-form-urlencoded"),
    Some("multipart/form-data; boundary=x"),
    None,
];

#[test]
fn a_page_cannot_drop_a_table_with_a_simple_cross_origin_post() {
    let server = Server::start(&[]);
    server.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    for content_type in SIMPLE_TYPES {
        let reply = server.send(
            "POST",
            "/v1/statements",
            content_type,
            &[],
            Some(b"DROP TABLE purchase_stats;"),
        );
        assert_error(
            &format!("DROP TABLE as {content_type:?}"),
            reply.status,
            &reply.body,
            415,
            "unsupported_media_type",
        );
    }
    let (status, view) = server.get("/v1/views/purchase_stats");
    assert_eq!(status, 200, "the table is still there: {view}");
    // The documented ways still work.
    let (status, body) = server.post_json("/v1/statements", &json!({"sql": "SHOW TABLES;"}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(server.sql("SHOW TABLES;").0, 200);
}

#[test]
fn every_state_changing_route_refuses_simple_bodies_and_changes_nothing() {
    let server = Server::start(&[]);
    server.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    server.create_topic(&json!({"name": "t", "partitions": 1}));
    server.produce("t", &json!([{"value": 1}, {"value": 2}]));
    let (status, _) = server.post_json(
        "/v1/groups/g/offsets",
        &json!({"topic": "t", "offsets": [{"partition": 0, "offset": 1}]}),
    );
    assert_eq!(status, 200);
    let cases: [(&str, String); 5] = [
        (
            "/v1/topics",
            json!({"name": "new", "partitions": 1}).to_string(),
        ),
        (
            "/v1/topics/t/records",
            json!({"records": [{"value": 3}]}).to_string(),
        ),
        (
            "/v1/groups/g/offsets",
            json!({"topic": "t", "offsets": [{"partition": 0, "offset": 2}]}).to_string(),
        ),
        (
            "/v1/groups/g/reset",
            json!({"topic": "t", "to": "earliest"}).to_string(),
        ),
        ("/v1/views/purchase_stats/replay", String::new()),
    ];
    for (path, body) in &cases {
        for content_type in SIMPLE_TYPES {
            let reply = server.send("POST", path, content_type, &[], Some(body.as_bytes()));
            assert_error(
                &format!("POST {path} as {content_type:?}"),
                reply.status,
                &reply.body,
                415,
                "unsupported_media_type",
            );
        }
    }
    assert_eq!(server.get("/v1/topics/new").0, 404, "no topic was created");
    assert_eq!(server.end_offsets("t"), vec![2], "nothing was produced");
    let (_, offsets) = server.get("/v1/groups/g/offsets?topic=t");
    assert_eq!(
        offsets["topics"][0]["partitions"][0]["committed"],
        json!(1),
        "no commit or reset: {offsets}"
    );
    let (_, view) = server.get("/v1/views/purchase_stats");
    assert!(view["building_version"].is_null(), "no replay: {view}");
}

#[test]
fn a_rebound_host_name_is_refused_and_loopback_names_pass() {
    let server = Server::start(&[]);
    let port = server.addr().port();
    for host in [
        "evil.example",
        &format!("evil.example:{port}"),
        "127.0.0.1.nip.io",
    ] {
        for (method, target, body) in [
            ("GET", "/v1/topics", &b""[..]),
            ("POST", "/v1/statements", &br#"{"sql": "SHOW TABLES;"}"#[..]),
        ] {
            let response = raw_request(
                server.addr(),
                method,
                target,
                &[("Host", host), ("Content-Type", "application/json")],
                body,
            );
            assert_error(
                &format!("{method} {target} with Host {host}"),
                response.status,
                &response.json(),
                421,
                "host_not_allowed",
            );
        }
    }
    for host in [
        "localhost".to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let response = raw_request(server.addr(), "GET", "/v1/topics", &[("Host", &host)], b"");
        assert_eq!(response.status, 200, "Host {host}");
    }
}

#[test]
fn configured_allowed_hosts_pass() {
    let server = Server::start(&["--allowed-hosts", "kappa.test,other.test"]);
    for (host, status) in [
        ("kappa.test:80", 200),
        ("other.test", 200),
        ("evil.test", 421),
    ] {
        let response = raw_request(server.addr(), "GET", "/health", &[("Host", host)], b"");
        assert_eq!(response.status, status, "Host {host}");
    }
}

#[test]
fn requests_a_browser_marks_cross_site_are_refused_except_the_console() {
    let server = Server::start(&[]);
    server.create_topic(&json!({"name": "t", "partitions": 1}));
    server.produce("t", &json!([{"value": 1}]));
    // An image tag on another site would commit the group's position.
    let reply = server.send(
        "GET",
        "/v1/groups/g/topics/t/records?commit=true",
        None,
        &[("Sec-Fetch-Site", "cross-site")],
        None,
    );
    assert_error(
        "cross-site group read",
        reply.status,
        &reply.body,
        403,
        "cross_site_request",
    );
    let (_, offsets) = server.get("/v1/groups/g/offsets?topic=t");
    assert!(
        offsets["topics"][0]["partitions"][0]["committed"].is_null(),
        "nothing committed: {offsets}"
    );
    let console = server.send("GET", "/", None, &[("Sec-Fetch-Site", "cross-site")], None);
    assert_eq!(console.status, 200);
    let same_origin = server.send(
        "GET",
        "/v1/groups/g/topics/t/records",
        None,
        &[("Sec-Fetch-Site", "same-origin")],
        None,
    );
    assert_eq!(same_origin.status, 200, "{}", same_origin.text);
}
