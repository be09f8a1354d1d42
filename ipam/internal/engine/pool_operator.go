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

// Operator pool categories.
const (
	CategoryIPv4 = "ipv4"
	CategoryIPv6 = "ipv6"
)

// DefaultPoolCooldown applies to operator pools without an explicit cooldown:
// a Pool whose Cooldown is zero gets it, as a cluster's zero cooldowns get
// theirs, so that a released address never goes to another owner at once
// by omission. NoCooldown asks for none.
const DefaultPoolCooldown = DefaultInstanceCooldown

var reservedPoolNames = []string{CategoryNode, CategoryInstance}

// PreparePool validates an operator pool on its own (no database): name,
// blocks of one family that do not overlap, exclusions inside the pool, a
// usable size. It fills ID, Family, Category, Kind, Stripes and Size.
func PreparePool(p *Pool) error {
	switch p.Cooldown {
	case 0:
		p.Cooldown = DefaultPoolCooldown
	case NoCooldown:
		p.Cooldown = 0
	}
	if err := checkIDs("cluster_id", p.ClusterID); err != nil {
		return err
	}
	if err := checkIDs("name", p.Name); err != nil {
		return err
	}
	if slices.Contains(reservedPoolNames, p.Name) {
		return invalid("name", "%q is the name of a cluster's own pool; pick another", p.Name)
	}
	if len(p.CIDRs) == 0 {
		return invalid("cidrs", "a pool needs at least one block")
	}
	if p.Cooldown < 0 {
		return invalid("cooldown", "must not be negative (NoCooldown asks for none, zero for DefaultPoolCooldown)")
	}
	if p.MTU != 0 && (p.MTU < MinPoolMTU || p.MTU > MaxMTU) {
		return invalid("mtu", "%d is out of range: between %d and %d (or unset)", p.MTU, MinPoolMTU, MaxMTU)
	}
	if err := checkOptionalAddr("gateway", p.Gateway, 0); err != nil {
		return err
	}
	// Every element is judged, but only the first few problems of a list
	// are named (fieldProblems): the error stays small however long it is.
	badBlocks, badExcl := newProblems("cidrs"), newProblems("exclude")
	for i, c := range p.CIDRs {
		if err := checkPrefix("cidrs", c, 0); err != nil {
			badBlocks.addErr(i, "malformed blocks", err)
			continue
		}
		if blockClass(c) == classMixed {
			badBlocks.addf(i, "blocks mixing public and private IPv4 addresses",
				"%s mixes public and private IPv4 addresses; split it so that each block is wholly public or wholly inside %s (a private block may be reused by other clusters, a public one never)",
				c, prefixList(overlapping(privateIPv4, c)))
		}
	}
	for i, e := range p.Exclude {
		if err := checkPrefix("exclude", e, 0); err != nil {
			badExcl.addErr(i, "malformed exclusions", err)
		}
	}
	if err := joinProblems(badBlocks.err(), badExcl.err()); err != nil {
		return err
	}
	l, err := NewLayout(p.CIDRs, p.Exclude, p.Gateway)
	if err != nil {
		return err // one InvalidError per problem shown, naming the element
	}
	if p.Gateway.IsValid() && familyOf(p.Gateway) != l.Family {
		return invalid("gateway", "%s is not of the pool's address family", p.Gateway)
	}
	p.ID = OperatorPool(p.ClusterID, p.Name).ID()
	p.Family = l.Family
	p.layout = l
	p.Size = l.Size()
	p.Stripes = DefaultStripes
	if l.Family == 4 {
		p.Category, p.Kind, p.Stripes = CategoryIPv4, kindTable, 1
		if p.Size > MaxTablePoolSize {
			return invalid("cidrs", "the pool has %d usable IPv4 addresses; at most %d are supported", p.Size, MaxTablePoolSize)
		}
	} else {
		p.Category, p.Kind = CategoryIPv6, kindCounter
	}
	if p.Size == 0 {
		return invalid("cidrs", "the pool has no usable address left after exclusions")
	}
	return nil
}

// isPublic4 reports whether an IPv4 block must be unique across clusters: it
// holds no private, shared, loopback or link-local address.
func isPublic4(p netip.Prefix) bool { return globalBlock(p) }

