package ipam

// The named statements of the allocation path. Each is written once, here;
// the functions that run them name them, and HotStatements lists them for
// the benchmark's EXPLAIN gate, which checks their plans on databases of a
// million rows (no sequential scan of the allocations or stripes, no sort).

// Statement is one named SQL statement of the core.
type Statement struct {
	Name string
	SQL  string
}

// HotStatements are the statements an allocation, a hold, a release or a
// refresh runs, by name. Variants that differ only in their row lock are
// listed separately (a wait plans like a skip).
func HotStatements() []Statement {
	return []Statement{
		{"pool lookup", sqlLoadPool},
		{"owner probe", sqlOwnerRows},
		{"stripe pick (SKIP LOCKED)", sqlTakeStripe},
		{"stripe pick (waiting, no SKIP LOCKED)", sqlTakeStripeWait},
		{"fresh space left? (after a waiting pick found none)", sqlFreshLeft},
		{"insert allocation + event (CTE)", sqlInsertFresh},
		{"event insert", sqlInsertEvent},
		{"reuse pick (cooled queue, SKIP LOCKED)", sqlTakeCooled},
		{"reuse take (conditional write)", sqlActivate},
		{"exact claim probe", sqlClaimProbe},
		{"release", sqlRelease},
		{"fast path: fresh allocation in one statement (node, instance, IPv4 counter pools)", fastAllocateSQL},
		{"fast path: apply of a planned hold in one statement", confirmHoldSQL},
		{"refresh read", sqlGetActive},
	}
}

// UsageStatement is the per-pool usage statement (ipam_pool_usage, ipamctl
// usage, the metrics) and the planner setting its transaction runs first.
func UsageStatement() (setting, sql string) { return usagePlannerSetting, usagePoolsSQL }

// allocInsertColumns are the columns a new allocation row is written with
// (sqlInsertFresh, fastAllocateSQL).
const allocInsertColumns = `id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind, owner_id,
	org_id, env_id, node_id, instance_id, actor, allocated_at, last_seen_at, set_owner, reusable_at, reserved_until`

// eventColumns are an allocation event's columns; eventOfRow fills the
// columns after id and type, up to data, from an allocation row "a" of the
// same statement (the one-statement paths write the event with the row).
const (
	eventColumns = `id, type, cluster_id, pool_id, allocation_id, generation, address,
	owner_kind, owner_id, org_id, env_id, node_id, instance_id, actor, data`
	eventOfRow = `cluster_id, pool_id, id, generation, address, owner_kind, owner_id, org_id, env_id,
	node_id, instance_id, actor`
)

const sqlLoadPool = `SELECT ` + poolColumns + ` FROM ipam_pools WHERE id = $1`

// The stripe pick locks the stripe with the lowest next ordinal (skipping
// those other allocators hold, or waiting for them) and advances it by one
// stride ($2), returning the ordinal it had. The pick is a MATERIALIZED CTE so
// it runs exactly once: a subquery in UPDATE ... FROM may be rescanned by the
// join and pick a second stripe.
const (
	sqlTakeStripe     = sqlTakeStripeHead + `FOR UPDATE SKIP LOCKED` + sqlTakeStripeTail
	sqlTakeStripeWait = sqlTakeStripeHead + `FOR UPDATE` + sqlTakeStripeTail
	sqlTakeStripeHead = `WITH pick AS MATERIALIZED (
		SELECT stripe FROM ipam_pool_stripes
		WHERE pool_id = $1 AND next_ordinal <= last_ordinal
		ORDER BY next_ordinal LIMIT 1 `
	sqlTakeStripeTail = `)
	UPDATE ipam_pool_stripes s SET next_ordinal = s.next_ordinal + $2
	FROM pick
	WHERE s.pool_id = $1 AND s.stripe = pick.stripe AND s.next_ordinal <= s.last_ordinal
	RETURNING s.stripe, s.next_ordinal - $2, s.last_ordinal`
)

