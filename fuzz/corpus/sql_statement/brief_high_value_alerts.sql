CREATE STREAM high_value_alerts AS
SELECT * FROM user_events WHERE event_type = 'purchase' AND amount > 100000 EMIT CHANGES;