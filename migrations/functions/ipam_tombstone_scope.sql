-- The current definition of ipam_tombstone_scope: created by migration 16, last changed
-- by migration 16. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- The scope of an address's tombstone: '' (every cluster) for IPv6 and public
-- IPv4, the cluster's id for private IPv4, which every cluster reuses.
CREATE OR REPLACE FUNCTION ipam_tombstone_scope(address inet, cluster text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE WHEN family(address) = 4 AND address <<= ANY (ipam_private_ipv4()) THEN cluster ELSE '' END $$;
