package engine

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
)

// reserveTx is Reserve inside the caller's transaction.
func (s *Client) reserveTx(ctx context.Context, tx pgx.Tx, pool *Pool, req AllocateRequest, ttl time.Duration) (Allocation, error) {
	if err := lockPoolShared(ctx, tx, pool); err != nil {
		return Allocation{}, err
	}
	held, cooling, err := s.ownerRows(ctx, tx, pool.ClusterID, req.Owner)
	if err != nil {
		return Allocation{}, err
	}
	first := ownerRead{held, cooling}
	if held, err = s.settleHold(ctx, tx, pool, req, held); err != nil {
		return Allocation{}, s.replacedHere(ctx, tx, held, err)
	}
	if cooling, err = s.afterDrop(ctx, tx, pool, req, first, held); err != nil {
		return Allocation{}, err
	}
	if held == nil && req.lossLooked {
		if err := s.lostSinceLook(ctx, tx, pool.ClusterID, req.Owner); err != nil {
			return Allocation{}, err
		}
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
	return a, s.ownerWon(ctx, tx, pool, req, first, err)
}

// replacedHere is err, with OwnerConflictError.Replacing set when the
// owner's active allocation that refused the plan is marked as being
// replaced by a plan of this configuration (read on that refusal only).
func (s *Client) replacedHere(ctx context.Context, tx pgx.Tx, held *Allocation, err error) error {
	var oc *OwnerConflictError
	if held == nil || held.State != StateActive || held.Actor != s.actor || !errors.As(err, &oc) {
		return err
	}
	replacing, _, rerr := s.replacingFor(ctx, tx, *held)
	if rerr != nil {
		return rerr
	}
	oc.Replacing = replacing
	return err
}

// lossFound is reserveTx's answer when the owner holds nothing and has lost
// a hold to tell that the plan's first look did not see: the plan tells it
// (HoldLostError) and takes no hold, as it would have had the look seen it.
type lossFound struct{ l *LostHold }

func (e *lossFound) Error() string {
	return CodeHoldLost + ": the owner's hold on " + e.l.Address.String() + " was lost after the plan's first look"
}

func (e *lossFound) Code() string { return CodeHoldLost }

// lostSinceLook reads the owner's lost hold again, in the transaction that
// found the owner holding nothing after the plan's first look: another
// call that took the owner's expired hold in between committed the loss
// with its take, so this read, later than the one that found no hold,
// sees it (lossFound).
func (s *Client) lostSinceLook(ctx context.Context, tx pgx.Tx, clusterID string, o Owner) error {
	l, err := scanLostHold(tx.QueryRow(ctx, sqlLostHold, lostHoldArgs(clusterID, o)...))
	if err != nil {
		return err
	}
	if l = s.lostByMe(l); s.toReport(l) && !l.ownerTaken {
		return &lossFound{l}
	}
	return nil
}

// reportLostHold records, unless done, that the owner was told its hold was
// lost. It reports nothing (false) when the owner holds an address now, its
// plans showing that one, unless the hold was lost with the owner
// (ownerTaken): the owner holds what another manager took.
func (s *Client) reportLostHold(ctx context.Context, req request, l *LostHold) (bool, error) {
	reported := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var holds bool
		if err := tx.QueryRow(ctx, sqlOwnerHolds, req.Pool.ClusterID, req.Owner.Kind, req.Owner.ID).Scan(&holds); err != nil || (holds && !l.ownerTaken) {
			return err
		}
		reported = true
		if p, err := loadPool(ctx, tx, l.PoolID); err == nil {
			l.Block, _ = p.layout.BlockOf(l.Address)
		} else if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrPoolNotFound) {
			return err
		}
		if l.reported {
			return nil
		}
		return s.insertEvent(ctx, tx, Event{Type: EventHoldLossReported, ClusterID: req.Pool.ClusterID, Address: l.Address,
			Owner: req.Owner, Data: map[string]any{"run": s.planRun, "taken_by": l.TakenBy}})
	})
	return reported, s.mapErr(err)
}

// Reserve takes, or finds again, a short-lived hold on an address for an
// owner: what a plan shows before apply. It is the one hold entry point,
// resolving the pool as Allocate does (an instance's hold comes from the
// pool Allocate would use; a hold never grows a node). The hold is keyed by owner, so
// planning again finds the same one (and extends it). An owner that already
// holds an active address gets that address, unchanged. A hold that expires
// unused is taken like a free address, without cooldown. The lost-hold
// look-up, and the one-statement take of a new hold, ride with the first
// look for the hold, in its round trip: a plan's new hold costs one, shared
// with the concurrent holds of its pool (findHold).
func (s *Client) Reserve(ctx context.Context, req AllocateRequest, ttl time.Duration) (Hold, error) {
	h, err := s.reserveHold(ctx, req, ttl)
	var oc *OwnerConflictError
	if errors.As(err, &oc) && oc.Address != "" && oc.PoolID != "" && !oc.Block.IsValid() {
		// A plan may show what the owner holds (another configuration's
		// hold or allocation), with its block's CIDR as an allocation has
		// it; the refusal is the answer, whatever this read meets.
		if a, perr := netip.ParseAddr(oc.Address); perr == nil {
			held := Allocation{PoolID: oc.PoolID, Address: a}
			if s.fillBlock(ctx, &held) == nil {
				oc.Block = held.Block
			}
		}
	}
	return h, s.givenUp(ctx, err)
}

