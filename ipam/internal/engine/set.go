package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// An address set is one owner holding several addresses, each under a key the
// caller chooses. Every member is an ordinary allocation (kind "set", owner id
// "<set owner>#<key>"), so members get the allocator's guarantees one by one,
// and a whole change of a set runs in one transaction: all or nothing.

// SetMemberOwner is the owner of one member of a set.
func SetMemberOwner(labels Owner, setID, key string) Owner {
	o := labels
	o.Kind, o.ID, o.SetID = OwnerSet, setID+"#"+key, setID
	return o
}

// checkSet checks a set's cluster, its id (Owner.ID) and its labels.
func checkSet(clusterID string, o Owner) error {
	if err := checkIDs("cluster_id", clusterID, "owner_id", o.ID); err != nil {
		return err
	}
	return checkFilterIDs("org_id", o.OrgID, "env_id", o.EnvID, "node_id", o.NodeID, "instance_id", o.InstanceID)
}

// checkSetEntry checks one key's request on its own (the database judges
// whether its pools exist and hold its address).
func checkSetEntry(e SetEntry) error {
	if err := ValidateSetKey(e.Key); err != nil {
		return &InvalidError{Field: "addresses", Msg: err.Error()}
	}
	for _, id := range e.Pools {
		if err := checkPoolID("addresses", id); err != nil {
			return &InvalidError{Field: "addresses", Msg: fmt.Sprintf("key %q: pools: %s", e.Key, err.(*InvalidError).Msg)}
		}
	}
	if e.Family != 0 && e.Family != 4 && e.Family != 6 {
		return invalid("addresses", "key %q: family %d is not 4 or 6", e.Key, e.Family)
	}
	if err := checkOptionalAddr("addresses", e.Address, e.Family); err != nil {
		return &InvalidError{Field: "addresses", Msg: fmt.Sprintf("key %q: address %s", e.Key, err.(*InvalidError).Msg)}
	}
	return nil
}

// SetEntry is the request of one key: exactly one of Pools (tried in order
// when one is full), Family (the cluster's default pool of that family) or
// Address (exactly this one; Pools, when given too, must hold it).
type SetEntry struct {
	Key     string
	Pools   []string
	Family  int
	Address netip.Addr
	// Requested records that Address was asked for by the user (rather than
	// planned from a hold), for the stored request.
	Requested bool
}

// SetMember is one key of a set, its allocation, and what the key asked for.
type SetMember struct {
	Key string
	Allocation
	Family  int
	Request SetRequest
	// Lost (ReserveSetEntry): the key's plan-time hold that another owner
	// took, or that another manager of the key dropped when it took the
	// key (with owner_conflict), as Hold.Lost is; reported once.
	Lost *LostHold
}

// SetRequest is a member's request as stored with it.
type SetRequest struct {
	Pools   []string `json:"pools,omitempty"`
	Family  int      `json:"family,omitempty"`
	Address bool     `json:"address,omitempty"` // the address was asked for exactly
}

// SetChange adds and removes members of one owner's set in a cluster.
type SetChange struct {
	ClusterID string
	// Owner carries the set's id (Owner.ID) and the labels every member gets.
	Owner  Owner
	Add    []SetEntry
	Remove []string
	// Restate gives kept keys a new request that their address still
	// satisfies (a pools list reordered, a pool it is not in dropped, the
	// address now asked for exactly): only the stored request changes, what
	// a read gives back. A key whose address does not satisfy its new
	// request is refused: remove and add it instead.
	Restate []SetEntry
	// Relabel sets the labels of Owner on every member the set keeps, in the
	// same transaction as the other changes.
	Relabel bool
}

