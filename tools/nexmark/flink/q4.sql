-- -------------------------------------------------------------------------------------------------
-- Query 4: Average Price for a Category
-- -------------------------------------------------------------------------------------------------
-- Select the average of the wining bid prices for all auctions in each category.
-- Illustrates complex join and aggregation.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q4.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
--   * A.expires -> A.expires_ts: `expires` holds epoch ms here; expires_ts is its
--     TIMESTAMP_LTZ(3), comparable with `dateTime`.
-- The result is an updating stream (retractions), as in nexmark; --check keeps the final rows.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_sink (
  id BIGINT,
  final BIGINT
) WITH (
  ${SINK_OPTIONS}
);

INSERT INTO nexmark_sink
SELECT
    Q.category,
    AVG(Q.final)
FROM (
    SELECT MAX(B.price) AS final, A.category
    FROM auction A, bid B
    WHERE A.id = B.auction AND B.`dateTime` BETWEEN A.`dateTime` AND A.expires_ts
    GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
