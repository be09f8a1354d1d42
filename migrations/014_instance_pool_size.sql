-- Migration 14: a cluster's instance pool records the size its counter can
-- hand out. Carving a node block lowers the counter's top below the block;
-- since this version the same statement lowers the pool's recorded size,
-- which usage reads. Pools whose top was lowered before are brought to it
-- here: for an instance pool with no exclusion and no gateway inside it
-- (the cluster's own pools: every ordinal up to the top is an address it
-- hands out), the size is the top ordinal plus one.
UPDATE ipam_pools p SET size = least(p.size, s.top + 1)
  FROM (SELECT pool_id, max(last_ordinal) AS top FROM ipam_pool_stripes GROUP BY pool_id) s
 WHERE s.pool_id = p.id AND p.category = 'instance' AND p.kind = 'counter'
   AND cardinality(p.exclude) = 0 AND (p.gateway IS NULL OR NOT (p.gateway <<= ANY (p.cidrs)))
   AND s.top + 1 < p.size;

---- create above / drop below ----

-- Nothing to undo: the sizes are what the counters hand out.
