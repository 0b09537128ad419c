-- Nexmark q4, average price for a category: the average of the winning
-- bids (each auction's highest bid while it was open) per category.
-- The inner query joins each bid with its auction and keeps each
-- auction's highest price as its bids arrive; the outer query averages
-- those per category, following each auction's row as it changes (its
-- old maximum taken out, the new one added) — nexmark's updating result.
-- A bid counts while its auction is open (BETWEEN its date_time and its
-- expires), so it joins an auction opened at most the longest auction
-- length before it: a minute covers nexmark's lengths (twice the time 100
-- more auctions take to open) down to 56 events/s, and a bid never joins
-- an auction opened after it. Event times come in order, so a grace
-- period of 10 seconds keeps each event only while it can still join.
CREATE TABLE nexmark_q4 AS
SELECT category, AVG(final) AS avg_final
FROM (
  SELECT a.id AS id, a.category AS category, MAX(b.price) AS final
  FROM bid b JOIN auction a WITHIN (1 MINUTE, 0 SECONDS) GRACE PERIOD 0 SECONDS ON b.auction = a.id
  WHERE b.date_time BETWEEN a.date_time AND a.expires
  GROUP BY a.id, a.category
) AS q
GROUP BY category;