// The reuse pick takes the longest-cooled address whose cooldown has passed
// (or, in table pools, the oldest free one), skipping the rows other
// allocators hold, or waiting for them.
const (
	sqlTakeCooled     = sqlTakeCooledWait + ` SKIP LOCKED`
	sqlTakeCooledWait = `SELECT id, generation FROM ipam_allocations
	WHERE pool_id = $1 AND state IN ('free', 'cooling', 'reserved') AND reusable_at <= ipam_now()
	ORDER BY reusable_at, ordinal LIMIT 1 FOR UPDATE`
)

// sqlOwnerRows finds, with two index probes in one round trip, the owner's active (or
// reserved) allocation and its most recently released cooling one.
const sqlOwnerRows = `(SELECT ` + allocColumns + ` FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state IN ('active', 'reserved'))
	UNION ALL
	(SELECT ` + allocColumns + ` FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'cooling'
		ORDER BY released_at DESC LIMIT 1)`

// sqlFreshLeft tells, after a waiting stripe pick found none, whether any stripe has
// space left.
const sqlFreshLeft = `SELECT EXISTS (SELECT 1 FROM ipam_pool_stripes
	WHERE pool_id = $1 AND next_ordinal <= last_ordinal)`

// sqlInsertFresh inserts a new row for an address never handed out before, with its
// event, in one statement; no row when the address already has one (an exact
// claim got there first).
const sqlInsertFresh = `WITH a AS (
		INSERT INTO ipam_allocations (` + allocInsertColumns + `)
		VALUES ($1, $2, $3, $4, $5, CASE WHEN $15::interval > interval '0' THEN 'reserved' ELSE 'active' END,
			1, $6, $7, $8, $9, $10, $11, $12, ipam_now(), ipam_now(), $16,
			CASE WHEN $15::interval > interval '0' THEN ipam_now() + $15::interval END,
			CASE WHEN $15::interval > interval '0' THEN ipam_now() + $15::interval END)
		ON CONFLICT (cluster_id, address) DO NOTHING
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (` + eventColumns + `)
		SELECT $13, $14, ` + eventOfRow + `, $17 FROM a
	)
	SELECT ` + allocColumns + ` FROM a`

// sqlActivate hands an existing row (free, cooling, or a hold) to the owner, as an
// allocation or, with $10 > 0, as a plan-time hold: a conditional write on its
// generation, so a concurrent taker makes the attempt retry. It returns the
// row and what it was before.
const sqlActivate = `WITH prev AS (SELECT state, owner_kind, owner_id, actor FROM ipam_allocations WHERE id = $1)
	UPDATE ipam_allocations SET
		state = CASE WHEN $10::interval > interval '0' THEN 'reserved' ELSE 'active' END,
		generation = generation + 1,
		owner_kind = $3, owner_id = $4, org_id = $5, env_id = $6, node_id = $7, instance_id = $8, actor = $9,
		allocated_at = ipam_now(), released_at = NULL, last_seen_at = ipam_now(), set_owner = $11, confirmed_at = NULL,
		-- A hold on a cooling address keeps its cooldown (cooling_until):
		-- it is reusable by others only once both the hold and the
		-- cooldown are over. A hand-out ends the cooldown.
		reusable_at = CASE WHEN $10::interval > interval '0' THEN
			greatest(ipam_now() + $10::interval, cooling_until) END,
		cooling_until = CASE WHEN $10::interval > interval '0' THEN cooling_until END,
		reserved_until = CASE WHEN $10::interval > interval '0' THEN ipam_now() + $10::interval END
	WHERE id = $1 AND generation = $2 AND state IN ('free', 'cooling', 'reserved')
		-- The one place that decides reuse: another owner only once the
		-- row is reusable; the same owner takes its own address back.
		AND (reusable_at <= ipam_now() OR (owner_kind = $3 AND owner_id = $4))
	RETURNING ` + allocColumns + `, (SELECT state FROM prev), coalesce((SELECT owner_kind FROM prev), ''),
		coalesce((SELECT owner_id FROM prev), ''), coalesce((SELECT actor FROM prev), '')`

// sqlClaimProbe locks the row of an exactly claimed address, if it has one.
const sqlClaimProbe = `SELECT ` + allocColumns + ` FROM ipam_allocations
	WHERE cluster_id = $1 AND address = $2 FOR UPDATE`

