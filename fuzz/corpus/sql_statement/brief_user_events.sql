CREATE STREAM user_events (
  user_id VARCHAR, event_type VARCHAR, amount DECIMAL(10,2), event_time TIMESTAMP
) WITH (KAFKA_TOPIC='user_events', VALUE_FORMAT='JSON');