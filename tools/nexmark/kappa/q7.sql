-- Nexmark q7, highest bid: in each 10-second tumbling window, the bids
-- with the highest price.
-- Nexmark joins the bids with each window's maximum price. Here the
-- window's bids are a subquery (one row per distinct bid: grouped by all
-- of its columns), and the outer query keeps, per window, the rows ranked
-- first by price — RANK keeps every bid tied for the highest. A window's
-- bids reach the outer query once, when the window closes; bids come in
-- event-time order, so no grace period is needed beyond the stream's
-- watermark delay.
CREATE TABLE nexmark_q7 AS
SELECT auction, price, bidder, date_time, extra
FROM (
  SELECT auction, bidder, price, date_time, extra, WINDOWSTART AS starttime, COUNT(*) AS bids
  FROM bid
  WINDOW TUMBLING (SIZE 10 SECONDS, GRACE PERIOD 0 SECONDS)
  GROUP BY auction, bidder, price, date_time, extra
) AS window_bids
QUALIFY RANK() OVER (PARTITION BY starttime ORDER BY price DESC) <= 1;
