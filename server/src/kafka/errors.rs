//! Kafka error codes (the protocol's numbers) and the mapping from the
//! log's errors.

use kappa_log::LogError;

/// No error.
pub const NONE: i16 = 0;
/// The requested offset is not in the partition's range.
pub const OFFSET_OUT_OF_RANGE: i16 = 1;
/// A record batch failed its CRC or could not be decoded.
pub const CORRUPT_MESSAGE: i16 = 2;
/// No such topic or partition.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// The request timed out.
pub const REQUEST_TIMED_OUT: i16 = 7;
/// A record or batch is larger than allowed.
pub const MESSAGE_TOO_LARGE: i16 = 10;
/// Not enough replicas / the write could not be made durable.
pub const KAFKA_STORAGE_ERROR: i16 = 56;
/// The topic name is not valid.
pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
/// The request is not allowed for this principal (topic).
pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
/// The request is not allowed for this principal (group).
pub const GROUP_AUTHORIZATION_FAILED: i16 = 30;
/// The requested version is not supported.
pub const UNSUPPORTED_VERSION: i16 = 35;
/// The topic exists already.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;
/// The partition count is not valid.
pub const INVALID_PARTITIONS: i16 = 37;
/// The replication factor is not valid (this node is the only replica).
pub const INVALID_REPLICATION_FACTOR: i16 = 38;
/// A config value is not valid.
pub const INVALID_CONFIG: i16 = 40;
/// The request is malformed or not supported in this form.
pub const INVALID_REQUEST: i16 = 42;
/// An idempotent producer's batch skips sequence numbers (one before it
/// failed and is to be retried first).
pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
/// An idempotent producer writes with an epoch older than its id's latest.
pub const INVALID_PRODUCER_EPOCH: i16 = 47;
/// The operation is refused by a server rule (e.g. a view reads the topic).
pub const POLICY_VIOLATION: i16 = 44;
/// The SASL mechanism is not supported.
pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
/// SASL authentication failed.
pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Transactions are not supported.
pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
/// The server hit an unexpected error.
pub const UNKNOWN_SERVER_ERROR: i16 = -1;

/// The Kafka error code for a log error, with its message.
pub fn of_log(error: &LogError) -> i16 {
    match error {
        LogError::UnknownTopic(_) | LogError::UnknownPartition { .. } => UNKNOWN_TOPIC_OR_PARTITION,
        LogError::OffsetOutOfRange { .. } => OFFSET_OUT_OF_RANGE,
        LogError::TopicExists(_) => TOPIC_ALREADY_EXISTS,
        LogError::InvalidTopicName { .. } => INVALID_TOPIC_EXCEPTION,
        LogError::InvalidConfig(_) => INVALID_CONFIG,
        LogError::LimitExceeded(_) => MESSAGE_TOO_LARGE,
        LogError::InvalidArgument(_) | LogError::IdempotencyKeyReused { .. } => INVALID_REQUEST,
        LogError::KeyRequired { .. } => INVALID_RECORD,
        LogError::PartitionBudget { .. } => INVALID_PARTITIONS,
        // The append queue is full: the client retries.
        LogError::Backpressure { .. } => REQUEST_TIMED_OUT,
        _ => KAFKA_STORAGE_ERROR,
    }
}

/// A record is not valid (e.g. too many headers).
pub const INVALID_RECORD: i16 = 87;
/// The group id is not valid.
pub const INVALID_GROUP_ID: i16 = 24;
