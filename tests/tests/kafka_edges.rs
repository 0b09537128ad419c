//! The Kafka listener's unhappy paths: SASL/PLAIN with tokens (no login,
//! a wrong password, a token without the grant) through kcat, and raw
//! frames no client would send (oversized, malformed, unsupported APIs and
//! versions, arrays claiming more elements than the frame holds — the
//! outside probe's pre-login crasher) — each closes only its own
//! connection with the reason in the log and a metric, and the server goes
//! on serving; a failed SASL login closes its connection too.
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::FetchTopic;
use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::TopicProduceData;
use kafka_protocol::messages::{
    ApiKey, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    DescribeGroupsRequest, FetchRequest, GroupId, JoinGroupRequest, MetadataRequest,
    OffsetCommitRequest, OffsetFetchRequest, ProduceRequest, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
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

/// The outside probe's 19-byte Metadata v1 frame (size prefix included):
/// a topic array claiming `0x7fffffff` entries. It aborted the server
/// (`memory allocation of 154618822584 bytes failed`) before any login.
fn metadata_claiming_2_pow_31_topics() -> Vec<u8> {
    let mut payload = Vec::new();
    payload.extend(3i16.to_be_bytes());
    payload.extend(1i16.to_be_bytes());
    payload.extend(1i32.to_be_bytes());
    payload.extend(1i16.to_be_bytes());
    payload.push(b'x');
    payload.extend(0x7fff_ffffi32.to_be_bytes());
    let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
    frame.extend(payload);
    assert_eq!(frame.len(), 19);
    frame
}

/// The bytes of `request` as `api` at `version` after a request header
/// (correlation id 1, client id "raw"), without the size prefix.
fn payload(api: ApiKey, version: i16, request: &impl Encodable) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("raw")));
    let mut payload = BytesMut::new();
    header
        .encode(&mut payload, api.request_header_version(version))
        .unwrap();
    request.encode(&mut payload, version).unwrap();
    payload
}

/// A well-formed `request` of `api` at `version` whose first array count
/// (as the server's decoder finds it) claims `0x7fffffff` elements; the
/// frame with its size prefix.
fn claiming_a_huge_array<Rq>(api: ApiKey, version: i16, request: &Rq) -> Vec<u8>
where
    Rq: kafka_protocol::protocol::Encodable,
{
    let payload = payload(api, version, request);
    for at in 8..payload.len() - 3 {
        let mut mutated = payload.to_vec();
        mutated[at..at + 4].copy_from_slice(&0x7fff_ffffi32.to_be_bytes());
        let refused = kappa_kafka_codec::decode_request(Bytes::from(mutated.clone()))
            .is_err_and(|e| e.to_string().contains("exceeds"));
        if refused {
            let mut frame = (mutated.len() as i32).to_be_bytes().to_vec();
            frame.extend(mutated);
            return frame;
        }
    }
    panic!("{api:?} v{version}: no array count found");
}

