-- The current definition of ipam_count_cooling: created by migration 8, last changed
-- by migration 8. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- ipam_count_cooling adds delta to one row of the pool's bucket: the first
-- one no other transaction holds, or a new one. A writer that adds a row
-- deletes up to four past buckets of the pool that no one holds, so they go
-- as fast as they come. A statement that moves many rows of one bucket (a
-- bulk load, a block parked) updates the same row again and again in one
-- transaction: the function keeps that row's newest version (its ctid, in a
-- transaction-local setting) and updates it directly, so each call costs the
-- same instead of walking every version the transaction left behind.
CREATE OR REPLACE FUNCTION ipam_count_cooling(p_pool text, p_at timestamptz, p_delta integer) RETURNS void
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
