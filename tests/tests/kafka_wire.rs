//! Kafka requests built by hand (with the `kafka-protocol` crate) against
//! the real binary, for what a stock client does not show directly: a
//! Fetch from beyond the end answers `OFFSET_OUT_OF_RANGE`; Metadata
//! creates a missing topic only when the server allows it; and an
//! idempotent producer's sequence numbers, checked on the wire: a batch
//! that skips ahead of its producer's sequence is refused with
//! `OUT_OF_ORDER_SEQUENCE_NUMBER` and nothing is appended, so a batch
//! retried after a failure cannot land after its successor; a repeated
//! batch is answered with its first offset and stored once, also after a
//! `kill -9`.
//!
//! The requests are built with the `kafka-protocol` crate and sent over a
//! plain socket, so each batch's producer id, epoch and sequence are exactly
//! what the test says (a real client only skips a sequence after a failure
//! the test cannot cause on demand).
#![allow(clippy::unwrap_used)] // Test code: a panic is how a test reports failure.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, FetchResponse, InitProducerIdRequest, InitProducerIdResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kappa_tests::Server;
use serde_json::json;

const PRODUCE_VERSION: i16 = 7;
const INIT_PRODUCER_ID_VERSION: i16 = 1;
const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
const FETCH_VERSION: i16 = 11;
const METADATA_VERSION: i16 = 9;
const OFFSET_OUT_OF_RANGE: i16 = 1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// `records` as one v2 record batch compressed with `compression`, as
/// Kafka's encoder writes it.
fn encoded_batch(records: &[Record], compression: Compression) -> Bytes {
    let mut batch = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression,
    };
    RecordBatchEncoder::encode(&mut batch, records.iter(), &options).unwrap();
    batch.freeze()
}

/// A blocking Kafka connection that sends one request at a time.
struct Connection {
    stream: TcpStream,
    correlation: i32,
}

impl Connection {
    fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Connection {
            stream,
            correlation: 0,
        }
    }

    /// Sends `body` as `api` at `version` and answers the decoded response.
    fn call<Rq: Encodable + Message, Rs: Decodable + Message>(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &Rq,
    ) -> Rs {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("sequence-test")));
        let mut payload = BytesMut::new();
        header
            .encode(&mut payload, api.request_header_version(version))
            .unwrap();
        body.encode(&mut payload, version).unwrap();
        let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&payload);
        self.stream.write_all(&frame).unwrap();
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size).unwrap();
        let mut answer = vec![0u8; i32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut answer).unwrap();
        let mut answer = Bytes::from(answer);
        let header =
            ResponseHeader::decode(&mut answer, api.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation);
        Rs::decode(&mut answer, version).unwrap()
    }

    fn init_producer_id(&mut self) -> (i64, i16) {
        let request = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(-1);
        let response: InitProducerIdResponse =
            self.call(ApiKey::InitProducerId, INIT_PRODUCER_ID_VERSION, &request);
        assert_eq!(response.error_code, 0);
        (response.producer_id.0, response.producer_epoch)
    }

    /// Produces records `first..first + count` (values `{"n": i}`) as one
    /// batch of `producer` with sequences starting at `first`; answers the
    /// partition's error code and base offset.
    fn produce(&mut self, topic: &str, producer: (i64, i16), first: i32, count: i32) -> (i16, i64) {
        let records: Vec<Record> = (0..count)
            .map(|i| first.wrapping_add(i))
            .map(|n| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: producer.0,
                producer_epoch: producer.1,
                timestamp_type: TimestampType::Creation,
                offset: n.wrapping_sub(first) as i64,
                sequence: n,
                timestamp: 1_700_000_000_000,
                key: None,
                value: Some(Bytes::from(format!("{{\"n\":{n}}}"))),
                headers: Default::default(),
            })
            .collect();
        self.produce_batch(topic, encoded_batch(&records, Compression::None))
    }

    /// Produces the record batches `batch` to partition 0 of `topic`;
    /// answers the partition's error code and base offset.
    fn produce_batch(&mut self, topic: &str, batch: Bytes) -> (i16, i64) {
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(30_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch))])]);
        let response: ProduceResponse = self.call(ApiKey::Produce, PRODUCE_VERSION, &request);
        let part = &response.responses[0].partition_responses[0];
        (part.error_code, part.base_offset)
    }
}

