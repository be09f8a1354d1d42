-- Migration 16: cooling addresses outlive their pool and cluster.
--
-- A pool or cluster destroyed while some of its addresses are inside their
-- cooldown leaves each of them behind as a tombstone: the address, until
-- when it cools, and who last held it. A pool, cluster or node block created
-- later over such an address inherits it as a cooling row (the core does
-- that when it lays out the new pool's rows), and until its cooldown ends no
-- path can hand it out: the row trigger of migration 12 refuses it. So a
-- destroy no longer has to refuse cooling addresses, and a destroy followed
-- at once by re-creating the same cluster and pool hands out none of them.
--
-- Scope: an IPv6 or public IPv4 address names one thing anywhere, so its
-- tombstone binds every cluster (scope ''). A private IPv4 address is reused
-- by every cluster, so its tombstone binds the cluster of the same id only
-- (scope: the cluster's id), as its allocation did.
CREATE TABLE ipam_tombstones (
    address       inet NOT NULL CHECK (masklen(address) = CASE family(address) WHEN 4 THEN 32 ELSE 128 END),
    scope         text NOT NULL,
    reusable_at   timestamptz NOT NULL,
    released_at   timestamptz,
    cluster_id    text NOT NULL,
    pool_id       text NOT NULL,
    allocation_id uuid NOT NULL,
    generation    bigint NOT NULL,
    owner_kind    text,
    owner_id      text,
    org_id        text,
    env_id        text,
    node_id       text,
    instance_id   text,
    actor         text,
    buried_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (address, scope)
);
CREATE INDEX ipam_tombstones_reusable ON ipam_tombstones (reusable_at);
COMMENT ON TABLE ipam_tombstones IS
    'Addresses of destroyed pools and clusters still inside their cooldown (see migration 16).';

-- The scope of an address's tombstone (above).
CREATE FUNCTION ipam_tombstone_scope(address inet, cluster text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN family(address) = 4 AND address <<= ANY (ipam_private_ipv4()) THEN cluster ELSE '' END $$;

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
                    allocation_id, generation, owner_kind, owner_id, org_id, env_id, node_id, instance_id, actor, buried_at)
                VALUES (OLD.address, ipam_tombstone_scope(OLD.address, OLD.cluster_id), until,
                    coalesce(OLD.released_at, OLD.allocated_at), OLD.cluster_id, OLD.pool_id, OLD.id, OLD.generation,
                    OLD.owner_kind, OLD.owner_id, OLD.org_id, OLD.env_id, OLD.node_id, OLD.instance_id, OLD.actor, ipam_now())
                ON CONFLICT (address, scope) DO UPDATE SET reusable_at = EXCLUDED.reusable_at,
                    released_at = EXCLUDED.released_at, cluster_id = EXCLUDED.cluster_id, pool_id = EXCLUDED.pool_id,
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

-- Nothing enters 'active' or 'reserved' outside its pool (migration 12), nor
-- over another's tombstone still cooling: a new pool inherits the
-- tombstones inside it as cooling rows, and deletes them, in the
-- transaction that lays out its rows, so a live tombstone left over an
-- address means a path forgot to inherit it. The owner a tombstone names
-- may take its own address back, as it may from a cooling row.
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

-- A lost plan-time hold reported to a plan run (the core's Reserve): the
-- owner's next plans look it up next to the loss (migration 6's index).
CREATE INDEX ipam_events_hold_loss_reported ON ipam_events (cluster_id, owner_kind, owner_id, at)
    WHERE type = 'allocation.hold_loss_reported';

---- create above / drop below ----

DROP INDEX IF EXISTS ipam_events_hold_loss_reported;

CREATE OR REPLACE FUNCTION ipam_allocations_in_pool() RETURNS trigger
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
CREATE OR REPLACE FUNCTION ipam_allocations_keep_cooldown() RETURNS trigger
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
DROP FUNCTION IF EXISTS ipam_tombstone_scope(inet, text);
DROP TABLE IF EXISTS ipam_tombstones;
