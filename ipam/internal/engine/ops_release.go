package engine

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// ReleaseRequest names one active allocation for an operator to release:
// by Address, or by OwnerKind and OwnerID (with ClusterID).
type ReleaseRequest struct {
	// ClusterID is the allocation's cluster: required with an owner; with
	// an address, needed only when several clusters reuse that address.
	ClusterID string
	Address   netip.Addr
	OwnerKind string
	OwnerID   string
	// Reason is recorded with the release's event: why it was released.
	Reason string
	// Force releases an allocation that a Terraform state holds: a refresh
	// or an import read it, or a configuration created it. That
	// configuration still declares the owner: its next refresh drops the
	// resource, and its next apply allocates for the owner again, which
	// gets the same address back (its own cooling address comes first).
	Force bool
}

// ReleaseResult is what ReleaseAllocation released.
type ReleaseResult struct {
	Allocation
	// ConfirmedAt is when a Terraform state confirmed the allocation (zero:
	// never): set only on a forced release.
	ConfirmedAt time.Time
	// Forced: a Terraform state held the allocation (it was confirmed, or
	// a configuration created it), and Force released it anyway.
	Forced bool
	// AlreadyReleased: nothing of the address or owner was active, and the
	// allocation named was released before and is cooling (no one has
	// taken the address since): the release did nothing, as a repeated
	// Release does, and Allocation is that released one.
	AlreadyReleased bool
	// Category is the category of the allocation's pool (node, instance,
	// ipv4, ipv6), as a listing shows it; empty when the pool was destroyed.
	Category string
}

// ConfirmedError: an operator's release is refused because a Terraform state
// holds the allocation: a refresh or an import confirmed it, or (Created)
// a configuration created it and its state holds it before its first
// refresh. The configuration that declares its owner still uses it.
// ReleaseRequest.Force overrides.
type ConfirmedError struct {
	Allocation  Allocation
	ConfirmedAt time.Time // zero when Created
	Created     bool
}

func (e *ConfirmedError) Code() string { return CodeConflict }

// Is matches ErrConflict.
func (e *ConfirmedError) Is(target error) bool { return isCode(CodeConflict, target) }

func (e *ConfirmedError) Error() string {
	a := e.Allocation
	held := fmt.Sprintf("a Terraform state confirmed it at %s (a refresh or an import read it)", e.ConfirmedAt.UTC().Format(time.RFC3339))
	if e.Created {
		held = fmt.Sprintf("a Terraform configuration created it at %s and its state holds it (its next refresh confirms it)",
			a.AllocatedAt.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: %s is held by %s %q in cluster %q (actor %q), and %s: releasing it would hand the address to "+
		"another owner while that configuration still uses it. Remove the owner from that configuration and apply, or "+
		"release it anyway with force",
		CodeConflict, a.Address, a.Owner.Kind, a.Owner.ID, a.ClusterID, a.Actor, held)
}

// heldByAPlan says, for a release that found no allocation, what holds the
// address or owner instead: a plan-time hold (" ...", "" when none is
// live). A hold is not an allocation: it goes back to the pool when it
// expires, or becomes one when its plan is applied.
func heldByAPlan(ctx context.Context, tx pgx.Tx, addr *netip.Prefix, req ReleaseRequest) string {
	var at, actor, origin string
	var until time.Time
	if err := tx.QueryRow(ctx, sqlReleaseFindHold, addr, req.ClusterID, req.OwnerKind, req.OwnerID).Scan(&at, &actor, &origin, &until); err != nil {
		return ""
	}
	of := ""
	if origin != "" {
		of = fmt.Sprintf(" in %q", origin)
	}
	return fmt.Sprintf(": a plan-time hold of actor %q%s holds %s until %s, which is not an allocation: it goes back to the pool "+
		"then (ipamctl expire-hold ends it now), or becomes an allocation when that plan is applied", actor, of, at, until.UTC().Format(time.RFC3339))
}

// ReleaseAllocation is an operator's release of one active allocation into
// its pool's cooldown, through the same statement as reclaim, with the
// owner kind's release event carrying the reason (and "forced"). An
// allocation that a Terraform state confirmed is refused with a
// ConfirmedError unless Force is set. The pool's lock is taken first, then
// the row's, as every release takes them. Releasing again what is already
// released (and still cooling) does nothing and says so
// (ReleaseResult.AlreadyReleased); an address or owner with neither is
// ErrNotFound.
func (o *Operator) ReleaseAllocation(ctx context.Context, req ReleaseRequest) (ReleaseResult, error) {
	s := o.c
	addr, err := operatorTarget(req.ClusterID, req.Address, req.OwnerKind, req.OwnerID, req.Reason, "the allocation is released")
	if err != nil {
		return ReleaseResult{}, err
	}
	var res ReleaseResult
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		res = ReleaseResult{}
		rows, err := tx.Query(ctx, sqlReleaseFind, addr, req.ClusterID, req.OwnerKind, req.OwnerID)
		if err != nil {
			return err
		}
		type found struct {
			Allocation
			confirmed *time.Time
			held      bool // a Terraform state holds it (stateHeldSQL)
		}
		fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (found, error) {
			var f found
			a, err := scanAllocation(extraRow{r, []any{&f.confirmed, &f.held}})
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
			return fmt.Errorf("%w: no active allocation of %s%s%s", ErrNotFound, what, inCluster(req.ClusterID),
				heldByAPlan(ctx, tx, addr, req))
		case fs[0].State != StateActive:
			// Nothing active: released before, and still cooling.
			if len(fs) == 2 && fs[0].ClusterID != fs[1].ClusterID {
				return invalid("cluster_id", "%s was released in several clusters (a reused private IPv4 block): name the cluster", what)
			}
			res.Allocation, res.AlreadyReleased = fs[0].Allocation, true
			return nil
		case len(fs) == 2:
			return invalid("cluster_id", "%s is active in several clusters (a reused private IPv4 block): name the cluster", what)
		}
		f := fs[0]
		if _, err := tx.Exec(ctx, sqlLockPoolKeyShare, f.PoolID); err != nil {
			return err
		}
		var same bool
		if err := tx.QueryRow(ctx, sqlReleaseProbeLock, f.ID, f.Generation).Scan(&same, &f.confirmed, &f.held); err != nil {
			return err
		}
		if !same {
			return errRetry // released or handed out again meanwhile: look again
		}
		a, err := scanAllocation(tx.QueryRow(ctx, sqlReclaim, f.ID, f.Generation))
		if errors.Is(err, ErrNotFound) {
			return errRetry
		}
		if err != nil {
			return err
		}
		if f.held {
			if !req.Force {
				// Nothing is written: the rollback undoes the release.
				ce := &ConfirmedError{Allocation: a, Created: f.confirmed == nil}
				if f.confirmed != nil {
					ce.ConfirmedAt = *f.confirmed
				}
				return ce
			}
			res.Forced = true
			if f.confirmed != nil {
				res.ConfirmedAt = *f.confirmed
			}
		}
		res.Allocation = a
		data := map[string]any{"reusable_at": a.ReusableAt.UTC(), "reason": req.Reason,
			"released_by": "operator", "holder_actor": a.Actor}
		if f.held {
			data["forced"] = true
		}
		if f.confirmed != nil {
			data["confirmed_at"] = f.confirmed.UTC()
		}
		return s.insertEvent(ctx, tx, Event{Type: eventTypes[a.Owner.Kind].released, ClusterID: a.ClusterID, PoolID: a.PoolID,
			AllocationID: a.ID, Generation: a.Generation, Address: a.Address, Owner: a.Owner, Data: data})
	})
	if err == nil {
		err = s.pool.QueryRow(ctx, sqlPoolCategory, res.PoolID).Scan(&res.Category)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil // the pool was destroyed: a tombstone has no category
		}
	}
	return res, s.mapErr(err)
}

