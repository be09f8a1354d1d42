-- The current definition of ipam_record_seen: created by migration 30. Migrate applies it
-- after the numbered migrations (see README.md beside this file); a change here is a change of
-- this one file.
--
-- A refresh's record that it saw an allocation: last_seen_at (what the stale-leak report
-- reads), and confirmed_at the first time (a Terraform state holds the allocation: adoption
-- is over). It writes only when the allocation is still active and of the generation the
-- refresh read, finding the row by its key under its lock, and reports whether it did: an
-- allocation released since the refresh's snapshot (an operator's reclaim of stale
-- allocations, which checks last_seen_at under the same lock) is not recorded, and the
-- refresh reads again. A read calls it only when the record is due (at most once an hour),
-- so a read that records nothing writes nothing and pays nothing for it; VOLATILE, so its
-- update sees what committed before it, not the calling statement's snapshot.
CREATE OR REPLACE FUNCTION ipam_record_seen(allocation uuid, gen bigint) RETURNS boolean
    LANGUAGE plpgsql VOLATILE
    AS $$
DECLARE
    now_at timestamptz := ipam_now();
BEGIN
    UPDATE ipam_allocations SET last_seen_at = now_at, confirmed_at = coalesce(confirmed_at, now_at)
        WHERE id = allocation AND generation = gen AND state = 'active';
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION ipam_record_seen(uuid, bigint) IS
    'Records that a refresh saw an active allocation of the generation it read; false when it is no longer so (see migration 30).';
