-- Migration 33: an owner takes its address back inside the cooldown only for
-- the same tenant.
--
-- An instance whose org or env changed (the provider replaces it) released
-- its address into its cooldown and, being the same owner, took it straight
-- back under the new org: the cooldown, which keeps an address from going
-- to another tenant while traffic may still be attributed to the last one,
-- did not hold. The allocator's guard reusable_or_own now hands an owner its
-- cooling row only for the same org and env, and ipam_allocations_in_pool
-- (its definition is in functions/, applied after this) lets a tombstone's
-- owner take its address back on the same condition.
SELECT 1;

---- create above / drop below ----

SELECT 1;
