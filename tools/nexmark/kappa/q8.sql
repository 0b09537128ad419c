-- Nexmark q8, monitor new users: persons who registered and opened an
-- auction within one 10-second tumbling window.
-- Nexmark joins two windowed aggregates (persons and sellers per window) on
-- the window. Here the two streams are joined within 10 seconds on the
-- seller, a pair counts only when both fall in one window (the WHERE), and
-- the joined events are grouped per person and window: one row per
-- (id, name, window), as nexmark's. The joined event's time is the later
-- of the two, in that same window. A pair is at most 10 seconds apart, so
-- a grace period of 10 seconds keeps each event only while it can still
-- find its pair (nexmark's event times come in order).
CREATE TABLE nexmark_q8 AS
SELECT p.id AS id, p.name AS name, WINDOWSTART AS starttime, COUNT(*) AS auctions
FROM auction a JOIN person p WITHIN 10 SECONDS GRACE PERIOD 10 SECONDS ON a.seller = p.id
WINDOW TUMBLING (SIZE 10 SECONDS)
WHERE a.date_time / 10000 = p.date_time / 10000
GROUP BY p.id, p.name;