// ApplySet releases the removed keys into cooling and allocates the added
// ones, in one transaction: either every change lands or none does, and
// concurrent changes of one set run one after the other. It returns the
// members the set holds afterwards, read in that transaction: the keys it
// changed as its commit left them (a write after the commit, or a lost
// connection after it, does not change or fail the answer).
func (s *Client) ApplySet(ctx context.Context, ch SetChange) ([]SetMember, error) {
	if err := checkSet(ch.ClusterID, ch.Owner); err != nil {
		return nil, err
	}
	setID := ch.Owner.ID
	seen := map[string]bool{}
	for _, e := range slices.Concat(ch.Add, ch.Restate) {
		if err := checkSetEntry(e); err != nil {
			return nil, err
		}
		if seen[e.Key] {
			return nil, invalid("addresses", "key %q appears twice", e.Key)
		}
		seen[e.Key] = true
	}
	for _, key := range ch.Remove {
		// A key no set key could be is refused, not released as nothing.
		if err := ValidateSetKey(key); err != nil {
			return nil, &InvalidError{Field: "addresses", Msg: "removing " + err.Error()}
		}
	}
	var failedPool string
	var members []SetMember
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockSet, ch.ClusterID, setID); err != nil {
			return err
		}
		// The pools each added key may draw from, and the scaling locks of
		// the nodes whose blocks are among them, before any pool's: a key
		// that finds its node full grows it in this transaction.
		adds := make([][]*Pool, len(ch.Add))
		grow := growth{}
		for i, e := range ch.Add {
			var err error
			if adds[i], err = s.entryPools(ctx, tx, ch.ClusterID, e); err != nil {
				return err
			}
			for _, p := range adds[i] {
				if node, ok := p.blocksNode(); ok {
					grow[node] = true
				}
			}
		}
		if err := grow.lockFirst(ctx, tx, ch.ClusterID); err != nil {
			return err
		}
		if ch.Relabel {
			if err := relabelSet(ctx, tx, ch.ClusterID, ch.Owner); err != nil {
				return err
			}
		}
		for _, key := range ch.Remove {
			// The set's configuration manages its members, whoever made
			// them (an imported set): each goes at its current generation.
			o := SetMemberOwner(ch.Owner, setID, key)
			m, err := scanAllocation(tx.QueryRow(ctx, sqlActiveOfOwner, ch.ClusterID, o.Kind, o.ID))
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if err := s.releaseTx(ctx, tx, ch.ClusterID, o, m.Generation); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		for _, e := range ch.Restate {
			if err := s.restateMember(ctx, tx, ch.ClusterID, ch.Owner, e); err != nil {
				return err
			}
		}
		for i, e := range ch.Add {
			req := AllocateRequest{Owner: SetMemberOwner(ch.Owner, setID, e.Key), Address: e.Address}
			a, err := s.allocateFirst(ctx, tx, adds[i], req, 0, grow)
			if err != nil {
				var ex *ExhaustedError
				if errors.As(err, &ex) {
					failedPool = ex.PoolID
				}
				return fmt.Errorf("addresses[%q]: %w", e.Key, err)
			}
			r := SetRequest{Pools: e.Pools, Family: e.Family, Address: e.Requested}
			if _, err := tx.Exec(ctx, sqlSaveSetRequest, a.ID, r); err != nil {
				return err
			}
		}
		var err error
		members, _, err = readSet(ctx, tx, sqlSetMembers, ch.ClusterID, setID)
		return err
	})
	if err != nil {
		if failedPool != "" {
			s.recordFailure(ctx, ch.ClusterID, failedPool, CodeExhausted, ch.Owner, err.Error())
		}
		return nil, err
	}
	return members, nil
}

// restateMember stores a kept key's new request, which its active address
// must satisfy: its pool is one the request lists, or its family is the one
// asked for, and its address is the one asked for, if any.
func (s *Client) restateMember(ctx context.Context, tx pgx.Tx, clusterID string, set Owner, e SetEntry) error {
	o := SetMemberOwner(set, set.ID, e.Key)
	m, err := scanAllocation(tx.QueryRow(ctx, sqlActiveOfOwner, clusterID, o.Kind, o.ID))
	if errors.Is(err, ErrNotFound) {
		return &ConflictError{Msg: fmt.Sprintf("key %q holds no address to keep: it was released since the plan; plan again", e.Key)}
	}
	if err != nil {
		return err
	}
	fits := true
	switch {
	case len(e.Pools) > 0:
		// Its pool still listed (each listed pool must exist in the cluster).
		pools, err := s.entryPools(ctx, tx, clusterID, e)
		if err != nil {
			return err
		}
		fits = slices.ContainsFunc(pools, func(p *Pool) bool { return p.ID == m.PoolID })
	case e.Family != 0:
		fits = familyOf(m.Address) == e.Family
	}
	if !fits || (e.Address.IsValid() && e.Address != m.Address) {
		return invalid("addresses", "key %q: its address %s (pool %s) does not satisfy its new request; "+
			"a key whose address changes is removed and added again", e.Key, m.Address, m.PoolID)
	}
	_, err = tx.Exec(ctx, sqlSaveSetRequest, m.ID, SetRequest{Pools: e.Pools, Family: e.Family, Address: e.Requested})
	return err
}

