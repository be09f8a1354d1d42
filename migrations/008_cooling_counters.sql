-- Migration 8: the cooling count kept per minute (below), ipam_now() in
-- PL/pgSQL, stripes and counter slots spread over pages, and one foreign key
-- from an allocation to its pool and cluster. Each part says why.
--
-- Cooling in constant time. A pool's count of addresses inside their cooldown
-- is kept per minute of reusable_at (the cooling bucket), so usage sums the
-- buckets from two minutes ahead (one row per minute with releases, per
-- concurrent writer) and counts only the rows before them on the reuse index,
-- instead of the whole cooldown window.
--
-- The count is kept by triggers, so every statement that moves a row into or
-- out of the cooldown queue (a release, a hold given back, a reclaim, a
-- reuse, a block parked, a row deleted) counts it, in the same statement:
-- the count commits or rolls back with the change. A row is counted while it
-- is 'cooling' with reusable_at after the writer's ipam_now(); a row whose
-- cooldown has already passed when it changes is not (its bucket is in the
-- past, and usage never reads a past bucket). So a bucket usage reads is
-- exact as long as database time does not run backwards, and nothing on the
-- allocator's common paths fires a trigger: a fresh address is not cooling,
-- and a reused one has left its cooldown.
--
-- Writers never queue on a bucket: each takes a row of the bucket that no
-- other transaction holds (FOR UPDATE SKIP LOCKED), or adds a row with a
-- random slot number when every row is held. Past buckets are deleted, a few
-- at a time, by the writers that add rows later.

