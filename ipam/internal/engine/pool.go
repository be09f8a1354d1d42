package engine

import (
	"context"
	"errors"
	"net/netip"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Pool is a set of addresses handed out by one allocator: a cluster's node or
// instance pool, or an operator pool (IPv4 add-on, extra IPv6).
type Pool struct {
	ID        string
	ClusterID string
	Name      string
	Category  string
	Family    int
	Kind      string
	CIDRs     []netip.Prefix
	Exclude   []netip.Prefix
	Cooldown  time.Duration
	Stripes   int
	MTU       int
	Gateway   netip.Addr
	Size      int64
	// Default marks the pool a "family = ipv4/ipv6" request of an address set
	// draws from (at most one per family in a cluster).
	Default bool
	// AsWritten keeps the cooldown as its writer spelled it, by attribute
	// name ("cooldown"); a read gives the spelling back.
	AsWritten map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time

	layout *Layout
}

// Pool kinds: how fresh addresses are found.
const (
	kindCounter = "counter" // striped counters over the ordinal space (IPv6)
	kindTable   = "table"   // one row per usable address (IPv4, gaps absent)
	kindBlocks  = "blocks"  // a node's instance blocks: rows per address, whole blocks
	kindParked  = "parked"  // a released block's rows still cooling: nothing allocates here
)

// DefaultStripes is the number of counters per pool (see DESIGN.md).
const DefaultStripes = 32

// MaxTablePoolSize bounds an IPv4 pool: one row is stored per usable address.
const MaxTablePoolSize = 1 << 20

// Ref is the pool's typed reference.
func (p *Pool) Ref() PoolRef { return PoolRef{p.ClusterID, p.Name} }

func (p *Pool) buildLayout() error {
	l, err := newLayout(p.CIDRs, p.Exclude, p.Gateway, p.Kind == kindBlocks || p.Kind == kindParked)
	if err != nil {
		return err
	}
	p.layout = l
	p.Size = l.Size()
	if p.Kind == kindParked {
		p.Size = 0 // nothing is handed out from it: it only keeps cooldowns
	}
	return nil
}

// nullableSettings are the pool's MTU and gateway as their columns hold
// them: NULL when unset.
func (p *Pool) nullableSettings() (mtu *int, gw *netip.Prefix) {
	if p.MTU != 0 {
		mtu = &p.MTU
	}
	if p.Gateway.IsValid() {
		g := netip.PrefixFrom(p.Gateway, p.Gateway.BitLen())
		gw = &g
	}
	return mtu, gw
}

// counterSlots is how many usage counter slots (ipam_pool_counters) a pool of
// this kind gets: as many as the writers that change its count at once, so
// that they do not queue for a slot. The migration that made them uses the
// same numbers.
func counterSlots(kind string) int {
	switch kind {
	case kindBlocks:
		return 4 // one node's instances
	case kindParked:
		return 1 // a released block: nothing becomes active there
	}
	return DefaultStripes
}

// insertPool stores a pool, its usage counter slots and, for counter pools, its stripes: stripe k starts
// at the first allowed ordinal k, k+S, k+2S, ...
func insertPool(ctx context.Context, tx pgx.Tx, p Pool) error {
	if err := p.buildLayout(); err != nil {
		return err
	}
	mtu, gw := p.nullableSettings()
	if _, err := tx.Exec(ctx, sqlInsertPool.sql, params{
		"pool": p.ID, "cluster": p.ClusterID, "name": p.Name, "category": p.Category, "family": p.Family, "kind": p.Kind,
		"cidrs": p.CIDRs, "exclude": nonNil(p.Exclude), "cooldown": p.Cooldown, "size": p.Size,
		"stripes": p.Stripes, "mtu": mtu, "gateway": gw, "is_default": p.Default,
		"as_written": asWritten(p.AsWritten, map[string]any{"cooldown": p.Cooldown}),
	}); err != nil {
		return placementErr(err)
	}
	if _, err := tx.Exec(ctx, sqlInsertCounterSlots, p.ID, counterSlots(p.Kind)); err != nil {
		return err
	}
	if p.Kind != kindCounter {
		return inheritTombstones(ctx, tx, &p)
	}
	rows := make([][]any, p.Stripes)
	for k := range rows {
		rows[k] = []any{p.ID, k, p.layout.NextAllowed(int64(k), int64(p.Stripes)), p.layout.LastOrdinal()}
	}
	if _, err := tx.CopyFrom(ctx, copyStripesTable, copyStripesColumns, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	return inheritTombstones(ctx, tx, &p)
}

// inheritTombstones gives a new pool, or a pool's new blocks, the
// tombstones inside them: each address a destroyed pool or cluster left
// inside its cooldown becomes a cooling row of this pool, with its former
// owner and cooldown, and its tombstone goes (migration 16). Until the
// cooldown ends, the allocator steps over such a row as it does over any
// cooling one, and the database refuses to hand out an address whose
// tombstone a path forgot to inherit. A parked pool inherits nothing: its
// rows are moved in, and nothing allocates from it.
func inheritTombstones(ctx context.Context, tx pgx.Tx, p *Pool) error {
	if p.Kind == kindParked {
		return nil
	}
	if p.layout == nil {
		if err := p.buildLayout(); err != nil {
			return err
		}
	}
	rows, err := tx.Query(ctx, sqlTombstonesIn, p.CIDRs, p.ClusterID)
	if err != nil {
		return err
	}
	addrs, err := pgx.CollectRows(rows, pgx.RowTo[netip.Prefix])
	if err != nil {
		return err
	}
	var at []netip.Prefix
	var ords []int64
	for _, a := range addrs {
		if o, ok := p.layout.Ordinal(a.Addr()); ok && !p.layout.Excluded(o) {
			at, ords = append(at, a), append(ords, o)
		}
	}
	if len(at) == 0 {
		return nil
	}
	_, err = tx.Exec(ctx, sqlInheritTombstones, p.ClusterID, p.ID, at, ords)
	return err
}

func loadPool(ctx context.Context, q querier, id string) (*Pool, error) {
	var p Pool
	var cool pgtype.Interval
	var mtu *int
	var gw *netip.Prefix
	err := q.QueryRow(ctx, sqlLoadPool, id).Scan(
		&p.ID, &p.ClusterID, &p.Name, &p.Category, &p.Family, &p.Kind, &p.CIDRs, &p.Exclude, &cool, &p.Stripes, &mtu, &gw,
		&p.CreatedAt, &p.UpdatedAt, &p.Default, &p.AsWritten)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	if p.Cooldown = intervalDuration(cool); p.Cooldown == 0 {
		p.Cooldown = NoCooldown // zero would read back as DefaultPoolCooldown
	}
	if mtu != nil {
		p.MTU = *mtu
	}
	if gw != nil {
		p.Gateway = gw.Addr()
	}
	return &p, p.buildLayout()
}

// globalBlock reports whether a pool block must be unique across every
// cluster: all IPv6 blocks, and public IPv4 blocks (no private address in
// them). A block is one of these or wholly private; one that mixes the two
// is refused (blockClass).
func globalBlock(b netip.Prefix) bool { return blockClass(b) == classPublic }

// The classes of a pool block (ipam_block_class in the schema, migration 13).
const (
	classPublic  = "public"  // IPv6, or IPv4 without a private address
	classPrivate = "private" // IPv4 wholly inside private space
	classMixed   = "mixed"   // both: refused
)

// blockClass classifies a block as the schema's ipam_block_class does.
func blockClass(b netip.Prefix) string {
	if b.Addr().Is6() {
		return classPublic
	}
	overlaps := false
	for _, special := range privateIPv4 {
		if PrefixContains(special, b) {
			return classPrivate
		}
		overlaps = overlaps || special.Overlaps(b)
	}
	if overlaps {
		return classMixed
	}
	return classPublic
}

// privateIPv4 is the private (RFC 1918), shared (CGNAT), loopback and
// link-local IPv4 space: the schema's ipam_private_ipv4(), which
// TestPrivateIPv4MatchesSchema compares with it.
var privateIPv4 = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("169.254.0.0/16"),
}

// The public blocks of a counter or table pool are rows of ipam_pool_blocks,
// kept by the pool's trigger (migration 13) whatever statement writes the
// pool. Their exclusion constraint refuses a block that overlaps any other
// cluster's or pool's, and their check refuses an IPv6 block outside the
// cluster's prefix: whatever code path writes a pool, two clusters can never
// hand out the same address. (Node block pools lie inside the instance
// prefix, which is itself such a block, and are kept apart by
// ipam_node_blocks.)

// placementErr names a violated placement constraint for the user.
func placementErr(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.ConstraintName {
	case "ipam_pool_blocks_no_overlap":
		return invalid("cidrs", "a block overlaps a block of another pool or cluster (%s); IPv6 and public IPv4 blocks belong to one pool in one cluster", pe.Detail)
	case "ipam_pool_blocks_in_cluster":
		return invalid("cidrs", "an IPv6 block lies outside the cluster's prefix; IPv6 pools must lie inside their own cluster's prefix")
	case "ipam_pools_blocks_unmixed", "ipam_pool_blocks_public":
		return invalid("cidrs", "a block mixes public and private IPv4 addresses; split it so that each block is wholly public or wholly inside %s", prefixList(privateIPv4))
	}
	return err
}

// The locking order (DESIGN.md, "Locks"): cluster row, then pool rows, then a
// node's scaling settings, then stripes, then allocation rows, then usage
// counter slots, then cooling buckets (migration 8). Allocators hold
// their pool's row FOR KEY SHARE until they commit; writers that change what a
// pool may hand out (shrink, exclusions, gateway, block release, pool or
// cluster destroy) take it FOR UPDATE first, so they wait for every allocation
// in flight and none starts until they commit. A node's growth, which only adds
// blocks, takes it FOR NO KEY UPDATE and waits for none (lockNodeForScaling).
// KEY SHARE does not conflict with KEY SHARE or with plain updates, so
// allocators never queue behind each other.

// lockPoolShared takes the allocator's lock on the pool row and reports
// errRetry when the pool changed since p was read (the transaction runs again
// with the new shape) or is gone (it runs again and resolves its pool anew).
func lockPoolShared(ctx context.Context, tx pgx.Tx, p *Pool) error {
	var updated time.Time
	err := tx.QueryRow(ctx, sqlLockPoolKeyShare, p.ID).Scan(&updated)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Deleted since it was resolved (a node's blocks released under an
		// instance's allocation, say): resolve again, which finds the pool
		// the request draws from now, or says what does not exist. A bare
		// not_found would name nothing that is missing.
		return errRetry
	case err != nil:
		return err
	case !updated.Equal(p.UpdatedAt):
		return errRetry
	}
	return nil
}

// lockPoolsExclusive takes the shape writer's lock on pool rows, in id order,
// with one of the sqlLockPools statements. It returns the ids it locked
// (absent pools are skipped).
func lockPoolsExclusive(ctx context.Context, tx pgx.Tx, query string, args ...any) ([]string, error) {
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// nonNil is ps, or an empty list for none (a JSON [] rather than null).
func nonNil(ps []netip.Prefix) []netip.Prefix {
	if ps == nil {
		return []netip.Prefix{}
	}
	return ps
}

// fillBlock sets a.Block to the pool block that holds a.Address.
func (s *Client) fillBlock(ctx context.Context, a *Allocation) error {
	var cidrs []netip.Prefix
	if err := s.pool.QueryRow(ctx, sqlPoolCIDRs, a.PoolID).Scan(&cidrs); err != nil {
		return s.mapErr(err)
	}
	for _, c := range cidrs {
		if c.Contains(a.Address) {
			a.Block = c
		}
	}
	return nil
}

// syncTableRows makes the rows of a table pool match its layout: a free row
// for every usable address that has none, and every row's ordinal set from
// the layout (block order is allocation order), and the pool's reuse mark
// cleared (its ordinals are new). Runs are inserted set-wise with
// generate_series, all of them in one statement: a /12 is not a million
// statements, nor 20,000 runs 20,000 round trips. Only the ordinals from
// from on are written (0: all).
func syncTableRows(ctx context.Context, tx pgx.Tx, p *Pool, from int64) error {
	if p.Kind != kindTable && p.Kind != kindBlocks {
		return nil
	}
	runs := p.layout.Runs()
	runs = runs[sort.Search(len(runs), func(i int) bool { return runs[i].Last >= from }):]
	starts := make([]netip.Prefix, len(runs))
	firsts, lasts := make([]int64, len(runs)), make([]int64, len(runs))
	for i, r := range runs {
		starts[i], firsts[i], lasts[i] = netip.PrefixFrom(r.Start, r.Start.BitLen()), r.First, r.Last
	}
	if len(runs) > 0 {
		if _, err := tx.Exec(ctx, sqlInsertTableRows, p.ClusterID, p.ID, starts, firsts, lasts); err != nil {
			return err
		}
	}
	_, err := tx.Exec(ctx, sqlClearReuseMark, p.ID)
	return err
}

// ownerRows finds, with two index probes in one round trip, the owner's active
// (or reserved) allocation and its most recently released cooling one of
// o's tenant (an owner re-created for another org or env and released again
// keeps an older one of the first).
func (s *Client) ownerRows(ctx context.Context, tx pgx.Tx, clusterID string, o Owner) (held, cooling *Allocation, err error) {
	rows, err := tx.Query(ctx, sqlOwnerRows, clusterID, o.Kind, o.ID, label(o.OrgID), label(o.EnvID))
	if err != nil {
		return nil, nil, err
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Allocation, error) { return scanAllocation(r) })
	if err != nil {
		return nil, nil, err
	}
	for i := range all {
		if all[i].State == StateCooling {
			cooling = &all[i]
		} else {
			held = &all[i]
		}
	}
	return held, cooling, nil
}
