-- Plan-time reservations: a 'reserved' row is a short hold for an owner, with
-- reusable_at set to the hold's expiry. A hold that expires unused goes back
-- to the reuse queue without cooldown, so the reuse index covers it too.

DROP INDEX ipam_allocations_reuse;
CREATE INDEX ipam_allocations_reuse
    ON ipam_allocations (pool_id, reusable_at, ordinal)
    WHERE state IN ('free', 'cooling', 'reserved');

ALTER TABLE ipam_allocations DROP CONSTRAINT IF EXISTS ipam_allocations_check1;
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_reusable_known
    CHECK (state = 'active' OR reusable_at IS NOT NULL);

---- create above / drop below ----

ALTER TABLE ipam_allocations DROP CONSTRAINT IF EXISTS ipam_allocations_reusable_known;
ALTER TABLE ipam_allocations ADD CONSTRAINT ipam_allocations_check1
    CHECK (state NOT IN ('free', 'cooling') OR reusable_at IS NOT NULL);
DROP INDEX ipam_allocations_reuse;
CREATE INDEX ipam_allocations_reuse
    ON ipam_allocations (pool_id, reusable_at, ordinal)
    WHERE state IN ('free', 'cooling');