// overlapping are the prefixes of ps that overlap b.
func overlapping(ps []netip.Prefix, b netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range ps {
		if p.Overlaps(b) {
			out = append(out, p)
		}
	}
	return out
}

// checkPlacement: the pool's blocks overlap neither the cluster's node and
// instance prefixes nor its other pools, and a public IPv4 block overlaps no
// other cluster's pool. Every block at fault is found, the first few named
// (fieldProblems), in O((b + o) log o) for b blocks and o blocks of other
// pools: the other pools' blocks are sorted once, and each block looks up
// the blocks that could hold it and the first one starting inside it.
func checkPlacement(ctx context.Context, q pgx.Tx, p *Pool) error {
	// A missing cluster is one problem (classified ErrNotFound: at plan time
	// it may be created by the same apply); the other pools are checked
	// anyway.
	var missing error
	bad := newProblems("cidrs")
	c, err := scanCluster(q.QueryRow(ctx, sqlLoadCluster, p.ClusterID))
	switch {
	case errors.Is(err, ErrNotFound):
		missing = &InvalidError{Field: "cluster_id", Msg: fmt.Sprintf("cluster %q does not exist", p.ClusterID), Err: ErrNotFound}
	case err != nil:
		return err
	default:
		for i, b := range p.CIDRs {
			if b.Addr().Is6() && !PrefixContains(c.Prefix, b) {
				bad.addf(i, "IPv6 blocks outside the cluster's prefix",
					"%s is outside the prefix %s of cluster %q; an IPv6 pool lies inside its own cluster's prefix", b, c.Prefix, c.ID)
			}
			for _, sys := range []struct {
				what string
				p    netip.Prefix
			}{{"node", c.NodePrefix}, {"instance", c.InstancePrefix}} {
				if b.Overlaps(sys.p) {
					bad.addf(i, "blocks overlapping the cluster's node or instance prefix",
						"%s overlaps the %s prefix %s of cluster %q", b, sys.what, sys.p, c.ID)
				}
			}
		}
	}
	rows, err := q.Query(ctx, sqlPlacementPeers, p.ID, p.ClusterID)
	if err != nil {
		return err
	}
	// The blocks a block of this pool must not overlap: every block of the
	// cluster's other pools, and, for a public IPv4 block, every IPv4 block
	// of another cluster's that is not wholly private.
	var sameCluster, public4 peerBlocks
	err = forEachRow(rows, func(r pgx.CollectableRow) error {
		var id, cluster string
		var cidrs []netip.Prefix
		if err := r.Scan(&id, &cluster, &cidrs); err != nil {
			return err
		}
		for _, ob := range cidrs {
			switch {
			case cluster == p.ClusterID:
				sameCluster.add(ob, id, cluster)
			case ob.Addr().Is4() && blockClass(ob) != classPrivate:
				public4.add(ob, id, cluster)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	sameCluster.sort()
	public4.sort()
	for i, b := range p.CIDRs {
		if ob, ok := sameCluster.overlapping(b); ok {
			bad.addf(i, "blocks overlapping another pool", "%s overlaps %s of pool %q; pools of one cluster must not overlap", b, ob.prefix, ob.pool)
		} else if b.Addr().Is4() && isPublic4(b) {
			if ob, ok := public4.overlapping(b); ok {
				bad.addf(i, "blocks overlapping another pool", "%s overlaps %s of pool %q in cluster %q; public IPv4 blocks belong to one pool only", b, ob.prefix, ob.pool, ob.cluster)
			}
		}
	}
	return joinProblems(missing, bad.err())
}

// forEachRow calls fn on every row, then closes the rows.
func forEachRow(rows pgx.Rows, fn func(pgx.CollectableRow) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// peerBlocks are other pools' blocks, sorted by address, with an index of
// them by prefix: which of them overlaps a block is found in O(log n + the
// block's prefix length), not by comparing the block with each.
type peerBlocks struct {
	list    []peerBlock
	byPfx   map[netip.Prefix]int // the first of list with this prefix
	minBits int
}

type peerBlock struct {
	prefix        netip.Prefix
	pool, cluster string
}

func (pb *peerBlocks) add(p netip.Prefix, pool, cluster string) {
	pb.list = append(pb.list, peerBlock{prefix: p.Masked(), pool: pool, cluster: cluster})
}

func (pb *peerBlocks) sort() {
	sort.SliceStable(pb.list, func(i, j int) bool {
		a, b := pb.list[i].prefix, pb.list[j].prefix
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c < 0
		}
		return a.Bits() < b.Bits()
	})
	pb.byPfx = make(map[netip.Prefix]int, len(pb.list))
	pb.minBits = 128
	for i, x := range pb.list {
		if _, ok := pb.byPfx[x.prefix]; !ok {
			pb.byPfx[x.prefix] = i
		}
		pb.minBits = min(pb.minBits, x.prefix.Bits())
	}
}

// overlapping is a block that overlaps b: one that holds b (b itself or a
// shorter prefix of it), else the first one starting inside b. Prefixes
// either nest or are disjoint, so there is no other way to overlap.
func (pb *peerBlocks) overlapping(b netip.Prefix) (peerBlock, bool) {
	if len(pb.list) == 0 || !b.IsValid() {
		return peerBlock{}, false
	}
	for bits := b.Bits(); bits >= pb.minBits; bits-- {
		if i, ok := pb.byPfx[netip.PrefixFrom(b.Addr(), bits).Masked()]; ok {
			return pb.list[i], true
		}
	}
	k := sort.Search(len(pb.list), func(k int) bool { return pb.list[k].prefix.Addr().Compare(b.Addr()) >= 0 })
	if k < len(pb.list) && b.Contains(pb.list[k].prefix.Addr()) {
		return pb.list[k], true
	}
	return peerBlock{}, false
}

// CheckNew tells without writing, for plan time, whether a cluster or an
// operator pool (kind "cluster" or "pool") named id can be created: the
// create's conflict when it exists already.
func (s *Client) CheckNew(ctx context.Context, kind, id string) error {
	q, ok := map[string]string{"cluster": sqlClusterExists, "pool": sqlPoolExists}[kind]
	if !ok {
		return invalid("kind", "%q is not a kind CheckNew judges: expected cluster or pool", truncate(kind, 40))
	}
	var exists bool
	if err := s.readTx(ctx, false, func(tx pgx.Tx) error { return tx.QueryRow(ctx, q, id).Scan(&exists) }); err != nil {
		return s.mapErr(err)
	}
	if exists {
		return existsConflict(kind, id)
	}
	return nil
}

// CheckPool validates a pool against the database without writing: for plan time.
func (s *Client) CheckPool(ctx context.Context, p Pool) error {
	if err := PreparePool(&p); err != nil {
		return err
	}
	return s.readTx(ctx, false, func(tx pgx.Tx) error { return checkPlacement(ctx, tx, &p) })
}

// CheckPoolUpdate validates a change of an existing operator pool against
// the database without writing, as UpdatePool would judge it (for plan
// time): its placement, its family, an IPv6 pool growing only at its end, and
// no address leaving the pool while it is active, held or cooling.
func (s *Client) CheckPoolUpdate(ctx context.Context, p Pool) error {
	if err := PreparePool(&p); err != nil {
		return err
	}
	return s.readTx(ctx, false, func(tx pgx.Tx) error {
		cur, err := loadPool(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		return checkPoolChange(ctx, tx, cur, &p)
	})
}

// checkPoolChange: what UpdatePool refuses of a change from cur to p before
// it writes (CheckPoolUpdate judges the same at plan time).
func checkPoolChange(ctx context.Context, tx pgx.Tx, cur *Pool, p *Pool) error {
	if cur.Family != p.Family {
		return invalid("cidrs", "the pool is IPv%d; its family cannot change (replace the pool)", cur.Family)
	}
	if cur.Kind == kindCounter && (len(p.CIDRs) < len(cur.CIDRs) || !slices.Equal(p.CIDRs[:len(cur.CIDRs)], cur.CIDRs)) {
		return invalid("cidrs", "an IPv6 pool can only grow by appending blocks after %s; replace the pool to change them", prefixSummary(cur.CIDRs))
	}
	if err := checkPlacement(ctx, tx, p); err != nil {
		return err
	}
	lo, hi := runBounds(p.layout)
	rows, err := tx.Query(ctx, sqlHeldOutside, p.ID, lo, hi)
	if err != nil {
		return err
	}
	lost, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		// Every block kept: the addresses leave through exclude.
		field := "exclude"
		for _, c := range cur.CIDRs {
			if !slices.ContainsFunc(p.CIDRs, func(n netip.Prefix) bool { return PrefixContains(n, c) }) {
				field = "cidrs"
			}
		}
		return invalid(field, "the change would remove addresses that are in use, held by a plan or cooling: %s; release them "+
			"(and let them cool down) first, or wait for a plan's hold to expire", strings.Join(lost, ", "))
	}
	return nil
}

// CreatePool creates an operator pool. IPv4 pools get one free row per usable
// address, inserted set-wise, run by run; IPv6 pools get striped counters.
func (s *Client) CreatePool(ctx context.Context, p Pool) (Pool, error) {
	if err := PreparePool(&p); err != nil {
		return p, err
	}
	var out Pool
	err := s.awaitDefaultMove(ctx, p.Default, func(tx pgx.Tx) error {
		// Pool changes of one cluster are serialized on the cluster row (rare,
		// not a hot path), in a mode that lets allocations insert meanwhile.
		if _, err := tx.Exec(ctx, sqlLockClusterNoKeyUpdate, p.ClusterID); err != nil {
			return err
		}
		if err := checkPlacement(ctx, tx, &p); err != nil {
			return err
		}
		if err := checkDefault(ctx, tx, &p); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, sqlPoolExists, p.ID).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return existsConflict("pool", p.ID)
		}
		if err := insertPool(ctx, tx, p); err != nil {
			return err
		}
		if err := syncTableRows(ctx, tx, &p, 0); err != nil {
			return err
		}
		var err error
		if out, err = loadPoolTx(ctx, tx, p.ID); err != nil {
			return err
		}
		return s.insertEvent(ctx, tx, Event{Type: "pool.created", ClusterID: p.ClusterID, PoolID: p.ID,
			Data: map[string]any{"cidrs": prefixList(p.CIDRs), "exclude": prefixList(p.Exclude), "size": p.Size}})
	})
	return out, err
}

func loadPoolTx(ctx context.Context, q querier, id string) (Pool, error) {
	p, err := loadPool(ctx, q, id)
	if err != nil {
		return Pool{}, err
	}
	return *p, nil
}

// GetPool reads one pool.
func (s *Client) GetPool(ctx context.Context, id string) (Pool, error) {
	if err := checkPoolID("pool_id", id); err != nil {
		return Pool{}, err
	}
	p, err := loadPool(ctx, s.pool, id)
	if err != nil {
		return Pool{}, s.mapErr(err)
	}
	return *p, nil
}

// runBounds gives the first and last address of each run, for SQL range tests.
func runBounds(l *Layout) (lo, hi []netip.Prefix) {
	for _, r := range l.Runs() {
		last, _ := l.Addr(r.Last)
		lo = append(lo, netip.PrefixFrom(r.Start, r.Start.BitLen()))
		hi = append(hi, netip.PrefixFrom(last, last.BitLen()))
	}
	return lo, hi
}

// UpdatePool changes an operator pool in place: blocks and exclusions may be
// added (IPv6 pools only grow at the end), cooldown, MTU and gateway may
// change. Addresses that would leave the pool while active, reserved or
// cooling make the update fail, listing them: shrinking never loses an allocation.
func (s *Client) UpdatePool(ctx context.Context, p Pool) (Pool, error) {
	if err := PreparePool(&p); err != nil {
		return p, err
	}
	var out Pool
	err := s.awaitDefaultMove(ctx, p.Default, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, sqlLockClusterNoKeyUpdate, p.ClusterID); err != nil {
			return err
		}
		// The shape writer's lock: every allocation in flight finishes first,
		// and what follows reads what they committed.
		if _, err := lockPoolsExclusive(ctx, tx, sqlLockPoolsByID, p.ID); err != nil {
			return err
		}
		cur, err := loadPool(ctx, tx, p.ID)
		if err != nil {
			return err
		}
		if err := checkPoolChange(ctx, tx, cur, &p); err != nil {
			return err
		}
		if err := checkDefault(ctx, tx, &p); err != nil {
			return err
		}
		lo, hi := runBounds(p.layout)
		// Rows that leave the pool: free ones, and released ones whose cooldown
		// has passed. A row inside its cooldown is never deleted (refused above).
		if _, err := tx.Exec(ctx, sqlDeleteRowsOutside,
			p.ID, lo, hi); err != nil {
			return err
		}
		mtu, gw := p.nullableSettings()
		if _, err := tx.Exec(ctx, sqlUpdatePool.sql, params{
			"pool": p.ID, "cidrs": p.CIDRs, "exclude": nonNil(p.Exclude), "cooldown": p.Cooldown,
			"size": p.Size, "mtu": mtu, "gateway": gw, "is_default": p.Default,
			"as_written": asWritten(p.AsWritten, map[string]any{"cooldown": p.Cooldown}),
		}); err != nil {
			return placementErr(err)
		}
		if cur.Kind == kindCounter {
			if _, err := tx.Exec(ctx, sqlSetStripesLast, p.ID, p.layout.LastOrdinal()); err != nil {
				return err
			}
		}
		if err := syncTableRows(ctx, tx, &p, 0); err != nil {
			return err
		}
		// New blocks inherit the tombstones inside them.
		if err := inheritTombstones(ctx, tx, &p); err != nil {
			return err
		}
		if out, err = loadPoolTx(ctx, tx, p.ID); err != nil {
			return err
		}
		return s.insertEvent(ctx, tx, Event{Type: "pool.updated", ClusterID: p.ClusterID, PoolID: p.ID,
			Data: map[string]any{"cidrs": prefixList(p.CIDRs), "exclude": prefixList(p.Exclude), "size": p.Size}})
	})
	return out, err
}

