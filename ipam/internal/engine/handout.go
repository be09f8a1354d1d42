package engine

import (
	"slices"
	"strings"
)

// Handing out an address: the rules that decide whether an address may be
// handed out (the guards), each defined once here, and the statements that
// hand one out, each built from them.
//
// Every way an allocation is made runs one of these statements or one of
// the full path's pickers (allocate.go), and every one of those carries its
// guards by name: each guard's SQL begins with a comment naming it (guardMarker),
// handOutStatements lists which guards each statement must carry, and
// TestEveryHandOutStatementCarriesItsGuards fails when one is missing, when a
// guard is written out by hand instead of taken from here, or when a guard
// has no mutant (scripts/mutants.sh) that its tests kill. A new rule is one
// guard here, in its group (the owners served, the rows picked, the rows
// written: every statement of that kind then carries it), one scenario in
// the path-conformance harness (paths_test.go) and one mutant.
//
// The one-statement forms are three, one per kind of hand-out, each one
// text written once:
//   - takeFresh: fresh ordinals of a counter pool, for several owners
//     (concurrent callers share it, shareTake: takeFreshSQL) or one
//     (takeFreshOneSQL; in a caller's transaction, with its own pick,
//     takeFreshOneInTxSQL), as allocations or as plan-time holds (@hold);
//   - takeReuse: the longest-cooled reusable rows of a table pool (IPv4),
//     likewise (takeReuseSQL, takeReuseOneSQL);
//   - confirmHoldSQL: the owner's plan-time hold on the planned address made
//     its allocation.
//
// A take of one owner is the take of several with the request's rows given
// as scalars (takeShape): the same guards, pick, writes and event.
// Whenever a statement cannot be sure, it hands over to the full path by
// returning no row for the owner.
//
// What the database itself refuses, whatever statement writes, is not
// restated here: an address outside its pool's live blocks, an excluded
// one, one under another owner's tombstone (the row trigger
// ipam_allocations_in_pool, migrations/functions), an address handed out
// twice (the unique constraints).

// guard is one rule about which address may be handed out: its name (the
// marker its SQL carries), what it decides, and its SQL, written over the
// expressions of the statement it is in (guardAt).
type guard struct {
	name string
	rule string
	sql  func(at guardAt) string
	// clause: the guard is a clause of a statement (a row lock), not a
	// condition
	clause bool
}

// guardAt names what a guard's SQL refers to in the statement that carries
// it: the owner (its cluster, kind and id), the blocks pool to avoid, the
// clock, and the name (table or alias) of the rows it judges. A guard names
// its rows' columns qualified (col), so that a subquery of its own cannot
// capture them.
type guardAt struct {
	cluster, kind, owner string
	// org, env: the owner's tenant labels as asked (guardReusableOrOwn)
	org, env string
	avoid    string
	now      string
	rows     string
	// hold: the take's hold (an interval, > 0 for a plan-time hold)
	hold string
}

// in is the guard's SQL in a statement, after its marker: a condition in
// parentheses, so that it stays one whatever surrounds it.
func (g guard) in(at guardAt) string {
	if g.clause {
		return guardMarker(g.name) + g.sql(at)
	}
	return guardMarker(g.name) + "(" + g.sql(at) + ")"
}

// guardMarker starts a guard's SQL in a statement.
func guardMarker(name string) string { return "/* guard " + name + " */ " }

// col is column c of the rows the guard judges.
func (at guardAt) col(c string) string {
	if at.rows == "" {
		return c
	}
	return at.rows + "." + c
}

