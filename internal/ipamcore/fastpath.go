package ipamcore

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

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
		INSERT INTO ipam_allocations (id, cluster_id, pool_id, address, ordinal, state, generation, owner_kind, owner_id,
			org_id, env_id, node_id, instance_id, actor, allocated_at, last_seen_at, set_owner, reusable_at, reserved_until)
		SELECT $5, $1, $2, set_masklen(pool.block::inet, 128) + s.ord, s.ord,
			CASE WHEN $14::interval > interval '0' THEN 'reserved' ELSE 'active' END, 1, $3, $4,
			$6, $7, $8, $9, $10, ipam_now(), ipam_now(), $11,
			CASE WHEN $14::interval > interval '0' THEN ipam_now() + $14::interval END,
			CASE WHEN $14::interval > interval '0' THEN ipam_now() + $14::interval END
		FROM s, pool
		ON CONFLICT (cluster_id, address) DO NOTHING
		RETURNING *
	), e AS (
		INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, generation, address, owner_kind, owner_id,
			org_id, env_id, node_id, instance_id, actor)
		SELECT $12, $13, cluster_id, pool_id, id, generation, address, owner_kind, owner_id, org_id, env_id,
			node_id, instance_id, actor FROM a
	)
	SELECT ` + allocColumns + `, (SELECT block FROM pool), ` + networkColumns + ` FROM a`

// networkColumns are the cluster's WorkloadSpec network settings, read in
// the fast statements (an instance's allocation returns them).
const networkColumns = `(SELECT gateway_ipv6 FROM ipam_clusters WHERE id = $1), (SELECT mtu FROM ipam_clusters WHERE id = $1),
	(SELECT dns_servers FROM ipam_clusters WHERE id = $1)`

// fastAllocate tries the fast path; false means "use the full path".
func (s *Store) fastAllocate(ctx context.Context, req AllocateRequest) (AllocateResult, bool, error) {
	return s.fastTake(ctx, req, 0, "")
}

// fastTake is the fast path of Allocate (hold = 0) and of Reserve (hold > 0:
// the row becomes a plan-time hold). It hands over when a pool named avoid
// exists (an instance's node blocks: the instance draws from them).
func (s *Store) fastTake(ctx context.Context, req AllocateRequest, hold time.Duration, avoid string) (AllocateResult, bool, error) {
	clusterID, _, ok := strings.Cut(req.PoolID, "/")
	if !ok || s.outer != nil {
		return AllocateResult{}, false, nil
	}
	o := req.Owner
	typ := eventType(o.Kind, true)
	if hold > 0 {
		typ = "allocation.reserved"
	}
	return s.runOne(ctx, fastAllocateSQL, clusterID, req.PoolID, o.Kind, o.ID, newID(), nullable(o.OrgID), nullable(o.EnvID),
		nullable(o.NodeID), nullable(o.InstanceID), s.actor, nullable(o.SetID), newID(), typ, durationInterval(hold), nullable(avoid))
}

// runOne runs one self-committing statement returning an allocation (plus its
// pool's block and its cluster's network settings). Anything but one row
// means "use the full path": an error commits nothing, and no row means there
// was nothing to take here.
//
// The statement goes in one batch after the store's bounds on waits and its
// planner settings (set_config(..., true)): a batch up to its Sync is one implicit
// transaction, so the bounds hold for the statement and end with it, in the
// same round trip. A wait that runs into them is an error of its own (busy,
// timeout), not a reason to wait again on the full path. The first use of a
// statement on a connection prepares it in a round trip of its own, before
// the bounds are set, and preparing takes the tables' locks: a deadline a
// little past the lock bound covers that wait.
func (s *Store) runOne(ctx context.Context, sql string, args ...any) (AllocateResult, bool, error) {
	if s.bounds.lock > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.bounds.lock+2*time.Second)
		defer cancel() // pgx closes a connection its deadline interrupted
	}
	var block *netip.Prefix
	var gw netip.Prefix
	var dns []netip.Prefix
	var res AllocateResult
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('lock_timeout', $1, true), set_config('statement_timeout', $2, true),
			set_config('enable_seqscan', 'off', true)`, // TxSettings
		strconv.FormatInt(s.bounds.lock.Milliseconds(), 10), strconv.FormatInt(s.bounds.statement.Milliseconds(), 10))
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	_, err := br.Exec()
	var a Allocation
	if err == nil {
		a, err = scanAllocation(extraRow{br.QueryRow(), []any{&block, &gw, &res.Network.MTU, &dns}})
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil && ctx.Err() != nil && context.Cause(ctx) == context.DeadlineExceeded {
		if h := s.lockHolders(); h != "" {
			return AllocateResult{}, false, &BusyError{What: "preparing the statement; held: " + h, Timeout: s.bounds.lock}
		}
		return AllocateResult{}, false, &TimeoutError{What: "the one-statement allocation did not answer", Timeout: s.bounds.lock + 2*time.Second}
	}
	if err != nil {
		if me := s.mapErr(err); Code(me) == CodeBusy || Code(me) == CodeTimeout {
			return AllocateResult{}, false, me
		}
	}
	if err != nil || block == nil {
		return AllocateResult{}, false, nil
	}
	a.Block = *block
	res.Allocation = a
	res.Network.GatewayIPv6 = gw.Addr()
	res.Network.DNSServers = prefixAddrs(dns)
	return res, true, nil
}

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
		INSERT INTO ipam_events (id, type, cluster_id, pool_id, allocation_id, generation, address, owner_kind, owner_id,
			org_id, env_id, node_id, instance_id, actor)
		SELECT $12, $13, cluster_id, pool_id, id, generation, address, owner_kind, owner_id, org_id, env_id,
			node_id, instance_id, actor FROM a
	)
	SELECT ` + allocColumns + `, (SELECT p.cidrs[1] FROM ipam_pools p WHERE p.id = a.pool_id), ` + networkColumns + ` FROM a`

// fastConfirm tries to confirm the owner's hold on the planned address in
// one round trip; false means "use the full path". An empty req.PoolID (an instance) confirms the hold in whichever pool its
// plan took it from, as plannedInstancePool does.
func (s *Store) fastConfirm(ctx context.Context, clusterID string, req AllocateRequest) (AllocateResult, bool, error) {
	if s.outer != nil || !req.Address.IsValid() {
		return AllocateResult{}, false, nil
	}
	o := req.Owner
	a, ok, err := s.runOne(ctx, confirmHoldSQL, clusterID, o.Kind, o.ID, netip.PrefixFrom(req.Address, req.Address.BitLen()),
		nullable(o.OrgID), nullable(o.EnvID), nullable(o.NodeID), nullable(o.InstanceID), nullable(o.SetID), s.actor,
		nullable(req.PoolID), newID(), eventType(o.Kind, true))
	if ok && !a.Block.Contains(a.Address) {
		a.Block = netip.Prefix{} // a pool of several blocks: the caller fills it
	}
	return a, ok, err
}

// findHold is the read-only first look of Reserve: the owner's hold (or
// allocation) that already answers the request, with more than half of its
// time left, costs one query and no commit.
func (s *Store) findHold(ctx context.Context, req AllocateRequest, ttl time.Duration) (Allocation, bool) {
	clusterID, _, ok := strings.Cut(req.PoolID, "/")
	if !ok || s.outer != nil {
		return Allocation{}, false
	}
	var fresh bool
	var cidrs []netip.Prefix
	a, err := scanAllocation(extraRow{s.pool.QueryRow(ctx, `SELECT `+allocColumns+`,
			(state = 'active' AND confirmed_at IS NULL AND allocated_at >= ipam_now() - interval '`+adoptionWindowSQL+`')
				OR (state = 'reserved' AND reusable_at > ipam_now() + $5::interval),
			(SELECT p.cidrs FROM ipam_pools p WHERE p.id = a.pool_id)
		FROM ipam_allocations a
		WHERE cluster_id = $1 AND owner_kind = $2 AND owner_id = $3 AND state IN ('active', 'reserved') AND actor = $4`,
		clusterID, req.Owner.Kind, req.Owner.ID, s.actor, durationInterval(ttl/2)), []any{&fresh, &cidrs}})
	if err != nil || !fresh || a.PoolID != req.PoolID || (req.Address.IsValid() && req.Address != a.Address) {
		return Allocation{}, false
	}
	for _, c := range cidrs {
		if c.Contains(a.Address) {
			a.Block = c
		}
	}
	return a, true
}