// DeletePool deletes an operator pool. Unless force is set, a pool that still
// holds active addresses is refused, naming how many. Holds are dropped, and
// addresses inside their cooldown stay behind as tombstones (emptyPools).
func (s *Client) DeletePool(ctx context.Context, id string, force bool) error {
	if err := checkPoolID("pool_id", id); err != nil {
		return err
	}
	return s.withTx(ctx, func(tx pgx.Tx) error {
		locked, err := lockPoolsExclusive(ctx, tx, sqlLockPoolsByID, id)
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			// Not there when the lock began: a pool whose creation commits
			// now is not this destroy's to count or delete (its allocations
			// would not wait for the lock this never took).
			return ErrNotFound
		}
		var h ClusterHoldings
		var cluster string
		err = tx.QueryRow(ctx, sqlPoolHoldings, id).Scan(&cluster, &h.Active, &h.Reserved, &h.Cooling)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		if !force && h.Active > 0 {
			return stillHolds(ctx, tx, fmt.Sprintf("pool %q", id), "pool", []string{id}, h.Active)
		}
		if err := s.emptyPools(ctx, tx, []string{id}, force); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, sqlDeletePool, id); err != nil {
			return err
		}
		return s.insertEvent(ctx, tx, Event{Type: "pool.deleted", ClusterID: cluster, PoolID: id,
			Data: map[string]any{"active": h.Active, "reserved": h.Reserved, "cooling": h.Cooling, "forced": force}})
	})
}