var (
	// guardOwnerFree: a one-statement take serves only an owner that holds
	// nothing in the cluster (active, held or cooling); any other owner goes
	// to the full path, which gives it back what it holds, its own cooling
	// address first, or names the conflict. Two probes, one per partial
	// owner index (one IN over three states would match neither), each by
	// the owner's key: OFFSET 0 keeps each a subplan run per owner, where
	// the planner would otherwise turn it into an anti join that walks every
	// owner of the cluster's kind (a plan chosen once per connection, on
	// whatever the table held then).
	guardOwnerFree = guard{"owner_free", "a one-statement take serves only an owner that holds nothing in the cluster; the full path gives an owner its own address back first",
		func(at guardAt) string {
			return `NOT EXISTS (SELECT 1 FROM ipam_allocations
				WHERE cluster_id = ` + at.cluster + ` AND owner_kind = ` + at.kind + ` AND owner_id = ` + at.owner + ` AND state IN ('active', 'reserved')
				OFFSET 0)
			AND NOT EXISTS (SELECT 1 FROM ipam_allocations
				WHERE cluster_id = ` + at.cluster + ` AND owner_kind = ` + at.kind + ` AND owner_id = ` + at.owner + ` AND state = 'cooling'
				OFFSET 0)`
		}, false}

	// guardNoLostHold: a one-statement take of a plan-time hold serves no
	// owner that lost a hold within LostHoldWindow (another owner took it,
	// or another manager of the owner dropped it): Reserve first judges
	// whether the plan must be told (HoldLostError, and no new hold), which
	// the full path then does. An allocation (no hold) is not judged by it.
	// Reserve sends its take with its look for the hold, in one round trip,
	// before it has read the loss: this guard is what keeps that take from
	// running ahead of the loss.
	guardNoLostHold = guard{"no_lost_hold", "a plan-time hold is taken in one statement only for an owner that lost no hold lately (Reserve tells a loss first)",
		func(at guardAt) string {
			return at.hold + ` = interval '0' OR NOT EXISTS (SELECT 1 FROM ipam_events
				WHERE cluster_id = ` + at.cluster + ` AND owner_kind = ` + at.kind + ` AND owner_id = ` + at.owner + `
					AND type = '` + EventHoldLost + `' AND at > (SELECT ipam_now()) - interval '` + lostHoldWindowSQL + `'
				OFFSET 0)`
		}, false}

	// guardNodeBlocksFirst: an instance whose node has instance blocks draws
	// from them, never from the cluster's instance pool (at.avoid names the
	// node's blocks pool; NULL for anyone else).
	guardNodeBlocksFirst = guard{"node_blocks_first", "an instance whose node has blocks draws from them",
		func(at guardAt) string {
			return `NOT EXISTS (SELECT 1 FROM ipam_pools b WHERE b.id = ` + at.avoid + `)`
		}, false}

	// guardCounterShape: fresh ordinals are addresses as they are only in a
	// counter pool of one block, without exclusions, whose gateway lies
	// outside it; any other pool's fresh take is the full path's, which
	// steps over exclusions and the gateway.
	guardCounterShape = guard{"counter_shape", "a fresh ordinal is its address only in a counter pool of one block without exclusions, the gateway outside",
		func(guardAt) string {
			return `kind = 'counter' AND cardinality(cidrs) = 1 AND cardinality(exclude) = 0
				AND (gateway IS NULL OR NOT (gateway <<= cidrs[1]))`
		}, false}

	// guardPoolLock: the allocator's pool lock (lockPoolShared), taken on the
	// pool's row before any row of it: a shrink, an exclusion or a destroy
	// (FOR UPDATE) goes first or waits, and never finds an address handed out
	// from the pool as it was.
	guardPoolLock = guard{"pool_lock", "the pool's row is locked (FOR KEY SHARE) before any of its rows",
		func(guardAt) string { return poolLockSQL }, true}

	// guardStripeRoom: a stripe hands out ordinals only up to its last.
	guardStripeRoom = guard{"stripe_room", "a stripe hands out ordinals only up to its last",
		func(at guardAt) string { return at.col("next_ordinal") + ` <= ` + at.col("last_ordinal") }, false}

	// guardCooled: a pick takes a row whose cooldown has passed (a free row,
	// a released one cooled, an expired hold with no cooldown left).
	guardCooled = guard{"cooled", "a reuse pick takes only a row whose cooldown has passed",
		func(at guardAt) string {
			return at.col("state") + ` IN ('free', 'cooling', 'reserved') AND ` + at.col("reusable_at") + ` <= ` + at.now
		}, false}

	// guardReusableOrOwn: the hand-out itself, re-judged on the row it
	// writes: another owner only once the row is reusable; the same owner
	// takes its own address back, for the same tenant (each of org and env
	// the row names is the asker's): an instance re-created under another
	// org gets another address, as another owner would.
	guardReusableOrOwn = guard{"reusable_or_own", "a row goes to another owner only once it is reusable; its own owner takes it back, for the same org and env",
		func(at guardAt) string {
			return at.col("state") + ` IN ('free', 'cooling', 'reserved')
		AND (` + at.col("reusable_at") + ` <= ` + at.now + ` OR (` + at.col("owner_kind") + ` = ` + at.kind + ` AND ` + at.col("owner_id") + ` = ` + at.owner + `
			AND ` + sameTenantSQL(at.col, at.org, at.env) + `))`
		}, false}

	// guardNoExpiredHold: a one-statement reuse takes no other owner's
	// expired hold: the full path takes it and records the loss, which the
	// hold's configuration is told at its next plan.
	guardNoExpiredHold = guard{"no_expired_hold", "a one-statement reuse takes no expired hold (the full path records its loss)",
		func(at guardAt) string {
			return `NOT EXISTS (SELECT 1 FROM ` + at.rows + ` WHERE cooled_state = 'reserved')`
		}, false}

	// guardOwnHold: a confirm makes the owner's hold its allocation only for
	// the manager that took the hold: its actor and its configuration
	// (ownOriginSQL).
	guardOwnHold = guard{"own_hold", "a hold is confirmed only by the manager (actor and configuration) that took it",
		func(at guardAt) string {
			return at.col("actor") + ` = @actor AND ` + ownOriginSQL(callerOriginSetting)
		}, false}
)

// handOutGuards is the registry: every guard, once.
var handOutGuards = []guard{guardOwnerFree, guardNoLostHold, guardNodeBlocksFirst, guardCounterShape, guardPoolLock,
	guardStripeRoom, guardCooled, guardReusableOrOwn, guardNoExpiredHold, guardOwnHold}

// The guards by what they judge. A statement carries a group whole (allOf),
// so a new rule about owners served, rows picked or rows written joins its
// group here and every statement of that kind carries it.
var (
	// servedGuards: the owners a one-statement take serves (the others go
	// to the full path).
	servedGuards = []guard{guardOwnerFree, guardNoLostHold}
	// pickGuards: the existing rows a pick may take, for any owner.
	pickGuards = []guard{guardCooled}
	// writeGuards: the write that hands an existing row to an owner, judged
	// again on the row whatever picked it.
	writeGuards = []guard{guardReusableOrOwn}
)