/// Frames claiming 2^31 elements in each API the probe named, at the
/// version it used.
fn frames_claiming_huge_arrays() -> Vec<(ApiKey, Vec<u8>)> {
    let topic = || TopicName(StrBytes::from_static_str("t"));
    let group = || GroupId(StrBytes::from_static_str("g"));
    vec![
        (
            ApiKey::Produce,
            claiming_a_huge_array(
                ApiKey::Produce,
                3,
                &ProduceRequest::default()
                    .with_topic_data(vec![TopicProduceData::default().with_name(topic())]),
            ),
        ),
        (
            ApiKey::Fetch,
            claiming_a_huge_array(
                ApiKey::Fetch,
                4,
                &FetchRequest::default()
                    .with_topics(vec![FetchTopic::default().with_topic(topic())]),
            ),
        ),
        (
            ApiKey::OffsetCommit,
            claiming_a_huge_array(
                ApiKey::OffsetCommit,
                2,
                &OffsetCommitRequest::default()
                    .with_group_id(group())
                    .with_topics(vec![OffsetCommitRequestTopic::default().with_name(topic())]),
            ),
        ),
        (
            ApiKey::OffsetFetch,
            claiming_a_huge_array(
                ApiKey::OffsetFetch,
                1,
                &OffsetFetchRequest::default()
                    .with_group_id(group())
                    .with_topics(Some(vec![
                        OffsetFetchRequestTopic::default().with_name(topic())
                    ])),
            ),
        ),
        (
            ApiKey::JoinGroup,
            claiming_a_huge_array(
                ApiKey::JoinGroup,
                0,
                &JoinGroupRequest::default().with_group_id(group()),
            ),
        ),
        (
            ApiKey::DescribeGroups,
            claiming_a_huge_array(
                ApiKey::DescribeGroups,
                0,
                &DescribeGroupsRequest::default().with_groups(vec![group()]),
            ),
        ),
        (
            ApiKey::CreateTopics,
            claiming_a_huge_array(
                ApiKey::CreateTopics,
                2,
                &CreateTopicsRequest::default()
                    .with_topics(vec![CreatableTopic::default().with_name(topic())]),
            ),
        ),
        (
            ApiKey::DeleteTopics,
            claiming_a_huge_array(
                ApiKey::DeleteTopics,
                1,
                &DeleteTopicsRequest::default().with_topic_names(vec![topic()]),
            ),
        ),
        (
            ApiKey::DescribeConfigs,
            claiming_a_huge_array(
                ApiKey::DescribeConfigs,
                1,
                &DescribeConfigsRequest::default().with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(2)
                        .with_resource_name(StrBytes::from_static_str("t")),
                ]),
            ),
        ),
    ]
}

#[test]
fn a_frame_claiming_more_elements_than_it_holds_closes_only_its_connection_before_login() {
    let server = Server::start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let kafka = server.kafka_addr();
    assert!(
        exchange(kafka, &metadata_claiming_2_pow_31_topics()).is_empty(),
        "the connection is closed without an answer"
    );
    let frames = frames_claiming_huge_arrays();
    for (api, frame) in &frames {
        assert!(exchange(kafka, frame).is_empty(), "{api:?}");
    }
    // Before a login a frame may be at most 512 KiB: a larger one is
    // refused before its body is read.
    let mut big = (600i32 << 10).to_be_bytes().to_vec();
    big.extend(3i16.to_be_bytes());
    assert!(exchange(kafka, &big).is_empty());

    assert_eq!(
        server.client().status_only("GET", "/health"),
        200,
        "the server lives"
    );
    let log = server.stderr_log();
    assert!(log.contains("Array length 2147483647 exceeds"), "{log}");
    assert!(!log.contains("memory allocation"), "{log}");
    let metrics = raw_request(
        server.addr(),
        "GET",
        "/metrics",
        &[("authorization", &format!("Bearer {BOOTSTRAP}"))],
        b"",
    );
    let metrics = String::from_utf8(metrics.body).unwrap();
    let malformed = metrics
        .lines()
        .find_map(|l| l.strip_prefix("kappa_kafka_connections_closed_total{reason=\"malformed\"} "))
        .map_or(0, |v| v.trim().parse::<u64>().unwrap());
    assert_eq!(malformed, 1 + frames.len() as u64, "{metrics}");
    // A client that logs in is still served.
    let mut list = sasl(&kafka.to_string(), BOOTSTRAP);
    list.push("-L".into());
    let (ok, out) = kcat(&args(&list), "");
    assert!(ok, "{out}");
}

/// A raw Kafka connection sending one request at a time.
struct RawKafka {
    stream: TcpStream,
}

impl RawKafka {
    fn open(addr: SocketAddr) -> RawKafka {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        RawKafka { stream }
    }

