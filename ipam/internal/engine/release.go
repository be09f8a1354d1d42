package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

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
	return released, err
}

// releaseTx is Release inside the caller's transaction; ErrNotFound when
// there was nothing (of that generation) to release.
func (s *Client) releaseTx(ctx context.Context, tx pgx.Tx, clusterID string, o Owner, generation int64) error {
	a, err := scanAllocation(tx.QueryRow(ctx, sqlRelease.sql, params{
		"cluster": clusterID, "kind": o.Kind, "owner": o.ID, "generation": generation, "actor": s.actor}))
	if errors.Is(err, ErrNotFound) && generation == 0 {
		// Nothing of this manager's: another manager's allocation is a
		// refusal, not a no-op.
		held, herr := scanAllocation(tx.QueryRow(ctx, sqlActiveOfOwner, clusterID, o.Kind, o.ID))
		if herr == nil && (held.Actor != s.actor || !s.ownOrigin(held)) {
			conflict := ownerConflict(held)
			conflict.Detail = fmt.Sprintf("a release without the allocation's generation releases only this manager's (%s); "+
				"release it from the configuration or system that manages it, with the generation its allocation returned, "+
				"or with ipamctl release --force", s.manager())
			return conflict
		}
	}
	if err != nil {
		return err
	}
	return s.insertEvent(ctx, tx, Event{Type: eventTypes[o.Kind].released, ClusterID: a.ClusterID, PoolID: a.PoolID,
		AllocationID: a.ID, Generation: a.Generation, Address: a.Address, Owner: a.Owner,
		Data: map[string]any{"reusable_at": a.ReusableAt.UTC().Format(time.RFC3339)}})
}
