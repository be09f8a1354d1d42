package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Address statuses reported by LookupAddress, beyond the allocation states.
const (
	// StatusExcluded: inside a pool but never handed out (subnet-router
	// anycast, network, broadcast, gateway or an excluded range).
	StatusExcluded = "excluded"
)

// AddressInfo is what LookupAddress knows of an address in one pool.
type AddressInfo struct {
	// Allocation is the address's row; its ID is zero when the address was
	// never handed out. Owner, Actor and the times stay on the row after
	// release, so for a cooling (or long-cooled) address they name the last
	// holder.
	Allocation
	Category string
	// Status is the address's effective state: active, reserved, cooling
	// (inside its cooldown), free (never used, or its hold expired or its
	// cooldown passed) or excluded.
	Status     string
	LastSeenAt time.Time
	// Tombstone: the address is cooling after its pool or cluster was
	// destroyed (ClusterID and PoolID name them, Category is empty); a
	// pool created over it inherits it, with its last holder.
	Tombstone bool
}

// LookupAddress finds an address in the pools of every cluster, or of one
// cluster when clusterID is set, and among the addresses that destroyed
// pools left cooling (AddressInfo.Tombstone). IPv6 cluster prefixes never overlap, nor do
// public IPv4 blocks, but private IPv4 blocks may be reused by several
// clusters, so an address can be found more than once. An address in no pool
// is ErrNotFound, with a message saying whether it is at least inside a
// cluster's prefix.
func (o *Operator) LookupAddress(ctx context.Context, addr netip.Addr, clusterID string) ([]AddressInfo, error) {
	s := o.c
	if !addr.IsValid() || addr.Zone() != "" {
		return nil, invalid("address", "%q is not a plain IP address", addr)
	}
	addr = addr.Unmap()
	if err := checkFilterIDs("cluster_id", clusterID); err != nil {
		return nil, err
	}
	host := netip.PrefixFrom(addr, addr.BitLen())
	var out []AddressInfo
	// One snapshot for its reads: read apart, a pool destroyed after it was
	// found failed the lookup with a bare not_found, or showed its cooling
	// address free.
	err := s.readTx(ctx, true, func(tx pgx.Tx) error {
		out = nil
		rows, err := tx.Query(ctx, sqlPoolsContaining, host, clusterID)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			p, err := loadPool(ctx, tx, id)
			if err != nil {
				return err
			}
			info, err := lookupIn(ctx, tx, p, addr)
			if err != nil {
				return err
			}
			out = append(out, info)
		}
		// Cooling in a pool destroyed since, as ListAllocations lists it.
		if rows, err = tx.Query(ctx, sqlLookupTombstones, host, clusterID); err != nil {
			return err
		}
		buried, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (AddressInfo, error) {
			v, err := scanView(r)
			return AddressInfo{Allocation: v.Allocation, Status: StateCooling, Tombstone: true}, err
		})
		if err != nil {
			return err
		}
		out = append(out, buried...)
		if len(out) > 0 {
			return nil
		}
		var cluster string
		err = tx.QueryRow(ctx, sqlClustersContaining, host, clusterID).Scan(&cluster)
		switch {
		case err == nil:
			return fmt.Errorf("%w: %s is inside the prefix of cluster %q but in none of its pools", ErrNotFound, addr, cluster)
		case errors.Is(err, pgx.ErrNoRows) && clusterID != "":
			return fmt.Errorf("%w: %s is in no pool of cluster %q", ErrNotFound, addr, clusterID)
		case errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("%w: %s is in no pool of any cluster", ErrNotFound, addr)
		}
		return err
	})
	return out, err
}

func lookupIn(ctx context.Context, tx pgx.Tx, p *Pool, addr netip.Addr) (AddressInfo, error) {
	info := AddressInfo{Category: p.Category}
	var status string
	var seen *time.Time
	a, err := scanAllocation(extraRow{tx.QueryRow(ctx, sqlLookupAddress,
		p.ClusterID, netip.PrefixFrom(addr, addr.BitLen())), []any{&seen, &status}})
	switch {
	case errors.Is(err, ErrNotFound):
		// Never handed out: a counter pool's fresh address, or excluded.
		info.ClusterID, info.PoolID, info.Address = p.ClusterID, p.ID, addr
		info.Status = StateFree
		if o, ok := p.layout.Ordinal(addr); ok {
			info.Ordinal = o
			if p.layout.Excluded(o) {
				info.Status = StatusExcluded
			}
		}
	case err != nil:
		return info, err
	default:
		info.Allocation, info.Status = a, status
		if seen != nil {
			info.LastSeenAt = *seen
		}
		if o, ok := p.layout.Ordinal(addr); ok && p.layout.Excluded(o) && status == StateFree {
			info.Status = StatusExcluded
		}
	}
	info.Block, _ = p.layout.BlockOf(addr)
	return info, nil
}

// ClusterIDs lists the clusters that hold addr in their pools, for messages.
func ClusterIDs(infos []AddressInfo) string {
	ids := make([]string, len(infos))
	for i, in := range infos {
		ids[i] = in.ClusterID
	}
	return strings.Join(ids, ", ")
}