// allocateFirst allocates from the first pool of the list that has room
// (or, with hold > 0, reserves there), the pool the owner lives or cools
// in first. A node's full blocks grow first, as for an instance on the node
// (allocateGrowing, with grow; a hold never grows a node). An exhausted
// pool passes to the next; when all are exhausted the error lists them all.
func (s *Client) allocateFirst(ctx context.Context, tx pgx.Tx, pools []*Pool, req AllocateRequest, hold time.Duration, grow growth) (Allocation, error) {
	if len(pools) > 1 && !req.Address.IsValid() {
		// A key that lives in one of its pools (held by a plan, or active:
		// the create of a replacement taking it over, a retried create
		// adopting its own work), or cools there, is tried there first: it
		// keeps its address, or takes it back, rather than moving to an
		// earlier pool that has room again. A plan's hold found again at
		// apply is the one the plan showed.
		var own string
		err := tx.QueryRow(ctx, sqlOwnersPool, pools[0].ClusterID, req.Owner.Kind, req.Owner.ID).Scan(&own)
		switch {
		case err == nil:
			if i := slices.IndexFunc(pools, func(p *Pool) bool { return p.ID == own }); i > 0 {
				pools = slices.Concat(pools[i:i+1], pools[:i], pools[i+1:])
			}
		case !errors.Is(err, pgx.ErrNoRows):
			return Allocation{}, err
		}
	}
	var full []string
	var last *ExhaustedError
	for _, p := range pools {
		req.Pool = p.Ref()
		var a Allocation
		var err error
		if hold > 0 {
			a, err = s.reserveTx(ctx, tx, p, req, hold)
		} else {
			var res AllocateResult
			res, err = s.allocateGrowing(ctx, tx, p, req, grow)
			a = res.Allocation
		}
		var ex *ExhaustedError
		if errors.As(err, &ex) && !req.Address.IsValid() {
			full, last = append(full, ex.Error()), ex
			continue
		}
		if err == nil {
			a.Block, _ = p.layout.BlockOf(a.Address)
		}
		return a, err
	}
	if len(full) == 1 {
		return Allocation{}, last
	}
	return Allocation{}, &ExhaustedError{PoolID: strings.Join(poolIDs(pools), ", "), Size: last.Size, Active: last.Active, Held: last.Held,
		Cooling: last.Cooling, NextReusable: last.NextReusable, Tried: full}
}

// AgreesWith is nil when an address from pool p and one from pool q fit
// the same interface, as the pools listed together for one address must:
// one family, one MTU, one gateway. Else it says what differs.
func (p Pool) AgreesWith(q Pool) error {
	switch {
	case p.Family != q.Family:
		return fmt.Errorf("pools %s (IPv%d) and %s (IPv%d) are listed together but are of different families; "+
			"list pools of one family (one key per family)", p.ID, p.Family, q.ID, q.Family)
	case p.MTU != q.MTU || p.Gateway != q.Gateway:
		return fmt.Errorf("pools %s (mtu %s, gateway %s) and %s (mtu %s, gateway %s) are listed together but differ; "+
			"an address from either must fit the same interface, so list pools with the same mtu and gateway",
			p.ID, p.mtuText(), p.gatewayText(), q.ID, q.mtuText(), q.gatewayText())
	}
	return nil
}

func (p Pool) mtuText() string {
	if p.MTU == 0 {
		return "unset"
	}
	return fmt.Sprint(p.MTU)
}

func (p Pool) gatewayText() string {
	if !p.Gateway.IsValid() {
		return "unset"
	}
	return p.Gateway.String()
}