// allOf is the guards gs in a statement, each taken from the registry.
func allOf(gs []guard, at guardAt) string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.in(at)
	}
	return strings.Join(parts, "\n\t\t\tAND ")
}

// handOut is a statement that hands out an address (or picks one for the
// full path to hand out), and the guards it must carry.
type handOut struct {
	name   string
	sql    string
	guards []guard
}

// The guards of the fresh and the reuse takes, of one owner or several.
var (
	freshGuards = slices.Concat(servedGuards, []guard{guardNodeBlocksFirst, guardCounterShape, guardPoolLock, guardStripeRoom})
	reuseGuards = slices.Concat(servedGuards, pickGuards, writeGuards, []guard{guardPoolLock, guardNoExpiredHold})
)

// handOutStatements lists every statement that hands out an address or
// picks one, with the guards each carries. The full path's other rules are
// Go: the owner's own address first (ownerRows; its tenant's only, sameTenant, which the write guard reusable_or_own judges again), an exact claim's checks
// (claimExact), the layout's exclusions and gateway (Pool.address).
func handOutStatements() []handOut {
	return []handOut{
		{takeFreshSQL.name, takeFreshSQL.sql, freshGuards},
		{takeFreshOneSQL.name, takeFreshOneSQL.sql, freshGuards},
		{takeFreshOneInTxSQL.name, takeFreshOneInTxSQL.sql, freshGuards},
		{takeReuseSQL.name, takeReuseSQL.sql, reuseGuards},
		{takeReuseOneSQL.name, takeReuseOneSQL.sql, reuseGuards},
		{confirmHoldSQL.name, confirmHoldSQL.sql, []guard{guardPoolLock, guardOwnHold}},
		{"full path: stripe pick", sqlTakeStripe, []guard{guardStripeRoom}},
		{"full path: stripe pick (waiting)", sqlTakeStripeWait, []guard{guardStripeRoom}},
		{"full path: fresh space left (after a waiting pick found none)", sqlFreshLeft, []guard{guardStripeRoom}},
		{"full path: reuse pick", sqlTakeCooled, pickGuards},
		{"full path: reuse pick (waiting)", sqlTakeCooledWait, pickGuards},
		{"full path: hand-out of a picked, claimed or owned row", sqlActivate.sql, writeGuards},
	}
}

// poolLockSQL is the allocator's pool lock, as a row lock of a read of the
// pool's row.
const poolLockSQL = `
		FOR KEY SHARE -- the allocator's pool lock (see lockPoolShared)
`

// The one-statement takes: their owners' fields are arrays, one element per
// owner (@owners ids, @orgs, @envs, @nodes, @instances, @events their event
// ids and, for a fresh take, @avoid the node's blocks pool or NULL and @rows
// the new rows' ids); the rest is the statement's (@cluster, @pool, @kind,
// @actor, @event_type, @hold: an interval, > 0 for plan-time holds, @set_owner:
// the address set, or NULL).
var (
	// takeFreshSQL: the owners' probes, the pool guard with its lock, then
	// the stripe pick for n owners: the n unlocked stripes with the lowest
	// next ordinals (fewer when fewer are free), each advanced by the owners
	// it serves, and a row and an event per owner, in one statement. The
	// k-th owner served (in the order they came) takes the stripe of rank k
	// mod m among the m picked (in next-ordinal order), at its (k div m)-th
	// advance. The numbers and ranks are row_number() over the rows as their
	// scans yield them, and each stripe's share of owners is worked out, not
	// counted: an earlier form counted them with a subquery per owner and
	// per stripe, whose n² little scans cost more than the rest of the
	// statement (server CPU per allocation, 16 clients: 307 µs against 201
	// µs). The pairing decides only which owner gets which of the addresses,
	// not the addresses: n owners take the next ordinal of n stripes, which
	// are the pool's n lowest free ordinals when the stripes' next ordinals
	// are consecutive and nothing else holds a stripe, and only a batch of
	// more owners than stripes free takes a stripe twice. An owner whose
	// stripe has no room for its advance returns no row.
	//
	// The pick takes the stripes in the order the statement's snapshot sees
	// them (cand) and steps over one that another allocator advanced since
	// (the recheck of its lock fails the equality with the snapshot's next
	// ordinal), as the full path's first pick (sqlTakeStripe) does. Inside
	// a caller's transaction (takeFreshOneInTxSQL) it takes the lowest
	// unlocked stripe at its current next ordinal, as the full path's
	// waiting pick does: its locks last until the caller commits, and
	// stepping over such a stripe would hold it too, so that concurrent
	// placements would soon find every stripe locked and wait for each
	// other.
	takeFreshSQL        = takeFresh(false, false)
	takeFreshOneSQL     = takeFresh(true, false)
	takeFreshOneInTxSQL = takeFresh(true, true)

	takeReuseSQL    = takeReuse(false)
	takeReuseOneSQL = takeReuse(true)
)

// takeShape is what differs between a take of one owner and of several:
// the request's rows (one row of scalar parameters, or one row per element
// of the owners' arrays), how the owners served are numbered, and how many
// stripes or rows the pick takes (and, for a fresh take, how its stripes
// advance: see takeFresh). Everything else, the guards first, is one text
// for both: a take of one owner is the take of several written with
// scalars, since as a batch of one (unpacking arrays, numbering and
// ranking) it cost a single allocation about a sixth more server time.
type takeShape struct {
	req, number, limit string
}