// checkOwnerKey checks an owner named by kind and id, as ValidateOwner
// checks the owner of an allocation (a set member's id is <set>#<key>).
func checkOwnerKey(kind, id string) error {
	if !slices.Contains(OwnerKinds, kind) {
		return notAKind("owner_kind", kind)
	}
	if kind == OwnerSet {
		set, _, _ := strings.Cut(id, "#")
		return validateSetMember(Owner{Kind: kind, ID: id, SetID: set})
	}
	return checkIDs("owner_id", id)
}

// operatorTarget checks what an operator's release or hold expiry names:
// an address (returned as a host prefix), or an owner kind and id with its
// cluster (nil is returned); and the reason, which says why (why: what it
// says, in the error that asks for it).
func operatorTarget(cluster string, address netip.Addr, kind, id, reason, why string) (*netip.Prefix, error) {
	var addr *netip.Prefix
	switch {
	case reason == "":
		return nil, invalid("reason", "is required: say why %s (it is recorded with the event)", why)
	case address.IsValid() && id != "":
		return nil, invalid("address", "give an address or an owner, not both")
	case address.IsValid():
		p := netip.PrefixFrom(address.Unmap(), address.Unmap().BitLen())
		addr = &p
	case kind == "" || id == "":
		return nil, invalid("owner_id", "give an address, or an owner kind and id")
	case cluster == "":
		return nil, invalid("cluster_id", "is required with an owner kind and id")
	}
	if err := checkFilterIDs("cluster_id", cluster); err != nil {
		return nil, err
	}
	if addr == nil {
		if err := checkOwnerKey(kind, id); err != nil {
			return nil, err
		}
	}
	return addr, nil
}

// unknownCluster is the not_found of an operator's command that names a
// cluster that does not exist (nil when it does, or none is named), so
// that a typo is not answered as if the cluster held nothing.
func unknownCluster(ctx context.Context, tx pgx.Tx, id string) error {
	var exists bool
	if id == "" || tx.QueryRow(ctx, sqlClusterExists, id).Scan(&exists) != nil || exists {
		return nil
	}
	return fmt.Errorf("%w: cluster %q does not exist (`ipamctl usage` lists the clusters)", ErrNotFound, id)
}

func inCluster(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf(" in cluster %q", id)
}
