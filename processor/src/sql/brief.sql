-- The product brief's three statements: the `user_events` stream, the
-- `purchase_stats` table and the `high_value_alerts` stream. The one copy:
-- the demo runs them and the SQL tests parse them (kappa_processor::sql::brief),
-- the end-to-end tests send them (kappa_tests::brief), both through include_str!.

CREATE STREAM user_events (
  user_id VARCHAR, event_type VARCHAR, amount DECIMAL(10,2), event_time TIMESTAMP
) WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON');

CREATE TABLE purchase_stats AS
SELECT user_id, WINDOWSTART as window_start, WINDOWEND as window_end,
       COUNT(*) as purchase_count, SUM(amount) as total_amount, AVG(amount) as avg_amount
FROM user_events
WINDOW TUMBLING (SIZE 5 MINUTES)
WHERE event_type = 'purchase'
GROUP BY user_id
EMIT CHANGES;

CREATE STREAM high_value_alerts AS
SELECT * FROM user_events WHERE event_type = 'purchase' AND amount > 100000 EMIT CHANGES;
