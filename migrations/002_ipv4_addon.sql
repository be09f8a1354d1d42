-- The IPv4 add-on: the platform spec's operator view of environment IPv4
-- allocations. The allocations themselves live in ipam_allocations (owner kind
-- 'env_ipv4', owner id = env_id), where the partial unique index on
-- (cluster_id, owner_kind, owner_id) keeps at most one active IPv4 per
-- environment in a cluster.

CREATE VIEW ipam_ipv4_allocations AS
SELECT a.id AS allocation_id, a.generation, a.cluster_id, a.pool_id, a.env_id, a.org_id,
       a.address AS ipv4_address, a.state, a.actor, a.allocated_at, a.released_at,
       a.reusable_at AS cooldown_until
  FROM ipam_allocations a
 WHERE a.owner_kind = 'env_ipv4' AND a.state IN ('active', 'cooling');

---- create above / drop below ----

DROP VIEW IF EXISTS ipam_ipv4_allocations;