// sqlRelease puts the owner's active allocation (of generation $4, or any with 0)
// into its cooldown.
const sqlRelease = `UPDATE ipam_allocations a SET state = 'cooling',
		released_at = ipam_now(), reusable_at = ipam_now() + p.cooldown, cooling_until = ipam_now() + p.cooldown
	FROM ipam_pools p
	WHERE p.id = a.pool_id AND a.cluster_id = $1 AND a.owner_kind = $2 AND a.owner_id = $3
		AND a.state = 'active' AND ($4 = 0 OR a.generation = $4)
	RETURNING a.id, a.cluster_id, a.pool_id, a.address, a.ordinal, a.state, a.generation,
		coalesce(a.owner_kind, ''), coalesce(a.owner_id, ''), coalesce(a.org_id, ''), coalesce(a.env_id, ''),
		coalesce(a.node_id, ''), coalesce(a.instance_id, ''), coalesce(a.actor, ''),
		a.allocated_at, a.released_at, a.reusable_at, false, coalesce(a.set_owner, ''), true, true`

// sqlInsertEvent appends an event in the caller's transaction.
const sqlInsertEvent = `INSERT INTO ipam_events (` + eventColumns + `)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)`

// sqlGetActive is the refresh read: the owner's active allocation, whether its
// last_seen_at is due, and its pool's blocks.
const sqlGetActive = `SELECT ` + allocColumns + `, coalesce(last_seen_at < ipam_now() - interval '1 hour', true) OR confirmed_at IS NULL,
		(SELECT p.cidrs FROM ipam_pools p WHERE p.id = a.pool_id)
	FROM ipam_allocations a
	WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'active'`

// The fast path: the common allocation (an owner that holds nothing yet, from
// a counter pool of one block with no exclusions) done in one statement that
// commits on its own, so it costs one network round trip instead of six. It keeps every guarantee of the full path: the same stripe pick (so
// addresses are unique and in order), the same unique constraints, one durable
// commit, and the event in the same transaction. Whenever it cannot be sure,
// it hands over to the full path: the owner holds or held something (its
// address must be adopted or given back), the pool has several blocks,
// exclusions or the gateway inside, no stripe is free right now, the address
// was claimed exactly meanwhile (the ordinal is skipped), or anything fails.
const fastAllocateSQL = `WITH owner AS (
		-- two probes, one per partial owner index (one IN over three states would match neither)
		SELECT 1 WHERE EXISTS (SELECT 1 FROM ipam_allocations
				WHERE cluster_id = $1 AND owner_kind = $3 AND owner_id = $4 AND state IN ('active', 'reserved'))
			OR EXISTS (SELECT 1 FROM ipam_allocations
				WHERE cluster_id = $1 AND owner_kind = $3 AND owner_id = $4 AND state = 'cooling')
	), pool AS (
		SELECT cidrs[1] AS block, stripes FROM ipam_pools
		WHERE id = $2 AND kind = 'counter' AND cardinality(cidrs) = 1 AND cardinality(exclude) = 0
			AND (gateway IS NULL OR NOT (gateway <<= cidrs[1]))
			-- an instance whose node has blocks draws from them ($15 names them; NULL otherwise)
			AND NOT EXISTS (SELECT 1 FROM ipam_pools b WHERE b.id = $15)
		FOR KEY SHARE -- the allocator's pool lock (see lockPoolShared)
	), pick AS MATERIALIZED (
		SELECT stripe FROM ipam_pool_stripes
		WHERE pool_id = $2 AND next_ordinal <= last_ordinal
			AND NOT EXISTS (SELECT 1 FROM owner) AND EXISTS (SELECT 1 FROM pool)
		ORDER BY next_ordinal LIMIT 1 FOR UPDATE SKIP LOCKED
	), s AS (
		UPDATE ipam_pool_stripes st SET next_ordinal = st.next_ordinal + (SELECT stripes FROM pool)
		FROM pick
		WHERE st.pool_id = $2 AND st.stripe = pick.stripe AND st.next_ordinal <= st.last_ordinal
		RETURNING st.next_ordinal - (SELECT stripes FROM pool) AS ord
	), a AS (
		INSERT INTO ipam_allocations (` + allocInsertColumns + `)
		SELECT $5, $1, $2, set_masklen(pool.block::inet, 128) + s.ord, s.ord,
			CASE WHEN $14::interval > interval '0' THEN 'reserved' ELSE 'active' END, 1, $3, $4,
			$6, $7, $8, $9, $10, ipam_now(), ipam_now(), $11,
			CASE WHEN $14::interval > interval '0' THEN ipam_now() + $14::interval END,
			CASE WHEN $14::interval > interval '0' THEN ipam_now() + $14::interval END
		FROM s, pool
		ON CONFLICT (cluster_id, address) DO NOTHING
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (` + eventColumns + `)
		SELECT $12, $13, ` + eventOfRow + `, '{}' FROM a
	)
	SELECT ` + allocColumns + `, (SELECT block FROM pool), ` + networkColumns + ` FROM a`

