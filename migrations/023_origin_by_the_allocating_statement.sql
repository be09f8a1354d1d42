-- Migration 23: the row trigger's function ipam_allocations_in_pool (see
-- functions/ipam_allocations_in_pool.sql) records the origin of the
-- configuration that hands a row out (the transaction's ipam.origin), in
-- the statement that makes the row active. The provider wrote it with a
-- second statement after the commit, and two configurations creating one
-- owner at the same moment could both succeed: the second found the first's
-- allocation without an origin, which any configuration may adopt.
SELECT 1;

---- create above / drop below ----

SELECT 1;
