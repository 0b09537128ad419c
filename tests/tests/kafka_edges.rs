//! The Kafka listener's unhappy paths: SASL/PLAIN with tokens (no login,
//! a wrong password, a token without the grant) through kcat, and raw
//! frames no client would send (oversized, malformed, unsupported APIs and
//! versions) — each closes only its own connection with the reason in the
//! log and a metric, and the server goes on serving.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use kappa_tests::{json, kcat, raw_request, sasl_args, Server};

const BOOTSTRAP: &str = "bootstrap-secret-for-the-kafka-tests";

/// kcat's options for a SASL/PLAIN login with `password`.
fn sasl(broker: &str, password: &str) -> Vec<String> {
    sasl_args(broker, "SASL_PLAINTEXT", password)
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn with_tokens_kafka_clients_log_in_with_sasl_plain_and_grants_apply() {
    let server = Server::start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = server.client().with_token(BOOTSTRAP);
    admin.create_topic(&json!({"name": "orders", "partitions": 1}));
    let (status, body) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "reader", "grants": ["read:orders"]}),
    );
    assert_eq!(status, 201, "{body}");
    let reader = body["token"].as_str().unwrap().to_string();
    let broker = server.kafka_addr().to_string();

    // No login: the listener closes the connection and says why.
    let (ok, out) = kcat(&["-b", &broker, "-L", "-m", "5"], "");
    assert!(!ok, "metadata without a login: {out}");
    assert!(
        server.stderr_log().contains("before a SASL login"),
        "{}",
        server.stderr_log()
    );

    // A wrong password is refused.
    let mut list = sasl(&broker, "kp_not-a-token");
    list.push("-L".into());
    let (ok, out) = kcat(&args(&list), "");
    assert!(!ok && out.contains("uthentication"), "{out}");

    // The admin token produces; the reader token may read but not produce.
    let mut produce = sasl(&broker, BOOTSTRAP);
    produce.extend(["-P", "-t", "orders"].map(String::from));
    let (ok, out) = kcat(&args(&produce), "{\"n\":1}\n");
    assert!(ok, "{out}");
    let mut refused = sasl(&broker, &reader);
    refused.extend(["-P", "-t", "orders"].map(String::from));
    let (_, out) = kcat(&args(&refused), "{\"n\":2}\n");
    assert!(out.contains("uthorization"), "{out}");
    let mut consume = sasl(&broker, &reader);
    consume.extend(["-C", "-t", "orders", "-o", "beginning", "-e", "-q"].map(String::from));
    let (ok, out) = kcat(&args(&consume), "");
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "{\"n\":1}");
}

/// Sends `frame` (size prefix included) on a new connection; answers what
/// came back before the server closed it (or the first answer frame).
fn exchange(addr: SocketAddr, frame: &[u8]) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    stream.write_all(frame).unwrap();
    let mut size = [0u8; 4];
    match stream.read_exact(&mut size) {
        Ok(()) => {
            let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
            stream.read_exact(&mut body).unwrap();
            body
        }
        Err(e) => {
            assert!(
                matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                ),
                "the server should close the connection, not hang: {e}"
            );
            Vec::new()
        }
    }
}

/// A request frame: header v1 (key, version, correlation id, client id
/// "raw") and `body`.
fn request(key: i16, version: i16, correlation: i32, body: &[u8]) -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend(key.to_be_bytes());
    payload.extend(version.to_be_bytes());
    payload.extend(correlation.to_be_bytes());
    payload.extend(3i16.to_be_bytes());
    payload.extend(b"raw");
    payload.extend(body);
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend(payload);
    frame
}

#[test]
fn frames_no_client_sends_close_only_their_connection_with_the_reason_logged() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let kafka = server.kafka_addr();

    // ApiVersions at a version above ours: answered at v0 with
    // UNSUPPORTED_VERSION (35) and the list, as Kafka does.
    let answer = exchange(kafka, &request(18, 99, 7, b""));
    assert_eq!(&answer[..4], &7i32.to_be_bytes(), "correlation id");
    assert_eq!(&answer[4..6], &35i16.to_be_bytes(), "error code");
    assert!(answer.len() > 12, "the list of APIs follows");

    // An oversized frame is refused before its body is read.
    assert!(exchange(kafka, &i32::MAX.to_be_bytes()).is_empty());
    // A frame too short for a header.
    assert!(exchange(kafka, &[0, 0, 0, 2, 0, 0]).is_empty());
    // An API that is not served (DeleteRecords) and an unknown key.
    assert!(exchange(kafka, &request(21, 0, 1, &[0, 0, 0, 0])).is_empty());
    assert!(exchange(kafka, &request(999, 0, 1, b"")).is_empty());
    // A Metadata request whose body is garbage.
    assert!(exchange(kafka, &request(3, 1, 1, &[0xff, 0xff, 0xff, 0x7f, 1])).is_empty());

    let log = server.stderr_log();
    for reason in [
        "request size out of range",
        "DeleteRecords v0 is not supported",
        "unknown API key 999",
        "malformed Metadata v1 request",
    ] {
        assert!(log.contains(reason), "{reason:?} not logged:\n{log}");
    }
    let metrics = raw_request(server.addr(), "GET", "/metrics", &[], b"");
    let metrics = String::from_utf8(metrics.body).unwrap();
    for reason in ["request_size", "unsupported", "malformed"] {
        let series = format!("kappa_kafka_connections_closed_total{{reason=\"{reason}\"}}");
        assert!(metrics.contains(&series), "{series} missing:\n{metrics}");
    }
    assert_eq!(
        server.client().status_only("GET", "/health"),
        200,
        "the server goes on"
    );
    // And Kafka clients still get served.
    let (ok, out) = kcat(&["-b", &kafka.to_string(), "-L", "-m", "10"], "");
    assert!(ok, "{out}");
}
