-- -------------------------------------------------------------------------------------------------
-- Sources for the Nexmark queries: kappa-datagen nexmark's three NDJSON files.
-- -------------------------------------------------------------------------------------------------
-- Adapted from nexmark-flink's ddl_gen.sql + ddl_views.sql (github.com/nexmark/nexmark, commit
-- 6b3646c, as are the queries). Changes:
--   * three filesystem/json tables (person, auction, bid) instead of one `nexmark` datagen table
--     with an event_type column and three views over it;
--   * snake_case field names (email_address, credit_card, item_name, initial_bid), as the files
--     have them; no query uses these four;
--   * times arrive as epoch milliseconds (date_time, expires BIGINT); the computed columns
--     `dateTime` and `expires_ts` are TIMESTAMP_LTZ(3) (nexmark has TIMESTAMP(3)); the runner
--     sets table.local-time-zone = UTC, so window bounds (TIMESTAMP(3)) read as UTC;
--   * each table has its own watermark, `dateTime` - 4 s as in nexmark (there one watermark
--     covers all three event kinds).
-- ${PERSON_PATH}, ${AUCTION_PATH}, ${BID_PATH} are filled in by flink_runner.py: the data
-- directory's files, or at parallelism > 1 directories of round-robin parts of them (a local
-- file is one split, so one file would be read by one source task).
-- -------------------------------------------------------------------------------------------------

CREATE TABLE person (
    id  BIGINT,
    name  VARCHAR,
    email_address  VARCHAR,
    credit_card  VARCHAR,
    city  VARCHAR,
    state  VARCHAR,
    date_time  BIGINT,
    extra  VARCHAR,
    `dateTime` AS TO_TIMESTAMP_LTZ(date_time, 3),
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = '${PERSON_PATH}',
    'format' = 'json'
);

CREATE TABLE auction (
    id  BIGINT,
    item_name  VARCHAR,
    description  VARCHAR,
    initial_bid  BIGINT,
    reserve  BIGINT,
    date_time  BIGINT,
    expires  BIGINT,
    seller  BIGINT,
    category  BIGINT,
    extra  VARCHAR,
    `dateTime` AS TO_TIMESTAMP_LTZ(date_time, 3),
    expires_ts AS TO_TIMESTAMP_LTZ(expires, 3),
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = '${AUCTION_PATH}',
    'format' = 'json'
);

CREATE TABLE bid (
    auction  BIGINT,
    bidder  BIGINT,
    price  BIGINT,
    channel  VARCHAR,
    url  VARCHAR,
    date_time  BIGINT,
    extra  VARCHAR,
    `dateTime` AS TO_TIMESTAMP_LTZ(date_time, 3),
    WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH (
    'connector' = 'filesystem',
    'path' = '${BID_PATH}',
    'format' = 'json'
);
