-- Migration 28: the event log keeps one B-tree in time order instead of two.
-- Its primary key was the event's id alone, beside an index on its time for
-- ListEvents (ipamctl events: a time range, at >= since, ORDER BY at, id,
-- and `--limit N` the newest N). The key is now (at, id): the one index
-- that read walks, in its order, and the event's identity (ids are UUIDv7,
-- unique with or without their time; no statement looks an event up by id
-- alone). An event writes one B-tree entry fewer, appended at the right of
-- the index as before.
--
-- Upgrading rebuilds the key: the events table is locked for one index
-- build (seconds at a million events).

ALTER TABLE ipam_events DROP CONSTRAINT ipam_events_pkey;
ALTER TABLE ipam_events ADD CONSTRAINT ipam_events_pkey PRIMARY KEY (at, id);
DROP INDEX ipam_events_at;

---- create above / drop below ----

ALTER TABLE ipam_events DROP CONSTRAINT ipam_events_pkey;
ALTER TABLE ipam_events ADD CONSTRAINT ipam_events_pkey PRIMARY KEY (id);
CREATE INDEX ipam_events_at ON ipam_events (at);
