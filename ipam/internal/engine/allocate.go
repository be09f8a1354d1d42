package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Allocate hands out an address to an owner, in one transaction that also
// writes the event. It is the one allocation entry point: every resource and
// the public API call it, for every kind of owner, and it resolves the pool
// itself (req.Pool). In order of preference:
//
//  1. the owner's active address, when it already has one (idempotency: the
//     same actor adopts it, another actor gets owner_conflict);
//  2. the exact address asked for, if any (the plan's hold, confirmed in one
//     statement when it is ours);
//  3. the owner's own cooling address (replacement keeps its address);
//  4. a fresh address from the pool's striped counters (in one statement when
//     the owner holds nothing and the pool is one plain block);
//  5. the longest-cooled address whose cooldown has passed.
//
// An allocation from a node's full blocks (an instance on the node, or a
// request naming the node's pool) grows the node, in the same transaction,
// up to its max_blocks. When no address is left it fails with
// ipam_exhausted and records the failure outside the transaction.
func (s *Client) Allocate(ctx context.Context, req AllocateRequest) (AllocateResult, error) {
	var res AllocateResult
	r, err := checkRequest(req)
	if err != nil {
		return res, err
	}
	if res, ok, err := s.fastAllocate(ctx, r); err != nil || ok {
		err = s.givenUp(ctx, err)
		s.recordAllocFailure(ctx, r, nil, err)
		return res, err
	}
	s.paths.full.Add(1)
	var pool *Pool
	grow := growth{}
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if pool, err = s.resolvePool(ctx, tx, r); err != nil {
			return err
		}
		res, err = s.allocateGrowing(ctx, tx, pool, req, grow)
		if err == nil && req.Owner.Kind == OwnerInstance {
			// The instance's network settings (WorkloadSpec), as of its allocation.
			err = tx.QueryRow(ctx, sqlClusterNetwork, pool.ClusterID).Scan(&res.Network.GatewayIPv6, &res.Network.MTU, &res.Network.DNSServers)
		}
		return err
	})
	err = s.givenUp(ctx, err)
	s.recordAllocFailure(ctx, r, pool, err)
	return res, err
}

// recordAllocFailure records an allocation's failure outside its
// transaction (recordFailure) when it is one the record keeps: no address
// left in the pool it drew from (pool), or no usable server, whichever path
// of the allocation met it.
func (s *Client) recordAllocFailure(ctx context.Context, r request, pool *Pool, err error) {
	if err == nil {
		return
	}
	failed := r.Pool.ID()
	if pool != nil {
		failed = pool.ID
	} else if failed == "" {
		failed = r.own.ID()
	}
	var ex *ExhaustedError
	if errors.As(err, &ex) && pool != nil {
		s.recordFailure(ctx, r.Pool.ClusterID, failed, CodeExhausted, r.Owner, err.Error())
	} else if Code(err) == CodeUnavailable {
		s.recordFailure(ctx, r.Pool.ClusterID, failed, CodeUnavailable, r.Owner, err.Error())
	}
}

// resolvePool loads the pool a request draws from, inside its transaction:
// the pool named; for an instance with none named, the pool of its live
// plan-time hold, else its node's blocks, else the instance pool
// (plannedInstancePool); for a node, the node pool. An environment's IPv4
// comes only from an IPv4 pool.
func (s *Client) resolvePool(ctx context.Context, tx pgx.Tx, req request) (*Pool, error) {
	if req.Pool.Name == "" && req.Owner.Kind == OwnerInstance {
		return s.plannedInstancePool(ctx, tx, req.Pool.ClusterID, req.Owner, req.Address)
	}
	ref := req.own
	p, err := loadPool(ctx, tx, ref.ID())
	if errors.Is(err, ErrNotFound) {
		if req.Pool.Name == "" || ref.Name == CategoryNode || ref.Name == CategoryInstance {
			return nil, &InvalidError{Field: "cluster_id", Msg: fmt.Sprintf("cluster %q does not exist; create the cluster first", ref.ClusterID), Err: ErrPoolNotFound}
		}
		return nil, &InvalidError{Field: "pool_id", Msg: fmt.Sprintf("pool %s does not exist; create it (or its cluster) first", ref.ID()), Err: ErrPoolNotFound}
	}
	if err == nil && req.Owner.Kind == OwnerEnvIPv4 && p.Family != 4 {
		// The one place the rule is written: an allocation, a plan-time
		// hold and a claim of an environment's IPv4 all load their pool here.
		return nil, invalid("pool_id", "pool %s is an IPv%d pool; an environment's IPv4 add-on draws from an IPv4 pool", p.ID, p.Family)
	}
	return p, err
}

// growth is the nodes whose full blocks a transaction grows
// (allocateGrowing): for an allocation, the node an earlier try of it found
// full; for a change of a set, every node whose blocks its added keys may
// draw from. It takes their scaling locks before any pool's shared lock.
type growth map[string]bool

