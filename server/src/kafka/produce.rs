//! `Produce` and `InitProducerId`: Kafka record batches (v2, any
//! compression) become appends to the log.
//!
//! Each partition's batch is one append. An idempotent producer's batch
//! (producer id >= 0) carries the idempotency key
//! `kafka:<producer id>:<epoch>:<base sequence>`: a retry of a batch the
//! log already holds — after a lost answer, a reconnect, or a restart of
//! the server — is recognized by the log's idempotency window (rebuilt from
//! the segments at open) and answered with the first append's offset,
//! never written twice. Before that, the batch's sequence numbers are
//! checked against the producer's last batch on the partition
//! (`sequences.rs`): a batch that skips ahead is refused, so a retried batch
//! cannot land after its successor. Producer ids are made from the clock (ms << 12 plus
//! a counter), so they never repeat across restarts without being stored.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse, ProducerId,
};
use kafka_protocol::records::TimestampType;
use kappa_log::{AppendRequest, PendingAppend};
use kappa_log::{Compression, Header, KafkaRecords, NewRecord, Topic};

use super::conn::Session;
use super::sequences::{BatchSequence, ProducerKey, Verdict};
use super::{errors, Broker};
use crate::auth::Need;
use crate::config::RecordLimit;

/// Hands out producer ids that never repeat, also across restarts.
pub struct ProducerIds {
    next: AtomicI64,
}

impl ProducerIds {
    /// Starts at the clock: `now_ms << 12` leaves room for 4,096 ids per
    /// millisecond of uptime before the next start could reach them.
    pub fn new() -> Self {
        ProducerIds {
            next: AtomicI64::new(kappa_log::now_ms() << 12),
        }
    }

    fn next(&self) -> i64 {
        self.next.fetch_add(1, Ordering::AcqRel)
    }
}

impl Default for ProducerIds {
    fn default() -> Self {
        Self::new()
    }
}

/// `InitProducerId`: a new producer id at epoch 0. Transactions are not
/// supported: a transactional id is refused.
pub fn init_producer_id(broker: &Broker, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let mut response = InitProducerIdResponse::default();
    if request.transactional_id.is_some() {
        tracing::warn!("a Kafka client asked for transactions, which Kappa does not support");
        response.error_code = errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        response.producer_id = ProducerId(-1);
        response.producer_epoch = -1;
        return response;
    }
    response.producer_id = ProducerId(broker.producer_ids.next());
    response.producer_epoch = 0;
    response
}

/// One partition's part of a produce, decoded and checked.
struct Append {
    records: Vec<NewRecord>,
    key: Option<Vec<u8>>,
    /// An idempotent producer's id and sequence numbers.
    sequence: Option<(i64, BatchSequence)>,
    bytes: usize,
    /// The records as the producer compressed them, when it sent one
    /// zstd or lz4 batch (stored as sent in a topic of that codec:
    /// FORMAT.md §2.10).
    as_sent: Option<KafkaRecords>,
}

/// One partition's append, submitted to the log.
struct Submitted {
    append: Result<PendingAppend, i16>,
    /// The producer and batch to expect again if the append fails.
    sequence: Option<(ProducerKey, BatchSequence)>,
    records: usize,
    bytes: usize,
}

/// An append queued for one partition of the answer.
struct Queued {
    topic: usize,
    partition: usize,
    /// The topic appended to (for the log start offset of the answer).
    log_topic: Arc<Topic>,
    submitted: Submitted,
}

