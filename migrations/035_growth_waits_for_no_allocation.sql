-- Migration 35: a pool's widening waits for no allocation.
--
-- ipam_pools_keep_live_rows took a pool's row FOR UPDATE on every change of
-- its shape, which waits for every allocation in flight in the pool (they
-- hold the row FOR KEY SHARE). A node's blocks grow when an allocation finds
-- them full, so two placement transactions that had each placed an instance
-- on the node, and then each found it full, waited for each other: PostgreSQL
-- broke the deadlock, the retry met it again, and one of them failed. A
-- change that only widens a pool (more blocks, fewer exclusions, the same
-- kind) cannot leave a row outside it: the trigger (its definition is in
-- functions/, applied after this) lets it through without the lock or the
-- check, and a growth locks the pool's row FOR NO KEY UPDATE.
SELECT 1;

---- create above / drop below ----

SELECT 1;