func poolIDs(ps []*Pool) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// entryPools resolves the pools a set entry may draw from, in order.
func (s *Client) entryPools(ctx context.Context, tx pgx.Tx, clusterID string, e SetEntry) ([]*Pool, error) {
	var pools []*Pool
	for _, id := range e.Pools {
		p, err := loadPool(ctx, tx, id)
		if errors.Is(err, ErrNotFound) {
			return nil, &InvalidError{Field: "addresses", Msg: fmt.Sprintf("key %q: pool %q does not exist", e.Key, id), Err: ErrPoolNotFound}
		}
		if err != nil {
			return nil, err
		}
		if p.ClusterID != clusterID {
			return nil, invalid("addresses", "key %q: pool %q is not in cluster %q", e.Key, id, clusterID)
		}
		pools = append(pools, p)
	}
	switch {
	case len(pools) > 0:
	case e.Address.IsValid():
		p, err := poolOfAddress(ctx, tx, clusterID, e.Address)
		if err != nil {
			return nil, &InvalidError{Field: "addresses", Msg: fmt.Sprintf("key %q: %v", e.Key, err), Err: ErrPoolNotFound}
		}
		pools = []*Pool{p}
	case e.Family != 0:
		p, err := defaultPool(ctx, tx, clusterID, e.Family)
		if err != nil {
			return nil, &InvalidError{Field: "addresses", Msg: fmt.Sprintf("key %q: %v", e.Key, err), Err: ErrPoolNotFound}
		}
		pools = []*Pool{p}
	default:
		return nil, invalid("addresses", "key %q asks for nothing: give pools, family or address", e.Key)
	}
	for _, p := range pools[1:] {
		if err := pools[0].AgreesWith(*p); err != nil {
			return nil, invalid("addresses", "key %q: %v", e.Key, err)
		}
	}
	if e.Family != 0 {
		for _, p := range pools {
			if p.Family != e.Family {
				return nil, invalid("addresses", "key %q asks for IPv%d but pool %q is IPv%d", e.Key, e.Family, p.ID, p.Family)
			}
		}
	}
	if e.Address.IsValid() {
		for _, p := range pools {
			if p.checkClaimable(e.Address) == nil {
				return []*Pool{p}, nil
			}
		}
		return nil, invalid("addresses", "key %q: %s is outside every listed pool (%s)", e.Key, e.Address, strings.Join(poolIDs(pools), ", "))
	}
	return pools, nil
}

