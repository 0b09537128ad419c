-- -------------------------------------------------------------------------------------------------
-- Query 7: Highest Bid
-- -------------------------------------------------------------------------------------------------
-- What are the highest bids per period?
-- Deliberately implemented using a side input to illustrate fanout.
--
-- The original Nexmark Query7 calculate the highest bids in the last minute.
-- We will use a shorter window (10 seconds) to help make testing easier.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q7.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
--   * SELECT B.auction, B.bidder, B.price, ... (nexmark selects B.price, B.bidder into the sink's
--     bidder, price columns, swapping them); same work, right column names for --check;
--   * sink `dateTime` is TIMESTAMP_LTZ(3) (nexmark: TIMESTAMP(3)), as ddl.sql derives it.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_sink (
  auction  BIGINT,
  bidder  BIGINT,
  price  BIGINT,
  `dateTime`  TIMESTAMP_LTZ(3),
  extra  VARCHAR
) WITH (
  ${SINK_OPTIONS}
);

INSERT INTO nexmark_sink
SELECT B.auction, B.bidder, B.price, B.`dateTime`, B.extra
from bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end as `dateTime`
  FROM TABLE(
          TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY window_start, window_end
) B1
ON B.price = B1.maxprice
WHERE B.`dateTime` BETWEEN B1.`dateTime`  - INTERVAL '10' SECOND AND B1.`dateTime`;
