-- Migration 12: the database itself keeps every active or held allocation
-- inside its pool, whatever statement writes it.
--
-- Before this, each statement that hands out or holds a row took its pool's
-- lock (FOR KEY SHARE) by hand, so that a writer changing the pool's shape
-- (a shrink, an exclusion, a destroy: FOR UPDATE) waits for it, and it for
-- them. One statement forgot: the apply of an expired plan-time hold turned
-- the row active while a shrink that had counted it as not held went on, and
-- the address stayed active outside its pool (where another cluster's pool
-- could hand it out again), or a destroy cascaded over an allocation its
-- caller had just been told it holds.
--
-- Now a row trigger does what each statement had to remember. A row that
-- enters 'active' or 'reserved' (inserted so, or updated into it from
-- another state, pool, address or hold expiry) takes its pool's row
-- FOR KEY SHARE and must lie in one of the pool's blocks and outside its
-- exclusions, in a pool that hands out (not a released block's parked
-- rows). Under READ COMMITTED the lock waits for a shape writer in flight
-- and then reads the pool as that writer committed it, so no interleaving
-- can leave the row outside: the statement either commits a row that the
-- writer, waiting in turn for it, sees and counts, or fails with
-- check_violation on ipam_allocations_in_pool (which the core retries, and
-- its full path then refuses with the reason). The statements that take the
-- lock themselves first (all of them, since this migration) pay the trigger's
-- probe only: a lock the transaction holds is not taken again.

CREATE FUNCTION ipam_allocations_in_pool() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION ipam_allocations_in_pool() IS
    'Invariant: an active or held allocation lies inside a block of its own pool, outside its exclusions (see migration 12).';

CREATE TRIGGER ipam_allocations_in_pool_insert BEFORE INSERT ON ipam_allocations
    FOR EACH ROW WHEN (NEW.state IN ('active', 'reserved'))
    EXECUTE FUNCTION ipam_allocations_in_pool();
CREATE TRIGGER ipam_allocations_in_pool_update BEFORE UPDATE OF state, pool_id, address, reserved_until ON ipam_allocations
    FOR EACH ROW WHEN (NEW.state IN ('active', 'reserved')
        AND (OLD.state IS DISTINCT FROM NEW.state OR OLD.pool_id IS DISTINCT FROM NEW.pool_id
            OR OLD.address IS DISTINCT FROM NEW.address OR OLD.reserved_until IS DISTINCT FROM NEW.reserved_until))
    EXECUTE FUNCTION ipam_allocations_in_pool();

-- The other side of the same invariant: a change of a pool's shape (its
-- blocks, exclusions or kind) or its deletion. A plain UPDATE of the pool's
-- row takes a lock (FOR NO KEY UPDATE) that does not conflict with the
-- allocators' FOR KEY SHARE, so the trigger takes the row FOR UPDATE itself,
-- which waits for every allocation in flight; each statement of a PL/pgSQL
-- function reads with a new snapshot, so the check that follows sees what
-- they committed. No active row, and no live hold, may lie outside the new
-- shape; none may be in a pool being deleted (a destroy releases them first,
-- or refuses). Rows past their cooldown and expired holds are the writer's
-- to delete or keep. A cluster destroy deletes its pools by cascade, which
-- fires this trigger for each.
CREATE FUNCTION ipam_pools_keep_live_rows() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    PERFORM 1 FROM ipam_pools WHERE id = OLD.id FOR UPDATE;
    SELECT a.address, a.state INTO r FROM ipam_allocations a
        WHERE a.pool_id = OLD.id
            AND (a.state = 'active' OR (a.state = 'reserved' AND a.reserved_until > ipam_now()))
            AND (TG_OP = 'DELETE' OR NEW.kind = 'parked'
                OR NOT (a.address <<= ANY (NEW.cidrs)) OR a.address <<= ANY (NEW.exclude))
        LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'pool % still has % address % where the change would leave it; release it first', OLD.id, r.state, host(r.address)
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_pools_keep_live_rows',
                  TABLE = 'ipam_pools', SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION ipam_pools_keep_live_rows() IS
    'Invariant: no pool change or delete leaves an active or held allocation outside its pool (see migration 12).';

CREATE TRIGGER ipam_pools_keep_live_rows_update BEFORE UPDATE OF cidrs, exclude, kind ON ipam_pools
    FOR EACH ROW WHEN (OLD.cidrs IS DISTINCT FROM NEW.cidrs OR OLD.exclude IS DISTINCT FROM NEW.exclude
        OR OLD.kind IS DISTINCT FROM NEW.kind)
    EXECUTE FUNCTION ipam_pools_keep_live_rows();
CREATE TRIGGER ipam_pools_keep_live_rows_delete BEFORE DELETE ON ipam_pools
    FOR EACH ROW EXECUTE FUNCTION ipam_pools_keep_live_rows();

---- create above / drop below ----

DROP TRIGGER IF EXISTS ipam_pools_keep_live_rows_delete ON ipam_pools;
DROP TRIGGER IF EXISTS ipam_pools_keep_live_rows_update ON ipam_pools;
DROP FUNCTION IF EXISTS ipam_pools_keep_live_rows();
DROP TRIGGER IF EXISTS ipam_allocations_in_pool_update ON ipam_allocations;
DROP TRIGGER IF EXISTS ipam_allocations_in_pool_insert ON ipam_allocations;
DROP FUNCTION IF EXISTS ipam_allocations_in_pool();
