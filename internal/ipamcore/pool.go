package ipamcore

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
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
	Default   bool
	CreatedAt time.Time
	UpdatedAt time.Time

	layout *Layout
}

// Pool kinds: how fresh addresses are found.
const (
	kindCounter = "counter" // striped counters over the ordinal space (IPv6)
	kindTable   = "table"   // one row per usable address (IPv4, gaps absent)
	kindBlocks  = "blocks"  // a node's instance blocks: rows per address, whole blocks
)

// querier is what pgx.Tx, *pgx.Conn and *pgxpool.Pool have in common.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (p *Pool) buildLayout() error {
	l, err := newLayout(p.CIDRs, p.Exclude, p.Gateway, p.Kind == kindBlocks)
	if err != nil {
		return err
	}
	p.layout = l
	p.Size = l.Size()
	return nil
}

// insertPool stores a pool and, for counter pools, its stripes: stripe k starts
// at the first allowed ordinal k, k+S, k+2S, ...
func insertPool(ctx context.Context, tx pgx.Tx, p Pool) error {
	if err := p.buildLayout(); err != nil {
		return err
	}
	if p.Exclude == nil {
		p.Exclude = []netip.Prefix{}
	}
	var gw *netip.Prefix
	if p.Gateway.IsValid() {
		g := netip.PrefixFrom(p.Gateway, p.Gateway.BitLen())
		gw = &g
	}
	var mtu *int
	if p.MTU != 0 {
		mtu = &p.MTU
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ipam_pools (id, cluster_id, name, category, family, kind, cidrs, exclude,
			cooldown, size, stripes, mtu, gateway, is_default)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
		p.ID, p.ClusterID, p.Name, p.Category, p.Family, p.Kind, p.CIDRs, p.Exclude,
		durationInterval(p.Cooldown), p.Size, p.Stripes, mtu, gw, p.Default); err != nil {
		return err
	}
	if p.Kind != kindCounter {
		return nil
	}
	rows := make([][]any, p.Stripes)
	for k := range rows {
		rows[k] = []any{p.ID, k, p.layout.NextAllowed(int64(k), int64(p.Stripes)), p.layout.LastOrdinal()}
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"ipam_pool_stripes"}, []string{"pool_id", "stripe", "next_ordinal", "last_ordinal"}, pgx.CopyFromRows(rows))
	return err
}

const poolColumns = `id, cluster_id, name, category, family, kind, cidrs, exclude, cooldown, stripes, mtu, gateway,
	created_at, updated_at, is_default`

func loadPool(ctx context.Context, q querier, id string) (*Pool, error) {
	var p Pool
	var cool pgtype.Interval
	var mtu *int
	var gw *netip.Prefix
	err := q.QueryRow(ctx, `SELECT `+poolColumns+` FROM ipam_pools WHERE id = $1`, id).Scan(
		&p.ID, &p.ClusterID, &p.Name, &p.Category, &p.Family, &p.Kind, &p.CIDRs, &p.Exclude, &cool, &p.Stripes, &mtu, &gw,
		&p.CreatedAt, &p.UpdatedAt, &p.Default)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	p.Cooldown = intervalDuration(cool)
	if mtu != nil {
		p.MTU = *mtu
	}
	if gw != nil {
		p.Gateway = gw.Addr()
	}
	return &p, p.buildLayout()
}
