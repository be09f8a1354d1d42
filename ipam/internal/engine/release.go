package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Release moves the owner's active address to cooling, with reusable_at fixed
// now from the pool's cooldown. It carries the allocation's generation: a
// stale release, whose generation has since moved on, is a no-op and reports
// false. With generation 0 it releases whatever is active, if this client's
// manager made it (its actor, and its origin or none); another manager's
// allocation (Terraform's, say, for the scheduler, or another
// configuration's) is refused with an OwnerConflictError naming its holder: a
// release that names no holder never takes another manager's address. The
// generation an allocation returned proves the caller read it, and releases
// it whoever made it.
func (s *Client) Release(ctx context.Context, clusterID string, o Owner, generation int64) (bool, error) {
	if err := checkIDs("cluster_id", clusterID); err != nil {
		return false, err
	}
	if err := ValidateOwner(o); err != nil {
		return false, err
	}
	if generation < 0 {
		return false, invalid("generation", "%d is negative: give an allocation's generation, or 0 for whatever is active", generation)
	}
	if released, ok, err := s.releaseOne(ctx, clusterID, o, generation); ok {
		return released, s.givenUp(ctx, err)
	}
	released := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		err := s.releaseTx(ctx, tx, clusterID, o, generation)
		if errors.Is(err, ErrNotFound) {
			released = false
			return nil
		}
		released = err == nil
		return err
	})
	return released, s.givenUp(ctx, err)
}

// releaseOne is Release in one round trip: the release statement, which
// writes its event, in oneTrip's batch, as the one-statement allocations
// run (in a caller's transaction: in oneInTx's batch). ok is false when the
// full path decides: nothing released without a generation (a no-op, or
// another manager's allocation, which the full path names; in a caller's
// transaction nothing released at all), or a failure that is not a wait
// running into the bounds (the full path runs the transaction again where
// that helps, and names the rest).
func (s *Client) releaseOne(ctx context.Context, clusterID string, o Owner, generation int64) (released, ok bool, err error) {
	args := s.releaseArgs(clusterID, o, generation)
	if s.outer != nil {
		found, err := s.oneInTx(ctx, sqlRelease.sql, []any{args}, func(row pgx.Row) error {
			_, err := scanAllocation(row)
			return err
		})
		return found, found || err != nil, err
	}
	found := false
	err = s.oneTrip(ctx, func(b *pgx.Batch) { b.Queue(sqlRelease.sql, args) }, func(br pgx.BatchResults) error {
		_, err := scanAllocation(br.QueryRow())
		found = err == nil
		if errors.Is(err, ErrNotFound) {
			return nil // nothing of that generation, or of this manager's
		}
		return err
	})
	switch {
	case err == nil && found:
		return true, true, nil
	case err == nil:
		return false, generation != 0, nil
	}
	if werr := s.waitErr(err); werr != nil {
		return false, true, werr
	}
	return false, false, nil
}

// releaseArgs are sqlRelease's parameters.
func (s *Client) releaseArgs(clusterID string, o Owner, generation int64) params {
	return params{"cluster": clusterID, "kind": o.Kind, "owner": o.ID, "generation": generation, "actor": s.actor,
		"event": newID(), "event_type": eventTypes[o.Kind].released}
}

// releaseTx is Release inside the caller's transaction; ErrNotFound when
// there was nothing (of that generation) to release.
func (s *Client) releaseTx(ctx context.Context, tx pgx.Tx, clusterID string, o Owner, generation int64) error {
	_, err := scanAllocation(tx.QueryRow(ctx, sqlRelease.sql, s.releaseArgs(clusterID, o, generation)))
	if errors.Is(err, ErrNotFound) && generation == 0 {
		// Nothing of this manager's: another manager's allocation is a
		// refusal, not a no-op.
		held, herr := scanAllocation(tx.QueryRow(ctx, sqlActiveOfOwner, clusterID, o.Kind, o.ID))
		switch {
		case herr == nil && (held.Actor != s.actor || !s.ownOrigin(held)):
			conflict := ownerConflict(held)
			conflict.Detail = fmt.Sprintf("a release without the allocation's generation releases only this manager's (%s); "+
				"release it from the configuration or system that manages it, with the generation its allocation returned, "+
				"or with ipamctl release --force", s.manager())
			return conflict
		case herr == nil:
			// This manager's allocation, which the release's look-up
			// did not find: it became this manager's since (an adoption
			// by this configuration committed in between). Releasing
			// nothing would leave it held: read again.
			return errRetry
		}
	}
	return err
}
