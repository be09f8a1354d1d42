package engine

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// GetActive returns the owner's active allocation, or ErrNotFound. It is what
// a Terraform refresh reads, so it also records that the allocation was seen:
// at most once an hour per allocation, so that plans stay cheap, and never
// failing the read (a read-only role simply does not record).
func (s *Client) GetActive(ctx context.Context, clusterID, ownerKind, ownerID string) (Allocation, error) {
	var a Allocation
	if err := checkIDs("cluster_id", clusterID); err != nil {
		return a, err
	}
	if !slices.Contains(OwnerKinds, ownerKind) {
		return a, notAKind("owner_kind", ownerKind)
	}
	if ownerKind == OwnerSet {
		// A member's id is "<set id>#<key>".
		set, _, _ := strings.Cut(ownerID, "#")
		if err := validateSetMember(Owner{Kind: OwnerSet, ID: ownerID, SetID: set}); err != nil {
			return a, err
		}
	} else if err := checkIDs("owner_id", ownerID); err != nil {
		return a, err
	}
	var stale bool
	var cidrs []netip.Prefix
	row := s.pool.QueryRow(ctx, sqlGetActive, clusterID, ownerKind, ownerID)
	a, err := scanAllocation(extraRow{row, []any{&stale, &cidrs}})
	if err != nil {
		return a, s.mapErr(err)
	}
	if stale && !s.peek {
		// Recorded before the read is answered: an operator's reclaim of
		// stale allocations checks the time under the row's lock. When the
		// mark finds the allocation no longer active (a reclaim released it
		// after the read), the read is answered again, so that a refresh
		// never reports an address its owner has just lost (found by the
		// interleaving explorer). A failed mark (a read-only role) changes
		// nothing.
		if tag, err := s.pool.Exec(ctx, sqlConfirmSeen, a.ID, a.Generation); err == nil && tag.RowsAffected() == 0 {
			row := s.pool.QueryRow(ctx, sqlGetActive, clusterID, ownerKind, ownerID)
			if a, err = scanAllocation(extraRow{row, []any{&stale, &cidrs}}); err != nil {
				return a, s.mapErr(err)
			}
		}
	}
	for _, c := range cidrs {
		if c.Contains(a.Address) {
			a.Block = c
		}
	}
	return a, nil
}

// FindActiveByAddress returns the active allocation of an address, in
// whichever cluster holds it; ambiguous when two clusters (private IPv4 pools)
// hold it.
func (s *Client) FindActiveByAddress(ctx context.Context, addr netip.Addr) (Allocation, error) {
	if err := checkAddr("address", addr, 0); err != nil {
		return Allocation{}, err
	}
	rows, err := s.pool.Query(ctx, sqlActiveByAddress,
		netip.PrefixFrom(addr, addr.BitLen()))
	if err != nil {
		return Allocation{}, s.mapErr(err)
	}
	all, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Allocation, error) { return scanAllocation(r) })
	switch {
	case err != nil:
		return Allocation{}, s.mapErr(err)
	case len(all) == 0:
		return Allocation{}, ErrNotFound
	case len(all) > 1:
		return Allocation{}, &ConflictError{Msg: fmt.Sprintf("%s is active in clusters %q and %q; import by id instead", addr, all[0].ClusterID, all[1].ClusterID)}
	}
	return all[0], s.fillBlock(ctx, &all[0])
}
