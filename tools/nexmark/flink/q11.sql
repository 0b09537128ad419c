-- -------------------------------------------------------------------------------------------------
-- Query 11: User Sessions (Not in original suite)
-- -------------------------------------------------------------------------------------------------
-- How many bids did a user make in each session they were active? Illustrates session windows.
--
-- Group bids by the same user into sessions with max session gap.
-- Emit the number of bids per session.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q11.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_sink (
  bidder BIGINT,
  bid_count BIGINT,
  starttime TIMESTAMP(3),
  endtime TIMESTAMP(3)
) WITH (
  ${SINK_OPTIONS}
);

INSERT INTO nexmark_sink
SELECT
    B.bidder,
    count(*) as bid_count,
    SESSION_START(B.`dateTime`, INTERVAL '10' SECOND) as starttime,
    SESSION_END(B.`dateTime`, INTERVAL '10' SECOND) as endtime
FROM bid B
GROUP BY B.bidder, SESSION(B.`dateTime`, INTERVAL '10' SECOND);
