-- Migration 27: a leaner write set per allocation. An event writes two
-- B-tree entries (its primary key and its time) instead of three, and
-- refresh confirmations of an allocation can be heap-only updates.
--
-- Measured from the WAL (bench: "index entries/op"), an allocation wrote
-- eight index entries: five for its row (primary key, address, the owner's
-- unique index, pool and state, labels) and three for its event (primary
-- key, time, cluster and address). Each reads back as follows:
--
--   ipam_events_at (at): ListEvents (ipamctl events) reads a time range, at
--   >= since, in time order, and `--limit N` the newest N: a B-tree stops
--   after N entries. (A BRIN index would write about no entry per event,
--   but a --limit read would then read its whole --since window, 24 hours
--   by default: 255 ms instead of 0.03 ms on a million events. It stays a
--   B-tree.)
--
--   ipam_events_address (cluster_id, address, at): read by ipamctl check
--   only: the cooldown check looks up, for each hand-out, the address's
--   latest release before it (sqlCheckCooldown: releases that record
--   data.reusable_at), and the counter check the address's exact claims
--   (sqlCheckCounterOrdinals: data.exact). Both name the condition the
--   index now keeps, so hand-outs (most events) write no entry to it.
--
-- The allocation row keeps its five indexes here: the primary key, the
-- address and the owner's active index are constraints; (pool_id, state)
-- serves usage's live holds, node scaling, the check's counts, a pool's
-- shape change and delete (migration 12's trigger, the foreign key's
-- cascade); labels serve list by org and env. See the bench's report for
-- what each allocation writes.
--
-- HOT: a stripe advance (migration 10) and a counter slot update are
-- heap-only already (fillfactor 10, no index on what they change). A change
-- of an allocation's state never is (state is in the partial indexes'
-- conditions); the refresh's confirmation (last_seen_at, confirmed_at,
-- which no index names) is, when its page has room: new pages of the
-- allocations keep a tenth free for it.

DROP INDEX ipam_events_address;
CREATE INDEX ipam_events_address ON ipam_events (cluster_id, address, at)
    WHERE data ? 'reusable_at' OR data->>'exact' = 'true';

ALTER TABLE ipam_allocations SET (fillfactor = 90);

---- create above / drop below ----

ALTER TABLE ipam_allocations RESET (fillfactor);

DROP INDEX ipam_events_address;
CREATE INDEX ipam_events_address ON ipam_events (cluster_id, address, at);
