-- Migration 24: the row trigger's function ipam_allocations_in_pool (see
-- functions/ipam_allocations_in_pool.sql) records the origin of the
-- configuration that takes a plan-time hold, as it does for an allocation:
-- a hold is its planning configuration's, which another configuration of the
-- same actor may not confirm or renew while it is live. Holds taken before
-- this version have no origin and stay anyone's of their actor until they
-- expire.
SELECT 1;

---- create above / drop below ----

SELECT 1;