// lockFirst takes the scaling locks of the nodes g grows, node after node
// in node order: a transaction that locks several pools takes them all
// before any pool's shared lock, and two such transactions take them in the
// same order. A node whose blocks are gone has none to take
// (allocateGrowing finds it gone).
func (g growth) lockFirst(ctx context.Context, tx pgx.Tx, clusterID string) error {
	for _, node := range slices.Sorted(maps.Keys(g)) {
		if err := lockScaledNode(ctx, tx, clusterID, node, true); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// blocksNode is the node whose instance blocks pool p is.
func (p *Pool) blocksNode() (string, bool) {
	if p.Kind != kindBlocks {
		return "", false
	}
	return p.Ref().BlocksNode()
}

// allocateGrowing is allocateTx, and for an allocation drawing from a node's
// full blocks (an instance on the node, a set key or a caller naming the
// node's pool), the node's growth (by its computed target, up to max_blocks)
// and a second try, all in tx. The node grown is the pool's, whoever asks.
//
// A growth takes the locks a scaling takes, in their order
// (lockNodeForScaling: the cluster's row shared, the node pool's row, the
// node's scaling row), and the pool's is the one every allocation in flight
// there holds shared (lockPoolShared). So an allocation that finds the
// blocks full does not take them while it holds the pool's: it adds the
// node to grow and asks for the transaction again (errRetry), and that one
// takes them first. Allocations that found the node full at once then queue
// on the pool's lock alone; taken the other way round, two of them
// deadlocked (one aborted after PostgreSQL's deadlock_timeout), and twenty
// instances created at once on a full node used up their retries. Taken
// with the scaling row first, a growth deadlocked with a release or a
// scaling of the node's blocks, which take the pool's first.
func (s *Client) allocateGrowing(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, grow growth) (AllocateResult, error) {
	var ex *ExhaustedError
	node, blocks := pool.blocksNode()
	if blocks = blocks && !req.Address.IsValid(); !blocks || !grow[node] {
		res, err := s.allocateTx(ctx, tx, pool, req)
		if blocks && errors.As(err, &ex) {
			grow[node] = true
			return res, errRetry
		}
		return res, err
	}
	// The node was full. Take its scaling locks (a scaling in flight may be
	// adding blocks right now; lockFirst may hold them already), look
	// again, and grow if still full.
	var res AllocateResult
	clusterID := pool.ClusterID
	err := lockScaledNode(ctx, tx, clusterID, node, true)
	if errors.Is(err, ErrNotFound) {
		// The node's blocks were released since the pool was resolved:
		// resolve again, which says what the request draws from now.
		return res, errRetry
	}
	if err != nil {
		return res, err
	}
	for grown := false; ; grown = true {
		if pool, err = loadPool(ctx, tx, pool.ID); err != nil {
			return res, err
		}
		res, err = s.allocateTx(ctx, tx, pool, req)
		if !errors.As(err, &ex) || grown {
			return res, err
		}
		used, uerr := nodeUse(ctx, tx, pool.ID)
		if uerr != nil {
			return res, uerr
		}
		nb, serr := s.scaleTx(ctx, tx, clusterID, node, used+1, len(pool.CIDRs)+1)
		if serr != nil {
			return res, serr
		}
		if len(nb.Added) == 0 {
			return res, &ExhaustedError{PoolID: pool.ID, Size: nb.Capacity, Active: ex.Active, Held: ex.Held, Cooling: ex.Cooling,
				NextReusable: ex.NextReusable, Node: node, MaxBlocks: nb.Scaling.MaxBlocks}
		}
	}
}

// allocateTx is Allocate inside the caller's transaction.
func (s *Client) allocateTx(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest) (AllocateResult, error) {
	var res AllocateResult
	if err := lockPoolShared(ctx, tx, pool); err != nil {
		return res, err
	}
	held, cooling, err := s.ownerRows(ctx, tx, pool.ClusterID, req.Owner)
	if err != nil {
		return res, err
	}
	first := ownerRead{held, cooling}
	held, err = s.settleHold(ctx, tx, pool, req, held)
	if err == nil {
		cooling, err = s.afterDrop(ctx, tx, pool, req, first, held)
	}
	if held != nil && err != nil {
		if err = s.moveReplaced(ctx, tx, pool, req, *held, err); err == nil {
			held = nil
		}
	}
	if err != nil {
		return res, err
	}
	switch {
	case held != nil && held.State == StateReserved:
		// The owner's plan-time hold becomes the allocation.
		res.Allocation, err = s.activate(ctx, tx, held.ID, held.Generation, req.Owner, 0, false)
	case held != nil:
		res.Allocation, err = s.adopt(ctx, tx, *held, req.Owner)
		res.Adopted = true
	default:
		res.Allocation, err = s.take(ctx, tx, pool, req, cooling, 0)
		err = s.ownerWon(ctx, tx, pool, req, first, err)
	}
	if err == nil {
		res.Block, _ = pool.layout.BlockOf(res.Address)
	}
	return res, err
}

// moveReplaced: the create half of a replacement that moves the owner's
// address (another pool, another claimed address, another tenant) finds the
// old object's allocation, which settleHold refused (refusal). If a plan of
// this actor marked it as being replaced, it is released into cooldown for
// the owner in this transaction (the new row's generation, like every
// hand-out's, differs from its: the replaced object's destroy releases
// nothing); otherwise the refusal stands.
//
// A request that keeps the address (its pool, its tenant, no other address
// claimed) moves nothing: its refusal judged the row as the transaction's
// first read saw it, before the plan's mark committed (a refresh had
// confirmed it, or another origin made it). The attempt runs again
// (errRetry), and its read finds the mark, which lets the create take the
// allocation over at its address, as it would have had the mark come
// first. Moving it here released the address into cooldown and handed the
// owner another one (the interleaving explorer's pair "create e0 again" x
// "mark e0 as being replaced").
func (s *Client) moveReplaced(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, held Allocation, refusal error) error {
	var oc *OwnerConflictError
	if held.State != StateActive || held.Actor != s.actor || !errors.As(refusal, &oc) {
		return refusal
	}
	replacing, _, err := s.replacingFor(ctx, tx, held)
	if err != nil {
		return err
	}
	if !replacing {
		return refusal
	}
	if held.PoolID == pool.ID && held.Owner.sameTenant(req.Owner) && (!req.Address.IsValid() || req.Address == held.Address) {
		return errRetry
	}
	err = s.releaseTx(ctx, tx, held.ClusterID, held.Owner, held.Generation)
	if errors.Is(err, ErrNotFound) {
		err = errRetry
	}
	return err
}

// replacingFor tells whether a plan of this client's origin marked held
// (an active allocation) as being replaced, and whether a create of this
// client may take it over (takeOverSQL), as the row is now. When held is no
// longer the allocation the transaction's first read found (released,
// handed out again or adopted since), a refusal judged on that read would
// name what is gone: errRetry, so that the attempt reads the owner again.
func (s *Client) replacingFor(ctx context.Context, tx pgx.Tx, held Allocation) (replacing, takeOver bool, err error) {
	var same bool
	err = tx.QueryRow(ctx, sqlReplacing.sql, params{"id": held.ID, "origin": s.origin, "generation": held.Generation}).
		Scan(&replacing, &takeOver, &same)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && !same):
		return false, false, errRetry
	case err != nil:
		return false, false, err
	}
	return replacing, takeOver, nil
}

