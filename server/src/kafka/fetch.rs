//! `Fetch` and `ListOffsets`: stored records go out as Kafka record
//! batches (v2), one per stored batch, holding exactly the records from
//! the fetch offset on: uncompressed, except a Kafka producer's zstd or
//! lz4 batch stored as sent (FORMAT.md §2.10), which goes out as the producer
//! compressed it when the fetch takes it whole.
//!
//! A fetch that finds fewer than `min_bytes` waits (without polling: the
//! partitions' end offsets wake it) until data arrives, `max_wait_ms`
//! passes or the server shuts down. Fetch sessions (KIP-227) are not kept:
//! every answer has session id 0, so clients send full fetches.

use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, FetchResponse, ListOffsetsRequest, ListOffsetsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record as KafkaRecord, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kappa_log::{KafkaRecords, LogError, Partition};

use super::conn::Session;
use super::{errors, Broker};
use crate::auth::Need;

/// The longest a fetch waits for data, whatever the client asks.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// Answers a `Fetch` request, waiting for data as the request allows.
pub async fn fetch(
    broker: &Broker,
    session: &Session,
    request: FetchRequest,
    version: i16,
) -> FetchResponse {
    let wait = Duration::from_millis(request.max_wait_ms.max(0) as u64).min(MAX_WAIT);
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let (response, bytes, final_answer) = read(broker, session, &request, version);
        let now = tokio::time::Instant::now();
        if final_answer || bytes >= request.min_bytes.max(1) as usize || now >= deadline {
            return response;
        }
        if !wait_for_data(broker, &request, deadline).await {
            // Shutdown: answer with what there is.
            return read(broker, session, &request, version).0;
        }
    }
}

/// One pass over the requested partitions: the answer, the record bytes
/// in it, and whether it must go out now (an error to report).
fn read(
    broker: &Broker,
    session: &Session,
    request: &FetchRequest,
    version: i16,
) -> (FetchResponse, usize, bool) {
    let mut response = FetchResponse::default();
    let mut total = 0usize;
    let mut must_answer = false;
    let max_bytes = if request.max_bytes > 0 {
        request.max_bytes as usize
    } else {
        usize::MAX
    };
    for wanted in &request.topics {
        let name = wanted.topic.0.to_string();
        let mut topic_response = FetchableTopicResponse::default();
        topic_response.topic = wanted.topic.clone();
        topic_response.topic_id = wanted.topic_id;
        let allowed = session.allows(&Need::Read(name.clone()));
        let topic = broker.app.log.topic(&name);
        for part in &wanted.partitions {
            let mut data = PartitionData::default();
            data.partition_index = part.partition;
            data.high_watermark = -1;
            data.last_stable_offset = -1;
            data.preferred_read_replica = BrokerId(-1);
            data.aborted_transactions = Some(Vec::new());
            let partition = match (&topic, allowed) {
                (_, false) => Err(errors::TOPIC_AUTHORIZATION_FAILED),
                (Err(e), _) => Err(errors::of_log(e)),
                (Ok(t), _) => t
                    .partition(part.partition.max(0) as u32)
                    .map_err(|e| errors::of_log(&e)),
            };
            let partition = match partition {
                Ok(p) if part.partition >= 0 => p,
                Ok(_) => {
                    data.error_code = errors::UNKNOWN_TOPIC_OR_PARTITION;
                    must_answer = true;
                    topic_response.partitions.push(data);
                    continue;
                }
                Err(code) => {
                    data.error_code = code;
                    must_answer = true;
                    topic_response.partitions.push(data);
                    continue;
                }
            };
            // Kafka hands out at least one batch even past the limits.
            let budget = (part.partition_max_bytes.max(0) as usize)
                .min(max_bytes.saturating_sub(total))
                .max(usize::from(total == 0));
            match read_partition(partition, part.fetch_offset, budget) {
                Ok((records, count, hw, start)) => {
                    data.high_watermark = hw as i64;
                    data.last_stable_offset = hw as i64;
                    if version >= 5 {
                        data.log_start_offset = start as i64;
                    }
                    total += records.len();
                    if count > 0 {
                        crate::metrics::record_read(&name, count);
                    }
                    data.records = Some(records);
                }
                Err((code, hw, start)) => {
                    data.error_code = code;
                    data.high_watermark = hw;
                    data.last_stable_offset = hw;
                    if version >= 5 {
                        data.log_start_offset = start;
                    }
                    must_answer = true;
                }
            }
            topic_response.partitions.push(data);
        }
        response.responses.push(topic_response);
    }
    (response, total, must_answer)
}

