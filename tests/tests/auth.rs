//! Bearer tokens with grants (issue 15), end to end over HTTP against the
//! real binary: every route answers 401 without a token or with a wrong
//! one, 403 with a valid token lacking the grant, and succeeds with it;
//! scoped tokens stay in their scope; revocation is immediate and survives
//! a restart; the first admin token comes from the offline CLI or
//! `KAPPA_BOOTSTRAP_TOKEN`; secrets never reach logs or error bodies; and
//! `auth = "none"` refuses a non-loopback address. The route matrix runs
//! over HTTP and over HTTPS.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::process::Command;

use kappa_tests::brief::{PURCHASE_STATS, USER_EVENTS};
use kappa_tests::{json, kappa_bin, Client, Reply, Server, Value};

mod tls_support;

/// The bootstrap secret of these tests.
const BOOTSTRAP: &str = "bootstrap-secret-for-the-auth-tests";

fn start() -> Server {
    Server::start_env(
        &["--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    )
}

fn admin(server: &Server) -> Client {
    server.client().with_token(BOOTSTRAP)
}

/// Creates a token with `grants` through the API; returns its secret.
fn token(server: &Server, name: &str, grants: &[&str]) -> String {
    token_via(&server.client(), name, grants)
}

/// Creates a token with `grants` through `base` (of either scheme) with the
/// bootstrap token; returns its secret.
fn token_via(base: &Client, name: &str, grants: &[&str]) -> String {
    let (status, body) = base
        .with_token(BOOTSTRAP)
        .post_json("/v1/tokens", &json!({"name": name, "grants": grants}));
    assert_eq!(status, 201, "{body}");
    body["token"].as_str().unwrap().to_string()
}

/// One request of the route matrix.
struct Case {
    method: &'static str,
    path: String,
    body: Option<Value>,
    /// The grant that allows it (`None`: any valid token).
    grant: Option<&'static str>,
    /// The status it answers once allowed.
    ok: u16,
}

fn case(
    method: &'static str,
    path: &str,
    body: Option<Value>,
    grant: Option<&'static str>,
    ok: u16,
) -> Case {
    Case {
        method,
        path: path.to_string(),
        body,
        grant,
        ok,
    }
}

fn send(client: &Client, c: &Case) -> Reply {
    let body = c.body.as_ref().map(|b| b.to_string().into_bytes());
    let content_type = body.as_ref().map(|_| "application/json");
    client.send(c.method, &c.path, content_type, &[], body.as_deref())
}

fn assert_refused(what: &str, reply: &Reply, status: u16, code: &str) {
    assert_eq!(reply.status, status, "{what}: {}", reply.text);
    assert_eq!(reply.body["error"]["code"], code, "{what}: {}", reply.text);
}

#[test]
fn every_route_answers_401_401_403_and_succeeds_with_its_grant() {
    let server = start();
    route_matrix(&server.client());
}

#[test]
fn over_https_every_route_answers_401_401_403_and_succeeds_with_its_grant() {
    let files = tls_support::Files::new();
    let server = files.start_env(
        &["--auth", "tokens"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    route_matrix(&tls_support::https_client(server.addr(), files.ca.der()));
}

/// Every route × {no token, wrong token, token without the grant, token
/// with it}, through `anonymous` (a client of either scheme, without a token).
fn route_matrix(anonymous: &Client) {
    let root = anonymous.with_token(BOOTSTRAP);
    root.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    for name in ["orders.eu", "doomed", "altered"] {
        root.create_topic(&json!({"name": name, "partitions": 1}));
    }
    root.produce("orders.eu", &json!([{"key": "k", "value": {"n": 1}}]));
    let outsider = token_via(
        anonymous,
        "outsider",
        &["read:unrelated-*", "read-view:unrelated"],
    );
    let wrong = "kp_0000000000000000000000000000000000000000000000000000000000000000";
    let cases = vec![
        case("GET", "/metrics", None, Some("metrics"), 200),
        case("GET", "/v1/history", None, Some("metrics"), 200),
        case("GET", "/v1/openapi.json", None, None, 200),
        case("GET", "/v1/topics", None, None, 200),
        case(
            "POST",
            "/v1/topics",
            Some(json!({"name": "made", "partitions": 1})),
            Some("admin"),
            201,
        ),
        case(
            "GET",
            "/v1/topics/orders.eu",
            None,
            Some("read:orders.*"),
            200,
        ),
        case(
            "PATCH",
            "/v1/topics/altered",
            Some(json!({"retention_ms": 86_400_000})),
            Some("admin"),
            200,
        ),
        case("DELETE", "/v1/topics/doomed", None, Some("admin"), 204),
        case(
            "POST",
            "/v1/topics/orders.eu/records",
            Some(json!({"records": [{"value": {"n": 2}}]})),
            Some("produce:orders.*"),
            200,
        ),
        case(
            "GET",
            "/v1/topics/orders.eu/partitions/0/records",
            None,
            Some("read:orders.*"),
            200,
        ),
        case("GET", "/v1/groups", None, None, 200),
        case(
            "GET",
            "/v1/groups/billing/topics/orders.eu/records",
            None,
            Some("group:billing+read:orders.eu"),
            200,
        ),
        case(
            "POST",
            "/v1/groups/billing/offsets",
            Some(json!({"topic": "orders.eu", "offsets": [{"partition": 0, "offset": 1}]})),
            Some("group:bill*+read:orders.*"),
            200,
        ),
        case(
            "GET",
            "/v1/groups/billing/offsets",
            None,
            Some("group:billing"),
            200,
        ),
        case(
            "POST",
            "/v1/groups/billing/reset",
            Some(json!({"topic": "orders.eu", "to": "earliest"})),
            Some("group:billing+read:orders.eu"),
            200,
        ),
        case(
            "POST",
            "/v1/statements",
            Some(json!({"sql": "DROP TABLE IF EXISTS nothing_here;"})),
            Some("admin"),
            200,
        ),
        case(
            "POST",
            "/v1/statements",
            Some(json!({"sql": "SELECT * FROM purchase_stats;"})),
            Some("read-view:purchase_*"),
            200,
        ),
        case("GET", "/v1/views", None, None, 200),
        case(
            "GET",
            "/v1/views/purchase_stats",
            None,
            Some("read-view:purchase_stats"),
            200,
        ),
        case(
            "GET",
            "/v1/views/purchase_stats/rows",
            None,
            Some("read-view:*"),
            200,
        ),
        case(
            "GET",
            "/v1/views/purchase_stats/diff",
            None,
            Some("read-view:*"),
            400,
        ),
        case(
            "POST",
            "/v1/views/purchase_stats/replay",
            Some(json!({"swap": "manual"})),
            Some("admin"),
            202,
        ),
        case(
            "POST",
            "/v1/views/purchase_stats/promote",
            Some(json!({})),
            Some("admin"),
            200,
        ),
        case(
            "POST",
            "/v1/views/purchase_stats/rollback",
            Some(json!({})),
            Some("admin"),
            200,
        ),
        case("GET", "/v1/tokens", None, Some("admin"), 200),
        case(
            "POST",
            "/v1/tokens",
            Some(json!({"name": "made-by-test", "grants": ["metrics"]})),
            Some("admin"),
            201,
        ),
        case(
            "DELETE",
            "/v1/tokens/made-by-test",
            None,
            Some("admin"),
            200,
        ),
    ];
    let wrong_client = anonymous.with_token(wrong);
    let outsider_client = anonymous.with_token(&outsider);
    for (i, c) in cases.iter().enumerate() {
        let what = format!("{} {}", c.method, c.path);
        let reply = send(anonymous, c);
        assert_refused(
            &format!("{what} without a token"),
            &reply,
            401,
            "unauthorized",
        );
        assert!(
            reply.text.contains("Bearer"),
            "{what}: the 401 says how to authenticate: {}",
            reply.text
        );
        assert_refused(
            &format!("{what} with a wrong token"),
            &send(&wrong_client, c),
            401,
            "unauthorized",
        );
        let Some(grant) = c.grant else {
            // Any valid token may call it (lists are filtered).
            let reply = send(&outsider_client, c);
            assert_eq!(reply.status, c.ok, "{what} with any token: {}", reply.text);
            continue;
        };
        let reply = send(&outsider_client, c);
        assert_refused(
            &format!("{what} without the grant"),
            &reply,
            403,
            "forbidden",
        );
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("outsider"),
            "{what}: the 403 names the token: {}",
            reply.text
        );
        let grants: Vec<&str> = grant.split('+').collect();
        let allowed = token_via(anonymous, &format!("allowed-{i}"), &grants);
        let reply = send(&anonymous.with_token(&allowed), c);
        assert_eq!(reply.status, c.ok, "{what} with {grant}: {}", reply.text);
    }
    // The change feed is a stream: its headers tell.
    let feed = "/v1/views/purchase_stats/changes";
    assert_eq!(anonymous.status_only("GET", feed), 401);
    assert_eq!(wrong_client.status_only("GET", feed), 401);
    assert_eq!(outsider_client.status_only("GET", feed), 403);
    let reader = token_via(anonymous, "feed-reader", &["read-view:purchase_stats"]);
    assert_eq!(anonymous.with_token(&reader).status_only("GET", feed), 200);
    // The console and the probes stay open.
    for open in ["/", "/health", "/ready"] {
        assert_eq!(anonymous.get(open).0, 200, "{open}");
    }
    // A 401 carries the challenge.
    let reply = anonymous.send("GET", "/v1/topics", None, &[], None);
    assert_eq!(reply.status, 401);
    let challenge = reply.www_authenticate.unwrap_or_default();
    assert!(challenge.starts_with("Bearer realm="), "{challenge}");
}

#[test]
fn a_producer_token_stays_in_its_scope_and_lists_show_only_what_a_token_may_see() {
    // Auto-creation on: creating a topic by producing to it needs only the
    // produce grant.
    let server = Server::start_env(
        &["--auth", "tokens", "--auto-create-topics", "true"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let root = admin(&server);
    root.sql_ok(&format!("{USER_EVENTS}\n{PURCHASE_STATS}"));
    root.create_topic(&json!({"name": "orders.eu", "partitions": 1}));
    root.create_topic(&json!({"name": "payments", "partitions": 1}));
    let producer =
        server
            .client()
            .with_token(&token(&server, "orders-writer", &["produce:orders.*"]));
    let records = json!({"records": [{"value": {"n": 1}}]});
    assert_eq!(
        producer
            .post_json("/v1/topics/orders.eu/records", &records)
            .0,
        200
    );
    // Auto-create inside the pattern is a produce.
    assert_eq!(
        producer
            .post_json("/v1/topics/orders.us/records", &records)
            .0,
        200
    );
    for (what, (status, body)) in [
        (
            "produce to payments",
            producer.post_json("/v1/topics/payments/records", &records),
        ),
        (
            "read orders.eu",
            producer.get("/v1/topics/orders.eu/partitions/0/records"),
        ),
        ("read a view", producer.get("/v1/views/purchase_stats/rows")),
        (
            "drop a view",
            producer.post_json(
                "/v1/statements",
                &json!({"sql": "DROP TABLE purchase_stats;"}),
            ),
        ),
        ("delete a topic", producer.delete("/v1/topics/orders.eu")),
        (
            "create a token",
            producer.post_json("/v1/tokens", &json!({"name": "x", "grants": ["admin"]})),
        ),
    ] {
        assert_eq!(status, 403, "{what}: {body}");
        assert_eq!(body["error"]["code"], "forbidden", "{what}: {body}");
    }
    let (_, topics) = producer.get("/v1/topics");
    let names: Vec<&str> = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["orders.eu", "orders.us"], "{topics}");
    let (_, views) = producer.get("/v1/views");
    assert_eq!(views["views"], json!([]), "{views}");
    // A read-only token reads the view, cannot change anything with SQL,
    // and a rejected statement in a batch runs none of the batch.
    let reader =
        server
            .client()
            .with_token(&token(&server, "dashboard", &["read-view:purchase_stats"]));
    assert_eq!(reader.get("/v1/views/purchase_stats/rows").0, 200);
    let (status, body) = reader.post_json(
        "/v1/statements",
        &json!({"sql": "SELECT * FROM purchase_stats;"}),
    );
    assert_eq!(status, 200, "{body}");
    let (status, body) = reader.post_json(
        "/v1/statements",
        &json!({"sql": "SELECT * FROM purchase_stats; CREATE TABLE t2 AS SELECT user_id, COUNT(*) AS n FROM user_events GROUP BY user_id;"}),
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["statement"], 1, "{body}");
    assert_eq!(root.get("/v1/views/t2").0, 404, "nothing of the batch ran");
    let (status, body) = reader.post_json("/v1/statements", &json!({"sql": "SHOW TABLES;"}));
    assert_eq!(status, 200, "{body}");
    let shown = body["results"][0]["rows"].as_array().unwrap();
    assert!(
        shown.iter().all(|r| r["name"] == "purchase_stats"),
        "{body}"
    );
    assert_eq!(reader.get("/metrics").0, 403);
}

#[test]
fn a_revoked_token_stops_at_once_and_after_a_restart() {
    let server = start();
    let secret = token(&server, "temp", &["read:*"]);
    let user = server.client().with_token(&secret);
    assert_eq!(user.get("/v1/topics").0, 200);
    let (status, body) = admin(&server).delete("/v1/tokens/temp");
    assert_eq!(status, 200, "{body}");
    assert_eq!(user.get("/v1/topics").0, 401);
    let kept = token(&server, "kept", &["read:*"]);
    let mut server = server;
    server.terminate_ok();
    let server = server.restart();
    assert_eq!(server.client().with_token(&secret).get("/v1/topics").0, 401);
    assert_eq!(server.client().with_token(&kept).get("/v1/topics").0, 200);
    // The bootstrap token cannot be revoked through the API.
    let (status, body) = admin(&server).delete("/v1/tokens/bootstrap");
    assert_eq!(status, 409, "{body}");
}

#[test]
fn the_first_admin_token_comes_from_the_offline_cli_and_clients_use_it() {
    let dir = tempfile::tempdir().unwrap();
    let create = Command::new(kappa_bin())
        .args(["token", "create", "--admin", "--name", "ops", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        create.status.success(),
        "{}",
        String::from_utf8_lossy(&create.stderr)
    );
    let secret = String::from_utf8(create.stdout).unwrap().trim().to_string();
    assert!(secret.starts_with("kp_"), "{secret}");
    let server = Server::start_on(dir.path(), &["--auth", "tokens"]);
    let cli = |token: Option<&str>, args: &[&str]| {
        let mut command = Command::new(kappa_bin());
        command
            .arg("--url")
            .arg(server.url())
            .args(args)
            .env_remove("KAPPA_TOKEN");
        if let Some(token) = token {
            command.env("KAPPA_TOKEN", token);
        }
        command.output().unwrap()
    };
    let refused = cli(None, &["topics", "list"]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("unauthorized"), "{stderr}");
    let listed = cli(
        Some(&secret),
        &["topics", "create", "orders", "--partitions", "1"],
    );
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    // A token made through the API by the CLI, then used with --token.
    let made = cli(
        Some(&secret),
        &[
            "token",
            "create",
            "--name",
            "writer",
            "--grant",
            "produce:orders",
        ],
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let writer = String::from_utf8(made.stdout).unwrap().trim().to_string();
    let list = cli(Some(&secret), &["token", "list"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains("writer") && text.contains("produce:orders") && !text.contains(&writer),
        "{text}"
    );
    let produce = Command::new(kappa_bin())
        .arg("--url")
        .arg(server.url())
        .args(["--token", &writer, "produce", "orders"])
        .env_remove("KAPPA_TOKEN")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(b"{\"value\": {\"n\": 1}}\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        produce.status.success(),
        "{}",
        String::from_utf8_lossy(&produce.stderr)
    );
    // Revoked offline while the server runs: refused on the next request.
    let revoke = Command::new(kappa_bin())
        .args(["token", "revoke", "writer", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        revoke.status.success(),
        "{}",
        String::from_utf8_lossy(&revoke.stderr)
    );
    assert_eq!(
        server
            .client()
            .with_token(&writer)
            .get("/v1/topics/orders")
            .0,
        401
    );
}

#[test]
fn secrets_never_reach_logs_or_error_bodies_and_denials_are_audited() {
    let mut server = start();
    let secret = token(&server, "auditor", &["read:*"]);
    let bad = "kp_this-is-a-wrong-secret-that-must-not-be-echoed";
    let mut bodies = String::new();
    for client in [
        server.client().with_token(bad),
        server.client().with_token(&secret),
    ] {
        for (method, path) in [
            ("DELETE", "/v1/topics/x"),
            ("GET", "/v1/views/v/rows"),
            ("POST", "/v1/tokens"),
        ] {
            let reply = client.send(method, path, Some("application/json"), &[], Some(b"{}"));
            assert!(
                reply.status == 401 || reply.status == 403,
                "{method} {path}: {}",
                reply.text
            );
            bodies.push_str(&reply.text);
        }
    }
    let (status, _) =
        admin(&server).post_json("/v1/topics", &json!({"name": "audited", "partitions": 1}));
    assert_eq!(status, 201);
    let (_, metrics) = {
        let reply = admin(&server).send("GET", "/metrics", None, &[], None);
        (reply.status, reply.text)
    };
    assert!(metrics.contains("kappa_auth_denied_total"), "{metrics}");
    assert!(metrics.contains("kappa_admin_actions_total"), "{metrics}");
    server.terminate_ok();
    let log = server.stderr_log();
    for secret in [secret.as_str(), bad, BOOTSTRAP] {
        assert!(
            !log.contains(secret),
            "a secret is in the server log:\n{log}"
        );
        assert!(
            !bodies.contains(secret),
            "a secret is in an error body: {bodies}"
        );
    }
    assert!(log.contains("request denied"), "{log}");
    assert!(log.contains("auditor"), "403s name the token: {log}");
    assert!(
        log.lines().any(|l| l.contains("admin action")
            && l.contains("bootstrap")
            && l.contains("/v1/topics")),
        "{log}"
    );
}

#[test]
fn no_auth_refuses_a_public_address_unless_overridden() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(kappa_bin())
        .args(["serve", "--listen", "0.0.0.0:0", "--data-dir"])
        .arg(dir.path())
        .env_remove("KAPPA_AUTH")
        .env_remove("KAPPA_INSECURE_NO_AUTH")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--insecure-no-auth") && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "it never listened");
}

#[test]
fn a_short_bootstrap_token_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(kappa_bin())
        .args([
            "serve",
            "--auth",
            "tokens",
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
        ])
        .arg(dir.path())
        .env("KAPPA_BOOTSTRAP_TOKEN", "short")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("KAPPA_BOOTSTRAP_TOKEN"), "{stderr}");
    assert!(!stderr.contains("short\""), "{stderr}");
}

#[test]
fn a_rate_limited_producer_gets_429_with_retry_after() {
    let server = start();
    admin(&server).create_topic(&json!({"name": "t"}));
    let (status, body) = admin(&server).post_json(
        "/v1/tokens",
        &json!({"name": "slow", "grants": ["produce:*"], "produce_records_per_second": 1}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["produce_records_per_second"], 1, "{body}");
    let slow = server.client().with_token(body["token"].as_str().unwrap());
    // One second's worth may go into debt once: 100 records pass...
    let records: Vec<Value> = (0..100).map(|n| json!({"value": {"n": n}})).collect();
    let (status, body) = slow.post_json("/v1/topics/t/records", &json!({"records": records}));
    assert_eq!(status, 200, "{body}");
    // ...and the next request waits ~99 s for the debt to be repaid.
    let reply = slow.send(
        "POST",
        "/v1/topics/t/records",
        Some("application/json"),
        &[],
        Some(br#"{"records": [{"value": 1}]}"#),
    );
    assert_refused("the next produce", &reply, 429, "rate_limited");
    let retry: u64 = reply.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((90..=100).contains(&retry), "Retry-After {retry}");
    // Other tokens are not slowed; nothing of the refused request was stored.
    let (status, _) =
        admin(&server).post_json("/v1/topics/t/records", &json!({"records": [{"value": 2}]}));
    assert_eq!(status, 200);
    assert_eq!(admin(&server).end_offsets("t"), vec![101]);
}
