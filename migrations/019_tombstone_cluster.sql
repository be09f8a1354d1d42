-- Migration 19: a tombstone's owner is its owner in its own cluster only.
--
-- An owner key (kind and id) means something only inside its cluster: env
-- "prod" or instance "web-1" of one cluster has nothing to do with those of
-- another. Migration 16 let the owner a tombstone names take the address
-- back in any cluster, so another cluster built over the same prefix (or
-- the same public IPv4 block) handed a destroyed cluster's addresses to its
-- own owners of the same names inside their cooldown. Now the owner may take
-- the address back only in the cluster of the same id; a pool of another
-- cluster inherits the tombstone as a cooling row that no owner there can
-- claim (the core writes it under the owner id "<former cluster>/<owner>",
-- which no valid owner id can be, and without the former owner's labels).
-- The row trigger of migration 12 matches a tombstone's owner with its
-- cluster: see functions/ipam_allocations_in_pool.sql (applied after the
-- numbered migrations).

-- Rows that a pool of another cluster inherited before this version, under
-- their former owner's key and still cooling, become claimable by no owner
-- there (the inheritance event names the pool the address left).
UPDATE ipam_allocations a SET owner_id = split_part(e.data->>'from_pool', '/', 1) || '/' || a.owner_id,
        org_id = NULL, env_id = NULL, node_id = NULL, instance_id = NULL
    FROM ipam_events e
    WHERE e.type = 'allocation.inherited' AND e.allocation_id = a.id AND e.generation = a.generation
        AND a.state = 'cooling' AND split_part(e.data->>'from_pool', '/', 1) <> a.cluster_id;

---- create above / drop below ----

CREATE OR REPLACE FUNCTION ipam_allocations_in_pool() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    t record;
BEGIN
    PERFORM 1 FROM ipam_pools p
        WHERE p.id = NEW.pool_id AND p.kind <> 'parked'
            AND NEW.address <<= ANY (p.cidrs) AND NOT NEW.address <<= ANY (p.exclude)
        FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'address % is not inside pool % (changed or deleted meanwhile)', host(NEW.address), NEW.pool_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_allocations_in_pool',
                  TABLE = 'ipam_allocations', SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    SELECT * INTO t FROM ipam_tombstones
        WHERE address = NEW.address AND scope = ipam_tombstone_scope(NEW.address, NEW.cluster_id)
            AND reusable_at > ipam_now()
            AND (owner_kind, owner_id) IS DISTINCT FROM (NEW.owner_kind, NEW.owner_id);
    IF FOUND THEN
        RAISE EXCEPTION 'address % is cooling until % (left by % % of destroyed pool %); it was not inherited by pool %',
                host(NEW.address), t.reusable_at, t.owner_kind, t.owner_id, t.pool_id, NEW.pool_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_allocations_not_buried',
                  TABLE = 'ipam_allocations', SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    RETURN NEW;
END
$$;
