-- Stripe advances become HOT updates: the index that ordered a pool's stripes
-- by next ordinal goes.
--
-- Every fresh allocation advances its stripe's next_ordinal (and its active
-- count). The partial index ipam_pool_stripes_fresh covered next_ordinal, so
-- no advance could be a heap-only (HOT) update: each one wrote a new row
-- version and a new entry in both of the table's indexes, and the stripe pick,
-- which walked that index for the lowest next ordinal, stepped over the dead
-- entries first (124 entries per pick at 16 clients, measured). Without it the
-- only index is the primary key (pool_id, stripe), which no advance changes:
-- the new version stays on its page, no index gets an entry, and the pick
-- reads the pool's stripes by the key and sorts them by next ordinal. That
-- sort is bounded by the pool's stripe count, which the constraint below
-- bounds (the allocator makes 32 stripes per counter pool). The old index's
-- cost grew with the advances a pool had seen since its last vacuum: 16
-- clients allocating from one pool read 216 shared buffers per allocation in
-- their first 8 seconds and 520 in their third, against 60 throughout
-- without it.
DROP INDEX ipam_pool_stripes_fresh;
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_stripes_bounded CHECK (stripes <= 64);

---- create above / drop below ----

ALTER TABLE ipam_pools DROP CONSTRAINT IF EXISTS ipam_pools_stripes_bounded;
CREATE INDEX ipam_pool_stripes_fresh ON ipam_pool_stripes (pool_id, next_ordinal)
    WHERE next_ordinal <= last_ordinal;