// ownerWon reads the owner again after a take (take), which acted on the
// attempt's first read of the owner (ownerRows, cooling its latest cooling
// allocation then), and asks for a new attempt (errRetry) when a
// concurrent request of the same owner committed since and changes the
// answer:
//   - a hand-out that failed for want of room (ipam_exhausted), or on the
//     address it claimed (address_in_use, address_cooling), when the owner
//     holds an allocation now: that request won the race for the last free
//     address (or for the address both claimed, or got one elsewhere). The
//     attempt finds the owner's allocation and adopts it, or refuses it by
//     the rule of every allocation (owner_conflict), so concurrent requests
//     of one owner agree, and no failure is recorded for the loser. A claim
//     refused for another holder of its address named that holder, though
//     the owner's own allocation was the answer;
//   - a take without a claim, done or refused for want of room, when the
//     owner has released an address of the pool since (for the same org and
//     env): its latest cooling address is its own, and is the one it gets
//     back. The attempt gave it an older one, or any reusable one, or
//     answered ipam_exhausted while that address cooled for it.
//
// Both were the linearizability test's owner race. Read after the take's
// write, the owner cannot change before the commit: its live row is this
// transaction's (the owner's unique index), and only a live row is
// released. A claim, or a take that another error ended, is not read
// again. The row the attempt itself released or dropped (first.held: a
// replacement's move, an expired hold of another manager) is not a
// release since: the next attempt would release it again.
func (s *Client) ownerWon(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, first ownerRead, err error) error {
	var ex *ExhaustedError
	var iu *AddressInUseError
	var ac *AddressCoolingError
	refused := errors.As(err, &ex) || errors.As(err, &iu) || errors.As(err, &ac)
	if !refused && (err != nil || req.Address.IsValid()) {
		return err
	}
	held, now, herr := s.ownerRows(ctx, tx, pool.ClusterID, req.Owner)
	switch {
	case herr != nil && refused:
		return err
	case herr != nil:
		return herr
	case refused && held != nil:
		return errRetry
	case (err == nil || ex != nil) && !req.Address.IsValid() && first.releasedSince(now, pool):
		return errRetry
	}
	return err
}

// ownerRead is what an attempt's first read of the owner found (ownerRows):
// its active or held row, and its latest cooling one (for its tenant).
type ownerRead struct{ held, cooling *Allocation }

// releasedSince tells whether now, the owner's latest cooling row as a later
// read finds it, is a release in pool that committed after the first read:
// newer than the cooling row that read found, and not the row the attempt
// itself released or dropped (first.held).
func (first ownerRead) releasedSince(now *Allocation, pool *Pool) bool {
	return now != nil && now.PoolID == pool.ID &&
		(first.cooling == nil || now.ReleasedAt.After(first.cooling.ReleasedAt)) &&
		(first.held == nil || now.ID != first.held.ID)
}

// take hands out an address that no one holds: the exact one asked for, the
// owner's own cooling one (for the same org and env: guardReusableOrOwn), a
// fresh one, or the longest-cooled reusable one.
// With hold > 0 the row becomes a plan-time hold instead of an allocation.
func (s *Client) take(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, ownCooling *Allocation, hold time.Duration) (Allocation, error) {
	switch {
	case req.Address.IsValid():
		return s.claimExact(ctx, tx, pool, req, hold)
	case ownCooling != nil && ownCooling.PoolID == pool.ID && ownCooling.Owner.sameTenant(req.Owner):
		return s.activate(ctx, tx, ownCooling.ID, ownCooling.Generation, req.Owner, hold, false)
	}
	a, err := s.takeFresh(ctx, tx, pool, req.Owner, hold)
	if errors.Is(err, errNoFresh) {
		a, err = s.takeCooled(ctx, tx, pool, req.Owner, hold)
	}
	return a, err
}

// adopt hands the owner's active allocation to a create that finds it (a
// retried or crashed apply, or a create_before_destroy replacement): it bumps
// the generation, so a release carrying the older generation (the replaced
// resource's destroy) is a no-op, and brings the labels up to date.
func (s *Client) adopt(ctx context.Context, tx pgx.Tx, held Allocation, o Owner) (Allocation, error) {
	var a Allocation
	err := tx.QueryRow(ctx, sqlAdopt.sql, params{
		"id": held.ID, "generation": held.Generation, "org": label(o.OrgID), "env": label(o.EnvID),
		"node": label(o.NodeID), "instance": label(o.InstanceID), "set_owner": label(o.SetID), "event": newID(),
	}).Scan((*scanned)(&a))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, errRetry
	}
	return a, err
}

