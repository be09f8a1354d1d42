package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
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
	var block *netip.Prefix
	err := s.refreshRead(!s.peek, sqlGetActiveSeen, sqlGetActive, func(sql string) (lost bool, err error) {
		a, err = scanAllocation(extraRow{s.pool.QueryRow(ctx, sql, clusterID, ownerKind, ownerID), []any{&lost, &block}})
		return lost, err
	})
	if errors.Is(err, ErrNotFound) {
		err = fmt.Errorf("%w: %s %q holds no active allocation in cluster %q", ErrNotFound, ownerKind, ownerID, clusterID)
	}
	if err != nil {
		return a, s.mapErr(err)
	}
	return withBlock(a, block), nil
}

// refreshRead runs a refresh's read: seen, which records the refresh where
// it is due, when record is set and the role may write, else plain. read
// runs one of the two and says whether a record found a row gone. plain
// runs again when the record was refused (see recordRefused), and when it
// found a row gone: an operator's reclaim of stale allocations released it
// after the statement's snapshot, and a refresh answers what holds now,
// never an address its owner has just lost (found by the interleaving
// explorer).
func (s *Client) refreshRead(record bool, seen, plain string, read func(sql string) (lost bool, err error)) error {
	if !record || s.noRecord.Load() {
		_, err := read(plain)
		return err
	}
	lost, err := read(seen)
	if s.recordRefused(err) || (err == nil && lost) {
		_, err = read(plain)
	}
	return err
}

// withBlock sets a's Block to block (blockOfA: nil when none holds it).
func withBlock(a Allocation, block *netip.Prefix) Allocation {
	if block != nil {
		a.Block = *block
	}
	return a
}

// recordRefused reports whether a refresh's record was due and refused
// because it writes: the role may not write (the client's refreshes only
// read from then on), or the server is read-only. The refresh reads without
// it.
func (s *Client) recordRefused(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || (pe.Code != pgerrcode.InsufficientPrivilege && pe.Code != pgerrcode.ReadOnlySQLTransaction) {
		return false
	}
	if pe.Code == pgerrcode.InsufficientPrivilege {
		s.noRecord.Store(true)
	}
	return true
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