// reserveHold is Reserve, its failure as the database's.
func (s *Client) reserveHold(ctx context.Context, req AllocateRequest, ttl time.Duration) (Hold, error) {
	r, err := checkRequest(req)
	if err != nil {
		return Hold{}, err
	}
	if ttl <= 0 {
		return Hold{}, invalid("reservation_ttl", "must be positive")
	}
	held, found, looked, taken, tried, err := s.findHold(ctx, r, ttl, true)
	held.Lost = s.lostByMe(held.Lost)
	switch {
	case taken != nil:
		// Taken with the look: the owner held nothing and lost no hold
		// when the take ran. The look, a statement before it, may have
		// found what the owner held until then (released since, its
		// address another owner's): the hold taken is what the owner
		// holds now.
		return Hold{Allocation: taken.Allocation}, nil
	case found:
		held.Lost = s.news(held.Lost)
		return held, nil
	case err != nil:
		return s.ownerTaken(ctx, r, Hold{Lost: held.Lost}, err)
	}
	r.lossLooked = looked
	for {
		if l := held.Lost; s.toReport(l) && !l.ownerTaken {
			// A plan that showed the lost address must fail when applied, and
			// its apply re-plans this owner first: no new hold now. The next
			// plan (of another run) takes one.
			reported, err := s.reportLostHold(ctx, r, l)
			if err != nil {
				return Hold{}, err
			}
			if reported {
				return Hold{Lost: l}, &HoldLostError{Owner: r.Owner, Lost: *l}
			}
		}
		var lf *lossFound
		h := Hold{Lost: held.Lost}
		if h.Allocation, err = s.reserve(ctx, r, ttl, !tried); errors.As(err, &lf) {
			// Lost after the first look: told as if the look had seen it,
			// and planned once more, without that read, if the owner holds
			// an address again (the report tells nothing then).
			held.Lost, tried, r.lossLooked = lf.l, true, false
			continue
		}
		if err != nil {
			if live, ok := s.liveHold(ctx, r, err); ok {
				live.Lost = s.news(h.Lost)
				return live, nil
			}
			return s.ownerTaken(ctx, r, h, err)
		}
		return s.reserved(ctx, r, h, looked), nil
	}
}

// reserved is Reserve's answer with the hold taken: its lost hold read
// after the hold's own transaction when the first look did not run.
func (s *Client) reserved(ctx context.Context, r request, h Hold, looked bool) Hold {
	if !looked && s.outer == nil {
		// After the hold's own transaction: its failure must not fail the hold.
		h.Lost, _ = scanLostHold(s.pool.QueryRow(ctx, sqlLostHold, lostHoldArgs(r.Pool.ClusterID, r.Owner)...))
		h.Lost = s.lostByMe(h.Lost)
	}
	h.Lost = s.news(h.Lost)
	return h
}

// news is l when the loss is news to this run (toReport): a plan that holds
// an address again names the lost one (Hold.Lost, the provider's "Earlier
// Planned Address Was Taken") only until a run was told the loss, not in
// every later plan.
func (s *Client) news(l *LostHold) *LostHold {
	if s.toReport(l) {
		return l
	}
	return nil
}

// liveHold is the owner's live hold, of this configuration, when err says
// that the database refused to renew it: a role that may not write
// (permission_denied), or a read-only server (a plan against a standby or
// during a switchover: see WritesOptional). The hold answers the plan until
// it expires, as it did the plan that took it, so that Terraform's re-plan
// at apply shows the address its plan showed.
func (s *Client) liveHold(ctx context.Context, r request, err error) (Hold, bool) {
	if !WriteRefused(err) {
		return Hold{}, false
	}
	h, found, _, _, _, _ := s.findHold(ctx, r, 0, false)
	return h, found
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
func (s *Client) ownerTaken(ctx context.Context, req request, h Hold, err error) (Hold, error) {
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

// reserve takes or renews the hold: the fast path's one statement (unless
// fast is false: findHold sent it already), else the full path in one
// transaction.
func (s *Client) reserve(ctx context.Context, req request, ttl time.Duration, fast bool) (Allocation, error) {
	if fast && !req.Address.IsValid() {
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
		a, err = s.reserveTx(ctx, tx, pool, req.AllocateRequest, ttl)
		return err
	})
	if err != nil {
		return a, err
	}
	a.Block, _ = pool.layout.BlockOf(a.Address)
	return a, nil
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
	a, err := scanAllocation(s.pool.QueryRow(ctx, sqlMarkReplacement.sql, params{
		"cluster": clusterID, "kind": o.Kind, "owner": o.ID, "actor": s.actor, "ttl": ttl,
		"generation": generation, "origin": s.origin,
	}))
	return a, s.mapErr(err)
}