func (s *Client) checkAdoptable(pool *Pool, req AllocateRequest, held Allocation) error {
	conflict := ownerConflict(held)
	switch {
	case held.Actor != s.actor:
		conflict.Detail = fmt.Sprintf("import it into the configuration that should manage it, or release it with ipamctl before allocating it as actor %q",
			s.actor)
		return conflict
	case held.State == StateActive && !held.Owner.sameTenant(req.Owner):
		// Another tenant's address is not taken over: it cools down first
		// (the replacement that changes org or env moves the owner to another
		// address, moveReplaced). Whoever manages it, importing it would
		// hand one tenant's address to another: no import advice.
		conflict.OtherTenant = true
		conflict.Detail = fmt.Sprintf("it is held for org %q and env %q, not %q and %q: an owner id is one owner in a cluster, "+
			"whatever the tenant, so this is another tenant's %s, or the owner changing tenant, which gets another address once "+
			"this one is released (it then cools down): release it first, or give the owner an id of its own",
			held.Owner.OrgID, held.Owner.EnvID, req.Owner.OrgID, req.Owner.EnvID, held.Owner.Kind)
		return conflict
	case held.State == StateActive && held.Confirmed && s.origin != "" && held.Origin == s.origin:
		// This configuration's own, read by its refresh: a second resource
		// of it declaring the owner, or the create half of a replacement
		// whose plan could not mark it (a taint under create_before_destroy:
		// Terraform plans that create without the tainted object's state).
		conflict.Detail = "this same configuration manages it: if its resource was removed from the state (terraform state rm), " +
			"import it again; if its resource is tainted under create_before_destroy, " +
			"untaint it and replace it with terraform apply -replace=ADDRESS (whose plan marks the allocation, so the new object " +
			"takes it over); if two resources of this configuration declare the owner, remove one"
		return conflict
	case held.State == StateActive && held.Confirmed:
		// Adoption is for a retried or killed apply finding its own work, not
		// for a second configuration declaring the same owner.
		conflict.Detail = fmt.Sprintf("since %s it is managed by a configuration whose refresh has seen it (or that made it over %s ago); an owner holds one address in a cluster, whatever the actor: declare it in one configuration only (import it into this one and remove it from the other, or remove it here)",
			held.AllocatedAt.UTC().Format(time.RFC3339), FormatDuration(AdoptionWindow))
		return conflict
	case held.PoolID != pool.ID:
		conflict.Detail = fmt.Sprintf("it is from pool %q, not %q; release it first", held.PoolID, pool.ID)
		return conflict
	case req.Address.IsValid() && req.Address != held.Address && !s.ownOrigin(held):
		// Another configuration's: releasing it is not this one's to do
		// (a saved plan applied after another configuration took the owner).
		conflict.Detail = fmt.Sprintf("it cannot also claim %s: the configuration in %q manages the owner now (this one runs in %q); "+
			"an owner holds one address in a cluster: declare it in one configuration only", req.Address, held.Origin, s.origin)
		return conflict
	case req.Address.IsValid() && req.Address != held.Address:
		conflict.Detail = fmt.Sprintf("it cannot also claim %s; release it first", req.Address)
		return conflict
	}
	return nil
}

// activate hands an existing row (free, cooling, or a hold) to the owner, as
// an allocation or, with hold > 0, as a plan-time hold: a conditional write on
// its generation, so a concurrent taker makes this attempt retry. Its events
// are written by the same statement (sqlActivate).
func (s *Client) activate(ctx context.Context, tx pgx.Tx, id uuid.UUID, gen int64, o Owner, hold time.Duration, exact bool) (Allocation, error) {
	typ := eventTypes[o.Kind].allocated
	if hold > 0 {
		typ = "allocation.reserved"
	}
	var a Allocation
	err := tx.QueryRow(ctx, sqlActivate.sql, params{
		"id": id, "generation": gen, "kind": o.Kind, "owner": o.ID, "org": label(o.OrgID), "env": label(o.EnvID),
		"node": label(o.NodeID), "instance": label(o.InstanceID), "actor": s.actor,
		"hold": hold, "set_owner": label(o.SetID),
		"lost_event": newID(), "event": newID(), "event_type": typ, "data": jsonData(exactData(exact)),
	}).Scan((*scanned)(&a))
	if errors.Is(err, pgx.ErrNoRows) {
		return a, errRetry
	}
	return a, err
}