// networkColumns are the cluster's WorkloadSpec network settings, read in
// the fast statements (an instance's allocation returns them).
const networkColumns = `(SELECT gateway_ipv6 FROM ipam_clusters WHERE id = $1), (SELECT mtu FROM ipam_clusters WHERE id = $1),
	(SELECT dns_servers FROM ipam_clusters WHERE id = $1)`

// confirmHoldSQL turns the owner's plan-time hold on exactly the planned
// address into the allocation, with its event: the usual apply of a planned
// address, in one statement.
const confirmHoldSQL = `WITH a AS (
		UPDATE ipam_allocations SET state = 'active', generation = generation + 1,
			org_id = $5, env_id = $6, node_id = $7, instance_id = $8, set_owner = $9,
			allocated_at = ipam_now(), last_seen_at = ipam_now(), released_at = NULL, confirmed_at = NULL,
			reusable_at = NULL, reserved_until = NULL, cooling_until = NULL
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'reserved'
			AND address = $4 AND actor = $10
			-- the pool asked for; NULL (an instance): the pool its plan took it from
			AND pool_id = coalesce($11, pool_id)
			AND pool_id IN (SELECT id FROM ipam_pools WHERE cluster_id = $1 AND kind <> 'parked')
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (` + eventColumns + `)
		SELECT $12, $13, ` + eventOfRow + `, '{}' FROM a
	)
	SELECT ` + allocColumns + `, (SELECT p.cidrs[1] FROM ipam_pools p WHERE p.id = a.pool_id), ` + networkColumns + ` FROM a`

// Inventory reads (ops_list.go): keys only, in a stable order.
const (
	sqlListClusterIDs = `SELECT id FROM ipam_clusters ORDER BY id`
	sqlListPools      = `SELECT cluster_id, name FROM ipam_pools
		WHERE ($1 = '' OR cluster_id = $1) AND (coalesce(cardinality($2::text[]), 0) = 0 OR category = ANY ($2))
			AND kind IN ('counter', 'table') -- not a node's blocks, nor a released block's parked rows
		ORDER BY id`
	sqlListSets = `SELECT DISTINCT cluster_id, set_owner FROM ipam_allocations
		WHERE set_owner IS NOT NULL AND state = 'active' AND ($1 = '' OR cluster_id = $1)
			AND ($2 = '' OR org_id = $2) AND ($3 = '' OR env_id = $3)
		ORDER BY cluster_id, set_owner`
)

// The one-statement allocation inside a caller's transaction (runOneInTx):
// a savepoint around it, and a guard that fails the batch (division by zero)
// unless the transaction is READ COMMITTED, so that the statement never runs
// under another isolation; the full path then names the isolation.
const (
	sqlFastSavepoint          = `SAVEPOINT ipam_fast`
	sqlFastGuardReadCommitted = `SELECT 1 / (current_setting('transaction_isolation') = 'read committed')::int`
	sqlFastRelease            = `RELEASE SAVEPOINT ipam_fast`
	sqlFastUndo               = `ROLLBACK TO SAVEPOINT ipam_fast; RELEASE SAVEPOINT ipam_fast`
)