/// A read error: the Kafka code with the partition's high watermark and
/// log start offset.
type ReadError = (i16, i64, i64);

/// What one partition answers: Kafka record batches and their record
/// count, the high watermark and the log start offset.
type PartitionRead = (Bytes, usize, u64, u64);

/// Records of `partition` from `offset`, about `budget` bytes, as Kafka
/// record batches, or the error with the partition's offsets.
fn read_partition(
    partition: &Partition,
    offset: i64,
    budget: usize,
) -> Result<PartitionRead, ReadError> {
    let hw = partition.end_offset() as i64;
    let start = partition.start_offset() as i64;
    if offset < 0 {
        return Err((errors::OFFSET_OUT_OF_RANGE, hw, start));
    }
    let fetch = match partition.read(offset as u64, u64::MAX, budget.max(1) as u64) {
        Ok(f) => f,
        Err(e @ LogError::OffsetOutOfRange { .. }) => return Err((errors::of_log(&e), hw, start)),
        Err(e) => {
            tracing::warn!(error = %e, "a Kafka fetch could not read the log");
            return Err((errors::of_log(&e), hw, start));
        }
    };
    let mut out = BytesMut::new();
    let mut count = 0usize;
    for batch in &fetch.batches {
        // The budget is the fetch's, in the bytes it answers: a compressed
        // topic's batches go out larger than stored (at least one goes).
        if count > 0 && out.len() >= budget {
            break;
        }
        let whole = batch.base_offset() >= fetch.offset && batch.next_offset() <= fetch.next_offset;
        if let Some(kafka) = batch.as_sent().filter(|_| whole) {
            count += batch.record_count() as usize;
            write_as_sent(&mut out, batch, kafka);
            continue;
        }
        let records: Vec<KafkaRecord> = batch
            .records()
            .filter(|r| r.offset >= fetch.offset && r.offset < fetch.next_offset)
            .enumerate()
            .map(|(i, r)| to_kafka(r, i))
            .collect();
        if records.is_empty() {
            continue;
        }
        count += records.len();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        if let Err(e) = RecordBatchEncoder::encode(&mut out, records.iter(), &options) {
            tracing::warn!(error = %e, "a stored batch could not be encoded for Kafka");
            break;
        }
    }
    Ok((
        out.freeze(),
        count,
        fetch.high_watermark,
        fetch.start_offset,
    ))
}

/// Writes `batch`, a Kafka producer's batch stored as sent (FORMAT.md
/// §2.10), as a Kafka v2 record batch around its records section as the
/// producer compressed it: the consumer gets the producer's bytes. No
/// producer id (as every batch fetched here), create-time timestamps.
fn write_as_sent(out: &mut BytesMut, batch: &kappa_log::batch::BatchView, kafka: &KafkaRecords) {
    let count = batch.record_count() as i32;
    out.put_i64(batch.base_offset() as i64);
    // The bytes after this field: 49 of header, then the records.
    out.put_i32((49 + kafka.compressed.len()) as i32);
    out.put_i32(0); // partition leader epoch
    out.put_i8(2); // magic
    let crc_at = out.len();
    out.put_u32(0); // CRC-32C of what follows, filled in below
                    // Kafka's codec bits: 3 lz4, 4 zstd.
    out.put_i16(match kafka.codec {
        kappa_log::Compression::Lz4 => 3,
        _ => 4,
    });
    out.put_i32(count - 1); // last offset delta
    out.put_i64(kafka.base_timestamp);
    out.put_i64(batch.max_timestamp());
    out.put_i64(-1); // producer id
    out.put_i16(-1); // producer epoch
    out.put_i32(-1); // base sequence
    out.put_i32(count);
    out.put_slice(&kafka.compressed);
    let crc = crc32c::crc32c(&out[crc_at + 4..]);
    out[crc_at..crc_at + 4].copy_from_slice(&crc.to_be_bytes());
}

