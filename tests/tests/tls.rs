//! HTTPS (`--tls-cert`, `--tls-key`) against the real binary: clients that
//! trust the test's CA (ureq, curl, the `kappa` CLI with `--ca-cert`) use
//! the API; plain HTTP on the port gets `400 tls_required`; clients that do
//! not trust the CA fail the handshake; SIGHUP swaps the certificate and a
//! broken file keeps the old one; a silent connection is closed like an idle
//! one and cannot hold a slot; a missing file stops the start.
//!
//! Certificates are made here with rcgen: a CA and a server certificate for
//! `127.0.0.1` and `localhost`, written to a temp dir.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use kappa_tests::{assert_error, eventually, json, kappa_bin, Client, Server, HTTP_TIMEOUT};

mod tls_support;
use tls_support::{handshake_failures, https_client, metric_value, Ca, Files};

/// Longest wait for a reload or a metric to show.
const SHOW_TIMEOUT: Duration = Duration::from_secs(20);

fn healthy(client: &Client) -> Result<(), String> {
    let reply = client.try_send("GET", "/health", None, &[], None)?;
    match reply.status {
        200 => Ok(()),
        status => Err(format!("status {status}: {}", reply.text)),
    }
}

/// Waits until the failure counter of `reason` reaches `at_least`.
fn wait_for_failures(client: &Client, reason: &str, at_least: u64) {
    eventually(
        &format!("{reason} handshake failures >= {at_least}"),
        SHOW_TIMEOUT,
        || (handshake_failures(client, reason) >= at_least).then_some(()),
    );
}

/// Runs the `kappa` CLI with a clean `KAPPA_*` environment.
fn kappa_cli(args: &[&str]) -> Output {
    let mut command = Command::new(kappa_bin());
    command.args(args);
    for key in ["KAPPA_URL", "KAPPA_CA_CERT", "KAPPA_TOKEN"] {
        command.env_remove(key);
    }
    command.output().unwrap()
}