// defaultMoveWait is how long a pool made default waits for the pool that
// is the default of its family to let it go: when the flag moves from one
// pool to another, Terraform updates both at once, in either order.
const defaultMoveWait = 10 * time.Second

// errDefaultHeld classifies checkDefault's refusal.
var errDefaultHeld = errors.New("another pool is the default")

// awaitDefaultMove runs fn in a transaction (withTx), and again every
// quarter second for up to defaultMoveWait while it is refused because
// another pool is the default (makeDefault: the pool is to be the default).
func (s *Client) awaitDefaultMove(ctx context.Context, makeDefault bool, fn func(pgx.Tx) error) error {
	deadline := time.Now().Add(defaultMoveWait)
	for {
		err := s.withTx(ctx, fn)
		if !makeDefault || !errors.Is(err, errDefaultHeld) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(defaultMoveWait / 40):
		}
	}
}

// checkDefault: at most one default pool per family in a cluster.
func checkDefault(ctx context.Context, tx pgx.Tx, p *Pool) error {
	if !p.Default {
		return nil
	}
	var other string
	err := tx.QueryRow(ctx, sqlOtherDefaultPool,
		p.ClusterID, p.Family, p.ID).Scan(&other)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	return &InvalidError{Field: "default", Err: errDefaultHeld, Msg: fmt.Sprintf("pool %q is already the default IPv%d pool of cluster %q, "+
		"and did not let the flag go within %s; unset it there (in the same apply, or before)", other, p.Family, p.ClusterID, FormatDuration(defaultMoveWait))}
}
