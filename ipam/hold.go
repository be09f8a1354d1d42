package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

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
				"apply that plan, or wait for its hold to expire, before declaring the owner here",
				held.Origin, held.ReusableAt.UTC().Format(time.RFC3339), s.origin)
			return held, conflict
		}
	}
	if err := s.checkAdoptable(pool, req, *held); err != nil {
		return held, err
	}
	return held, s.checkOrigin(ctx, tx, *held)
}

// ownOrigin reports whether a row is this client's configuration's, or no
// configuration's (ownOriginSQL in Go).
func (s *Client) ownOrigin(a Allocation) bool {
	return a.Origin == "" || a.Origin == s.origin
}

// checkOrigin refuses to adopt an active allocation recorded for another
// origin (another configuration's working directory), unless a plan of this
// one marked it as being replaced.
func (s *Client) checkOrigin(ctx context.Context, tx pgx.Tx, held Allocation) error {
	if held.State != StateActive || s.ownOrigin(held) {
		return nil
	}
	var replacing bool
	if err := tx.QueryRow(ctx, sqlReplacing.sql, sqlReplacing.args(map[string]any{"id": held.ID, "origin": s.origin})...).Scan(&replacing); err != nil || replacing {
		return err
	}
	conflict := ownerConflict(held)
	conflict.Detail = fmt.Sprintf("it was made at %s by the configuration in %q, and this one runs in %q; import it instead of "+
		"declaring it again. If this is that configuration moved (an apply killed and resumed elsewhere), "+
		"set the provider's origin to %q for one apply",
		held.AllocatedAt.UTC().Format(time.RFC3339), held.Origin, s.origin, held.Origin)
	return conflict
}

// reserveTx is Reserve inside the caller's transaction.
func (s *Client) reserveTx(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, ttl time.Duration) (Allocation, error) {
	if err := lockPoolShared(ctx, tx, pool); err != nil {
		return Allocation{}, err
	}
	held, cooling, err := s.ownerRows(ctx, tx, pool.ClusterID, req.Owner)
	if err != nil {
		return Allocation{}, err
	}
	if held, err = s.settleHold(ctx, tx, pool, req, held); err != nil {
		return Allocation{}, err
	}
	switch {
	case held != nil && held.State == StateReserved:
		a, err := scanAllocation(tx.QueryRow(ctx, sqlExtendHold,
			held.ID, held.Generation, durationInterval(ttl)))
		if errors.Is(err, ErrNotFound) {
			err = errRetry
		}
		return a, err
	case held != nil:
		return *held, nil
	}
	a, err := s.take(ctx, tx, pool, req, cooling, ttl)
	return a, s.ownerWon(ctx, tx, pool.ClusterID, req.Owner, err)
}

// dropHold returns a hold to the pool at once, without cooldown: its address
// was never routed. lost: another manager of the owner drops it, which is
// recorded for the hold's manager (EventHoldLost, ownerTaken).
func (s *Client) dropHold(ctx context.Context, tx pgx.Tx, h Allocation, lost bool) error {
	// A cooldown the hold kept (cooling_until, fixed at the address's last
	// release) stays; the hold's own time does not.
	tag, err := tx.Exec(ctx, sqlDropHold, h.ID, h.Generation)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errRetry
	}
	if lost {
		if err := insertEvent(ctx, tx, Event{Type: EventHoldLost, ClusterID: h.ClusterID, PoolID: h.PoolID, AllocationID: h.ID,
			Generation: h.Generation, Address: h.Address, Owner: h.Owner, Actor: s.actor,
			Data: map[string]any{"holder_actor": h.Actor, "holder_origin": h.Origin, "owner_taken": true,
				"taken_by": s.manager()}}); err != nil {
			return err
		}
	}
	return insertEvent(ctx, tx, Event{Type: "allocation.hold_dropped", ClusterID: h.ClusterID, PoolID: h.PoolID,
		AllocationID: h.ID, Generation: h.Generation, Address: h.Address, Owner: h.Owner, Actor: s.actor})
}

// Hold is what Reserve returns: the owner's hold, or the active allocation
// the owner already has, and Lost.
type Hold struct {
	Allocation
	// Lost is the owner's latest plan-time hold that expired and went to
	// another owner within LostHoldWindow, if any: a plan saved with that
	// address cannot be applied any more. It may be the address this hold
	// has again. It only explains a plan, so the look-up is best effort (a
	// failed one leaves it nil), and a Reserve inside a caller's transaction
	// (InTx) does not make it.
	Lost *LostHold
}

