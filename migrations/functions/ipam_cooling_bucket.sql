-- The current definition of ipam_cooling_bucket: created by migration 8, last changed
-- by migration 8. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- The bucket of a reusable_at: the minute it falls in.
CREATE OR REPLACE FUNCTION ipam_cooling_bucket(at timestamptz) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT date_bin(interval '1 minute', at, timestamptz '2000-01-01 00:00:00+00') $$;