#[test]
fn https_serves_the_api_to_clients_trusting_the_ca() {
    let files = Files::new();
    let server = files.start(&[]);
    let client = https_client(server.addr(), files.ca.der());

    client.create_topic(&json!({"name": "secure", "partitions": 1}));
    let produced = client.produce(
        "secure",
        &json!([{"key": "k", "value": {"n": 1}}, {"key": "k", "value": {"n": 2}}]),
    );
    assert_eq!(produced.len(), 2);
    let records = client.read_all("secure", 0);
    let values: Vec<_> = records.iter().map(|r| r["value"]["n"].clone()).collect();
    assert_eq!(values, vec![json!(1), json!(2)]);

    let curl = Command::new("/usr/bin/curl")
        .args(["--silent", "--show-error", "--fail", "--max-time", "30"])
        .arg("--cacert")
        .arg(files.path("ca.pem"))
        .arg(format!("https://127.0.0.1:{}/health", server.addr().port()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        curl.status.success(),
        "curl: {}",
        String::from_utf8_lossy(&curl.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&curl.stdout).unwrap();
    assert_eq!(body, json!({"status": "ok"}));
}

#[test]
fn plain_http_on_the_https_port_is_told_to_use_https() {
    let files = Files::new();
    let server = files.start(&[]);
    let addr = server.addr();
    let https = https_client(addr, files.ca.der());

    // Byte for byte: the answer, then the close.
    let mut raw = TcpStream::connect(addr).unwrap();
    raw.set_read_timeout(Some(HTTP_TIMEOUT)).unwrap();
    write!(raw, "GET /health HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
    assert!(head.contains("Content-Type: application/json"), "{head}");
    assert!(head.contains("Connection: close"), "{head}");
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        body["error"]["message"],
        format!("this port serves HTTPS: use https://{addr}/")
    );

    // An HTTP client sees the API's error shape.
    let plain = Client::new(format!("http://{addr}"));
    let reply = plain
        .try_send("GET", "/v1/topics", None, &[], None)
        .unwrap();
    assert_error("plain HTTP", reply.status, &reply.body, 400, "tls_required");

    // Garbage that is not HTTP either: answered or closed, nothing worse.
    let mut garbage = TcpStream::connect(addr).unwrap();
    garbage.set_read_timeout(Some(HTTP_TIMEOUT)).unwrap();
    garbage.write_all(&[0u8; 64]).unwrap();
    garbage.shutdown(std::net::Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest);

    healthy(&https).unwrap();
    wait_for_failures(&https, "plain_http", 3);
}

#[test]
fn clients_that_do_not_trust_the_ca_fail_the_handshake() {
    let files = Files::new();
    let server = files.start(&[]);
    let trusting = https_client(server.addr(), files.ca.der());
    let stranger = https_client(server.addr(), Ca::new("kappa test CA 2").der());
    let public_roots = Client::new(format!("https://{}", server.addr()));

    for client in [&stranger, &public_roots] {
        let error = healthy(client).unwrap_err();
        assert!(error.contains("certificate"), "{error}");
    }
    healthy(&trusting).unwrap();
    wait_for_failures(&trusting, "error", 2);
}

#[test]
fn sighup_reloads_the_certificate_and_a_broken_file_keeps_the_old_one() {
    let files = Files::new();
    let server = files.start(&[]);
    let first = https_client(server.addr(), files.ca.der());
    let second_ca = Ca::new("kappa test CA 2");
    let second = https_client(server.addr(), second_ca.der());
    healthy(&first).unwrap();
    assert!(healthy(&second).is_err());

    files.install(&second_ca);
    hang_up(&server);
    eventually("the second CA's certificate", SHOW_TIMEOUT, || {
        healthy(&second).ok()
    });
    assert!(healthy(&first).is_err());
    // Logged just after the swap: a handshake may see the new certificate first.
    let reloaded = eventually("the reload in the log", SHOW_TIMEOUT, || {
        let log = server.stderr_log();
        log.lines()
            .find(|l| l.contains("TLS certificate reloaded"))
            .map(str::to_string)
    });
    assert!(reloaded.contains(&files.arg("cert.pem")), "{reloaded}");

    std::fs::write(files.path("cert.pem"), "not a certificate\n").unwrap();
    hang_up(&server);
    let failed = eventually("the failed reload in the log", SHOW_TIMEOUT, || {
        let log = server.stderr_log();
        log.lines()
            .find(|l| l.contains("not reloaded"))
            .map(str::to_string)
    });
    assert!(failed.contains(&files.arg("cert.pem")), "{failed}");
    healthy(&second).unwrap();
    assert!(!server.stderr_log().contains("PRIVATE KEY"));
}

/// SIGHUP to the server, by its own child PID.
fn hang_up(server: &Server) {
    let pid = libc::pid_t::try_from(server.pid().expect("running")).unwrap();
    // SAFETY: kill(2) on our own unreaped child.
    let rc = unsafe { libc::kill(pid, libc::SIGHUP) };
    assert_eq!(rc, 0, "kill: {}", std::io::Error::last_os_error());
}

#[test]
fn the_cli_talks_https_with_ca_cert() {
    let files = Files::new();
    let server = files.start(&[]);
    let url = format!("https://127.0.0.1:{}", server.addr().port());
    let ca = files.arg("ca.pem");
    let with_ca = |args: &[&str]| {
        let mut all = vec!["--url", &url, "--ca-cert", &ca];
        all.extend_from_slice(args);
        kappa_cli(&all)
    };

    let created = with_ca(&["topics", "create", "over-tls"]);
    assert!(created.status.success(), "{created:?}");
    let listed = with_ca(&["topics", "list"]);
    assert!(listed.status.success(), "{listed:?}");
    assert!(String::from_utf8_lossy(&listed.stdout).contains("over-tls"));

    let untrusted = kappa_cli(&["--url", &url, "topics", "list"]);
    assert!(!untrusted.status.success());
    let stderr = String::from_utf8_lossy(&untrusted.stderr);
    assert!(stderr.contains("certificate"), "{stderr}");

    let missing = files.arg("missing-ca.pem");
    let bad_ca = kappa_cli(&["--url", &url, "--ca-cert", &missing, "topics", "list"]);
    assert!(!bad_ca.status.success());
    let stderr = String::from_utf8_lossy(&bad_ca.stderr);
    assert!(stderr.contains(&missing), "{stderr}");
}

#[test]
fn a_missing_certificate_file_stops_the_start_naming_it() {
    let files = Files::new();
    let data = tempfile::tempdir().unwrap();
    let missing = files.arg("missing-cert.pem");
    let mut command = Command::new(kappa_bin());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("KAPPA_") {
            command.env_remove(key);
        }
    }
    let mut child = command
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .args(["--tls-cert", &missing, "--tls-key", &files.arg("key.pem")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status = eventually("kappa serve to exit", SHOW_TIMEOUT, || {
        child.try_wait().unwrap()
    });
    let output = child.wait_with_output().unwrap();
    assert!(!status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&missing), "{stderr}");
    assert!(
        !String::from_utf8_lossy(&output.stdout).contains("listening on"),
        "the port is not announced"
    );
}

/// Writes the server's config file with `first_request_timeout_ms`.
fn config_with_first_request_timeout(dir: &Path, ms: u64) -> String {
    let path = dir.join("kappa.toml");
    std::fs::write(&path, format!("first_request_timeout_ms = {ms}\n")).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_connection_that_never_handshakes_is_closed_like_an_idle_one() {
    let files = Files::new();
    let config = config_with_first_request_timeout(files.dir.path(), 300);
    let server = files.start(&["--config", &config]);
    let https = https_client(server.addr(), files.ca.der());

    // Silent, and stalled inside the first TLS record.
    let silent = TcpStream::connect(server.addr()).unwrap();
    let mut stalled = TcpStream::connect(server.addr()).unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).unwrap();
    for mut stream in [silent, stalled] {
        let started = Instant::now();
        stream.set_read_timeout(Some(HTTP_TIMEOUT)).unwrap();
        let mut buf = [0u8; 16];
        let read = stream.read(&mut buf);
        assert!(
            matches!(read, Ok(0)) || (read.is_err() && started.elapsed() < HTTP_TIMEOUT),
            "{read:?}"
        );
    }
    healthy(&https).unwrap();
    wait_for_failures(&https, "timeout", 2);
}

#[test]
fn at_the_connection_limit_a_silent_connection_makes_room() {
    let files = Files::new();
    // Long enough that only eviction can free a slot within the test.
    let config = config_with_first_request_timeout(files.dir.path(), 600_000);
    let server = files.start(&["--config", &config, "--max-connections", "2"]);
    let https = https_client(server.addr(), files.ca.der());

    let mut silent: Vec<TcpStream> = (0..2)
        .map(|_| TcpStream::connect(server.addr()).unwrap())
        .collect();
    // A data request needs one of the two regular slots (probes such as
    // `/health` have reserved ones): the oldest silent connection gives
    // its slot up.
    for _ in 0..3 {
        let reply = https.send("GET", "/v1/topics", None, &[], None);
        assert_eq!(reply.status, 200, "{}", reply.text);
    }
    let evicted = "kappa_http_connections_closed_total{reason=\"connection_limit\"}";
    assert!(
        metric_value(&https, evicted) >= 1,
        "no silent connection was closed to make room"
    );
    let oldest = &mut silent[0];
    oldest.set_read_timeout(Some(HTTP_TIMEOUT)).unwrap();
    let mut buf = [0u8; 16];
    let read = oldest.read(&mut buf);
    assert!(
        matches!(read, Ok(0))
            || read
                .as_ref()
                .is_err_and(|e| e.kind() != std::io::ErrorKind::WouldBlock
                    && e.kind() != std::io::ErrorKind::TimedOut),
        "the oldest silent connection is still open: {read:?}"
    );
}
