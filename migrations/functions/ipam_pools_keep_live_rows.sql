-- The current definition of ipam_pools_keep_live_rows: created by migration 12, last changed
-- by migration 35. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
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
--
-- A change that only widens the pool (its blocks a superset of the old ones,
-- its exclusions a subset, the same kind, not parked) leaves every row where
-- it was inside the pool: nothing to wait for or check. A node's blocks grow
-- so, and a growth must not wait for the allocations in flight on the node
-- (migration 35).
CREATE OR REPLACE FUNCTION ipam_pools_keep_live_rows() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    r record;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.kind = OLD.kind AND NEW.kind <> 'parked'
            AND NEW.cidrs @> OLD.cidrs AND OLD.exclude @> NEW.exclude THEN
        RETURN NEW;
    END IF;
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