    /// Sends `request` as `api` at `version`; the answer's body, or `None`
    /// when the server closed the connection instead.
    fn call(&mut self, api: ApiKey, version: i16, request: &impl Encodable) -> Option<Bytes> {
        let payload = payload(api, version, request);
        let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&payload);
        self.stream.write_all(&frame).ok()?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).ok()?;
        let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut answer).ok()?;
        let mut answer = Bytes::from(answer);
        ResponseHeader::decode(&mut answer, api.response_header_version(version)).unwrap();
        Some(answer)
    }

    /// Logs in over SASL/PLAIN with `password`: the error code.
    fn login(&mut self, password: &str) -> i16 {
        let handshake =
            SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
        self.call(ApiKey::SaslHandshake, 1, &handshake)
            .expect("handshake answered");
        let login = SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from(format!("\0someone\0{password}")));
        let mut answer = self
            .call(ApiKey::SaslAuthenticate, 1, &login)
            .expect("login answered");
        SaslAuthenticateResponse::decode(&mut answer, 1)
            .unwrap()
            .error_code
    }

    /// Whether a Metadata request (all topics) is answered.
    fn metadata_answered(&mut self) -> bool {
        self.call(ApiKey::Metadata, 1, &MetadataRequest::default())
            .is_some()
    }
}

/// Logs in with `password` on a new connection: the login's error code
/// and whether the server then closed the connection.
fn sasl_login(addr: SocketAddr, password: &str) -> (i16, bool) {
    let mut kafka = RawKafka::open(addr);
    let code = kafka.login(password);
    (code, !kafka.metadata_answered())
}

#[test]
fn a_failed_sasl_login_closes_the_connection_and_is_counted_per_address() {
    let server = Server::start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let kafka = server.kafka_addr();
    const SASL_AUTHENTICATION_FAILED: i16 = 58;
    assert_eq!(
        sasl_login(kafka, "kp_wrong-1"),
        (SASL_AUTHENTICATION_FAILED, true),
        "answered, then closed: no second try on the connection"
    );
    assert_eq!(
        sasl_login(kafka, "kp_wrong-2"),
        (SASL_AUTHENTICATION_FAILED, true)
    );
    assert_eq!(
        sasl_login(kafka, BOOTSTRAP),
        (0, false),
        "a right token logs in"
    );
    let log = server.stderr_log();
    assert!(
        log.contains("failures_from_address=2") && log.contains("SASL login failed"),
        "{log}"
    );
    let metrics = raw_request(
        server.addr(),
        "GET",
        "/metrics",
        &[("authorization", &format!("Bearer {BOOTSTRAP}"))],
        b"",
    );
    let metrics = String::from_utf8(metrics.body).unwrap();
    assert!(
        metrics.contains("kappa_kafka_connections_closed_total{reason=\"login_failed\"} 2"),
        "{metrics}"
    );
}

#[test]
fn a_kafka_connection_whose_token_is_revoked_is_closed_at_its_next_request() {
    let server = Server::start_env(
        &["--auth", "tokens", "--kafka-listen", "127.0.0.1:0"],
        &[("KAPPA_BOOTSTRAP_TOKEN", BOOTSTRAP)],
    );
    let admin = server.client().with_token(BOOTSTRAP);
    let (status, body) = admin.post_json(
        "/v1/tokens",
        &json!({"name": "producer", "grants": ["produce:orders"]}),
    );
    assert_eq!(status, 201, "{body}");
    let token = body["token"].as_str().unwrap().to_string();
    let mut kafka = RawKafka::open(server.kafka_addr());
    assert_eq!(kafka.login(&token), 0);
    assert!(kafka.metadata_answered(), "served while the token is valid");
    let (status, body) = admin.delete("/v1/tokens/producer");
    assert_eq!(status, 200, "{body}");
    assert!(
        !kafka.metadata_answered(),
        "closed once the token is revoked"
    );
    let log = server.stderr_log();
    assert!(
        log.contains("was revoked after this connection logged in"),
        "{log}"
    );
}
