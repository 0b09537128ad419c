-- -------------------------------------------------------------------------------------------------
-- Query1: Currency conversion
-- -------------------------------------------------------------------------------------------------
-- Convert each bid value from dollars to euros. Illustrates a simple transformation.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q1.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
--   * `dateTime` is TIMESTAMP_LTZ(3) (nexmark: TIMESTAMP(3)), as ddl.sql derives it.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_sink (
  auction  BIGINT,
  bidder  BIGINT,
  price  DECIMAL(23, 3),
  `dateTime`  TIMESTAMP_LTZ(3),
  extra  VARCHAR
) WITH (
  ${SINK_OPTIONS}
);

INSERT INTO nexmark_sink
SELECT
    auction,
    bidder,
    0.908 * price as price, -- convert dollar to euro
    `dateTime`,
    extra
FROM bid;