/// Answers a `Produce` request; `None` for `acks = 0` (Kafka sends no
/// answer then). Every partition's append is queued before any is awaited,
/// so they share group commits.
pub async fn produce(
    broker: &Broker,
    session: &Session,
    request: ProduceRequest,
    version: i16,
) -> Option<ProduceResponse> {
    let started = Instant::now();
    let acks = request.acks;
    let mut response = ProduceResponse::default();
    let transactional = request.transactional_id.is_some();
    let mut pending: Vec<Queued> = Vec::new();
    for (t, topic_data) in request.topic_data.into_iter().enumerate() {
        let name = topic_data.name.0.to_string();
        let mut topic_response = TopicProduceResponse::default();
        topic_response.name = topic_data.name.clone();
        let allowed = session.allows(&Need::Produce(name.clone()));
        let topic = broker.app.log.topic(&name);
        for (p, data) in topic_data.partition_data.into_iter().enumerate() {
            let mut part = PartitionProduceResponse::default();
            part.index = data.index;
            part.base_offset = -1;
            topic_response.partition_responses.push(part);
            let refused = if transactional {
                Some(errors::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            } else if !allowed {
                Some(errors::TOPIC_AUTHORIZATION_FAILED)
            } else {
                None
            };
            let submitted = match (refused, &topic) {
                (Some(code), _) => Err(code),
                (None, Err(e)) => Err(errors::of_log(e)),
                (None, Ok(topic)) => {
                    submit(broker, session, topic, &name, data.index, data.records)
                        .await
                        .map(|submitted| (topic.clone(), submitted))
                }
            };
            match submitted {
                Ok((log_topic, submitted)) => pending.push(Queued {
                    topic: t,
                    partition: p,
                    log_topic,
                    submitted,
                }),
                Err(code) => topic_response.partition_responses[p].error_code = code,
            }
        }
        response.responses.push(topic_response);
    }
    for queued in pending {
        let topic_response = &mut response.responses[queued.topic];
        let name = topic_response.name.0.to_string();
        let part = &mut topic_response.partition_responses[queued.partition];
        let Submitted {
            append,
            sequence,
            records: count,
            bytes,
        } = queued.submitted;
        let outcome = match append {
            Ok(pending) => pending.wait().await.map_err(|e| errors::of_log(&e)),
            Err(code) => Err(code),
        };
        match outcome {
            Ok(outcome) => {
                part.base_offset = outcome.base_offset as i64;
                if version >= 5 {
                    if let Ok(p) = queued.log_topic.partition(part.index as u32) {
                        part.log_start_offset = p.start_offset() as i64;
                    }
                }
                crate::metrics::record_produce(&name, count, bytes, started.elapsed());
            }
            Err(code) => {
                if let Some((key, batch)) = &sequence {
                    broker.sequences.rewind(key, *batch);
                }
                part.error_code = code;
            }
        }
    }
    (acks != 0).then_some(response)
}

/// Decodes one partition's batches, checks an idempotent producer's
/// sequence and submits the append to the log (without waiting for it).
async fn submit(
    broker: &Broker,
    session: &Session,
    topic: &Topic,
    name: &str,
    index: i32,
    records: Option<Bytes>,
) -> Result<Submitted, i16> {
    let append = decode(broker, records)?;
    let (count, bytes) = (append.records.len(), append.bytes);
    if let Some(principal) = session.principal() {
        wait_for_rate(broker, principal, count).await;
    }
    let partition = topic
        .partition(index as u32)
        .map_err(|e| errors::of_log(&e))?;
    let sequence = append.sequence.map(|(producer_id, batch)| {
        let key = ProducerKey {
            topic: name.to_string(),
            partition: index,
            producer_id,
        };
        (key, batch)
    });
    let verdict = match &sequence {
        Some((key, batch)) => broker.sequences.check(key, *batch),
        None => Verdict::Append,
    };
    if let Verdict::Refuse(code) = verdict {
        return Err(code);
    }
    let request = AppendRequest {
        records: append.records,
        idempotency_key: append.key,
        as_sent: append.as_sent,
    };
    let queued = partition
        .submit(request)
        .await
        .map_err(|e| errors::of_log(&e));
    Ok(Submitted {
        append: queued,
        // Only an accepted batch is expected again if its append fails.
        sequence: sequence.filter(|_| verdict == Verdict::Append),
        records: count,
        bytes,
    })
}

/// Holds a produce of `records` until `principal`'s rate limit admits it
/// (Kafka slows a producer over its quota down rather than refusing it:
/// the connection's next request waits too). Shutdown ends the wait.
async fn wait_for_rate(broker: &Broker, principal: &crate::auth::Principal, records: usize) {
    let Some(rate) = principal.produce_records_per_second else {
        return;
    };
    let started = std::time::Instant::now();
    let mut waited = false;
    loop {
        let now = std::time::Instant::now();
        let Err(wait) = broker
            .app
            .auth
            .limiter
            .admit(&principal.name, rate, records, now)
        else {
            break;
        };
        waited = true;
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = broker.app.shutdown_started() => break,
        }
    }
    if waited {
        crate::metrics::record_kafka_produce_throttle(started.elapsed());
    }
}