// jsonData is an event's data for a jsonb parameter: never NULL.
func jsonData(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// exactData marks the events of exact claims: their ordinals sit outside the
// stripe counters' sequence by design (ipamctl check knows).
func exactData(exact bool) map[string]any {
	if exact {
		return map[string]any{"exact": true}
	}
	return nil
}

// insertFresh inserts a new active row for an address never handed out
// before. It returns pgx.ErrNoRows when the address already has a row (an
// exact claim got there first).
func (s *Client) insertFresh(ctx context.Context, tx pgx.Tx, pool *Pool, addr netip.Addr, ord int64, o Owner, hold time.Duration, exact bool) (Allocation, error) {
	typ := eventTypes[o.Kind].allocated
	if hold > 0 {
		typ = "allocation.reserved"
	}
	var a Allocation
	err := tx.QueryRow(ctx, sqlInsertFresh.sql, params{
		"id": newID(), "cluster": pool.ClusterID, "pool": pool.ID, "address": netip.PrefixFrom(addr, addr.BitLen()),
		"ordinal": ord, "kind": o.Kind, "owner": o.ID, "org": label(o.OrgID), "env": label(o.EnvID),
		"node": label(o.NodeID), "instance": label(o.InstanceID), "actor": s.actor,
		"event": newID(), "event_type": typ, "hold": hold, "set_owner": label(o.SetID),
		"data": jsonData(exactData(exact)),
	}).Scan((*scanned)(&a))
	return a, err
}

var errNoFresh = errors.New("no fresh address left")

// maxEmptyPicks bounds how often one transaction's stripe picks may find
// nothing while a stripe still has room (each time, another allocator took
// the room it saw first).
const maxEmptyPicks = 100

// skipBatch is how many ordinals of a stripe one look-up checks for exact
// claims ahead of the counter (one round trip).
const skipBatch = 256

// takeFresh takes the next ordinal of the unlocked stripe with the lowest one.
// A lone client therefore allocates strictly in order; concurrent clients lock
// different stripes (SKIP LOCKED) instead of queueing behind one counter row,
// and the stripe stays locked until commit, so its ordinal is never handed out
// twice. Excluded ordinals are skipped in Go, in one jump per excluded range.
func (s *Client) takeFresh(ctx context.Context, tx pgx.Tx, pool *Pool, o Owner, hold time.Duration) (Allocation, error) {
	if pool.Kind != kindCounter {
		return Allocation{}, errNoFresh
	}
	stride := int64(pool.Stripes)
	for empty := 0; ; {
		var stripe int
		var next, last int64
		err := tx.QueryRow(ctx, sqlTakeStripe, pool.ID, stride).Scan(&stripe, &next, &last)
		if errors.Is(err, pgx.ErrNoRows) {
			// Every stripe with space left is locked by another allocator, or
			// none has space. Wait for one (no SKIP LOCKED) to tell which.
			stripe, next, last, err = takeStripeWaiting(ctx, tx, pool.ID, stride)
			if errors.Is(err, pgx.ErrNoRows) {
				var left bool
				if err := tx.QueryRow(ctx, sqlFreshLeft, pool.ID).Scan(&left); err != nil {
					return Allocation{}, err
				}
				if !left {
					return Allocation{}, errNoFresh
				}
				if empty++; empty == maxEmptyPicks {
					// Room that no pick can take: the transaction runs
					// again rather than this loop forever.
					return Allocation{}, errRetry
				}
				continue
			}
		}
		if err != nil {
			return Allocation{}, err
		}
		ord := pool.layout.NextAllowed(next, stride)
		if ord != next {
			if _, err := tx.Exec(ctx, sqlSetStripeNext,
				pool.ID, stripe, ord+stride); err != nil {
				return Allocation{}, err
			}
		}
		if ord > last {
			continue
		}
		addr, ok := pool.layout.Addr(ord)
		if !ok {
			continue
		}
		a, err := s.insertFresh(ctx, tx, pool, addr, ord, o, hold, false)
		if !errors.Is(err, pgx.ErrNoRows) {
			return a, err
		}
		// Claimed exactly by someone earlier. Step this stripe over every
		// claimed ordinal ahead of it, up to skipBatch at a time in one look-up,
		// so that claims ahead of the counter cost one round trip per batch,
		// once, and never fail an allocation.
		if err := skipClaimed(ctx, tx, pool, stripe, ord, last, stride); err != nil {
			return Allocation{}, err
		}
	}
}

// skipClaimed moves a locked stripe from ord (found claimed) to its next
// ordinal that has no row, or past the batch when all of it is claimed.
func skipClaimed(ctx context.Context, tx pgx.Tx, pool *Pool, stripe int, ord, last, stride int64) error {
	var ords []int64
	var addrs []netip.Prefix
	for o := pool.layout.NextAllowed(ord+stride, stride); o <= last && len(ords) < skipBatch; o = pool.layout.NextAllowed(o+stride, stride) {
		a, ok := pool.layout.Addr(o)
		if !ok {
			break
		}
		ords = append(ords, o)
		addrs = append(addrs, netip.PrefixFrom(a, a.BitLen()))
	}
	next := last + 1
	if len(ords) > 0 {
		rows, err := tx.Query(ctx, sqlClaimedAddresses,
			pool.ClusterID, addrs)
		if err != nil {
			return err
		}
		taken, err := pgx.CollectRows(rows, pgx.RowTo[netip.Prefix])
		if err != nil {
			return err
		}
		seen := make(map[netip.Prefix]bool, len(taken))
		for _, t := range taken {
			seen[t] = true
		}
		next = ords[len(ords)-1] + stride
		for i, a := range addrs {
			if !seen[a] {
				next = ords[i]
				break
			}
		}
	}
	_, err := tx.Exec(ctx, sqlSetStripeNext, pool.ID, stripe, next)
	return err
}

// takeCooled reuses the longest-cooled address whose cooldown has passed (or,
// in table pools, the oldest free one). SKIP LOCKED lets concurrent allocators
// take different rows; the conditional write in activate confirms the pick.
//
// When it finds nothing unlocked, the pick waits for the rows other
// allocators hold, so that a pick they roll back is not reported as
// exhaustion. In callers' transactions that wait can close a circle: two
// placement transactions that each took a row, each waiting for the
// other's. So the wait runs under a savepoint (pickWaiting), and when
// PostgreSQL breaks such a deadlock the rows count as taken (the
// transaction holding them waits for this one): the pool is exhausted for
// this request, and the other transaction goes on. A node's blocks do not
// wait: they grow instead (allocateGrowing), and the growth's own locks
// would close the circle with a wait here; at max_blocks they are
// exhausted while allocations in flight hold their free rows.
func (s *Client) takeCooled(ctx context.Context, tx pgx.Tx, pool *Pool, o Owner, hold time.Duration) (Allocation, error) {
	var id uuid.UUID
	var gen int64
	err := tx.QueryRow(ctx, sqlTakeCooled, pool.ID).Scan(&id, &gen)
	if errors.Is(err, pgx.ErrNoRows) && pool.Kind != kindBlocks {
		err = pickWaiting(ctx, tx, pool.ID, &id, &gen)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return Allocation{}, s.exhausted(ctx, tx, pool)
	}
	if err != nil {
		return Allocation{}, err
	}
	return s.activate(ctx, tx, id, gen, o, hold, false)
}

// pickWaiting is the reuse pick that waits, under a savepoint: a deadlock
// it meets (lockConflict) is pgx.ErrNoRows (nothing to take).
//
// A pick that found nothing, without a deadlock, is made once more. A
// statement judges a row by its own time (ipam_now(), the statement's), and
// a row it waited for is judged again as its holder left it: released
// meanwhile into no cooldown, the row is reusable from the release's time,
// after the waiting statement's, so the wait passes over it. The pick made
// again comes after that release and takes it. One that met a deadlock is
// not made again: it would wait in the same circle.
func pickWaiting(ctx context.Context, tx pgx.Tx, poolID string, id *uuid.UUID, gen *int64) error {
	deadlocked, err := pickWaitingOnce(ctx, tx, poolID, id, gen)
	if errors.Is(err, pgx.ErrNoRows) && !deadlocked {
		_, err = pickWaitingOnce(ctx, tx, poolID, id, gen)
	}
	return err
}

// pickWaitingOnce is one waiting pick under its savepoint; deadlocked: it
// met a deadlock (err is then pgx.ErrNoRows).
func pickWaitingOnce(ctx context.Context, tx pgx.Tx, poolID string, id *uuid.UUID, gen *int64) (deadlocked bool, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return false, err
	}
	err = sp.QueryRow(ctx, sqlTakeCooledWait, poolID).Scan(id, gen)
	if lockConflict(err) {
		if err := sp.Rollback(ctx); err != nil {
			return false, err
		}
		return true, pgx.ErrNoRows
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return false, err
	}
	if cerr := sp.Commit(ctx); cerr != nil {
		return false, cerr
	}
	return false, err
}

