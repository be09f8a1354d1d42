-- Migration 13: public and private addresses are disjoint sets, by rule, and
-- the database keeps every public block of a pool under the exclusion
-- constraint that makes it unique across clusters.
--
-- Before this, a pool block was judged as a whole: an IPv4 block not wholly
-- inside private space (10.0.0.0/7, say, which holds 10.0.0.0/8 and the
-- public 11.0.0.0/8) counted as public, so it could overlap another
-- cluster's private pool, and the same address could then be active in two
-- clusters with nothing to report it (ipamctl check forgave duplicates of a
-- private address). A block now has one class, checked here and by the core
-- at plan: IPv6, public IPv4 (no private address in it) or private IPv4
-- (wholly inside private, shared (CGNAT), loopback or link-local space). A
-- block that mixes the two is refused.
--
-- The list of private IPv4 space is ipam_private_ipv4(); the core's own copy
-- (privateIPv4 in ipam/pool.go, used at plan) is compared with it by
-- TestPrivateIPv4MatchesSchema.

CREATE FUNCTION ipam_private_ipv4() RETURNS cidr[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT '{10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16}'::cidr[] $$;

-- ipam_block_class: 'public' (IPv6, or IPv4 without a private address),
-- 'private' (IPv4 wholly inside private space) or 'mixed' (refused).
CREATE FUNCTION ipam_block_class(b cidr) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE
        WHEN family(b) = 6 THEN 'public'
        WHEN b <<= ANY (ipam_private_ipv4()) THEN 'private'
        WHEN b && ANY (ipam_private_ipv4()) THEN 'mixed'
        ELSE 'public' END $$;

CREATE FUNCTION ipam_blocks_unmixed(bs cidr[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT NOT EXISTS (SELECT 1 FROM unnest(bs) b WHERE ipam_block_class(b) = 'mixed') $$;

-- New and changed pools only: a pool made before this migration keeps its
-- blocks (ipamctl check reports a mixed one).
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_blocks_unmixed CHECK (ipam_blocks_unmixed(cidrs)) NOT VALID;
ALTER TABLE ipam_pool_blocks ADD CONSTRAINT ipam_pool_blocks_public CHECK (ipam_block_class(block) = 'public') NOT VALID;

-- Every public block of a counter or table pool is a row of
-- ipam_pool_blocks, kept by this trigger whatever statement writes the pool
-- (the core wrote them itself before). The rows' exclusion constraint
-- refuses a block that overlaps another pool's or cluster's, and their check
-- an IPv6 block outside its cluster's prefix; the error names the
-- constraint, as before.
CREATE FUNCTION ipam_pools_sync_blocks() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM ipam_pool_blocks
        WHERE pool_id = NEW.id
            AND (NEW.kind NOT IN ('counter', 'table') OR NOT (block = ANY (NEW.cidrs)));
    IF NEW.kind IN ('counter', 'table') THEN
        INSERT INTO ipam_pool_blocks (pool_id, cluster_id, cluster_prefix, block)
            SELECT NEW.id, c.id, c.prefix, b FROM ipam_clusters c, unnest(NEW.cidrs) b
            WHERE c.id = NEW.cluster_id AND ipam_block_class(b) = 'public'
            ON CONFLICT (pool_id, block) DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION ipam_pools_sync_blocks() IS
    'Invariant: every public block of a pool is in ipam_pool_blocks, unique across clusters (see migration 13).';

CREATE TRIGGER ipam_pools_sync_blocks AFTER INSERT OR UPDATE OF cidrs, kind ON ipam_pools
    FOR EACH ROW EXECUTE FUNCTION ipam_pools_sync_blocks();

---- create above / drop below ----

DROP TRIGGER IF EXISTS ipam_pools_sync_blocks ON ipam_pools;
DROP FUNCTION IF EXISTS ipam_pools_sync_blocks();
ALTER TABLE ipam_pool_blocks DROP CONSTRAINT IF EXISTS ipam_pool_blocks_public;
ALTER TABLE ipam_pools DROP CONSTRAINT IF EXISTS ipam_pools_blocks_unmixed;
DROP FUNCTION IF EXISTS ipam_blocks_unmixed(cidr[]);
DROP FUNCTION IF EXISTS ipam_block_class(cidr);
DROP FUNCTION IF EXISTS ipam_private_ipv4();