// poolOfAddress finds the pool of a cluster that holds an address.
func poolOfAddress(ctx context.Context, tx pgx.Tx, clusterID string, a netip.Addr) (*Pool, error) {
	ids, err := clusterPoolIDs(ctx, tx, clusterID)
	if err != nil {
		return nil, err
	}
	for _, id := range ids {
		p, err := loadPool(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		if _, ok := p.layout.Ordinal(a); ok {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s is in no pool of cluster %q", a, clusterID)
}

func clusterPoolIDs(ctx context.Context, q pgx.Tx, clusterID string) ([]string, error) {
	rows, err := q.Query(ctx, sqlClusterPoolIDs, clusterID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// defaultPool is the pool a "family" request draws from: the pool of that
// family marked default; else, for IPv6, the cluster's instance pool; else the
// only pool of that family.
func defaultPool(ctx context.Context, tx pgx.Tx, clusterID string, family int) (*Pool, error) {
	rows, err := tx.Query(ctx, sqlDefaultPools, clusterID, family)
	if err != nil {
		return nil, err
	}
	type cand struct {
		id  string
		def bool
	}
	cands, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cand, error) {
		var c cand
		return c, r.Scan(&c.id, &c.def)
	})
	if err != nil {
		return nil, err
	}
	var pick string
	switch {
	case len(cands) > 0 && cands[0].def:
		pick = cands[0].id
	case family == 6:
		pick = InstancePool(clusterID).ID()
	case len(cands) == 1:
		pick = cands[0].id
	case len(cands) == 0:
		return nil, fmt.Errorf("cluster %q has no IPv%d pool", clusterID, family)
	default:
		return nil, fmt.Errorf("cluster %q has %d IPv%d pools and none is marked default; list pools, or set default = true on one", clusterID, len(cands), family)
	}
	return loadPool(ctx, tx, pick)
}

// GetSet lists the active members of a set, by key. It is what a Terraform
// refresh (or import) reads, so, like GetActive, it records that the members
// were seen (at most once an hour each, and confirming them: see Allocation.
// Confirmed), never failing the read for it.
func (s *Client) GetSet(ctx context.Context, clusterID, setID string) ([]SetMember, error) {
	if err := checkIDs("cluster_id", clusterID, "owner_id", setID); err != nil {
		return nil, err
	}
	return s.getSet(ctx, clusterID, setID, !s.peek)
}

func (s *Client) getSet(ctx context.Context, clusterID, setID string, seen bool) ([]SetMember, error) {
	var members []SetMember
	err := s.refreshRead(seen, sqlSetMembersSeen, sqlSetMembers, func(sql string) (lost bool, err error) {
		members, lost, err = readSet(ctx, s.pool, sql, clusterID, setID)
		return lost, err
	})
	if err != nil {
		return nil, s.mapErr(err)
	}
	return members, nil
}

// rowsQuerier is what a pgx.Tx and the store's pool have in common for a
// read of many rows.
type rowsQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// readSet reads a set's active members with sql (sqlSetMembers or
// sqlSetMembersSeen), by key, and whether a refresh's record found one gone.
func readSet(ctx context.Context, q rowsQuerier, sql, clusterID, setID string) (members []SetMember, lost bool, err error) {
	rows, err := q.Query(ctx, sql, clusterID, setID)
	if err != nil {
		return nil, false, err
	}
	members, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SetMember, error) {
		var m SetMember
		var gone bool
		var block *netip.Prefix
		a, err := scanAllocation(extraRow{r, []any{&m.Family, &m.Request, &gone, &block}})
		m.Allocation = withBlock(a, block)
		_, m.Key, _ = strings.Cut(a.Owner.ID, "#")
		lost = lost || gone
		return m, err
	})
	sort.Slice(members, func(i, j int) bool { return members[i].Key < members[j].Key })
	return members, lost, err
}

// UpdateSetLabels changes the labels of every member of a set in place,
// refusing to change the tenant of an active one (tenantChange).
func (s *Client) UpdateSetLabels(ctx context.Context, clusterID string, labels Owner) error {
	if err := checkSet(clusterID, labels); err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx) error { return relabelSet(ctx, tx, clusterID, labels) })
}

// relabelSet changes the labels of a set's members, refusing a change of
// tenant of an active one (tenantChange).
func relabelSet(ctx context.Context, tx pgx.Tx, clusterID string, labels Owner) error {
	tenant := params{"cluster": clusterID, "set_owner": labels.ID, "org": label(labels.OrgID), "env": label(labels.EnvID)}
	held, err := scanAllocation(tx.QueryRow(ctx, sqlSetTenantChange.sql, tenant))
	switch {
	case err == nil:
		return tenantChange(held, labels)
	case !errors.Is(err, ErrNotFound):
		return err
	}
	_, err = tx.Exec(ctx, sqlRelabelSet.sql, params{
		"cluster": clusterID, "set_owner": labels.ID, "org": label(labels.OrgID), "env": label(labels.EnvID),
		"node": label(labels.NodeID), "instance": label(labels.InstanceID),
	})
	return err
}

// ReleaseSet releases every member of a set into cooling, in one transaction.
func (s *Client) ReleaseSet(ctx context.Context, clusterID, setID string) error {
	if err := checkIDs("cluster_id", clusterID, "owner_id", setID); err != nil {
		return err
	}
	members, err := s.getSet(ctx, clusterID, setID, false)
	if err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx) error {
		for _, m := range members {
			// At the generation just read: the set's configuration manages
			// its members, whoever made them. A member released meanwhile
			// (out of band), or handed out again, is left alone.
			if err := s.releaseTx(ctx, tx, clusterID, m.Owner, m.Generation); err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		return nil
	})
}

