-- The IPAM schema: clusters, pools, striped counters, allocations, events,
-- allocation failures, and the operator views named by the platform spec.
--
-- Uniqueness lives in constraints: an address is unique in its cluster for as
-- long as its row exists (active, reserved, cooling or free), and an owner holds
-- at most one active or reserved address per kind in a cluster.

CREATE TABLE ipam_clusters (
    id                text PRIMARY KEY CHECK (id <> ''),
    prefix            cidr NOT NULL CHECK (family(prefix) = 6),
    node_prefix       cidr NOT NULL CHECK (node_prefix <<= prefix),
    instance_prefix   cidr NOT NULL CHECK (instance_prefix <<= prefix),
    node_cooldown     interval NOT NULL CHECK (node_cooldown >= interval '0'),
    instance_cooldown interval NOT NULL CHECK (instance_cooldown >= interval '1 hour'),
    gateway_ipv6      inet NOT NULL,
    mtu               integer NOT NULL CHECK (mtu BETWEEN 1280 AND 65535),
    dns_servers       inet[] NOT NULL DEFAULT '{}',
    actor             text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    CHECK (NOT (node_prefix && instance_prefix)),
    -- Cluster prefixes never overlap, so an address names one cluster.
    CONSTRAINT ipam_clusters_no_overlap EXCLUDE USING gist (prefix inet_ops WITH &&)
);

-- A pool is a set of addresses handed out by one allocator. Every cluster has
-- two system pools ("<cluster>/node" and "<cluster>/instance"); operator pools
-- (IPv4 add-on and others) join them later.
--
-- kind 'counter': fresh addresses come from striped counters (ipam_pool_stripes);
-- released ones are reused from the cooled queue once their cooldown has passed.
-- kind 'table': one ipam_allocations row per usable address, state 'free' when
-- unused (gaps are absent rows).
CREATE TABLE ipam_pools (
    id         text PRIMARY KEY,
    cluster_id text NOT NULL REFERENCES ipam_clusters (id) ON DELETE CASCADE,
    name       text NOT NULL,
    category   text NOT NULL CHECK (category IN ('node', 'instance', 'ipv4', 'ipv6')),
    family     smallint NOT NULL CHECK (family IN (4, 6)),
    kind       text NOT NULL CHECK (kind IN ('counter', 'table')),
    cidrs      cidr[] NOT NULL CHECK (cardinality(cidrs) > 0),
    exclude    cidr[] NOT NULL DEFAULT '{}',
    cooldown   interval NOT NULL CHECK (cooldown >= interval '0'),
    size       numeric NOT NULL CHECK (size >= 0),
    stripes    integer NOT NULL CHECK (stripes >= 1),
    mtu        integer,
    gateway    inet,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (cluster_id, name)
);
CREATE INDEX ipam_pools_cluster ON ipam_pools (cluster_id);

-- Several counters per pool, so concurrent allocators do not queue behind one
-- row: stripe k hands out ordinals k+1, k+1+S, k+1+2S, ... (S = pool.stripes).
-- An allocator locks the unlocked stripe with the lowest next ordinal
-- (FOR UPDATE SKIP LOCKED), so a lone client allocates strictly in order and
-- concurrent clients fill the space densely from the start.
CREATE TABLE ipam_pool_stripes (
    pool_id      text NOT NULL REFERENCES ipam_pools (id) ON DELETE CASCADE,
    stripe       integer NOT NULL,
    next_ordinal bigint NOT NULL,
    last_ordinal bigint NOT NULL,
    PRIMARY KEY (pool_id, stripe)
);
CREATE INDEX ipam_pool_stripes_fresh ON ipam_pool_stripes (pool_id, next_ordinal)
    WHERE next_ordinal <= last_ordinal;