// takeStripeWaiting is the stripe pick that waits for the stripes other
// transactions hold, under a savepoint, as pickWaiting waits for rows: when
// the wait closes a circle (a holder waits for this transaction, as two
// callers' transactions that each hold stripes of a full pool do), the
// stripes count as taken (errNoFresh). Run again, the transaction would
// wait in the same circle: a caller's transaction did, attempt after
// attempt, for the whole of its retries.
func takeStripeWaiting(ctx context.Context, tx pgx.Tx, poolID string, stride int64) (stripe int, next, last int64, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	err = sp.QueryRow(ctx, sqlTakeStripeWait, poolID, stride).Scan(&stripe, &next, &last)
	if lockConflict(err) {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return 0, 0, 0, rerr
		}
		return 0, 0, 0, errNoFresh
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, 0, 0, err
	}
	if cerr := sp.Commit(ctx); cerr != nil {
		return 0, 0, 0, cerr
	}
	return stripe, next, last, err
}

// exhausted builds the ipam_exhausted error with the pool's figures. It runs
// only on the failure path, so its counts cost nothing to successful allocations.
func (s *Client) exhausted(ctx context.Context, tx pgx.Tx, pool *Pool) error {
	e := &ExhaustedError{PoolID: pool.ID, Size: pool.Size}
	var next *time.Time
	err := tx.QueryRow(ctx, sqlExhaustedCounts, pool.ID).Scan(&e.Active, &e.Held, &e.Cooling, &next)
	if err != nil {
		return err
	}
	if next != nil {
		e.NextReusable = *next
	}
	return e
}

