package engine

import "strings"

// The SQL fragments that the hand-out statements (handout.go) and the
// other statements (statements.go) share: column lists, the projection of
// an allocation row into its event, the usage count of a moved row, the
// origin tests and the cluster's network settings. A fragment is SQL text
// only; it reads no Go state.

// allocColumns: reusable, hold expired and confirmed are computed against
// the database clock.
const allocColumns = `id, cluster_id, pool_id, address, ordinal, state, generation, coalesce(owner_kind, ''),
	coalesce(owner_id, ''), coalesce(org_id, ''), coalesce(env_id, ''), coalesce(node_id, ''),
	coalesce(instance_id, ''), coalesce(actor, ''), allocated_at, released_at, nullif(reusable_at, '-infinity'),
	coalesce(reusable_at <= (SELECT ipam_now()), false), coalesce(set_owner, ''), coalesce(reserved_until <= (SELECT ipam_now()), true),
	` + confirmedSQL + `, ` + originSQL

// confirmedSQL: the allocation is past adoption (Allocation.Confirmed): a
// read of the provider saw it, or the adoption window has passed since it
// was made, and no plan marks it as being replaced.
const confirmedSQL = `coalesce((confirmed_at IS NOT NULL OR allocated_at < (SELECT ipam_now()) - interval '` + adoptionWindowSQL + `')
		AND NOT ` + replacingSQL + `, false)`

// newGenerationSQL is the generation of a hand-out: of an address (a row
// handed to an owner, a hold confirmed, an allocation adopted) or of a
// node's blocks taken over (blocks made get it from their column's
// default, the same call). It comes from one sequence (migration 34), so
// that it never repeats: a release or a mark that carries a generation
// names one hand-out, whichever row or owner it was, and a stale one
// matches nothing.
const newGenerationSQL = `nextval('ipam_generations')`

// callerOriginSetting reads the origin of the transaction's caller (set by
// sqlFastBounds or sqlFastGuard, or with its BEGIN).
const callerOriginSetting = `current_setting('ipam.origin', true)`

// callerOriginSQL is the origin of the configuration whose transaction runs
// the statement (ipam.origin, set with its BEGIN), NULL for none.
const callerOriginSQL = `nullif(current_setting('ipam.origin', true), '')`

// originSQL is the origin recorded for the row's current generation: the
// configuration that made the allocation or took the hold (empty for none).
const originSQL = `coalesce(CASE WHEN origin_generation = generation THEN origin END, '')`

// ownOriginSQL: the row is the configuration's whose origin the expression
// mine gives, or no configuration's (no origin recorded for its
// generation). A caller without an origin (the Go API) owns only rows of
// no configuration. It is the one statement of the rule in SQL; Go judges
// it from Allocation.Origin (Client.ownOrigin).
func ownOriginSQL(mine string) string {
	return `(` + originSQL + ` IN ('', coalesce(` + mine + `, '')))`
}

// allocColumnsOfA are allocColumns of the row a that the statement itself
// handed out (the fast statements): its allocated_at is the statement's one
// read of the clock, so it stands in for ipam_now(), which reads the test
// clock's table at every call.
var allocColumnsOfA = strings.ReplaceAll(allocColumns, "(SELECT ipam_now())", "a.allocated_at")

// allocInsertColumns are the columns a new allocation row is written with
// (sqlInsertFresh, takeFreshSQL).
const allocInsertColumns = `id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind, owner_id,
	org_id, env_id, node_id, instance_id, actor, allocated_at, last_seen_at, set_owner, reusable_at, reserved_until`

// eventColumns are an allocation event's columns; eventOfRow fills the
// columns after id and type, up to data, from an allocation row "a" of the
// same statement (the one-statement paths write the event with the row).
// eventOfAlloc is eventOfRow without the actor, for an event whose actor is
// not the row's (a release names the releasing manager).
const (
	eventColumns = `id, type, cluster_id, pool_id, allocation_id, generation, address,
	owner_kind, owner_id, org_id, env_id, node_id, instance_id, actor, data`
	eventOfAlloc = `cluster_id, pool_id, id, generation, address, owner_kind, owner_id, org_id, env_id,
	node_id, instance_id`
	eventOfRow = eventOfAlloc + `, actor`
)

