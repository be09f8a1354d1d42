-- The labels index (cluster, org, env) holds only rows that carry a label it
-- can be searched by: an org or an env.
--
-- Every look-up of an owner (the allocator's owner probes, a hold's first
-- look, the refresh read) names the cluster and the owner and has the owner
-- indexes for it. The labels index led with the cluster too and held every
-- live row, so it served those look-ups as well, by the cluster alone. The
-- planner took it whenever the two cost the same, which they do on a table
-- with no statistics yet (a new database, a bulk load before autovacuum
-- analyzes it): each look-up then read every live allocation of the cluster,
-- and the time per allocation grew with the cluster (measured: 16 clients
-- allocating node addresses on a new cluster read 52 million rows through it
-- for 50,000 allocations). With the condition below no owner look-up can use
-- it (none names an org or env), and a node address, which has neither,
-- writes no entry to it.
DROP INDEX ipam_allocations_labels;
CREATE INDEX ipam_allocations_labels ON ipam_allocations (cluster_id, org_id, env_id)
    WHERE state IN ('active', 'reserved', 'cooling') AND (org_id IS NOT NULL OR env_id IS NOT NULL);

---- create above / drop below ----

DROP INDEX IF EXISTS ipam_allocations_labels;
CREATE INDEX ipam_allocations_labels ON ipam_allocations (cluster_id, org_id, env_id)
    WHERE state IN ('active', 'reserved', 'cooling');