// LostHold is an owner's plan-time hold that another owner took.
type LostHold struct {
	Address netip.Addr
	TakenBy string    // the owner that took it, as "<kind> <id>"
	At      time.Time // when it was taken (database time)
	// Block is the pool block the address lies in (as Allocation.Block),
	// when HoldLostError reports it and its pool still has the address.
	Block netip.Prefix
	// poolID is the pool the hold was in.
	poolID string
	// ownerTaken: another manager of the same owner dropped the expired hold
	// and took the owner (TakenBy names that manager); holderActor and
	// holderOrigin are the hold's manager.
	ownerTaken                bool
	holderActor, holderOrigin string
	// reported: a Reserve has said so (HoldLostError), to the plan run
	// reportedRun.
	reported    bool
	reportedRun string
}

// reportLostHold records, unless done, that the owner was told its hold was
// lost. It reports nothing (false) when the owner holds an address now, its
// plans showing that one, unless the hold was lost with the owner
// (ownerTaken): the owner holds what another manager took.
func (s *Client) reportLostHold(ctx context.Context, req AllocateRequest, l *LostHold) (bool, error) {
	reported := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var holds bool
		if err := tx.QueryRow(ctx, sqlOwnerHolds, req.Pool.ClusterID, req.Owner.Kind, req.Owner.ID).Scan(&holds); err != nil || (holds && !l.ownerTaken) {
			return err
		}
		reported = true
		if p, err := loadPool(ctx, tx, l.poolID); err == nil {
			l.Block, _ = p.layout.BlockOf(l.Address)
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrPoolNotFound) {
			return err
		}
		if l.reported {
			return nil
		}
		return insertEvent(ctx, tx, Event{Type: EventHoldLossReported, ClusterID: req.Pool.ClusterID, Address: l.Address,
			Owner: req.Owner, Actor: s.actor, Data: map[string]any{"run": s.planRun, "taken_by": l.TakenBy}})
	})
	return reported, s.mapErr(err)
}

// LostHoldWindow is how far back Reserve looks for a lost hold.
const LostHoldWindow = 24 * time.Hour

// Reserve takes, or finds again, a short-lived hold on an address for an
// owner: what a plan shows before apply. It is the one hold entry point,
// resolving the pool as Allocate does (an instance's hold comes from the
// pool Allocate would use; a hold never grows a node). The hold is keyed by owner, so
// planning again finds the same one (and extends it). An owner that already
// holds an active address gets that address, unchanged. A hold that expires
// unused is taken like a free address, without cooldown. The lost-hold
// look-up rides with the first look for the hold, in its round trip.
func (s *Client) Reserve(ctx context.Context, req AllocateRequest, ttl time.Duration) (Hold, error) {
	if err := checkRequest(req); err != nil {
		return Hold{}, err
	}
	if ttl <= 0 {
		return Hold{}, invalid("reservation_ttl", "must be positive")
	}
	held, found, looked := s.findHold(ctx, req, ttl)
	held.Lost = s.lostByMe(held.Lost)
	if found {
		return held, nil
	}
	if l := held.Lost; s.toReport(l) && !l.ownerTaken {
		// A plan that showed the lost address must fail when applied, and
		// its apply re-plans this owner first: no new hold now. The next
		// plan (of another run) takes one.
		reported, err := s.reportLostHold(ctx, req, l)
		if err != nil {
			return Hold{}, err
		}
		if reported {
			return Hold{Lost: l}, &HoldLostError{Owner: req.Owner, Lost: *l}
		}
	}
	h := Hold{Lost: held.Lost}
	var err error
	if h.Allocation, err = s.reserve(ctx, req, ttl); err != nil {
		return s.ownerTaken(ctx, req, h, err)
	}
	if !looked && s.outer == nil {
		// After the hold's own transaction: its failure must not fail the hold.
		h.Lost, _ = scanLostHold(s.pool.QueryRow(ctx, sqlLostHold, lostHoldArgs(req.Pool.ClusterID, req.Owner)...))
		h.Lost = s.lostByMe(h.Lost)
	}
	return h, nil
}

// toReport: a lost hold not reported yet, or reported to this plan run.
func (s *Client) toReport(l *LostHold) bool {
	return l != nil && (!l.reported || (l.reportedRun != "" && l.reportedRun == s.planRun))
}

