-- The current definition of ipam_blocks_unmixed: created by migration 13, last changed
-- by migration 13. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
CREATE OR REPLACE FUNCTION ipam_blocks_unmixed(bs cidr[]) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT NOT EXISTS (SELECT 1 FROM unnest(bs) b WHERE ipam_block_class(b) = 'mixed') $$;
