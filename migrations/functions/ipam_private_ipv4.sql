-- The current definition of ipam_private_ipv4: created by migration 13, last changed
-- by migration 13. Migrate applies it after the numbered migrations (see README.md
-- beside this file); a change here is a change of this one file.
--
-- Private IPv4 space (private, shared (CGNAT), loopback and link-local): a
-- pool block is IPv6, public IPv4 (no private address in it) or private IPv4
-- (wholly inside this list), never a mix (migration 13). The core's own copy
-- (privateIPv4 in ipam/pool.go, used at plan) is compared with it by
-- TestPrivateIPv4MatchesSchema.
CREATE OR REPLACE FUNCTION ipam_private_ipv4() RETURNS cidr[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT '{10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,127.0.0.0/8,169.254.0.0/16}'::cidr[] $$;
