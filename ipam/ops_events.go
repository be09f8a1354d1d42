package ipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// EventReclaimed is written when ipamctl reclaim releases a leaked allocation.
const EventReclaimed = "allocation.reclaimed"

// EventFilter selects events.
type EventFilter struct {
	ClusterID string
	// Types are exact event types ("instance.allocated") or prefixes ending in
	// '*' ("instance.*"); empty matches every type.
	Types []string
	// Since: events at or after this time (on the ipam_events_at index).
	Since time.Time
	// Limit keeps the newest Limit events (0: all).
	Limit int
}

// ListEvents lists the events matching the filter, oldest first.
func (s *Client) ListEvents(ctx context.Context, f EventFilter) ([]Event, error) {
	if err := checkFilterIDs("cluster_id", f.ClusterID); err != nil {
		return nil, err
	}
	if f.Limit < 0 {
		return nil, invalid("limit", "%d is negative: give the number of newest events to keep, or 0 for all", f.Limit)
	}
	exact, prefixes := []string{}, []string{}
	for _, t := range f.Types {
		if err := ValidateEventType(t); err != nil {
			return nil, err
		}
		switch {
		case strings.HasSuffix(t, "*"):
			p := strings.TrimSuffix(t, "*")
			p = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p)
			prefixes = append(prefixes, p+"%")
		default:
			exact = append(exact, t)
		}
	}
	since := f.Since
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	q := sqlListEvents
	if f.Limit > 0 {
		q = sqlListEventsNewest + fmt.Sprintf(sqlLimitFormat, f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, since, f.ClusterID, exact, prefixes)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Event, error) {
		var e Event
		var addr *netip.Prefix
		err := r.Scan(&e.ID, &e.At, &e.Type, &e.ClusterID, &e.PoolID, &e.AllocationID, &e.Generation, &addr,
			&e.Owner.Kind, &e.Owner.ID, &e.Owner.OrgID, &e.Owner.EnvID, &e.Owner.NodeID, &e.Owner.InstanceID, &e.Actor, &e.Data)
		if addr != nil {
			e.Address = addr.Addr()
		}
		e.At = e.At.UTC()
		return e, err
	})
	if err != nil {
		return nil, s.mapErr(err)
	}
	if f.Limit > 0 {
		slices.Reverse(out)
	}
	return out, nil
}

// allocationEventTypes and releaseEventTypes are the event types that hand an
// address to an owner and that take it back, for the cooldown check.
func allocationEventTypes() (alloc, release []string) {
	for _, t := range eventTypes {
		alloc = append(alloc, t.allocated)
		release = append(release, t.released)
	}
	// A plan-time hold hands the address to an owner too; a dropped hold
	// gives it back (at once: it records no reusable time, so it is not judged).
	alloc = append(alloc, "allocation.reserved")
	release = append(release, EventReclaimed, "allocation.hold_dropped")
	slices.Sort(alloc)
	slices.Sort(release)
	return alloc, release
}
