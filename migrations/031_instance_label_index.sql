-- Migration 31: an instance's addresses are listed from indexes, without a
-- new index entry for an instance address.
--
-- A listing by instance (`ipamctl list --instance`, the `ipam_allocations`
-- data source's instance_id) read every row of the cluster: about 180 ms at
-- a million allocations. Most rows that carry an instance's label are that
-- instance's own addresses (owner kind 'instance', owner id the label), and
-- the owner indexes already find those. This index holds only the others:
-- the live rows whose instance label is not their owner (an address set's
-- member labelled with an instance, say). An instance address, the hot path,
-- fails its predicate and writes no entry in it.
--
-- ListAllocations reads an instance's rows as three branches: its own
-- active and held rows (ipam_allocations_owner_active), its own cooling rows
-- (ipam_allocations_owner_cooling), and the others (this index). The
-- predicate below is written the same way there (sqlListByInstanceSource),
-- so that the planner sees that the branch's condition implies it.
--
-- Upgrading builds the index: the allocations are locked for its build
-- (seconds at a million rows).

CREATE INDEX ipam_allocations_instance_label ON ipam_allocations (cluster_id, instance_id)
    WHERE instance_id IS NOT NULL AND (owner_kind <> 'instance' OR owner_id <> instance_id)
        AND state IN ('active', 'reserved', 'cooling');

---- create above / drop below ----

DROP INDEX ipam_allocations_instance_label;