// fromClock reads the clock once, as now_at (see activateSet).
const fromClock = `FROM (SELECT ipam_now() AS now_at) clock`

// Usage counters (ipam_pool_counters). A pool's active count is the sum of
// its counter slots and of its stripes' active column (activeCount): the fast
// path's fresh insert counts itself in the stripe it advances
// (takeFreshSQL). Every other statement that moves a row into
// or out of 'active' names it in a CTE "moved" (its pool and +1 or -1: movedIn
// counts a row the statement left active, movedOut one it took out of
// active; one row at most, each of these statements changes one allocation)
// and ends its WITH list with countMoved. countMoved adds the change to one
// counter slot of the pool, in the same statement: the count commits or rolls
// back with the change it counts. It takes a slot no other transaction holds
// (SKIP LOCKED), so counting never makes writers queue; when every slot is
// held it waits for slot 0. A slot stays locked until commit, as the stripe
// does; a later statement of the same transaction may take it again (a
// transaction's own locks never make it skip a row). The pick is
// MATERIALIZED so it runs once (see the stripe pick).
const (
	movedIn    = `, moved AS (SELECT pool_id, (state = 'active')::int AS delta FROM a)`
	movedOut   = `, moved AS (SELECT pool_id, -1 AS delta FROM a)`
	countMoved = `, count_slot AS MATERIALIZED (
		SELECT slot FROM ipam_pool_counters
		WHERE pool_id = (SELECT pool_id FROM moved) AND (SELECT delta FROM moved) <> 0
		ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED
	), counted AS (
		UPDATE ipam_pool_counters c SET active = c.active + m.delta
		FROM moved m
		WHERE c.pool_id = m.pool_id AND m.delta <> 0 AND c.slot = coalesce((SELECT slot FROM count_slot), 0)
	)`

	// activeCount is a pool's count of active addresses (pool "p"): its
	// counter slots and what the fast path counted in its stripes.
	activeCount = `(SELECT coalesce(sum(c.active), 0) FROM ipam_pool_counters c WHERE c.pool_id = p.id)
		+ (SELECT coalesce(sum(st.active), 0) FROM ipam_pool_stripes st WHERE st.pool_id = p.id)`
)

// blockOfA is the block of its pool that holds the row "a" (NULL: none).
const blockOfA = `(SELECT c FROM ipam_pools p, unnest(p.cidrs) c WHERE p.id = a.pool_id AND a.address <<= c LIMIT 1)`

// fastNetwork ends a one-statement take (handout.go): the cluster's network
// settings of the rows "a" it returns.
const fastNetwork = `, ` + networkColumns + ` FROM a` + networkJoin

// networkColumns are the cluster's WorkloadSpec network settings, read in
// the fast statements (an instance's allocation returns them) through
// networkJoin: one probe of the cluster's row.
const (
	networkColumns = `net.gateway_ipv6, net.mtu, net.dns_servers`
	networkJoin    = ` LEFT JOIN LATERAL (SELECT gateway_ipv6, mtu, dns_servers FROM ipam_clusters WHERE id = @cluster) net ON true`
)

// replacingSQL: a plan marked the row as being replaced (migration 17), and
// nothing has changed it since.
const replacingSQL = `coalesce(replace_generation = generation AND replace_until > (SELECT ipam_now()) AND state = 'active', false)`

// sameTenantSQL: a row (its columns through col) is held for the tenant
// org, env (SQL expressions): each of the row's org_id and env_id that it
// names is theirs. A label the row lacks names no tenant. An address goes
// to another tenant only through its cooldown: an owner's own cooling
// address back (guardReusableOrOwn), and a relabel of an active one
// (sqlUpdateLabels, sqlRelabelSet) only for the same tenant.
func sameTenantSQL(col func(string) string, org, env string) string {
	return `coalesce(` + col("org_id") + ` = ` + org + `, ` + col("org_id") + ` IS NULL)
			AND coalesce(` + col("env_id") + ` = ` + env + `, ` + col("env_id") + ` IS NULL)`
}
