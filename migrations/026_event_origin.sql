-- Migration 26: every event records the configuration whose transaction
-- wrote it: the transaction's ipam.origin (the client sets it with each
-- BEGIN and with each one-statement allocation; empty: none, recorded as
-- NULL), stamped by the column's default, so that one place gives it to
-- every event whatever statement writes it. The actor is the client's, as
-- before. Existing events record none.
ALTER TABLE ipam_events ADD COLUMN origin text DEFAULT nullif(current_setting('ipam.origin', true), '');

---- create above / drop below ----

ALTER TABLE ipam_events DROP COLUMN IF EXISTS origin;
