-- -------------------------------------------------------------------------------------------------
-- Query2: Selection
-- -------------------------------------------------------------------------------------------------
-- Find bids with specific auction ids and show their bid price.
--
-- In original Nexmark queries, Query2 is as following (in CQL syntax):
--
--   SELECT Rstream(auction, price)
--   FROM Bid [NOW]
--   WHERE auction = 1007 OR auction = 1020 OR auction = 2001 OR auction = 2019 OR auction = 2087;
--
-- However, that query will only yield a few hundred results over event streams of arbitrary size.
-- To make it more interesting we instead choose bids for every 123'th auction.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q2.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_sink (
  auction  BIGINT,
  price  BIGINT
) WITH (
  ${SINK_OPTIONS}
);

INSERT INTO nexmark_sink
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
