-- The reuse mark of a table pool: where its fast takes have got to in the
-- reuse queue.
--
-- A take of a table pool's row (an IPv4 environment's address) updates the
-- row out of the queue, and the queue's index keeps the old entry until a
-- vacuum removes it. The takes consume the queue from its front, so the dead
-- entries pile up exactly where the next pick starts, and every pick stepped
-- over all of them: 16 clients allocating from one /14 pool read 98 shared
-- buffers per allocation in their first 5 seconds and 351 in their sixth,
-- and after 56,337 takes one pick read 343 index pages to find its row
-- (2.3 ms). Each fast take now records the position (reusable_at, ordinal)
-- of the row it took in the counter slot it already updates, and the next
-- pick starts from the further of its own slot's position and slot 0's.
-- Rows go back behind it only when a take rolls back; the fast take hands
-- over once nothing past the mark is reusable, and the full path's pick,
-- which ignores the mark, finds them.
ALTER TABLE ipam_pool_counters ADD COLUMN reuse_at timestamptz, ADD COLUMN reuse_ordinal bigint;

---- create above / drop below ----

ALTER TABLE ipam_pool_counters DROP COLUMN IF EXISTS reuse_at, DROP COLUMN IF EXISTS reuse_ordinal;
