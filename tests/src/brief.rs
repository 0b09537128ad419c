//! The product brief's statements, as the end-to-end tests send them (the
//! same text as `kappa_processor::sql::brief`; this crate talks to the
//! binary over HTTP only and does not depend on the product crates).

/// The `user_events` stream over topic `user_events`.
pub const USER_EVENTS: &str = "CREATE STREAM user_events (
  user_id VARCHAR, event_type VARCHAR, amount DECIMAL(10,2), event_time TIMESTAMP
) WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON');";

/// Purchases per user per 5-minute window.
pub const PURCHASE_STATS: &str = "CREATE TABLE purchase_stats AS
SELECT user_id, WINDOWSTART as window_start, WINDOWEND as window_end,
       COUNT(*) as purchase_count, SUM(amount) as total_amount, AVG(amount) as avg_amount
FROM user_events
WINDOW TUMBLING (SIZE 5 MINUTES)
WHERE event_type = 'purchase'
GROUP BY user_id
EMIT CHANGES;";

/// Purchases over 100000, as a derived stream.
pub const HIGH_VALUE_ALERTS: &str = "CREATE STREAM high_value_alerts AS
SELECT * FROM user_events WHERE event_type = 'purchase' AND amount > 100000 EMIT CHANGES;";
