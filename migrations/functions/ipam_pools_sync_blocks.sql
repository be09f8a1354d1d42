-- The current definition of ipam_pools_sync_blocks: created by migration 13, last changed
-- by migration 13. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- Every public block of a counter or table pool is a row of
-- ipam_pool_blocks, kept by this trigger whatever statement writes the pool
-- (the core wrote them itself before). The rows' exclusion constraint
-- refuses a block that overlaps another pool's or cluster's, and their check
-- an IPv6 block outside its cluster's prefix; the error names the
-- constraint, as before.
CREATE OR REPLACE FUNCTION ipam_pools_sync_blocks() RETURNS trigger
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