// ReleaseSetAt releases, in one transaction, the members of a set that are
// still at the generations given (key -> generation): what the destroy of a
// set carries from its state. A member whose generation moved on is another
// holder's now (the create half of a replacement took it over, or it was
// released and handed out again) and is left alone, as is a member already
// gone.
func (s *Client) ReleaseSetAt(ctx context.Context, clusterID, setID string, generations map[string]int64) error {
	if err := checkIDs("cluster_id", clusterID, "owner_id", setID); err != nil {
		return err
	}
	keys := make([]string, 0, len(generations))
	for key, gen := range generations {
		if err := ValidateSetKey(key); err != nil {
			return &InvalidError{Field: "addresses", Msg: "releasing " + err.Error()}
		}
		if gen <= 0 {
			return invalid("generation", "key %q: must be the member's generation, a positive number", key)
		}
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return s.withTx(ctx, func(tx pgx.Tx) error {
		for _, key := range keys {
			err := s.releaseTx(ctx, tx, clusterID, SetMemberOwner(Owner{}, setID, key), generations[key])
			if err != nil && !errors.Is(err, ErrNotFound) {
				return err
			}
		}
		return nil
	})
}

// MarkSetReplacement is MarkReplacement for the members of a set, each at
// the generation given (key -> generation): the plan of a set that
// replaces another object of the same set marks what that object holds, so
// that the create takes each member over. A member whose generation moved
// on is not marked.
func (s *Client) MarkSetReplacement(ctx context.Context, clusterID, setID string, generations map[string]int64, ttl time.Duration) error {
	for key, gen := range generations {
		if _, err := s.MarkReplacement(ctx, clusterID, SetMemberOwner(Owner{}, setID, key), gen, ttl); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return nil
}

// ReserveSetEntry takes the plan-time hold of one key, trying its pools in
// order. A key whose hold was lost is told as Reserve tells an owner: the
// first plan that finds it holding nothing after another owner took its
// hold's address gets HoldLostError and takes no hold; one refused with
// owner_conflict because another manager took the key once its hold
// expired gets the lost hold in SetMember.Lost, so that the provider plans
// the address its earlier plan showed again, and a saved plan that showed
// it fails at apply rather than at Terraform's re-plan.
func (s *Client) ReserveSetEntry(ctx context.Context, clusterID string, labels Owner, e SetEntry, ttl time.Duration) (SetMember, error) {
	var m SetMember
	if err := checkSet(clusterID, labels); err != nil {
		return m, err
	}
	if err := checkSetEntry(e); err != nil {
		return m, err
	}
	if ttl <= 0 {
		return m, invalid("reservation_ttl", "must be positive")
	}
	owner := SetMemberOwner(labels, labels.ID, e.Key)
	r := request{AllocateRequest: AllocateRequest{Pool: PoolRef{ClusterID: clusterID}, Owner: owner}}
	var lost *LostHold
	looked := s.outer == nil
	if looked {
		lost, _ = scanLostHold(s.pool.QueryRow(ctx, sqlLostHold, lostHoldArgs(clusterID, owner)...))
		lost = s.lostByMe(lost)
	}
	var err error
	for {
		if s.toReport(lost) && !lost.ownerTaken {
			reported, err := s.reportLostHold(ctx, r, lost)
			if err != nil {
				return m, err
			}
			if reported {
				m.Key, m.Lost = e.Key, lost
				return m, &HoldLostError{Owner: owner, Lost: *lost}
			}
		}
		err = s.withTx(ctx, func(tx pgx.Tx) error {
			pools, err := s.entryPools(ctx, tx, clusterID, e)
			if err != nil {
				return err
			}
			m.Allocation, err = s.allocateFirst(ctx, tx, pools, AllocateRequest{Owner: owner, Address: e.Address, lossLooked: looked}, ttl, nil)
			if err == nil {
				m.Key, m.Family = e.Key, familyOf(m.Address)
			}
			return err
		})
		var lf *lossFound
		if !errors.As(err, &lf) {
			break
		}
		// Lost after the first look (reserveTx): told as Reserve tells it.
		lost, looked = lf.l, false
	}
	var oc *OwnerConflictError
	if errors.As(err, &oc) && s.toReport(lost) && lost.ownerTaken {
		if reported, rerr := s.reportLostHold(ctx, r, lost); rerr == nil && reported {
			m.Key, m.Lost = e.Key, lost
		}
	}
	return m, err
}