CREATE TABLE ipam_allocations (
    id             uuid PRIMARY KEY,
    cluster_id     text NOT NULL REFERENCES ipam_clusters (id) ON DELETE CASCADE,
    pool_id        text NOT NULL REFERENCES ipam_pools (id) ON DELETE CASCADE,
    address        inet NOT NULL CHECK (masklen(address) = CASE family(address) WHEN 4 THEN 32 ELSE 128 END),
    ordinal        bigint NOT NULL,
    state          text NOT NULL CHECK (state IN ('free', 'reserved', 'active', 'cooling')),
    generation     bigint NOT NULL DEFAULT 0,
    owner_kind     text,
    owner_id       text,
    org_id         text,
    env_id         text,
    node_id        text,
    instance_id    text,
    actor          text,
    allocated_at   timestamptz,
    released_at    timestamptz,
    reusable_at    timestamptz,
    reserved_until timestamptz,
    last_seen_at   timestamptz,
    -- Address first: the same index serves reverse lookups by address alone.
    UNIQUE (address, cluster_id),
    CHECK (state = 'free' OR (owner_kind IS NOT NULL AND owner_id IS NOT NULL)),
    CHECK (state NOT IN ('free', 'cooling') OR reusable_at IS NOT NULL)
);
-- One active (or reserved) address per owner and kind in a cluster: this is what
-- makes allocation idempotent per owner and a second concurrent create fail.
CREATE UNIQUE INDEX ipam_allocations_owner_active
    ON ipam_allocations (cluster_id, owner_kind, owner_id)
    WHERE state IN ('active', 'reserved');
-- The same owner takes its own cooling address back on replacement.
CREATE INDEX ipam_allocations_owner_cooling
    ON ipam_allocations (cluster_id, owner_kind, owner_id, released_at DESC)
    WHERE state = 'cooling';
-- The reuse queue: longest-cooled (earliest reusable) first, then address order.
CREATE INDEX ipam_allocations_reuse
    ON ipam_allocations (pool_id, reusable_at, ordinal)
    WHERE state IN ('free', 'cooling');
CREATE INDEX ipam_allocations_pool_state ON ipam_allocations (pool_id, state);

-- Append-only audit trail, written in the same transaction as the change.
-- Ids are UUIDv7 made by the client: time ordered, no sequence on the hot path.
CREATE TABLE ipam_events (
    id            uuid PRIMARY KEY,
    at            timestamptz NOT NULL DEFAULT now(),
    type          text NOT NULL,
    cluster_id    text,
    pool_id       text,
    allocation_id uuid,
    generation    bigint,
    address       inet,
    owner_kind    text,
    owner_id      text,
    org_id        text,
    env_id        text,
    node_id       text,
    instance_id   text,
    actor         text NOT NULL,
    data          jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX ipam_events_at ON ipam_events (at);
CREATE INDEX ipam_events_address ON ipam_events (cluster_id, address, at);

-- Allocation failures, written outside the failed transaction.
CREATE TABLE ipam_allocation_failures (
    id         uuid PRIMARY KEY,
    at         timestamptz NOT NULL DEFAULT now(),
    cluster_id text,
    pool_id    text,
    reason     text NOT NULL,
    owner_kind text,
    owner_id   text,
    actor      text,
    detail     text NOT NULL DEFAULT ''
);
CREATE INDEX ipam_allocation_failures_pool ON ipam_allocation_failures (pool_id, at);

-- The platform spec's tables, as views for operators.
CREATE VIEW ipam_nodes AS
SELECT a.node_id, a.cluster_id, a.address AS overlay_ipv6, a.state, a.actor,
       a.allocated_at, a.released_at, a.reusable_at AS cooldown_until
  FROM ipam_allocations a
 WHERE a.owner_kind = 'node' AND a.state IN ('active', 'cooling');

CREATE VIEW ipam_instances AS
SELECT a.instance_id, a.cluster_id, a.org_id, a.env_id, a.node_id, a.address AS overlay_ipv6,
       a.state, a.actor, a.allocated_at, a.released_at, a.reusable_at AS cooldown_until
  FROM ipam_allocations a
 WHERE a.owner_kind = 'instance' AND a.state IN ('active', 'cooling');

---- create above / drop below ----

DROP VIEW IF EXISTS ipam_instances;
DROP VIEW IF EXISTS ipam_nodes;
DROP TABLE IF EXISTS ipam_allocation_failures;
DROP TABLE IF EXISTS ipam_events;
DROP TABLE IF EXISTS ipam_allocations;
DROP TABLE IF EXISTS ipam_pool_stripes;
DROP TABLE IF EXISTS ipam_pools;
DROP TABLE IF EXISTS ipam_clusters;
