-- Migration 15: no statement deletes a row that is active, held or inside
-- its cooldown, whatever path it takes.
--
-- Every delete of the core is conditional on the row being reusable (free,
-- cooled, or an expired hold with no cooldown left), and a released node
-- block moves its cooling rows to a parked pool instead. This trigger makes
-- the database refuse any other delete, so that no path, present or future,
-- can forget the condition. The one delete it lets through is the cascade
-- of a pool's own deletion (its row is gone by then): a non-forced destroy
-- has refused before, while the pool held such a row; a forced destroy
-- releases its active rows and holds into cooldown first (migration 12's
-- pool trigger refuses otherwise), and its cooling rows go with the pool.
-- Keeping them as tombstones that outlive the pool is not built yet.
CREATE FUNCTION ipam_allocations_keep_cooldown() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ipam_pools WHERE id = OLD.pool_id) THEN
        RAISE EXCEPTION 'address % is % (until %): a row inside its cooldown, held or active is never deleted',
                host(OLD.address), OLD.state, coalesce(OLD.reusable_at::text, 'released')
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_allocations_keep_cooldown',
                  TABLE = 'ipam_allocations', SCHEMA = TG_TABLE_SCHEMA;
    END IF;
    RETURN OLD;
END
$$;
COMMENT ON FUNCTION ipam_allocations_keep_cooldown() IS
    'Invariant: a row active, held or inside its cooldown is never deleted, but with its pool (see migration 15).';

CREATE TRIGGER ipam_allocations_keep_cooldown BEFORE DELETE ON ipam_allocations
    FOR EACH ROW WHEN (OLD.state = 'active' OR (OLD.state IN ('reserved', 'cooling') AND OLD.reusable_at > ipam_now()))
    EXECUTE FUNCTION ipam_allocations_keep_cooldown();

---- create above / drop below ----

DROP TRIGGER IF EXISTS ipam_allocations_keep_cooldown ON ipam_allocations;
DROP FUNCTION IF EXISTS ipam_allocations_keep_cooldown();