-- ipam_now() in PL/pgSQL. As a SQL function it was never inlined (its body
-- reads ipam_clock in a subquery), so every statement that called it set up
-- and ran a SQL function per call site: 15 to 20 microseconds of server CPU
-- per call, several calls per allocation, and one in each trigger condition
-- below. PL/pgSQL keeps its plan per session, so a call costs about as much
-- as now(). Same result, same snapshot (a STABLE function reads with its
-- caller's).
CREATE OR REPLACE FUNCTION ipam_now() RETURNS timestamptz
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    AS $$ BEGIN RETURN now() + coalesce((SELECT skew FROM ipam_clock WHERE singleton), interval '0'); END $$;

-- Stripes and counter slots on more pages. Every allocation updates a stripe
-- or slot row of its pool, and packed eight kilobytes at a time, concurrent
-- allocators queued on the same page's lock. A page now keeps 90 % free for
-- new rows and their updated versions (existing rows spread out as they move).
ALTER TABLE ipam_pool_stripes SET (fillfactor = 10);
ALTER TABLE ipam_pool_counters SET (fillfactor = 10);

-- One foreign key from an allocation to its pool and the pool's cluster,
-- instead of one to each. A foreign key check locks the parent row FOR KEY
-- SHARE, and once several transactions hold such a lock on one row each new
-- one creates a multixact and writes the row's lock again: with two keys,
-- every concurrent allocation did that on its pool's row and on its cluster's
-- row (1.5 multixacts per allocation at 16 clients). The pool's row is
-- locked anyway (the allocator's pool lock); the cluster's no longer is. The
-- pair also says more than the two keys did: an allocation lies in a pool of
-- its own cluster.
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_id_cluster UNIQUE (id, cluster_id);
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_pool_cluster_fkey
    FOREIGN KEY (pool_id, cluster_id) REFERENCES ipam_pools (id, cluster_id) ON DELETE CASCADE;
ALTER TABLE ipam_allocations DROP CONSTRAINT ipam_allocations_pool_id_fkey;
ALTER TABLE ipam_allocations DROP CONSTRAINT ipam_allocations_cluster_id_fkey;

CREATE TABLE ipam_pool_cooling (
    pool_id text NOT NULL REFERENCES ipam_pools (id) ON DELETE CASCADE,
    bucket  timestamptz NOT NULL,
    slot    integer NOT NULL,
    cooling bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (pool_id, bucket, slot)
);

-- The bucket of a reusable_at: the minute it falls in.
CREATE FUNCTION ipam_cooling_bucket(at timestamptz) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT date_bin(interval '1 minute', at, timestamptz '2000-01-01 00:00:00+00') $$;

-- The first bucket usage reads from the counts: the one after the next
-- minute. The rows before it (at most two minutes of releases) are counted on
-- the reuse index. The minute's margin keeps a read exact while a writer that
-- started after the reader commits before the reader's snapshot.
CREATE FUNCTION ipam_cooling_counted_from() RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT ipam_cooling_bucket(ipam_now()) + interval '2 minutes' $$;

-- ipam_count_cooling adds delta to one row of the pool's bucket: the first
-- one no other transaction holds, or a new one. A writer that adds a row
-- deletes up to four past buckets of the pool that no one holds, so they go
-- as fast as they come. A statement that moves many rows of one bucket (a
-- bulk load, a block parked) updates the same row again and again in one
-- transaction: the function keeps that row's newest version (its ctid, in a
-- transaction-local setting) and updates it directly, so each call costs the
-- same instead of walking every version the transaction left behind.
CREATE FUNCTION ipam_count_cooling(p_pool text, p_at timestamptz, p_delta integer) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    b timestamptz := ipam_cooling_bucket(p_at);
    k text := p_pool || '@' || extract(epoch FROM b)::bigint || '@';
    last text := current_setting('ipam.cooling_row', true);
    t tid;
BEGIN
    IF starts_with(last, k) THEN
        UPDATE ipam_pool_cooling SET cooling = cooling + p_delta
            WHERE ctid = substr(last, length(k) + 1)::tid AND pool_id = p_pool AND bucket = b
            RETURNING ctid INTO t;
    END IF;
    IF t IS NULL THEN
        LOOP
            UPDATE ipam_pool_cooling SET cooling = cooling + p_delta
                WHERE ctid = (SELECT ctid FROM ipam_pool_cooling WHERE pool_id = p_pool AND bucket = b
                    ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
                RETURNING ctid INTO t;
            EXIT WHEN FOUND;
            INSERT INTO ipam_pool_cooling (pool_id, bucket, slot, cooling)
                VALUES (p_pool, b, floor(random() * 2147483647)::integer, p_delta)
                ON CONFLICT DO NOTHING
                RETURNING ctid INTO t;
            IF FOUND THEN
                DELETE FROM ipam_pool_cooling
                    WHERE ctid = ANY (ARRAY(SELECT ctid FROM ipam_pool_cooling
                        WHERE pool_id = p_pool AND bucket < ipam_cooling_bucket(ipam_now())
                        LIMIT 4 FOR UPDATE SKIP LOCKED));
                EXIT;
            END IF;
        END LOOP;
    END IF;
    PERFORM set_config('ipam.cooling_row', k || t::text, true);
END
$$;

CREATE FUNCTION ipam_allocations_cooling() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    now_at timestamptz := ipam_now();
    old_counted boolean := false;
    new_counted boolean := false;
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        old_counted := OLD.state = 'cooling' AND OLD.reusable_at > now_at;
    END IF;
    IF TG_OP = 'DELETE' AND NOT EXISTS (SELECT 1 FROM ipam_pools WHERE id = OLD.pool_id) THEN
        RETURN NULL; -- the pool is being deleted (a forced cluster delete): its counts go with it
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        new_counted := NEW.state = 'cooling' AND NEW.reusable_at > now_at;
    END IF;
    IF old_counted AND new_counted AND OLD.pool_id = NEW.pool_id
        AND ipam_cooling_bucket(OLD.reusable_at) = ipam_cooling_bucket(NEW.reusable_at) THEN
        RETURN NULL;
    END IF;
    IF old_counted THEN
        PERFORM ipam_count_cooling(OLD.pool_id, OLD.reusable_at, -1);
    END IF;
    IF new_counted THEN
        PERFORM ipam_count_cooling(NEW.pool_id, NEW.reusable_at, 1);
    END IF;
    RETURN NULL;
END
$$;

-- The WHEN conditions keep every other write from calling the function.
CREATE TRIGGER ipam_allocations_cooling_insert AFTER INSERT ON ipam_allocations
    FOR EACH ROW WHEN (NEW.state = 'cooling' AND NEW.reusable_at > ipam_now())
    EXECUTE FUNCTION ipam_allocations_cooling();
CREATE TRIGGER ipam_allocations_cooling_update AFTER UPDATE OF state, reusable_at, pool_id ON ipam_allocations
    FOR EACH ROW WHEN ((OLD.state = 'cooling' AND OLD.reusable_at > ipam_now())
        OR (NEW.state = 'cooling' AND NEW.reusable_at > ipam_now()))
    EXECUTE FUNCTION ipam_allocations_cooling();
CREATE TRIGGER ipam_allocations_cooling_delete AFTER DELETE ON ipam_allocations
    FOR EACH ROW WHEN (OLD.state = 'cooling' AND OLD.reusable_at > ipam_now())
    EXECUTE FUNCTION ipam_allocations_cooling();

-- The counts start from a real count, with writers of allocations kept out
-- until this migration commits.
LOCK TABLE ipam_allocations IN SHARE MODE;

INSERT INTO ipam_pool_cooling (pool_id, bucket, slot, cooling)
SELECT pool_id, ipam_cooling_bucket(reusable_at), 0, count(*)
  FROM ipam_allocations
 WHERE state = 'cooling' AND reusable_at > ipam_now()
 GROUP BY 1, 2;

---- create above / drop below ----

DROP TRIGGER IF EXISTS ipam_allocations_cooling_insert ON ipam_allocations;
DROP TRIGGER IF EXISTS ipam_allocations_cooling_update ON ipam_allocations;
DROP TRIGGER IF EXISTS ipam_allocations_cooling_delete ON ipam_allocations;
DROP FUNCTION IF EXISTS ipam_allocations_cooling();
DROP FUNCTION IF EXISTS ipam_count_cooling(text, timestamptz, integer);
DROP FUNCTION IF EXISTS ipam_cooling_counted_from();
DROP FUNCTION IF EXISTS ipam_cooling_bucket(timestamptz);
DROP TABLE IF EXISTS ipam_pool_cooling;
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_cluster_id_fkey
    FOREIGN KEY (cluster_id) REFERENCES ipam_clusters (id) ON DELETE CASCADE;
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_pool_id_fkey
    FOREIGN KEY (pool_id) REFERENCES ipam_pools (id) ON DELETE CASCADE;
ALTER TABLE ipam_allocations DROP CONSTRAINT IF EXISTS ipam_allocations_pool_cluster_fkey;
ALTER TABLE ipam_pools DROP CONSTRAINT IF EXISTS ipam_pools_id_cluster;
ALTER TABLE ipam_pool_stripes RESET (fillfactor);
ALTER TABLE ipam_pool_counters RESET (fillfactor);
CREATE OR REPLACE FUNCTION ipam_now() RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT now() + coalesce((SELECT skew FROM ipam_clock WHERE singleton), interval '0') $$;
