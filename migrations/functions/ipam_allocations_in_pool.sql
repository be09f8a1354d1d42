-- The current definition of ipam_allocations_in_pool: created by migration 12, last changed
-- by migration 33. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- Invariant: nothing enters 'active' or 'reserved' outside its pool (a block
-- of the pool, not excluded, the pool not parked), nor over a live tombstone
-- of anyone but its owner in its own cluster: a new pool inherits the
-- tombstones inside it as cooling rows in the transaction that lays out its
-- rows, so a live tombstone left over an address means a path forgot to
-- inherit it. An owner key means something only inside its cluster, so a
-- tombstone's owner takes its address back only in the cluster of the same
-- id, and only for the same tenant (each of org and env the tombstone names
-- is the row's), as a cooling row goes back to its owner (the allocator's
-- guard reusable_or_own). The triggers that call it are in migration 12.
--
-- It also records who manages a row that becomes active or held: the origin
-- of the configuration whose transaction hands it out or holds it for a plan
-- (the client sets ipam.origin for its transactions; empty: none), for the
-- row's new generation. So the manager is written by the statement that
-- allocates, never by a second one after the commit that a concurrent create
-- could overtake (migration 23), and a plan-time hold is its planning
-- configuration's (migration 24).
CREATE OR REPLACE FUNCTION ipam_allocations_in_pool() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    t record;
BEGIN
    -- Inside its pool, as migration 12 had it.
    PERFORM 1 FROM ipam_pools p
        WHERE p.id = NEW.pool_id AND p.kind <> 'parked'
            AND NEW.address <<= ANY (p.cidrs) AND NOT NEW.address <<= ANY (p.exclude)
        FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'address % is not inside pool % (changed or deleted meanwhile)', host(NEW.address), NEW.pool_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_allocations_in_pool',
                  TABLE = 'ipam_allocations', SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    -- Not over another owner's tombstone still cooling; the owner is its
    -- owner in the cluster of the same id only.
    SELECT * INTO t FROM ipam_tombstones
        WHERE address = NEW.address AND scope = ipam_tombstone_scope(NEW.address, NEW.cluster_id)
            AND reusable_at > ipam_now()
            AND NOT ((cluster_id, owner_kind, owner_id) IS NOT DISTINCT FROM (NEW.cluster_id, NEW.owner_kind, NEW.owner_id)
                AND coalesce(org_id = NEW.org_id, org_id IS NULL) AND coalesce(env_id = NEW.env_id, env_id IS NULL));
    IF FOUND THEN
        RAISE EXCEPTION 'address % is cooling until % (left by % % of destroyed pool %); it was not inherited by pool %',
                host(NEW.address), t.reusable_at, t.owner_kind, t.owner_id, t.pool_id, NEW.pool_id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_allocations_not_buried',
                  TABLE = 'ipam_allocations', SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    IF coalesce(current_setting('ipam.origin', true), '') <> '' THEN
        NEW.origin := current_setting('ipam.origin', true);
        NEW.origin_generation := NEW.generation;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION ipam_allocations_in_pool() IS
    'Invariant: an active or held allocation lies inside a block of its own pool, outside its exclusions (see migration 12).';
