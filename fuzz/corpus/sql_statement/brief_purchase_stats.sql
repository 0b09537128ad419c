CREATE TABLE purchase_stats AS
SELECT user_id, WINDOWSTART as window_start, WINDOWEND as window_end,
       COUNT(*) as purchase_count, SUM(amount) as total_amount, AVG(amount) as avg_amount
FROM user_events
WINDOW TUMBLING (SIZE 5 MINUTES)
WHERE event_type = 'purchase'
GROUP BY user_id
EMIT CHANGES;