impl Connection {
    /// Fetches partition 0 of `topic` from `offset` (no wait); answers the
    /// partition's error code and high watermark.
    fn fetch(&mut self, topic: &str, offset: i64) -> (i16, i64) {
        let part = self.fetch_partition(topic, offset);
        (part.error_code, part.high_watermark)
    }

    /// What a fetch of partition 0 of `topic` from `offset` (no wait)
    /// answers for it.
    fn fetch_partition(&mut self, topic: &str, offset: i64) -> PartitionData {
        let request = FetchRequest::default()
            .with_max_wait_ms(0)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(offset)
                    .with_partition_max_bytes(1 << 20)])]);
        let mut response: FetchResponse = self.call(ApiKey::Fetch, FETCH_VERSION, &request);
        response.responses.swap_remove(0).partitions.swap_remove(0)
    }

    /// Produces records `0..count` (values `{"n": i}`, keys `k<i>`) to
    /// partition 0 of `topic` as one batch compressed with `codec`, as a
    /// producer compressing with it does; answers the batch's bytes and the
    /// error code.
    fn produce_compressed(&mut self, topic: &str, count: i32, codec: Compression) -> (Bytes, i16) {
        let records: Vec<Record> = (0..count)
            .map(|n| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: 0,
                producer_id: -1,
                producer_epoch: -1,
                timestamp_type: TimestampType::Creation,
                offset: n as i64,
                // Running along the batch, so the encoder keeps it one
                // batch (of base sequence -1: no producer id).
                sequence: n - 1,
                timestamp: 1_700_000_000_000 + i64::from(n),
                key: Some(Bytes::from(format!("k{n}"))),
                value: Some(Bytes::from(format!("{{\"n\":{n}}}"))),
                headers: Default::default(),
            })
            .collect();
        let batch = encoded_batch(&records, codec);
        (batch.clone(), self.produce_batch(topic, batch).0)
    }

    /// The record batches a fetch of partition 0 of `topic` from `offset`
    /// answers, as sent.
    fn fetch_records(&mut self, topic: &str, offset: i64) -> Bytes {
        let part = self.fetch_partition(topic, offset);
        assert_eq!(part.error_code, 0);
        part.records.unwrap_or_default()
    }

    /// Asks Metadata for `topic`, allowing auto-creation; answers the
    /// topic's error code and partition count.
    fn metadata(&mut self, topic: &str) -> (i16, usize) {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(
                TopicName(StrBytes::from_string(topic.to_string())),
            ))]))
            .with_allow_auto_topic_creation(true);
        let response: MetadataResponse = self.call(ApiKey::Metadata, METADATA_VERSION, &request);
        let t = &response.topics[0];
        (t.error_code, t.partitions.len())
    }
}

#[test]
fn a_fetch_beyond_the_end_is_out_of_range_and_metadata_creates_topics_only_when_allowed() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    client.create_topic(&json!({"name": "reads", "partitions": 1}));
    client.produce("reads", &json!([{"value": {"n": 0}}, {"value": {"n": 1}}]));
    let mut kafka = Connection::open(server.kafka_addr());
    assert_eq!(kafka.fetch("reads", 0), (0, 2));
    assert_eq!(
        kafka.fetch("reads", 2),
        (0, 2),
        "the end itself is in range"
    );
    assert_eq!(kafka.fetch("reads", 3).0, OFFSET_OUT_OF_RANGE);
    assert_eq!(kafka.fetch("reads", -5).0, OFFSET_OUT_OF_RANGE);
    // Auto-creation is off by default: the topic stays unknown.
    assert_eq!(kafka.metadata("fresh").0, UNKNOWN_TOPIC_OR_PARTITION);
    let (status, _) = client.get("/v1/topics/fresh");
    assert_eq!(status, 404);

    let server = Server::start(&[
        "--kafka-listen",
        "127.0.0.1:0",
        "--auto-create-topics",
        "true",
    ]);
    let mut kafka = Connection::open(server.kafka_addr());
    assert_eq!(kafka.metadata("fresh"), (0, 1));
    let (status, body) = server.client().get("/v1/topics/fresh");
    assert_eq!(status, 200, "{body}");
}

