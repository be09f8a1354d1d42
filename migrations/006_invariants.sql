-- Invariants the database enforces, whatever code path writes.
--
-- 1. One clock. ipam_now() is the only time the core reads: database time,
--    plus a skew that only tests set (ipam_clock holds no row in production).
--    The randomized invariant test moves time with it instead of sleeping.
-- 2. Cooldowns cannot be shortened. cooling_until is fixed at release and
--    kept while the row is cooling or held; reusable_at (when another owner
--    may take the row) can never be earlier than it.
-- 3. Pools never overlap across clusters. Every pool block that must be
--    unique everywhere (IPv6, public IPv4) is a row of ipam_pool_blocks under
--    one exclusion constraint, and every IPv6 block lies inside its own
--    cluster's prefix (checked against the cluster row through a foreign
--    key). Cluster prefixes are disjoint already, so an IPv6 address can be
--    handed out by one cluster only.

CREATE TABLE ipam_clock (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    skew      interval NOT NULL
);
COMMENT ON TABLE ipam_clock IS 'Test seam: a skew added to database time by ipam_now(). Empty in production.';

CREATE FUNCTION ipam_now() RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT now() + coalesce((SELECT skew FROM ipam_clock WHERE singleton), interval '0') $$;

ALTER TABLE ipam_events ALTER COLUMN at SET DEFAULT ipam_now();
ALTER TABLE ipam_allocation_failures ALTER COLUMN at SET DEFAULT ipam_now();

-- The cooldown fixed at release. Holds on a cooling address keep it; only a
-- hand-out (state active) clears it.
ALTER TABLE ipam_allocations ADD COLUMN cooling_until timestamptz;
UPDATE ipam_allocations SET cooling_until = reusable_at WHERE state = 'cooling' AND reusable_at > now();
UPDATE ipam_allocations SET cooling_until = reusable_at
 WHERE state = 'reserved' AND reserved_until IS NOT NULL AND reusable_at > reserved_until;
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_cooldown_kept
    CHECK (state = 'active' OR cooling_until IS NULL OR reusable_at >= cooling_until);
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_active_no_cooldown
    CHECK (state <> 'active' OR cooling_until IS NULL);

-- Adoption: a create that finds its owner's active allocation adopts it only
-- while no refresh has confirmed it (a retried or killed apply finding its own
-- work). Existing allocations count as confirmed.
ALTER TABLE ipam_allocations ADD COLUMN confirmed_at timestamptz;
UPDATE ipam_allocations SET confirmed_at = coalesce(last_seen_at, allocated_at) WHERE state = 'active';

-- A plan-time hold taken over by another owner after it expired: the owner's
-- next plan says so (a saved plan showing the old address cannot apply). Only
-- these rare events enter the index.
CREATE INDEX ipam_events_hold_lost ON ipam_events (cluster_id, owner_kind, owner_id, at)
    WHERE type = 'allocation.hold_lost';

-- Pool kind 'parked': the rows of a released node block whose cooldown has
-- not passed, kept (never deleted) until the block is taken again. Nothing
-- allocates from a parked pool.
ALTER TABLE ipam_pools DROP CONSTRAINT ipam_pools_kind_check;
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_kind_check CHECK (kind IN ('counter', 'table', 'blocks', 'parked'));

-- Pool blocks that must be unique across every cluster.
ALTER TABLE ipam_clusters ADD CONSTRAINT ipam_clusters_id_prefix UNIQUE (id, prefix);
CREATE TABLE ipam_pool_blocks (
    pool_id        text NOT NULL REFERENCES ipam_pools (id) ON DELETE CASCADE,
    cluster_id     text NOT NULL,
    cluster_prefix cidr NOT NULL,
    block          cidr NOT NULL,
    PRIMARY KEY (pool_id, block),
    FOREIGN KEY (cluster_id, cluster_prefix) REFERENCES ipam_clusters (id, prefix) ON DELETE CASCADE,
    -- An IPv6 block lies inside its own cluster's prefix.
    CONSTRAINT ipam_pool_blocks_in_cluster CHECK (family(block) = 4 OR block <<= cluster_prefix),
    -- No two of these blocks overlap, in any cluster.
    CONSTRAINT ipam_pool_blocks_no_overlap EXCLUDE USING gist (block inet_ops WITH &&)
);
COMMENT ON TABLE ipam_pool_blocks IS 'Blocks of pools that are unique across clusters: every IPv6 block of a cluster or operator pool, and public IPv4 blocks.';

INSERT INTO ipam_pool_blocks (pool_id, cluster_id, cluster_prefix, block)
SELECT p.id, p.cluster_id, c.prefix, b
  FROM ipam_pools p JOIN ipam_clusters c ON c.id = p.cluster_id, unnest(p.cidrs) b
 WHERE p.kind IN ('counter', 'table')
   AND (family(b) = 6 OR NOT (b <<= ANY (ARRAY['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10',
                                             '127.0.0.0/8', '169.254.0.0/16']::cidr[])));

-- Values as their writer spelled them ("720h" for 30 days, "2001:DB8::/48"),
-- by attribute: a read (an import) gives back the spelling the configuration
-- uses, so that it plans no change.
ALTER TABLE ipam_clusters ADD COLUMN as_written jsonb NOT NULL DEFAULT '{}';
ALTER TABLE ipam_pools ADD COLUMN as_written jsonb NOT NULL DEFAULT '{}';

---- create above / drop below ----

ALTER TABLE ipam_clusters DROP COLUMN IF EXISTS as_written;
ALTER TABLE ipam_pools DROP COLUMN IF EXISTS as_written;
DROP TABLE IF EXISTS ipam_pool_blocks;
DROP INDEX IF EXISTS ipam_events_hold_lost;
ALTER TABLE ipam_clusters DROP CONSTRAINT IF EXISTS ipam_clusters_id_prefix;
ALTER TABLE ipam_pools DROP CONSTRAINT ipam_pools_kind_check;
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_kind_check CHECK (kind IN ('counter', 'table', 'blocks'));
ALTER TABLE ipam_allocations DROP CONSTRAINT IF EXISTS ipam_allocations_active_no_cooldown;
ALTER TABLE ipam_allocations DROP CONSTRAINT IF EXISTS ipam_allocations_cooldown_kept;
ALTER TABLE ipam_allocations DROP COLUMN IF EXISTS cooling_until;
ALTER TABLE ipam_allocations DROP COLUMN IF EXISTS confirmed_at;
ALTER TABLE ipam_allocation_failures ALTER COLUMN at SET DEFAULT now();
ALTER TABLE ipam_events ALTER COLUMN at SET DEFAULT now();
DROP FUNCTION IF EXISTS ipam_now();
DROP TABLE IF EXISTS ipam_clock;
