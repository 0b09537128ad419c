-- Nexmark q11, user sessions: bids per bidder per session, a session
-- ending after 10 seconds without a bid.
CREATE TABLE nexmark_q11 AS
SELECT bidder, COUNT(*) AS bid_count, WINDOWSTART AS starttime, WINDOWEND AS endtime
FROM bid WINDOW SESSION (10 SECONDS)
GROUP BY bidder;
