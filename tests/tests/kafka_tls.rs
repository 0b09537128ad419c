//! The Kafka listener over TLS: with a certificate configured (the HTTPS
//! API's), kcat logs in with SASL_SSL and produces and consumes; a
//! plaintext Kafka client is closed, counted and logged; a client that does
//! not trust the certificate fails the handshake.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kappa_tests::{eventually, json, Server};

mod tls_support;
use tls_support::{handshake_failures, https_client, Files};

const BOOTSTRAP: &str = "bootstrap-secret-for-the-kafka-tls-test";

/// [`kappa_tests::kcat`] with owned arguments.
fn kcat(args: &[String], input: &str) -> (bool, String) {
    kappa_tests::kcat(&args.iter().map(String::as_str).collect::<Vec<_>>(), input)
}

/// kcat's options for SASL/PLAIN over TLS with `password`, trusting
/// `ca_file` (or the system's CAs if `None`), with a bounded broker wait.
fn sasl_ssl(broker: &str, password: &str, ca_file: Option<&str>) -> Vec<String> {
    let mut args = kappa_tests::sasl_args(broker, "SASL_SSL", password);
    if let Some(ca) = ca_file {
        args.extend(["-X".to_string(), format!("ssl.ca.location={ca}")]);
    }
    args
}

#[test]
fn kafka_clients_use_sasl_ssl_and_plaintext_clients_are_closed() {
    let files = Files::new();
    let server: Server = files.start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = https_client(server.addr(), files.ca.der()).with_token(BOOTSTRAP);
    admin.create_topic(&json!({"name": "secure", "partitions": 1}));
    let broker = server.kafka_addr().to_string();
    let ca = files.arg("ca.pem");

    let mut produce = sasl_ssl(&broker, BOOTSTRAP, Some(&ca));
    produce.extend(["-P", "-t", "secure", "-K", ":"].map(String::from));
    let (ok, out) = kcat(&produce, "a:{\"n\":1}\nb:{\"n\":2}\n");
    assert!(ok, "{out}");
    let mut consume = sasl_ssl(&broker, BOOTSTRAP, Some(&ca));
    consume.extend(
        [
            "-C",
            "-t",
            "secure",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%k=%s\\n",
        ]
        .map(String::from),
    );
    let (ok, out) = kcat(&consume, "");
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "a={\"n\":1}\nb={\"n\":2}");
    let stored: Vec<_> = admin
        .read_all("secure", 0)
        .iter()
        .map(|r| (r["key"].clone(), r["value"].clone()))
        .collect();
    assert_eq!(
        stored,
        vec![(json!("a"), json!({"n": 1})), (json!("b"), json!({"n": 2}))]
    );

    // A plaintext Kafka request (ApiVersions v0) is not answered: closed.
    let mut plain = TcpStream::connect(server.kafka_addr()).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut frame = 10i32.to_be_bytes().to_vec();
    frame.extend(18i16.to_be_bytes()); // ApiVersions
    frame.extend(0i16.to_be_bytes());
    frame.extend(1i32.to_be_bytes());
    frame.extend((-1i16).to_be_bytes()); // no client id
    plain.write_all(&frame).unwrap();
    let mut answer = Vec::new();
    let read = plain.read_to_end(&mut answer);
    assert!(
        matches!(&read, Ok(0)) || read.is_err(),
        "plaintext answered: {read:?} {answer:?}"
    );
    eventually(
        "a plain_kafka handshake failure counted",
        Duration::from_secs(20),
        || (handshake_failures(&admin, "plain_kafka") >= 1).then_some(()),
    );
    assert!(
        server.stderr_log().contains("plaintext Kafka connection"),
        "{}",
        server.stderr_log()
    );

    // A client that does not trust the certificate fails the handshake.
    let mut untrusting = sasl_ssl(&broker, BOOTSTRAP, None);
    untrusting.push("-L".into());
    let (ok, out) = kcat(&untrusting, "");
    assert!(!ok, "metadata without trusting the CA: {out}");
    eventually(
        "an error handshake failure counted",
        Duration::from_secs(20),
        || (handshake_failures(&admin, "error") >= 1).then_some(()),
    );
}