func takeShapeOf(one, fresh bool) takeShape {
	if one {
		t := takeShape{number: `0::bigint`, limit: `1`, req: `
		SELECT @owner::text AS req_owner, @org::text AS req_org, @env::text AS req_env, @node::text AS req_node,
			@instance::text AS req_instance, @event::uuid AS req_event`}
		if fresh {
			t.req += `, @avoid::text AS req_avoid, @row::uuid AS req_row`
		}
		return t
	}
	t := takeShape{number: `row_number() OVER () - 1`, limit: `(SELECT n FROM pool)`, req: `
		SELECT * FROM unnest(@owners::text[], @orgs::text[], @envs::text[], @nodes::text[], @instances::text[], @events::uuid[])
			AS r(req_owner, req_org, req_env, req_node, req_instance, req_event)`}
	if fresh {
		t.req = `
		SELECT * FROM unnest(@owners::text[], @orgs::text[], @envs::text[], @nodes::text[], @instances::text[],
				@events::uuid[], @avoid::text[], @rows::uuid[])
			AS r(req_owner, req_org, req_env, req_node, req_instance, req_event, req_avoid, req_row)`
	} else {
		t.limit = `(SELECT count(*) FROM fresh)`
	}
	return t
}

// changedSinceSnapshot is true for a row whose last writer or locker (its
// xmax) the statement's snapshot does not see as done: still running, or
// committed after the snapshot was taken. The pick of a take of several
// owners (a shared statement) tries such stripes last. One still locked
// would be skipped anyway (SKIP LOCKED); one advanced and committed since
// would be locked at its new version and stepped over (its next ordinal is
// no longer the one seen), and before that step PostgreSQL rechecks the row
// (EvalPlanQual), setting up a copy of every part of the statement's plan:
// 6 to 7 % of the server's CPU at 16 clients, where two shared statements
// of a pool run at once and the one that starts second sees the other's
// stripes as they were. A stripe whose xmax is an older locker's, done
// before the snapshot (a step over leaves its lock on the row), is not
// changed. The take of one owner keeps the plain order: setting the test up
// costs a statement about 20 µs, and one runs alone or beside one other.
// The snapshot's xids are 64-bit (xid8) and xmax is 32-bit: xmax takes the
// epoch of the snapshot's xmax (so, just after a wraparound of the 32-bit
// counter, a row last written before it counts as changed; it only orders
// the pick).
const changedSinceSnapshot = `(xmax <> '0'::xid AND NOT pg_visible_in_snapshot(
			((SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint >> 32 << 32) + xmax::text::bigint)::text::xid8,
			(SELECT pg_current_snapshot())))`