/// The `n` of every record stored in partition 0 of `topic`, in offset order.
fn stored(server: &Server, topic: &str) -> Vec<i64> {
    server
        .client()
        .read_all(topic, 0)
        .iter()
        .map(|r| r["value"]["n"].as_i64().unwrap())
        .collect()
}

#[test]
fn a_batch_that_skips_its_producers_sequence_is_refused_and_a_repeat_is_stored_once() {
    let mut server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    server
        .client()
        .create_topic(&json!({"name": "seq", "partitions": 1, "fsync": "always"}));
    let mut kafka = Connection::open(server.kafka_addr());
    let producer = kafka.init_producer_id();

    assert_eq!(kafka.produce("seq", producer, 0, 3), (0, 0));
    // Records 3..6 went missing (their batch failed): 6..9 must wait.
    let (code, _) = kafka.produce("seq", producer, 6, 3);
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    assert_eq!(stored(&server, "seq"), vec![0, 1, 2]);
    // The retry of 3..6 continues the sequence, then 6..9 is accepted.
    assert_eq!(kafka.produce("seq", producer, 3, 3), (0, 3));
    assert_eq!(kafka.produce("seq", producer, 6, 3), (0, 6));
    // A repeat of an acknowledged batch (its answer was lost) is answered
    // with its first offset and not stored again.
    assert_eq!(kafka.produce("seq", producer, 3, 3), (0, 3));
    assert_eq!(stored(&server, "seq"), (0..9).collect::<Vec<_>>());
    // Another producer has its own sequence.
    let other = kafka.init_producer_id();
    assert_ne!(other.0, producer.0);
    assert_eq!(kafka.produce("seq", other, 100, 1), (0, 9));

    // After a kill -9 the server no longer knows the producer's sequence
    // (it is kept in memory): the next batch is accepted, and a repeat is
    // still recognized from the log.
    server.kill9();
    let server = server.restart();
    let mut kafka = Connection::open(server.kafka_addr());
    assert_eq!(kafka.produce("seq", producer, 6, 3), (0, 6));
    assert_eq!(kafka.produce("seq", producer, 9, 3), (0, 10));
    let (code, _) = kafka.produce("seq", producer, 20, 1);
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER);
    let mut want: Vec<i64> = (0..9).collect();
    want.extend([100, 9, 10, 11]);
    assert_eq!(stored(&server, "seq"), want);
}

/// The outside probe's finding: after sequences 0-3 (4 expected next), a
/// batch at `i32::MAX` and one at -5 were both appended (offsets 10 and
/// 11). Only the next sequence or a repeat of a batch accepted is taken.
#[test]
fn a_wrapped_or_negative_sequence_is_refused_and_nothing_is_appended() {
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    server
        .client()
        .create_topic(&json!({"name": "wrap", "partitions": 1}));
    let mut kafka = Connection::open(server.kafka_addr());
    let producer = kafka.init_producer_id();
    for first in 0..4 {
        assert_eq!(kafka.produce("wrap", producer, first, 1), (0, first as i64));
    }
    let (code, _) = kafka.produce("wrap", producer, i32::MAX, 1);
    assert_eq!(
        code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "i32::MAX is no retry of 3"
    );
    let (code, _) = kafka.produce("wrap", producer, -5, 1);
    assert_eq!(code, OUT_OF_ORDER_SEQUENCE_NUMBER, "a negative sequence");
    let (code, _) = kafka.produce("wrap", producer, 1, 2);
    assert_eq!(
        code, OUT_OF_ORDER_SEQUENCE_NUMBER,
        "1..3 is no batch accepted"
    );
    assert_eq!(stored(&server, "wrap"), vec![0, 1, 2, 3]);
    // A real retry is still answered with its offset; the sequence goes on.
    assert_eq!(kafka.produce("wrap", producer, 2, 1), (0, 2));
    assert_eq!(kafka.produce("wrap", producer, 4, 1), (0, 4));
    assert_eq!(stored(&server, "wrap"), vec![0, 1, 2, 3, 4]);
}

