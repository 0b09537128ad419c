-- Nexmark q5, hot items: in each 10-second window sliding by 2 seconds,
-- the auctions with the most bids.
-- Nexmark joins the bid counts per auction and window with their maximum
-- per window (`num >= maxn`). Here the counts per auction and window are a
-- subquery, and the outer query keeps, per window, the rows ranked first
-- by count — RANK keeps every auction tied for the most. A window's counts
-- reach the outer query once, when the window closes (as Flink's window
-- aggregates emit); bids come in event-time order, so no grace period is
-- needed beyond the stream's watermark delay.
CREATE TABLE nexmark_q5 AS
SELECT auction, num, starttime, endtime
FROM (
  SELECT auction, COUNT(*) AS num, WINDOWSTART AS starttime, WINDOWEND AS endtime
  FROM bid
  WINDOW HOPPING (SIZE 10 SECONDS, ADVANCE BY 2 SECONDS, GRACE PERIOD 0 SECONDS)
  GROUP BY auction
) AS auction_bids
QUALIFY RANK() OVER (PARTITION BY starttime ORDER BY num DESC) <= 1;