// takeFresh builds takeFreshSQL (several owners), takeFreshOneSQL (one) and
// takeFreshOneInTxSQL (one, in a caller's transaction: the other pick).
func takeFresh(one, inTx bool) namedStatement {
	t := takeShapeOf(one, true)
	name := "fast path: fresh allocations of several owners in one statement (a counter pool)"
	changedLast := changedSinceSnapshot + ", "
	if one {
		changedLast = ""
	}
	pick := `, cand AS MATERIALIZED (
		-- the stripes with room as the snapshot sees them (a take of several
		-- owners: those changed since, last)
		SELECT stripe, next_ordinal FROM ipam_pool_stripes
		WHERE pool_id = @pool AND ` + guardStripeRoom.in(guardAt{}) + ` AND EXISTS (SELECT 1 FROM pool)
		ORDER BY ` + changedLast + `next_ordinal
	), pick AS MATERIALIZED (
		SELECT l.* FROM cand c, LATERAL (
			-- in cand's order (a nested loop over it keeps it)
			SELECT stripe, next_ordinal, last_ordinal FROM ipam_pool_stripes st
			WHERE st.pool_id = @pool AND st.stripe = c.stripe AND st.next_ordinal = c.next_ordinal
			FOR UPDATE SKIP LOCKED
		) l
		LIMIT ` + t.limit
	start := ""
	if inTx {
		start = `, (hashtext(@owner::text) & 2147483647) % stripes AS start`
		// In stripe order from the owner's own stripe: concurrent placements
		// of different owners start on different stripes, and the pick is
		// an index scan that stops at the first stripe it can lock, where
		// the lowest next ordinal first sorted every stripe and made every
		// caller try the same locked ones.
		from := func(cmp, unless string) string {
			return `SELECT stripe, next_ordinal, last_ordinal FROM ipam_pool_stripes
		WHERE pool_id = @pool AND stripe ` + cmp + ` (SELECT start FROM pool) AND ` + guardStripeRoom.in(guardAt{}) + unless + `
		ORDER BY stripe LIMIT 1 FOR UPDATE SKIP LOCKED`
		}
		pick = `, pick_up AS MATERIALIZED (
		-- in a caller's transaction: the first unlocked stripe with room
		-- from the owner's (pool.start) up, in stripe order
		` + from(">=", "") + `
	), pick_round AS MATERIALIZED (
		-- else the first below it (pick_up is read first, in pick's order)
		` + from("<", ` AND NOT EXISTS (SELECT 1 FROM pick_up)`) + `
	), pick AS MATERIALIZED (
		SELECT * FROM pick_up UNION ALL SELECT * FROM pick_round`
	}
	// advance: the stripes picked, advanced past the owners each serves,
	// and for each its rank, how many were picked (m), how many owners it
	// serves (k) and the ordinal it had (ord).
	advance := `, ranked AS MATERIALIZED (
		-- each stripe picked, its rank (from 0, in the pick's next-ordinal
		-- order), how many were picked (m) and how many owners it serves
		-- (k): one for each of the n owners whose number is its rank modulo
		-- m, as far as its room goes
		SELECT r.*, least(r.n / r.m + (r.rank < r.n % r.m)::int, (r.last_ordinal - r.next_ordinal) / r.stride + 1) AS k
		FROM (SELECT p.*, row_number() OVER () - 1 AS rank, count(*) OVER () AS m,
				(SELECT n FROM pool) AS n, (SELECT stripes FROM pool) AS stride
			FROM pick p) r
	), s AS (
		-- the stripes picked by their key: one probe each, not a walk over
		-- the pool's stripes (nor their TIDs: when the pick locked a version
		-- newer than the statement's snapshot, only the key finds it), each
		-- advanced past the owners it serves (a hold counts as no active
		-- address). The pick holds each stripe's lock, so the version
		-- written is the one picked; its ordinals are read from the row
		-- written, not compared with the snapshot's version, which in a
		-- caller's transaction may be older than the one the pick locked.
		UPDATE ipam_pool_stripes st SET next_ordinal = st.next_ordinal + r.k * r.stride,
			active = st.active + CASE WHEN @hold::interval > interval '0' THEN 0 ELSE r.k END
		FROM ranked r
		WHERE st.pool_id = @pool AND st.stripe = ANY (ARRAY(SELECT stripe FROM ranked)) AND st.stripe = r.stripe
			AND r.k > 0 AND ` + guardStripeRoom.in(guardAt{rows: "st"}) + `
		RETURNING r.rank, r.m, r.k, st.next_ordinal - r.k * r.stride AS ord`
	if one {
		name = "fast path: a fresh allocation in one statement (a counter pool)"
		if inTx {
			name = "fast path: a fresh allocation in a caller's transaction, in one statement (a counter pool)"
		}
		advance = `, s AS (
		-- the one stripe picked (it has room: the pick's guard), by its key,
		-- advanced one stride for the one owner (see the form of several)
		UPDATE ipam_pool_stripes st SET next_ordinal = st.next_ordinal + pool.stripes,
			active = st.active + CASE WHEN @hold::interval > interval '0' THEN 0 ELSE 1 END
		FROM pool
		WHERE st.pool_id = @pool AND st.stripe = (SELECT stripe FROM pick) AND ` + guardStripeRoom.in(guardAt{rows: "st"}) + `
		RETURNING 0::bigint AS rank, 1::bigint AS m, 1::bigint AS k, st.next_ordinal - pool.stripes AS ord`
	}
	return named(name, `WITH req AS MATERIALIZED (`+t.req+`
	), fresh AS MATERIALIZED (
		-- the owners served, each numbered from 0 (req_k) as the scan of req yields them
		SELECT r.*, `+t.number+` AS req_k FROM req r
		WHERE `+allOf(servedGuards, ownerOfReq)+`
			AND `+guardNodeBlocksFirst.in(ownerOfReq)+`
	), pool AS (
		-- now_at: the statement's one read of the clock
		SELECT cidrs[1] AS block, stripes, ipam_now() AS now_at, (SELECT count(*) FROM fresh) AS n`+start+` FROM ipam_pools
		WHERE id = @pool AND EXISTS (SELECT 1 FROM fresh) AND `+guardCounterShape.in(guardAt{})+`
		`+guardPoolLock.in(guardAt{})+`
	)`+pick+`
	)`+advance+`
	), a AS (
		-- owner number j takes the stripe of rank j mod m, at its (j div
		-- m)-th advance
		INSERT INTO ipam_allocations (`+allocInsertColumns+`)
		SELECT f.req_row, @cluster, @pool, set_masklen(pool.block::inet, 128) + (s.ord + (f.req_k / s.m) * pool.stripes),
			s.ord + (f.req_k / s.m) * pool.stripes, CASE WHEN @hold > interval '0' THEN 'reserved' ELSE 'active' END, `+newGenerationSQL+`,
			@kind, f.req_owner, f.req_org, f.req_env, f.req_node, f.req_instance, @actor, pool.now_at, pool.now_at,
			@set_owner::text,
			CASE WHEN @hold > interval '0' THEN pool.now_at + @hold END,
			CASE WHEN @hold > interval '0' THEN pool.now_at + @hold END
		FROM fresh f JOIN s ON s.rank = f.req_k % s.m AND f.req_k / s.m < s.k, pool
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`, at)
		SELECT r.req_event, @event_type, `+eventOfRow+`, '{}', a.allocated_at FROM a JOIN req r ON r.req_row = a.id
	)
	SELECT `+allocColumnsOfA+`, (SELECT block FROM pool)`+fastNetwork)
}

// takeReuseSQL: each owner's probes, the pool guard with its lock, the
// counter slot and the reuse mark (reuseMarkCTEs), then as many reusable
// rows as owners from the mark on, the k-th owner taking the k-th row,
// one event per row, the count and the mark of the last row in the slot.
// When a row picked is another owner's expired hold nobody is served;
// owners past the rows found take the full path.
func takeReuse(one bool) namedStatement {
	t := takeShapeOf(one, false)
	name := "fast path: reused allocations of several owners in one statement (an IPv4 table pool)"
	if one {
		name = "fast path: a reused allocation in one statement (an IPv4 table pool)"
	}
	return named(name, `WITH req AS MATERIALIZED (`+t.req+`
	), fresh AS MATERIALIZED (
		SELECT r.* FROM req r
		WHERE `+allOf(servedGuards, ownerOfReq)+`
	), pool AS (
		-- now_at: the statement's one read of the clock
		SELECT cidrs, ipam_now() AS now_at FROM ipam_pools
		WHERE id = @pool AND EXISTS (SELECT 1 FROM fresh) AND kind = 'table'
		`+guardPoolLock.in(guardAt{})+`
	)`+reuseMarkCTEs+`
	), picked AS MATERIALIZED (
		-- the reusable rows from the reuse mark on (nothing there: the full
		-- path picks from the queue's front), in queue order
		SELECT ctid AS cooled_ctid, state AS cooled_state, reusable_at AS cooled_at, ordinal AS cooled_ordinal
		FROM ipam_allocations
		WHERE pool_id = @pool AND `+allOf(pickGuards, guardAt{now: "(SELECT now_at FROM pool)", rows: "ipam_allocations"})+`
			AND (reusable_at, ordinal) >= ((SELECT at FROM mark), (SELECT ord FROM mark))
		ORDER BY reusable_at, ordinal LIMIT `+t.limit+` FOR UPDATE SKIP LOCKED
	), pairs AS MATERIALIZED (
		-- the k-th owner (as the scan of fresh yields them) takes the k-th
		-- row (as the pick yields them, in queue order): row_number() over
		-- each scan, no sort and no count per pair
		SELECT c.*, f.* FROM (SELECT p.*, row_number() OVER () AS pick_n FROM picked p) c
			JOIN (SELECT g.*, row_number() OVER () AS fresh_n FROM fresh g) f ON f.fresh_n = c.pick_n
		WHERE `+guardNoExpiredHold.in(guardAt{rows: "picked"})+`
	), a AS (
		UPDATE ipam_allocations t SET `+activateSet(ownerOfPair)+`
		FROM pairs p, pool
		-- each row where its pick locked it (a TID scan: no estimate can
		-- turn a join around into a walk over the reuse queue)
		WHERE t.ctid = p.cooled_ctid AND `+allOf(writeGuards, guardAt{kind: "@kind", owner: "p.req_owner", org: "p.req_org", env: "p.req_env", now: "now_at", rows: "t"})+`
		RETURNING t.*, p.req_event, p.cooled_at, p.cooled_ordinal
	), last AS (
		SELECT m.at, (SELECT max(cooled_ordinal) FROM a WHERE cooled_at = m.at) AS ord
		FROM (SELECT max(cooled_at) AS at FROM a) m
	), counted AS (
		-- the active ones counted (a hold counts nothing), the mark moved
		-- past the last row taken, hold or not
		UPDATE ipam_pool_counters c SET active = c.active + (SELECT count(*) FROM a WHERE a.state = 'active'),
			reuse_at = last.at, reuse_ordinal = last.ord
		FROM last
		WHERE c.pool_id = @pool AND c.slot = coalesce((SELECT slot FROM slot), 0) AND last.at IS NOT NULL
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`, at)
		SELECT a.req_event, @event_type, `+eventOfRow+`, '{}', a.allocated_at FROM a
	)
	SELECT `+allocColumnsOfA+`, (SELECT c FROM pool, unnest(pool.cidrs) c WHERE a.address <<= c LIMIT 1)`+fastNetwork)
}

