-- Per-node instance blocks: aligned blocks carved from a cluster's instance
-- prefix (from its end, so they never meet the cluster-wide instance counter,
-- which starts at the beginning), each held by one node. A node's blocks form
-- one pool of kind 'blocks' (rows per address, like a table pool), so
-- instances on different nodes never touch the same rows.

ALTER TABLE ipam_pools DROP CONSTRAINT ipam_pools_kind_check;
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_kind_check CHECK (kind IN ('counter', 'table', 'blocks'));

CREATE TABLE ipam_node_block_settings (
    cluster_id          text NOT NULL REFERENCES ipam_clusters (id) ON DELETE CASCADE,
    node_id             text NOT NULL,
    block_prefix_length integer NOT NULL CHECK (block_prefix_length BETWEEN 65 AND 128),
    min_free_fraction   double precision NOT NULL CHECK (min_free_fraction >= 0),
    max_free_fraction   double precision NOT NULL,
    max_blocks          integer NOT NULL CHECK (max_blocks >= 1),
    demand              bigint CHECK (demand >= 0),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (cluster_id, node_id),
    CHECK (max_free_fraction >= min_free_fraction + 1)
);

CREATE TABLE ipam_node_blocks (
    cluster_id   text NOT NULL REFERENCES ipam_clusters (id) ON DELETE CASCADE,
    block        cidr NOT NULL,
    block_index  bigint NOT NULL,
    node_id      text NOT NULL,
    state        text NOT NULL CHECK (state IN ('active', 'cooling')),
    empty_scans  integer NOT NULL DEFAULT 0,
    allocated_at timestamptz NOT NULL DEFAULT now(),
    released_at  timestamptz,
    reusable_at  timestamptz,
    PRIMARY KEY (cluster_id, block),
    UNIQUE (cluster_id, block_index)
);
CREATE INDEX ipam_node_blocks_node ON ipam_node_blocks (cluster_id, node_id) WHERE state = 'active';
CREATE INDEX ipam_node_blocks_reuse ON ipam_node_blocks (cluster_id, reusable_at) WHERE state = 'cooling';

-- Fresh blocks are counted per cluster (block creation is rare: one row is fine).
CREATE TABLE ipam_block_counters (
    cluster_id          text PRIMARY KEY REFERENCES ipam_clusters (id) ON DELETE CASCADE,
    block_prefix_length integer NOT NULL,
    next_index          bigint NOT NULL
);

-- Operators list allocations by org and environment (ipamctl list, ipam_allocations).
CREATE INDEX ipam_allocations_labels ON ipam_allocations (cluster_id, org_id, env_id)
    WHERE state IN ('active', 'reserved', 'cooling');

---- create above / drop below ----

DROP INDEX IF EXISTS ipam_allocations_labels;

DROP TABLE IF EXISTS ipam_block_counters;
DROP TABLE IF EXISTS ipam_node_blocks;
DROP TABLE IF EXISTS ipam_node_block_settings;
ALTER TABLE ipam_pools DROP CONSTRAINT ipam_pools_kind_check;
ALTER TABLE ipam_pools ADD CONSTRAINT ipam_pools_kind_check CHECK (kind IN ('counter', 'table'));
