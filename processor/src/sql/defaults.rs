//! Every default of the SQL dialect, in one place (documented in
//! `docs/sql.md` and printed by `DESCRIBE`).

use crate::plan::Emit;

/// Watermark delay (bounded out-of-orderness) when a stream declares no
/// `WATERMARK_DELAY`: events up to this much older than the newest one
/// seen still count for their window.
pub const WATERMARK_DELAY_MS: i64 = 5_000;

/// How long a partition without events may hold the watermark back
/// (`IDLE_TIMEOUT`), the same default as the Rust DSL.
pub const IDLE_TIMEOUT_MS: i64 = crate::dsl::DEFAULT_IDLE_TIMEOUT_MS;

/// How far after its record's append time an event time may be
/// (`MAX_FUTURE`) before the event is invalid: 1 day.
pub const MAX_FUTURE_MS: i64 = crate::plan::DEFAULT_MAX_FUTURE_MS;

/// Grace period of a window without `GRACE PERIOD`: 24 hours, ksqlDB's
/// default for windowed aggregations, so its statements run verbatim give
/// its answer (an event up to a day behind the watermark still counts).
/// `EMIT FINAL` rows appear once the grace period is over: say `GRACE
/// PERIOD` for less.
pub const GRACE_MS: i64 = 24 * 3_600_000;

/// How long a deduplication id is remembered without `DEDUP_TTL`: 1 hour.
pub const DEDUP_TTL_MS: i64 = 3_600_000;

/// The only value format.
pub const VALUE_FORMAT: &str = "JSON";

/// When rows appear without an `EMIT` clause.
pub const EMIT: Emit = Emit::Changes;

/// The defaults as (name, value) pairs, for `DESCRIBE` and docs.
pub fn table() -> Vec<(&'static str, String)> {
    vec![
        ("WATERMARK_DELAY", format!("{WATERMARK_DELAY_MS} ms")),
        ("IDLE_TIMEOUT", format!("{IDLE_TIMEOUT_MS} ms")),
        ("MAX_FUTURE", format!("{MAX_FUTURE_MS} ms")),
        ("GRACE PERIOD", format!("{GRACE_MS} ms")),
        ("RETENTION", "none (window rows are kept)".to_string()),
        ("DEDUP_TTL", format!("{DEDUP_TTL_MS} ms")),
        ("VALUE_FORMAT", VALUE_FORMAT.to_string()),
        ("EMIT", "CHANGES".to_string()),
    ]
}