/// The attributes' codec bits of the first batch in `batches` (`4`: zstd).
fn codec_of(batches: &Bytes) -> i16 {
    i16::from_be_bytes([batches[21], batches[22]]) & 0b111
}

/// The offsets and `n` values of the records in `batches`.
fn decoded(batches: &Bytes) -> Vec<(i64, i64)> {
    let mut buf = batches.clone();
    RecordBatchDecoder::decode_all(&mut buf)
        .unwrap()
        .iter()
        .flat_map(|set| set.records.iter())
        .map(|r| {
            let value: serde_json::Value =
                serde_json::from_slice(r.value.as_ref().unwrap()).unwrap();
            (r.offset, value["n"].as_i64().unwrap())
        })
        .collect()
}

#[test]
fn a_zstd_or_lz4_batch_in_a_topic_of_its_codec_is_stored_and_served_as_the_producer_compressed_it()
{
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    let mut kafka = Connection::open(server.kafka_addr());
    let all: Vec<(i64, i64)> = (0..50).map(|n| (n, n)).collect();
    // Kafka's codec bits: 3 lz4, 4 zstd.
    for (codec, name, bits) in [(Compression::Zstd, "zstd", 4), (Compression::Lz4, "lz4", 3)] {
        client.create_topic(&json!({"name": name, "partitions": 1, "compression_type": name}));
        let (sent, code) = kafka.produce_compressed(name, 50, codec);
        assert_eq!(code, 0);
        assert_eq!(codec_of(&sent), bits);

        // Served whole: the producer's compressed records, byte for byte,
        // after Kafka's 61-byte batch header.
        let served = kafka.fetch_records(name, 0);
        assert_eq!(codec_of(&served), bits, "{name}");
        assert_eq!(served[61..], sent[61..], "{name}");
        assert_eq!(decoded(&served), all, "{name}");
        // Read over HTTP (and so by views): the same records.
        assert_eq!(stored(&server, name), (0..50).collect::<Vec<_>>());
        // A fetch from inside the batch gets the records from there.
        let from_20 = kafka.fetch_records(name, 20);
        assert_eq!(decoded(&from_20), all[20..].to_vec(), "{name}");
    }

    // A topic of another codec stores the records its own way: served
    // uncompressed.
    client.create_topic(&json!({"name": "plain", "partitions": 1}));
    assert_eq!(
        kafka.produce_compressed("plain", 50, Compression::Zstd).1,
        0
    );
    let served = kafka.fetch_records("plain", 0);
    assert_eq!(codec_of(&served), 0);
    assert_eq!(decoded(&served), all);
}

#[test]
fn a_fetch_of_a_compressed_topic_keeps_to_its_byte_budget_in_what_it_answers() {
    // Stored compressed, a batch takes far less than it answers: a fetch
    // counted in stored bytes answered tens of times its budget (over
    // librdkafka's 100 MB receive limit for a 10 MB partition budget).
    let server = Server::start(&["--kafka-listen", "127.0.0.1:0"]);
    let client = server.client();
    client.create_topic(&json!({"name": "packed", "partitions": 1, "compression_type": "zstd"}));
    // 8 batches of ~420 KB each as answered, a few KB each as stored.
    let value = "x".repeat(400);
    for _ in 0..8 {
        let records: Vec<_> = (0..1000).map(|_| json!({"value": {"x": value}})).collect();
        client.produce("packed", &serde_json::Value::Array(records));
    }
    let mut kafka = Connection::open(server.kafka_addr());
    // Partition budget 1 MiB: batches until it is reached, no more.
    let answered = kafka.fetch_records("packed", 0);
    let records = decoded_count(&answered);
    assert!(
        answered.len() < 1_600_000,
        "{} bytes answered for a 1 MiB budget",
        answered.len()
    );
    assert!(records >= 2000, "up to the budget: {records}");
    // The next fetch goes on from there.
    let next = kafka.fetch_records("packed", records as i64);
    assert!(decoded_count(&next) > 0);
}

/// How many records the record batches `batches` hold.
fn decoded_count(batches: &Bytes) -> usize {
    let mut buf = batches.clone();
    RecordBatchDecoder::decode_all(&mut buf)
        .unwrap()
        .iter()
        .map(|set| set.records.len())
        .sum()
}