// claimExact takes exactly the requested address: free or never used, or
// cooling with its cooldown passed, or an expired hold, or last held (cooling
// or reserved) by this same owner (cooling: for the same org and env).
func (s *Client) claimExact(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, hold time.Duration) (Allocation, error) {
	addr := req.Address
	if err := pool.checkClaimable(addr); err != nil {
		return Allocation{}, err
	}
	ord, _ := pool.layout.Ordinal(addr)
	if pool.Kind == kindCounter {
		// The cluster's instance counter stops below the node blocks carved
		// from the prefix's end; so do exact claims from it.
		var top int64
		if err := tx.QueryRow(ctx, sqlCounterTop, pool.ID).Scan(&top); err != nil {
			return Allocation{}, err
		}
		if ord > top {
			return Allocation{}, invalid("address", "%s lies in the part of pool %q given to per-node instance blocks; claim it on its node instead", addr, pool.ID)
		}
	}
	probe := func() (cur Allocation, err error) {
		err = tx.QueryRow(ctx, sqlClaimProbe, pool.ClusterID, netip.PrefixFrom(addr, addr.BitLen())).Scan((*scanned)(&cur))
		return cur, err
	}
	cur, err := probe()
	if errors.Is(err, pgx.ErrNoRows) {
		a, err := s.insertFresh(ctx, tx, pool, addr, ord, req.Owner, hold, true)
		if errors.Is(err, pgx.ErrNoRows) {
			return a, errRetry
		}
		return a, err
	}
	if err != nil {
		return Allocation{}, err
	}
	if claimRefusedByTime(cur, req.Owner) {
		// The probe may have waited for the row's lock and read the row as
		// its holder left it, released (or its hold dropped) after the
		// probe's own time, which it judges by (ipam_now(), the
		// statement's): a statement of its own, the row now locked by this
		// one, judges it again.
		if cur, err = probe(); err != nil {
			return Allocation{}, err
		}
	}
	byTime := claimRefusedByTime(cur, req.Owner)
	switch {
	case cur.Owner.sameKey(req.Owner) && cur.State == StateReserved:
		// The owner holds nothing by this attempt's first read (ownerRows),
		// so its hold here was taken since, by a concurrent plan, maybe
		// another manager's: the attempt reads again, and the hold is judged
		// by the rule of every hold (settleHold), not taken over here.
		return Allocation{}, errRetry
	case cur.PoolID != pool.ID:
		return Allocation{}, invalid("address", "%s belongs to pool %q, not %q", addr, cur.PoolID, pool.ID)
	case cur.State == StateActive, byTime && cur.State == StateReserved && !cur.HoldExpired:
		return Allocation{}, &AddressInUseError{Address: addr.String(), State: cur.State, OwnerKind: cur.Owner.Kind, OwnerID: cur.Owner.ID, Actor: cur.Actor,
			Until: holdUntil(ctx, tx, cur)}
	case byTime:
		// Cooling, or an expired hold that kept its owner's cooldown.
		return Allocation{}, &AddressCoolingError{Address: addr.String(), OwnerKind: cur.Owner.Kind, OwnerID: cur.Owner.ID, ReusableAt: cur.ReusableAt}
	}
	return s.activate(ctx, tx, cur.ID, cur.Generation, req.Owner, hold, true)
}

// claimRefusedByTime tells whether the row cur refuses an exact claim by o
// until a time passes: cooling, and not o's own for o's tenant (its own
// cooling address goes back to an owner for the same tenant only, as
// guardReusableOrOwn says), or held by another owner.
func claimRefusedByTime(cur Allocation, o Owner) bool {
	switch {
	case cur.Reusable:
		return false
	case cur.State == StateCooling:
		return !cur.Owner.sameKey(o) || !cur.Owner.sameTenant(o)
	case cur.State == StateReserved:
		return !cur.Owner.sameKey(o)
	}
	return false
}

// UpdateLabels changes the lookup labels (org, env, node, instance) of the
// owner's active allocation, leaving its address alone. It refuses to
// change its tenant (an org or env the row names): an address goes to
// another tenant only after its cooldown (tenantChange).
func (s *Client) UpdateLabels(ctx context.Context, clusterID string, o Owner) (Allocation, error) {
	if err := checkIDs("cluster_id", clusterID); err != nil {
		return Allocation{}, err
	}
	if err := ValidateOwner(o); err != nil {
		return Allocation{}, err
	}
	var a Allocation
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		a, err = scanAllocation(tx.QueryRow(ctx, sqlUpdateLabels.sql, params{
			"cluster": clusterID, "kind": o.Kind, "owner": o.ID, "org": label(o.OrgID), "env": label(o.EnvID),
			"node": label(o.NodeID), "instance": label(o.InstanceID),
		}))
		if errors.Is(err, ErrNotFound) {
			// Nothing active, or active for another tenant, which the
			// update leaves alone (sameTenantSQL). An allocation of the
			// same tenant committed since is not a change of tenant.
			if held, herr := scanAllocation(tx.QueryRow(ctx, sqlActiveOfOwner, clusterID, o.Kind, o.ID)); herr == nil && !held.Owner.sameTenant(o) {
				return tenantChange(held, o)
			}
		}
		if err != nil {
			return err
		}
		return s.insertEvent(ctx, tx, Event{Type: relabelEventType(o.Kind), ClusterID: a.ClusterID, PoolID: a.PoolID,
			AllocationID: a.ID, Generation: a.Generation, Address: a.Address, Owner: a.Owner})
	})
	if err != nil {
		return a, err
	}
	return a, s.fillBlock(ctx, &a)
}

// tenantChange refuses to relabel held (active) for another tenant than o:
// an address goes to another tenant only after its cooldown.
func tenantChange(held Allocation, o Owner) error {
	field := "env_id"
	if held.Owner.OrgID != "" && held.Owner.OrgID != o.OrgID {
		field = "org_id"
	}
	return &InvalidError{Field: field, Msg: fmt.Sprintf("%s %q holds %s for org %q and env %q, which cannot change to org %q and env %q "+
		"in place: an address goes to another tenant only after its cooldown, while traffic may still be attributed to the "+
		"last one. Release it and allocate again (the owner gets another address, and this one cools down)",
		held.Owner.Kind, held.Owner.ID, held.Address, held.Owner.OrgID, held.Owner.EnvID, o.OrgID, o.EnvID)}
}

// CheckClaim tells, without writing, whether addr could ever be claimed from
// the pool: inside one of its blocks and not excluded. For plan-time checks;
// whether it is free is only known at apply.
func (s *Client) CheckClaim(ctx context.Context, poolID string, addr netip.Addr) error {
	if err := checkPoolID("pool_id", poolID); err != nil {
		return err
	}
	if err := checkAddr("address", addr, 0); err != nil {
		return err
	}
	p, err := loadPool(ctx, s.pool, poolID)
	if err != nil {
		return s.mapErr(err)
	}
	return p.checkClaimable(addr)
}