/// Decodes one partition's record batches into one append, checking the
/// server's record limits.
fn decode(broker: &Broker, records: Option<Bytes>) -> Result<Append, i16> {
    let Some(bytes) = records else {
        return Err(errors::INVALID_REQUEST);
    };
    let size = bytes.len();
    let as_sent = batch_as_sent(&bytes);
    let limit = broker.app.log.config().max_batch_bytes;
    let sets = kappa_kafka_codec::decode_record_batches(bytes, limit).map_err(|e| {
        tracing::warn!(error = %e, "a Kafka record batch could not be decoded");
        errors::CORRUPT_MESSAGE
    })?;
    let config = &broker.app.config;
    let mut out = Vec::new();
    let mut key = None;
    let mut sequence: Option<(i64, BatchSequence)> = None;
    for set in sets {
        for record in set.records {
            if record.control {
                continue;
            }
            // A producer id makes the batch idempotent: its sequence is
            // checked, a negative one included (refused).
            if record.producer_id >= 0 {
                match &mut sequence {
                    None => {
                        key = Some(
                            format!(
                                "kafka:{}:{}:{}",
                                record.producer_id, record.producer_epoch, record.sequence
                            )
                            .into_bytes(),
                        );
                        let batch = BatchSequence {
                            epoch: record.producer_epoch,
                            first: record.sequence,
                            last: record.sequence,
                        };
                        sequence = Some((record.producer_id, batch));
                    }
                    Some((_, batch)) => batch.last = record.sequence,
                }
            }
            let value = record.value.unwrap_or_default();
            let key = record.key.as_ref().map(|k| k.len());
            match config.check_record(key, value.len(), record.headers.len()) {
                Ok(()) => {}
                Err((RecordLimit::Headers, _)) => return Err(errors::INVALID_RECORD),
                Err(_) => return Err(errors::MESSAGE_TOO_LARGE),
            }
            out.push(NewRecord {
                key: record.key,
                value,
                timestamp: match record.timestamp_type {
                    TimestampType::Creation if record.timestamp >= 0 => Some(record.timestamp),
                    _ => None,
                },
                headers: record
                    .headers
                    .into_iter()
                    .map(|(name, value)| Header {
                        name: name.to_string(),
                        value: value.unwrap_or_default(),
                    })
                    .collect(),
            });
        }
    }
    if out.is_empty() {
        return Err(errors::INVALID_REQUEST);
    }
    Ok(Append {
        records: out,
        key,
        sequence,
        bytes: size,
        as_sent,
    })
}

/// Where a v2 record batch's fields are (Kafka's `RecordBatch`): its
/// length after the first 12 bytes, the magic byte, the attributes, the
/// base timestamp, and the records section.
const BATCH_LENGTH_AT: usize = 8;
const MAGIC_AT: usize = 16;
const ATTRIBUTES_AT: usize = 21;
const BASE_TIMESTAMP_AT: usize = 27;
const RECORDS_AT: usize = 61;

/// Kafka's codec bits for lz4 and zstd in a batch's attributes.
const KAFKA_LZ4: u16 = 3;
const KAFKA_ZSTD: u16 = 4;

/// The records section of `bytes` as the producer compressed it, when
/// they are one v2 batch compressed with zstd or lz4, neither transactional nor
/// a control batch, with producer-set timestamps. The log's writer stores
/// it as sent only after reading it back as exactly the records decoded
/// from it (else it stores those records its usual way).
fn batch_as_sent(bytes: &Bytes) -> Option<KafkaRecords> {
    let field = |at: usize, n: usize| bytes.get(at..at + n);
    let length = i32::from_be_bytes(field(BATCH_LENGTH_AT, 4)?.try_into().ok()?);
    let attributes = u16::from_be_bytes(field(ATTRIBUTES_AT, 2)?.try_into().ok()?);
    let base_timestamp = i64::from_be_bytes(field(BASE_TIMESTAMP_AT, 8)?.try_into().ok()?);
    // Bits 0-2 the codec; bit 3 log-append time; bits 4-5 transactional
    // and control.
    let codec = match attributes & 0x3f {
        KAFKA_ZSTD => Compression::Zstd,
        KAFKA_LZ4 => Compression::Lz4,
        _ => return None,
    };
    let fits = usize::try_from(length).ok()? + 12 == bytes.len()
        && field(MAGIC_AT, 1)? == [2]
        && bytes.len() > RECORDS_AT;
    fits.then(|| KafkaRecords {
        codec,
        base_timestamp,
        compressed: bytes.slice(RECORDS_AT..),
    })
}
