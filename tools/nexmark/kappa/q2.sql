-- Nexmark q2, selection: the bids on every 123rd auction.
CREATE STREAM nexmark_q2 AS
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
