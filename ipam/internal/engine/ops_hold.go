package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

// HoldRequest names one plan-time hold for an operator to expire: by
// Address, or by OwnerKind and OwnerID (with ClusterID), as a release
// names an allocation.
type HoldRequest struct {
	// ClusterID is the hold's cluster: required with an owner; with an
	// address, needed only when several clusters reuse that address.
	ClusterID string
	Address   netip.Addr
	OwnerKind string
	OwnerID   string
	// Reason is recorded with the event: why the hold was expired.
	Reason string
}

// ExpireHoldResult is the plan-time hold that ExpireHold expired.
type ExpireHoldResult struct {
	// Allocation is the hold as it is now: state reserved, HoldExpired,
	// and reusable at ReusableAt (now, or the end of a cooldown it kept).
	Allocation
	// Until is when the hold would have expired (its reservation_ttl).
	Until time.Time
	// AlreadyExpired: the hold had expired before; nothing was done, and
	// Until is when it expired.
	AlreadyExpired bool
	// Category is the category of the hold's pool (node, instance, ipv4,
	// ipv6), as a listing shows it.
	Category string
}

// ExpireHold is an operator's end of one plan-time hold (ipamctl
// expire-hold): the hold's own time ends now, as if its
// reservation_ttl had passed, and the allocation.hold_expired event records
// the reason. Nothing else changes: what an expired hold means is the
// allocator's rule everywhere (DESIGN.md, "What each operation does, by
// holder"). Another owner may take the address at once, unless the hold kept
// a cooldown (its owner's own cooling address, taken back), and another
// configuration may take the owner; the hold's loss is then recorded for
// the plan that took it, whose apply fails with owner_conflict rather than
// applying another address. Until then that plan's apply still confirms its
// hold, as it would after the hold's expiry. The pool's lock is taken
// first, then the row's, as a release takes them. A hold that has expired
// already is answered with AlreadyExpired; an address or owner with no hold
// is ErrNotFound, which names an active allocation when there is one.
func (o *Operator) ExpireHold(ctx context.Context, req HoldRequest) (ExpireHoldResult, error) {
	s := o.c
	addr, err := operatorTarget(req.ClusterID, req.Address, req.OwnerKind, req.OwnerID, req.Reason, "the hold is expired")
	if err != nil {
		return ExpireHoldResult{}, err
	}
	var res ExpireHoldResult
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		res = ExpireHoldResult{}
		rows, err := tx.Query(ctx, sqlHoldFind, addr, req.ClusterID, req.OwnerKind, req.OwnerID)
		if err != nil {
			return err
		}
		type found struct {
			Allocation
			until time.Time
		}
		fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
			var f found
			a, err := scanAllocation(extraRow{r, []any{&f.until}})
			f.Allocation = a
			return f, err
		})
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%s %q", req.OwnerKind, req.OwnerID)
		if addr != nil {
			what = req.Address.String()
		}
		switch {
		case len(fs) == 0:
			if err := unknownCluster(ctx, tx, req.ClusterID); err != nil {
				return err
			}
			return fmt.Errorf("%w: no plan-time hold of %s%s%s", ErrNotFound, what, inCluster(req.ClusterID), activeInstead(ctx, tx, addr, req))
		case len(fs) == 2 && fs[0].ClusterID != fs[1].ClusterID && !fs[1].HoldExpired:
			return invalid("cluster_id", "%s is held in several clusters (a reused private IPv4 block): name the cluster", what)
		case fs[0].HoldExpired:
			res.Allocation, res.Until, res.AlreadyExpired = fs[0].Allocation, fs[0].until, true
			return nil
		}
		f := fs[0]
		if _, err := tx.Exec(ctx, sqlLockPoolKeyShare, f.PoolID); err != nil {
			return err
		}
		a, err := scanAllocation(tx.QueryRow(ctx, sqlExpireHold, f.ID, f.Generation))
		if errors.Is(err, ErrNotFound) {
			return errRetry // confirmed, dropped or taken meanwhile: look again
		}
		if err != nil {
			return err
		}
		res.Allocation, res.Until = a, f.until
		return s.insertEvent(ctx, tx, Event{Type: EventHoldExpired, ClusterID: a.ClusterID, PoolID: a.PoolID,
			AllocationID: a.ID, Generation: a.Generation, Address: a.Address, Owner: a.Owner,
			Data: map[string]any{"reason": req.Reason, "expired_by": "operator", "holder_actor": a.Actor,
				"holder_origin": a.Origin, "reserved_until": f.until.UTC(), "reusable_at": a.ReusableAt.UTC()}})
	})
	if err == nil {
		err = s.pool.QueryRow(ctx, sqlPoolCategory, res.PoolID).Scan(&res.Category)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // the pool was destroyed since: it has no category
		}
	}
	return res, s.mapErr(err)
}

// activeInstead says, for a hold expiry that found no hold, what the
// address or owner has instead: an active allocation (" ...", "" when
// none), which an operator releases rather than expires.
func activeInstead(ctx context.Context, tx pgx.Tx, addr *netip.Prefix, req HoldRequest) string {
	rows, err := tx.Query(ctx, sqlReleaseFind, addr, req.ClusterID, req.OwnerKind, req.OwnerID)
	if err != nil {
		return ""
	}
	defer rows.Close()
	if !rows.Next() {
		return ""
	}
	a, err := scanAllocation(extraRow{rows, []any{new(*time.Time), new(bool)}})
	if err != nil || a.State != StateActive {
		return ""
	}
	return fmt.Sprintf(": %s is the active allocation of %s %q (a plan's hold becomes one when its plan is applied); "+
		"ipamctl release releases an allocation", a.Address, a.Owner.Kind, a.Owner.ID)
}
