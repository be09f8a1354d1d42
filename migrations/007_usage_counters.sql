-- Usage in constant time. Each pool keeps its count of active addresses in
-- counter slots (32 for the cluster's pools and operator pools, 4 for a node's
-- blocks, 1 for a released block's parked rows), and every statement that
-- moves a row into or out of 'active' adds its change to one slot, in the same
-- statement, so the count commits or rolls back with the change. A statement
-- takes a slot no other transaction holds (FOR UPDATE SKIP LOCKED), so
-- counting never makes allocators queue behind each other. The count of a
-- pool is the sum of its slots and of its stripes' active column; one slot may
-- go negative (a release counted in another slot than its allocation), the sum
-- cannot.

-- The fast path's fresh allocations add theirs to the stripe row they already
-- lock and update, so the common allocation writes no row more.
ALTER TABLE ipam_pool_stripes ADD COLUMN active bigint NOT NULL DEFAULT 0;

CREATE TABLE ipam_pool_counters (
    pool_id text NOT NULL REFERENCES ipam_pools (id) ON DELETE CASCADE,
    slot    integer NOT NULL CHECK (slot >= 0),
    active  bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (pool_id, slot)
);

-- The counts start from a real count, with writers of allocations kept out
-- until this migration commits (a binary older than this schema refuses to
-- run against it afterwards).
LOCK TABLE ipam_allocations IN SHARE MODE;

INSERT INTO ipam_pool_counters (pool_id, slot, active)
SELECT p.id, s.slot,
       CASE WHEN s.slot = 0 THEN
           (SELECT count(*) FROM ipam_allocations a WHERE a.pool_id = p.id AND a.state = 'active')
       ELSE 0 END
  FROM ipam_pools p,
       generate_series(0, CASE p.kind WHEN 'blocks' THEN 3 WHEN 'parked' THEN 0 ELSE 31 END) AS s(slot);

---- create above / drop below ----

DROP TABLE IF EXISTS ipam_pool_counters;
ALTER TABLE ipam_pool_stripes DROP COLUMN IF EXISTS active;
