-- Nexmark q3, local item suggestion: who sells in category 10 in Oregon,
-- Idaho or California, and for which auctions.
-- Nexmark's (Flink's) q3 is an unbounded join of the two streams. Here it
-- is a join of two streams within an hour either way, which on nexmark's
-- data is the same join: a seller is one of the last 1,000 persons (or up
-- to 10 ahead), a few minutes of event time at most at nexmark's rates.
-- The one-sided conditions of WHERE are applied before the join buffers
-- an event (EXPLAIN shows them).
CREATE STREAM nexmark_q3 AS
SELECT p.name AS name, p.city AS city, p.state AS state, a.id AS id
FROM auction a JOIN person p WITHIN 1 HOUR ON a.seller = p.id
WHERE a.category = 10 AND (p.state = 'OR' OR p.state = 'ID' OR p.state = 'CA');
