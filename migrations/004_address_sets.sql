-- Address sets: one owner holding several keyed addresses across pools and
-- families. Each member is an ordinary allocation whose owner id is
-- "<owner_id>#<key>" (kind 'set'); set_owner names the set, so the members of
-- a set are one index probe away. Pools may be marked as the cluster's
-- default for their family (the target of a "family = ipv4" request).

ALTER TABLE ipam_allocations ADD COLUMN set_owner text;
-- What the member's key asked for ({"pools": [...], "family": 4, "address": true}),
-- so an imported set reads back exactly the configuration that made it.
ALTER TABLE ipam_allocations ADD COLUMN request jsonb;
CREATE INDEX ipam_allocations_set ON ipam_allocations (cluster_id, set_owner)
    WHERE set_owner IS NOT NULL AND state IN ('active', 'reserved');

ALTER TABLE ipam_pools ADD COLUMN is_default boolean NOT NULL DEFAULT false;
CREATE UNIQUE INDEX ipam_pools_default ON ipam_pools (cluster_id, family) WHERE is_default;

---- create above / drop below ----

DROP INDEX IF EXISTS ipam_pools_default;
ALTER TABLE ipam_pools DROP COLUMN IF EXISTS is_default;
DROP INDEX IF EXISTS ipam_allocations_set;
ALTER TABLE ipam_allocations DROP COLUMN IF EXISTS request;
ALTER TABLE ipam_allocations DROP COLUMN IF EXISTS set_owner;
