-- The current definition of ipam_record_creator_origin: created by migration 25. Migrate applies
-- it after the numbered migrations (see README.md beside this file); a change here is a change of
-- this one file.
--
-- A cluster or pool records the origin of the configuration whose transaction creates it (the
-- client sets ipam.origin for its transactions; empty: none), as the row trigger of allocations
-- does for what it hands out: `terraform query` leaves what a Terraform state holds out of its
-- listings. The triggers that call it are in migration 25.
CREATE OR REPLACE FUNCTION ipam_record_creator_origin() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    NEW.creator_origin := nullif(current_setting('ipam.origin', true), '');
    RETURN NEW;
END
$$;
COMMENT ON FUNCTION ipam_record_creator_origin() IS
    'Records the origin of the configuration that creates a cluster or pool (see migration 25).';
