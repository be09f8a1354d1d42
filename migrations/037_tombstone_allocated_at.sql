-- Migration 37: a tombstone keeps when its allocation was handed out.
--
-- A row deleted with its pool inside its cooldown becomes a tombstone
-- (migration 16), which kept when it was released but not when it was
-- handed out. A pool created over the address inherits the tombstone as a
-- cooling row, and that row's allocated_at was the release's time; a
-- listing or lookup of the tombstone showed no hand-out at all. The
-- tombstone now keeps the row's allocated_at (written by
-- ipam_allocations_keep_cooldown, functions/ipam_allocations_keep_cooldown.sql),
-- and the inherited row takes it back. Tombstones buried before this have
-- none, and their inherited rows take the release's time, as before.
ALTER TABLE ipam_tombstones ADD COLUMN allocated_at timestamptz;
COMMENT ON COLUMN ipam_tombstones.allocated_at IS
    'When the buried allocation was last handed out (its row''s allocated_at); NULL for tombstones buried before migration 37.';

---- create above / drop below ----

ALTER TABLE ipam_tombstones DROP COLUMN IF EXISTS allocated_at;
