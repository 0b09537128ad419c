-- Nexmark's three inputs as `kappa-datagen nexmark --produce` writes them:
-- topics person (keyed by id), auction (keyed by id) and bid (keyed by
-- auction), JSON values with snake_case fields and times in epoch ms.
-- Event time is each record's date_time.
CREATE STREAM person (
  id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR,
  city VARCHAR, state VARCHAR, date_time BIGINT, extra VARCHAR
) WITH (KAFKA_TOPIC='person', VALUE_FORMAT='JSON', TIMESTAMP='date_time');

CREATE STREAM auction (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT,
  reserve BIGINT, date_time BIGINT, expires BIGINT, seller BIGINT,
  category BIGINT, extra VARCHAR
) WITH (KAFKA_TOPIC='auction', VALUE_FORMAT='JSON', TIMESTAMP='date_time');

CREATE STREAM bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  date_time BIGINT, extra VARCHAR
) WITH (KAFKA_TOPIC='bid', VALUE_FORMAT='JSON', TIMESTAMP='date_time');

-- The auctions as a table: each auction's row, keyed by its id (the
-- topic's record key), holding from its date_time. An auction never
-- changes, so a bid joined with it as of the bid's time (q4) finds every
-- auction opened before the bid.
CREATE TABLE auctions (
  id BIGINT PRIMARY KEY, item_name VARCHAR, description VARCHAR, initial_bid BIGINT,
  reserve BIGINT, date_time BIGINT, expires BIGINT, seller BIGINT,
  category BIGINT, extra VARCHAR
) WITH (KAFKA_TOPIC='auction', VALUE_FORMAT='JSON', TIMESTAMP='date_time');
