-- The current definition of ipam_block_class: created by migration 13, last changed
-- by migration 13. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- ipam_block_class: 'public' (IPv6, or IPv4 without a private address),
-- 'private' (IPv4 wholly inside private space) or 'mixed' (refused).
CREATE OR REPLACE FUNCTION ipam_block_class(b cidr) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT CASE
        WHEN family(b) = 6 THEN 'public'
        WHEN b <<= ANY (ipam_private_ipv4()) THEN 'private'
        WHEN b && ANY (ipam_private_ipv4()) THEN 'mixed'
        ELSE 'public' END $$;
