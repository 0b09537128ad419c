-- -------------------------------------------------------------------------------------------------
-- Query 0: Pass through (Not in original suite)
-- -------------------------------------------------------------------------------------------------
-- This measures the monitoring overhead of the Flink SQL implementation including the source generator.
-- Using `bid` events here, as they are most numerous with default configuration.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q0.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
--   * `dateTime` is TIMESTAMP_LTZ(3) (nexmark: TIMESTAMP(3)), as ddl.sql derives it.
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
SELECT auction, bidder, price, `dateTime`, extra FROM bid;
