-- -------------------------------------------------------------------------------------------------
-- Query 3: Local Item Suggestion
-- -------------------------------------------------------------------------------------------------
-- Who is selling in OR, ID or CA in category 10, and for what auction ids?
-- Illustrates an incremental join (using per-key state and timer) and filter.
-- -------------------------------------------------------------------------------------------------
-- Changes from nexmark-flink's q3.sql:
--   * the sink is `nexmark_sink` (nexmark: nexmark_qN) and its WITH clause is ${SINK_OPTIONS},
--     which flink_runner.py fills in: blackhole (as nexmark) or, with --check, a file;
--   * sources are tables person/auction/bid from ddl.sql, not views over one datagen table.
-- -------------------------------------------------------------------------------------------------

CREATE TABLE nexmark_sink (
  name  VARCHAR,
  city  VARCHAR,
  state  VARCHAR,
  id  BIGINT
) WITH (
  ${SINK_OPTIONS}
);

INSERT INTO nexmark_sink
SELECT
    P.name, P.city, P.state, A.id
FROM
    auction AS A INNER JOIN person AS P on A.seller = P.id
WHERE
    A.category = 10 and (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA');