/// A stored record as a Kafka record, `i`-th of its outgoing batch (the
/// sequence runs along the batch so the encoder keeps it one batch; the
/// batch's base sequence is -1: no producer).
fn to_kafka(record: kappa_log::Record, i: usize) -> KafkaRecord {
    KafkaRecord {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: 0,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: record.offset as i64,
        sequence: i as i32 - 1,
        timestamp: record.timestamp,
        key: record.key,
        value: Some(record.value),
        headers: record
            .headers
            .into_iter()
            .map(|h| (StrBytes::from_string(h.name), Some(h.value)))
            .collect(),
    }
}

/// Waits until any requested partition has records past its fetch offset,
/// `deadline`, or shutdown (then false).
async fn wait_for_data(
    broker: &Broker,
    request: &FetchRequest,
    deadline: tokio::time::Instant,
) -> bool {
    let topics: Vec<_> = request
        .topics
        .iter()
        .filter_map(|t| {
            let topic = broker.app.log.topic(t.topic.0.as_str()).ok()?;
            Some((topic, t))
        })
        .collect();
    let mut waits = Vec::new();
    for (topic, wanted) in &topics {
        for part in &wanted.partitions {
            if let Ok(p) = topic.partition(part.partition.max(0) as u32) {
                let timeout = deadline.saturating_duration_since(tokio::time::Instant::now());
                let offset = part.fetch_offset.max(0) as u64;
                waits.push(Box::pin(p.wait_for(offset, timeout)));
            }
        }
    }
    let any = async {
        if waits.is_empty() {
            tokio::time::sleep_until(deadline).await;
        } else {
            let _ = futures_util::future::select_all(waits).await;
        }
    };
    tokio::select! {
        _ = any => true,
        _ = broker.app.shutdown_started() => false,
    }
}

/// Answers `ListOffsets`: -2 = the first stored offset, -1 = the end
/// (next offset), else the first record at or after the timestamp
/// (-1 with timestamp -1 when there is none, as Kafka answers).
pub fn list_offsets(
    broker: &Broker,
    session: &Session,
    request: ListOffsetsRequest,
) -> ListOffsetsResponse {
    let mut response = ListOffsetsResponse::default();
    for wanted in request.topics {
        let name = wanted.name.0.to_string();
        let mut topic_response = ListOffsetsTopicResponse::default();
        topic_response.name = wanted.name.clone();
        let allowed = session.allows(&Need::ReadOrProduce(name.clone()));
        let topic = broker.app.log.topic(&name);
        for part in wanted.partitions {
            let mut out = ListOffsetsPartitionResponse::default();
            out.partition_index = part.partition_index;
            out.timestamp = -1;
            out.offset = -1;
            let partition = match (&topic, allowed) {
                (_, false) => Err(errors::TOPIC_AUTHORIZATION_FAILED),
                (Err(e), _) => Err(errors::of_log(e)),
                (Ok(t), _) if part.partition_index >= 0 => t
                    .partition(part.partition_index as u32)
                    .map_err(|e| errors::of_log(&e)),
                (Ok(_), _) => Err(errors::UNKNOWN_TOPIC_OR_PARTITION),
            };
            match partition {
                Err(code) => out.error_code = code,
                Ok(p) => match part.timestamp {
                    -2 => out.offset = p.start_offset() as i64,
                    -1 => out.offset = p.end_offset() as i64,
                    t if t >= 0 => match p.offset_for_timestamp(t) {
                        Ok(o) if o < p.end_offset() => {
                            out.offset = o as i64;
                            out.timestamp = p
                                .read(o, 1, 1)
                                .ok()
                                .and_then(|f| f.records().next().map(|r| r.timestamp))
                                .unwrap_or(t);
                        }
                        Ok(_) => {}
                        Err(e) => out.error_code = errors::of_log(&e),
                    },
                    _ => out.error_code = errors::INVALID_REQUEST,
                },
            }
            topic_response.partitions.push(out);
        }
        response.topics.push(topic_response);
    }
    response
}