// ownerTaken is Reserve's answer when the hold is refused as another
// manager's (owner_conflict): if this manager's own hold of the owner
// expired and that manager took the owner, Hold.Lost names the address the
// earlier plan showed (reported once, as HoldLostError is), so that the
// apply of a saved plan re-plans it unchanged and fails at create with the
// same owner_conflict; otherwise Lost is nil.
func (s *Client) ownerTaken(ctx context.Context, req AllocateRequest, h Hold, err error) (Hold, error) {
	l := h.Lost
	h.Lost = nil
	var oc *OwnerConflictError
	if !errors.As(err, &oc) || !s.toReport(l) || !l.ownerTaken {
		return h, err
	}
	if reported, rerr := s.reportLostHold(ctx, req, l); rerr == nil && reported {
		h.Lost = l
	}
	return h, err
}

// lostByMe is l unless it is a hold another manager took with its owner
// (ownerTaken) that was not this client's manager's: only the
// configuration whose hold it was is told.
func (s *Client) lostByMe(l *LostHold) *LostHold {
	if l != nil && l.ownerTaken && (l.holderActor != s.actor || l.holderOrigin != s.origin) {
		return nil
	}
	return l
}

// manager names this client as a manager of allocations: its actor, and
// its origin when it has one.
func (s *Client) manager() string {
	if s.origin == "" {
		return fmt.Sprintf("actor %q", s.actor)
	}
	return fmt.Sprintf("actor %q in %q", s.actor, s.origin)
}

// reserve takes or renews the hold: the fast path's one statement, else the
// full path in one transaction.
func (s *Client) reserve(ctx context.Context, req AllocateRequest, ttl time.Duration) (Allocation, error) {
	if !req.Address.IsValid() {
		if res, ok, err := s.fastTake(ctx, req, ttl); err != nil || ok {
			return res.Allocation, err
		}
	}
	s.paths.full.Add(1)
	var a Allocation
	var pool *Pool
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if pool, err = s.resolvePool(ctx, tx, req); err != nil {
			return err
		}
		a, err = s.reserveTx(ctx, tx, pool, req, ttl)
		return err
	})
	if err != nil {
		return a, err
	}
	a.Block, _ = pool.layout.BlockOf(a.Address)
	return a, nil
}

// lostHoldArgs are sqlLostHold's parameters for an owner.
func lostHoldArgs(clusterID string, o Owner) []any {
	return []any{clusterID, o.Kind, o.ID, durationInterval(LostHoldWindow)}
}

// scanLostHold scans sqlLostHold's row: nil when there is none.
func scanLostHold(row pgx.Row) (*LostHold, error) {
	var l LostHold
	var p netip.Prefix
	var run *string
	err := row.Scan(&p, &l.TakenBy, &l.At, &l.poolID, &l.ownerTaken, &l.holderActor, &l.holderOrigin, &run)
	if run != nil {
		l.reported, l.reportedRun = true, *run
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.Address = p.Addr()
	return &l, nil
}

// MarkReplacement records that a plan replaces the owner's active allocation
// of this actor, of the given generation (the replaced object's):
// Terraform's create half of a replacement. Until ttl has passed, and while
// nothing else changes the allocation, a create of the same owner by this
// actor takes it over instead of failing with owner_conflict: it keeps the
// address (and a plan shows it), or, asking for another pool or address,
// releases it into cooldown for the owner and takes the new one. The old
// object's destroy carries the older generation and releases nothing. It
// returns ErrNotFound when the owner holds no active allocation of this
// actor and generation.
func (s *Client) MarkReplacement(ctx context.Context, clusterID string, o Owner, generation int64, ttl time.Duration) (Allocation, error) {
	if err := ValidateOwner(o); err != nil {
		return Allocation{}, err
	}
	if err := checkIDs("cluster_id", clusterID); err != nil {
		return Allocation{}, err
	}
	if ttl <= 0 {
		return Allocation{}, invalid("reservation_ttl", "must be positive")
	}
	if generation <= 0 {
		return Allocation{}, invalid("generation", "must be the replaced allocation's generation, a positive number")
	}
	a, err := scanAllocation(s.pool.QueryRow(ctx, sqlMarkReplacement, clusterID, o.Kind, o.ID, s.actor, durationInterval(ttl), generation, s.origin))
	return a, s.mapErr(err)
}
