-- Nexmark q0, pass-through: every bid, as read (the cost of reading,
-- decoding and writing one event).
CREATE STREAM nexmark_q0 AS
SELECT auction, bidder, price, date_time, extra FROM bid;