// heldByKey: the row that a statement finds by its key (its id, or its owner
// and address) is a hold. It says "live and not active", not state =
// 'reserved', which an index on the state can serve: with statistics from
// before the holds (autovacuum analyzes a large table only once a tenth of
// it has changed) the planner takes a pool's held rows for none, and reads
// them all through (pool_id, state) rather than probe the key. The confirm
// of a hold walked every hold of its pool: 378 of them, 1.5 ms, after the
// plan of 500 addresses (1.0 ms since). "Live" is the owner index's state
// condition, which no narrower index shares.
const heldByKey = `state IN ('active', 'reserved') AND state <> 'active'`

var (
	// confirmHoldSQL turns the owner's plan-time hold on exactly the planned
	// address into the allocation, with its event: the usual apply of a
	// planned address, in one statement. It takes the hold's pool lock
	// before it touches the row, as every allocator does: a shrink or
	// destroy holding the pool (FOR UPDATE) goes first, and the statement
	// then finds the pool as it left it (the hold gone, or still inside).
	// Without the lock the row trigger of migration 12 would still refuse an
	// address outside the pool, but only after the row was locked, against
	// the writer's order. @pool is the pool asked for; NULL (an instance):
	// the pool its plan took it from.
	confirmHoldSQL = named("fast path: apply of a planned hold in one statement",
		`WITH held AS MATERIALIZED (
		SELECT pool_id FROM ipam_allocations
		WHERE cluster_id = @cluster AND owner_kind = @kind AND owner_id = @owner AND `+heldByKey+` AND address = @address
	), pool AS MATERIALIZED (
		SELECT id FROM ipam_pools
		WHERE id = (SELECT pool_id FROM held) AND id = coalesce(@pool, id) AND cluster_id = @cluster AND kind <> 'parked'
		`+guardPoolLock.in(guardAt{})+`
	), a AS (
		UPDATE ipam_allocations SET state = 'active', generation = `+newGenerationSQL+`,
			org_id = @org, env_id = @env, node_id = @node, instance_id = @instance, set_owner = @set_owner,
			allocated_at = now_at, last_seen_at = now_at, released_at = NULL, confirmed_at = NULL,
			reusable_at = NULL, reserved_until = NULL, cooling_until = NULL
		`+fromClock+`
		WHERE cluster_id = @cluster AND owner_kind = @kind AND owner_id = @owner AND `+heldByKey+`
			AND address = @address AND `+guardOwnHold.in(guardAt{})+`
			AND pool_id = (SELECT id FROM pool)
		RETURNING ipam_allocations.*
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`, at)
		SELECT @event, @event_type, `+eventOfRow+`, '{}', a.allocated_at FROM a
	)`+movedIn+countMoved+`
	SELECT `+allocColumnsOfA+`, `+blockOfA+`, `+networkColumns+` FROM a`+networkJoin)

	// ownerOfReq: the owner of a take's request row r.
	ownerOfReq = guardAt{cluster: "@cluster", kind: "@kind", owner: "r.req_owner", avoid: "r.req_avoid", hold: "@hold::interval"}

	// ownerOfPair: the owner a reuse take hands its row p to.
	ownerOfPair = rowOwner{kind: "@kind", id: "p.req_owner", org: "p.req_org", env: "p.req_env", node: "p.req_node",
		instance: "p.req_instance", actor: "@actor", hold: "@hold::interval", set: "@set_owner::text"}
)

// reuseMarkCTEs lock the counter slot a table pool's take counts in (slot)
// and read the pool's reuse mark (mark).
//
// The take records in that slot the position (reusable_at, ordinal) of the
// last row it took in the reuse queue; it writes the slot for a hold too
// (which counts nothing), so that a hold moves the mark as well. The reuse
// mark is the further of the positions recorded in the statement's slot and
// in slot 0, which every take tries first (so its mark is the latest); the
// pick starts there. Two rows read by the key, not the pool's 32 slots:
// those are the rows every concurrent take writes, and reading them all cost
// more than the walk it saved.
//
// A take updates its rows out of the queue, and the queue's index keeps the
// dead entries until a vacuum; the takes consume the queue from its front,
// so without the mark every pick stepped over every row taken since the
// last vacuum (343 index pages per pick after 56,337 takes from one pool).
// Everything before the mark was taken by a committed take, or was locked by
// a take in flight when a later one passed it: a row goes back below the
// mark only when such a take rolls back. The fast take hands over once
// nothing past the mark is reusable, and the full path's pick, which
// ignores the mark, finds the row; it is never lost. A released row comes
// back at now + cooldown and an expired hold at its expiry, past every mark
// the clock has seen. A change of the pool's layout sets every row's
// ordinal anew and clears the mark (sqlClearReuseMark), holding the pool
// lock that every take shares.
const reuseMarkCTEs = `, slot AS MATERIALIZED (
		-- the counter slot this take counts in, locked before the pick: its
		-- mark is where the pick starts (every slot held by others: it waits
		-- for slot 0, as countMoved does)
		SELECT slot, reuse_at, reuse_ordinal FROM ipam_pool_counters
		WHERE pool_id = @pool AND EXISTS (SELECT 1 FROM pool)
		ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED
	), marks AS MATERIALIZED (
		SELECT reuse_at AS at, reuse_ordinal AS ord FROM slot
		UNION ALL -- slot 0, which every take tries first: the latest mark
		SELECT reuse_at, reuse_ordinal FROM ipam_pool_counters WHERE pool_id = @pool AND slot = 0
	), mark AS MATERIALIZED (
		-- the further of the two (no mark yet: the queue's front)
		SELECT coalesce(m.at, '-infinity') AS at, coalesce((SELECT max(ord) FROM marks WHERE at = m.at), -1) AS ord
		FROM (SELECT max(at) AS at FROM marks) m`

// rowOwner names, in a statement that hands an existing row to an owner,
// the expressions of the owner's fields, the hold (an interval, > 0: a
// plan-time hold) and the address set.
type rowOwner struct {
	kind, id, org, env, node, instance, actor, hold, set string
}

// activateSet is how an existing row (free, cooling, or a hold) is handed to
// an owner, in the two statements that do it (sqlActivate, takeReuseSQL).
// It reads the clock as now_at, a column of a one-row relation in the
// UPDATE's FROM that reads ipam_now() once (fromClock, or the fast
// statements' pool guard): each call of ipam_now() reads the test clock's
// table, and a statement that called it at every use paid that four to six
// times.
func activateSet(o rowOwner) string {
	held := o.hold + ` > interval '0'`
	return `state = CASE WHEN ` + held + ` THEN 'reserved' ELSE 'active' END,
		generation = ` + newGenerationSQL + `,
		owner_kind = ` + o.kind + `, owner_id = ` + o.id + `, org_id = ` + o.org + `, env_id = ` + o.env + `,
		node_id = ` + o.node + `, instance_id = ` + o.instance + `, actor = ` + o.actor + `,
		allocated_at = now_at, released_at = NULL, last_seen_at = now_at, set_owner = ` + o.set + `, confirmed_at = NULL,
		-- A hold on a cooling address keeps its cooldown (cooling_until):
		-- it is reusable by others only once both the hold and the
		-- cooldown are over. A hand-out ends the cooldown.
		reusable_at = CASE WHEN ` + held + ` THEN greatest(now_at + ` + o.hold + `, cooling_until) END,
		cooling_until = CASE WHEN ` + held + ` THEN cooling_until END,
		reserved_until = CASE WHEN ` + held + ` THEN now_at + ` + o.hold + ` END`
}

// The stripe pick locks the stripe with the lowest next ordinal (skipping
// those other allocators hold, or waiting for them) and advances it by one
// stride ($2), returning the ordinal it had. The pick that skips (the first
// takeFresh tries) is the fast takes' too (takeFresh): it takes the stripes in
// the order its snapshot sees them and steps over one that another
// allocator advanced since (the recheck of the lock fails the equality).
// The pick that waits (when every stripe with room is locked or was stepped
// over) takes the stripe it waited for at its new next ordinal: stepping
// over it would wait again for the next, one holder after another. The picks
// are MATERIALIZED CTEs so they run exactly once: a subquery in UPDATE ...
// FROM may be rescanned by the join and pick a second stripe.
var (
	sqlTakeStripe = `WITH cand AS MATERIALIZED (
		SELECT stripe, next_ordinal FROM ipam_pool_stripes
		WHERE pool_id = $1 AND ` + guardStripeRoom.in(guardAt{}) + `
		ORDER BY next_ordinal
	), pick AS MATERIALIZED (
		SELECT l.stripe FROM cand c, LATERAL (
			SELECT stripe FROM ipam_pool_stripes st
			WHERE st.pool_id = $1 AND st.stripe = c.stripe AND st.next_ordinal = c.next_ordinal
			FOR UPDATE SKIP LOCKED
		) l
		LIMIT 1
	)` + sqlTakeStripeTail
	sqlTakeStripeWait = `WITH pick AS MATERIALIZED (
		SELECT stripe FROM ipam_pool_stripes
		WHERE pool_id = $1 AND ` + guardStripeRoom.in(guardAt{}) + `
		ORDER BY next_ordinal LIMIT 1 FOR UPDATE
	)` + sqlTakeStripeTail
	sqlTakeStripeTail = `
	UPDATE ipam_pool_stripes s SET next_ordinal = s.next_ordinal + $2
	FROM pick
	WHERE s.pool_id = $1 AND s.stripe = pick.stripe AND s.next_ordinal <= s.last_ordinal
	RETURNING s.stripe, s.next_ordinal - $2, s.last_ordinal`
)

// The reuse pick takes the longest-cooled address whose cooldown has passed
// (or, in table pools, the oldest free one), skipping the rows other
// allocators hold, or waiting for them.
var (
	sqlTakeCooled     = sqlTakeCooledWait + ` SKIP LOCKED`
	sqlTakeCooledWait = `SELECT id, generation FROM ipam_allocations
	WHERE pool_id = $1 AND ` + allOf(pickGuards, guardAt{now: "(SELECT ipam_now())", rows: "ipam_allocations"}) + `
	ORDER BY reusable_at, ordinal LIMIT 1 FOR UPDATE`
)

// sqlFreshLeft tells, after a waiting stripe pick found none, whether any stripe has
// space left.
var sqlFreshLeft = `SELECT EXISTS (SELECT 1 FROM ipam_pool_stripes
	WHERE pool_id = $1 AND ` + guardStripeRoom.in(guardAt{}) + `)`

// sqlActivate hands an existing row (@id, of @generation: free, cooling, or a
// hold) to the owner, as an allocation or, with @hold > 0, as a plan-time
// hold: a conditional write on its generation, so a concurrent taker makes
// the attempt retry. It writes the hand-out's event (@event, of
// @event_type, with @data) and, when the row was another owner's expired
// plan-time hold, that owner's hold_lost event (@lost_event): a saved plan
// that showed this address for that owner can no longer be applied.
var sqlActivate = named("reuse take (conditional write)", `WITH prev AS (SELECT state, owner_kind, owner_id, actor FROM ipam_allocations WHERE id = @id),
	a AS (UPDATE ipam_allocations SET `+activateSet(rowOwner{kind: "@kind", id: "@owner", org: "@org", env: "@env",
	node: "@node", instance: "@instance", actor: "@actor", hold: "@hold::interval", set: "@set_owner"})+`
	`+fromClock+`
	WHERE id = @id AND generation = @generation AND `+allOf(writeGuards, guardAt{kind: "@kind", owner: "@owner", org: "@org", env: "@env", now: "now_at", rows: "ipam_allocations"})+`
	RETURNING ipam_allocations.*)`+movedIn+countMoved+`, lost AS (
		INSERT INTO ipam_events (`+eventColumns+`)
		SELECT @lost_event, '`+EventHoldLost+`', a.cluster_id, a.pool_id, a.id, a.generation, a.address, p.owner_kind, p.owner_id,
			NULL, NULL, NULL, NULL, @actor, jsonb_build_object('holder_actor', coalesce(p.actor, ''), 'taken_by', @kind || ' ' || @owner)
		FROM a, prev p
		WHERE p.state = 'reserved' AND (p.owner_kind, p.owner_id) IS DISTINCT FROM (@kind, @owner)
	), e AS (
		INSERT INTO ipam_events (`+eventColumns+`)
		SELECT @event, @event_type, `+eventOfRow+`, @data FROM a
	)
	SELECT `+allocColumns+` FROM a`)
