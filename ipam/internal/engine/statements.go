package engine

import (
	"errors"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Every SQL statement of the package, by name. Each is written once, here
// (those that hand an address out in handout.go, built from its guards, and
// the fragments both share in fragments.go), and the functions that run
// them name them (TestSQLIsNamedInStatementsFile keeps SQL out of the other
// files). The scans of their rows follow them. The statements of the allocation path
// come first: HotStatements lists them for the benchmark's EXPLAIN gate,
// which checks their plans on databases of a million rows (no sequential
// scan of the allocations or stripes, no sort). The rest follow by
// lifecycle: clusters, pools, node blocks, address sets, holds, events, the
// operator's reads, transactions, migrations.

// Statement is one named SQL statement of the core. A statement written
// with named parameters (named: every statement with more than five) lists
// them in Params, by position ($1 is Params[0]); the others' parameters are
// positional in their text.
type Statement struct {
	Name   string
	SQL    string
	Params []string
}

// HotStatements are the statements an allocation, a hold, a release or a
// refresh runs, by name. Variants that differ only in their row lock are
// listed separately (a wait plans like a skip).
func HotStatements() []Statement {
	return []Statement{
		{Name: "pool lookup", SQL: sqlLoadPool},
		{Name: "owner probe", SQL: sqlOwnerRows},
		{Name: "stripe pick (SKIP LOCKED)", SQL: sqlTakeStripe},
		{Name: "stripe pick (waiting, no SKIP LOCKED)", SQL: sqlTakeStripeWait},
		{Name: "fresh space left? (after a waiting pick found none)", SQL: sqlFreshLeft},
		{Name: "insert allocation + event (CTE)", SQL: sqlInsertFresh.sql, Params: sqlInsertFresh.names},
		{Name: "event insert", SQL: sqlInsertEvent.sql, Params: sqlInsertEvent.names},
		{Name: "reuse pick (cooled queue, SKIP LOCKED)", SQL: sqlTakeCooled},
		{Name: "reuse take (conditional write)", SQL: sqlActivate.sql, Params: sqlActivate.names},
		{Name: "exact claim probe", SQL: sqlClaimProbe},
		{Name: "release", SQL: sqlRelease.sql, Params: sqlRelease.names},
		// The take statements, each for one owner and for several, and the
		// fresh take of one owner in a caller's transaction (its own pick).
		{Name: "fast path: a fresh allocation in one statement (a counter pool)", SQL: takeFreshOneSQL.sql, Params: takeFreshOneSQL.names},
		{Name: "fast path: a fresh allocation in a caller's transaction, in one statement (a counter pool)", SQL: takeFreshOneInTxSQL.sql, Params: takeFreshOneInTxSQL.names},
		{Name: "fast path: fresh allocations of several owners in one statement (a counter pool)", SQL: takeFreshSQL.sql, Params: takeFreshSQL.names},
		{Name: "fast path: a reused allocation in one statement (an IPv4 table pool)", SQL: takeReuseOneSQL.sql, Params: takeReuseOneSQL.names},
		{Name: "fast path: reused allocations of several owners in one statement (an IPv4 table pool)", SQL: takeReuseSQL.sql, Params: takeReuseSQL.names},
		{Name: "fast path: apply of a planned hold in one statement", SQL: confirmHoldSQL.sql, Params: confirmHoldSQL.names},
		{Name: "refresh read", SQL: sqlGetActive},
		{Name: "hold look (a plan's first read)", SQL: sqlFindHold.sql, Params: sqlFindHold.names},
	}
}

// UsageStatement is the per-pool usage statement (ipam_pool_usage, ipamctl
// usage, the metrics) and the planner setting its transaction runs first.
func UsageStatement() (setting, sql string) { return usagePlannerSetting, usagePoolsSQL }

// clusterColumns, poolColumns, allocColumns and leakColumns are the column
// lists scanCluster, loadPool, scanAllocation and scanLeak read, in order.
const clusterColumns = `id, prefix, node_prefix, instance_prefix, node_cooldown, instance_cooldown,
	gateway_ipv6, mtu, dns_servers, as_written, created_at, updated_at`

const poolColumns = `id, cluster_id, name, category, family, kind, cidrs, exclude, cooldown, stripes, mtu, gateway,
	created_at, updated_at, is_default, as_written`

// replacingByOriginSQL: replacingSQL, by a plan of the origin the expression
// origin gives: a mark holds only for the configuration that made it
// (migration 22). A mark that records no origin (made by a client without
// one, or before migration 22) holds for the actor, as before.
func replacingByOriginSQL(origin string) string {
	return `(` + replacingSQL + ` AND (replace_origin IS NULL OR replace_origin = ` + origin + `))`
}

// takeOverSQL: a create of the origin the expression origin gives (empty or
// NULL: none) may take the active row over: the row is that origin's
// configuration's (or no configuration's), or a plan of that origin (or a
// mark of none) marked it as being replaced. The one statement of the
// rule: the adoption's write checks it (sqlAdopt), and a create refused
// reads it again (sqlReplacing).
func takeOverSQL(origin string) string {
	return `(` + ownOriginSQL(origin) + ` OR ` + replacingByOriginSQL(`nullif(`+origin+`, '')`) + `)`
}

// leakColumns read an allocation "a" joined with its pool "p".
const leakColumns = `a.id, a.generation, a.cluster_id, a.pool_id, p.category, host(a.address), a.owner_kind, a.owner_id,
	coalesce(a.org_id, ''), coalesce(a.env_id, ''), coalesce(a.node_id, ''), coalesce(a.instance_id, ''),
	coalesce(a.set_owner, ''), coalesce(a.actor, ''), a.allocated_at, a.last_seen_at`

// inventoryID is the id an inventory lists for an allocation's owner: the
// set for a member of an address set, the owner id otherwise.
const inventoryID = `coalesce(a.set_owner, a.owner_id)`

const sqlLoadPool = `SELECT ` + poolColumns + ` FROM ipam_pools WHERE id = $1`

// sqlOwnerRows finds, with two index probes in one round trip, the owner's active (or
// reserved) allocation and its most recently released cooling one of the
// tenant $4, $5 (org, env): the one it may take back inside its cooldown.
var sqlOwnerRows = `(SELECT ` + allocColumns + ` FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state IN ('active', 'reserved'))
	UNION ALL
	(SELECT ` + allocColumns + ` FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'cooling'
			AND ` + sameTenantSQL(guardAt{}.col, "$4::text", "$5::text") + `
		ORDER BY released_at DESC LIMIT 1)`

// sqlInsertFresh inserts a new row for an address never handed out before, with its
// event, in one statement; no row when the address already has one (an exact
// claim got there first).
//
// @id is the row's id, @event its event's (of @event_type, with @data);
// @hold, an interval, > 0 makes it a plan-time hold; @set_owner is the
// address set or NULL.
var sqlInsertFresh = named("insert allocation + event (CTE)", `WITH a AS (
		INSERT INTO ipam_allocations (`+allocInsertColumns+`)
		VALUES (@id, @cluster, @pool, @address, @ordinal, CASE WHEN @hold::interval > interval '0' THEN 'reserved' ELSE 'active' END,
			`+newGenerationSQL+`, @kind, @owner, @org, @env, @node, @instance, @actor, (SELECT ipam_now()), (SELECT ipam_now()), @set_owner,
			CASE WHEN @hold::interval > interval '0' THEN (SELECT ipam_now()) + @hold::interval END,
			CASE WHEN @hold::interval > interval '0' THEN (SELECT ipam_now()) + @hold::interval END)
		ON CONFLICT (cluster_id, address) DO NOTHING
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`)
		SELECT @event, @event_type, `+eventOfRow+`, @data FROM a
	)`+movedIn+countMoved+`
	SELECT `+allocColumns+` FROM a`)

// sqlOwnersPool reads the pool of the owner's live row (active or held),
// else of its latest cooling one, from the two owner indexes: a set key
// whose pools list it is tried there first (allocateFirst).
const sqlOwnersPool = `SELECT pool_id FROM (
		(SELECT pool_id, 0 AS rank FROM ipam_allocations
			WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state IN ('active', 'reserved'))
		UNION ALL
		(SELECT pool_id, 1 FROM ipam_allocations
			WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'cooling'
			ORDER BY released_at DESC LIMIT 1)) o
	ORDER BY rank LIMIT 1`

// sqlActiveOfOwner reads the owner's active allocation, if any (a refused
// release names it).
const sqlActiveOfOwner = `SELECT ` + allocColumns + ` FROM ipam_allocations
	WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'active'`

// releaseMatchSQL: the allocation a release names: the one at its generation
// (@generation), or with none (0) the one of the releasing manager (@actor,
// and the transaction's origin or none recorded). The release's look-up and its
// write (re-judged under the row's lock) use it both; its columns are the
// allocation's alone.
var releaseMatchSQL = `(generation = @generation OR (@generation = 0 AND coalesce(actor, '') = @actor AND ` +
	ownOriginSQL(callerOriginSetting) + `))`

// sqlClaimProbe locks the row of an exactly claimed address, if it has one.
const sqlClaimProbe = `SELECT ` + allocColumns + ` FROM ipam_allocations
	WHERE cluster_id = $1 AND address = $2 FOR UPDATE`

// sqlRelease puts the owner's active allocation (of @generation, or any with 0)
// into its cooldown, and writes its release event (@event its id,
// @event_type; its actor is the releasing manager, @actor, and its data the
// reusable time, as the inheriting statement writes it).
// A release without a generation releases only an allocation of its own
// @actor: one that names no holder must not take another manager's
// allocation (releaseTx says owner_conflict then).
//
// It takes the pool's lock (FOR KEY SHARE) before the row, as every writer
// of a pool's rows does (the locking order: pool, then rows): the release's
// cooling count writes a bucket row whose foreign key locks the pool anyway,
// and taken then, after the row, it deadlocked with a shrink that holds the
// pool and renumbers the pool's rows (found by the interleaving explorer).
var sqlRelease = named("release", `WITH held AS MATERIALIZED (
		SELECT pool_id FROM ipam_allocations
		WHERE cluster_id = @cluster AND owner_kind = @kind AND owner_id = @owner AND state = 'active' AND `+releaseMatchSQL+`
	), pool AS MATERIALIZED (
		SELECT id, cooldown FROM ipam_pools WHERE id = (SELECT pool_id FROM held)`+poolLockSQL+`
	), a AS (UPDATE ipam_allocations a SET state = 'cooling',
		released_at = (SELECT ipam_now()), reusable_at = (SELECT ipam_now()) + p.cooldown, cooling_until = (SELECT ipam_now()) + p.cooldown
	FROM pool p
	WHERE p.id = a.pool_id AND a.cluster_id = @cluster AND a.owner_kind = @kind AND a.owner_id = @owner
		AND a.state = 'active' AND `+releaseMatchSQL+`
	RETURNING a.*)`+movedOut+countMoved+`, e AS (
		INSERT INTO ipam_events (`+eventColumns+`, at)
		SELECT @event, @event_type, `+eventOfAlloc+`, @actor, jsonb_build_object('reusable_at', reusable_at), released_at
		FROM a
	)
	SELECT a.id, a.cluster_id, a.pool_id, a.address, a.ordinal, a.state, a.generation,
		coalesce(a.owner_kind, ''), coalesce(a.owner_id, ''), coalesce(a.org_id, ''), coalesce(a.env_id, ''),
		coalesce(a.node_id, ''), coalesce(a.instance_id, ''), coalesce(a.actor, ''),
		a.allocated_at, a.released_at, a.reusable_at, false, coalesce(a.set_owner, ''), true, true, '' FROM a`)

// sqlInsertEvent appends an event (@event its id) in the caller's
// transaction.
var sqlInsertEvent = named("event insert", `INSERT INTO ipam_events (`+eventColumns+`)
	VALUES (@event, @event_type, @cluster, @pool, @allocation, @generation, @address, @kind, @owner, @org, @env,
		@node, @instance, @actor, @data)`)

// The refresh read (GetActive): the owner's active allocation and the block
// of its pool that holds it. A refresh records that it saw the allocation
// (last_seen_at, and confirmed_at the first time; the function
// ipam_record_seen, migration 30) when that is due: at most once an hour,
// and at the first refresh after the allocation was made.
const (
	// activeOfOwner is the owner's active allocation, "a".
	activeOfOwner = `ipam_allocations a WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state = 'active'`
	// seenDue: the refresh's record of the allocation is due.
	seenDue = `coalesce(last_seen_at < (SELECT ipam_now()) - interval '1 hour', true) OR confirmed_at IS NULL`

	// sqlGetActive reads without recording (a Peek client's read, the read
	// again after the record found the allocation gone, the read of a role
	// that may not write): allocColumns, false, blockOfA.
	sqlGetActive = `SELECT ` + allocColumns + `, false, ` + blockOfA + ` FROM ` + activeOfOwner

	// sqlGetActiveSeen reads and, when it is due, records the refresh, in
	// one statement (one round trip, one commit): allocColumns, whether the
	// record was due and found the allocation gone, blockOfA. The record
	// finds the row still active and of the same generation under its lock:
	// an allocation released since the statement's snapshot (an operator's
	// reclaim of stale allocations, which checks last_seen_at under that
	// lock) is not recorded, and the flag tells the caller to read again
	// rather than answer an address its owner has just lost.
	sqlGetActiveSeen = `SELECT ` + allocColumns + `, ` + recordIfDue + `, ` + blockOfA + ` FROM ` + activeOfOwner

	// recordIfDue records a's refresh when it is due (CASE keeps the call to
	// those rows): true when the record found a gone, else false.
	recordIfDue = `CASE WHEN ` + seenDue + ` THEN NOT ipam_record_seen(a.id, a.generation) ELSE false END`
)

// The one definition of a row's state, as every reader and writer judges it
// (at ipam_now(); the row is "a"). A hold (state 'reserved') is live while
// reserved_until is ahead; once it expires it counts as what it left behind:
// cooling while the cooldown it kept (reusable_at, at least cooling_until)
// runs, free after. Usage, the destroy counts, a shrink, a node's block
// release and scaling, listings and lookups all use these, and the schema's
// triggers (migration 12) the same conditions.
const (
	// rowActive: an allocation.
	rowActive = `a.state = 'active'`
	// rowHeld: a live plan-time hold.
	rowHeld = `(a.state = 'reserved' AND a.reserved_until > (SELECT ipam_now()))`
	// rowLive: active or held, what a destroy or shrink must never remove.
	rowLive = `(a.state = 'active' OR ` + rowHeld + `)`
	// rowCooling: inside its cooldown: released, or an expired hold that
	// kept one.
	rowCooling = `(a.state IN ('cooling', 'reserved') AND a.reusable_at > (SELECT ipam_now()) AND NOT ` + rowHeld + `)`
	// rowInUse: live or cooling: what no other owner may take, and what
	// must never be deleted.
	rowInUse = `(a.state = 'active' OR (a.state IN ('reserved', 'cooling') AND a.reusable_at > (SELECT ipam_now())))`
	// rowReusable: free, cooled, or an expired hold with no cooldown left: a
	// row that may be deleted or handed to anyone.
	rowReusable = `(a.state = 'free' OR (a.state IN ('reserved', 'cooling') AND a.reusable_at <= (SELECT ipam_now())))`
)

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
// under another isolation; the full path then names the isolation (and a
// READ ONLY transaction, whose write failed). The guard
// also saves the caller's planning (plan_cache_mode, enable_seqscan, jit) and
// sets the fast statements' own, those of the store's transactions
// (fastPlans, TxSettings); sqlFastCallersPlans gives the caller's back before
// the release, so that none of the caller's later statements plans another
// way. Planned with a caller's enable_seqscan, the generic plan of the
// statement (made at its first run on a connection) scanned every pool twice
// and every cluster once per placement while they fit in a few pages: about
// 5 % of a placement's server CPU with 60 clusters.
const (
	sqlFastSavepoint = `SAVEPOINT ipam_fast`
	sqlFastGuard     = `SELECT 1 / (current_setting('transaction_isolation') = 'read committed')::int,
		set_config('plan_cache_mode', ` + fastPlans + `, true), set_config('enable_seqscan', 'off', true),
		set_config('jit', 'off', true), set_config('ipam.origin', $1, true),
		set_config('lock_timeout', $2, true), set_config('statement_timeout', $3, true)
	FROM (SELECT set_config('ipam.callers_plan_cache_mode', current_setting('plan_cache_mode'), true),
		set_config('ipam.callers_enable_seqscan', current_setting('enable_seqscan'), true),
		set_config('ipam.callers_jit', current_setting('jit'), true), ` + saveCallersBounds + `) saved`
	sqlFastCallersPlans = `SELECT set_config('plan_cache_mode', current_setting('ipam.callers_plan_cache_mode'), true),
		set_config('enable_seqscan', current_setting('ipam.callers_enable_seqscan'), true),
		set_config('jit', current_setting('ipam.callers_jit'), true), ` + restoreCallersBounds

	// The client's bounds on waits (Config.LockTimeout, StatementTimeout)
	// hold for its statements in a caller's transaction too: set for them,
	// the caller's own settings saved first (saveCallersBounds) and set
	// back after (restoreCallersBounds), as the planner settings are.
	saveCallersBounds = `set_config('ipam.callers_lock_timeout', current_setting('lock_timeout'), true),
		set_config('ipam.callers_statement_timeout', current_setting('statement_timeout'), true)`
	restoreCallersBounds = `set_config('lock_timeout', current_setting('ipam.callers_lock_timeout'), true),
		set_config('statement_timeout', current_setting('ipam.callers_statement_timeout'), true)`
	// sqlCallersBounds sets the client's bounds for the full path in a
	// caller's transaction (inOuterTx), and sqlCallersBoundsBack sets the
	// caller's own back.
	sqlCallersBounds = `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true)
		FROM (SELECT ` + saveCallersBounds + `) saved`
	sqlCallersBoundsBack = `SELECT ` + restoreCallersBounds
	sqlFastRelease       = `RELEASE SAVEPOINT ipam_fast`
	sqlFastUndo          = `ROLLBACK TO SAVEPOINT ipam_fast; RELEASE SAVEPOINT ipam_fast`
)

// sqlFastBounds sets, for the one statement queued after it in a batch
// (runOne), the transaction bounds, TxSettings and fastPlans: set_config with
// is_local, so they end with the statement's own transaction.
const sqlFastBounds = `SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true),
	set_config('enable_seqscan', 'off', true), set_config('jit', 'off', true), set_config('plan_cache_mode', ` + fastPlans + `, true),
	set_config('ipam.origin', $3, true)`

// fastPlans is the plan_cache_mode of the one-statement allocations: always
// the generic plan, the one prepared once per connection. Left to choose,
// PostgreSQL compares the generic plan's estimated cost with the custom
// plans' and, on some connections and some statistics, planned the fresh
// statement again at every call: 465 µs of server CPU a plan, against 227 µs
// to run it (pg_stat_statements with track_planning, 1 and 4 clients), and the
// allocation's cost then depended on which connection it took. The generic
// plans are the ones the benchmark's EXPLAIN gate and
// TestFastStatementsReadNoIndexWhole check.
const fastPlans = `'force_generic_plan'`

// Row locks appended to a read, for the variants of one statement (the
// locking order is in pool.go).
const (
	sqlForUpdate      = " FOR UPDATE"
	sqlForNoKeyUpdate = " FOR NO KEY UPDATE"
	sqlForShare       = " FOR SHARE"
)

// Clusters (cluster.go). A cluster's row is locked FOR SHARE by a node's
// scaling, FOR NO KEY UPDATE by a cluster or pool update, FOR UPDATE by its
// destroy.
const (
	// sqlClusterRow is a cluster's row, for its row locks.
	sqlClusterRow = `SELECT 1 FROM ipam_clusters WHERE id = $1`

	// sqlLoadCluster reads a cluster; the variants take its row lock too.
	sqlLoadCluster            = `SELECT ` + clusterColumns + ` FROM ipam_clusters WHERE id = $1`
	sqlLoadClusterShare       = sqlLoadCluster + sqlForShare
	sqlLoadClusterNoKeyUpdate = sqlLoadCluster + sqlForNoKeyUpdate
	sqlLockClusterShare       = sqlClusterRow + sqlForShare
	sqlLockClusterNoKeyUpdate = sqlClusterRow + sqlForNoKeyUpdate
	sqlLockClusterUpdate      = sqlClusterRow + sqlForUpdate

	// sqlClusterNetwork reads the network settings an instance's allocation
	// returns (Network).
	sqlClusterNetwork = `SELECT gateway_ipv6, mtu, dns_servers FROM ipam_clusters WHERE id = $1`

	// sqlClusterExistsKeyShare tells whether the cluster exists, holding its row
	// FOR KEY SHARE until commit.
	sqlClusterExistsKeyShare = `SELECT EXISTS (SELECT 1 FROM ipam_clusters WHERE id = $1 FOR KEY SHARE)`

	// sqlOverlappingCluster finds a cluster whose prefix overlaps $1.
	sqlOverlappingCluster = `SELECT id, prefix FROM ipam_clusters WHERE prefix && $1 LIMIT 1`

	// sqlOverlappingClusters lists every other cluster whose prefix overlaps
	// $1 (for a plan-time check that names them all).
	sqlOverlappingClusters = `SELECT id, prefix FROM ipam_clusters WHERE prefix && $1 AND id <> $2 ORDER BY id`

	// sqlAddressHolder names the owner holding an address (the gateway a cluster
	// update would set).
	sqlAddressHolder = `SELECT owner_kind || ' ' || owner_id FROM ipam_allocations
		WHERE cluster_id = $1 AND address = $2 AND state IN ('active', 'reserved', 'cooling')`

	// sqlDeleteReusableAddress deletes an address's row unless it is held or
	// cooling (the new gateway's row of a node block pool).
	sqlDeleteReusableAddress = `DELETE FROM ipam_allocations a WHERE cluster_id = $1 AND address = $2
		AND ` + rowReusable

	// sqlSetPoolSettings brings the cluster's cooldown, MTU and gateway to a
	// pool that hands out its addresses: its node and instance pools (by id),
	// and its node block and parked pools.
	sqlSetPoolSettings    = `UPDATE ipam_pools SET cooldown = $2, mtu = $3, gateway = $4, updated_at = (SELECT ipam_now())`
	sqlUpdatePoolSettings = sqlSetPoolSettings + ` WHERE id = $1`

	sqlUpdateBlockPoolsSettings = sqlSetPoolSettings + `
		WHERE cluster_id = $1 AND kind IN ('blocks', 'parked')`

	// sqlClusterHoldings counts what a cluster still holds: active, live holds,
	// cooling (and expired holds that kept a cooldown).
	sqlClusterHoldings = `SELECT count(*) FILTER (WHERE ` + rowActive + `), count(*) FILTER (WHERE ` + rowHeld + `),
			count(*) FILTER (WHERE ` + rowCooling + `)
		FROM ipam_pools p JOIN ipam_allocations a ON a.pool_id = p.id
		WHERE p.cluster_id = $1 AND a.state IN ('active', 'reserved', 'cooling')`

	sqlDeleteCluster = `DELETE FROM ipam_clusters WHERE id = $1`

	// sqlActiveSample names the first $2 active allocations of pools $1,
	// for a refused destroy: "2001:db8::1 (node "n1")".
	sqlActiveSample = `SELECT host(address) || ' (' || owner_kind || ' "' || owner_id || '")' FROM ipam_allocations
		WHERE pool_id = ANY ($1::text[]) AND state = 'active' ORDER BY pool_id, ordinal LIMIT $2`

	// sqlActiveElsewhereCount and sqlActiveElsewhereSample: the active
	// addresses of the pools $1 that the configuration $2 did not hand out
	// (another one did, or none: the scheduler's); a row records the origin
	// of the generation that holds it (origin_generation). A destroy plan's
	// look (HeldElsewhere).
	sqlActiveElsewhereCount = `SELECT count(*) FROM ipam_allocations
		WHERE pool_id = ANY ($1::text[]) AND state = 'active' AND NOT coalesce(origin = $2 AND origin_generation = generation, false)`
	sqlActiveElsewhereSample = `SELECT host(address) || ' (' || owner_kind || ' "' || owner_id || '")' FROM ipam_allocations
		WHERE pool_id = ANY ($1::text[]) AND state = 'active' AND NOT coalesce(origin = $2 AND origin_generation = generation, false)
		ORDER BY pool_id, ordinal LIMIT $3`
)

// sqlInsertCluster creates a cluster (no row: it exists); sqlUpdateCluster
// changes its settings.
var (
	sqlInsertCluster = named("cluster insert", `INSERT INTO ipam_clusters (id, prefix, node_prefix, instance_prefix, node_cooldown,
			instance_cooldown, gateway_ipv6, mtu, dns_servers, actor, as_written)
		VALUES (@cluster, @prefix, @node_prefix, @instance_prefix, @node_cooldown, @instance_cooldown, @gateway_ipv6, @mtu,
			@dns_servers, @actor, @as_written)
		ON CONFLICT (id) DO NOTHING
		RETURNING `+clusterColumns)

	sqlUpdateCluster = named("cluster update", `UPDATE ipam_clusters SET node_cooldown = @node_cooldown, instance_cooldown = @instance_cooldown,
			gateway_ipv6 = @gateway_ipv6, mtu = @mtu, dns_servers = @dns_servers, as_written = @as_written, updated_at = (SELECT ipam_now())
		WHERE id = @cluster RETURNING `+clusterColumns)
)

var (
	// sqlForceRelease releases, for a forced destroy, every active address
	// of the pools ($1) into its pool's cooldown (their live holds are
	// dropped first, sqlDropPoolHolds), before the pools go: the database refuses to delete a pool that still has one
	// (ipam_pools_keep_live_rows, migration 12). It returns the rows, for
	// their events.
	sqlForceRelease = `UPDATE ipam_allocations a SET state = 'cooling', released_at = now_at,
			reusable_at = greatest(now_at + p.cooldown, a.cooling_until), cooling_until = greatest(now_at + p.cooldown, a.cooling_until),
			reserved_until = NULL
		FROM ipam_pools p, (SELECT ipam_now() AS now_at) clock
		WHERE a.pool_id = p.id AND p.id = ANY ($1::text[])
			AND ` + rowActive + `
		RETURNING ` + allocColumnsOfRelease

	// sqlDropPoolHolds drops, for a destroy, every live hold of the pools
	// ($1): each keeps only a cooldown it already had (as sqlDropHold). It
	// returns the rows, for their events.
	sqlDropPoolHolds = `UPDATE ipam_allocations a SET state = 'cooling', released_at = now_at,
			reusable_at = greatest(now_at, a.cooling_until), reserved_until = NULL
		FROM (SELECT ipam_now() AS now_at) clock
		WHERE a.pool_id = ANY ($1::text[]) AND ` + rowHeld + `
		RETURNING ` + allocColumnsOfRelease

	// allocColumnsOfRelease are allocColumns of the rows sqlForceRelease
	// moved (table a), with the columns the pool's table has too qualified.
	allocColumnsOfRelease = strings.Replace(allocColumns, "id, cluster_id, pool_id,", "a.id, a.cluster_id, a.pool_id,", 1)
)

// Tombstones (pool.go, migration 16).
const (
	// sqlTombstonesIn lists the live tombstones inside blocks $1 that bind
	// cluster $2 (its private IPv4 ones and every global one), locking them.
	// The caller skips those its layout excludes (in one binary search
	// each: testing each against every exclusion here cost tombstones times
	// exclusions).
	sqlTombstonesIn = `SELECT address FROM ipam_tombstones
		WHERE address <<= ANY ($1::cidr[])
			AND scope IN ('', $2) AND scope = ipam_tombstone_scope(address, $2) AND reusable_at > (SELECT ipam_now())
		ORDER BY address FOR UPDATE`

	// sqlInheritTombstones makes each tombstone of addresses $3 (at
	// ordinals $4) a cooling row of pool $2 in cluster $1: a new row, or
	// the pool's free row for the address; then the tombstone goes. An
	// owner is an owner in its own cluster only: a tombstone of another
	// cluster keeps its owner as "<former cluster>/<owner id>", a key no
	// owner can have (ValidateID refuses '/'), and none of its labels, so
	// no owner of this cluster takes it back inside its cooldown
	// (migration 19).
	sqlInheritTombstones = `WITH t AS (
		SELECT t.address, t.reusable_at, t.released_at, coalesce(t.allocated_at, t.released_at) AS allocated_at,
			t.pool_id, t.cluster_id AS from_cluster, t.generation,
			t.owner_kind, t.actor, x.ord,
			CASE WHEN t.cluster_id = $1 THEN t.owner_id ELSE t.cluster_id || '/' || t.owner_id END AS owner_id,
			CASE WHEN t.cluster_id = $1 THEN t.org_id END AS org_id,
			CASE WHEN t.cluster_id = $1 THEN t.env_id END AS env_id,
			CASE WHEN t.cluster_id = $1 THEN t.node_id END AS node_id,
			CASE WHEN t.cluster_id = $1 THEN t.instance_id END AS instance_id
		FROM unnest($3::inet[], $4::bigint[]) AS x(address, ord)
		JOIN ipam_tombstones t ON t.address = x.address AND t.scope = ipam_tombstone_scope(x.address, $1)
		WHERE t.reusable_at > (SELECT ipam_now())
	), m AS (
		INSERT INTO ipam_allocations AS a (id, cluster_id, pool_id, address, ordinal, state, generation,
			owner_kind, owner_id, org_id, env_id, node_id, instance_id, actor, allocated_at, released_at,
			reusable_at, cooling_until)
		SELECT gen_random_uuid(), $1, $2, t.address, t.ord, 'cooling', t.generation, t.owner_kind, t.owner_id,
			t.org_id, t.env_id, t.node_id, t.instance_id, t.actor, t.allocated_at, t.released_at,
			t.reusable_at, t.reusable_at
		FROM t
		ON CONFLICT (cluster_id, address) DO UPDATE SET state = 'cooling', generation = EXCLUDED.generation,
			owner_kind = EXCLUDED.owner_kind, owner_id = EXCLUDED.owner_id, org_id = EXCLUDED.org_id,
			env_id = EXCLUDED.env_id, node_id = EXCLUDED.node_id, instance_id = EXCLUDED.instance_id,
			actor = EXCLUDED.actor, allocated_at = EXCLUDED.allocated_at, released_at = EXCLUDED.released_at,
			reusable_at = EXCLUDED.reusable_at, cooling_until = EXCLUDED.cooling_until
			WHERE a.pool_id = EXCLUDED.pool_id AND a.state = 'free'
		RETURNING a.*
	), e AS (
		-- its history: check's counter invariant exempts the row as it
		-- does an exact claim (it may lie ahead of the counter)
		INSERT INTO ipam_events (` + eventColumns + `)
		SELECT gen_random_uuid(), 'allocation.inherited', m.cluster_id, m.pool_id, m.id, m.generation, m.address,
			m.owner_kind, m.owner_id, m.org_id, m.env_id, m.node_id, m.instance_id, coalesce(m.actor, ''),
			jsonb_build_object('exact', true, 'reusable_at', m.reusable_at, 'from_pool', t.pool_id,
				'from_cluster', t.from_cluster)
		FROM m JOIN t ON t.address = m.address
	)
	DELETE FROM ipam_tombstones x USING m
	WHERE x.address = m.address AND x.scope = ipam_tombstone_scope(m.address, $1)`

	// sqlCheckTombstones lists the rows (of cluster $1, or all) over a live
	// tombstone that binds their cluster.
	sqlCheckTombstones = `SELECT a.id::text, a.cluster_id, a.pool_id, a.address, a.state,
			coalesce(a.owner_kind || ' ' || a.owner_id, 'no owner'), coalesce(t.owner_kind || ' ' || t.owner_id, 'no owner'),
			t.pool_id, t.reusable_at
		FROM ipam_tombstones t JOIN ipam_allocations a ON a.address = t.address
			AND ipam_tombstone_scope(a.address, a.cluster_id) = t.scope
		WHERE t.reusable_at > (SELECT ipam_now()) AND ($1 = '' OR a.cluster_id = $1)
		ORDER BY a.cluster_id, a.address`

	// sqlUsageTombstones counts the live tombstones per former cluster ($1,
	// or all), with the first to cool.
	sqlUsageTombstones = `SELECT cluster_id, count(*), min(reusable_at) FROM ipam_tombstones
		WHERE reusable_at > (SELECT ipam_now()) AND ($1 = '' OR cluster_id = $1) GROUP BY cluster_id`

	// sqlSweepTombstones deletes tombstones whose cooldown has passed.
	sqlSweepTombstones = `DELETE FROM ipam_tombstones WHERE reusable_at <= (SELECT ipam_now())`
)

// Pools (pool.go, pool_operator.go).
var (
	// sqlInsertPool creates pool @pool; sqlUpdatePool changes its layout
	// and settings.
	sqlInsertPool = named("pool insert", `INSERT INTO ipam_pools (id, cluster_id, name, category, family, kind, cidrs, exclude,
			cooldown, size, stripes, mtu, gateway, is_default, as_written)
		VALUES (@pool, @cluster, @name, @category, @family, @kind, @cidrs, @exclude, @cooldown, @size, @stripes, @mtu,
			@gateway, @is_default, @as_written)`)

	sqlUpdatePool = named("pool update", `UPDATE ipam_pools SET cidrs = @cidrs, exclude = @exclude, cooldown = @cooldown,
		size = @size, mtu = @mtu, gateway = @gateway, is_default = @is_default, as_written = @as_written,
		updated_at = (SELECT ipam_now()) WHERE id = @pool`)
)

const (
	// sqlLockPoolKeyShare is the allocator's pool lock (lockPoolShared): it
	// reads updated_at, to tell whether the pool changed since it was loaded.
	sqlLockPoolKeyShare = `SELECT updated_at FROM ipam_pools WHERE id = $1 FOR KEY SHARE`

	// The shape writer's lock on pool rows, in id order (lockPoolsExclusive):
	// one pool, a cluster's pools, or a cluster's own node and instance pools.
	sqlLockPoolsByID       = sqlLockPoolsHead + `id = $1` + sqlLockPoolsTail
	sqlLockPoolsOfCluster  = sqlLockPoolsHead + `cluster_id = $1` + sqlLockPoolsTail
	sqlLockPoolsClusterOwn = sqlLockPoolsHead + `cluster_id = $1 AND category IN ('node', 'instance')` + sqlLockPoolsTail
	sqlPoolsOfCluster      = sqlLockPoolsHead + `cluster_id = $1 ORDER BY id` // the same list, unlocked
	sqlLockPoolsHead       = `SELECT id FROM ipam_pools WHERE `
	// sqlLockPoolForGrowth: a growth of a node's blocks (lockNodeForScaling).
	sqlLockPoolForGrowth = sqlLockPoolsHead + `id = $1` + sqlForNoKeyUpdate
	sqlLockPoolsTail     = ` ORDER BY id` + sqlForUpdate

	// sqlPoolExists tells whether a pool exists (a node's blocks, an operator
	// pool).
	sqlPoolExists = `SELECT EXISTS (SELECT 1 FROM ipam_pools WHERE id = $1)`

	// sqlClusterExists tells whether a cluster exists.
	sqlClusterExists = `SELECT EXISTS (SELECT 1 FROM ipam_clusters WHERE id = $1)`

	// sqlPoolCIDRs reads a pool's blocks (to name an address's block).
	sqlPoolCIDRs = `SELECT cidrs FROM ipam_pools WHERE id = $1`

	// sqlPlacementPeers lists the other operator pools a pool's blocks must not
	// overlap: the cluster's, and every cluster's IPv4 ones.
	sqlPlacementPeers = `SELECT id, cluster_id, cidrs FROM ipam_pools
		WHERE id <> $1 AND category IN ('ipv4', 'ipv6') AND (cluster_id = $2 OR family = 4)`

	// sqlInsertTableRows writes a free row for every address of the runs of
	// a table pool that has none (run i: ordinals $4[i]..$5[i], from address
	// $3[i]), and sets the ordinal of the rows it has. All runs go in one
	// statement: a pool of 20,000 runs (20,000 exclusions) is one round trip,
	// not 20,000.
	sqlInsertTableRows = `INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, reusable_at)
		SELECT gen_random_uuid(), $1, $2, r.start + (g - r.first), g, 'free', '-infinity'
		FROM unnest($3::inet[], $4::bigint[], $5::bigint[]) AS r(start, first, last),
			generate_series(r.first, r.last) g
		ON CONFLICT (cluster_id, address) DO UPDATE SET ordinal = EXCLUDED.ordinal
			WHERE ipam_allocations.pool_id = EXCLUDED.pool_id`

	// sqlOtherDefaultPool finds another default pool of the same family in the
	// cluster.
	sqlOtherDefaultPool = `SELECT id FROM ipam_pools WHERE cluster_id = $1 AND family = $2 AND is_default AND id <> $3`

	// outsideRunsHead + a filter on rows a + outsideRunsTail selects the
	// ids of the rows of pool $1 that pass the filter and lie outside every
	// run of the pool's new layout ($2, $3: the runs' first and last
	// addresses; the runs are disjoint). Rows and runs are sorted together
	// once, and a row is inside a run exactly when the highest last address
	// of the runs starting at or before it is at or after it: O((rows +
	// runs) log), where testing each row against each run cost rows times
	// runs (20,000 runs over a /16 ran past the statement timeout).
	outsideRunsHead = `WITH e AS (
			SELECT a.id, a.address AS at, 1 AS k, NULL::inet AS hi FROM ipam_allocations a WHERE a.pool_id = $1 AND `
	outsideRunsTail = `
			UNION ALL
			SELECT NULL, r.lo, 0, r.hi FROM unnest($2::inet[], $3::inet[]) AS r(lo, hi)
		), w AS (
			SELECT id, at, max(hi) OVER (ORDER BY at, k ROWS UNBOUNDED PRECEDING) AS cover FROM e
		)
		SELECT id FROM w WHERE id IS NOT NULL AND (cover IS NULL OR at > cover)`

	// sqlHeldOutside lists (up to 20) the held or cooling addresses of a pool
	// outside its new runs ($2, $3: their bounds).
	sqlHeldOutside = `SELECT host(a.address) || ' (' || a.state || ' by ' || coalesce(a.owner_kind, '') || ' ' || coalesce(a.owner_id, '') || ')'
		FROM (` + outsideRunsHead + rowInUse + outsideRunsTail + `) o JOIN ipam_allocations a ON a.id = o.id
		ORDER BY a.address LIMIT 20`

	// sqlDeleteRowsOutside deletes the free and long-cooled rows of a pool
	// outside its new runs.
	sqlDeleteRowsOutside = `DELETE FROM ipam_allocations a USING (` + outsideRunsHead + rowReusable + outsideRunsTail + `) o
		WHERE a.id = o.id AND ` + rowReusable

	// sqlSetStripesLast sets the last ordinal of every stripe of a counter pool.
	sqlSetStripesLast = `UPDATE ipam_pool_stripes SET last_ordinal = $2 WHERE pool_id = $1`

	// sqlPoolHoldings counts what an operator pool still holds, as
	// sqlClusterHoldings does for a cluster.
	sqlPoolHoldings = `SELECT p.cluster_id,
			count(a.id) FILTER (WHERE ` + rowActive + `), count(a.id) FILTER (WHERE ` + rowHeld + `),
			count(a.id) FILTER (WHERE ` + rowCooling + `)
		FROM ipam_pools p LEFT JOIN ipam_allocations a ON a.pool_id = p.id AND a.state IN ('active', 'reserved', 'cooling')
		WHERE p.id = $1 AND p.category IN ('ipv4', 'ipv6') GROUP BY p.cluster_id`

	sqlDeletePool = `DELETE FROM ipam_pools WHERE id = $1`
)

// The stripe counters of a new counter pool are written with one COPY
// (insertPool): its table and columns, in the order of the rows.
var (
	copyStripesTable   = pgx.Identifier{"ipam_pool_stripes"}
	copyStripesColumns = []string{"pool_id", "stripe", "next_ordinal", "last_ordinal"}
)

// Allocation, beyond the hot statements (allocate.go).
var (
	// sqlMarkReplacement marks the owner's active allocation of this actor
	// (of @generation) as being replaced by a plan of origin @origin, for
	// @ttl (migrations 17, 22).
	sqlMarkReplacement = named("replacement mark write", `UPDATE ipam_allocations SET replace_until = (SELECT ipam_now()) + @ttl::interval,
			replace_generation = generation, replace_origin = nullif(@origin, '')
		WHERE cluster_id = @cluster AND owner_kind = @kind AND owner_id = @owner AND state = 'active' AND actor = @actor
			AND generation = @generation
		RETURNING `+allocColumns)

	// sqlAdopt hands the owner's active allocation (row @id, of @generation)
	// to a create that finds it: a new generation, and its labels brought
	// up to date. It records the adopting client's origin (ipam.origin) for
	// the new generation, as the row trigger does for a row that becomes
	// active, and writes its allocation.adopted event (@event; the actor is
	// the row's, which adoption requires to be the client's).
	sqlAdopt = named("adoption", `WITH g AS (SELECT `+newGenerationSQL+` AS gen),
	a AS (UPDATE ipam_allocations SET generation = g.gen,
			origin = coalesce(`+callerOriginSQL+`, origin),
			origin_generation = CASE WHEN `+callerOriginSQL+` IS NULL THEN origin_generation ELSE g.gen END,
			org_id = @org, env_id = @env, node_id = @node, instance_id = @instance, set_owner = @set_owner, last_seen_at = (SELECT ipam_now())
		FROM g
		-- still unconfirmed: a refresh that confirmed it since it was read
		-- (which moves no generation) makes the adoption try again, and be
		-- refused
		-- and still this configuration's to take over: made by it (or by
		-- none), or marked as being replaced by its plan (checkOrigin read
		-- it earlier; another plan's mark may have replaced that one since)
		WHERE id = @id AND generation = @generation AND state = 'active' AND NOT `+confirmedSQL+`
			AND `+takeOverSQL(callerOriginSetting)+`
		RETURNING ipam_allocations.*
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`)
		SELECT @event, 'allocation.adopted', `+eventOfRow+`, '{}' FROM a
	)
	SELECT `+allocColumns+` FROM a`)

	// sqlDropHold returns a hold (@id, of @generation) at once, without a
	// cooldown of its own (a cooldown it kept stays), and writes its
	// hold_dropped event (@event, by @actor). With @lost, another manager
	// of the owner drops it, only once its own time is over (a plan of its
	// manager may have extended it since the dropper read it): its
	// hold_lost event (@lost_event, with @data) comes first, for the
	// hold's manager (EventHoldLost, ownerTaken).
	sqlDropHold = named("hold drop", `WITH a AS (UPDATE ipam_allocations SET state = 'cooling', released_at = (SELECT ipam_now()),
			reusable_at = greatest((SELECT ipam_now()), cooling_until), reserved_until = NULL
		WHERE id = @id AND generation = @generation AND `+heldByKey+`
			AND (NOT @lost::boolean OR reserved_until <= (SELECT ipam_now()))
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`)
		SELECT x.id, x.type, a.cluster_id, a.pool_id, a.id, a.generation, a.address, a.owner_kind, a.owner_id, a.org_id,
			a.env_id, a.node_id, a.instance_id, @actor, x.data
		FROM a, (VALUES (@lost_event::uuid, '`+EventHoldLost+`', @data::jsonb, @lost::boolean),
			(@event, 'allocation.hold_dropped', '{}', true)) x (id, type, data, wanted)
		WHERE x.wanted
	)
	SELECT count(*) FROM a`)

	// sqlUpdateLabels changes the lookup labels of the owner's active
	// allocation.
	sqlUpdateLabels = named("labels update", `UPDATE ipam_allocations SET org_id = @org, env_id = @env, node_id = @node,
			instance_id = @instance
		WHERE cluster_id = @cluster AND owner_kind = @kind AND owner_id = @owner AND state = 'active'
			AND `+sameTenantSQL(guardAt{}.col, `@org`, `@env`)+`
		RETURNING `+allocColumns)
)

const (
	// sqlSetStripeNext moves a locked stripe's counter (over excluded or exactly
	// claimed ordinals).
	sqlSetStripeNext = `UPDATE ipam_pool_stripes SET next_ordinal = $3 WHERE pool_id = $1 AND stripe = $2`

	// sqlClaimedAddresses lists which of a batch of addresses already have a row
	// (exact claims ahead of the counter).
	sqlClaimedAddresses = `SELECT address FROM ipam_allocations WHERE cluster_id = $1 AND address = ANY ($2::inet[])`

	// sqlExhaustedCounts are a full pool's figures for its ExhaustedError (run
	// on the failure path only).
	// Active allocations and live holds are counted apart: a plan that
	// finds the pool full may be finding its own holds.
	sqlExhaustedCounts = `SELECT count(*) FILTER (WHERE ` + rowActive + `), count(*) FILTER (WHERE ` + rowHeld + `),
			count(*) FILTER (WHERE ` + rowCooling + `), min(reusable_at) FILTER (WHERE ` + rowCooling + `)
		FROM ipam_allocations a WHERE pool_id = $1 AND state IN ('active', 'reserved', 'cooling')`

	// sqlCounterTop is the last ordinal a counter pool's stripes hand out (-1:
	// none): the instance counter stops below the node blocks.
	sqlCounterTop = `SELECT coalesce(max(last_ordinal), -1) FROM ipam_pool_stripes WHERE pool_id = $1`
	// sqlCounterNext is the highest next ordinal of a counter pool's stripes:
	// every ordinal it has handed out is below it.
	sqlCounterNext = `SELECT coalesce(max(next_ordinal), 0) FROM ipam_pool_stripes WHERE pool_id = $1`
)

// Per-node instance blocks (blocks.go): settings, blocks, their rows.
const (
	sqlNodesWithBlocks = `SELECT cluster_id, node_id FROM ipam_node_block_settings
		WHERE $1 = '' OR cluster_id = $1 ORDER BY cluster_id, node_id`

	// sqlBlockLength is the block length a cluster carves (one for all its
	// nodes).
	sqlBlockLength = `SELECT block_prefix_length FROM ipam_block_counters WHERE cluster_id = $1`

	// sqlNodeScaling reads a node's scaling settings; sqlLockNodeScaling locks
	// them too, which serializes the scaling of one node.
	sqlNodeScaling = `SELECT block_prefix_length, min_free_fraction, max_free_fraction, max_blocks, demand, generation
		FROM ipam_node_block_settings WHERE cluster_id = $1 AND node_id = $2`

	sqlLockNodeScaling = sqlNodeScaling + sqlForUpdate

	// sqlNodeBlocksOwner locks a node's settings and tells who created its
	// blocks, when, and whether they are confirmed: a Terraform state read
	// them, or they are older than the adoption window (as for an
	// allocation, allocColumns). sqlNodeBlocksOwnerRead tells the same
	// without the lock (a plan's check).
	sqlNodeBlocksOwnerRead = `SELECT coalesce(actor, ''), created_at,
			confirmed_at IS NOT NULL OR created_at < (SELECT ipam_now()) - interval '` + adoptionWindowSQL + `',
			coalesce(replace_generation = generation AND replace_until > (SELECT ipam_now()), false)
		FROM ipam_node_block_settings WHERE cluster_id = $1 AND node_id = $2`
	sqlNodeBlocksOwner = sqlNodeBlocksOwnerRead + sqlForUpdate

	// sqlTakeOverNodeBlocks: a create took a node's blocks over (adopted
	// them, or replaced the object that held them): a new generation, not
	// confirmed until its own state reads them, no mark (migration 20).
	sqlTakeOverNodeBlocks = `UPDATE ipam_node_block_settings SET generation = ` + newGenerationSQL + `, created_at = (SELECT ipam_now()),
			confirmed_at = NULL, replace_until = NULL, replace_generation = NULL
		WHERE cluster_id = $1 AND node_id = $2`

	// sqlMarkNodeBlocksReplacement marks a node's blocks of actor $3 and
	// generation $5 as being replaced, for $4 (migration 20).
	sqlMarkNodeBlocksReplacement = `UPDATE ipam_node_block_settings SET replace_until = (SELECT ipam_now()) + $4::interval,
			replace_generation = generation
		WHERE cluster_id = $1 AND node_id = $2 AND actor = $3 AND generation = $5`

	// sqlConfirmNodeBlocks records that a Terraform state read a node's blocks.
	sqlConfirmNodeBlocks = `UPDATE ipam_node_block_settings SET confirmed_at = (SELECT ipam_now())
		WHERE cluster_id = $1 AND node_id = $2 AND confirmed_at IS NULL`
	// sqlConfirmCluster and sqlConfirmPool record that a read of the
	// provider (a refresh or an import) saw the cluster or pool.
	sqlConfirmCluster = `UPDATE ipam_clusters SET read_at = (SELECT ipam_now()) WHERE id = $1 AND read_at IS NULL`
	sqlConfirmPool    = `UPDATE ipam_pools SET read_at = (SELECT ipam_now()) WHERE id = $1 AND read_at IS NULL`

	// sqlManagers* find, among the ids $1, those a Terraform state holds,
	// with the origin of the configuration that made them ('' when only a
	// read saw them): clusters, pools, address sets ("<cluster>/<set>":
	// any member a state holds) and nodes' blocks ("<cluster>/<node>").
	sqlManagersClusters = `SELECT id, coalesce(creator_origin, '') FROM ipam_clusters
		WHERE id = ANY ($1) AND (creator_origin IS NOT NULL OR read_at IS NOT NULL)`
	sqlManagersPools = `SELECT id, coalesce(creator_origin, '') FROM ipam_pools
		WHERE id = ANY ($1) AND (creator_origin IS NOT NULL OR read_at IS NOT NULL)`
	sqlManagersSets = `SELECT a.cluster_id || '/' || a.set_owner, max(` + originSQL + `)
		FROM ipam_allocations a
		WHERE a.state = 'active' AND a.set_owner IS NOT NULL AND a.cluster_id || '/' || a.set_owner = ANY ($1) AND ` + stateHeldSQL + `
		GROUP BY 1`
	sqlManagersNodeBlocks = `SELECT cluster_id || '/' || node_id, '' FROM ipam_node_block_settings
		WHERE cluster_id || '/' || node_id = ANY ($1) AND confirmed_at IS NOT NULL`
	sqlDeleteNodeScaling = `DELETE FROM ipam_node_block_settings WHERE cluster_id = $1 AND node_id = $2`

	sqlActiveBlocks = `SELECT block, empty_scans FROM ipam_node_blocks
		WHERE cluster_id = $1 AND node_id = $2 AND state = 'active' ORDER BY allocated_at, block_index`

	// sqlNodeUse counts the addresses in use on a node: active, and live
	// holds (an expired hold that kept a cooldown is cooling: it is parked
	// with the block, as a released address is).
	sqlNodeUse = `SELECT count(*) FROM ipam_allocations a WHERE pool_id = $1 AND ` + rowLive

	// sqlNodeUsers names the first owners in use on a node (as sqlNodeUse
	// counts them), for a refusal to release its blocks.
	sqlNodeUsers = `SELECT owner_kind || ' ' || owner_id || ' (' || host(address) || ', actor ' || coalesce(actor, '?') ||
			CASE WHEN state = 'reserved' THEN ', a plan-time hold' ELSE '' END || ')'
		FROM ipam_allocations a WHERE pool_id = $1 AND ` + rowLive + ` ORDER BY address LIMIT $2`

	// sqlSetBlockEmptyScans and sqlResetEmptyScans count the consecutive
	// scalings that found a block empty.
	sqlSetBlockEmptyScans = `UPDATE ipam_node_blocks SET empty_scans = $3 WHERE cluster_id = $1 AND block = $2`

	sqlResetEmptyScans = `UPDATE ipam_node_blocks SET empty_scans = 0
		WHERE cluster_id = $1 AND node_id = $2 AND state = 'active' AND empty_scans <> 0`

	// sqlLockBlockRows locks a block's rows ($2..$3) and tells, for each,
	// whether it is inside its cooldown or hold.
	sqlLockBlockRows = `SELECT state, coalesce(reusable_at > (SELECT ipam_now()), false) FROM ipam_allocations
		WHERE pool_id = $1 AND address BETWEEN $2 AND $3 FOR UPDATE`

	// sqlDeleteReusableBlockRows deletes a released block's free and long-cooled
	// rows.
	sqlDeleteReusableBlockRows = `DELETE FROM ipam_allocations a WHERE pool_id = $1 AND address BETWEEN $2 AND $3
		AND ` + rowReusable

	// sqlBlockRowCounts counts the rows left in a block, the active ones, and
	// the latest reusable time.
	sqlBlockRowCounts = `SELECT count(*), count(*) FILTER (WHERE state = 'active'), max(reusable_at)
		FROM ipam_allocations WHERE pool_id = $1 AND address BETWEEN $2 AND $3`

	// sqlParkBlockRows moves a released block's cooling rows to its parked pool
	// ($4); an expired hold that kept a cooldown is cooling (rowCooling), and
	// is parked as such (nothing is held in a parked pool).
	sqlParkBlockRows = `UPDATE ipam_allocations SET pool_id = $4, ordinal = address - $2::inet,
			state = CASE WHEN state = 'reserved' THEN 'cooling' ELSE state END, reserved_until = NULL
		WHERE pool_id = $1 AND address BETWEEN $2 AND $3`

	// sqlCoolBlock releases a block: it cools for the instance cooldown, and at
	// least until its last row's cooldown ($4).
	sqlCoolBlock = `UPDATE ipam_node_blocks SET state = 'cooling', empty_scans = 0, released_at = (SELECT ipam_now()),
		reusable_at = greatest((SELECT ipam_now()) + $3::interval, $4::timestamptz) WHERE cluster_id = $1 AND block = $2`

	// sqlTakeOwnCoolingBlock gives the node ($2) back a block of the length
	// ($3) it released, cooled down or not: one that parked addresses first,
	// then the last released.
	sqlTakeOwnCoolingBlock = `UPDATE ipam_node_blocks nb SET state = 'active', empty_scans = 0,
			allocated_at = (SELECT ipam_now()), released_at = NULL, reusable_at = NULL
		FROM (SELECT block FROM ipam_node_blocks b WHERE cluster_id = $1 AND node_id = $2 AND state = 'cooling'
			AND masklen(block) = $3
			ORDER BY EXISTS (SELECT 1 FROM ipam_pools p WHERE p.cluster_id = $1 AND p.kind = 'parked' AND p.cidrs = ARRAY[b.block]) DESC,
				released_at DESC, block_index
			LIMIT 1 FOR UPDATE SKIP LOCKED) pick
		WHERE nb.cluster_id = $1 AND nb.block = pick.block RETURNING nb.block`

	// sqlTakeCooledBlock gives the node ($2) the longest-cooled reusable block
	// of the length ($3).
	sqlTakeCooledBlock = `UPDATE ipam_node_blocks nb SET state = 'active', node_id = $2, empty_scans = 0,
			allocated_at = (SELECT ipam_now()), released_at = NULL, reusable_at = NULL
		FROM (SELECT block FROM ipam_node_blocks WHERE cluster_id = $1 AND state = 'cooling' AND reusable_at <= (SELECT ipam_now())
			AND masklen(block) = $3 ORDER BY reusable_at LIMIT 1 FOR UPDATE SKIP LOCKED) pick
		WHERE nb.cluster_id = $1 AND nb.block = pick.block RETURNING nb.block`

	// sqlParkedCooling counts the rows of a parked pool still inside their
	// cooldown.
	sqlParkedCooling = `SELECT count(*) FROM ipam_allocations WHERE pool_id = $1 AND reusable_at > (SELECT ipam_now())`

	// sqlBlockCounter reads the cluster's block counter, creating it at 0.
	sqlBlockCounter = `INSERT INTO ipam_block_counters (cluster_id, block_prefix_length, next_index) VALUES ($1, $2, 0)
		ON CONFLICT (cluster_id) DO UPDATE SET next_index = ipam_block_counters.next_index
		RETURNING next_index`

	sqlSetBlockCounter = `UPDATE ipam_block_counters SET next_index = $2 WHERE cluster_id = $1`

	// sqlClusterRangeUsed tells whether any address of a range ($2..$3) of the
	// cluster has a row.
	sqlClusterRangeUsed = `SELECT EXISTS (SELECT 1 FROM ipam_allocations WHERE cluster_id = $1 AND address BETWEEN $2 AND $3)`

	// sqlLowerCounterTop keeps the instance counter below a new block ($2 its
	// new top), and the pool's size ($3: what the pool can hand out up to
	// that top) with it, so that usage counts what the allocator can hand
	// out, and the block's addresses once (in the node's pool).
	sqlLowerCounterTop = `WITH s AS (
		UPDATE ipam_pool_stripes SET last_ordinal = least(last_ordinal, $2) WHERE pool_id = $1
	)
	UPDATE ipam_pools SET size = least(size, $3) WHERE id = $1`

	sqlInsertNodeBlock = `INSERT INTO ipam_node_blocks (cluster_id, block, block_index, node_id, state)
		VALUES ($1, $2, $3, $4, 'active')`

	// sqlBlockBusy tells whether a block holds an address active, held or inside
	// its cooldown.
	sqlBlockBusy = `SELECT EXISTS (SELECT 1 FROM ipam_allocations a WHERE pool_id = $1 AND address BETWEEN $2 AND $3
		AND ` + rowInUse + `)`
)

// A node's scaling settings (sqlSaveNodeScaling, created or changed) and
// its blocks pool's layout and settings (sqlUpdateNodePool).
var (
	sqlSaveNodeScaling = named("node scaling write", `INSERT INTO ipam_node_block_settings (cluster_id, node_id,
			block_prefix_length, min_free_fraction, max_free_fraction, max_blocks, demand, actor, created_at)
		VALUES (@cluster, @node, @block_prefix_length, @min_free_fraction, @max_free_fraction, @max_blocks, @demand,
			@actor, (SELECT ipam_now()))
		ON CONFLICT (cluster_id, node_id) DO UPDATE SET block_prefix_length = EXCLUDED.block_prefix_length,
			min_free_fraction = EXCLUDED.min_free_fraction, max_free_fraction = EXCLUDED.max_free_fraction,
			max_blocks = EXCLUDED.max_blocks, demand = EXCLUDED.demand, updated_at = (SELECT ipam_now())`)

	sqlUpdateNodePool = named("node pool update", `UPDATE ipam_pools SET cidrs = @cidrs, size = @size, cooldown = @cooldown,
		mtu = @mtu, gateway = @gateway, updated_at = (SELECT ipam_now()) WHERE id = @pool`)
)

// Address sets (set.go): members are allocations whose set_owner is the set.
const (
	// sqlSaveSetRequest stores what a set member was asked for (its pools,
	// family or address).
	sqlSaveSetRequest = `UPDATE ipam_allocations SET request = $2 WHERE id = $1`
	// sqlLockSet serializes the changes of one set ($1: cluster, $2: set
	// id) for the rest of the transaction: a change reads which keys the
	// set holds and then acts on what it read, so a concurrent change of
	// the same set must not add or move a key in between.
	sqlLockSet        = `SELECT pg_advisory_xact_lock(hashtextextended('ipam set ' || $1 || '/' || $2, 0))`
	sqlClusterPoolIDs = `SELECT id FROM ipam_pools WHERE cluster_id = $1 ORDER BY id`

	// sqlDefaultPools lists a cluster's pools of a family that a "family"
	// request may draw from, the default first.
	sqlDefaultPools = `SELECT id, is_default FROM ipam_pools WHERE cluster_id = $1 AND family = $2
		AND category <> 'node' ORDER BY is_default DESC, id`

	// sqlSetMembers reads a set's active members as a refresh without the
	// record does (a Peek client's read, a read again, a role that may not
	// write): allocColumns, the family, the request, false, blockOfA.
	// sqlSetMembersSeen records each member's refresh when it is due, as
	// sqlGetActiveSeen does, and says of each whether its record found it
	// gone.
	sqlSetMembers     = `SELECT ` + allocColumns + `, family(address), coalesce(request, '{}'), false, ` + blockOfA + setMembersOf
	sqlSetMembersSeen = `SELECT ` + allocColumns + `, family(address), coalesce(request, '{}'), ` + recordIfDue + `, ` + blockOfA + setMembersOf
	setMembersOf      = ` FROM ipam_allocations a WHERE cluster_id = $1 AND set_owner = $2 AND state = 'active'`
)

// sqlRelabelSet changes the lookup labels of the members of set @set_owner.
var sqlRelabelSet = named("set labels update", `UPDATE ipam_allocations SET org_id = @org, env_id = @env, node_id = @node,
		instance_id = @instance
	WHERE cluster_id = @cluster AND set_owner = @set_owner
		AND (state = 'reserved' OR (state = 'active' AND `+sameTenantSQL(guardAt{}.col, `@org`, `@env`)+`))`)

// sqlSetTenantChange finds an active member of set @set_owner held for
// another tenant than @org and @env: a relabel that would move it.
var sqlSetTenantChange = named("set tenant change", `SELECT `+allocColumns+` FROM ipam_allocations
	WHERE cluster_id = @cluster AND set_owner = @set_owner AND state = 'active'
		AND NOT (`+sameTenantSQL(guardAt{}.col, `@org`, `@env`)+`)
	LIMIT 1`)

// sqlReplacing tells whether a plan of @origin marked row @id as being
// replaced, whether a create of @origin may take it over (takeOverSQL), and
// whether the row is still the allocation read (active, of @generation).
// It locks the row, so that the mark it reads is the mark the create acts
// on: a plan that marks the row again (for another configuration) waits
// for the create's end, and then finds the generation it names gone. Read
// unlocked, a mark committed between this read and the create's release
// let the create move the owner away from an allocation that another
// configuration's plan had just marked (found by the linearizability test).
var sqlReplacing = named("replacement mark", `SELECT `+replacingByOriginSQL(`nullif(@origin::text, '')`)+`, `+takeOverSQL(`@origin::text`)+`,
		state = 'active' AND generation = @generation
	FROM ipam_allocations WHERE id = @id FOR NO KEY UPDATE`)

// sqlFindHold is Reserve's read-only first look: the owner's hold (or fresh
// allocation) of @actor and of @origin (or none recorded), whether it has
// more than @fresh_for left, and its pool's blocks.
var sqlFindHold = named("hold look (a plan's first read)", `SELECT `+allocColumns+`,
		((state = 'active' AND confirmed_at IS NULL AND allocated_at >= (SELECT ipam_now()) - interval '`+adoptionWindowSQL+`')
			OR (state = 'reserved' AND reserved_until > (SELECT ipam_now()) + @fresh_for::interval))
			AND `+ownOriginSQL("@origin::text")+`,
		(SELECT p.cidrs FROM ipam_pools p WHERE p.id = a.pool_id)
	FROM ipam_allocations a
	WHERE cluster_id = @cluster AND owner_kind = @kind AND owner_id = @owner AND state IN ('active', 'reserved') AND actor = @actor`)

// Plan-time holds (hold.go, fastpath.go's findHold) and refresh reads
// (lookup.go); the release itself is sqlRelease above.
const (
	sqlExtendHold = `UPDATE ipam_allocations
		SET reserved_until = (SELECT ipam_now()) + $3::interval,
			reusable_at = greatest((SELECT ipam_now()) + $3::interval, cooling_until)
		WHERE id = $1 AND generation = $2 AND ` + heldByKey + ` RETURNING ` + allocColumns

	// sqlLostHold finds the owner's latest hold taken by another owner, or
	// dropped by another manager of the owner, within $4.
	sqlLostHold = `SELECT e.address, coalesce(e.data->>'taken_by', ''), e.at, coalesce(e.pool_id, ''),
			coalesce((e.data->>'owner_taken')::boolean, false), coalesce(e.data->>'holder_actor', ''),
			coalesce(e.data->>'holder_origin', ''),
			-- the run it was reported to, if it was (NULL: not yet)
			(SELECT coalesce(r.data->>'run', '') FROM ipam_events r
				WHERE r.cluster_id = $1 AND r.owner_kind = $2 AND r.owner_id = $3 AND r.type = '` + EventHoldLossReported + `'
					AND r.at >= e.at
				ORDER BY r.at DESC LIMIT 1)
		FROM ipam_events e
		WHERE e.cluster_id = $1 AND e.owner_kind = $2 AND e.owner_id = $3 AND e.type = '` + EventHoldLost + `'
			AND e.at > (SELECT ipam_now()) - $4::interval
		ORDER BY e.at DESC LIMIT 1`

	// sqlOwnerHolds tells whether the owner has an active address or a hold.
	sqlOwnerHolds = `SELECT EXISTS (SELECT 1 FROM ipam_allocations
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state IN ('active', 'reserved'))`

	// sqlActiveByAddress finds the active allocation of an address in any
	// cluster (two: ambiguous).
	sqlActiveByAddress = `SELECT ` + allocColumns + ` FROM ipam_allocations WHERE address = $1 AND state = 'active' LIMIT 2`
)

// Events and failures (events.go, ops_events.go); an event of an
// allocation is sqlInsertEvent above.

// sqlRecordFailure records a failed allocation (@failure its id) and its
// "<kind>.allocation_failed" event (@event, of @event_type), in one
// statement.
var sqlRecordFailure = named("failure record", `WITH f AS (
		INSERT INTO ipam_allocation_failures (id, cluster_id, pool_id, reason, owner_kind, owner_id, actor, detail)
		VALUES (@failure, @cluster, @pool, @reason, @kind, @owner, @actor, @detail))
	INSERT INTO ipam_events (id, type, cluster_id, pool_id, generation, owner_kind, owner_id, org_id, env_id, node_id,
		instance_id, actor, data)
	VALUES (@event, @event_type, @cluster, @pool, 0, @kind, @owner, @org, @env, @node, @instance, @actor,
		jsonb_build_object('reason', @reason::text, 'detail', @detail::text))`)

const (
	// sqlEventTypeSeen: is there an event whose type is LIKE $1 (a type this
	// binary does not write)?
	sqlEventTypeSeen = `SELECT EXISTS (SELECT 1 FROM ipam_events WHERE type LIKE $1)`

	// sqlListEvents lists events (ListEvents) oldest first; sqlListEventsNewest
	// newest first, for a limit (sqlLimitFormat) to keep the newest.
	sqlListEvents       = sqlListEventsHead + `ASC, id ASC`
	sqlListEventsNewest = sqlListEventsHead + `DESC, id DESC`

	sqlListEventsHead = `SELECT id, at, type, coalesce(cluster_id, ''), coalesce(pool_id, ''),
			coalesce(allocation_id, '00000000-0000-0000-0000-000000000000'), coalesce(generation, 0), address,
			coalesce(owner_kind, ''), coalesce(owner_id, ''), coalesce(org_id, ''), coalesce(env_id, ''),
			coalesce(node_id, ''), coalesce(instance_id, ''), actor, coalesce(origin, ''), data
		FROM ipam_events
		WHERE at >= $1 AND ($2 = '' OR cluster_id = $2)
			AND ((cardinality($3::text[]) = 0 AND cardinality($4::text[]) = 0) OR type = ANY ($3) OR type LIKE ANY ($4))
		ORDER BY at `

	sqlLimitFormat = " LIMIT %d"
)

// The operator's audit (ops_check.go): each check reads one snapshot, for
// one cluster, or all of them ($1 empty).
const (
	// sqlNow is the database's clock, the only clock of cooldowns.
	sqlNow          = `SELECT ipam_now()`
	sqlCheckPoolIDs = `SELECT id FROM ipam_pools WHERE $1 = '' OR cluster_id = $1`

	// sqlCheckUnique lists every address held more than once: twice in one
	// cluster, or in several clusters unless it is private IPv4 (which
	// clusters may reuse; ipam_block_class, migration 13). All of them: the
	// report counts each and lists the first ones.
	sqlCheckUnique = `SELECT address, array_agg(cluster_id ORDER BY cluster_id, id),
			array_agg(id::text ORDER BY cluster_id, id), array_agg(coalesce(owner_kind, '') || ' ' || coalesce(owner_id, '') ORDER BY cluster_id, id)
		FROM ipam_allocations
		WHERE state IN ('active', 'reserved') AND ($1 = '' OR cluster_id = $1)
		GROUP BY address
		HAVING count(*) > count(DISTINCT cluster_id)
			OR (count(*) > 1 AND ipam_block_class(set_masklen(address, masklen(address))::cidr) <> 'private')
		ORDER BY address`

	sqlCheckInPoolRows = `SELECT id::text, cluster_id, pool_id, address, ordinal, state
		FROM ipam_allocations WHERE $1 = '' OR cluster_id = $1`

	// sqlCheckCooldown finds the hand-outs to another owner before the reusable
	// time of the address's latest release ($2: hand-out types, $3: release
	// types). A hand-out can break a cooldown only if some release of its
	// address before it was still cooling at its time: those hand-outs
	// (cand, a hash join of the cluster's hand-outs with its releases, read
	// once each) are few, the same owners taking their own addresses back,
	// and only they are judged against the latest release before them.
	// (Sorting all of them twice, by address and time and then by address
	// and release group, took 1.4 times as long on 1,500,000 events; a probe
	// per hand-out for its latest release took twice as long as that sort,
	// and an index entry for every release.)
	sqlCheckCooldown = `WITH rel AS MATERIALIZED (
			SELECT e.id, e.at, e.cluster_id, e.address, coalesce(e.owner_kind, '') AS kind,
				coalesce(e.owner_id, '') AS owner, (e.data->>'reusable_at')::timestamptz AS reusable
			FROM ipam_events e
			WHERE e.address IS NOT NULL AND ($1 = '' OR e.cluster_id = $1)
				AND (e.type = ANY ($3) OR e.type LIKE '%.released') AND e.data ? 'reusable_at'
				AND NOT (e.type = ANY ($2) OR e.type LIKE '%.allocated')
		), cand AS MATERIALIZED (
			SELECT e.id, e.at, e.type, e.cluster_id, e.pool_id, e.address, coalesce(e.owner_kind, '') AS kind,
				coalesce(e.owner_id, '') AS owner
			FROM ipam_events e
			WHERE e.address IS NOT NULL AND ($1 = '' OR e.cluster_id = $1)
				AND (e.type = ANY ($2) OR e.type LIKE '%.allocated')
				AND EXISTS (SELECT FROM rel r WHERE r.cluster_id = e.cluster_id AND r.address = e.address
					AND (r.at, r.id) < (e.at, e.id) AND r.reusable > e.at)
		)
		SELECT id, at, type, cluster_id, pool_id, address, kind, owner, r_kind, r_owner, r_at, r_reusable
		FROM (
			-- Judged against the address's latest release before the hand-out:
			-- its reusable_at was fixed then (an earlier, longer cooldown was
			-- cut short by the same owner taking the address back and
			-- releasing it again).
			SELECT DISTINCT ON (h.id) h.id::text, h.at, h.type, h.cluster_id, coalesce(h.pool_id, '') AS pool_id,
				h.address, h.kind, h.owner, r.kind AS r_kind, r.owner AS r_owner, r.at AS r_at, r.reusable AS r_reusable
			FROM cand h JOIN rel r ON r.cluster_id = h.cluster_id AND r.address = h.address AND (r.at, r.id) < (h.at, h.id)
			ORDER BY h.id, r.at DESC, r.id DESC
		) judged
		WHERE r_reusable > at AND (r_kind, r_owner) IS DISTINCT FROM (kind, owner)
		ORDER BY at, id`

	sqlCheckIPv4PerEnv = `SELECT a.cluster_id, coalesce(a.env_id, a.owner_id, ''), count(*),
			string_agg(host(a.address) || ' (' || a.pool_id || ', ' || coalesce(a.owner_kind, '') || ' ' || coalesce(a.owner_id, '') || ')', ', ' ORDER BY a.address)
		FROM ipam_allocations a JOIN ipam_pools p ON p.id = a.pool_id
		WHERE p.family = 4 AND a.owner_kind = 'env_ipv4' AND a.state IN ('active', 'reserved') AND ($1 = '' OR a.cluster_id = $1)
		GROUP BY 1, 2 HAVING count(*) > 1
		ORDER BY 1, 2`

	// sqlCheckIPv4EnvLabel finds env_ipv4 rows labelled with another environment
	// than their owner.
	sqlCheckIPv4EnvLabel = `SELECT id::text, cluster_id, pool_id, address, owner_id, coalesce(env_id, '')
		FROM ipam_allocations
		WHERE owner_kind = 'env_ipv4' AND state IN ('active', 'reserved') AND env_id IS DISTINCT FROM owner_id
			AND ($1 = '' OR cluster_id = $1)
		ORDER BY cluster_id, address`

	sqlCheckStripes = `SELECT s.pool_id, s.stripe, s.next_ordinal, s.last_ordinal
		FROM ipam_pool_stripes s JOIN ipam_pools p ON p.id = s.pool_id
		WHERE $1 = '' OR p.cluster_id = $1 ORDER BY s.pool_id, s.stripe`

	// sqlCheckUsageCounts reads, per pool, its usage counter slots (how many,
	// the highest, their sum) next to a real count of its active rows.
	sqlCheckUsageCounts = `SELECT p.id, p.cluster_id, p.kind,
			(SELECT count(*) FROM ipam_pool_counters c WHERE c.pool_id = p.id),
			(SELECT coalesce(max(c.slot), -1) FROM ipam_pool_counters c WHERE c.pool_id = p.id),
			(` + activeCount + `)::bigint,
			(SELECT count(*) FROM ipam_allocations a WHERE a.pool_id = p.id AND a.state = 'active')
		FROM ipam_pools p
		WHERE $1 = '' OR p.cluster_id = $1
		ORDER BY p.id`

	// sqlCheckCoolingCounts compares, per pool and counted bucket, the
	// cooling counts with a real count of the cooling rows.
	sqlCheckCoolingCounts = `WITH counted AS (
			SELECT pool_id, bucket, sum(cooling) AS n FROM ipam_pool_cooling
			WHERE bucket >= ipam_cooling_counted_from() GROUP BY 1, 2
		), held AS (
			SELECT pool_id, ipam_cooling_bucket(reusable_at) AS bucket, count(*) AS n FROM ipam_allocations
			WHERE state = 'cooling' AND reusable_at >= ipam_cooling_counted_from() GROUP BY 1, 2
		)
		SELECT pool_id, p.cluster_id, bucket, coalesce(counted.n, 0)::bigint, coalesce(held.n, 0)::bigint
		FROM counted FULL JOIN held USING (pool_id, bucket) JOIN ipam_pools p ON p.id = pool_id
		WHERE coalesce(counted.n, 0) <> coalesce(held.n, 0) AND ($1 = '' OR p.cluster_id = $1)
		ORDER BY pool_id, bucket`

	// sqlRecountCooling sets the cooling counts of every pool (of cluster $1,
	// or all) to a real count, returning the pools whose counted buckets were
	// wrong. It runs after sqlLockCooling in its own transaction: the lock
	// waits for every transaction that changed a count to commit and holds
	// off the next ones (they add their change to the new count), while
	// allocations that move nothing into or out of a cooldown go on.
	sqlLockCooling    = `LOCK TABLE ipam_pool_cooling IN EXCLUSIVE MODE`
	sqlRecountCooling = `WITH pools AS (
			SELECT id FROM ipam_pools WHERE $1 = '' OR cluster_id = $1
		), was AS (
			SELECT pool_id, sum(cooling) AS n FROM ipam_pool_cooling
			WHERE pool_id IN (SELECT id FROM pools) AND bucket >= ipam_cooling_counted_from() GROUP BY 1
		), held AS (
			SELECT pool_id, ipam_cooling_bucket(reusable_at) AS bucket, count(*) AS n FROM ipam_allocations
			WHERE pool_id IN (SELECT id FROM pools) AND state = 'cooling' AND reusable_at > (SELECT ipam_now()) GROUP BY 1, 2
		), gone AS ( -- every row but slot 0 of a bucket that holds rows (disjoint from the upsert)
			DELETE FROM ipam_pool_cooling c WHERE c.pool_id IN (SELECT id FROM pools)
				AND NOT (c.slot = 0 AND (c.pool_id, c.bucket) IN (SELECT pool_id, bucket FROM held))
		), counted AS (
			INSERT INTO ipam_pool_cooling (pool_id, bucket, slot, cooling) SELECT pool_id, bucket, 0, n FROM held
			ON CONFLICT (pool_id, bucket, slot) DO UPDATE SET cooling = excluded.cooling
		), real AS (
			SELECT pool_id, sum(n) AS n FROM held WHERE bucket >= ipam_cooling_counted_from() GROUP BY 1
		)
		SELECT pool_id, coalesce(was.n, 0)::bigint, coalesce(real.n, 0)::bigint
		FROM was FULL JOIN real USING (pool_id)
		WHERE coalesce(was.n, 0) <> coalesce(real.n, 0)
		ORDER BY pool_id`

	// RecountUsage, pool by pool: the pool's missing counter slots, then its
	// stripes and then all its slots locked, in the locking order (every
	// writer in flight commits first, and writers that come later wait), then
	// the real count into slot 0 and zero into the other slots and the
	// stripes, returning what they said before.
	sqlRecountPools       = `SELECT id, kind FROM ipam_pools WHERE $1 = '' OR cluster_id = $1 ORDER BY id`
	sqlInsertMissingSlots = `INSERT INTO ipam_pool_counters (pool_id, slot)
		SELECT id, generate_series(0, $2::int - 1) FROM ipam_pools WHERE id = $1
		ON CONFLICT (pool_id, slot) DO NOTHING`
	sqlLockPoolStripes  = `SELECT 1 FROM ipam_pool_stripes WHERE pool_id = $1 ORDER BY stripe FOR UPDATE`
	sqlLockCounterSlots = `SELECT 1 FROM ipam_pool_counters WHERE pool_id = $1 ORDER BY slot FOR UPDATE`
	sqlRecountActive    = `WITH was AS (SELECT (` + activeCount + `)::bigint AS n FROM ipam_pools p WHERE p.id = $1),
		real AS (SELECT count(*) AS n FROM ipam_allocations WHERE pool_id = $1 AND state = 'active'),
		st AS (UPDATE ipam_pool_stripes SET active = 0 WHERE pool_id = $1 AND active <> 0)
		UPDATE ipam_pool_counters c SET active = CASE WHEN c.slot = 0 THEN real.n ELSE 0 END
		FROM real WHERE c.pool_id = $1
		RETURNING (SELECT n FROM was), real.n`

	// sqlCheckBlockFloors is, for each cluster with node blocks, its lowest
	// block, its instance prefix and its blocks' length: its instance counter
	// ends below the lowest block and not below the blocks' floor (blocksOf).
	sqlCheckBlockFloors = `SELECT b.cluster_id, min(b.block), c.instance_prefix, k.block_prefix_length
		FROM ipam_node_blocks b JOIN ipam_clusters c ON c.id = b.cluster_id JOIN ipam_block_counters k ON k.cluster_id = b.cluster_id
		GROUP BY b.cluster_id, c.instance_prefix, k.block_prefix_length`

	// sqlCheckCounterOrdinals finds ordinals handed out at or beyond their
	// stripe's next one, except exact claims.
	// The rows at or past the pool's lowest next ordinal are read first,
	// in one pass over each pool's rows (cand), and only they are matched
	// with their stripe: joined with the stripes first, the planner read
	// every row of a pool once per stripe (32 times).
	sqlCheckCounterOrdinals = `WITH cand AS MATERIALIZED (
		SELECT a.id, a.cluster_id, a.pool_id, a.address, a.ordinal, a.state, p.stripes
		FROM ipam_pools p
		CROSS JOIN LATERAL (SELECT min(next_ordinal) AS lowest FROM ipam_pool_stripes WHERE pool_id = p.id) m
		JOIN ipam_allocations a ON a.pool_id = p.id AND a.ordinal >= m.lowest
		WHERE p.kind = 'counter' AND a.state IN ('active', 'reserved', 'cooling') AND ($1 = '' OR p.cluster_id = $1))
	SELECT a.id::text, a.cluster_id, a.pool_id, a.address, a.ordinal, a.state, s.stripe, s.next_ordinal
		FROM cand a
		JOIN ipam_pool_stripes s ON s.pool_id = a.pool_id AND s.stripe = a.ordinal % a.stripes
		WHERE a.ordinal >= s.next_ordinal
			AND NOT EXISTS (SELECT 1 FROM ipam_events e
				WHERE e.cluster_id = a.cluster_id AND e.address = a.address AND e.data->>'exact' = 'true')
		ORDER BY a.pool_id, a.ordinal`

	sqlCheckSettings = `SELECT p.cluster_id, p.id,
			CASE WHEN p.category = 'node' THEN c.node_cooldown ELSE c.instance_cooldown END::text, p.cooldown::text,
			host(c.gateway_ipv6), coalesce(host(p.gateway), '')
		FROM ipam_pools p JOIN ipam_clusters c ON c.id = p.cluster_id
		WHERE (p.kind IN ('blocks', 'parked') OR p.id IN (c.id || '/node', c.id || '/instance'))
			AND (p.cooldown <> CASE WHEN p.category = 'node' THEN c.node_cooldown ELSE c.instance_cooldown END
				OR p.gateway IS DISTINCT FROM c.gateway_ipv6)
			AND ($1 = '' OR p.cluster_id = $1)
		ORDER BY 1, 2`

	sqlCheckNodeBlocks = `SELECT a.id::text, a.cluster_id, a.pool_id, a.address, a.state, p.kind,
			coalesce(b.node_id, ''), coalesce(b.state, ''), coalesce(s.node_id, '')
		FROM ipam_allocations a
		JOIN ipam_pools p ON p.id = a.pool_id
		LEFT JOIN ipam_node_blocks b ON b.cluster_id = a.cluster_id AND a.address <<= b.block
		LEFT JOIN LATERAL (SELECT substr(p.id, length(p.cluster_id) + 9) AS node_id) s ON p.kind = 'blocks'
		WHERE (p.kind IN ('blocks', 'parked') OR b.block IS NOT NULL)
			AND (a.state <> 'free' OR p.kind <> 'blocks')
			AND ($1 = '' OR a.cluster_id = $1)
			AND NOT ((p.kind = 'blocks' AND b.state = 'active' AND b.node_id = s.node_id)
				OR (p.kind = 'parked' AND b.state = 'cooling' AND a.state <> 'active'))
		ORDER BY a.cluster_id, a.address`
)

// staleSQL: allocation a is stale after $3 days. Age alone proves nothing
// of a holder that does not refresh what it holds (the scheduler, any Go
// caller without an origin): only an allocation that a Terraform state has
// read (a refresh or an import confirmed it) or that a configuration made
// (its origin is recorded for this generation) is stale once no refresh
// has seen it, or it was made, that many days ago. The others prove they
// are live by an inventory.
const staleSQL = stateHeldSQL + `
	AND coalesce(a.last_seen_at, a.allocated_at) < (SELECT ipam_now()) - make_interval(days => $3)`

// stateHeldSQL: a Terraform state holds allocation a: a refresh or an
// import read it (confirmed_at), or a configuration created it (its origin
// is recorded for this generation) and the state that create wrote holds it
// even before its first refresh. An operator's release refuses such an
// allocation without force, and only such an allocation is stale by age.
const stateHeldSQL = `(a.confirmed_at IS NOT NULL OR a.origin_generation = a.generation)`

// Leaks and their reclaim (ops_leaks.go).
var (
	// sqlInventoryLeaks lists the active allocations of an owner kind ($1) whose
	// owner is not in the inventory ($3).
	sqlInventoryLeaks = `SELECT ` + leakColumns + `
		FROM ipam_allocations a JOIN ipam_pools p ON p.id = a.pool_id
		WHERE a.state = 'active' AND a.owner_kind = $1 AND ($2 = '' OR a.cluster_id = $2)
			AND NOT EXISTS (SELECT 1 FROM unnest($3::text[]) AS i(id) WHERE i.id = ` + inventoryID + `)
		ORDER BY a.cluster_id, a.pool_id, a.ordinal`

	// sqlStaleLeaks lists the active allocations no refresh has seen for $3
	// days.
	sqlStaleLeaks = `SELECT ` + leakColumns + `
		FROM ipam_allocations a JOIN ipam_pools p ON p.id = a.pool_id
		WHERE a.state = 'active' AND ($1 = '' OR a.cluster_id = $1)
			AND (cardinality($2::text[]) = 0 OR a.owner_kind = ANY ($2))
			AND ` + staleSQL + `
		ORDER BY a.cluster_id, a.pool_id, a.ordinal`

	// sqlReclaimProbe reads a leak's row again (and, for $2 days, whether it is
	// stale); sqlReclaimProbeLock locks it too, before it is reclaimed.
	sqlReclaimProbe = `SELECT state, generation, coalesce(owner_kind, ''), coalesce(owner_id, ''),
			coalesce(` + inventoryID + `, ''), last_seen_at, coalesce(` + strings.ReplaceAll(staleSQL, "$3", "$2") + `, false),
			coalesce(` + stateHeldSQL + `, false)
		FROM ipam_allocations a WHERE id = $1`

	sqlReclaimProbeLock = sqlReclaimProbe + sqlForUpdate

	// sqlReclaim releases a leaked allocation of the reported generation into
	// its pool's cooldown.
	sqlReclaim = `WITH a AS (UPDATE ipam_allocations SET state = 'cooling', released_at = (SELECT ipam_now()),
			reusable_at = (SELECT ipam_now()) + (SELECT cooldown FROM ipam_pools p WHERE p.id = pool_id),
			cooling_until = (SELECT ipam_now()) + (SELECT cooldown FROM ipam_pools p WHERE p.id = pool_id)
		WHERE id = $1 AND generation = $2 AND state = 'active'
		RETURNING *)` + movedOut + countMoved + `
		SELECT ` + allocColumns + ` FROM a`
)

// An operator's release of one allocation (ops_release.go).
const (
	// sqlReleaseFind finds the active allocations of an address ($1, with
	// cluster $2 or every cluster when '') or of an owner ($3 kind, $4 id,
	// in cluster $2), with when a Terraform state confirmed each (a refresh
	// or an import read it) and whether one holds it; and, when none is
	// active, the ones that were released and are still cooling (no one
	// has taken the address since), the latest first: the allocation a
	// repeated release names. One statement, so one snapshot: read apart, an
	// owner given its latest address back between the two reads was
	// answered with an older release, or not_found.
	sqlReleaseFind = `WITH active AS (
			SELECT ` + releaseFound + ` WHERE state = 'active' AND ` + releaseFindWhere + `
			ORDER BY cluster_id LIMIT 2
		)
		SELECT * FROM active
		UNION ALL
		(SELECT ` + releaseFound + ` WHERE state = 'cooling' AND ` + releaseFindWhere + ` AND NOT EXISTS (SELECT 1 FROM active)
			ORDER BY cluster_id, released_at DESC LIMIT 2)`

	// releaseFound is what sqlReleaseFind reads of each row it finds, and
	// releaseFindWhere which rows (each state's own, so that each branch
	// reads its owner index: a partial index by state).
	releaseFound     = allocColumns + `, confirmed_at, coalesce(` + stateHeldSQL + `, false) FROM ipam_allocations a`
	releaseFindWhere = `($2 = '' OR cluster_id = $2)
			AND (($1::inet IS NOT NULL AND address = $1::inet) OR ($1::inet IS NULL AND owner_kind = $3 AND owner_id = $4))`

	// sqlReleaseFindHold reads the live plan-time hold a release found no
	// allocation for (its address, actor, origin and expiry), for the
	// not_found that says so.
	sqlReleaseFindHold = `SELECT host(address), actor, coalesce(origin, ''), reserved_until FROM ipam_allocations a
		WHERE ` + rowHeld + ` AND ` + releaseFindWhere + ` ORDER BY cluster_id LIMIT 1`

	// sqlHoldFind finds the plan-time holds of an address or owner
	// (releaseFindWhere), live or expired, the live ones first, and when
	// each would have expired (ExpireHold).
	sqlHoldFind = `SELECT ` + allocColumns + `, reserved_until FROM ipam_allocations a
		WHERE state = 'reserved' AND ` + releaseFindWhere + ` ORDER BY ` + rowHeld + ` DESC, cluster_id LIMIT 2`

	// sqlExpireHold ends a live hold's own time now, as its expiry at
	// reserved_until would: the address is reusable at once, unless the
	// hold kept a cooldown (reusable_at, as every hold has it).
	sqlExpireHold = `UPDATE ipam_allocations a SET reserved_until = (SELECT ipam_now()),
			reusable_at = greatest((SELECT ipam_now()), cooling_until)
		WHERE id = $1 AND generation = $2 AND ` + rowHeld + `
		RETURNING ` + allocColumns

	// sqlHoldUntil reads when a hold's own time ends, for a refusal that
	// names it (holdUntil).
	sqlHoldUntil = `SELECT reserved_until FROM ipam_allocations WHERE id = $1 AND reserved_until IS NOT NULL`

	// sqlPoolCategory reads a pool's category, for a release's result.
	sqlPoolCategory = `SELECT category FROM ipam_pools WHERE id = $1`

	// sqlReleaseProbeLock locks the row found, and says whether it is still
	// the active allocation of that generation, its confirmation, and
	// whether a Terraform state holds it.
	sqlReleaseProbeLock = `SELECT state = 'active' AND generation = $2, confirmed_at, coalesce(` + stateHeldSQL + `, false)
		FROM ipam_allocations a WHERE id = $1` + sqlForUpdate
)

// Address lookup and metrics (ops_lookup.go, ops_metrics.go).
const (
	// sqlPoolsContaining: one pool per cluster for an address (an address
	// has one row in a cluster), though several may cover it (a node's
	// blocks lie inside the cluster's instance pool): the pool of its row,
	// else the one with the most specific block.
	sqlPoolsContaining = `SELECT DISTINCT ON (p.cluster_id) p.id FROM ipam_pools p
		LEFT JOIN ipam_allocations a ON a.cluster_id = p.cluster_id AND a.address = $1 AND a.pool_id = p.id
		WHERE $1::inet <<= ANY (p.cidrs) AND ($2 = '' OR p.cluster_id = $2)
		ORDER BY p.cluster_id, (a.id IS NOT NULL) DESC,
			(SELECT max(masklen(c)) FROM unnest(p.cidrs) c WHERE $1::inet <<= c) DESC, p.id`

	sqlClustersContaining = `SELECT id FROM ipam_clusters WHERE prefix >>= $1 AND ($2 = '' OR id = $2)`

	sqlLookupAddress = `SELECT ` + allocColumns + `, last_seen_at,
			CASE WHEN ` + rowReusable + ` THEN 'free' WHEN ` + rowCooling + ` THEN 'cooling' ELSE state END
		FROM ipam_allocations a WHERE cluster_id = $1 AND address = $2`

	sqlMetricsFailures = `SELECT coalesce(f.cluster_id, ''), coalesce(f.pool_id, ''), coalesce(p.category, ''), f.reason, count(*)
		FROM ipam_allocation_failures f LEFT JOIN ipam_pools p ON p.id = f.pool_id
		GROUP BY 1, 2, 3, 4`
)

// Usage (ops_usage.go): per pool, from its counters and its own index ranges.

// usagePoolsSQL reads, per pool, what it holds:
//
//   - active rows: the sum of the pool's counter slots (ipam_pool_counters),
//     kept by the statements that change them (countMoved): constant time
//     whatever the pool holds;
//   - live holds: (pool_id, state = 'reserved') and their expiry (holds are
//     few and short-lived);
//   - cooling rows: the sum of the pool's cooling buckets from
//     ipam_cooling_counted_from() on (ipam_pool_cooling, kept by triggers, one
//     row per minute of reusable_at and concurrent writer), and a count of the
//     rows before that on the reuse index (pool_id, reusable_at): at most two
//     minutes of releases, whatever the cooldown window holds;
//   - the next address to leave the cooldown queue: the first cooling row of
//     those two minutes, else of the first counted minute that holds any
//     (its bucket): a range of the reuse index either way.
//
// A read of a pool's rows gives the planner either their state, for
// (pool_id, state), or their time, for the reuse index, never both: the
// other condition is a filter it cannot take for an index's (the state as
// "(state = 'cooling') IS TRUE", the time outside an OFFSET 0 fence). With
// statistics from before a burst of releases (migration 29), both indexes
// look empty of cooling rows, and a read that gave both walked every cooling
// row of the pool through (pool_id, state) for those of two minutes
// (TestPoolUsageAfterAMassRelease).
const usagePoolsSQL = `SELECT p.cluster_id, p.id, p.name, p.category, p.family, p.kind, p.size::bigint,
		(` + activeCount + `)::bigint,
		(SELECT count(*) FROM ipam_allocations a WHERE a.pool_id = p.id AND a.state = 'reserved' AND ` + rowHeld + `),
		(` + coolingCount + `)::bigint,
		least(coalesce(
			-- the next cooling row among those of the next two minutes
			(SELECT min(a.reusable_at) FROM ipam_allocations a
				WHERE ` + coolingUncounted + `),
			-- else among those of the first counted minute that holds any
			(SELECT min(a.reusable_at) FROM ipam_allocations a
				WHERE a.pool_id = p.id AND ` + coolingByFilter + `
					AND a.reusable_at >= f.bucket AND a.reusable_at < f.bucket + interval '1 minute')),
			-- an expired hold that kept a cooldown, which no bucket counts
			(SELECT min(a.reusable_at) FROM ` + heldCooling + `)),
		(SELECT ipam_now())
	FROM ipam_pools p
	LEFT JOIN LATERAL (SELECT c.bucket FROM ipam_pool_cooling c
		WHERE c.pool_id = p.id AND c.bucket >= ipam_cooling_counted_from()
		GROUP BY c.bucket HAVING sum(c.cooling) > 0 ORDER BY c.bucket LIMIT 1) f ON true
	WHERE ($1 = '' OR p.cluster_id = $1)
	ORDER BY p.cluster_id, p.category, p.name`

// Usage's reads of a pool's cooling rows by their time (the reuse index):
// coolingByFilter names the state as a filter the planner cannot take for
// the (pool_id, state) index's condition; coolingUncounted is pool p's
// cooling rows that no bucket counts yet (the next two minutes).
const (
	coolingByFilter  = `(a.state = 'cooling') IS TRUE`
	coolingUncounted = `a.pool_id = p.id AND a.reusable_at > (SELECT ipam_now()) AND a.reusable_at < ipam_cooling_counted_from()
				AND ` + coolingByFilter
)

// coolingCount is a pool's count of addresses inside their cooldown (pool
// "p"): its counted buckets, and the rows before them.
const coolingCount = `(SELECT coalesce(sum(c.cooling), 0) FROM ipam_pool_cooling c
			WHERE c.pool_id = p.id AND c.bucket >= ipam_cooling_counted_from())
		+ (SELECT count(*) FROM ipam_allocations a
			WHERE ` + coolingUncounted + `)
		-- expired holds that kept a cooldown (the buckets count state 'cooling'
		-- only), among the pool's holds
		+ (SELECT count(*) FROM ` + heldCooling + `)`

// heldCooling is pool p's expired holds that kept a cooldown (rowCooling),
// read among the pool's holds.
const heldCooling = `(SELECT a.* FROM ipam_allocations a WHERE a.pool_id = p.id AND a.state = 'reserved' OFFSET 0) a
			WHERE ` + rowCooling

// usagePlannerSetting, the same setting as TxSettings, keeps the planner
// on those indexes. Each probe is
// planned once for every pool, with a generic row estimate; when one pool
// holds most of the table and autovacuum has not yet marked freshly written
// pages all-visible (just after a bulk load), the planner would rather scan
// the whole table, once per pool. The per-pool index path is never worse.
const usagePlannerSetting = TxSettings

// usageFailuresSQL counts recent failures per pool and reason on the
// (pool_id, at) index.
const usageFailuresSQL = `SELECT f.pool_id, f.reason, count(*) FROM ipam_allocation_failures f
	WHERE f.pool_id = ANY($1) AND f.at > (SELECT ipam_now()) - $2::interval
	GROUP BY f.pool_id, f.reason`

// ListAllocations (ops_list.go) builds its statement: the head, the rows
// it reads (the table, sqlListByInstanceSource, or sqlListFirstRows), the
// join, the filters given joined by sqlAnd, the tail, and a limit
// (sqlLimitParamFormat). Each filter is a format taking its parameter's
// number, and names only the allocation's columns ("a"), so that
// sqlListFirstRows can repeat them without the join.
const (
	sqlListAllocationsHead = `SELECT ` + allocColumns + `, category, last_seen_at, state_held FROM (
			SELECT a.*, p.category, coalesce(` + stateHeldSQL + `, false) AS state_held
			FROM `
	sqlListAllocationsTable = `ipam_allocations a`
	// sqlListFirstRows reads the rows of a listing with a limit (a format
	// taking the filters and the limit's parameter number): the ids of the
	// first ones in the listing's order first, from the allocations alone,
	// then those rows. The order's columns are not an index's (an index on
	// them would be one more entry for every hand-out), so the first page
	// sorts every row the filters keep; sorting only their keys, and not
	// the listing's whole row with its pool's category, reads a cluster of
	// 1,000,000 allocations in a third of the time. The statement's filters
	// check the rows read again.
	sqlListFirstRows = `(SELECT a.* FROM (
				SELECT id FROM ipam_allocations a WHERE %s
				ORDER BY cluster_id, pool_id, ordinal LIMIT $%d) first
				JOIN ipam_allocations a ON a.id = first.id) a`
	// sqlListByInstanceSource reads an instance's live rows (a format taking
	// its parameter's number) from three indexes instead of every row of the
	// cluster: the instance's own active and held rows, its own cooling rows
	// (the two owner indexes, one branch each), and the rows labelled with it
	// that are not its own (ipam_allocations_instance_label, whose predicate
	// the third branch repeats: TestEveryIndexServesARead fails if the two
	// part). A live row has an owner, so each row labelled with the instance
	// is in exactly one branch. Each branch names the clusters, so that a
	// listing of every cluster probes each cluster's entries instead of
	// walking the indexes, whose keys start with the cluster.
	sqlListByInstanceSource = `(` +
		sqlListInstanceOwn + `IN ('active', 'reserved')
				UNION ALL ` +
		sqlListInstanceOwn + `= 'cooling'
				UNION ALL
				SELECT * FROM ipam_allocations WHERE instance_id = $%[1]d
					AND cluster_id IN (SELECT id FROM ipam_clusters)
					AND (owner_kind <> '` + OwnerInstance + `' OR owner_id <> instance_id)
					AND state IN ('active', 'reserved', 'cooling')) a`
	// sqlListInstanceOwn is a branch of sqlListByInstanceSource, the
	// instance's own rows, up to the test of their state.
	sqlListInstanceOwn = `
				SELECT * FROM ipam_allocations WHERE owner_kind = '` + OwnerInstance + `' AND owner_id = $%[1]d
					AND instance_id = $%[1]d AND cluster_id IN (SELECT id FROM ipam_clusters) AND state `
	sqlListAllocationsJoin = ` JOIN ipam_pools p ON p.id = a.pool_id
			WHERE `

	sqlListAllocationsTail = `) x
		ORDER BY cluster_id, pool_id, ordinal`

	// sqlListTombstones lists the live tombstones as scanView reads a row
	// (allocColumns, category, last_seen_at, state_held), cooling; the filters above
	// name columns that ipam_tombstones ("a") has too.
	sqlListTombstones = `SELECT allocation_id, cluster_id, pool_id, address, 0::bigint, 'cooling', generation,
			coalesce(owner_kind, ''), coalesce(owner_id, ''), coalesce(org_id, ''), coalesce(env_id, ''),
			coalesce(node_id, ''), coalesce(instance_id, ''), coalesce(actor, ''), allocated_at, released_at,
			reusable_at, false, '', true, true, '', '', NULL::timestamptz, false
		FROM ipam_tombstones a WHERE a.reusable_at > (SELECT ipam_now())`
	sqlListTombstonesOrder = ` ORDER BY cluster_id, pool_id, address`
	// sqlLookupTombstones: the live tombstones of address $1 (a host
	// prefix), of cluster $2 (empty: any).
	sqlLookupTombstones = sqlListTombstones + ` AND a.address = $1 AND ($2 = '' OR a.cluster_id = $2)` + sqlListTombstonesOrder

	sqlAnd             = " AND "
	sqlListUnmanaged   = "NOT coalesce(" + stateHeldSQL + ", false)"
	sqlListByCluster   = "a.cluster_id = $%d"
	sqlListByPool      = "a.pool_id = $%d"
	sqlListByOwnerKind = "a.owner_kind = $%d"
	sqlListByOwnerID   = "a.owner_id = $%d"
	sqlListByOrg       = "a.org_id = $%d"
	sqlListByEnv       = "a.env_id = $%d"
	sqlListByNode      = "a.node_id = $%d"
	sqlListByInstance  = "a.instance_id = $%d"

	// sqlListByPools keeps the rows of the pools of a category, which
	// ListAllocations reads first (sqlListCategoryPools): given the pools'
	// ids, the planner reads a pool that holds few rows through
	// (pool_id, state), where "the pools of this category" gave it no
	// estimate but the table's average and it read every row.
	sqlListByPools       = "a.pool_id = ANY ($%d::text[])"
	sqlListCategoryPools = `SELECT id FROM ipam_pools WHERE category = $1`
	// A listing by owner kind reads the owner indexes. sqlListOwned states
	// what their predicates ask and every listed row has (an owner), and
	// sqlListOwnedStates names each index's states apart, so that the
	// planner can read both and join what they find (a cooling row may be
	// an expired hold, in owner_active; sqlListAnyState names no index's
	// states). Without a cluster, sqlListEveryCluster gives their first
	// key: each cluster's entries of the kind are probed instead of the
	// whole index walked. The allocations only: a tombstone's cluster may
	// be gone.
	sqlListOwned        = "a.owner_id IS NOT NULL"
	sqlListOwnedStates  = "(a.state IN ('active', 'reserved') OR a.state = 'cooling')"
	sqlListEveryCluster = "a.cluster_id = ANY (ARRAY(SELECT id FROM ipam_clusters))"

	// What each listed state means, the way usage counts it (statePredicates);
	// without a state, every listed one (sqlListAnyState narrows the index
	// scan).
	sqlListActive       = rowActive
	sqlListReserved     = rowHeld
	sqlListCooling      = rowCooling
	sqlListAnyState     = "a.state IN ('active', 'reserved', 'cooling')"
	sqlListLive         = "(" + sqlListActive + " OR " + sqlListReserved + " OR " + sqlListCooling + ")"
	sqlLimitParamFormat = " LIMIT $%d"
)

// Transactions and the connection (store.go).
const (
	// TxSettings are the planner settings every transaction of the core starts
	// with (and the fast statements run under). The allocator's statements probe
	// tiny tables (a pool's stripe rows), where the planner would rather scan a
	// page than use the index, and where a page or two of dead stripe versions
	// then costs more than the probe; with sequential scans off, every hot
	// statement is an index probe whatever the statistics say. Queries with no
	// index to use still scan. They are set per transaction, never per session
	// or as startup parameters, which a connection pooler (PgBouncer) refuses or
	// shares between clients. Bench explains the hot statements under them.
	//
	// JIT compilation is off too: with sequential scans off, a statement with
	// no index to use costs more than jit_above_cost, and the server compiled
	// it at every run (a pool's overlap check, about 65 ms of server CPU at
	// each pool create or update, most of it compiling); no statement of the
	// core runs long enough for compiled code to pay.
	TxSettings = "SET LOCAL enable_seqscan = off; SET LOCAL jit = off"

	// sqlTxBoundsFormat sets a transaction's bounds (milliseconds; 0: none) and
	// its TxSettings.
	sqlTxBoundsFormat = "SET LOCAL lock_timeout = %d; SET LOCAL statement_timeout = %d; %s"
	// sqlTxIsolation reads the caller's transaction's isolation, gives it
	// the client's origin ($1), as BEGIN does for the client's own, and tells
	// whether the caller made it READ ONLY (on a server that writes, with
	// writes on by default: a standby's read-only transactions are the
	// server's, named as such when a write fails).
	sqlTxIsolation = `SELECT current_setting('transaction_isolation'), set_config('ipam.origin', $1, true),
		current_setting('transaction_read_only') = 'on' AND current_setting('default_transaction_read_only') = 'off'
			AND NOT pg_is_in_recovery()`

	// sqlLockHolders names the sessions holding strong locks on the IPAM's
	// tables, for a busy error.
	sqlLockHolders = `SELECT coalesce(string_agg(format('%s %s by pid %s (%s)', l.relation::regclass, l.mode, l.pid,
			coalesce(nullif(a.application_name, ''), 'no application_name')), '; ' ORDER BY l.pid), '')
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.granted AND l.pid <> pg_backend_pid() AND l.locktype = 'relation'
			AND l.mode IN ('ShareLock', 'ShareRowExclusiveLock', 'ExclusiveLock', 'AccessExclusiveLock')
			AND l.relation IN (SELECT oid FROM pg_class WHERE relname LIKE 'ipam\_%')`

	// sqlLockWait reads, of the backend $1, how long it has waited for a
	// lock (-1: it waits for none) and the sessions that hold it up (pid,
	// application, state and how old their transaction is; a role without
	// pg_read_all_stats sees no state of another role's sessions): the
	// sessions at the head of the chain of waits (blocked by none), not
	// those queued ahead of it; the direct blockers when the chain has no
	// head.
	sqlLockWait = `WITH RECURSIVE chain (pid, depth) AS (
			SELECT b, 1 FROM unnest(pg_blocking_pids($1::int)) b
			UNION
			SELECT n, c.depth + 1 FROM chain c CROSS JOIN LATERAL unnest(pg_blocking_pids(c.pid)) n WHERE c.depth < 8
		), head AS (
			SELECT DISTINCT pid FROM chain WHERE cardinality(pg_blocking_pids(pid)) = 0
		), shown AS (
			SELECT pid FROM head UNION SELECT pid FROM chain WHERE depth = 1 AND NOT EXISTS (SELECT 1 FROM head)
		)
		SELECT coalesce(extract(epoch FROM clock_timestamp() - min(l.waitstart)), -1)::float8,
			coalesce((SELECT string_agg(format('pid %s (%s, %s%s)', b.pid, coalesce(nullif(b.application_name, ''), 'no application_name'),
					coalesce(b.state, 'state not shown to this role'),
					coalesce(', in a transaction for ' || extract(epoch FROM clock_timestamp() - b.xact_start)::int || ' s', '')), '; ' ORDER BY b.pid)
				FROM pg_stat_activity b WHERE b.pid IN (SELECT pid FROM shown)), '')
		FROM pg_locks l WHERE l.pid = $1::int AND NOT l.granted`

	sqlCurrentDatabase = `SELECT current_database()`
)

// Migrations (migrate.go): tern's version table, under tern's advisory lock
// taken per transaction.
const (
	sqlMigrationLock = `SELECT pg_advisory_xact_lock($1)`
	// sqlDefinitionChecksums and sqlRecordDefinition read and record the
	// function definitions applied (migration 21).
	sqlDefinitionChecksums = `SELECT name, checksum FROM ipam_schema_definitions`
	sqlRecordDefinition    = `INSERT INTO ipam_schema_definitions (name, checksum) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()`
	sqlTableExists        = `SELECT to_regclass($1) IS NOT NULL`
	sqlCreateVersionTable = `CREATE TABLE ` + VersionTable + `(version int4 NOT NULL); INSERT INTO ` + VersionTable + `(version) VALUES (0)`
	sqlSchemaVersion      = `SELECT version FROM ` + VersionTable
	sqlSetSchemaVersion   = `UPDATE ` + VersionTable + ` SET version = $1`
)

// VersionTable records the applied schema version (tern's format).
const VersionTable = "ipam_schema_version"

// scanned is an Allocation that pgx scans whole from allocColumns (a
// pgx.RowScanner, as pgx's own map scanner is):
// tx.QueryRow(...).Scan((*scanned)(&a)), where no row is pgx.ErrNoRows.
type scanned Allocation

func (a *scanned) ScanRow(rows pgx.Rows) error { return a.scan(rows) }

func (a *scanned) scan(row pgx.Row) error {
	var addr netip.Prefix
	var allocated, released, reusable *time.Time
	// The id as its 16 bytes: a uuid.UUID scans through its database/sql
	// Scanner, from text.
	err := row.Scan((*[16]byte)(&a.ID), &a.ClusterID, &a.PoolID, &addr, &a.Ordinal, &a.State, &a.Generation, &a.Owner.Kind,
		&a.Owner.ID, &a.Owner.OrgID, &a.Owner.EnvID, &a.Owner.NodeID, &a.Owner.InstanceID, &a.Actor,
		&allocated, &released, &reusable, &a.Reusable, &a.Owner.SetID, &a.HoldExpired, &a.Confirmed, &a.Origin)
	a.Address = addr.Addr()
	// A row that is no hold has no hold's time to be over (the column says
	// true for a row without reserved_until).
	a.HoldExpired = a.HoldExpired && a.State == StateReserved
	for _, x := range []struct {
		dst *time.Time
		src *time.Time
	}{{&a.AllocatedAt, allocated}, {&a.ReleasedAt, released}, {&a.ReusableAt, reusable}} {
		if x.src != nil {
			*x.dst = *x.src
		}
	}
	return err
}

// scanAllocation scans a row of allocColumns (extraRow: followed by more),
// where no row is ErrNotFound.
func scanAllocation(row pgx.Row) (Allocation, error) {
	var a Allocation
	err := (*scanned)(&a).scan(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, ErrNotFound
	}
	return a, err
}

// extraRow scans further columns after those its caller asks for, so that
// scanAllocation can read allocColumns followed by more.
type extraRow struct {
	pgx.Row
	extra []any
}

func (r extraRow) Scan(dest ...any) error { return r.Row.Scan(append(dest, r.extra...)...) }

// The usage counters' slots (see countMoved).
var (
	// sqlInsertCounterSlots gives a new pool its counter slots ($2 of them).
	sqlInsertCounterSlots = `INSERT INTO ipam_pool_counters (pool_id, slot) SELECT $1, generate_series(0, $2::int - 1)`

	// sqlClearReuseMark forgets a table pool's reuse mark (reuseMarkCTEs) when
	// its layout changes.
	sqlClearReuseMark = `UPDATE ipam_pool_counters SET reuse_at = NULL, reuse_ordinal = NULL
		WHERE pool_id = $1 AND reuse_at IS NOT NULL`
)

// lostHoldArgs are sqlLostHold's parameters for an owner.
func lostHoldArgs(clusterID string, o Owner) []any {
	return []any{clusterID, o.Kind, o.ID, durationInterval(LostHoldWindow)}
}

// scanLostHold scans sqlLostHold's row: nil when there is none.
func scanLostHold(row pgx.Row) (*LostHold, error) {
	var l LostHold
	var p netip.Prefix
	var run *string
	err := row.Scan(&p, &l.TakenBy, &l.At, &l.PoolID, &l.ownerTaken, &l.holderActor, &l.holderOrigin, &run)
	if run != nil {
		l.reported, l.reportedRun = true, *run
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.Address = p.Addr()
	return &l, nil
}