func (p *Pool) checkClaimable(addr netip.Addr) error {
	ord, ok := p.layout.Ordinal(addr)
	if !ok {
		return invalid("address", "%s is outside pool %q (%s)", addr, p.ID, prefixSummary(p.CIDRs))
	}
	if p.layout.Excluded(ord) {
		return invalid("address", "%s is never handed out: it is a subnet-router anycast, network, broadcast, gateway or excluded address of pool %q", addr, p.ID)
	}
	return nil
}

// afterDrop is the owner's latest cooling row once settleHold has settled
// its row (held now): read again when settleHold dropped the owner's hold
// (first.held), whose address then cools for the owner, so that the owner
// gets it back first, as its own cooling address (a hold that another
// configuration dropped once its time was over, keeping the owner's
// cooldown, left the owner a new address and its own cooling one unused).
// A hold dropped for another pool is in no pool the take uses; a claim of
// another address takes that one.
func (s *Client) afterDrop(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, first ownerRead, held *Allocation) (*Allocation, error) {
	if held != nil || first.held == nil || first.held.State != StateReserved {
		return first.cooling, nil
	}
	_, cooling, err := s.ownerRows(ctx, tx, pool.ClusterID, req.Owner)
	return cooling, err
}

// settleHold decides what the owner's current row means for this request. An
// active row must be adoptable (same actor, pool and address). A hold of
// another actor that has expired, or a hold of ours for another address than
// the one now asked for, is dropped (nil is returned) so the request proceeds.
func (s *Client) settleHold(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, held *Allocation) (*Allocation, error) {
	if held == nil {
		return nil, nil
	}
	if held.State == StateReserved {
		// A hold is its planning manager's: the actor and, for a
		// configuration, its origin. Another manager's hold is judged by its
		// own expiry, not by the cooldown it may keep: an abandoned plan
		// never blocks an owner for longer than reservation_ttl. Taken over
		// after that, it is recorded as lost to its manager, whose saved plan
		// then fails with owner_conflict (Reserve, ownerTaken).
		foreign := held.Actor != s.actor || !s.ownOrigin(*held)
		moved := !foreign && (held.PoolID != pool.ID || (req.Address.IsValid() && req.Address != held.Address))
		switch {
		case foreign && held.HoldExpired:
			return nil, s.dropHold(ctx, tx, *held, true)
		case moved:
			return nil, s.dropHold(ctx, tx, *held, false)
		case foreign && held.Actor == s.actor:
			conflict := ownerConflict(*held)
			conflict.Held = true
			conflict.Detail = fmt.Sprintf("that plan is the configuration's in %q and holds it until %s, and this one runs in %q; "+
				"apply that plan, or wait for its hold to expire (an operator ends it now with ipamctl expire-hold), "+
				"before declaring the owner here",
				held.Origin, holdUntil(ctx, tx, *held).UTC().Format(time.RFC3339), s.origin)
			return held, conflict
		}
	}
	if err := s.checkAdoptable(pool, req, *held); err != nil {
		return held, err
	}
	return held, s.checkOrigin(ctx, tx, *held)
}

// holdUntil is when a hold's own time ends (reserved_until), for the error
// that names it: its ReusableAt is later when it kept its owner's cooldown.
// Read on the refusal's path only; ReusableAt when it cannot be.
func holdUntil(ctx context.Context, tx pgx.Tx, a Allocation) time.Time {
	var until time.Time
	if a.State != StateReserved || tx.QueryRow(ctx, sqlHoldUntil, a.ID).Scan(&until) != nil {
		return a.ReusableAt
	}
	return until
}

// checkOrigin refuses to adopt an active allocation recorded for another
// origin (another configuration's working directory), unless a plan of this
// one marked it as being replaced: the rule of takeOverSQL, read from the
// row as it is now (the adoption's write checks it again).
func (s *Client) checkOrigin(ctx context.Context, tx pgx.Tx, held Allocation) error {
	if held.State != StateActive {
		return nil
	}
	if _, takeOver, err := s.replacingFor(ctx, tx, held); err != nil || takeOver {
		return err
	}
	conflict := ownerConflict(held)
	conflict.Detail = fmt.Sprintf("it was made at %s by the configuration in %q, and this one runs in %q; import it instead of "+
		"declaring it again. If this is that configuration moved (an apply killed and resumed elsewhere), "+
		"set the provider's origin to %q for one apply",
		held.AllocatedAt.UTC().Format(time.RFC3339), held.Origin, s.origin, held.Origin)
	return conflict
}

// dropHold returns a hold to the pool at once, without cooldown: its address
// was never routed. lost: another manager of the owner drops it, which is
// recorded for the hold's manager (EventHoldLost, ownerTaken).
func (s *Client) dropHold(ctx context.Context, tx pgx.Tx, h Allocation, lost bool) error {
	// A cooldown the hold kept (cooling_until, fixed at the address's last
	// release) stays; the hold's own time does not.
	var n int
	err := tx.QueryRow(ctx, sqlDropHold.sql, params{"id": h.ID, "generation": h.Generation, "actor": s.actor,
		"lost": lost, "lost_event": newID(), "event": newID(),
		"data": map[string]any{"holder_actor": h.Actor, "holder_origin": h.Origin, "owner_taken": true, "taken_by": s.manager()},
	}).Scan(&n)
	if err == nil && n == 0 {
		err = errRetry
	}
	return err
}
