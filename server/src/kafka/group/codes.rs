//! Kafka error codes the group coordinator answers (the protocol's numbers,
//! as in Kafka's `Errors` enum and kafka-protocol's `ResponseError`).

/// A Kafka protocol error code.
pub type ErrorCode = i16;

/// No error.
pub const NONE: ErrorCode = 0;
/// The coordinator is shutting down: the client finds the coordinator again and retries.
pub const COORDINATOR_NOT_AVAILABLE: ErrorCode = 15;
/// This node is not the group's coordinator.
pub const NOT_COORDINATOR: ErrorCode = 16;
/// The generation in the request is not the group's current one.
pub const ILLEGAL_GENERATION: ErrorCode = 22;
/// The member's protocol type or protocols do not fit the group's.
pub const INCONSISTENT_GROUP_PROTOCOL: ErrorCode = 23;
/// The group id is empty.
pub const INVALID_GROUP_ID: ErrorCode = 24;
/// The coordinator does not know this member (or group).
pub const UNKNOWN_MEMBER_ID: ErrorCode = 25;
/// The session timeout is outside the configured range.
pub const INVALID_SESSION_TIMEOUT: ErrorCode = 26;
/// The group is rebalancing: the member must rejoin.
pub const REBALANCE_IN_PROGRESS: ErrorCode = 27;
/// The group id does not exist (DescribeGroups v6+ may answer it for a Dead group).
pub const GROUP_ID_NOT_FOUND: ErrorCode = 69;
/// JoinGroup v4+: the member must rejoin with the member id in the answer.
pub const MEMBER_ID_REQUIRED: ErrorCode = 79;
/// The group has as many members as allowed.
pub const GROUP_MAX_SIZE_REACHED: ErrorCode = 81;
/// A newer member with the same group instance id replaced this one.
pub const FENCED_INSTANCE_ID: ErrorCode = 82;
