-- The current definition of ipam_cooling_counted_from: created by migration 8, last changed
-- by migration 8. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- The first bucket usage reads from the counts: the one after the next
-- minute. The rows before it (at most two minutes of releases) are counted on
-- the reuse index. The minute's margin keeps a read exact while a writer that
-- started after the reader commits before the reader's snapshot.
CREATE OR REPLACE FUNCTION ipam_cooling_counted_from() RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    AS $$ SELECT ipam_cooling_bucket(ipam_now()) + interval '2 minutes' $$;
