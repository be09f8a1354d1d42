-- The current definition of ipam_allocations_keep_cooldown: created by migration 15, last changed
-- by migration 37 (the tombstone keeps the row's allocated_at). Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- A row deleted with its pool while inside its cooldown becomes a tombstone
-- (the latest cooldown wins when the address already has one). Any other
-- delete of such a row is refused, as migration 15 did; an active row is
-- refused even with its pool (the pool's own trigger refused before: a
-- forced destroy releases its rows into their cooldown first).
CREATE OR REPLACE FUNCTION ipam_allocations_keep_cooldown() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    until timestamptz;
BEGIN
    IF OLD.state <> 'active' AND NOT EXISTS (SELECT 1 FROM ipam_pools WHERE id = OLD.pool_id) THEN
        -- A hold keeps the cooldown it was taken on, no more.
        until := CASE OLD.state WHEN 'cooling' THEN OLD.reusable_at ELSE OLD.cooling_until END;
        IF until > ipam_now() THEN
            INSERT INTO ipam_tombstones AS t (address, scope, reusable_at, released_at, cluster_id, pool_id,
                    allocation_id, generation, owner_kind, owner_id, org_id, env_id, node_id, instance_id, actor, buried_at,
                    allocated_at)
                VALUES (OLD.address, ipam_tombstone_scope(OLD.address, OLD.cluster_id), until,
                    coalesce(OLD.released_at, OLD.allocated_at), OLD.cluster_id, OLD.pool_id, OLD.id, OLD.generation,
                    OLD.owner_kind, OLD.owner_id, OLD.org_id, OLD.env_id, OLD.node_id, OLD.instance_id, OLD.actor, ipam_now(),
                    OLD.allocated_at)
                ON CONFLICT (address, scope) DO UPDATE SET reusable_at = EXCLUDED.reusable_at,
                    released_at = EXCLUDED.released_at, allocated_at = EXCLUDED.allocated_at,
                    cluster_id = EXCLUDED.cluster_id, pool_id = EXCLUDED.pool_id,
                    allocation_id = EXCLUDED.allocation_id, generation = EXCLUDED.generation,
                    owner_kind = EXCLUDED.owner_kind, owner_id = EXCLUDED.owner_id, org_id = EXCLUDED.org_id,
                    env_id = EXCLUDED.env_id, node_id = EXCLUDED.node_id, instance_id = EXCLUDED.instance_id,
                    actor = EXCLUDED.actor, buried_at = EXCLUDED.buried_at
                WHERE EXCLUDED.reusable_at > t.reusable_at;
        END IF;
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'address % is % (until %): a row inside its cooldown, held or active is never deleted',
            host(OLD.address), OLD.state, coalesce(OLD.reusable_at::text, 'released')
        USING ERRCODE = 'check_violation', CONSTRAINT = 'ipam_allocations_keep_cooldown',
              TABLE = 'ipam_allocations', SCHEMA = TG_TABLE_SCHEMA;
END
$$;
COMMENT ON FUNCTION ipam_allocations_keep_cooldown() IS
    'Invariant: a row active, held or inside its cooldown is never deleted; deleted with its pool, it stays as a tombstone (see migrations 15 and 16).';
