-- Nexmark q4, average price for a category: the average of the winning
-- bids (each auction's highest bid while it was open) per category.
-- The inner query joins each bid with its auction — the `auctions` table
-- (schema.sql) as of the bid's time, which holds every auction opened
-- before it: auctions never change, so this is nexmark's regular join for
-- every bid the WHERE keeps — and keeps each auction's highest price as
-- its bids arrive; the outer query averages those per category, following
-- each auction's row as it changes (its old maximum taken out, the new
-- one added): nexmark's updating result. A bid counts while its auction is
-- open (BETWEEN its date_time and its expires).
CREATE TABLE nexmark_q4 AS
SELECT category, AVG(final) AS avg_final
FROM (
  SELECT a.id AS id, a.category AS category, MAX(b.price) AS final
  FROM bid b JOIN auctions a ON b.auction = a.id
  WHERE b.date_time BETWEEN a.date_time AND a.expires
  GROUP BY a.id, a.category
) AS q
GROUP BY category;
